"""``python -m experiments --mode compare`` (``make compare``): every
gradient-synchronization scheme on the same gradient.

One seed gives ``N`` (``--workers``) float32 gradients of ``--values`` values; every
scheme sums exactly those ``N`` gradients over links of ``--bw`` Mbit/s and is checked
element by element:

* on one fat-tree (k=4; host links ``--bw``, switch-to-switch links ``--fabric-x`` times
  faster, as the BCube experiment's baselines): **PS** (the INA protocol with no
  aggregating switch: PS on ``h1``, workers ``h2..h(N+1)``), **INA** (the same with
  ``--budget`` aggregating switches), **NDN-PS** (``ndn.p4`` with the persistent PIT,
  PS ``h1``, GPUs ``h2..h(N+1)``, one synchronous round whose gradients are the given
  ones) and **ring all-reduce** (TCP, ``N`` peers ``h1..hN``);
* on BCube(n, k) with ``n**k = N`` servers: **BML**;
* on the token LAN (``N`` nodes, each behind its P4 smart NIC): **token** broadcast of
  one batch whose gradients are the given ones.

"Contributors" is ``N`` everywhere: PS-based schemes (PS, INA, NDN) have a parameter
server in addition to their ``N`` workers; the symmetric ones (ring, BML, token) have
``N`` peers. Bytes per directed link come from :mod:`experiments.accounting` (interface
counters in every namespace) around each run; the busiest link is the one with the
longest time at its line rate (the **line-rate bound**). Prints one table, writes
``results/compare-<time>/summary.json`` and ``compare.png``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rich.table import Table

from controller import argtypes
from controller.bcube import bcube_shape
from controller.output import TableConsole
from experiments import options as opts
from wire.argtypes import described

# wide tables even when stdout is a file or pipe (Rich would fold them at 80 columns)
console = TableConsole()


@dataclass(frozen=True)
class Scheme:
    """One synchronization scheme: its label, network and the modules it needs."""

    label: str
    network: str
    modules: tuple[str, ...]
    short: str = ""  # the plot's label


#: Every scheme, in table order. A scheme whose modules are missing is "not landed".
SCHEMES: dict[str, Scheme] = {
    "ps": Scheme("PS only", "fat-tree", ("controller.ina", "hosts.ina.ps", "hosts.ina.worker"),
                 "PS only\n(fat-tree)"),
    "ring": Scheme("ring all-reduce", "fat-tree", ("hosts.bml.baselines", "controller.bcube"),
                   "ring\n(fat-tree)"),
    "ina": Scheme("INA", "fat-tree", ("controller.ina", "hosts.ina.ps", "hosts.ina.worker"),
                  "INA\n(fat-tree)"),
    "ndn": Scheme("NDN-PS (persistent PIT)", "fat-tree",
                  ("controller.ndn", "experiments.ndn", "hosts.ndn.ps", "hosts.ndn.gpu"),
                  "NDN-PS\n(fat-tree)"),
    "bml": Scheme("BML", "bcube", ("hosts.bml", "controller.bcube"), "BML\n(BCube)"),
    "token": Scheme("token LAN", "token-lan",
                    ("controller.token", "experiments.token", "hosts.token.node"),
                    "token\n(P4 NIC LAN)"),
}

#: What each scheme's "sync time" and "exact" mean (the table's notes).
NOTES = {
    "ps": "time: slowest worker, first send -> whole sum back; int32 fixed point; UDP, worker retx",
    "ina": "as PS; sum partly in the switches",
    "ring": "time: go -> last peer done; int32 fixed point; TCP (kernel RetransSegs)",
    "ndn": "time: PS round (collect + sum; the update's multicast follows); float32 mean, "
           "bit-exact vs a replay in the PS's order; the initial model download's bytes "
           "are taken off the PS uplink; Interest retx",
    "bml": "time: go -> last server done; int32 fixed point; TCP (kernel RetransSegs)",
    "token": "time: node 1 training start -> batch summed; int32 fixed point summed in the NICs; "
             "bytes of training only; resends",
}

#: Values a token NIC holds (wire.token: TOKEN_MAX_FRAGS * TOKEN_VALUES).
TOKEN_MAX_VALUES = 256 * 128


def _log(msg: str) -> None:
    console.print(f"[dim]{time.strftime('%H:%M:%S')}[/dim] {msg}")


@dataclass
class Row:
    """One scheme's line of the comparison."""

    scheme: str
    label: str
    topology: str = "-"
    contributors: int = 0
    status: str = "ok"  # ok | not landed | skipped: ... | failed: ...
    seconds: float | None = None
    bound_s: float | None = None
    busiest_link: str = "-"
    busiest_bytes: int | None = None
    ps_bytes: int | None = None
    exact: bool | None = None
    mismatches: int = 0
    retransmissions: int | None = None
    notes: str = ""


