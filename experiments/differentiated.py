"""Differentiated gradient transmission over P4 priority queues, with real training.

    python -m experiments --mode differentiated [options]     (make run-differentiated)

N workers and a parameter server (PS) on a star: every worker reaches the PS through one
P4 switch, s1, whose port to the PS is the congested bottleneck: the controller gives it
a line rate (packets/s) below the offered load, a depth per queue, and installs the
DSCP -> priority map of forward.p4's ``dscp_priority`` table. On the embedded target the
rate is shared by the port's strict-priority queues; BMv2 (``--priority-queues 8``) has
only independent per-queue rates, so there the rate is cut into a static partition among
the queues (:func:`partition_weights`; ``--static-partition`` does the same on the
embedded target), and every table says which. The same data-parallel SGD of hosts/training.py's digits CNN
(same seeds) then runs three times over that network:

* ``reliable``: every gradient block over TCP on the highest-priority queue;
* ``unreliable``: every block over UDP on one (the lowest) priority: the contrast;
* ``differentiated``: important blocks (SANE contribution above the threshold) over TCP
  on the highest priority, the others over UDP graded into levels, one priority each.

Prints per run: iteration and synchronisation time, bytes, blocks missing per level,
datagrams dropped per queue (switch counters), test accuracy per epoch; then the time
ratio and the accuracy gap of differentiated vs reliable. Writes summary.json and a plot
of accuracy vs wall time to results/.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.table import Table

from controller import argtypes
from controller.output import TableConsole
from controller.qos import EgressQueues
from controller.qos.deployment import UNUSED_QUEUE_PPS
from experiments import options as opts
from experiments.runner import finish, last_json, prepare_hosts, spawn
from experiments.runner import log as _log
from topologies import star
from topologies.base import Topology
from wire.argtypes import described
from wire.differentiated import (
    DSCP_BEST_EFFORT,
    DSCP_IMPORTANT,
    DSCP_LEVELS,
    NB_QUEUES,
    dscp_priority_map,
)

console = TableConsole()
MODES = ("reliable", "unreliable", "differentiated")
SWITCH = "s1"
PS_HOST = "h1"


@dataclass
class QosSetup:
    """How the bottleneck port is configured."""

    port_rate: float = 300.0  # packets/s of the switch port to the PS
    depth: int = 64  # packets per queue
    top_depth: int = 64  # packets in the highest-priority (reliable) queue
    levels: int = 3
    priorities: bool = True  # False: every DSCP on priority 0 (the control)
    # "shared": port_rate shared by the queues in strict priority (embedded target only);
    # "partition": port_rate cut into fixed per-queue rates (BMv2's only way; configure
    # switches to it on BMv2)
    queueing: str = "shared"
    top_share: float = 0.5  # the partition's share of the highest (important) queue
    # shared queueing only: port_rate counts 1,514-byte frames' worth of bytes (a byte
    # rate of port_rate * 1514 bytes/s, a packet costing its length) instead of packets
    byte_rate: bool = False
    rates: dict[int, int] = field(default_factory=dict)  # the partition set: {priority: pkt/s}

    def label(self) -> str:
        """How the bottleneck is bounded, for every table's title."""
        if self.queueing != "partition" and self.byte_rate:
            return (f"{self.port_rate * 1514 * 8 / 1e6:.2f} Mbit/s (a byte rate) shared by the queues in "
                    "strict priority")
        if self.queueing != "partition":
            return f"{self.port_rate:g} pkt/s shared by the queues in strict priority"
        used = ", ".join(f"prio {p}: {r}" for p, r in self.rates.items() if r > UNUSED_QUEUE_PPS)
        return (f"STATIC PARTITION of {self.port_rate:g} pkt/s (no shared port rate): {used or '-'}; "
                f"other queues {UNUSED_QUEUE_PPS} pkt/s")


