"""``python -m bench loss``: every scheme of the time-to-accuracy harness at 0, 1, 5 and
10 % loss on a fabric link: does it complete, with exact sums?

Each run is the harness's own (``experiments/train.py``, :func:`run_one`): the digits
CNN, 4 training hosts, a short run (1 epoch of ``--steps`` steps), through each scheme's
agents and P4 programs. Only the network differs from ``gradctl train``: the loss sits on
a link between two forwarding elements, not on a host's own link, and each scheme's run
is compared with its own lossless run of the same seed.

Where the loss goes (both directions of the link where the link has two switch ends):

========================= ================================= =====================================
schemes                   network                           lossy link
========================= ================================= =====================================
gloo, ps, ina, ring, ndn  ``linear:2,3``: PS h1, h2, h3 on  s1:4 <-> s2:4, the only switch-to-
                          s1, h4, h5 on s2                  switch link (P4 ``link_loss``)
bml                       BCube(2, 2) (no switch-to-switch  both ports of the level-1 switch s4
                          link: servers relay)              (h2 <-> h4, relayed level-1 traffic)
token                     LAN of 4 P4 NICs                  nic1:2 <-> lan:1 (NIC to LAN switch;
                                                            ``link_emulation.p4``)
differentiated            the star its technique needs      s1's port to the PS, the congested
                          (one switch, host links only)     port every gradient block crosses
========================= ================================= =====================================

Exact: the run completed, every rank ended with the same weights, and those weights are
bit-identical to the same scheme's lossless run of the same seed (so every step applied
the same sum; the fixed-point schemes' sums are exact integers, gloo's float ring has a
fixed order). differentiated zero-fills the unreliable blocks it misses (by design) and
token (with the harness's cutoff 1.0) counts fragments that were incomplete when a batch
closed (0 since the NICs NACK lost fragments and the read-out repairs the rest:
docs/token.md, "Loss recovery"; token is held to the exact-sum bar). Retransmissions: the
agents' own (INA/PS workers, NDN Interests, differentiated, token TOKEN re-sends and
re-sent GRAD fragments) and TCP's (the hosts'
``RetransSegs``) for the TCP schemes. Dropped: the packets the emulated loss dropped.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.table import Table

from controller.output import TableConsole
from experiments.runner import log as _log
from wire.argtypes import Parser, count, described, listed, nonnegative, positive, probability

RATES = (0.0, 0.01, 0.05, 0.10)
SCHEMES = ("ps", "ring", "ina", "ndn", "bml", "token", "differentiated", "gloo")
FABRIC_TOPO = "linear:2,3"  # PS h1 + workers h2, h3 on s1; h4, h5 on s2
STAR_SCHEMES = ("differentiated", "bml", "token")  # planned on the default star (own networks)

console = TableConsole()


@dataclass
class Cell:
    """One (scheme, loss rate) over the seeds."""

    scheme: str
    rate: float
    seeds: list[int] = field(default_factory=list)
    completed: int = 0
    exact: int = 0  # runs whose final weights equal the lossless run's
    identical: int = 0  # runs whose ranks ended identical
    times: list[float] = field(default_factory=list)  # training seconds of completed runs
    retrans: list[int] = field(default_factory=list)  # the agents' retransmissions
    tcp_retrans: list[int] = field(default_factory=list)
    dropped: list[int] = field(default_factory=list)  # packets the emulated loss dropped
    # ina/ps: per run, the workers' re-sends by reason and the PS's NACKs, flushes and
    # RESULTs sent again (docs/ina.md, "Loss recovery")
    resends: list[dict[str, int]] = field(default_factory=list)
    approx: list[str] = field(default_factory=list)  # zero-filled / cut-off reports
    errors: list[str] = field(default_factory=list)


def harness_args(scheme: str, target: str, steps: int, max_time: float, bw: float,
                 extra: list[str] | None = None) -> argparse.Namespace:
    """The harness's options for a short run of ``scheme`` (``extra``: more of them,
    e.g. ``--slow h4=2``)."""
    from experiments.train import build_parser

    topo = [] if scheme in STAR_SCHEMES else ["--topo", FABRIC_TOPO]
    return build_parser().parse_args([
        "--scheme", scheme, "--reference", scheme, "--target", target, "--workers", "4",
        "--epochs", "1", "--max-steps", str(steps), "--eval-every", str(steps), "--seeds", "1",
        "--max-time", repr(max_time), "--bw", repr(bw), "--out-dir", "/tmp", *topo,
        *(extra or [])])


def lossy_link(scheme: str, setting: Any) -> tuple[str, list[tuple[str, int]]]:
    """(label, P4 egress ports) of the scheme's lossy link (the machines here have no
    netem: the loss is the programs' ``link_loss``)."""
    topo = setting.topo
    if scheme == "token":
        nic, lan = "nic1", topo.switches("lan")[0]
        return f"{nic}:{topo.port(nic, lan)}<->{lan}:{topo.port(lan, nic)} (NIC-LAN)", \
            [(nic, topo.port(nic, lan)), (lan, topo.port(lan, nic))]
    if scheme == "bml":
        s = topo.switches()[-1]  # a level-1 switch of BCube(2, 2)
        ports = sorted(topo.ports(s))
        return f"{s}:{','.join(map(str, ports))} (level-1 switch)", [(s, p) for p in ports]
    if scheme == "differentiated":
        s = topo.iface(setting.ps)["switch"]
        p = topo.port(s, setting.ps)
        return f"{s}:{p} (star: port to the PS)", [(s, p)]
    sw = topo.switches()
    a, b = sw[0], sw[1]
    pa, pb = topo.port(a, b), topo.port(b, a)
    return f"{a}:{pa}<->{b}:{pb} (fabric)", [(a, pa), (b, pb)]