# ----------------------------------------------------------------------------- helpers
def landed(scheme: str) -> bool:
    """Whether every module the scheme needs exists in this tree."""
    try:
        return all(importlib.util.find_spec(m) is not None for m in SCHEMES[scheme].modules)
    except ModuleNotFoundError:
        return False


def parse_schemes(spec: str) -> list[str]:
    """``--schemes``: comma-separated names (``all``: every scheme); ValueError if unknown."""
    names = [s.strip().lower() for s in spec.split(",") if s.strip()]
    if names == ["all"]:
        return list(SCHEMES)
    bad = [s for s in names if s not in SCHEMES]
    if bad or not names:
        raise ValueError(f"unknown scheme(s) {', '.join(bad) or '(none given)'}: choose from "
                         f"{', '.join(SCHEMES)} or all")
    return [s for s in SCHEMES if s in names]  # table order


def tcp_retransmissions(net: Any, hosts: list[str]) -> int:
    """Sum of the kernel's TCP RetransSegs over the hosts' namespaces."""
    total = 0
    for h in hosts:
        lines = [ln.split() for ln in net.host(h).cmd("cat /proc/net/snmp").splitlines()
                 if ln.startswith("Tcp:")]
        if len(lines) >= 2:
            total += int(dict(zip(lines[0], lines[1], strict=False)).get("RetransSegs", 0))
    return total


def ndn_timeout(args: argparse.Namespace) -> float:
    """NDN Interest retransmission timeout: ``--ndn-timeout``, or long enough for every
    GPU's window of segments (64) to cross the PS's link at ``--bw`` (the agents' 0.5 s
    default suits 10 Mbit/s and small models; at 2 Mbit/s it retransmits the model many
    times over), capped below the Interests' 4 s lifetime."""
    if args.ndn_timeout:
        return float(args.ndn_timeout)
    from wire.ndn import SEGMENT_VALUES

    drain = args.workers * 64 * SEGMENT_VALUES * 4 * 8 / (args.bw * 1e6)
    return min(3.5, max(0.5, 1.2 * drain))


def _fill_split(row: Row, topo: Any, before: Any, after: Any, ps: str | None = None,
                minus: dict[str, int] | None = None) -> None:
    """Busiest link, its bytes and line-rate bound; bytes into the PS's NIC. ``minus``
    takes bytes off links (traffic of the run that is not synchronization)."""
    from experiments.accounting import time_split

    sp = time_split(topo, before, after)
    for link, b in (minus or {}).items():
        sp.link_bytes[link] = max(0, sp.link_bytes.get(link, 0) - b)
    row.bound_s, row.busiest_link, row.busiest_bytes = 0.0, "-", 0
    for ln in topo.links():  # as accounting.time_split, on the corrected bytes
        for a, z in ((ln.a, ln.b), (ln.b, ln.a)):
            sent = sp.link_bytes.get(f"{a}->{z}", 0)
            if sent * 8 / (ln.capacity * 1e6) > row.bound_s:
                row.bound_s, row.busiest_link, row.busiest_bytes = (
                    sent * 8 / (ln.capacity * 1e6), f"{a}->{z}", sent)
    if ps is not None:
        sw = topo.iface(ps)["switch"]
        row.ps_bytes = int(sp.link_bytes.get(f"{sw}->{ps}", 0))