def partition_weights(rules: Mapping[int, int], top_share: float = 0.5,
                      nb_queues: int = NB_QUEUES) -> dict[int, float]:
    """Weights of a static partition of the bottleneck among the priorities that the
    DSCP map ``rules`` uses: ``top_share`` to the highest queue (the important blocks'),
    the rest to the lower ones, halving from one to the next (level 1 twice level 2's
    share, ...), as strict priority would favour them. One priority used: all to it."""
    if not 0 < top_share < 1:
        raise ValueError(f"top_share must be in (0, 1), got {top_share}")
    used = sorted(set(rules.values()), reverse=True)
    if len(used) == 1:
        return {used[0]: 1.0}
    top = nb_queues - 1
    lower = [p for p in used if p != top]
    halving = [2.0 ** -i for i in range(len(lower))]
    rest = (1 - top_share) if top in used else 1.0
    out = {top: top_share} if top in used else {}
    out.update({p: rest * h / sum(halving) for p, h in zip(lower, halving, strict=True)})
    return out


@dataclass
class TransportRun:
    """One training (or fixed-tensor) run of one transport."""

    mode: str
    ok: bool
    ps: dict[str, Any]
    workers: list[dict[str, Any]]
    queues: dict[int, dict[str, int]] = field(default_factory=dict)  # priority -> counter deltas
    seconds: float = 0.0
    error: str = ""

    @property
    def sync_mean(self) -> float | None:
        """Mean synchronisation time (send start -> new parameters) over workers."""
        v = [w["sync_mean_s"] for w in self.workers if w.get("sync_mean_s") is not None]
        return sum(v) / len(v) if v else None

    @property
    def accuracy(self) -> float | None:
        """Final test accuracy."""
        return self.ps.get("final_accuracy")

    def accuracy_tail(self, k: int = 3) -> float | None:
        """Mean test accuracy of the last ``k`` epochs (less noisy than the final one)."""
        ep = [e["accuracy"] for e in self.ps.get("epochs", [])[1:]]
        return sum(ep[-k:]) / len(ep[-k:]) if ep else None

    def sent_datagrams(self) -> list[int]:
        """Datagrams sent per level (index 0: unused, TCP) summed over workers."""
        out: list[int] = []
        for w in self.workers:
            for i, n in enumerate(w.get("sent_datagrams", [])):
                out += [0] * (i + 1 - len(out))
                out[i] += n
        return out


def configure(net: Any, topo: Topology, setup: QosSetup,
              loss: Mapping[tuple[str, int], float] | None = None,
              bind_sources: bool = True) -> EgressQueues:
    """Deploy forward.p4 with the DSCP map (and ``loss``: ``{(switch, port): rate}``) and
    set the bottleneck port's queues: a rate shared in strict priority, or (on BMv2,
    always) a static partition of it, recorded in ``setup.rates``. ``bind_sources``:
    host ports bound to their hosts' addresses (docs/trust.md; ``False``: open)."""
    from controller.deploy import deploy

    rules = dscp_priority_map(setup.levels, NB_QUEUES)
    if not setup.priorities:
        rules = dict.fromkeys(rules, 0)
    deploy(topo, net.grpc_addresses(), priorities=rules, loss=loss or None, bind_sources=bind_sources)
    eq = EgressQueues.of(net.run_dir, SWITCH, NB_QUEUES)
    configure_queues(eq, topo.port(SWITCH, PS_HOST), setup, rules)
    prepare_hosts(net, topo.hosts())  # a reliable channel idle between iterations keeps its window
    return eq


def configure_queues(eq: EgressQueues, port: int, setup: QosSetup, rules: Mapping[int, int]) -> None:
    """The bottleneck ``port``'s rate and depths: ``setup.port_rate`` shared by the queues
    in strict priority, or (``setup.queueing == "partition"``, always on BMv2) cut into a
    static partition among the priorities ``rules`` uses (:func:`partition_weights`),
    recorded in ``setup.rates``."""
    if eq.target == "bmv2":
        setup.queueing = "partition"
    if setup.queueing == "partition":
        if eq.target != "bmv2":
            eq.set_port_rate(None, port)  # the partition alone bounds the port, as on BMv2
        setup.rates = eq.set_static_partition(setup.port_rate, port, partition_weights(rules, setup.top_share))
    else:
        eq.set_rate(None, port)  # no per-queue rate left from an earlier partition
        if setup.byte_rate:
            eq.set_port_byte_rate(setup.port_rate * 1514, port)
        else:
            eq.set_port_rate(setup.port_rate, port)
        setup.rates = {}
    eq.set_depth(setup.depth, port)
    eq.set_depth(setup.top_depth, port, priority=NB_QUEUES - 1)


