"""Repeated all-reduce (:mod:`hosts.bml.collective`): exact, identical, rounds kept apart.

Most tests run every server of a plan as a thread of this process on the loopback
(:func:`~hosts.bml.collective.loopback_plan`: server ``s`` on ``127.<level+1>.0.<s+1>``),
which exercises the same TCP transport as the emulated network. One test runs BML in the
hosts of a live emulated BCube(2, 2) of P4 switches (root and mnexec needed).
"""

from __future__ import annotations

import json
import random
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hosts.bml.collective import Collective, loopback_plan, round_vector
from hosts.bml.transport import TransportError
from tests.netenv import net_skip_reason
from wire.fixedpoint import dequantize, quantize

ROOT = Path(__file__).resolve().parent.parent
SCALE = 24  # |g| <= 2**31 / 9 / 2**24 ~ 14: ample for 0.01-scale vectors


def _free_port() -> int:
    """A port below the kernel's ephemeral range that nothing holds on any address. The
    plan's servers listen on it on many 127/8 addresses, while their own connections take
    ephemeral source ports: a port from bind(0) is one of those and can be taken by a
    connection before the last server binds it (EADDRINUSE)."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(max(1024, low - 16384), low)
        with socket.socket() as s:
            try:
                s.bind(("0.0.0.0", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port below the ephemeral range")


def _run_servers(plan: dict[str, Any], body: Callable[[Collective], Any],
                 timeout: float = 30.0, skip: tuple[int, ...] = ()) -> tuple[list[Any], list[Any]]:
    """Every server of ``plan`` (except ``skip``) in its own thread: construct, ``body``,
    close. Returns (results, exceptions) per server (None where none)."""
    n = plan["servers"]
    results: list[Any] = [None] * n
    errors: list[Any] = [None] * n

    def server(s: int) -> None:
        try:
            with Collective(plan, s, timeout=timeout) as coll:
                results[s] = body(coll)
        except BaseException as e:  # noqa: BLE001 (checked by the caller)
            errors[s] = e

    threads = [threading.Thread(target=server, args=(s,), daemon=True)
               for s in range(n) if s not in skip]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout * 3)
        assert not t.is_alive(), "a server thread hung"
    return results, errors


def _expected(servers: int, rnd: int, values: int, seed: int) -> np.ndarray:
    q = sum(quantize(round_vector(seed, s, rnd, values), SCALE, servers).astype(np.int64)
            for s in range(servers))
    return dequantize(q, SCALE)


def _check_rounds(plan: dict[str, Any], rounds: int, seed: int) -> None:
    values = plan["values"]

    def body(coll: Collective) -> tuple[list[np.ndarray], dict[str, Any], int]:
        rng = np.random.default_rng(coll.server)
        out = []
        for r in range(rounds):
            if coll.server % 2:  # drift: neighbours start round r+1 while this one is in r
                time.sleep(float(rng.uniform(0, 0.004)))
            out.append(coll.allreduce(round_vector(seed, coll.server, r, values)))
        return out, coll.stats(), len(coll._inbox._msgs)

    t0 = time.monotonic()
    results, errors = _run_servers(plan, body)
    assert errors == [None] * plan["servers"], errors
    # ~1 s here; close() waiting on FINs in a cycle would take the 30 s timeout
    assert time.monotonic() - t0 < 20.0
    for r in range(rounds):
        want = _expected(plan["servers"], r, values, seed)
        for s, (out, _, _) in enumerate(results):
            # exact: equal to the fixed-point sum element by element; identical bits
            assert out[r].dtype == np.float32
            assert np.array_equal(out[r].view(np.uint32), want.view(np.uint32)), (
                f"server {s} round {r}: {np.count_nonzero(out[r] != want)} elements differ")
    for s, (_, stats, left) in enumerate(results):
        assert left == 0, f"server {s}: {left} messages left in its inbox"
        assert stats["rounds"] == rounds and stats["seconds"] > 0
        assert all(v > 0 for v in stats["tx_bytes"].values()), stats


@pytest.mark.parametrize(("scheme", "servers"), [("ring", 4), ("sharded_ps", 4), ("ps", 3),
                                                 ("ring", 2)])
def test_baselines_twenty_rounds_exact_and_identical(scheme: str, servers: int) -> None:
    plan = loopback_plan(scheme, 1001, SCALE, _free_port(), servers=servers)
    _check_rounds(plan, rounds=20, seed=servers)


@pytest.mark.parametrize(("scheme", "servers", "rails", "pieces"),
                         [("rail_ring", 4, 2, 4), ("rail_sharded_ps", 4, 2, 8),
                          ("rail_ring", 3, 3, 1), ("rail_sharded_ps", 2, 3, 2)])
def test_rail_baselines_twenty_rounds_exact(scheme: str, servers: int, rails: int,
                                            pieces: int) -> None:
    """k concurrent rings / sharded PSs, one per rail on 1/k of the vector: exact sums,
    and every rail's connections carried its part."""
    plan = loopback_plan(scheme, 1001, SCALE, _free_port(), servers=servers, rails=rails,
                         pieces=pieces)
    _check_rounds(plan, rounds=20, seed=servers + rails)
    plan2 = dict(plan, port=_free_port())
    results, errors = _run_servers(
        plan2, lambda c: (c.allreduce(np.ones(1001, np.float32)), c.stats())[1])
    assert errors == [None] * servers
    for st in results:
        assert len(st["tx_bytes"]) == rails and all(v > 0 for v in st["tx_bytes"].values()), st