def _guard(row: Row, fn: Callable[[], None]) -> Row:
    """Run one scheme; an exception becomes a failed row instead of ending the compare."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 (reported in the table and summary)
        row.status = f"failed: {type(e).__name__}: {str(e).strip()[:300]}"
        row.exact = False
        _log(f"[red]{row.label} failed[/red]: {e}")
    return row


# ----------------------------------------------------------------------------- runs
def run_fat_tree(args: argparse.Namespace, schemes: list[str], grads: list[np.ndarray],
                 scale_bits: int, run_dir: Path) -> list[Row]:
    """PS, ring, INA and NDN on one fat-tree (see the module doc)."""
    from controller.bcube import baseline_fat_tree
    from controller.ina import InaJob
    from experiments.ina import switch_neighbors
    from topologies.network import Network

    n = len(grads)
    topo = baseline_fat_tree(n + 1, args.bw, args.fabric_x)
    hosts = topo.hosts()
    ps, workers = hosts[0], hosts[1:n + 1]
    rows = {s: Row(s, SCHEMES[s].label, "fat-tree k=4", n, notes=NOTES[s]) for s in schemes}
    jobs = {tag: InaJob.plan(topo, ps, workers, args.budget if tag == "ina" else 0, args.capacity,
                             args.values, job_id=1, scale_bits=scale_bits, aggregate=tag == "ina")
            for tag in ("ina", "ps") if tag in schemes}
    with Network(topo, target=args.target, log=_log) as net:
        runs = _FatTreeRuns(args, net, topo, grads, scale_bits, run_dir, rows, jobs)
        # forward.p4 first (ring), then the INA program, then ndn.p4: each run deploys its own
        if "ring" in rows:
            _guard(rows["ring"], runs.ring)
        if jobs:
            switch_neighbors(net, topo, sorted({s for j in jobs.values() for s in j.aggregating_switches}))
        for tag in ("ps", "ina"):
            if tag in rows:
                _guard(rows[tag], lambda tag=tag: runs.ina_or_ps(tag))
        if "ndn" in rows:
            _guard(rows["ndn"], runs.ndn)
    return [rows[s] for s in schemes]


class _FatTreeRuns:
    """The schemes' runs on one live fat-tree; each fills its row."""

    def __init__(self, args: argparse.Namespace, net: Any, topo: Any, grads: list[np.ndarray],
                 scale_bits: int, run_dir: Path, rows: dict[str, Row], jobs: dict[str, Any]) -> None:
        self.args, self.net, self.topo, self.grads = args, net, topo, grads
        self.scale_bits, self.run_dir, self.rows, self.jobs = scale_bits, run_dir, rows, jobs
        self.n = len(grads)
        self.hosts = topo.hosts()
        self.ps, self.workers = self.hosts[0], self.hosts[1:self.n + 1]
        self.addresses = net.grpc_addresses()

    def ring(self) -> None:
        """Ring all-reduce over TCP on forward.p4."""
        from controller.bcube import fat_tree_plan
        from controller.deploy import deploy
        from experiments.accounting import Snapshot
        from experiments.runner import prepare_hosts
        from experiments.schemes import run_scheme

        args, net, topo, n, hosts = self.args, self.net, self.topo, self.n, self.hosts
        row = self.rows["ring"]
        deploy(topo, self.addresses)
        prepare_hosts(net, hosts[:n])
        plan = fat_tree_plan(topo, "ring", n, args.values, self.scale_bits)
        retx0, before = tcp_retransmissions(net, hosts[:n]), Snapshot.take(net)
        res = run_scheme(net, topo, plan, self.grads, self.run_dir, args.bw, args.max_time, _log)
        _fill_split(row, topo, before, Snapshot.take(net))
        row.retransmissions = tcp_retransmissions(net, hosts[:n]) - retx0
        row.seconds, row.exact, row.mismatches = res.seconds, res.exact, res.mismatches
        row.topology = f"fat-tree k=4, h1..h{n}"

    def ina_or_ps(self, tag: str) -> None:
        """One INA job, aggregating (ina) or all to the PS (ps)."""
        from controller.ina import InaDeployment
        from experiments.accounting import Snapshot
        from experiments.ina import run_jobs

        args, net, topo, ps, run_dir = self.args, self.net, self.topo, self.ps, self.run_dir
        row, job = self.rows[tag], self.jobs[tag]
        dep = InaDeployment(topo, self.addresses, [job])
        _log(f"{tag}: {dep.deploy()}")
        before = Snapshot.take(net)
        res = run_jobs(net, topo, [(job, self.grads)], run_dir, tag, args.window, args.timeout,
                       args.max_time)[0]
        _fill_split(row, topo, before, Snapshot.take(net), ps)
        # the workers' own durations (first send -> whole sum back): the wall time of
        # run_jobs also counts starting N Python processes on a loaded machine
        durations = [json.loads(f.read_text().strip().splitlines()[-1])["duration_s"]
                     for f in sorted((run_dir / f"{tag}-job{job.job_id}").glob("worker-*.out"))]
        row.seconds = max(durations) if durations else res.seconds
        row.exact, row.mismatches = res.exact, res.mismatches
        row.retransmissions = res.retransmissions
        row.topology = f"fat-tree k=4, PS {ps}"
        if tag == "ina":
            row.notes += f"; aggregating switches {', '.join(job.aggregating_switches)}"

    def ndn(self) -> None:
        """One synchronous NDN round with the same gradients, checked against a replay."""
        from experiments.accounting import Snapshot
        from experiments.ndn import run_ndn
        from hosts.ndn.harness import initial_params, sgd_step

        args, net, topo, ps, workers, grads = self.args, self.net, self.topo, self.ps, self.workers, self.grads
        row = self.rows["ndn"]
        d = self.run_dir / "ndn"
        gdir = d / "gradients"
        gdir.mkdir(parents=True, exist_ok=True)
        for i, g in enumerate(grads):
            np.save(gdir / f"grad-{i}.npy", g)
        before = Snapshot.take(net)
        res = run_ndn(net, topo, d, {}, mode="sync", ps=ps, gpus=workers, busy=(), rounds=1,
                      steps=1, values=args.values, seed=args.seed, compute_time=0.01,
                      max_time=args.max_time, model="synthetic", lr=args.lr, gradient_dir=gdir,
                      timeout=ndn_timeout(args))
        # the initial model download (the PS's "content" Data) all leaves the PS uplink
        init = int(res.ps.get("tx_by_kind", {}).get("content", 0))
        _fill_split(row, topo, before, Snapshot.take(net), ps,
                    {f"{ps}->{topo.iface(ps)['switch']}": init})
        # the PS's mean, in its own order, against the same float32 replay
        want = sgd_step(initial_params(args.values, args.seed),
                        [grads[workers.index(g)] for g in res.accepted], args.lr)
        got_path = d / "ps" / "params-v1.npy"
        got = np.load(got_path) if got_path.exists() else np.full_like(want, np.nan)
        row.mismatches = int(np.count_nonzero(got != want))
        row.exact = res.exact and row.mismatches == 0 and len(res.accepted) == self.n
        if res.problems:
            row.notes = f"{row.notes}; problems: {'; '.join(res.problems)[:200]}"
        rounds = res.ps.get("rounds") or []
        row.seconds = float(rounds[0]["seconds"]) if rounds else None
        row.retransmissions = int(res.ps.get("retransmissions", 0)) + sum(
            int(g.get("retransmissions", 0)) for g in res.gpus.values())
        row.topology = f"fat-tree k=4, PS {ps}"