def run_transport(net: Any, topo: Topology, eq: EgressQueues, run_dir: Path, mode: str,
                  common: list[str], worker_args: list[str] | None = None,
                  ps_args: list[str] | None = None, max_time: float = 300.0) -> TransportRun:
    """Run the PS and every worker of one transport; collect their summaries and the
    bottleneck queues' counter deltas."""
    hosts = topo.hosts()
    workers = [h for h in hosts if h != PS_HOST]
    d = run_dir / mode
    d.mkdir(parents=True, exist_ok=True)
    ps_ip = topo.iface(PS_HOST)["ip"]
    port = topo.port(SWITCH, PS_HOST)
    before = eq.counters(port) if eq.has_counters else {}  # BMv2's runtime CLI has no counters
    base = [sys.executable, "-m"]
    shared = ["--world", str(len(workers)), "--mode", mode, "--max-time", str(max_time), *common]
    members = ",".join(topo.host_ip(w) for w in workers)       # the receiver refuses others
    ps = spawn(net.host(PS_HOST), d / "ps", [*base, "hosts.differentiated.ps", *shared, "--members", members,
                                             *(ps_args or [])])
    t_wait = time.monotonic() + 30
    while "listening" not in (d / "ps.err").read_text(errors="replace"):
        if ps.poll() is not None or time.monotonic() > t_wait:
            rc, out, err = finish(ps, d / "ps", 1)
            return TransportRun(mode, False, {}, [], error=f"PS did not start (exit {rc}): {err[-500:]}")
        time.sleep(0.05)
    t0 = time.monotonic()
    procs = [spawn(net.host(w), d / f"worker{r}",
                    [*base, "hosts.differentiated.worker", "--ps", ps_ip, "--rank", str(r), *shared,
                     *(worker_args or [])])
             for r, w in enumerate(workers)]
    results, errors = [], []
    for r, p in enumerate(procs):
        rc, out, err = finish(p, d / f"worker{r}", max_time + 60)
        if rc != 0:
            errors.append(f"worker {r}: exit {rc}: {err[-300:] or out[-300:]}")
        results.append(last_json(out))
    rc, out, err = finish(ps, d / "ps", 90)
    seconds = time.monotonic() - t0
    if rc != 0:
        errors.append(f"PS: exit {rc}: {err[-500:]}")
    after = eq.counters(port) if eq.has_counters else {}
    queues = {p: {k: after[p][k] - before.get(p, {}).get(k, 0) for k in after[p]} for p in after}
    return TransportRun(mode, not errors, last_json(out), results, queues, seconds, "; ".join(errors))


# ----------------------------------------------------------------------------- report


def _fmt(v: float | None, spec: str = ".3f") -> str:
    return "-" if v is None else format(v, spec)


