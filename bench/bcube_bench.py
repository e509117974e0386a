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
from wire.argtypes import Parser, count, described, integer, listed, positive, values

console = TableConsole()
SCHEMES = ["bml", "rail_ring", "rail_sharded_ps", "sharded_ps", "ring"]


def _quiet(msg: str) -> None:
    console.print(f"[dim]{time.strftime('%H:%M:%S')} {msg}[/dim]")


def _sizes(text: str) -> list[tuple[int, int]]:
    """``--sizes``: comma-separated ``NxK``, N >= 2, K >= 1, at most 16 servers (the fat-tree's hosts)."""
    out = []
    for s in (s.strip() for s in text.split(",") if s.strip()):
        n_k = s.split("x")
        if len(n_k) != 2 or not all(x.strip().isdigit() for x in n_k):
            raise argparse.ArgumentTypeError(f"{s!r} is not NxK (e.g. 3x2)")
        n, k = int(n_k[0]), int(n_k[1])
        if n < 2 or k < 1:
            raise argparse.ArgumentTypeError(f"BCube({n},{k}): N must be >= 2 and K >= 1")
        if n**k > 16:
            raise argparse.ArgumentTypeError(f"BCube({n},{k}) has {n**k} servers; the fat-tree has 16")
        out.append((n, k))
    if not out:
        raise argparse.ArgumentTypeError(f"expected comma-separated NxK sizes (got {text!r})")
    return out


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: every size, its tables, one summary."""
    p = Parser(prog="python -m bench.bcube_bench", description=described(__doc__))
    p.add_argument("--sizes", type=_sizes, default=[(3, 2), (2, 3)],
                   help="comma-separated NxK BCube sizes, at most 16 servers each (default 3x2,2x3)")
    p.add_argument("--seeds", type=count, default=3, help="gradient seeds 1..N (default 3)")
    p.add_argument("--bw", type=positive, default=1.0, help="link rate in Mbit/s (default 1)")
    p.add_argument("--values", type=values, default=65536, help="gradient length (float32 values)")
    p.add_argument("--tune-pipeline", type=listed(integer(1, 64)), default=[1, 2, 4, 8],
                   help="BML pipeline values swept (each in 1..64)")
    p.add_argument("--tune-pieces", type=listed(integer(1, 64)), default=[1, 2, 4, 8, 16],
                   help="pieces per chunk / shard swept for every ring and sharded PS (each in 1..64)")
    p.add_argument("--rail-fabric", default="leaf-spine", choices=("leaf-spine", "fat-tree"))
    p.add_argument("--target", choices=("auto", "embedded", "bmv2"), default=None)
    args = p.parse_args(argv)
    sizes, pipeline, pieces = args.sizes, args.tune_pipeline, args.tune_pieces
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