def run_bcube(args: argparse.Namespace, grads: list[np.ndarray], scale_bits: int,
              run_dir: Path) -> Row:
    """BML on BCube(n, k) with ``n**k`` = the contributor count."""
    from controller.bcube import bcube_network_topology, bcube_plan
    from controller.deploy import deploy
    from experiments.accounting import Snapshot
    from experiments.runner import prepare_hosts
    from experiments.schemes import run_scheme
    from topologies.network import Network

    n = len(grads)
    row = Row("bml", SCHEMES["bml"].label, "-", n, notes=NOTES["bml"])
    shape = bcube_shape(n)
    if shape is None:
        row.status = f"skipped: no BCube(n, k) has {n} servers (n**k, n, k >= 2)"
        return row
    b, k = shape

    def go() -> None:
        topo = bcube_network_topology(b, k, args.bw)
        row.topology = f"BCube({b}, {k})"
        with Network(topo, target=args.target, log=_log) as net:
            deploy(topo, net.grpc_addresses())
            prepare_hosts(net, topo.hosts())
            plan = bcube_plan(topo, b, k, args.values, scale_bits, pipeline=args.pipeline)
            retx0, before = tcp_retransmissions(net, topo.hosts()), Snapshot.take(net)
            res = run_scheme(net, topo, plan, grads, run_dir, args.bw, args.max_time, _log)
            _fill_split(row, topo, before, Snapshot.take(net))
            row.retransmissions = tcp_retransmissions(net, topo.hosts()) - retx0
            row.seconds, row.exact, row.mismatches = res.seconds, res.exact, res.mismatches

    return _guard(row, go)