def print_runs(runs: list[TransportRun], setup: QosSetup) -> None:
    """Tables: per run, per epoch, per queue."""
    t = Table(title="differentiated transmission: one run per transport (same seeds, same congestion); "
                    f"bottleneck: {setup.label()}")
    for col in ("transport", "iterations", "iteration (s)", "sync (s)", "PS rx bytes", "TCP bytes",
                "UDP bytes", "blocks missing (per level)", "late blocks", "final accuracy"):
        t.add_column(col, justify="left" if col == "transport" else "right")
    for r in runs:
        miss = r.ps.get("missing_blocks", {})
        t.add_row(r.mode, str(r.ps.get("iterations", "-")), _fmt(r.ps.get("iteration_mean_s")),
                  _fmt(r.sync_mean), f"{r.ps.get('nic_rx_bytes', 0):,}", f"{r.ps.get('tcp_bytes', 0):,}",
                  f"{r.ps.get('udp_bytes', 0):,}",
                  ", ".join(f"L{k}: {v}" for k, v in miss.items()) or "0",
                  str(r.ps.get("late_blocks", 0)), _fmt(r.accuracy, ".4f"))
    console.print(t)
    counted = any(r.queues for r in runs)
    q = Table(title=f"bottleneck {SWITCH} -> {PS_HOST}: {setup.label()}; "
                    + ("per-queue counters (priority: enqueued / dropped)" if counted else
                       "no per-queue counters (BMv2's runtime CLI has none): datagrams counted at the hosts"))
    q.add_column("transport")
    prios = sorted({p for r in runs for p, c in r.queues.items() if c.get("enqueued") or c.get("dropped")},
                   reverse=True)
    for p in prios:
        q.add_column(f"prio {p}", justify="right")
    q.add_column("datagrams sent / received per level", justify="right")
    for r in runs:
        sent = r.sent_datagrams()
        recv = r.ps.get("received_datagrams", {})
        per = ", ".join(f"L{lv}: {sent[lv]}/{recv.get(str(lv), 0)}" for lv in range(1, len(sent)) if sent[lv])
        q.add_row(r.mode, *(f"{r.queues.get(p, {}).get('enqueued', 0)} / {r.queues.get(p, {}).get('dropped', 0)}"
                            for p in prios), per or "-")
    console.print(q)
    e = Table(title=f"test accuracy per epoch (wall time since training start); bottleneck: {setup.label()}")
    e.add_column("epoch", justify="right")
    for r in runs:
        e.add_column(r.mode, justify="right")
    n = max((len(r.ps.get("epochs", [])) for r in runs), default=0)
    for i in range(n):
        row = [str(i)]
        for r in runs:
            ep = r.ps.get("epochs", [])
            row.append(f"{ep[i]['accuracy']:.4f} ({ep[i]['seconds']:.1f} s)" if i < len(ep) else "-")
        e.add_row(*row)
    console.print(e)


def ratios(runs: list[TransportRun]) -> dict[str, float | None]:
    """Time ratio and accuracy gap of each transport against all-reliable."""
    by = {r.mode: r for r in runs}
    base = by.get("reliable")
    out: dict[str, float | None] = {}
    for m, r in by.items():
        if base is None or m == "reliable":
            continue
        out[f"{m}_time_ratio"] = (r.sync_mean / base.sync_mean) if r.sync_mean and base.sync_mean else None
        out[f"{m}_iteration_ratio"] = (r.ps["iteration_mean_s"] / base.ps["iteration_mean_s"]
                                       if r.ps.get("iteration_mean_s") and base.ps.get("iteration_mean_s")
                                       else None)
        out[f"{m}_accuracy_gap_points"] = (100 * (base.accuracy - r.accuracy)
                                           if r.accuracy is not None and base.accuracy is not None else None)
        bt, rt = base.accuracy_tail(), r.accuracy_tail()
        out[f"{m}_accuracy_gap_last3_points"] = 100 * (bt - rt) if bt is not None and rt is not None else None
    return out


def print_ratios(rat: dict[str, float | None], setup: QosSetup | None = None) -> None:
    """The goal table: time ratio and accuracy gap vs all-reliable."""
    t = Table(title="against all-reliable (goal for differentiated: time ratio <= 0.7, gap <= 1 point)"
                    + (f"; bottleneck: {setup.label()}" if setup is not None else ""))
    t.add_column("transport")
    t.add_column("sync time ratio", justify="right")
    t.add_column("iteration time ratio", justify="right")
    t.add_column("accuracy gap, final epoch (points)", justify="right")
    t.add_column("accuracy gap, mean of last 3 epochs", justify="right")
    for m in ("differentiated", "unreliable"):
        if f"{m}_time_ratio" in rat:
            t.add_row(m, _fmt(rat[f"{m}_time_ratio"], ".2f"), _fmt(rat[f"{m}_iteration_ratio"], ".2f"),
                      _fmt(rat[f"{m}_accuracy_gap_points"], "+.2f"),
                      _fmt(rat[f"{m}_accuracy_gap_last3_points"], "+.2f"))
    console.print(t)