def programs_of(scheme: str, topo: Any, ina: Any = None) -> dict[str, Any]:
    """The program every switch of the scheme's network runs (for reading its counters)."""
    from controller.p4runtime import REPO_ROOT, Program

    build = REPO_ROOT / "p4src" / "build"
    base = Program.load(build / ("ndn.json" if scheme == "ndn" else "forward.json"))
    progs = {s: base for s in topo.switches()}
    if scheme == "token":
        from controller.token import TokenDeployment

        progs = TokenDeployment(topo, {}).programs
    if ina is not None:
        progs.update(ina.programs)
    return progs


def p4_drops(net: Any, topo: Any, ports: list[tuple[str, int]], programs: dict[str, Any]) -> int | None:
    """Packets the P4 ``link_loss`` dropped on ``ports`` so far (None if unreadable)."""
    import asyncio

    from controller.deploy import DeployError, Deployment

    if not ports:
        return None
    switches = sorted({s for s, _ in ports})

    async def read() -> dict[str, dict[int, int]]:
        async with Deployment(topo, net.grpc_addresses(), programs, set_pipeline=False,
                              timeout=10.0) as dep:
            return await dep.link_drops(switches)

    try:
        c = asyncio.run(read())
    except DeployError as e:
        _log(f"link drops unreadable: {e}")
        return None
    return sum(c[s].get(p, 0) for s, p in ports)


def tcp_retrans(net: Any, hosts: list[str]) -> int:
    """TCP segments retransmitted by ``hosts`` (their namespaces' RetransSegs)."""
    total = 0
    for h in hosts:
        lines = [ln.split() for ln in net.host(h).cmd("cat /proc/net/snmp").splitlines() if ln.startswith("Tcp:")]
        if len(lines) >= 2 and "RetransSegs" in lines[0]:
            total += int(lines[1][lines[0].index("RetransSegs")])
    return total


def approximation(scheme: str, d: Path) -> str:
    """What a tolerant scheme's run left out: differentiated's zero-filled blocks, token's
    incomplete fragments (and nodes declared lost); '' for the others."""
    try:
        if scheme == "differentiated":
            r = json.loads((d / "differentiated.json").read_text())
            return f"{r['zero_filled_blocks']}/{r['blocks_total']} blocks zero-filled"
        if scheme == "token":
            r = json.loads((d / "token.json").read_text())
            st = [s.get("stats", {}) for s in r["summaries"].values() if s]
            inc = sum(int(s.get("incomplete_frags", 0)) for s in st)
            lost = sum(int(s.get("lost_declared", 0)) for s in st)
            return f"{inc} frags incomplete" + (f", {lost} nodes lost" if lost else "")
    except (OSError, ValueError, KeyError):
        return "report missing"
    return ""