def run_token_lan(args: argparse.Namespace, grads: list[np.ndarray], scale_bits: int,
                  run_dir: Path) -> Row:
    """One batch of token-passing broadcast whose gradients are the given ones."""
    from controller.bcube import exact_sum
    from controller.token import TokenDeployment, token_lan
    from experiments.accounting import Snapshot
    from experiments.token import run_token
    from topologies.network import Network

    n = len(grads)
    row = Row("token", SCHEMES["token"].label, f"LAN, {n} P4 NICs", n, notes=NOTES["token"])
    if args.values > TOKEN_MAX_VALUES:
        row.status = f"skipped: a token NIC holds at most {TOKEN_MAX_VALUES} values"
        return row

    def go() -> None:
        topo = token_lan(n, bw=args.bw)
        d = run_dir / "token"
        gdir, dump, logs = d / "gradients", d / "dump", d / "logs"
        for p in (gdir, dump, logs):
            p.mkdir(parents=True, exist_ok=True)
        per_host = {}
        for i, h in enumerate(topo.hosts()):
            np.save(gdir / f"grad-{i}.npy", grads[i])
            per_host[h] = ["--gradient", str(gdir / f"grad-{i}.npy")]
        start_file = d / "start"  # node 1 creates the token once the counters are read
        start_file.unlink(missing_ok=True)
        per_host[topo.hosts()[0]] += ["--start-signal", str(start_file)]
        common = ["--epochs", "1", "--batches", "1", "--batch-size", "32", "--cutoff", "1.0",
                  "--wait-unit", str(args.token_wait_unit), "--min-nodes", "2",
                  "--model", f"hosts.training:flat_{args.values}",
                  "--scale-bits", str(scale_bits), "--dump", str(dump),
                  "--max-time", str(args.max_time)]
        with Network(topo, target=args.target, log=_log) as net:
            dep = TokenDeployment(topo, net.grpc_addresses())
            _log(f"token: {dep.deploy()}")
            # bytes of the training only: snapshot once node 1 reports "ready" (formation
            # and the model/data distribution are over by then)
            snaps: dict[str, Any] = {}
            stop = threading.Event()

            def watch() -> None:
                first = logs / f"{topo.hosts()[0]}.out"
                while not stop.is_set():
                    if first.exists() and '"ready"' in first.read_text(errors="replace"):
                        snaps["before"] = Snapshot.take(net)
                        start_file.touch()
                        return
                    time.sleep(0.05)

            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
            try:
                run = run_token(net, topo, logs, common, per_host=per_host,
                                timeout=args.max_time + 60)
            finally:
                stop.set()
                watcher.join(timeout=30)
            after = Snapshot.take(net)
        if "before" not in snaps:
            raise RuntimeError("node 1 never started training: "
                               + "; ".join(f"{h}: {r.stderr[-200:]}" for h, r in run.nodes.items()
                                           if r.returncode))
        _fill_split(row, topo, snaps["before"], after)
        bad = {h: r.returncode for h, r in run.nodes.items() if r.returncode != 0}
        expected = exact_sum(grads, scale_bits)
        sums = sorted(dump.glob("sum-b0-s*.npy"))
        row.mismatches = sum(int(np.count_nonzero(np.load(p).astype(np.int64) != expected))
                             for p in sums)
        row.exact = not bad and len(sums) == n and row.mismatches == 0
        if bad or len(sums) != n:
            row.notes = f"{row.notes}; exits {bad}, {len(sums)} of {n} nodes read sums"
        ev = {e["event"]: e["t"] for e in run.nodes[topo.hosts()[0]].events
              if e.get("event") in ("ready", "batch")}
        row.seconds = ev["batch"] - ev["ready"] if {"ready", "batch"} <= ev.keys() else None
        row.retransmissions = sum(int(r.summary.get("stats", {}).get("resends", 0))
                                  for r in run.nodes.values())

    return _guard(row, go)


# ----------------------------------------------------------------------------- output
def _fmt_bytes(b: int | None) -> str:
    return "-" if b is None else f"{b:,}"