def plot(path: Path, runs: list[TransportRun]) -> None:
    """Accuracy vs wall time, one line per transport."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    colors = {"reliable": "tab:blue", "unreliable": "tab:gray", "differentiated": "tab:green"}
    for r in runs:
        ep = r.ps.get("epochs", [])
        if ep:
            ax.plot([e["seconds"] for e in ep], [e["accuracy"] for e in ep], marker="o", ms=3,
                    label=r.mode, color=colors.get(r.mode))
    ax.set_xlabel("wall time (s)")
    ax.set_ylabel("test accuracy")
    ax.set_title("digits CNN over a congested P4 switch")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ----------------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    """Options (defaults: a run of a few minutes on a 2-core machine)."""
    p = argtypes.Parser(prog="python -m experiments --mode differentiated",
                                description=described(__doc__),
                                epilog=f"--workers: the workers on the star (the PS is {PS_HOST}, "
                                       f"the switch {SWITCH}); --loss names ports of the star, "
                                       "the same in every transport's run.")
    p.add_argument("--epochs", type=argtypes.count, default=12, help="training epochs (default 12)")
    p.add_argument("--batch", type=argtypes.count, default=32, help="per-worker batch size (default 32)")
    p.add_argument("--lr", type=argtypes.positive, default=0.5, help="SGD learning rate (default 0.5)")
    p.add_argument("--channels", type=argtypes.count, default=8, help="CNN width (default 8)")
    p.add_argument("--port-rate", type=argtypes.nonnegative, default=300.0,
                   help="line rate of s1's port to the PS, packets/s (default 300)")
    p.add_argument("--static-partition", action="store_true",
                   help="cut the port rate into fixed per-queue rates instead of sharing it in strict "
                        "priority (always so on BMv2, which has no shared port rate)")
    p.add_argument("--top-share", type=argtypes.fraction, default=0.5,
                   help="static partition: the highest (important) queue's share of the port rate "
                        "(default 0.5; the lower levels' queues halve the rest from one to the next)")
    p.add_argument("--depth", type=argtypes.count, default=64, help="packets per queue (default 64)")
    p.add_argument("--top-depth", type=argtypes.count, default=64, help="packets in the highest queue (default 64)")
    p.add_argument("--levels", type=argtypes.integer(1, len(DSCP_LEVELS)), default=3, help="unreliable levels (default 3)")
    p.add_argument("--quantile", type=argtypes.probability, default=0.5,
                   help="importance threshold quantile (default 0.5: half the blocks important)")
    p.add_argument("--alpha", type=argtypes.probability, default=0.5, help="SANE smoothing factor (default 0.5)")
    p.add_argument("--block-size", type=argtypes.count, default=64, help="values per block of non-conv tensors")
    p.add_argument("--grace", type=argtypes.nonnegative, default=0.01,
                   help="PS wait for unreliable blocks after the important ones (s, default 0.01)")
    p.add_argument("--clip", type=argtypes.nonnegative, default=1.0,
                   help="PS: cap the averaged gradient's L2 norm at this value, in every transport "
                        "(default 1.0; 0: plain SGD, unstable at lr 0.5: docs/differentiated.md, 'Stability')")
    p.add_argument("--transports", default=",".join(MODES), help=f"which runs (default {','.join(MODES)})")
    opts.add_common(p, "differentiated", takes={
        "--seed": {"default": 0}, "--workers": {"default": 4}, "--bw": {"default": 20.0},
        "--loss": {}, "--max-time": {"default": 600.0}, "--target": {}, "--out-dir": {}},
        rejects={"--seeds": "it runs one seed (--seed N); run it once per seed",
                 "--target-accuracy": "it trains a fixed number of epochs (--epochs; time to "
                                      "accuracy: --mode train --scheme differentiated)"})
    return p


def run(args: argparse.Namespace, log: Any = _log) -> tuple[list[TransportRun], dict[str, Any]]:
    """Start the network, configure it, run every transport; return runs and summary."""
    from topologies.network import Network

    modes = [m.strip() for m in args.transports.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad:
        raise SystemExit(f"unknown transport(s) {bad}: choose from {', '.join(MODES)}")
    from controller.deploy import DeployError, check_loss

    topo = star(args.workers + 1, bw=args.bw)
    try:
        loss = check_loss(topo, opts.loss_dict(getattr(args, "loss", [])))
    except DeployError as e:
        raise SystemExit(f"--loss: {e}") from None
    setup = QosSetup(args.port_rate, args.depth, args.top_depth, args.levels,
                     queueing="partition" if args.static_partition else "shared", top_share=args.top_share)
    run_dir = Path(args.out_dir).resolve() / time.strftime("differentiated-%Y%m%d-%H%M%S")
    run_dir.mkdir(parents=True, exist_ok=True)
    console.save_to(run_dir)  # every table in full: tables.txt, tables.json, CSV
    common = ["--epochs", str(args.epochs), "--batch", str(args.batch), "--lr", str(args.lr),
              "--channels", str(args.channels), "--seed", str(args.seed), "--block-size", str(args.block_size)]
    wargs = ["--alpha", str(args.alpha), "--quantile", str(args.quantile), "--levels", str(args.levels)]
    log(f"star: PS {PS_HOST} + {args.workers} workers on {SWITCH}; {SWITCH}->{PS_HOST} line rate "
        f"{args.port_rate:g} pkt/s, queues {args.depth} pkts (top {args.top_depth}), links {args.bw:g} Mbit/s"
        + (f"; loss {', '.join(f'{sw}:{pt}={r:g}' for (sw, pt), r in loss.items())}" if loss else ""))
    log(f"DSCP -> priority: {dscp_priority_map(args.levels)} (EF {DSCP_IMPORTANT} = important, "
        f"levels {list(DSCP_LEVELS[:args.levels])}, best effort {DSCP_BEST_EFFORT} = all-unreliable)")
    runs: list[TransportRun] = []
    with Network(topo, target=args.target, priority_queues=NB_QUEUES, log=log) as net:
        eq = configure(net, topo, setup, loss)
        log(f"{SWITCH} ({net.target}) -> {PS_HOST}: {setup.label()}")
        for mode in modes:
            log(f"{mode}: training {args.epochs} epochs ...")
            r = run_transport(net, topo, eq, run_dir, mode, common, wargs,
                              ["--grace", str(args.grace), "--clip", str(args.clip)], args.max_time)
            log(f"{mode}: {'ok' if r.ok else 'FAILED ' + r.error}; {r.ps.get('iterations', 0)} iterations in "
                f"{r.seconds:.1f} s, sync {_fmt(r.sync_mean)} s, accuracy {_fmt(r.accuracy, '.4f')}")
            runs.append(r)
    rat = ratios(runs)
    summary = {"setup": asdict(setup), "args": vars(args), "runs": [asdict(r) for r in runs], "ratios": rat,
               "dscp_priority": dscp_priority_map(args.levels)}
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    plot(run_dir / "accuracy_vs_time.png", runs)
    summary["run_dir"] = str(run_dir)
    return runs, summary


def main(argv: list[str]) -> int:
    """Entry point of ``--mode differentiated``."""
    parser = build_parser()
    args = parser.parse_args(argv)
    bad = [m for m in (t.strip() for t in args.transports.split(",")) if m and m not in MODES]
    if bad or not args.transports.strip(", "):
        parser.error(f"--transports: choose from {', '.join(MODES)} (got {args.transports!r})")
    from controller.deploy import DeployError, check_loss
    from topologies import TopologyError

    try:
        check_loss(star(args.workers + 1, bw=args.bw), opts.loss_dict(args.loss))
    except (DeployError, TopologyError) as e:
        parser.error(f"--loss: {e}")
    try:
        opts.check_full_batch(args.workers, args.batch, seed=args.seed)
    except argtypes.OptionError as e:
        argtypes.fail(parser, e)
    if os.geteuid() != 0:
        console.print("[red]the experiment needs root (network namespaces)[/red]")
        return 2
    runs, summary = run(args)
    setup = QosSetup(**summary["setup"])
    print_runs(runs, setup)
    print_ratios(summary["ratios"], setup)
    console.print(f"results: {summary['run_dir']}/summary.json, {summary['run_dir']}/accuracy_vs_time.png")
    return 0 if all(r.ok for r in runs) else 1