def sweep(scheme: str, rates: list[float], seeds: list[int], target: str, steps: int,
          max_time: float, bw: float, out: Path,
          extra: list[str] | None = None) -> tuple[str, list[Cell]]:
    """Every rate x seed of one scheme on one network; the lossy link's label and a cell
    per rate (rate 0 first: the lossless runs are the reference)."""
    from controller.deploy import deploy
    from controller.ina import InaDeployment, InaJob
    from experiments import train as h
    from experiments.ina import switch_neighbors
    from experiments.runner import prepare_hosts
    from topologies.network import Network

    args = harness_args(scheme, target, steps, max_time, bw, extra)
    plan = h.make_plan(args)
    setting = plan.settings[scheme]
    label, ports = lossy_link(scheme, setting)
    job = None
    if scheme in ("ina", "ps"):
        job = InaJob.plan(plan.topo, plan.ps, plan.workers, 0, 1000.0, plan.parameters,
                          aggregate=scheme == "ina")
    rates = sorted(set(rates) | {0.0})
    cells: list[Cell] = []
    ref: dict[int, str] = {}
    with Network(setting.topo, target=target, log=_log) as net:
        if setting.ps is not None:
            switch_neighbors(net, setting.topo, job.aggregating_switches if job else [])
        prepare_hosts(net, setting.workers)
        hosts = [*setting.workers, *([setting.ps] if setting.ps else [])]
        ina = None
        for i, rate in enumerate(rates):
            loss = {p: rate for p in ports}
            plan_l = dataclasses.replace(plan, loss=loss)
            cell = Cell(scheme, rate, list(seeds))
            for seed in seeds:
                # a fresh pipeline every run (token's reloads it: drop counters reset)
                if scheme in h.PLUGINS:
                    h._plugin(scheme).deploy(net, setting, args, plan_l)
                elif job is not None:
                    ina = InaDeployment(setting.topo, net.grpc_addresses(), [job], loss=loss)
                    ina.deploy()
                else:
                    deploy(setting.topo, net.grpc_addresses(), loss=loss)
                progs = programs_of(scheme, setting.topo, ina)
                d0 = p4_drops(net, setting.topo, ports, progs)
                t0 = tcp_retrans(net, hosts)
                _log(f"loss {scheme} {rate:.0%} seed {seed} on {label} ...")
                rec = h.run_one(net, args, plan_l, scheme, seed, job, out / f"{scheme}-{rate:g}",
                                29500 + (i * 10 + seed) % 100)
                d = out / f"{scheme}-{rate:g}" / f"{scheme}-seed{seed}"
                cell.tcp_retrans.append(tcp_retrans(net, hosts) - t0)
                d1 = p4_drops(net, setting.topo, ports, progs)
                dropped = None if d0 is None or d1 is None else d1 - d0
                if dropped is not None:
                    cell.dropped.append(dropped)
                if rate == 0.0 and rec.ok:
                    ref[seed] = rec.final_weights
                if rec.ok:
                    cell.completed += 1
                    cell.times.append(rec.train_s)
                    cell.identical += rec.models_identical
                    cell.exact += bool(rec.final_weights) and rec.final_weights == ref.get(seed)
                else:
                    cell.errors.append(rec.error[:120])
                cell.retrans.append(rec.retransmissions)
                if rec.resends:
                    cell.resends.append(dict(rec.resends))
                a = approximation(scheme, d)
                if a:
                    cell.approx.append(a)
                if ina is not None and scheme == "ina":  # what the aggregators did (takeovers)
                    ev = ina.read_counters(list(ina.aggregators), [])
                    _log(f"loss {scheme} {rate:.0%} seed {seed}: switch counters "
                         + "; ".join(f"{s}: " + ", ".join(f"{k}={v}" for k, v in c.items() if v)
                                     for s, c in ev.items()))
                _log(f"loss {scheme} {rate:.0%} seed {seed}: ok={rec.ok} identical={rec.models_identical} "
                     f"weights={rec.final_weights} (lossless {ref.get(seed)}) {a} "
                     f"retrans={rec.retransmissions} tcp={cell.tcp_retrans[-1]} dropped={dropped} "
                     f"{rec.error}")
            cells.append(cell)
    return label, cells


def _mean(xs: list[float] | list[int], spec: str) -> str:
    return f"{sum(xs) / len(xs):{spec}}" if xs else "-"


def _times(xs: list[float]) -> str:
    """Mean and 95 % interval (Student t) of a cell's times."""
    from experiments.stats import format_interval, mean_ci

    return format_interval(mean_ci(xs)) if xs else "-"


def _by_reason(runs: list[dict[str, int]]) -> str:
    """INA/PS re-sends by reason, means over the runs: the workers' (GRADs re-sent on a
    NACK, requests on evidence, the tail-loss probe's, requests on the timer), then the
    PS's (NACKs, flushes, RESULTs sent again)."""
    if not runs:
        return "-"
    keys = (("resend_nack", "request_fast", "request_probe", "request_timer"),
            ("nacks_sent", "flushes_sent", "result_resends"))
    return "; ".join(" / ".join(_mean([r.get(k, 0) for r in runs], ".0f") for k in ks)
                     for ks in keys)


