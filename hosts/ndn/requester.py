"""An NDN consumer's outstanding Interests: pipelined under an adaptive window, scheduled
round-robin over flows, retransmitted until satisfied."""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from wire.ndn import interest_packet

from .window import AimdWindow, RttEstimator

__all__ = ["Requester"]


@dataclass
class _Pending:
    pkt: bytes
    name: list[bytes]
    kind: str
    flow: str | None
    sent_at: float          # last (re)transmission
    due: float
    warm: bool              # sent while its flow was answering: its round trip is a sample
    seq: int = 0            # order of (re)transmission
    retries: int = 0
    later: int = 0          # answers to Interests of its flow sent after it


class Requester:
    """Outstanding Interests of one agent.

    NDN consumers retransmit: a lost Interest or Data is recovered by sending the
    Interest again, with a fresh nonce (the switch's PIT re-forwards a retransmission
    from a port it already holds; a repeated nonce would be dropped as a duplicate).

    Interests expressed with a ``flow`` (the PS: one flow per GPU it collects from) share
    one window of outstanding Interests: with ``adaptive`` an :class:`AimdWindow` of at
    most ``window`` (slow start, +1 per round trip, halved on a timeout), otherwise a fixed
    ``window``. Interests beyond it wait, and the free slots go to the flows in turn
    (round-robin), so N GPUs answering at once put at most ``window`` Data in the queue
    of the PS's port, interleaved, and a GPU still computing (holding its Interests)
    blocks only its own share. Interests without a flow (assignment, subscription) are
    sent at once and are not counted.

    Timeouts: a flow that has not answered since its Interests were expressed is *cold*:
    its Interests may be held by a GPU still computing, so they time out after the fixed
    ``timeout`` and a timeout is no loss signal. Once answered, a flow is *warm*: its
    Interests time out after the :class:`RttEstimator`'s RTO (doubling per retry), and a
    timeout halves the window. A flow with nothing outstanding or queued turns cold again.
    As TCP restarts its timer on every new acknowledgement, a warm Interest times out
    only when its flow has also had no Data for an RTO (its answer may be queued behind
    the window's other Data at the PS's port); and, as TCP's fast retransmit, one whose
    flow answered three Interests sent after it is lost (one GPU's answers come back in
    order) and is sent again at once.
    """

    def __init__(self, face: Any, timeout: float = 0.5,
                 lifetime_ms: int = 4000, window: int = 64, adaptive: bool = True,
                 initial_window: int = 2, min_rto: float = 0.2) -> None:
        self.face = face
        self.timeout = timeout
        self.lifetime_ms = lifetime_ms
        self.adaptive = adaptive
        self.cwnd = AimdWindow(initial=float(min(initial_window, window) if adaptive else window),
                               maximum=float(window))
        self.rtt = RttEstimator(initial_rto=timeout, min_rto=min(min_rto, timeout),
                                max_rto=max(4.0, timeout), margin=min(min_rto, timeout))
        self.pending: dict[bytes, _Pending] = {}
        self.windowed = 0                      # pending Interests that have a flow
        self.backlog: OrderedDict[str, OrderedDict[bytes, tuple[list[bytes], str]]] = OrderedDict()
        self.warm: set[str] = set()
        self.active: set[str] = set()          # flows with Interests outstanding or queued
        self.started: dict[str, float] = {}    # flow -> when its first Interest went out
        self.order: dict[str, OrderedDict[bytes, None]] = {}   # flow -> pending, oldest first
        self.arrived: dict[str, float] = {}    # flow -> its last Data
        self.seq = 0
        self.fast_retransmissions = 0
        self.retransmissions = 0
        self.timeouts_as_loss = 0

    @staticmethod
    def key(name: list[bytes]) -> bytes:
        return b"".join(name)

    def express(self, name: list[bytes], kind: str = "interest", flow: str | None = None) -> None:
        """Send an Interest for ``name`` (or queue it in ``flow`` behind the window) and
        keep it until :meth:`satisfied`."""
        k = self.key(name)
        if k in self.pending or any(k in q for q in self.backlog.values()):
            return
        if flow is None:
            self._send(k, name, kind, None)
            return
        self.backlog.setdefault(flow, OrderedDict())[k] = (name, kind)
        self._fill()

    def _send(self, k: bytes, name: list[bytes], kind: str, flow: str | None) -> None:
        pkt = interest_packet(name, self.lifetime_ms)
        now = time.monotonic()
        self.seq += 1
        p = _Pending(pkt, name, kind, flow, now, now + self._timeout(flow, 0), flow in self.warm, self.seq)
        self.pending[k] = p
        if flow is not None:
            self.windowed += 1
            self.order.setdefault(flow, OrderedDict())[k] = None
            if flow not in self.active:
                self.active.add(flow)
                self.started[flow] = now
        self.face.send(pkt, kind=kind)

    def _timeout(self, flow: str | None, retries: int) -> float:
        if self.adaptive and flow is not None and flow in self.warm:
            return self.rtt.rto(retries)
        return self.timeout

    def _fill(self) -> None:
        """Send queued Interests while the window has room, one flow after the other."""
        while self.backlog and self.windowed < self.cwnd.size:
            flow, queue = next(iter(self.backlog.items()))
            k, (name, kind) = queue.popitem(last=False)
            self.backlog.move_to_end(flow)           # round-robin: this flow goes last
            if not queue:
                del self.backlog[flow]
            self._send(k, name, kind, flow)

    def satisfied(self, name: list[bytes]) -> bool:
        """Forget the Interest for ``name``; True when it was outstanding (or queued).
        A first answer gives a round-trip sample and grows the window."""
        k = self.key(name)
        for flow, queue in self.backlog.items():
            if queue.pop(k, None) is not None:
                if not queue:
                    del self.backlog[flow]
                return True
        p = self.pending.pop(k, None)
        if p is None:
            return False
        if p.flow is not None:
            now = time.monotonic()
            self.windowed -= 1
            if p.warm and p.retries == 0:
                # Karn: first transmissions only; and not one a GPU may have held
                self.rtt.add(now - p.sent_at)
            self.arrived[p.flow] = now
            order = self.order[p.flow]
            del order[k]
            # older Interests of the flow still unanswered; only an answer to a first
            # transmission says where in the flow's order it was sent (Karn again)
            for qk in order if p.retries == 0 else ():
                q = self.pending[qk]
                if q.seq > p.seq:
                    break
                q.later += 1
                if q.later == 3 and p.flow in self.warm:
                    q.due = now                # fast retransmit (tick)
            self.warm.add(p.flow)
            if self.adaptive:
                self.cwnd.on_data()
            self._cool(p.flow)
        self._fill()
        return True

    def _cool(self, flow: str) -> None:
        """A flow with nothing outstanding or queued turns cold (its next Interests may be
        held again)."""
        if flow in self.backlog or self.order.get(flow):
            return
        self.warm.discard(flow)
        self.active.discard(flow)

    def quick_answer(self) -> float | None:
        """How long an Interest answered at once may take: the smoothed round trip plus
        four deviations (queueing at the PS's port included); None before any sample."""
        r = self.rtt
        return None if r.srtt is None else r.srtt + 4 * r.rttvar

    def tick(self) -> float:
        """Retransmit every Interest due; returns seconds until the next one is due."""
        now = time.monotonic()
        nxt = self.timeout
        for k, p in list(self.pending.items()):
            if p.due <= now:
                if self.adaptive and p.flow in self.warm:
                    if p.later < 3:
                        quiet = self.arrived.get(p.flow, 0.0) + self.rtt.rto(p.retries)
                        if quiet > now:        # its flow still answers: not lost yet
                            p.due = quiet
                            nxt = min(nxt, p.due - now)
                            continue
                    else:
                        self.fast_retransmissions += 1
                    self.timeouts_as_loss += 1
                    self.cwnd.on_loss(p.sent_at, now)
                # a retransmission carries a fresh nonce: the switches drop a repeated one
                # as a loop or a copy (ndn_nonce.p4)
                p.pkt = interest_packet(p.name, self.lifetime_ms)
                self.face.send(p.pkt, kind=p.kind)
                self.retransmissions += 1
                p.retries += 1
                p.sent_at = now
                p.later = 0
                self.seq += 1
                p.seq = self.seq
                if p.flow is not None:
                    self.order[p.flow].move_to_end(k)
                p.due = now + self._timeout(p.flow, p.retries)
            nxt = min(nxt, p.due - now)
        return max(nxt, 0.0)

    def summary(self) -> dict[str, Any]:
        """The window's counts and the round-trip estimate, for an agent's summary."""
        return {**self.cwnd.summary(), "adaptive": self.adaptive,
                "srtt_ms": round(self.rtt.srtt * 1e3, 3) if self.rtt.srtt is not None else None,
                "rto_ms": round(self.rtt.rto() * 1e3, 3), "rtt_samples": self.rtt.samples,
                "timeouts_as_loss": self.timeouts_as_loss,
                "fast_retransmissions": self.fast_retransmissions}
