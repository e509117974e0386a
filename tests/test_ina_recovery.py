"""INA loss recovery on loopback (docs/ina.md, "Loss recovery"): exactly one packet of
one kind is lost (the agents' test-only socket hook drops a real datagram on its way
out or discards it on arrival), and the recovery asks for exactly it: a NACK for a
lost GRAD, a flush for a lost PARTIAL (then a NACK for a GRAD lost on its way to a
switch), a request for a lost RESULT, the timer for the last fragment. Each run is
checked element by element against the exact sum, and the re-sends are counted by
reason. The same losses through real P4 switches: tests/test_ina_recovery_network.py.
"""

from __future__ import annotations

import numpy as np

from hosts.ina.agent import FaultInjection, parse_fault_spec
from hosts.ina.congestion import REORDER_FLOOR_S, RttEstimator
from hosts.ina.worker import Policy
from tests.ina_loopback import PORT, _check_exact, _grads, _run, net
from tests.test_ina_hosts_rounds import _ModelSwitches
from wire.ina import MsgType

__all__ = ["net"]  # the fixture, imported

GRAD, PARTIAL, RESULT = int(MsgType.GRAD), int(MsgType.PARTIAL), int(MsgType.RESULT)
N_W, N_F = 4, 16
# the timer well above a loopback round trip: only evidence recovers a loss in the middle
SLOW_TIMER = {"timeout": 1.0, "max_backoff": 2.0}


def _ps_policy(net, n_f: int = N_F) -> Policy:  # noqa: ANN001
    return Policy.ps_only(7, net(1), [net(2 + r) for r in range(N_W)], n_f)


def _switch_policy(net, n_f: int = N_F) -> Policy:  # noqa: ANN001
    """Every worker's every fragment is aggregated by model switch 5 (fan-in 4)."""
    return Policy(job=7, ps=net(1), workers=tuple(net(2 + r) for r in range(N_W)),
                  num_fragments=n_f, tags=np.full((N_W, n_f), 5), switch_ips={5: net(50)})


def _faults(**per_rank: FaultInjection):  # noqa: ANN202
    """``worker_kw["faults"]``: rank r's injection (``r1=...``), the others none."""
    it = iter([per_rank.get(f"r{r}") for r in range(N_W)])
    return lambda: next(it)


def _counts(out: dict, job: int, name: str) -> list[int]:
    return [getattr(out[job, r][1], name) for r in range(N_W)]


def test_fault_spec_parses_and_refuses() -> None:
    assert parse_fault_spec(["grad=3", "RESULT=1,4"]) == {GRAD: {3}, RESULT: {1, 4}}
    for bad in (["GRADS=1"], ["GRAD="], ["GRAD=0"], ["GRAD=x"]):
        try:
            parse_fault_spec(bad)
        except ValueError as e:
            assert "fault spec" in str(e)
        else:
            raise AssertionError(f"{bad} accepted")


def test_rtt_estimator_follows_samples_within_floor_and_ceiling() -> None:
    rtt = RttEstimator(0.2, 1.0)
    assert rtt.rto == 0.2 and rtt.reorder_window() == 0.1  # no sample yet
    for _ in range(20):
        rtt.sample(0.3)  # a steady 0.3 s (waiting for a slower rank): the timer follows
    assert 0.3 < rtt.rto <= 0.32 and rtt.min_rtt == 0.3
    for _ in range(20):
        rtt.sample(2.0)  # ... up to twice its floor, not to every wait
    assert rtt.rto == 0.4
    assert rtt.backoff(1) == 0.8 and rtt.backoff(5) == 1.0  # doubled, capped
    for _ in range(50):
        rtt.sample(0.001)
    assert rtt.rto == 0.2  # never below the floor
    assert rtt.reorder_window() == REORDER_FLOOR_S  # two least round trips (2 ms): the floor
    rtt = RttEstimator(0.2, 1.0)
    rtt.sample(0.008)
    assert rtt.reorder_window() == 0.016  # two of the least round trips
    rtt.spurious_request()  # an early request whose original came too: twice as wide
    assert rtt.reorder_window() == 0.032
    for _ in range(10):
        rtt.spurious_request()
    assert rtt.reorder_window() == 0.1  # at most half the timeout


