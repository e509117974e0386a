"""Shared rig of the INA host-agent tests (``test_ina_hosts_*.py``): loopback addresses,
gradients, one PS-and-workers run and its exactness check.

The PS and the workers run as threads (one CLI test as processes) on 127.x.y.z
addresses: the subnet is derived from the pid and a per-test counter, so concurrent
test runs never share an address:port. Without switches the policy is the PS baseline
(tag 0 everywhere), except in the test that runs a Python model of the switch side.
Every end-to-end test checks each element of the result against the exact integer sum
of the workers' fixed-point values.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from hosts.ina.ps import ParameterServer, PSReport
from hosts.ina.worker import (
    Policy,
    Worker,
)
from wire.fixedpoint import (
    dequantize,
    num_fragments,
    quantize,
)
from wire.ina import (
    INA_UDP_PORT,
)

ROOT = Path(__file__).resolve().parent.parent
PORT = INA_UDP_PORT
S = 16

_subnet = itertools.count(1)


@pytest.fixture
def net():
    """``net(z)`` -> a fresh loopback address 127.a.b.z for this test."""
    pid = os.getpid()
    a, b = 100 + pid % 150, (pid // 150 + next(_subnet) * 7) % 250 + 1
    return lambda z: f"127.{a}.{b}.{z}"


def _grads(n_workers: int, n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(n) * 3).astype(np.float32) for _ in range(n_workers)]


def _exact(grads: list[np.ndarray], n_workers: int) -> np.ndarray:
    return np.sum([quantize(g, S, n_workers).astype(np.int64) for g in grads], axis=0)


def _run(
    policies: list[Policy],
    grads: dict[int, list[np.ndarray]],
    ps_kw: dict | None = None,
    worker_kw: dict | None = None,
    before: Callable[[ParameterServer], None] | None = None,
) -> tuple[PSReport, ParameterServer, dict[tuple[int, int], tuple]]:
    """PS (all ``policies``) + every job's workers as threads; returns the PS report,
    the PS and {(job, rank): (int result, stats)}. ``before(ps)`` runs once the PS
    socket is bound, before anything starts."""
    ps_kw = {"linger": 0.3, "max_time": 20.0, **(ps_kw or {})}
    worker_kw = {"timeout": 0.05, "max_backoff": 0.2, "max_time": 20.0, **(worker_kw or {})}
    ps = ParameterServer.from_policies(policies, **ps_kw)
    if before is not None:
        before(ps)
    box: dict = {}
    errors: list[BaseException] = []

    def serve() -> None:
        try:
            box["report"] = ps.run()
        except BaseException as e:  # surfaced below
            errors.append(e)

    out: dict[tuple[int, int], tuple] = {}

    def work(pol: Policy, rank: int) -> None:
        try:
            kw = dict(worker_kw)
            if callable(kw.get("faults")):
                kw["faults"] = kw["faults"]()
            with Worker.from_policy(pol, rank, **kw) as w:
                out[pol.job, rank] = w.allreduce(grads[pol.job][rank])
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=serve)]
    threads += [
        threading.Thread(target=work, args=(p, r)) for p in policies for r in range(p.num_workers)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    ps.close()
    if errors:
        raise errors[0]
    return box["report"], ps, out


def _check_exact(pol: Policy, grads: list[np.ndarray], ps: ParameterServer, out: dict) -> None:
    """Every rank's int32 result and the PS's sums equal the exact integer sums, element
    by element, in fragments of the policy's values per packet."""
    exp = _exact(grads, pol.num_workers)
    assert np.abs(exp).max() < 2**31
    n = exp.size
    for r in range(pol.num_workers):
        res, st = out[pol.job, r]
        assert res.dtype == np.int32 and res.shape == (n,)
        assert np.array_equal(res.astype(np.int64), exp)
        fl = dequantize(res, S)
        assert np.array_equal(fl, (exp / 2.0**S).astype(np.float32))
        assert st.results == st.fragments == num_fragments(n, pol.values_per_packet)
    assert np.array_equal(ps.result(pol.job)[:n].astype(np.int64), exp)
