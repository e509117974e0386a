"""Differentiated transmission: per-target priority queues, then time ratio and accuracy
gap against all-reliable.

First table, per target (the embedded target and, when installed, real BMv2 1.15): the
same fixed gradient (a conv weight and 96 blocks of 300 values, magnitudes growing with
the block number) sent differentiated by three workers through s1's port to the PS, a
bottleneck of ``--port-rate`` packets/s, for ``--rounds`` rounds. The embedded target
runs it twice, with the rate shared by its queues in strict priority and with a static
partition of it among the queues; BMv2 only has the latter (independent per-queue
rates, ``set_queue_rate`` per priority over ``simple_switch_CLI``: no shared port rate).
Columns: important blocks delivered (PS / workers' counts), the time until every
important block of a round is in (the PS's round time less its grace wait for unimportant
blocks) against its bound (the round's important packets, estimated from the TCP bytes in
full segments, over the rate their queue may use), the round time, unimportant datagrams lost per level (host counts) and the switch's drops
(embedded only: BMv2's runtime CLI has no queue counters).

Then one star network (PS + N workers on one P4 switch whose port to the PS is congested:
a line rate in packets/s below the offered load). The same digits-CNN training (same
seeds) runs all-reliable, then differentiated at each importance quantile, then
all-unreliable for contrast. Prints one table: synchronisation time, its ratio to
all-reliable, final and last-3-epoch accuracy, the gap in points, and the share of
unreliable datagrams each level lost. Goal: gap <= 1 point at time ratio <= 0.7.

    python -m bench.differentiated_bench [--quantiles 0.5] [--epochs 12] [--port-rate 300]
                                         [--targets embedded,bmv2] [--no-training]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from rich.table import Table

from bench.differentiated_ablation import check_workers
from controller.output import TableConsole
from experiments.differentiated import QosSetup, TransportRun, configure, run_transport
from topologies import star
from wire.argtypes import (
    Parser,
    count,
    described,
    listed,
    names,
    nonnegative,
    probability,
)
from wire.differentiated import NB_QUEUES, level_priority

console = TableConsole()

LEVELS = 3
BLOCK = 300  # values per block of the flat tensor: one block message per datagram
MSS = 1448  # TCP payload of a full-size segment (1,500-byte MTU, timestamps on)


def _gradient(path: Path) -> None:
    """tests/test_differentiated_network.py's tensors: the contribution ranking is known."""
    rng = np.random.default_rng(7)
    conv = (rng.standard_normal((8, 2, 3, 3)) * 1e-3).astype(np.float32)
    scale = np.repeat(np.arange(1, 97, dtype=np.float32), BLOCK)
    flat = (np.sign(rng.standard_normal(96 * BLOCK)) * scale * (1 + 0.1 * rng.random(96 * BLOCK))).astype(np.float32)
    np.savez(path, conv, flat)


def target_rows(target: str, args: argparse.Namespace, out: Path) -> list[dict[str, Any]]:
    """One star on ``target``; a fixed-gradient differentiated run per queueing (embedded:
    shared strict priority and static partition; BMv2: static partition)."""
    from topologies.network import Network

    rows = []
    topo = star(4, bw=20)
    grad = out / "grad.npz"
    _gradient(grad)
    queueings = ["shared", "partition"] if target == "embedded" else ["partition"]
    with Network(topo, target=target, priority_queues=NB_QUEUES) as net:
        for queueing in queueings:
            setup = QosSetup(args.port_rate, depth=8, top_depth=64, levels=LEVELS, queueing=queueing)
            eq = configure(net, topo, setup)
            d = out / f"{target}-{queueing}"
            common = ["--gradient", str(grad), "--iterations", str(args.rounds), "--block-size", str(BLOCK)]
            wargs = ["--alpha", "0", "--quantile", str(args.target_quantile), "--levels", str(LEVELS),
                     "--udp-pps", str(args.udp_pps)]
            r = run_transport(net, topo, eq, d, "differentiated", common, wargs,
                              ["--grace", str(args.target_grace), "--linger", "1.0"], max_time=300)
            rows.append({"target": target, "setup": setup, "run": r})
            console.print(f"{target}, {setup.label()}: {'ok' if r.ok else r.error}")
    return rows


