"""INA vs PS-only: synchronization time and PS ingress bytes for 4, 8 and 15 workers.

One fat-tree k=4 with bandwidth-limited links; for each worker count, the same
gradients go through in-network aggregation (greedy + LP placement, K switches) and
through the PS alone. Every result is checked element by element against the exact
sum. Prints one table with both runs and the ratios.

    python -m bench.ina_bench [--workers 4,8,15] [--values 16384] [--bw 2] [--budget 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from controller.experiment import run_jobs, switch_neighbors
from controller.ina import InaDeployment, InaJob
from topologies import fat_tree

console = Console()


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: run every worker count, print the table."""
    p = argparse.ArgumentParser(prog="python -m bench.ina_bench", description=__doc__.splitlines()[0])
    p.add_argument("--workers", default="4,8,15", help="comma-separated worker counts (max 15)")
    p.add_argument("--values", type=int, default=16384, help="gradient size (float32 values)")
    p.add_argument("--bw", type=float, default=2.0, help="link bandwidth in Mbit/s")
    p.add_argument("--budget", type=int, default=2, help="K programmable switches")
    p.add_argument("--target", default=None, help="auto|embedded|bmv2")
    args = p.parse_args(argv)
    if os.geteuid() != 0:
        print("ina_bench needs root (network namespaces)", file=sys.stderr)
        return 2
    from topologies.network import Network

    topo = fat_tree(4, bw=args.bw)
    hosts = topo.hosts()
    counts = [int(x) for x in args.workers.split(",")]
    if any(not 1 <= n <= len(hosts) - 1 for n in counts):
        p.error(f"worker counts must be within 1..{len(hosts) - 1}")
    rows = []
    out = Path(tempfile.mkdtemp(prefix="gradnet-ina-bench-"))
    with Network(topo, target=args.target) as net:
        switch_neighbors(net, topo, topo.switches())
        for n in counts:
            workers = hosts[len(hosts) - n:]  # farthest from the PS first
            rng = np.random.default_rng(n)
            grads = [(rng.standard_normal(args.values) * 0.01).astype(np.float32) for _ in workers]
            res = {}
            for mode, aggregate in (("ina", True), ("ps", False)):
                console.print(f"[dim]{n} workers, {mode} ...[/dim]")
                job = InaJob.plan(topo, hosts[0], workers, args.budget, 1000.0, args.values,
                                  aggregate=aggregate)
                InaDeployment(topo, net.grpc_addresses(), [job]).deploy()
                (res[mode],) = run_jobs(net, topo, [(job, grads)], out, f"{mode}{n}")
            rows.append((n, res["ina"], res["ps"]))
    t = Table(title=f"INA vs PS only, fat-tree k=4, {args.bw:g} Mbit/s links, {args.values} values, K={args.budget}")
    for col in ("workers", "INA s", "PS s", "time ratio", "INA PS-in bytes", "PS PS-in bytes",
                "bytes ratio", "1.2/N", "exact"):
        t.add_column(col, justify="right")
    for n, ina, ps in rows:
        t.add_row(str(n), f"{ina.seconds:.2f}", f"{ps.seconds:.2f}", f"{ina.seconds / ps.seconds:.2f}",
                  f"{ina.ps_rx_bytes:,}", f"{ps.ps_rx_bytes:,}", f"{ina.ps_rx_bytes / ps.ps_rx_bytes:.3f}",
                  f"{1.2 / n:.3f}", "yes" if ina.exact and ps.exact else "NO")
    console.print(t)
    return 0 if all(i.exact and s.exact for _, i, s in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
