"""Switch CPU per value of an INA job: Python backend, native over veths, native with
in-memory switch links, side by side in one run.

One fat-tree k=4 network per mode and seed (15 workers, K aggregating switches, links at
``--bw``), the same job each time; the CPU of every switch process over the job (the
accounting of ``bench ina``), divided by the values of every worker's gradient, and the
time against its line-rate bound; every result checked element by element. The modes:

- ``python``: ``GRADNET_BACKEND=python`` (every link a veth);
- ``native-veth``: ``GRADNET_BACKEND=native GRADNET_MEMLINKS=0``;
- ``native-memory``: ``GRADNET_BACKEND=native``, links between switches of one process
  in memory (docs/embedded.md, "In-memory links").

    python -m bench.memlink_bench [--seeds 2] [--values 65536] [--bw 10] [--budget 2]
                                  [--processes 1] [--modes python,native-veth,native-memory] [--ps]
    python -m bench.memlink_bench --rate [--bw 10] [--seconds 3]   (bench/memlink_rate.py)
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

from controller.output import TableConsole
from wire import argtypes
from wire.argtypes import described

console = TableConsole()
MODES = {"python": {"GRADNET_BACKEND": "python", "GRADNET_MEMLINKS": "0"},
         "native-veth": {"GRADNET_BACKEND": "native", "GRADNET_MEMLINKS": "0"},
         "native-memory": {"GRADNET_BACKEND": "native", "GRADNET_MEMLINKS": "1"}}
ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: every mode for every seed, then the table."""
    p = argtypes.Parser(prog="python -m bench.memlink_bench", description=described(__doc__))
    p.add_argument("--seeds", type=argtypes.count, default=2, help="runs per mode (gradient seeds 0..N-1)")
    p.add_argument("--values", type=argtypes.count, default=65536, help="gradient size (float32 values)")
    p.add_argument("--bw", type=argtypes.positive, default=10.0, help="link rate in Mbit/s")
    p.add_argument("--budget", type=argtypes.integer(0, 20), default=2,
                   help="K aggregating switches (the fat-tree k=4 has 20)")
    p.add_argument("--processes", type=argtypes.count, default=1,
                   help="switch processes (groups; links in memory only inside one; default 1)")
    p.add_argument("--modes", type=argtypes.names(*MODES), default=list(MODES),
                   help="comma-separated modes (default: all three)")
    p.add_argument("--ps", action="store_true",
                   help="the PS baseline instead of INA (no aggregation: every packet unicast, all of it in C "
                        "on the native backend)")
    p.add_argument("--rate", action="store_true",
                   help="only the rate check: the rate an in-memory link delivers at --bw, beside a veth "
                        "shaped by htb (bench/memlink_rate.py)")
    p.add_argument("--seconds", type=argtypes.number(above=0.5, hi=30.0), default=3.0,
                   help="sending time of the rate check, in (0.5, 30] (default 3)")
    args = p.parse_args(argv)
    modes = args.modes
    if os.geteuid() != 0:
        print("memlink_bench needs root (network namespaces)", file=sys.stderr)
        return 2
    _prebuild()
    if args.rate:
        return _rate_table(args)
    out = Path(tempfile.mkdtemp(prefix="gradnet-memlink-bench-"))
    rows = [(mode, seed, _run(mode, seed, args, out)) for seed in range(args.seeds) for mode in modes]
    _table(rows, args)
    return 0 if all(r["exact"] for *_, r in rows) else 1


def _prebuild() -> None:
    """Compile ina.p4 and the loop ahead: the compiler's CPU is not the switches'."""
    from targets.embedded.native.__main__ import main as build_main

    build_main(["--quiet", str(ROOT / "p4src" / "build" / "ina.json")])
    from targets.embedded.native.nloop import build_loop

    build_loop()