def table(results: dict[str, tuple[str, list[Cell]]], title: str) -> Table:
    """The rich table: per scheme x loss, completed, exact (or what was approximated),
    time, retransmissions, drops."""
    t = Table(title=title)
    for col in ("scheme", "lossy link", "loss", "completed", "exact", "zero-filled / cut off",
                "train s", "agent retrans", "INA: nack / fast / probe / timer; PS nack / flush / RESULT",
                "TCP retrans", "dropped", "error"):
        t.add_column(col, justify="left" if col in ("scheme", "lossy link", "zero-filled / cut off", "error")
                     else "right")
    for label, cells in results.values():
        for c in cells:
            n = len(c.seeds)
            exact = f"{c.exact}/{n}"
            if c.scheme == "differentiated":  # zero-fills by design, even lossless (congestion)
                exact = "n/a (zero-fills)"
            t.add_row(c.scheme, label, f"{c.rate:.0%}", f"{c.completed}/{n}", exact,
                      "; ".join(c.approx) or "-", _times(c.times), _mean(c.retrans, ".0f"),
                      _by_reason(c.resends), _mean(c.tcp_retrans, ".0f"), _mean(c.dropped, ".0f"), "; ".join(c.errors)[:80] or "")
    return t


def main(argv: list[str] | None = None) -> int:
    """Run the sweep (see the module doc); 0 when every run completed and every
    exact-sum scheme stayed exact."""
    from targets.launch import resolve_target

    p = Parser(prog="python -m bench loss", description=described(__doc__))
    p.add_argument("--schemes", default=",".join(SCHEMES),
                   help="the harness's schemes, comma-separated (default " + ",".join(SCHEMES) + ")")
    p.add_argument("--rates", type=listed(probability), default=list(RATES),
                   help="loss rates, fractions (default " + ",".join(f"{r:g}" for r in RATES) + ")")
    p.add_argument("--seeds", type=count, default=2, help="seeds per cell (default 2)")
    p.add_argument("--steps", type=count, default=6, help="training steps per run (1 epoch)")
    p.add_argument("--bw", type=positive, default=20.0, help="link rate, Mbit/s (default 20)")
    p.add_argument("--max-time", type=positive, default=90.0, help="bound on each run")
    p.add_argument("--target", choices=("auto", "embedded", "bmv2"), default=None)
    p.add_argument("--out-dir", default="results")
    p.add_argument("--show", metavar="DIR", help="print the table of an earlier sweep (its cells.json)")
    p.add_argument("--slow", action="append", default=[], metavar="HOST=F",
                   help="stragglers: HOST computes F times slower (the harness's --slow; "
                   "repeatable; with --rates 0: what a slow rank costs each scheme)")
    p.add_argument("--compute-time", type=nonnegative, default=0.0, metavar="S",
                   help="fix compute per batch at S seconds (the harness's --compute-time; "
                   "0: real)")
    a = p.parse_args(sys.argv[1:] if argv is None else argv)
    if a.show and not (Path(a.show) / "cells.json").is_file():
        p.error(f"argument --show: no cells.json in {a.show}")
    if a.show:
        saved = json.loads((Path(a.show) / "cells.json").read_text())
        res = {s: (v["link"], [Cell(**c) for c in v["cells"]]) for s, v in saved.items() if s != "title"}
        console.print(table(res, saved.get("title", f"Loss sweep {a.show}")))
        return 0
    from experiments import train as h
    from experiments.harness_records import HarnessError

    target = resolve_target(a.target)
    schemes = [s for s in a.schemes.split(",") if s]
    rates = a.rates
    seeds = list(range(a.seeds))
    extra = [x for spec in a.slow for x in ("--slow", spec)]
    if a.compute_time:
        extra += ["--compute-time", repr(a.compute_time)]
    for s in schemes:  # the harness's own checks (schemes, --slow ...), before anything starts
        try:
            h.make_plan(harness_args(s, target, a.steps, a.max_time, a.bw, extra))
        except HarnessError as e:
            p.error(str(e))
    out = Path(a.out_dir).resolve() / time.strftime("loss-%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, tuple[str, list[Cell]]] = {}
    t0 = time.monotonic()
    for s in schemes:
        results[s] = sweep(s, rates, seeds, target, a.steps, a.max_time, a.bw, out, extra)
    title = (f"Loss on a fabric link: digits CNN, 4 workers, {a.bw:g} Mbit/s, 1 epoch of {a.steps} steps, "
             f"{len(seeds)} seed(s), {target} target{' '.join(['', *extra])} (mean over seeds, "
             f"95 % interval; {time.monotonic() - t0:.0f} s)")
    tab = table(results, title)
    console.save_to(out)  # the whole table: out/tables.txt, tables.json, CSV
    console.print(tab)
    saved: dict[str, Any] = {"title": title}
    saved.update({s: {"link": lbl, "cells": [dataclasses.asdict(c) for c in cells]}
                  for s, (lbl, cells) in results.items()})
    (out / "cells.json").write_text(json.dumps(saved, indent=1))
    console.print(f"results: {out}/tables.txt, cells.json")
    bad = [c for _, cells in results.values() for c in cells
           if c.completed < len(c.seeds) or (c.scheme != "differentiated" and c.exact < len(c.seeds))]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
