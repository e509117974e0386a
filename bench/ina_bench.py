"""INA vs PS-only: synchronization time and PS ingress bytes, and time against line rate.

1. One fat-tree k=4 with bandwidth-limited links; for each worker count (4, 8, 15), the
   same gradients go through in-network aggregation (greedy + LP placement, K switches)
   and through the PS alone; one table with both runs and the ratios.
2. INA vs its line-rate bound: 15 workers at each of ``--bound-bw`` (2, 5, 10 Mbit/s),
   measured time next to the bound (the busiest link's measured bytes at its capacity,
   ``experiments/accounting.py``), time / bound for INA and PS, the INA/PS time ratio next
   to 2/N, the CPU seconds of the switches and of the agents, and the CPU floor (their
   sum over the machine's cores: the least time the CPU allows).

3. Values per packet (docs/ina.md): INA with 15 workers at 64, 128 and 256 values a
   packet (``--vpp-sizes``), at each of ``--bound-bw``, on the embedded target (or
   ``--target``): time against the line-rate bound, and the CPU per worker value of the
   switch processes and of the agents (CPU seconds / (values x workers)).

4. The k=8 fat-tree (``make run-scale``, ``python -m experiments --preset k8``): 80
   switches, INA with 127 workers and its PS baseline, each time next to its bound,
   with bring-up, memory and CPU per switch process (links dilated to 0.2 Mbit/s;
   about 4 minutes; ``--skip-k8`` leaves it out, ``--only-k8`` runs it alone).

Every result is checked element by element against the exact sum.

    python -m bench.ina_bench [--workers 4,8,15] [--values 16384] [--bw 2] [--budget 2]
                              [--bound-bw 2,5,10] [--bound-values 65536]
                              [--vpp-sizes 64,128,256]
                              [--skip-bound | --only-bound] [--skip-vpp | --only-vpp]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from rich.table import Table

from controller.ina import InaDeployment, InaJob
from controller.output import TableConsole
from experiments.ina import run_jobs, switch_neighbors
from topologies import fat_tree
from wire.argtypes import Parser, described, integer, listed, natural, positive, values
from wire.ina import INA_VALUE_SIZES

console = TableConsole()


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: run every worker count, print the table."""
    p = Parser(prog="python -m bench.ina_bench", description=described(__doc__))
    p.add_argument("--workers", type=listed(integer(1, 15)), default=[4, 8, 15],
                   help="comma-separated worker counts (max 15)")
    p.add_argument("--values", type=values, default=16384, help="gradient size (float32 values)")
    p.add_argument("--bw", type=positive, default=2.0, help="link bandwidth in Mbit/s")
    p.add_argument("--budget", type=natural, default=2, help="K programmable switches")
    p.add_argument("--target", choices=("auto", "embedded", "bmv2"), default=None, help="auto|embedded|bmv2 (the bound table runs "
                   "embedded and, where installed, bmv2 unless this names one)")
    p.add_argument("--bound-bw", type=listed(positive), default=[2.0, 5.0, 10.0],
                   help="link rates of the bound table (Mbit/s; default 2,5,10)")
    p.add_argument("--bound-values", type=values, default=65536,
                   help="gradient size of the bound table (default 65536, as make run)")
    p.add_argument("--skip-bound", action="store_true", help="no bound table")
    p.add_argument("--only-bound", action="store_true", help="only the bound table")
    p.add_argument("--vpp-sizes", type=listed(integer(1)), default=[64, 128, 256],
                   help="values per packet of the values-per-packet table (default 64,128,256)")
    p.add_argument("--skip-vpp", action="store_true", help="no values-per-packet table")
    p.add_argument("--only-vpp", action="store_true", help="only the values-per-packet table")
    p.add_argument("--skip-k8", action="store_true", help="no k=8 fat-tree run")
    p.add_argument("--only-k8", action="store_true", help="only the k=8 fat-tree run")
    args = p.parse_args(argv)
    bad = sorted(set(args.vpp_sizes) - set(INA_VALUE_SIZES))
    if bad:
        p.error(f"argument --vpp-sizes: {bad[0]} values a packet has no program (choose from "
                f"{', '.join(map(str, INA_VALUE_SIZES))})")
    if os.geteuid() != 0:
        print("ina_bench needs root (network namespaces)", file=sys.stderr)
        return 2
    if args.only_bound:
        return 0 if _bound(args, Path(tempfile.mkdtemp(prefix="gradnet-ina-bench-"))) else 1
    if args.only_vpp:
        return 0 if _vpp(args, Path(tempfile.mkdtemp(prefix="gradnet-ina-bench-"))) else 1
    if args.only_k8:
        return _k8(args, Path(tempfile.mkdtemp(prefix="gradnet-ina-bench-")))
    from topologies.network import Network

    topo = fat_tree(4, bw=args.bw)
    hosts = topo.hosts()
    counts = args.workers
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
    ok = all(i.exact and s.exact for _, i, s in rows)
    if not args.skip_bound:
        ok &= _bound(args, out)
    if not args.skip_vpp:
        ok &= _vpp(args, out)
    if not args.skip_k8:
        ok &= _k8(args, out) == 0
    return 0 if ok else 1