def test_lost_grad_is_nacked_once(net) -> None:  # noqa: ANN001
    """Rank 1's third GRAD (fragment 2) never leaves: the PS sees three later fragments
    complete without it and NACKs rank 1 alone, which re-sends it once."""
    pol = _ps_policy(net)
    grads = _grads(N_W, N_F * 64, seed=1)
    rep, ps, out = _run([pol], {7: grads}, worker_kw={
        **SLOW_TIMER, "faults": _faults(r1=FaultInjection(drop_sent={GRAD: {3}}))})
    _check_exact(pol, grads, ps, out)
    st = rep.jobs[7]
    assert _counts(out, 7, "resend_nack") == [0, 1, 0, 0]
    assert _counts(out, 7, "request_timer") == [0, 0, 0, 0]
    assert st.nacks_sent == 1 and st.flushes_sent == 0
    assert st.contributions == N_W * N_F and st.duplicates == 0
    # a request for fragment 2 (its RESULT late past the reorder window) costs at most
    # one small datagram a rank, and the PS answers none with a second NACK
    assert sum(_counts(out, 7, "request_fast")) <= N_W
    assert st.result_resends <= sum(_counts(out, 7, "request_fast"))


def test_lost_result_is_asked_for_once(net) -> None:  # noqa: ANN001
    """The PS's third RESULT (fragment 0 to rank 2) is lost: rank 2 sees later RESULTs,
    asks once, and gets the RESULT the PS holds; nobody re-sends a GRAD."""
    pol = _ps_policy(net)
    grads = _grads(N_W, N_F * 64, seed=2)
    rep, ps, out = _run([pol], {7: grads}, ps_kw={"faults": FaultInjection(drop_sent={RESULT: {3}})},
                        worker_kw=SLOW_TIMER)
    _check_exact(pol, grads, ps, out)
    st = rep.jobs[7]
    assert _counts(out, 7, "request_fast") == [0, 0, 1, 0]
    assert _counts(out, 7, "resend_nack") == [0, 0, 0, 0]
    assert _counts(out, 7, "request_timer") == [0, 0, 0, 0]
    assert st.result_resends == 1 and st.nacks_sent == 0


def test_lost_last_grad_is_recovered_by_the_tail_probe(net) -> None:  # noqa: ANN001
    """Rank 1's last GRAD is lost: no later fragment reveals it, so the tail-loss probes
    ask (two round trips after the last send, long before the 1 s timer); the PS NACKs
    rank 1, which re-sends it once."""
    pol = _ps_policy(net)
    grads = _grads(N_W, N_F * 64, seed=3)
    rep, ps, out = _run([pol], {7: grads}, worker_kw={
        "timeout": 1.0, "max_backoff": 2.0, "faults": _faults(r1=FaultInjection(drop_sent={GRAD: {N_F}}))})
    _check_exact(pol, grads, ps, out)
    st = rep.jobs[7]
    assert _counts(out, 7, "request_probe")[1] >= 1 and st.requests_in >= 1
    assert _counts(out, 7, "request_timer") == [0, 0, 0, 0]
    assert _counts(out, 7, "request_fast") == [0, 0, 0, 0]
    assert _counts(out, 7, "resend_nack")[1] >= 1
    assert sum(_counts(out, 7, "resend_nack")) == _counts(out, 7, "resend_nack")[1]
    assert st.contributions == N_W * N_F


