"""Differentiated transmission: time ratio and accuracy gap against all-reliable.

One star network (PS + N workers on one P4 switch whose port to the PS is congested:
a line rate in packets/s below the offered load). The same digits-CNN training (same
seeds) runs all-reliable, then differentiated at each importance quantile, then
all-unreliable for contrast. Prints one table: synchronisation time, its ratio to
all-reliable, final and last-3-epoch accuracy, the gap in points, and the share of
unreliable datagrams each level lost. Goal: gap <= 1 point at time ratio <= 0.7.

    python -m bench.differentiated_bench [--quantiles 0.5] [--epochs 12] [--port-rate 300]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from rich.table import Table

from controller.output import TableConsole
from experiments.differentiated import QosSetup, TransportRun, configure, run_transport
from hosts.differentiated.wire import NB_QUEUES
from topologies import star

console = TableConsole()


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: run the transports, print the table."""
    p = argparse.ArgumentParser(prog="python -m bench.differentiated_bench", description=__doc__.splitlines()[0])
    p.add_argument("--quantiles", default="0.5", help="importance quantiles to try (comma-separated)")
    p.add_argument("--workers", type=int, default=4, help="number of workers (default 4)")
    p.add_argument("--epochs", type=int, default=12, help="training epochs (default 12)")
    p.add_argument("--port-rate", type=float, default=300.0, help="bottleneck line rate, packets/s")
    p.add_argument("--depth", type=int, default=64, help="packets per queue")
    p.add_argument("--grace", type=float, default=0.01, help="PS wait for unreliable blocks (s)")
    p.add_argument("--no-unreliable", action="store_true", help="skip the all-unreliable contrast")
    p.add_argument("--target", default=None, help="auto|embedded|bmv2")
    args = p.parse_args(argv)
    if os.geteuid() != 0:
        print("differentiated_bench needs root (network namespaces)", file=sys.stderr)
        return 0
    from targets.launch import resolve_target
    from topologies.network import Network

    if resolve_target(args.target) != "embedded":
        print("differentiated_bench: the congested port needs the embedded target's port rate "
              "(BMv2's priority queues only have independent per-queue rates)")
        return 0
    quantiles = [float(q) for q in args.quantiles.split(",") if q.strip()]
    topo = star(args.workers + 1, bw=20)
    common = ["--epochs", str(args.epochs)]
    runs: list[tuple[str, float | None, TransportRun]] = []
    out = Path(tempfile.mkdtemp(prefix="gradnet-diffbench-"))
    with Network(topo, target=args.target, priority_queues=NB_QUEUES) as net:
        eq = configure(net, topo, QosSetup(args.port_rate, args.depth))
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
                    f"{args.port_rate:g} pkt/s (goal: gap <= 1 point at time ratio <= 0.7)")
    for col in ("transport", "quantile", "sync (s)", "time ratio", "final acc", "last-3 acc", "gap (pts)",
                "gap last-3 (pts)", "datagrams lost per level"):
        t.add_column(col, justify="left" if col == "transport" else "right")
    rc = 0
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