def _k8(args: argparse.Namespace, out: Path) -> int:
    """The k=8 preset of the experiment (its own tables); 0 when both runs are exact."""
    from experiments.ina import main as ina_main

    extra = ["--target", args.target] if args.target not in (None, "auto") else []
    return ina_main(["--preset", "k8", "--out-dir", str(out / "k8"), *extra])


def _timed_run(net: Any, topo: Any, job: InaJob, grads: list[np.ndarray], out: Path,
               tag: str) -> tuple[Any, Any]:
    """Deploy ``job``, run it once and return its result with where its time went."""
    from experiments.accounting import Snapshot, time_split

    InaDeployment(topo, net.grpc_addresses(), [job]).deploy()
    before = Snapshot.take(net)
    (r,) = run_jobs(net, topo, [(job, grads)], out, tag)
    return r, time_split(topo, before, Snapshot.take(net),
                         {"workers": r.worker_cpu_s, "ps": r.ps_cpu_s})


def _bound(args: argparse.Namespace, out: Path) -> bool:
    from targets.launch import bmv2_available

    targets = [args.target] if args.target not in (None, "auto") else (
        ["embedded", "bmv2"] if bmv2_available() else ["embedded"])
    return bound_table(args.bound_bw, args.bound_values,
                       args.budget, targets, out)


def bound_table(bws: list[float], values: int, budget: int, targets: list[str],
                out: Path) -> bool:
    """INA and PS with 15 workers at each link rate and target, against their line-rate
    bounds."""
    from topologies.network import Network

    rows = []
    for target, bw in ((t, b) for t in targets for b in bws):
        topo = fat_tree(4, bw=bw)
        hosts = topo.hosts()
        workers = hosts[1:]
        rng = np.random.default_rng(7)
        grads = [(rng.standard_normal(values) * 0.01).astype(np.float32) for _ in workers]
        res = {}
        with Network(topo, target=target) as net:
            switch_neighbors(net, topo, topo.switches())
            for mode, aggregate in (("ina", True), ("ps", False)):
                console.print(f"[dim]{target}, {bw:g} Mbit/s, {mode} ...[/dim]")
                job = InaJob.plan(topo, hosts[0], workers, budget, 1000.0, values,
                                  aggregate=aggregate)
                res[mode] = _timed_run(net, topo, job, grads, out, f"bound-{mode}{bw:g}")
        rows.append((bw, res["ina"], res["ps"], target))
    t = Table(title=f"INA and PS against their line-rate bounds, fat-tree k=4, 15 workers, "
                    f"{values} values (seconds)")
    for col in ("target", "link", "INA", "bound", "x", "PS", "bound", "x", "INA/PS",
                "bounds INA/PS", "2/N", "switches CPU", "agents CPU", "CPU floor", "exact"):
        t.add_column(col, justify="right")
    n = 15
    cores = os.cpu_count() or 1
    for bw, (ina, isp), (ps, psp), target in rows:
        cpu = sum(isp.switch_cpu_s.values()) + ina.worker_cpu_s + ina.ps_cpu_s
        t.add_row(target, f"{bw:g} Mbit/s", f"{ina.seconds:.2f}", f"{isp.bound_s:.2f}",
                  f"{ina.seconds / isp.bound_s:.1f}" if isp.bound_s else "-",
                  f"{ps.seconds:.2f}", f"{psp.bound_s:.2f}",
                  f"{ps.seconds / psp.bound_s:.1f}" if psp.bound_s else "-",
                  f"{ina.seconds / ps.seconds:.2f}",
                  f"{isp.bound_s / psp.bound_s:.2f}" if psp.bound_s else "-", f"{2 / n:.2f}",
                  f"{sum(isp.switch_cpu_s.values()):.1f}",
                  f"{ina.worker_cpu_s + ina.ps_cpu_s:.1f}", f"{cpu / cores:.2f}",
                  "yes" if ina.exact and ps.exact else "NO")
    console.print(t)
    console.print("x = measured / bound (1.0: the links decided the time). bounds INA/PS: the "
                  "INA/PS ratio if both ran at their bounds, the floor of INA/PS on this "
                  f"placement. CPU in seconds, the INA run's; CPU floor: switches + agents CPU "
                  f"over the {cores} cores, the least INA time the CPU allows (docs/ina.md, "
                  "\"What sets the floor at 10 and 20 Mbit/s\"). Goal at "
                  "2 Mbit/s: INA x <= 1.5 and INA/PS <= 2/N.")
    return all(i.exact and p.exact for _, (i, _a), (p, _b), _t in rows)


