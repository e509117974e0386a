"""INA with more workers than the suite runs: 64 ranks (or ``--workers``), 5 % loss.

A leaf-spine network (2 spines, enough leaves of 14 hosts for the PS and the workers),
the workers on every leaf but the PS's first host, 5 % loss on every port of the
workers' leaves; one plain fixed-point allreduce and one in block floating point (a
gradient spanning 2^-20..2^20), each checked element by element against the exact
integer sums (``experiments.ina.run_jobs``). Prints the time, retransmissions and the
PS's packets of each. The suite runs 40 workers (tests/test_ina_scale_network.py).

    python -m bench.ina_scale_bench [--workers 64] [--values 1024] [--loss 0.05]
                                    [--target embedded|bmv2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from controller.ina import InaDeployment, InaJob
from controller.output import TableConsole
from experiments.ina import run_jobs, switch_neighbors
from topologies import leaf_spine
from wire.argtypes import MAX_VALUES, Parser, described, integer, number, positive, values
from wire.ina import INA_VALUES


def spanning(n_w: int, blocks: int, seed: int) -> list[np.ndarray]:
    """Gradients whose block ``b`` is around ``2^(40 b/(blocks-1) - 20)``."""
    rng = np.random.default_rng(seed)
    mag = np.repeat(2.0 ** np.linspace(-20, 20, blocks), INA_VALUES)
    return [(mag * rng.choice([-1, 1], mag.size) * rng.uniform(2**-4, 1, mag.size))
            .astype(np.float32) for _ in range(n_w)]


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: both runs, one table."""
    p = Parser(prog="python -m bench.ina_scale_bench", description=described(__doc__))
    p.add_argument("--workers", type=integer(1, 256), default=64, help="workers of the job (an INA job has 1..256)")
    p.add_argument("--values", type=values, default=1024, help="values of the fixed-point run")
    p.add_argument("--blocks", type=integer(1, MAX_VALUES // INA_VALUES), default=41, help="blocks of the BFP run")
    p.add_argument("--loss", type=number(0.0, below=1.0), default=0.05,
                   help="loss rate on every edge switch port, in [0, 1) (default 0.05)")
    p.add_argument("--target", choices=("auto", "embedded", "bmv2"), default=None,
                   help="switch target (default: embedded)")
    p.add_argument("--max-time", type=positive, default=300.0, help="bound on each run (s)")
    p.add_argument("--run-dir", help="keep the agents' logs here (default: a temporary dir)")
    p.add_argument("--only", choices=("fixed", "bfp"), help="run one format only")
    args = p.parse_args(argv)
    from rich.table import Table

    leaves = -(-(args.workers + 2) // 14)
    topo = leaf_spine(2, leaves, 14, bw=50)
    workers = [h for h in topo.hosts() if h not in ("h1", "h2")][: args.workers]
    if len(workers) < args.workers:
        print(f"only {len(workers)} hosts for workers", file=sys.stderr)
        return 2
    rng = np.random.default_rng(64)
    fixed = [(rng.standard_normal(args.values) * 0.05).astype(np.float32) for _ in workers]
    runs = [("fixed", InaJob.plan(topo, "h1", workers, 2, 1000.0, args.values, job_id=1),
             fixed),
            ("bfp", InaJob.plan(topo, "h1", workers, 2, 1000.0, args.blocks * INA_VALUES,
                                job_id=2, number_format="bfp"),
             spanning(len(workers), args.blocks, 7))]
    edge = {topo.iface(w)["switch"] for w in workers}
    loss = {(s, q): args.loss for s in edge for q in topo.ports(s)}
    console = TableConsole()
    t = Table(title=f"INA, {len(workers)} workers on {topo.name}, {args.loss:.0%} loss on "
                    "the workers' leaves")
    for col in ("format", "fragments", "exact", "seconds", "retransmissions",
                "PS partials", "PS raw GRADs"):
        t.add_column(col, justify="right")
    ok = True
    if args.only:
        runs = [r for r in runs if r[0] == args.only]
    with tempfile.TemporaryDirectory(prefix="ina_scale_") as tmp_dir:
        tmp = args.run_dir or tmp_dir
        Path(tmp).mkdir(parents=True, exist_ok=True)
        ok = _run(args, topo, runs, loss, Path(tmp), t)
    console.print(t)
    return 0 if ok else 1


def _run(args: argparse.Namespace, topo: Any, runs: list, loss: dict, tmp: Path,
         t: Any) -> bool:
    from topologies.network import Network

    ok = True
    with Network(topo, target=args.target, run_dir=str(tmp / "net")) as net:
        switch_neighbors(net, topo, topo.switches())
        for name, job, grads in runs:
            InaDeployment(topo, net.grpc_addresses(), [job], loss=loss).deploy()
            (res,) = run_jobs(net, topo, [(job, grads)], tmp, name, timeout=0.5,
                              window=8, max_time=args.max_time)
            ok &= res.exact
            t.add_row(name, str(job.num_fragments), "yes" if res.exact else
                      f"[red]no ({res.mismatches})[/red]", f"{res.seconds:.1f}",
                      str(res.retransmissions), str(res.ps_packets["partial_in"]),
                      str(res.ps_packets["grad_in"]))
    return ok


if __name__ == "__main__":
    sys.exit(main())
