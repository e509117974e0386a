"""Token-passing broadcast (token): time per iteration for 1, 2, 4 and 8 nodes.

For each node count, one ``token_lan`` network (smart NICs running ``nic.p4``, LAN
switch ``lan.p4``) and three kinds of run:

* **measured**: the real digits CNN step (a few ms on this CPU) on every node;
* **compute fixed**: every node's compute held at ``--compute`` seconds per batch
  (``--compute-fixed``: the real step runs, then the node sleeps the rest), which stands
  for a model whose step dominates, as on the GPUs the design targets. The machine has 2 cores, so
  real compute cannot scale N times; with compute fixed the speedup shows what the
  protocol and the NICs cost;
* **PS and ring baselines** on the same LAN (through the same NICs, which bridge IP, and
  LAN switch): a TCP parameter server on ``h1`` and a TCP ring all-reduce exchange the
  same 3,818-value float32 gradient; their time per all-reduce is the communication time
  of one iteration, to compare with the token run's iteration time at compute ≈ 0.

An iteration is one batch of the whole network (every node one mini-batch of 32). Its
time is the mean gap between node 1's consecutive batch ends (the first batch left out);
the split is each node's compute, token wait (gradient ready -> token in hand),
broadcast (sending GRAD frames) and accumulation (NIC read-out + update) per batch,
averaged over nodes. Speedup(N) = N * T(1) / T(N) (examples per second vs one node).

    python -m bench.token_bench [--nodes 1,2,4,8] [--batches 8] [--compute 1.0]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.table import Table

from controller.output import TableConsole
from controller.token import MAX_NODES
from wire.argtypes import Parser, count, described, integer, listed, natural, nonnegative

console = TableConsole()
VALUES = 3818  # the digits CNN's parameters
PS_PORT, RING_PORT = 41000, 41001


# ----------------------------------------------------------------------------- baselines


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("peer closed")
        buf += chunk
    return bytes(buf)


def _connect(ip: str, port: int, timeout: float = 20.0) -> socket.socket:
    end = time.monotonic() + timeout
    while True:
        try:
            s = socket.create_connection((ip, port), timeout=5)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return s
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.1)


def _listen(port: int) -> socket.socket:
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("", port))
    srv.listen(64)
    return srv


def agent_ps(rank: int, ips: list[str], rounds: int) -> list[float]:
    """Parameter server on rank 0 (also a worker): gather, sum, send the sum back."""
    g = np.random.default_rng(rank).standard_normal(VALUES).astype(np.float32)
    n = len(ips)
    nbytes = g.nbytes
    times = []
    if rank == 0:
        srv = _listen(PS_PORT)
        peers = []
        for _ in range(n - 1):
            c, _a = srv.accept()
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            peers.append(c)
        for _ in range(rounds):
            t = time.monotonic()
            for c in peers:
                c.sendall(b"g")  # start of round
            total = g.astype(np.float64)
            for c in peers:
                total += np.frombuffer(_recv_exact(c, nbytes), dtype=np.float32)
            out = total.astype(np.float32).tobytes()
            for c in peers:
                c.sendall(out)
            times.append(time.monotonic() - t)
    else:
        c = _connect(ips[0], PS_PORT)
        for _ in range(rounds):
            _recv_exact(c, 1)
            c.sendall(g.tobytes())
            _recv_exact(c, nbytes)
    return times


def agent_ring(rank: int, ips: list[str], rounds: int) -> list[float]:
    """Ring all-reduce: n-1 reduce-scatter steps, n-1 all-gather steps, over TCP."""
    n = len(ips)
    g = np.random.default_rng(rank).standard_normal(VALUES).astype(np.float32)
    srv = _listen(RING_PORT)
    nxt = _connect(ips[(rank + 1) % n], RING_PORT)
    prev, _a = srv.accept()
    bounds = np.linspace(0, VALUES, n + 1).astype(int)
    times = []
    for _ in range(rounds + 1):
        # a token round trip as barrier, so rank 0 times the all-reduce alone
        if rank == 0:
            nxt.sendall(b"b")
            _recv_exact(prev, 1)
        else:
            _recv_exact(prev, 1)
            nxt.sendall(b"b")
        t = time.monotonic()
        v = g.copy()
        for step in range(n - 1):
            s, r = (rank - step) % n, (rank - step - 1) % n
            nxt.sendall(v[bounds[s]:bounds[s + 1]].tobytes())
            size = (bounds[r + 1] - bounds[r]) * 4
            v[bounds[r]:bounds[r + 1]] += np.frombuffer(_recv_exact(prev, size), dtype=np.float32)
        for step in range(n - 1):
            s, r = (rank + 1 - step) % n, (rank - step) % n
            nxt.sendall(v[bounds[s]:bounds[s + 1]].tobytes())
            size = (bounds[r + 1] - bounds[r]) * 4
            v[bounds[r]:bounds[r + 1]] = np.frombuffer(_recv_exact(prev, size), dtype=np.float32)
        times.append(time.monotonic() - t)
    return times[1:]


def run_baseline(net: Any, topo: Any, kind: str, rounds: int, out: Path) -> float:
    """Mean seconds per all-reduce of rank 0 (``kind`` ps or ring)."""
    from experiments.token import _spawn

    hosts = topo.hosts()
    ips = ",".join(topo.host_ip(h) for h in hosts)
    procs = []
    for rank, h in enumerate(hosts):
        argv = [sys.executable, "-m", "bench.token_bench", "--agent", kind, "--rank", str(rank),
                "--ips", ips, "--rounds", str(rounds)]
        procs.append(_spawn(net, h, argv, out / f"{kind}-{h}"))
        if rank == 0:
            time.sleep(0.5)
    for p in procs:
        try:
            p.wait(timeout=120)
        except Exception:
            p.kill()
            p.wait()
    text = (out / f"{kind}-{hosts[0]}").with_suffix(".out").read_text().strip().splitlines()
    if not text:
        err = (out / f"{kind}-{hosts[0]}").with_suffix(".err").read_text()[-500:]
        raise RuntimeError(f"{kind} baseline failed: {err}")
    return float(json.loads(text[-1])["mean_s"])


# ----------------------------------------------------------------------------- token runs


def token_run(net: Any, topo: Any, out: Path, batches: int, compute: float) -> dict[str, float]:
    """One token training run of ``batches`` batches; iteration time and its split."""
    from controller.token import TokenDeployment
    from experiments.token import run_token

    TokenDeployment(topo, net.grpc_addresses()).deploy()
    common = ["--epochs", "100", "--batches", str(batches), "--cutoff", "1.0", "--wait-unit", "3",
              "--form-silence", "3", "--max-time", "200"]
    if compute > 0:
        common += ["--compute-fixed", str(compute)]
    run = run_token(net, topo, out, common, timeout=240)
    for h, r in run.nodes.items():
        if r.returncode != 0:
            raise RuntimeError(f"{h} exited {r.returncode}: {r.stderr[-500:]}")
    ends = [e["t"] for h, e in run.events("batch") if h == topo.hosts()[0]]
    gaps = np.diff(ends)
    res: dict[str, float] = {"iteration": float(np.mean(gaps)) if len(gaps) else float("nan")}
    for k in ("compute", "token_wait", "broadcast", "accumulate"):
        res[k] = statistics.mean(r.summary["timing"][k] / max(1, r.summary["timing"]["batches"])
                                 for r in run.nodes.values())
    return res


def main(argv: list[str] | None = None) -> int:
    """Command-line entry (and the PS/ring agents, ``--agent``)."""
    p = Parser(prog="python -m bench.token_bench", description=described(__doc__))
    p.add_argument("--nodes", type=listed(integer(1, MAX_NODES)), default=[1, 2, 4, 8],
                   help=f"comma-separated node counts (each in 1..{MAX_NODES})")
    p.add_argument("--batches", type=count, default=8, help="batches per token run")
    p.add_argument("--compute", type=nonnegative, default=1.0,
                   help="compute held fixed at this many seconds per batch per node")
    p.add_argument("--rounds", type=count, default=20, help="all-reduces per baseline run")
    p.add_argument("--target", choices=("auto", "embedded", "bmv2"), default=None)
    p.add_argument("--agent", choices=("ps", "ring"), help=argparse.SUPPRESS)
    p.add_argument("--rank", type=natural, default=0, help=argparse.SUPPRESS)
    p.add_argument("--ips", default="", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.agent and args.rank >= len(args.ips.split(",")):
        p.error(f"argument --rank: must be < {len(args.ips.split(','))}, the --ips given (got {args.rank})")
    if args.agent:
        fn = agent_ps if args.agent == "ps" else agent_ring
        times = fn(args.rank, args.ips.split(","), args.rounds)
        if times:
            print(json.dumps({"mean_s": statistics.mean(times), "rounds": len(times)}), flush=True)
        return 0
    if os.geteuid() != 0:
        print("token_bench needs root (network namespaces)", file=sys.stderr)
        return 2
    from controller.token import token_lan
    from topologies.network import Network

    sizes = args.nodes
    base = Path(tempfile.mkdtemp(prefix="gradnet-token-bench-"))
    rows: dict[int, dict[str, Any]] = {}
    for n in sizes:
        topo = token_lan(n, bw=1000)
        with Network(topo, target=args.target, limit_bw=False) as net:
            row: dict[str, Any] = {}
            console.print(f"[dim]{n} node(s): measured compute ...[/dim]")
            row["measured"] = token_run(net, topo, base / f"n{n}-measured", args.batches, 0.0)
            console.print(f"[dim]{n} node(s): compute fixed at {args.compute:g} s ...[/dim]")
            row["fixed"] = token_run(net, topo, base / f"n{n}-fixed", args.batches, args.compute)
            if n >= 2:
                console.print(f"[dim]{n} nodes: PS and ring baselines ...[/dim]")
                (base / f"n{n}-base").mkdir(parents=True, exist_ok=True)
                row["ps"] = run_baseline(net, topo, "ps", args.rounds, base / f"n{n}-base")
                row["ring"] = run_baseline(net, topo, "ring", args.rounds, base / f"n{n}-base")
            rows[n] = row
    _print(rows, args.compute)
    (base / "token_bench.json").write_text(json.dumps(rows, indent=1))
    console.print(f"raw results: {base / 'token_bench.json'}")
    return 0


def _print(rows: dict[int, dict[str, Any]], compute: float) -> None:
    for mode, title in (("measured", "measured compute (real digits CNN step)"),
                        ("fixed", f"compute fixed at {compute:g} s per batch per node")):
        t = Table(title=f"token broadcast, time per iteration: {title}")
        for c in ("nodes", "iteration s", "compute s", "token wait s", "broadcast s", "accumulate s",
                  "examples/s", "speedup vs 1 node"):
            t.add_column(c, justify="right")
        one = rows.get(1, {}).get(mode, {}).get("iteration")
        for n, row in rows.items():
            r = row[mode]
            speed = f"{n * one / r['iteration']:.2f}" if one else "-"
            t.add_row(str(n), f"{r['iteration']:.3f}", f"{r['compute']:.3f}", f"{r['token_wait']:.3f}",
                      f"{r['broadcast']:.3f}", f"{r['accumulate']:.3f}",
                      f"{n * 32 / r['iteration']:.0f}", speed)
        console.print(t)
    t = Table(title=f"communication per iteration on the same LAN ({VALUES} float32 values)")
    for c in ("nodes", "token (iteration at compute≈0) s", "PS (TCP) s", "ring all-reduce (TCP) s"):
        t.add_column(c, justify="right")
    for n, row in rows.items():
        if "ps" in row:
            t.add_row(str(n), f"{row['measured']['iteration'] - row['measured']['compute']:.3f}",
                      f"{row['ps']:.3f}", f"{row['ring']:.3f}")
    console.print(t)
    if 1 in rows and 4 in rows:
        m = 4 * rows[1]["measured"]["iteration"] / rows[4]["measured"]["iteration"]
        f = 4 * rows[1]["fixed"]["iteration"] / rows[4]["fixed"]["iteration"]
        console.print(f"speedup of 4 nodes over 1: measured {m:.2f}, compute fixed at {compute:g} s "
                      f"{f:.2f} (seed: above 3)")


if __name__ == "__main__":
    sys.exit(main())