def _vpp(args: argparse.Namespace, out: Path) -> bool:
    target = args.target if args.target not in (None, "auto") else "embedded"
    return vpp_table(args.vpp_sizes, args.bound_bw, args.bound_values,
                     args.budget, target, out)


def vpp_table(sizes: list[int], bws: list[float], values: int, budget: int, target: str,
              out: Path) -> bool:
    """INA with 15 workers at each values per packet and link rate (one network per rate),
    against its line-rate bound, with the CPU each worker value cost the switches and the
    agents."""
    from topologies.network import Network

    rows = []
    for bw in bws:
        topo = fat_tree(4, bw=bw)
        hosts = topo.hosts()
        workers = hosts[1:]
        rng = np.random.default_rng(7)
        grads = [(rng.standard_normal(values) * 0.01).astype(np.float32) for _ in workers]
        with Network(topo, target=target) as net:
            switch_neighbors(net, topo, topo.switches())
            for v in sizes:
                console.print(f"[dim]{target}, {bw:g} Mbit/s, {v} values a packet ...[/dim]")
                job = InaJob.plan(topo, hosts[0], workers, budget, 1000.0, values,
                                  values_per_packet=v)
                r, sp = _timed_run(net, topo, job, grads, out, f"vpp{v}-{bw:g}")
                rows.append((bw, v, job.num_fragments, r, sp))
    n = len(fat_tree(4).hosts()) - 1
    t = Table(title=f"INA at 64, 128 and 256 values per packet, fat-tree k=4, {n} workers, "
                    f"{values} values, {target} target")
    for col in ("link", "values/packet", "fragments", "INA s", "bound s", "x bound",
                "PS packets in", "switch CPU s", "agents CPU s", "switch ns/value",
                "agents ns/value", "exact"):
        t.add_column(col, justify="right")
    for bw, v, nf, r, sp in rows:
        sw = sum(sp.switch_cpu_s.values())
        ag = r.worker_cpu_s + r.ps_cpu_s
        per = 1e9 / (values * n)
        t.add_row(f"{bw:g} Mbit/s", str(v), str(nf), f"{r.seconds:.2f}", f"{sp.bound_s:.2f}",
                  f"{r.seconds / sp.bound_s:.2f}" if sp.bound_s else "-",
                  f"{r.ps_rx_packets:,}", f"{sw:.1f}", f"{ag:.1f}", f"{sw * per:.0f}",
                  f"{ag * per:.0f}", "yes" if r.exact else "NO")
    console.print(t)
    console.print("x bound = measured / line-rate bound (the busiest link's measured bytes at "
                  "its capacity). ns/value: CPU seconds of all switch processes (agents: every "
                  "worker's synchronization plus the PS's) per value of each worker's gradient. "
                  "The machine has 2 cores.")
    return all(r.exact for *_, r, _sp in rows)


if __name__ == "__main__":
    sys.exit(main())