@pytest.mark.parametrize(("n", "k", "pipeline"), [(2, 2, 1), (3, 2, 2), (2, 3, 1)])
def test_bml_twenty_rounds_exact_and_identical(n: int, k: int, pipeline: int) -> None:
    plan = loopback_plan("bml", 777, SCALE, _free_port(), n=n, k=k, pipeline=pipeline)
    _check_rounds(plan, rounds=20, seed=n * 10 + k)
    # each level's NIC carried its share
    plan2 = dict(plan, port=_free_port())
    results, errors = _run_servers(
        plan2, lambda c: (c.allreduce(np.zeros(777, np.float32)), c.stats())[1])
    assert errors == [None] * n**k
    assert all(len(st["tx_bytes"]) == k for st in results)


def test_wrong_length_raises_and_starts_no_round() -> None:
    plan = loopback_plan("ring", 100, SCALE, _free_port(), servers=3)

    def body(coll: Collective) -> np.ndarray:
        if coll.server == 1:
            with pytest.raises(ValueError, match="plan fixes 100"):
                coll.allreduce(np.ones(99, np.float32))
        return coll.allreduce(np.full((10, 10), coll.server + 1, np.float32))

    results, errors = _run_servers(plan, body)
    assert errors == [None] * 3
    for out in results:
        assert out.shape == (10, 10) and np.all(out == 6.0)


def test_hung_peer_times_out() -> None:
    """A live peer that never calls: TransportError after ``timeout``; once the others
    gave up, the late one fails at once (they closed their connections)."""
    plan = loopback_plan("ring", 64, SCALE, _free_port(), servers=3)
    late = threading.Event()
    times: dict[int, float] = {}

    def body(coll: Collective) -> None:
        if coll.server == 2:
            late.wait(10)
        t0 = time.monotonic()
        try:
            coll.allreduce(np.ones(64, np.float32))
        finally:
            times[coll.server] = time.monotonic() - t0
            if coll.server != 2 and len(times) == 2:
                late.set()

    _, errors = _run_servers(plan, body, timeout=1.5)
    assert all(isinstance(e, TransportError) for e in errors), errors
    assert 1.4 < times[0] < 3.0 and 1.4 < times[1] < 3.0, times
    assert times[2] < 1.0, times
    assert "timed out" in str(errors[0]) or "timed out" in str(errors[1])