def print_table(rows: list[Row], args: argparse.Namespace) -> None:
    """The comparison table and its notes."""
    t = Table(title=f"every scheme, the same gradient: {args.workers} "
                    f"contributors x {args.values:,} float32 values ({4 * args.values:,} bytes), "
                    f"seed {args.seed}, {args.bw:g} Mbit/s links")
    for col in ("scheme", "topology", "contributors", "sync s", "line-rate bound s",
                "busiest link", "bytes at busiest link", "bytes at PS", "exact", "retransmissions",
                "status"):
        t.add_column(col, justify="left" if col in ("scheme", "topology", "busiest link", "status")
                     else "right")
    for r in rows:
        ok = r.status == "ok"
        exact = ("-" if r.exact is None else "[green]yes[/green]" if r.exact
                 else f"[red]no ({r.mismatches} wrong)[/red]")
        t.add_row(r.label, r.topology, str(r.contributors) if r.contributors else "-",
                  f"{r.seconds:.2f}" if r.seconds is not None else "-",
                  f"{r.bound_s:.2f}" if r.bound_s is not None else "-",
                  r.busiest_link if ok else "-", _fmt_bytes(r.busiest_bytes), _fmt_bytes(r.ps_bytes),
                  exact, "n/a" if r.retransmissions is None else str(r.retransmissions),
                  r.status if ok else f"[yellow]{r.status}[/yellow]")
    console.print(t)
    for r in rows:
        if r.notes:
            console.print(f"[dim]{r.label}:[/dim] {r.notes}")