def _run(mode: str, seed: int, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    from bench.ina_bench import _timed_run
    from controller.ina import InaJob
    from experiments.ina import switch_neighbors
    from topologies import fat_tree
    from topologies.network import Network

    saved = {k: os.environ.get(k) for k in MODES[mode]}
    os.environ.update(MODES[mode])  # the switch processes inherit it
    try:
        topo = fat_tree(4, bw=args.bw)
        hosts = topo.hosts()
        workers = hosts[1:]
        rng = np.random.default_rng(seed)
        grads = [(rng.standard_normal(args.values) * 0.01).astype(np.float32) for _ in workers]
        console.print(f"[dim]{mode}, seed {seed} ...[/dim]")
        with Network(topo, target="embedded", switch_processes=args.processes) as net:
            switch_neighbors(net, topo, topo.switches())
            job = InaJob.plan(topo, hosts[0], workers, args.budget, 1000.0, args.values, aggregate=not args.ps)
            r, split = _timed_run(net, topo, job, grads, out, f"{mode}-{seed}")
            in_memory = _links_in_memory(net)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    cpu = sum(split.switch_cpu_s.values())
    return {"seconds": r.seconds, "bound": split.bound_s, "cpu": cpu, "agents": r.worker_cpu_s + r.ps_cpu_s,
            "ns_per_value": cpu * 1e9 / (args.values * len(workers)), "exact": r.exact, "links": in_memory}


def _links_in_memory(net: Any) -> int:
    """Switch-to-switch links that ran in memory (each counted once)."""
    from experiments.accounting import memlink_rows

    return sum(1 for sw in net.net.switches for r in memlink_rows(sw) if r.get("in_memory")) // 2


def _table(rows: list[tuple[str, int, dict[str, Any]]], args: argparse.Namespace) -> None:
    t = Table(title=f"{'PS baseline' if args.ps else 'INA'} switch CPU per value, fat-tree k=4, 15 workers, "
                    f"{args.values} values, "
                    f"{args.bw:g} Mbit/s, K={args.budget}, {args.processes} switch process(es)")
    for col in ("mode", "seed", "links in memory", "job s", "bound s", "switch CPU s", "agents CPU s",
                "switch ns/value", "python / this", "exact"):
        t.add_column(col, justify="right")
    ref = {seed: r["ns_per_value"] for mode, seed, r in rows if mode == "python"}
    for mode, seed, r in rows:
        ratio = ref.get(seed, 0) / r["ns_per_value"] if r["ns_per_value"] and seed in ref else None
        t.add_row(mode, str(seed), str(r["links"]), f"{r['seconds']:.2f}", f"{r['bound']:.2f}", f"{r['cpu']:.2f}",
                  f"{r['agents']:.2f}", f"{r['ns_per_value']:.0f}", f"{ratio:.2f}" if ratio else "-",
                  "yes" if r["exact"] else "NO")
    console.print(t)
    console.print("switch ns/value: CPU seconds of every switch process over the job / (values x 15 "
                  "workers). python / this: the Python backend's ns/value over this row's, same seed.")


def _rate_table(args: argparse.Namespace) -> int:
    from bench.memlink_rate import rate_check

    rows = rate_check(args.bw, args.seconds)
    t = Table(title=f"Rate delivered by a saturated {args.bw:g} Mbit/s link (frames of 1,000 bytes, "
                    f"100 ms windows)")
    for col in ("link", "in memory", "configured Mbit/s", "delivered Mbit/s", "delivered / configured",
                "lowest window", "highest window", "windows"):
        t.add_column(col, justify="right")
    for r in rows:
        t.add_row(r["mode"], "yes" if r["in_memory"] else "no", f"{r['bw']:g}", f"{r['delivered']:.2f}",
                  f"{r['delivered'] / r['bw']:.3f}", f"{r['min']:.2f}", f"{r['max']:.2f}", str(r["windows"]))
    console.print(t)
    ok = all(abs(r["delivered"] / r["bw"] - 1) <= 0.05 for r in rows)
    console.print(f"within 5 % of the configured rate: {'yes' if ok else 'NO'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
