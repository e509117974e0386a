"""BML on BCube vs sharded PS and ring all-reduce on a fat-tree: sync time and model ratios.

For each BCube size (default BCube(3,2), BCube(2,3), BCube(4,2)): BML on a live BCube
(the seed's one thread per parameter set, and pipelined in 4 pieces per set), then the
sharded PS and ring all-reduce on one fat-tree k=4 with as many servers, one NIC each,
the same host link rate (fabric links 4x: non-blocking). Every result is checked
element by element against the exact fixed-point sum. Prints the times, each
scheme's measured / line-rate model, and BML / sharded PS and BML / ring next to the
goal (<= 1.2/k). The single PS is in ``--mode bcube`` only: (S-1) times slower, it
would take minutes here.

    python -m bench.bcube_bench [--sizes 3x2,2x3,4x2] [--bw 1] [--values 65536]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from rich.table import Table

from controller.bcube import choose_scale_bits, gradients
from controller.output import TableConsole
from experiments.bcube import run_baselines, run_bml
from experiments.schemes import SchemeResult
from hosts.bml.schedule import ScheduleError

console = TableConsole()


def _quiet(msg: str) -> None:
    console.print(f"[dim]{time.strftime('%H:%M:%S')} {msg}[/dim]")


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: every size, one table."""
    p = argparse.ArgumentParser(prog="python -m bench.bcube_bench", description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="3x2,2x3,4x2", help="comma-separated NxK BCube sizes")
    p.add_argument("--bw", type=float, default=1.0, help="link rate in Mbit/s (default 1)")
    p.add_argument("--values", type=int, default=65536, help="gradient length (float32 values)")
    p.add_argument("--pipeline", type=int, default=4, help="pieces per set of the pipelined BML run")
    p.add_argument("--target", default=None, help="auto|embedded|bmv2")
    args = p.parse_args(argv)
    try:
        sizes = [tuple(int(x) for x in s.split("x")) for s in args.sizes.split(",")]
        for n, k in sizes:
            if n**k > 16:
                raise ScheduleError(f"BCube({n},{k}) has {n**k} servers; the fat-tree has 16")
    except (ValueError, ScheduleError) as e:
        p.error(f"--sizes: {e}")
    if os.geteuid() != 0:
        print("bcube_bench needs root (network namespaces)", file=sys.stderr)
        return 2
    out = Path(tempfile.mkdtemp(prefix="gradnet-bcube-bench-"))
    rows: list[tuple[int, int, list[SchemeResult]]] = []
    grads, bits = {}, {}
    for n, k in sizes:
        servers = n**k
        grads[servers] = gradients(servers, args.values, seed=servers)
        bits[servers] = choose_scale_bits(grads[servers])
        results = []
        for pipeline in (1, args.pipeline):
            res, _ = run_bml(n, k, args.bw, args.values, grads[servers], bits[servers],
                             out / f"bcube{n}{k}-p{pipeline}", args.target, pipeline=pipeline,
                             log=_quiet)
            res.scheme = f"bml/{pipeline}"
            results.append(res)
        rows.append((n, k, results))
    # one fat-tree for every server count: the same gradients as the BCube runs
    counts = list(dict.fromkeys(n**k for n, k in sizes))
    base = run_baselines(counts, args.bw, args.values, grads, bits, ["sharded_ps", "ring"],
                         out / "fat-tree", args.target, fabric_x=4.0, log=_quiet)
    by_count = {(r.servers, r.scheme): r for r in base}
    for n, k, results in rows:
        results += [by_count[n**k, "sharded_ps"], by_count[n**k, "ring"]]
    t = Table(title=f"BML on BCube vs fat-tree baselines: {args.values * 4:,}-byte gradients, "
                    f"{args.bw:g} Mbit/s links (measured s / line-rate model s)")
    for col in ("BCube", "servers", "BML 1 thr/set", f"BML {args.pipeline} pieces/set",
                "sharded PS", "ring", "BML/sharded PS", "BML/ring", "goal 1.2/k", "exact"):
        t.add_column(col, justify="right")
    ok = True
    for n, k, results in rows:
        b1, bp, sp, ring = results
        ok &= all(r.exact for r in results)

        def cell(r: SchemeResult) -> str:
            return f"{r.seconds:.2f} / {r.model_s:.2f} ({r.ratio:.2f}x)"

        t.add_row(f"({n},{k})", str(n**k), cell(b1), cell(bp), cell(sp), cell(ring),
                  f"{bp.seconds / sp.seconds:.3f}", f"{bp.seconds / ring.seconds:.3f}",
                  f"{1.2 / k:.3f}", "yes" if all(r.exact for r in results) else "NO")
    console.print(t)
    console.print(f"(x): measured / model, goal <= 1.3. The ratios use the pipelined BML run "
                  f"(the experiment's default). Runs in {out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