def plot(path: Path, rows: list[Row], args: argparse.Namespace) -> None:
    """Two bar charts: sync time (with the line-rate bound) and busiest-link bytes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    done = [r for r in rows if r.status == "ok" and r.seconds is not None]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    names = [SCHEMES[r.scheme].short or r.label for r in done]
    x = np.arange(len(done))
    colors = ["tab:green" if r.exact else "tab:red" for r in done]
    axes[0].bar(x - 0.2, [r.seconds for r in done], 0.4, color=colors, label="measured")
    axes[0].bar(x + 0.2, [r.bound_s or 0 for r in done], 0.4, color="tab:gray",
                label="line-rate bound (busiest link)")
    axes[0].set_ylabel("synchronization time (s)")
    axes[0].legend(fontsize=8)
    bars = axes[0].containers[0]
    axes[0].bar_label(bars, fmt="%.2f", fontsize=7)
    axes[1].bar_label(axes[1].bar(x, [(r.busiest_bytes or 0) / 1e3 for r in done], 0.6,
                                  color=colors), fmt="%.0f", fontsize=7)
    axes[1].set_ylabel("bytes at the busiest link (kB)")
    for ax in axes:
        ax.set_xticks(x, names, fontsize=7)
        ax.grid(axis="y", alpha=0.3)
    missing = [f"{r.label}: {r.status}" for r in rows if r.status != "ok"]
    fig.suptitle(f"gradnet: {args.workers} contributors x {4 * args.values // 1024} KiB gradient, "
                 f"{args.bw:g} Mbit/s links (green: exact sum)"
                 + (f"\nnot shown: {'; '.join(missing)}"[:200] if missing else ""), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ----------------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    """Options of ``--mode compare``."""
    p = argtypes.Parser(prog="python -m experiments --mode compare",
                                description=described(__doc__) + " " + __doc__.splitlines()[1],
                                epilog="--workers: the contributors N, 2..15 (default 8: BCube(2, 3); "
                                       "PS-based schemes add a PS); --bw: every host link of the "
                                       "fat-tree, the BCube and the token LAN.")
    p.add_argument("--schemes", default="all",
                   help=f"comma-separated subset of {','.join(SCHEMES)} (default all)")
    p.add_argument("--values", type=argtypes.values, default=32768,
                   help="gradient length in float32 values (default 32768 = 128 KiB, the most a "
                        f"token NIC holds: {TOKEN_MAX_VALUES})")
    p.add_argument("--fabric-x", type=argtypes.positive, default=4.0,
                   help="fat-tree switch-to-switch links at this multiple of --bw (default 4)")
    p.add_argument("--budget", type=argtypes.natural, default=2, help="INA: aggregating switches K (default 2)")
    p.add_argument("--capacity", type=argtypes.positive, default=1000.0, help="INA: switch capacity (Mbit/s)")
    p.add_argument("--window", type=argtypes.count, default=32, help="INA/PS: outstanding fragments per worker")
    p.add_argument("--timeout", type=argtypes.positive, default=1.0,
                   help="INA/PS: worker retransmission timeout in seconds (default 1; not a bound "
                        "on the run: that is --max-time)")
    p.add_argument("--pipeline", type=argtypes.integer(1, 64), default=4, help="BML: pieces per parameter set (default 4)")
    p.add_argument("--lr", type=argtypes.positive, default=0.1, help="NDN: the PS's learning rate (default 0.1)")
    p.add_argument("--ndn-timeout", type=argtypes.nonnegative, default=0.0,
                   help="NDN: Interest retransmission timeout (s; default: from --bw and --workers)")
    p.add_argument("--token-wait-unit", type=argtypes.positive, default=2.0,
                   help="token: t of the staggered timeouts (s, default 2)")
    opts.add_common(p, "compare", takes={
        "--seed": {"default": 1}, "--workers": {"default": 8}, "--bw": {"default": 2.0},
        "--max-time": {"default": 240.0}, "--target": {}, "--out-dir": {}},
        rejects={"--seeds": "it runs one gradient seed (--seed N); run it once per seed",
                 "--target-accuracy": "it synchronises one gradient and trains no model "
                                      "(time to accuracy: --mode train)",
                 "--loss": "its schemes run on three networks (fat-tree, BCube, token LAN), so "
                           "a switch port names no one link (lossy runs: --mode train --loss)"})
    return p


def check_args(args: argparse.Namespace) -> list[str]:
    """Parse ``--schemes`` and check the numbers; ValueError with a clear message."""
    schemes = parse_schemes(args.schemes)
    if not 2 <= args.workers <= 15:
        raise ValueError(f"--workers must be in 2..15 (a k=4 fat-tree has 16 hosts), got {args.workers}")
    if args.values < 1:
        raise ValueError(f"--values must be positive, got {args.values}")
    if args.bw <= 0 or args.bw > 1000:
        raise ValueError(f"--bw must be in (0, 1000] Mbit/s, got {args.bw:g}")
    # a k=4 fat-tree: 20 switches, the PS's edge switch s_d among them
    argtypes.check_at_most("--budget", args.budget, 19, "a k=4 fat-tree has 19 switches besides s_d")
    return schemes


def main(argv: list[str]) -> int:
    """Entry point of ``--mode compare``; 0 when every scheme that ran was exact."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:  # every check before anything starts
        schemes = check_args(args)
    except ValueError as e:
        argtypes.fail(parser, e)
    if os.geteuid() != 0:
        console.print("[red]the experiment needs root (network namespaces)[/red]")
        return 2
    from controller.bcube import choose_scale_bits, gradients

    run_dir = Path(args.out_dir).resolve() / time.strftime("compare-%Y%m%d-%H%M%S")
    run_dir.mkdir(parents=True, exist_ok=True)
    console.save_to(run_dir)  # every table in full: tables.txt, tables.json, CSV
    grads = gradients(args.workers, args.values, args.seed)
    scale_bits = choose_scale_bits(grads)
    _log(f"{args.workers} gradients of {args.values:,} float32 values (seed {args.seed}, int32 "
         f"fixed point at scale 2^{scale_bits}); {args.bw:g} Mbit/s links; schemes: {', '.join(schemes)}")
    ready = [s for s in schemes if landed(s)]
    rows: dict[str, Row] = {s: Row(s, SCHEMES[s].label, status="not landed", notes="modules: "
                                   + ", ".join(SCHEMES[s].modules)) for s in schemes if s not in ready}
    fat = [s for s in ready if SCHEMES[s].network == "fat-tree"]
    if fat:
        rows.update({r.scheme: r for r in run_fat_tree(args, fat, grads, scale_bits, run_dir)})
    if "bml" in ready:
        rows["bml"] = run_bcube(args, grads, scale_bits, run_dir)
    if "token" in ready:
        rows["token"] = run_token_lan(args, grads, scale_bits, run_dir)
    ordered = [rows[s] for s in schemes]
    print_table(ordered, args)
    summary = {"workers": args.workers, "values": args.values, "bytes": 4 * args.values,
               "bw_mbit": args.bw, "seed": args.seed, "scale_bits": scale_bits,
               "fabric_x": args.fabric_x, "schemes": schemes, "rows": [asdict(r) for r in ordered]}
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    plot(run_dir / "compare.png", ordered, args)
    console.print(f"results: {run_dir}/summary.json, {run_dir}/compare.png")
    ran = [r for r in ordered if r.status == "ok" or r.status.startswith("failed")]
    return 0 if ran and all(r.exact for r in ran) else 1