def test_lost_partial_is_flushed_again(net) -> None:  # noqa: ANN001
    """The third PARTIAL of model switch 5 is lost on its way into the PS: three later
    fragments complete, the PS flushes switch 5, which sends the complete aggregate
    again; no worker re-sends anything."""
    pol = _switch_policy(net)
    model = _ModelSwitches(pol, (net(1), PORT))
    model.start()
    grads = _grads(N_W, N_F * 64, seed=4)
    try:
        rep, ps, out = _run([pol], {7: grads}, worker_kw=SLOW_TIMER,
                            ps_kw={"faults": FaultInjection(drop_received={PARTIAL: {3}})})
    finally:
        model.close()
    _check_exact(pol, grads, ps, out)
    st = rep.jobs[7]
    assert st.flushes_sent == 1 and model.flushes == 1 and st.flush_replies == 1
    assert st.nacks_sent == 0
    assert _counts(out, 7, "resend_nack") == [0, 0, 0, 0]
    assert _counts(out, 7, "request_timer") == [0, 0, 0, 0]
    assert st.accepted_partial == N_F  # every fragment from the switch, none from a worker


def test_grad_lost_before_the_switch_flush_then_one_nack(net) -> None:  # noqa: ANN001
    """Rank 1's third GRAD never reaches switch 5: the PS's flush brings the aggregate
    of ranks 0, 2 and 3, which tells the PS whom it lacks: rank 1 alone is NACKed."""
    pol = _switch_policy(net)
    model = _ModelSwitches(pol, (net(1), PORT))
    model.start()
    grads = _grads(N_W, N_F * 64, seed=5)
    try:
        rep, ps, out = _run([pol], {7: grads}, worker_kw={
            **SLOW_TIMER, "faults": _faults(r1=FaultInjection(drop_sent={GRAD: {3}}))})
    finally:
        model.close()
    _check_exact(pol, grads, ps, out)
    st = rep.jobs[7]
    assert st.flushes_sent == 1 and st.flush_replies == 1 and st.nacks_sent == 1
    assert _counts(out, 7, "resend_nack") == [0, 1, 0, 0]
    assert _counts(out, 7, "request_timer") == [0, 0, 0, 0]
    assert st.contributions == N_W * N_F and st.overlaps == 0


def test_reordered_grad_after_a_flush_is_counted_once(net) -> None:  # noqa: ANN001
    """Rank 1's third GRAD is held back until 30 more datagrams have gone out (its
    other 29 GRADs and the re-send the PS's NACK asks for): the PS flushes and NACKs
    rank 1 meanwhile, and the late GRAD then completes switch 5's aggregate. Either copy of rank 1's values is summed, never both (the late
    aggregate adds only what the flush did not bring, and only if it is still
    missing)."""
    n_f = 32
    pol = _switch_policy(net, n_f)
    model = _ModelSwitches(pol, (net(1), PORT))
    model.start()
    grads = _grads(N_W, n_f * 64, seed=6)
    try:
        rep, ps, out = _run([pol], {7: grads}, worker_kw={
            **SLOW_TIMER, "faults": _faults(r1=FaultInjection(hold_sent={GRAD: (3, 30)}))})
    finally:
        model.close()
    _check_exact(pol, grads, ps, out)
    st = rep.jobs[7]
    assert st.contributions == N_W * n_f  # every worker once per fragment
    # one flush, and a second when rank 1's request for the RESULT reached the PS after
    # the first had gone out (the PS asks the switch again before it NACKs): scheduling
    assert st.flushes_sent in (1, 2) and _counts(out, 7, "request_timer") == [0, 0, 0, 0]
    assert model.partials == n_f  # the late GRAD completed the flushed aggregate


