"""The NDN agents' timing rules and retransmissions, in process (hosts/ndn/timers.py, hosts/ndn/requester.py).

* step 5.3.1's probe timer: 1.5 x the largest of the last five send-to-update delays,
  within 0.3 .. 2 s, 2 s before any delay is known;
* step 5.1's finishing-time estimate at the PS: a held Interest measures, an Interest
  answered at once shrinks the estimate;
* a retransmitted Interest carries a fresh nonce (the switches drop a repeated one).
"""

from __future__ import annotations

import time

import pytest
from ndn.encoding import parse_interest

from hosts.ndn.requester import Requester
from hosts.ndn.timers import finish_estimate, probe_timeout
from wire.ndn import marker, name_of, ndn_payload

GPU_DEFAULTS = dict(factor=1.5, lo=0.3, hi=2.0, initial=2.0)   # hosts/ndn/gpu.py's options


def test_probe_timer_formula() -> None:
    assert probe_timeout([], **GPU_DEFAULTS) == 2.0                       # nothing known yet
    assert probe_timeout([0.4], **GPU_DEFAULTS) == pytest.approx(0.6)     # 1.5 x 0.4
    assert probe_timeout([0.1], **GPU_DEFAULTS) == 0.3                    # lower bound
    assert probe_timeout([5.0], **GPU_DEFAULTS) == 2.0                    # upper bound
    # the largest of the LAST FIVE: an old slow update no longer counts
    assert probe_timeout([1.2, 0.2, 0.3, 0.4, 0.2, 0.5], **GPU_DEFAULTS) == pytest.approx(0.75)
    assert probe_timeout([0.2, 0.3, 1.2, 0.4, 0.2], **GPU_DEFAULTS) == pytest.approx(1.8)


def test_finish_estimate_rules() -> None:
    rtt = 0.01
    assert finish_estimate(None, took=0.8, wait=0.5, rtt=rtt) == 0.8      # the first one
    # held: answered when done (wait well above the RTT): average with the measurement
    assert finish_estimate(1.0, took=0.6, wait=0.3, rtt=rtt) == pytest.approx(0.8)
    # answered at once: the PS asked too late; shrink to 0.7 x the smaller
    assert finish_estimate(1.0, took=0.6, wait=0.02, rtt=rtt) == pytest.approx(0.42)
    assert finish_estimate(0.5, took=2.0, wait=0.02, rtt=rtt) == pytest.approx(0.35)
    # repeated early answers keep shrinking: the PS asks earlier and earlier, until one is held
    est = 1.0
    for _ in range(5):
        est = finish_estimate(est, took=1.0, wait=0.02, rtt=rtt)
    assert est == pytest.approx(0.7 ** 5)


class _Face:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def send(self, pkt: bytes, dest: object = None, kind: str = "other") -> None:
        self.sent.append(pkt)


def test_retransmission_has_a_fresh_nonce() -> None:
    face = _Face()
    req = Requester(face, timeout=0.01)          # type: ignore[arg-type]
    name = name_of("h1", "train", "v=1", "seg=0")
    req.express(name)
    time.sleep(0.02)
    req.tick()
    assert len(face.sent) == 2 and req.retransmissions == 1
    (n1, p1, _, _), (n2, p2, _, _) = (parse_interest(ndn_payload(p)) for p in face.sent)
    assert [bytes(c) for c in n1] == [bytes(c) for c in n2] == name
    assert p1.nonce != p2.nonce
    assert req.satisfied(name) and not req.pending


def test_unsubscribe_marker() -> None:
    assert marker(name_of(b"*unsubscribe*", "h1", "train", "h2")) == "unsubscribe"
    assert marker(name_of(b"*insert*", "h1", "train", "h2")) == "insert"
