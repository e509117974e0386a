"""``python -m bench ina-agents``: CPU per value of the INA host agents alone.

No switch and no emulated link: the PS and the workers as processes on loopback
addresses (the PS baseline policy: every GRAD to the PS, which sums and sends each
worker its RESULT), ``--rounds`` allreduces of ``--values`` values back to back, so
that the agents' own packet paths are all that runs. Per agent, the CPU its
synchronization took (``sync_cpu_s``: the allreduces or the serving, start-up left out)
per value: a worker's per value of its gradient, the PS's per value it received (each
worker's, so ``W`` per gradient value). With it, what a datagram costs the kernel here
(``sendto`` and ``recvfrom`` of one datagram of the packet's size, CPU time of a loop
of them): the part of the agents' CPU no Python change removes. Every run checks each
rank's int32 sums of every round against the exact sums of the quantized gradients,
element by element.

    python -m bench.ina_agents_bench [--values 65536] [--rounds 4] [--workers 4]
        [--vpp 64,256] [--reps 2] [--paths native,python] [--agents-from DIR]

``--paths``: the agents' packet paths to run side by side, alternating run by run:
``native`` (the batched C paths, hosts/ina/native.py) and ``python``
(``GRADNET_INA_NATIVE=0``). ``--agents-from``: a checkout whose ``hosts/`` and
``wire/`` run the agents (default: this one), to measure another version side by side.
``--coalesce-us``: the workers' receive coalescing on the native path
(``GRADNET_INA_COALESCE_US``, hosts/ina/native.py).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.table import Table

from controller.output import TableConsole
from wire import argtypes
from wire.argtypes import described

console = TableConsole()
ROOT = Path(__file__).resolve().parent.parent


def syscall_cost(size: int, n: int = 3000) -> tuple[float, float]:
    """CPU µs of one ``sendto`` and of one ``recvfrom`` of a ``size``-byte datagram over
    loopback (a loop of ``n``, the receiver's buffer large enough to hold them)."""
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 23)
    rx.bind(("127.0.0.1", 0))
    rx.setblocking(False)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    data, dst = bytes(size), rx.getsockname()
    c0 = time.process_time()
    for _ in range(n):
        tx.sendto(data, dst)
    c1 = time.process_time()
    got = 0
    while True:
        try:
            rx.recvfrom(4096)
        except BlockingIOError:
            break
        got += 1
    c2 = time.process_time()
    rx.close()
    tx.close()
    return 1e6 * (c1 - c0) / n, 1e6 * (c2 - c1) / max(got, 1)


def _addr(k: int) -> str:
    pid = os.getpid()
    return f"127.{100 + pid % 150}.{(pid // 150) % 250 + 1}.{k}"


def _expected(n: int, workers: int, rounds: int, seed: int, scale_bits: int) -> np.ndarray:
    """The exact int sums per round (rows) of the workers' random gradients."""
    from hosts.ina.worker import round_gradient
    from wire.fixedpoint import quantize

    rows = []
    for k in range(rounds):
        total = np.zeros(n, dtype=np.int64)
        for r in range(workers):
            g = (np.random.default_rng([seed, r]).standard_normal(n).astype(np.float32) if k == 0
                 else round_gradient(seed, r, k, n))
            total += quantize(g, scale_bits, workers).astype(np.int64)
        rows.append(total)
    return np.stack(rows)


def run_once(args: argparse.Namespace, vpp: int, d: Path, path: str = "native") -> dict[str, Any]:
    """One PS and ``--workers`` workers on loopback; the PS's and each worker's summary,
    and whether every rank's sums are exact."""
    from wire.fixedpoint import num_fragments
    from wire.ina_policy import Policy

    nf = num_fragments(args.values, vpp)
    w = args.workers
    pol = Policy(job=5, ps=_addr(1), workers=tuple(_addr(2 + r) for r in range(w)), num_fragments=nf,
                 tags=np.zeros((w, nf), dtype=np.int64), values_per_packet=vpp)
    pol.dump(d / "policy.json")
    env = dict(os.environ, PYTHONPATH=str(args.agents_from), OMP_NUM_THREADS="1",
               GRADNET_INA_NATIVE="0" if path == "python" else "1",
               GRADNET_INA_COALESCE_US=str(args.coalesce_us))
    py, common = sys.executable, ["--policy", str(d / "policy.json"), "--json"]
    ps = subprocess.Popen([py, "-m", "hosts.ina.ps", *common, "--rounds", str(args.rounds),
                           "--linger", "0.2", "--max-time", "120", "--ready"],
                          stdout=subprocess.PIPE, text=True, env=env, cwd=str(args.agents_from))
    assert ps.stdout is not None
    if ps.stdout.readline().strip() != "ready":
        ps.kill()
        raise RuntimeError("the PS did not start")
    workers = [subprocess.Popen([py, "-m", "hosts.ina.worker", *common, "--rank", str(r),
                                 "--size", str(args.values), "--rounds", str(args.rounds),
                                 "--no-progress", "--window", "64", "--max-time", "120",
                                 "--out-int", str(d / f"rank{r}.npy")],
                                stdout=subprocess.PIPE, text=True, env=env, cwd=str(args.agents_from))
               for r in range(w)]
    outs = [p.communicate(timeout=300)[0] for p in workers]
    ps_out = ps.communicate(timeout=300)[0]
    ranks = [json.loads(o.strip().splitlines()[-1]) for o in outs]
    exp = _expected(args.values, w, args.rounds, 0, pol.scale_bits)
    exact = all(np.array_equal(np.load(d / f"rank{r}.npy").reshape(args.rounds, -1).astype(np.int64), exp)
                for r in range(w))
    return {"ps": json.loads(ps_out.strip().splitlines()[-1]), "workers": ranks, "exact": exact}