def print_target_table(rows: list[dict[str, Any]], args: argparse.Namespace) -> int:
    """The per-target table; 1 if a run failed or lost an important block."""
    t = Table(title=f"priority queues per target: 3 workers send a fixed gradient differentiated (quantile "
                    f"{args.target_quantile:g}, {LEVELS} levels, {args.udp_pps:g} datagrams/s each) through a "
                    f"bottleneck of {args.port_rate:g} pkt/s, {args.rounds} rounds; BMv2 has no shared port "
                    "rate: there the bottleneck is a STATIC PARTITION among the queues")
    for col in ("target", "bottleneck (prio:pkt/s)", "important queue pkt/s", "important blocks delivered",
                "important in (s/round)", "bound, est. (s/round)", "round (s)", "unimportant lost per level",
                "switch drops (prio: n)"):
        t.add_column(col, justify="left" if col in ("target", "bottleneck (prio:pkt/s)") else "right")
    rc = 0
    for row in rows:
        setup, r = row["setup"], row["run"]
        ps = r.ps
        sent_imp = sum(w.get("sent_blocks", [0])[0] for w in r.workers)
        got_imp = int(ps.get("received_blocks", {}).get("0", 0))
        rc |= 0 if r.ok and got_imp == sent_imp else 1
        top_rate = setup.rates.get(NB_QUEUES - 1, setup.port_rate) if setup.queueing == "partition" \
            else setup.port_rate
        its = int(ps.get("iterations") or 0)
        # the round's important packets: each worker's manifest and blocks, in full segments
        imp_pkts = (len(r.workers) * math.ceil(ps.get("tcp_bytes", 0) / max(1, its * len(r.workers)) / MSS)
                    if its else 0)
        important_in = (ps["iteration_mean_s"] - (ps.get("grace_mean_s") or 0.0)
                        if ps.get("iteration_mean_s") is not None else None)
        sent = r.sent_datagrams()
        recv = ps.get("received_datagrams", {})
        lost = ", ".join(f"L{lv}: {1 - recv.get(str(lv), 0) / sent[lv]:.0%}" for lv in range(1, len(sent))
                         if sent[lv])
        drops = ", ".join(f"{level_priority(lv, LEVELS)}: {r.queues[level_priority(lv, LEVELS)]['dropped']}"
                          for lv in range(1, LEVELS + 1)) + f", {NB_QUEUES - 1}: {r.queues[NB_QUEUES - 1]['dropped']}" \
            if r.queues else "n/a (no counters)"
        bottleneck = (f"{setup.port_rate:g} shared, strict priority" if setup.queueing != "partition" else
                      "STATIC PARTITION " + " ".join(f"{p}:{v}" for p, v in setup.rates.items() if v > 1)
                      + " (others 1)")
        t.add_row(f"{row['target']}" + (" (BMv2 1.15)" if row["target"] == "bmv2" else ""), bottleneck,
                  f"{top_rate:g}", f"{got_imp}/{sent_imp}",
                  "-" if important_in is None else f"{important_in:.3f}",
                  f"{imp_pkts / top_rate:.3f}" if top_rate else "-",
                  "-" if ps.get("iteration_mean_s") is None else f"{ps['iteration_mean_s']:.3f}",
                  lost or "-", drops)
    console.print(t)
    return rc


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: run the transports, print the table."""
    p = Parser(prog="python -m bench.differentiated_bench", description=described(__doc__))
    p.add_argument("--quantiles", type=listed(probability), default=[0.5],
                   help="importance quantiles to try (comma-separated, each in [0, 1])")
    p.add_argument("--workers", type=count, default=4, help="number of workers (default 4)")
    p.add_argument("--epochs", type=count, default=12, help="training epochs (default 12)")
    p.add_argument("--port-rate", type=nonnegative, default=300.0, help="bottleneck line rate, packets/s")
    p.add_argument("--depth", type=count, default=64, help="packets per queue")
    p.add_argument("--grace", type=nonnegative, default=0.01, help="PS wait for unreliable blocks (s)")
    p.add_argument("--no-unreliable", action="store_true", help="skip the all-unreliable contrast")
    p.add_argument("--target", choices=("auto", "embedded", "bmv2"), default=None,
                   help="the training comparison's target")
    p.add_argument("--targets", type=names("embedded", "bmv2"), default=None,
                   help="targets of the per-target table (default: embedded, and bmv2 when installed)")
    p.add_argument("--rounds", type=count, default=10, help="per-target table: rounds of the fixed gradient")
    p.add_argument("--target-quantile", type=probability, default=0.9, help="per-target table: importance quantile")
    p.add_argument("--udp-pps", type=nonnegative, default=0.0,
                   help="per-target table: datagrams/s per worker (default 0: unpaced, the 20 Mbit/s links pace)")
    p.add_argument("--target-grace", type=nonnegative, default=0.05, help="per-target table: PS grace (s)")
    p.add_argument("--no-targets", action="store_true", help="skip the per-target table")
    p.add_argument("--no-training", action="store_true", help="skip the training comparison")
    args = p.parse_args(argv)
    check_workers(p, args.workers)
    if os.geteuid() != 0:
        print("differentiated_bench needs root (network namespaces)", file=sys.stderr)
        return 0
    from targets.launch import bmv2_available
    from topologies.network import Network

    rc = 0
    if not args.no_targets:
        targets = args.targets or ["embedded"] + (["bmv2"] if bmv2_available() else [])
        if "bmv2" not in targets:
            console.print("per-target table: BMv2 not installed (simple_switch_grpc), embedded target only")
        rows: list[dict[str, Any]] = []
        tdir = Path(tempfile.mkdtemp(prefix="gradnet-diffbench-targets-"))
        for target in targets:
            rows += target_rows(target, args, tdir)
        rc |= print_target_table(rows, args)
    if args.no_training:
        return rc
    quantiles = args.quantiles
    topo = star(args.workers + 1, bw=20)
    common = ["--epochs", str(args.epochs)]
    runs: list[tuple[str, float | None, TransportRun]] = []
    out = Path(tempfile.mkdtemp(prefix="gradnet-diffbench-"))
    setup = QosSetup(args.port_rate, args.depth)
    with Network(topo, target=args.target, priority_queues=NB_QUEUES) as net:
        eq = configure(net, topo, setup)
        plan: list[tuple[str, float | None]] = [("reliable", None)] + [("differentiated", q) for q in quantiles]
        if not args.no_unreliable:
            plan.append(("unreliable", None))
        for mode, q in plan:
            wargs = ["--quantile", str(q)] if q is not None else []
            r = run_transport(net, topo, eq, out / f"{mode}-{q}", mode, common, wargs, ["--grace", str(args.grace)],
                              max_time=900)
            console.print(f"{mode}{'' if q is None else f' q={q}'}: {'ok' if r.ok else r.error}, "
                          f"sync {r.sync_mean or 0:.3f} s, accuracy {r.accuracy or 0:.4f}")
            runs.append((mode, q, r))
    base = runs[0][2]
    t = Table(title=f"differentiated vs all-reliable: {args.workers} workers, {args.epochs} epochs, bottleneck "
                    f"{setup.label()} (goal: gap <= 1 point at time ratio <= 0.7)")
    for col in ("transport", "quantile", "sync (s)", "time ratio", "final acc", "last-3 acc", "gap (pts)",
                "gap last-3 (pts)", "datagrams lost per level"):
        t.add_column(col, justify="left" if col == "transport" else "right")
    for mode, q, r in runs:
        rc |= 0 if r.ok else 1
        sent = r.sent_datagrams()
        recv = r.ps.get("received_datagrams", {})
        lost = ", ".join(f"L{lv}: {1 - recv.get(str(lv), 0) / sent[lv]:.0%}" for lv in range(1, len(sent)) if sent[lv])
        ratio = r.sync_mean / base.sync_mean if r.sync_mean and base.sync_mean else None
        gap = 100 * (base.accuracy - r.accuracy) if r.accuracy is not None and base.accuracy is not None else None
        bt, rt = base.accuracy_tail(), r.accuracy_tail()
        t.add_row(mode, "-" if q is None else f"{q:g}", f"{r.sync_mean or 0:.3f}",
                  "-" if ratio is None else f"{ratio:.2f}", f"{r.accuracy or 0:.4f}", f"{rt or 0:.4f}",
                  "-" if gap is None else f"{gap:+.2f}", "-" if bt is None or rt is None else f"{100 * (bt - rt):+.2f}",
                  lost or "-")
    console.print(t)
    return rc


if __name__ == "__main__":
    sys.exit(main())