def test_duplicated_and_lost_packets_exact(net) -> None:  # noqa: ANN001
    """Every datagram of ranks 0 and 2 sent twice, and every 5th of rank 3 lost, through
    the model switch: exact, every contribution counted once."""
    pol = _switch_policy(net, 40)
    model = _ModelSwitches(pol, (net(1), PORT))
    model.start()
    grads = _grads(N_W, 40 * 64, seed=7)
    try:
        rep, ps, out = _run([pol], {7: grads}, worker_kw={"timeout": 0.1, "faults": _faults(
            r0=FaultInjection(send_twice=True), r2=FaultInjection(send_twice=True),
            r3=FaultInjection(drop_every=5))})
    finally:
        model.close()
    _check_exact(pol, grads, ps, out)
    assert rep.jobs[7].contributions == N_W * 40


def test_unanswered_flush_does_not_hold_back_the_askers_nack() -> None:
    """A flush whose reply never comes (the flush or the reply lost, the switch out of
    reach) holds back a missing asker's NACK for two flush round trips, not for good."""
    from hosts.ina.recovery import JobRecovery

    rec = JobRecovery(3, 4, np.full((3, 4), 5))
    first = rec.on_request(0, 0b001, 0b111, 10.0)
    assert first is not None and first.flush == [5] and first.nack == 0
    assert rec.on_request(0, 0b001, 0b111, 10.0 + rec.flush_rtt) is None  # reply may come
    late = rec.on_request(0, 0b001, 0b111, 10.0 + 2 * rec.flush_rtt + 1e-3)
    assert late is not None and late.nack == 0b001 and late.flush == []
    rec.flush_answered(0, 5, 10.01)
    # answered before this asker's request: the reply may predate its GRAD at the
    # switch (a rank lagging the others holds their aggregate incomplete), so the
    # switch is asked again; its reply NACKs the asker if it still lacks it
    again = rec.on_request(0, 0b010, 0b010, 10.02)
    assert again is not None and again.flush == [5] and again.nack == 0
    assert rec.pending[0] == 0b010
    # asked while that flush is out: its reply may predate this GRAD too
    assert rec.on_request(0, 0b100, 0b110, 10.021) is None and rec.refresh[0] & 0b100


def test_switch_out_of_reach_is_recovered_through_the_ps(net) -> None:  # noqa: ANN001
    """Every fragment is tagged for switch 5, which nothing serves: every GRAD to it and
    every flush is lost. The workers' timers ask, the PS flushes in vain, then NACKs
    each asker, whose re-sends go straight to the PS: exact, no flush answered. (Once,
    the PS waited for the flush reply for good: no RESULT ever.)"""
    pol = _switch_policy(net, 4)
    grads = _grads(N_W, 4 * 64, seed=8)
    rep, ps, out = _run([pol], {7: grads})
    _check_exact(pol, grads, ps, out)
    st = rep.jobs[7]
    assert st.flush_replies == 0 and st.flushes_sent >= 1
    assert _counts(out, 7, "resend_nack") == [4, 4, 4, 4]  # every GRAD once more, to the PS
    assert st.contributions == N_W * 4 and st.accepted_partial == 0


def test_only_completions_of_the_same_path_count_against_a_fragment() -> None:
    """Fragments of switch 5 (even) and switch 6 (odd): completions through switch 6 are
    no evidence against a fragment of switch 5 (paths reorder); three of switch 5's own
    later fragments are (level 1: a flush of switch 5)."""
    from hosts.ina.recovery import REORDER_ALLOWANCE, JobRecovery

    tags = np.tile(np.array([5, 6] * 8), (2, 1))
    rec = JobRecovery(2, 16, tags)
    finished: dict = {}
    for f in (1, 3, 5, 7, 9):  # switch 6's: fragment 0 of switch 5 stays unsuspected
        assert rec.on_complete(f, finished, 1.0) == []
        finished[f] = b""
    due = []
    for f in (2, 4, 6)[:REORDER_ALLOWANCE]:
        due += rec.on_complete(f, finished, 1.0)
        finished[f] = b""
    assert due == [0]
    act = rec.escalate(0, 0b11, 1.0)
    assert act is not None and act.flush == [5] and act.nack == 0