def _measure(args: argparse.Namespace, vpp: int, paths: list[str]) -> dict[str, dict[str, Any]]:
    """``--reps`` runs of every path at ``vpp`` values a packet, the paths alternating;
    per path the per-value CPU of each worker and PS run, its kernel share, exactness."""
    n = args.values * args.rounds
    res: dict[str, dict[str, Any]] = {p: {"w": [], "ps": [], "w_sys": [], "ps_sys": [], "exact": True}
                                      for p in paths}
    for _ in range(args.reps):
        for path in paths:
            with tempfile.TemporaryDirectory(prefix="gradnet-agents-") as d:
                out = run_once(args, vpp, Path(d), path)
            r = res[path]
            r["w"] += [w["sync_cpu_s"] * 1e6 / n for w in out["workers"]]
            r["w_sys"] += [w.get("sync_sys_s", 0.0) * 1e6 / n for w in out["workers"]]
            r["ps"].append(out["ps"]["sync_cpu_s"] * 1e6 / (n * args.workers))
            r["ps_sys"].append(out["ps"].get("sync_sys_s", 0.0) * 1e6 / (n * args.workers))
            r["exact"] &= out["exact"]
    return res


def _cell(xs: list[float]) -> str:
    return f"{np.mean(xs):.3f} ({min(xs):.3f}-{max(xs):.3f})"


def _parse(argv: list[str] | None) -> tuple[argparse.Namespace, list[int], list[str]]:
    p = argtypes.Parser(prog="python -m bench.ina_agents_bench", description=described(__doc__))
    p.add_argument("--values", type=argtypes.count, default=65536, help="values per gradient (default 65536)")
    p.add_argument("--rounds", type=argtypes.count, default=4, help="allreduces back to back per run (default 4)")
    p.add_argument("--workers", type=argtypes.count, default=4, help="workers (default 4)")
    p.add_argument("--vpp", default="64,256", help="values per packet to run (default 64,256)")
    p.add_argument("--reps", type=argtypes.count, default=2, help="runs per size and path (default 2)")
    p.add_argument("--paths", default="native,python",
                   help="the agents' packet paths, alternating: native (batched C) and/or python "
                        "(GRADNET_INA_NATIVE=0) (default native,python)")
    p.add_argument("--coalesce-us", type=argtypes.nonnegative, default=0.0,
                   help="the workers' receive coalescing on the native path, µs "
                        "(GRADNET_INA_COALESCE_US; default 0: off)")
    p.add_argument("--agents-from", type=Path, default=ROOT,
                   help="checkout whose agents run (default: this one)")
    args = p.parse_args(argv)
    from wire.ina import INA_VALUE_SIZES

    try:
        sizes = [int(v) for v in args.vpp.split(",") if v.strip()]
    except ValueError:
        sizes = []
    if not sizes or any(v not in INA_VALUE_SIZES for v in sizes):
        p.error(f"--vpp {args.vpp}: values per packet are {', '.join(map(str, INA_VALUE_SIZES))}")
    paths = [x.strip() for x in args.paths.split(",") if x.strip()]
    if not paths or any(x not in ("native", "python") for x in paths) or len(set(paths)) < len(paths):
        p.error(f"--paths {args.paths}: a list of native and python")
    return args, sizes, paths


def main(argv: list[str] | None = None) -> int:
    """Every ``--vpp`` size, every path ``--reps`` times; the table."""
    args, sizes, paths = _parse(argv)
    from wire.ina import INA_HEADER_LEN

    t = Table(title=f"INA agents alone on loopback: {args.workers} workers + PS, {args.values:,} values, "
                    f"{args.rounds} rounds a run, {args.reps} runs a row (CPU µs per value; agents "
                    f"from {args.agents_from}; coalescing {args.coalesce_us:g} µs; load average "
                    f"{os.getloadavg()[0]:.1f} at the start)")
    for col in ("values/packet", "path", "worker µs/value", "of it kernel", "PS µs/value received",
                "of it kernel", "PS µs/gradient value", "sendto µs", "recvfrom µs",
                "kernel floor worker µs/value", "exact"):
        t.add_column(col, justify="right")
    ok = True
    for vpp in sizes:
        res = _measure(args, vpp, paths)
        snd, rcv = syscall_cost(INA_HEADER_LEN + 4 * vpp)
        for path in paths:
            r = res[path]
            ok &= r["exact"]
            t.add_row(str(vpp), path, _cell(r["w"]), f"{np.mean(r['w_sys']):.3f}", _cell(r["ps"]),
                      f"{np.mean(r['ps_sys']):.3f}", f"{np.mean(r['ps']) * args.workers:.3f}",
                      f"{snd:.1f}", f"{rcv:.1f}", f"{(snd + rcv) / vpp:.3f}",
                      "yes" if r["exact"] else "NO")
    console.print(t)
    console.print("µs/value: the agent's synchronization CPU (process time, start-up left out) over "
                  "the values it handled: a worker's gradient values x rounds; the PS's values "
                  "received (workers x gradient values x rounds); mean (range). of it kernel: the "
                  "system time in it (system calls, the loopback's delivery). kernel floor: one "
                  "sendto and one recvfrom per packet, over its values. load average at the end: "
                  f"{os.getloadavg()[0]:.1f}. Measured on this machine as it is.")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
