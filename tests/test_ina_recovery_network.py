"""INA loss recovery through real P4 switches (docs/ina.md, "Loss recovery").

A chain s1 - s2: the PS h1 on s1 (s_d), the workers h5, h6, h7 on s2, which the
placement makes their aggregating switch. Exactly one packet of one kind is lost: the
agents' test-only socket hook (``--drop-sent`` / ``--drop-received``) drops a real
datagram where it leaves or enters an agent, so the switches see the rest of the run
as if a link had dropped that one. Each run is exact element by element, and the
recovery is counted by reason: a lost GRAD costs the PS one flush of s2 (ina.p4 answers
with the aggregate it holds) and one NACK, and its worker one re-send; a lost PARTIAL
one flush and no worker re-send; a lost RESULT one request and one RESULT from the PS;
a lost CLEAR nothing (the RESULT passing s2 freed its aggregator); the last fragment's
lost GRAD is found by the tail-loss probes, not the timers; a rank that starts its round
later than the aggregator timeout adds to the round's aggregates instead of taking them
over. Embedded target unless TARGET says otherwise
(``PATH=/opt/bmv2/bin:$PATH TARGET=bmv2`` runs the same tests on BMv2).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from controller.ina import InaDeployment, InaJob
from experiments.ina import run_jobs
from tests.netenv import started_network
from topologies import linear

pytestmark = [pytest.mark.net, pytest.mark.slow]

WORKERS = ["h5", "h6", "h7"]
N_F = 16  # fragments of 64 values


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[object, object, Path]]:
    with started_network(tmp_path_factory, "ina_recovery",
                         linear(2, hosts_per_switch=4, bw=50), "ina", neighbors=True) as n:
        yield n


def _run(net, tag: str, rank_args=None, ps_args=None, timeout: float = 1.0,  # noqa: ANN001, ANN202
         aggregator_timeout_us: int | None = None):
    network, topo, out = net
    job = InaJob.plan(topo, "h1", WORKERS, 1, 1000.0, N_F * 64)
    assert job.placement is not None and "s2" in job.placement.switches
    dep = InaDeployment(topo, network.grpc_addresses(), [job],
                        aggregator_timeout_us=aggregator_timeout_us)
    dep.deploy()
    rng = np.random.default_rng(len(tag))
    grads = [(rng.standard_normal(N_F * 64) * 0.05).astype(np.float32) for _ in WORKERS]
    (res,) = run_jobs(network, topo, [(job, grads)], out, tag, timeout=timeout,
                      max_time=60.0, rank_args=rank_args, ps_args=ps_args)
    assert res.exact, f"{res.mismatches} elements differ from the exact sum"
    return res, dep


def _by_rank(res, name: str) -> list[int]:  # noqa: ANN001
    return [r[name] for r in res.rank_resends]


def test_lost_grad_flush_then_one_nack(net) -> None:  # noqa: ANN001
    res, _ = _run(net, "grad", rank_args={1: ["--drop-sent", "GRAD=3"]})
    assert _by_rank(res, "resend_nack") == [0, 1, 0]
    assert _by_rank(res, "request_timer") == [0, 0, 0]
    assert res.ps_recovery["flushes_sent"] >= 1 and res.ps_recovery["flush_replies"] >= 1
    assert res.ps_recovery["nacks_sent"] == 1


def test_lost_partial_flushed_again(net) -> None:  # noqa: ANN001
    res, _ = _run(net, "partial", ps_args=["--drop-received", "PARTIAL=3"])
    assert _by_rank(res, "resend_nack") == [0, 0, 0]
    assert _by_rank(res, "request_timer") == [0, 0, 0]
    assert res.ps_recovery["flushes_sent"] >= 1 and res.ps_recovery["flush_replies"] >= 1
    assert res.ps_recovery["nacks_sent"] == 0


def test_lost_result_asked_for_once(net) -> None:  # noqa: ANN001
    res, _ = _run(net, "result", rank_args={0: ["--drop-received", "RESULT=3"]})
    assert _by_rank(res, "request_fast") == [1, 0, 0]
    assert _by_rank(res, "resend_nack") == [0, 0, 0]
    assert _by_rank(res, "request_timer") == [0, 0, 0]
    assert res.ps_recovery["result_resends"] == 1 and res.ps_recovery["nacks_sent"] == 0


def test_lost_clear_costs_nothing(net) -> None:  # noqa: ANN001
    res, dep = _run(net, "clear", ps_args=["--drop-sent", "CLEAR=3"])
    assert res.ps_recovery["clears_sent"] >= 3  # the third one existed, and was lost
    assert sum(res.resends.values()) == 0
    ev = dep.read_events()["s2"]
    # every aggregate s2 sent was freed: by its CLEAR, or by the RESULT passing
    assert ev["partial"] == N_F and ev["cleared"] == ev["partial"]


def test_lost_last_grad_found_by_the_tail_probe(net) -> None:  # noqa: ANN001
    """No later fragment reveals it: the tail-loss probes ask two round trips after the
    last send, and it is back before any timer (1 s floor) fires."""
    res, _ = _run(net, "last", rank_args={1: ["--drop-sent", f"GRAD={N_F}"]}, timeout=1.0)
    assert _by_rank(res, "request_probe")[1] >= 1
    assert _by_rank(res, "request_timer") == [0, 0, 0]
    assert _by_rank(res, "request_fast") == [0, 0, 0]
    assert _by_rank(res, "resend_nack") == [0, 1, 0]


def test_lagging_rank_adds_to_its_round(net) -> None:  # noqa: ANN001
    """Rank 2 starts 0.3 s after the others, three times s2's aggregator timeout (0.1
    s): s2 holds the others' contributions that long, and rank 2's GRADs of the same
    fragments add to them (the same key is taken over only past 4x the timeout) instead
    of dropping them: nothing taken over, nothing NACKed or re-sent (with the old rule,
    16 of 16 taken over and the round re-sent through the PS)."""
    res, dep = _run(net, "lag", rank_args={2: ["--lag", "0.3"]}, timeout=0.2,
                    aggregator_timeout_us=100_000)
    ev = dep.read_events()["s2"]
    assert ev["taken_over"] == 0 and ev["partial"] >= N_F
    assert _by_rank(res, "resend_nack") == [0, 0, 0] and res.ps_recovery["nacks_sent"] == 0
