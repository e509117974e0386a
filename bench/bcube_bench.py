"""BML on BCube vs baselines with the same NIC count (k-rail) and with one NIC (fat-tree).

For each BCube size (default BCube(3,2) and BCube(2,3)), one
:func:`experiments.bcube.compare`: BML on a live BCube; on a k-rail network (every
server k NICs at the same rate, NIC j into rail j's own leaf-spine) k concurrent ring
all-reduces and k concurrent sharded PSs, one per rail on 1/k of the gradient; on the
smallest fat-tree (one NIC each, same host link rate, fabric links 4x: non-blocking) the
ring and the sharded PS. Every scheme is first tuned over its knob (BML: pieces per
parameter set; rings: pieces per chunk; sharded PSs: pieces per shard) on a gradient of
its own seed -- the sweep is printed -- and then run with its fastest setting on the
same gradients for every seed. Every result is checked element by element against the
exact fixed-point sum. Prints the sweep, the comparison (mean sync time ± 95 % CI over
the seeds, the line-rate bound, BML's time over each scheme's paired by seed) and the
verdict per size, then one summary table. The single PS is in ``--mode bcube`` only:
(S-1) times slower, it would take minutes here.

    python -m bench.bcube_bench [--sizes 3x2,2x3] [--seeds 3] [--bw 1] [--values 65536]

About 6 minutes per size on this 2-core machine (more when it is shared).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from rich.table import Table

from controller.output import TableConsole
from experiments.bcube import LABELS, compare, print_comparison
from experiments.stats import format_interval
from wire.argtypes import described
from wire.bcube_schedule import ScheduleError

console = TableConsole()
SCHEMES = ["bml", "rail_ring", "rail_sharded_ps", "sharded_ps", "ring"]


def _quiet(msg: str) -> None:
    console.print(f"[dim]{time.strftime('%H:%M:%S')} {msg}[/dim]")


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: every size, its tables, one summary."""
    p = argparse.ArgumentParser(prog="python -m bench.bcube_bench", description=described(__doc__))
    p.add_argument("--sizes", default="3x2,2x3", help="comma-separated NxK BCube sizes")
    p.add_argument("--seeds", type=int, default=3, help="gradient seeds 1..N (default 3)")
    p.add_argument("--bw", type=float, default=1.0, help="link rate in Mbit/s (default 1)")
    p.add_argument("--values", type=int, default=65536, help="gradient length (float32 values)")
    p.add_argument("--tune-pipeline", default="1,2,4,8", help="BML pipeline values swept")
    p.add_argument("--tune-pieces", default="1,2,4,8,16",
                   help="pieces per chunk / shard swept for every ring and sharded PS")
    p.add_argument("--rail-fabric", default="leaf-spine", choices=("leaf-spine", "fat-tree"))
    p.add_argument("--target", default=None, help="auto|embedded|bmv2")
    args = p.parse_args(argv)
    try:
        sizes = [tuple(int(x) for x in s.split("x")) for s in args.sizes.split(",")]
        for n, k in sizes:
            if n**k > 16:
                raise ScheduleError(f"BCube({n},{k}) has {n**k} servers; the fat-tree has 16")
        pipeline, pieces = _ints(args.tune_pipeline), _ints(args.tune_pieces)
        if args.seeds < 1:
            raise ValueError("--seeds must be >= 1")
    except (ValueError, ScheduleError) as e:
        p.error(str(e))
    if os.geteuid() != 0:
        print("bcube_bench needs root (network namespaces)", file=sys.stderr)
        return 2
    out = Path(tempfile.mkdtemp(prefix="gradnet-bcube-bench-"))
    console.save_to(out)
    seeds = list(range(1, args.seeds + 1))
    grid = {sc: (pipeline if sc == "bml" else pieces) for sc in SCHEMES}
    t0 = time.monotonic()
    load0 = os.getloadavg()[0]
    comparisons = []
    for n, k in sizes:
        cmp = compare(n, k, args.bw, args.values, seeds, SCHEMES, out / f"bcube{n}{k}",
                      args.target, rail_fabric=args.rail_fabric, grid=grid, log=_quiet)
        data = print_comparison(cmp, f"BCube({n},{k}), {n**k} servers: {args.values * 4:,}-byte "
                                     f"gradients, {args.bw:g} Mbit/s links, seeds {seeds}")
        (out / f"bcube{n}{k}.json").write_text(json.dumps(data, indent=2, default=str))
        comparisons.append(cmp)
    t = Table(title="summary: sync s (mean ± 95% CI over seeds) and BML ÷ scheme (paired)")
    t.add_column("BCube", justify="right")
    for sc in SCHEMES:
        t.add_column(LABELS[sc], justify="right")
    t.add_column("exact", justify="right")
    for cmp in comparisons:
        cells = []
        for sc in SCHEMES:
            iv = cmp.interval(sc)
            bound = sum(r.model_s for r in cmp.runs[sc]) / len(cmp.runs[sc])
            cell = f"{format_interval(iv)} (bound {bound:.2f})"
            if sc != "bml":
                cell += f"; BML÷ {format_interval(cmp.bml_over(sc), '.2f')}"
            cells.append(cell)
        t.add_row(f"({cmp.n},{cmp.k})", *cells, "yes" if cmp.exact else "NO")
    console.print(t)
    console.print(f"wall time {time.monotonic() - t0:.0f} s; load average {load0:.2f} at the start, "
                  f"{os.getloadavg()[0]:.2f} at the end. Runs in {out}")
    return 0 if all(c.exact for c in comparisons) else 1


if __name__ == "__main__":
    sys.exit(main())
