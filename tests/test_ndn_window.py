"""The NDN consumer's window and retransmission timer (hosts/ndn/window.py), in process.
Their behaviour on a real network, with loss on a link, is in tests/test_ndn_network.py."""

from __future__ import annotations

import pytest

from hosts.ndn.window import AimdWindow, RttEstimator


def test_slow_start_then_one_more_per_round_trip() -> None:
    w = AimdWindow(initial=2, maximum=64)
    w.ssthresh = 8
    for _ in range(6):                    # slow start: +1 per Data up to ssthresh
        w.on_data()
    assert w.cwnd == 8
    for _ in range(8):                    # congestion avoidance: one window of Data, +1
        w.on_data()
    assert w.size == 8 and 8.9 < w.cwnd < 9.0       # about one more per round trip
    for _ in range(3000):
        w.on_data()
    assert w.cwnd == 64                    # capped at the maximum
    assert w.increases == len(w.trace) and w.decreases == 0
    assert all(b[1] > a[1] for a, b in zip(w.trace, w.trace[1:], strict=False))   # only ever grew


def test_loss_halves_once_per_congestion_event() -> None:
    w = AimdWindow(initial=2, maximum=64)
    for _ in range(30):
        w.on_data()
    assert w.cwnd == 32
    assert w.on_loss(sent_at=1.0, now=2.0)
    assert w.cwnd == 16 and w.ssthresh == 16
    # more timeouts of Interests sent before that decrease: the same event, no change
    assert not w.on_loss(sent_at=1.5, now=2.1)
    assert w.cwnd == 16
    # an Interest sent after it: a new event
    assert w.on_loss(sent_at=2.05, now=2.5)
    assert w.cwnd == 8 and w.decreases == 2
    for _ in range(20):
        w.on_loss(sent_at=10.0 + _, now=10.5 + _)
    assert w.cwnd == 1 and w.size == 1    # never below one Interest
    assert [c for e, c in w.trace if e == "decrease"][:2] == [16, 8]


def test_bad_window_is_refused() -> None:
    with pytest.raises(ValueError):
        AimdWindow(initial=0, maximum=4)
    with pytest.raises(ValueError):
        AimdWindow(initial=2, maximum=4, md=1.0)


def test_rto_from_measured_round_trips_and_backoff() -> None:
    r = RttEstimator(initial_rto=1.0, min_rto=0.01, max_rto=4.0)
    assert r.rto() == 1.0                 # nothing measured yet
    r.add(0.1)
    assert r.srtt == pytest.approx(0.1) and r.rto() == pytest.approx(0.1 + 4 * 0.05)
    for _ in range(50):
        r.add(0.1)
    assert r.rto() == pytest.approx(0.1, abs=0.01)   # steady round trips: rttvar -> 0
    r.add(0.5)                                       # a jump widens the margin
    assert r.rto() > 0.4
    assert r.rto(retries=1) == pytest.approx(2 * r.rto())
    assert r.rto(retries=10) == 4.0                  # capped
    low = RttEstimator(min_rto=0.2)
    low.add(0.001)
    assert low.rto() == 0.2
    # a standing queue: steady 190 ms round trips, rttvar -> 0; the margin keeps the RTO
    # clear of the jitter (srtt + 4 rttvar alone would sit a few ms above srtt)
    steady = RttEstimator(min_rto=0.2, margin=0.2)
    for _ in range(60):
        steady.add(0.19)
    assert steady.rto() == pytest.approx(0.39, abs=0.005)


def test_a_streamed_update_is_the_whole_update_bit_for_bit() -> None:
    """``--distribute stream`` computes the update segment by segment as the gradients'
    segments come in: the SGD step is element-wise, so the segments, joined, are the
    update computed at once, bit for bit (the synthetic step and the harness's torch step)."""
    import numpy as np

    from hosts.ndn.harness import HarnessWork, sgd_step
    from wire.ndn import SEGMENT_VALUES

    work = HarnessWork("digits", "digits", 0, 16, 21, 0)
    p = work.params()
    rng = np.random.default_rng(1)
    grads = [(rng.standard_normal(p.size) * 0.01).astype(np.float32) for _ in range(4)]
    cuts = range(0, p.size, SEGMENT_VALUES)
    streamed = np.concatenate([work.apply_slice(p[lo:lo + SEGMENT_VALUES],
                                                [g[lo:lo + SEGMENT_VALUES] for g in grads], 0.5)
                               for lo in cuts])
    assert streamed.view(np.uint32).tolist() == work.apply(grads, 0.5).view(np.uint32).tolist()
    synth = np.concatenate([sgd_step(p[lo:lo + SEGMENT_VALUES], [g[lo:lo + SEGMENT_VALUES] for g in grads], 0.1)
                            for lo in cuts])
    assert synth.view(np.uint32).tolist() == sgd_step(p, grads, 0.1).view(np.uint32).tolist()
    assert not np.array_equal(streamed, p)          # the step did move the parameters