_DIE = """
import os, signal, sys, time
sys.path.insert(0, {root!r})
from hosts.bml.collective import Collective, round_vector
coll = Collective.from_plan_file({plan!r}, {server}, timeout=30)
coll.allreduce(round_vector(0, {server}, 0, coll.values))
time.sleep(0.5)  # its last sends of round 0 leave (writer threads), then it dies
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("scheme", ["ring", "ps", "bml"])
def test_dead_peer_fails_fast(scheme: str, tmp_path: Path) -> None:
    """A peer process killed after round 0: everyone else raises TransportError in
    round 1 long before the 30 s timeout, also servers with no link to it."""
    kw: dict[str, int] = {"n": 2, "k": 2} if scheme == "bml" else {"servers": 4}
    plan = loopback_plan(scheme, 500, SCALE, _free_port(), **kw)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    dead = 3
    proc = subprocess.Popen([sys.executable, "-c", _DIE.format(root=str(ROOT), plan=str(path),
                                                               server=dead)],
                            cwd=ROOT, stderr=subprocess.PIPE)
    times: dict[int, float] = {}

    def body(coll: Collective) -> None:
        coll.allreduce(round_vector(0, coll.server, 0, coll.values))
        t0 = time.monotonic()
        try:
            coll.allreduce(round_vector(0, coll.server, 1, coll.values))
        finally:
            times[coll.server] = time.monotonic() - t0

    try:
        _, errors = _run_servers(plan, body, timeout=30.0, skip=(dead,))
    finally:
        proc.wait(30)
    assert proc.returncode == -9, proc.stderr.read() if proc.stderr else ""
    live = [s for s in range(4) if s != dead]
    assert all(isinstance(errors[s], TransportError) for s in live), errors
    assert len(times) == 3 and max(times.values()) < 5.0, (times, errors)


def test_plan_errors() -> None:
    with pytest.raises(ValueError, match="scheme"):
        Collective({"scheme": "allgather", "servers": 2}, 0)
    with pytest.raises(ValueError, match="server must be"):
        Collective(loopback_plan("ps", 4, SCALE, _free_port(), servers=2), 2)


@pytest.mark.net
@pytest.mark.slow
@pytest.mark.skipif(net_skip_reason("forward") is not None,
                    reason=net_skip_reason("forward") or "")
def test_bml_rounds_on_emulated_bcube(tmp_path: Path) -> None:
    """``python -m hosts.bml.collective`` in the four hosts of a live BCube(2, 2):
    5 rounds, every server's every round equal to the exact sum."""
    from controller.bcube import bcube_network_topology, bcube_plan
    from controller.deploy import deploy
    from experiments.runner import prepare_hosts, spawn
    from topologies.network import Network

    n, k, values, rounds = 2, 2, 20_000, 5
    topo = bcube_network_topology(n, k, 50.0)
    with Network(topo, run_dir=str(tmp_path / "net")) as net:
        deploy(topo, net.grpc_addresses())
        prepare_hosts(net, topo.hosts())
        plan = bcube_plan(topo, n, k, values, SCALE, pipeline=2)
        path = tmp_path / "plan.json"
        path.write_text(json.dumps(plan))
        procs = [spawn(net.host(h), tmp_path / f"coll-{s}",
                       [sys.executable, "-m", "hosts.bml.collective", "--plan", str(path),
                        "--server", str(s), "--rounds", str(rounds), "--seed", "5",
                        "--timeout", "120", "--out", str(tmp_path / f"out-{s}.npy")],
                       )
                 for s, h in enumerate(plan["hosts"])]
        try:
            for s, p in enumerate(procs):
                assert p.wait(timeout=240) == 0, (tmp_path / f"coll-{s}.err").read_text()
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
    for s in range(n**k):
        got = np.load(tmp_path / f"out-{s}.npy")
        stats = json.loads((tmp_path / f"coll-{s}.out").read_text().splitlines()[-1])
        assert stats["rounds"] == rounds
        assert all(tx > 0 for _, tx in stats["nic"].values()) and len(stats["nic"]) == k
        for r in range(rounds):
            want = _expected(n**k, r, values, 5)
            assert np.array_equal(got[r].view(np.uint32), want.view(np.uint32)), (s, r)
