"""An NDN consumer's congestion window and retransmission timer.

What NDN's segment fetchers do, so that a PS pulling N gradients keeps its link busy
without a fixed guess of how many Interests to keep outstanding:

* :class:`RttEstimator`: the retransmission timeout from measured round trips, as NDN's
  RTT estimator (and TCP's, RFC 6298) computes it: ``srtt``, ``rttvar`` smoothed with
  gains 1/8 and 1/4, ``rto = srtt + max(4 rttvar, margin)`` within ``[min_rto, max_rto]``
  (``margin``, as Linux TCP's rto_min: a standing queue makes the round trips steady,
  rttvar small, and the emulator's jitter would time out Interests that are only late), doubled
  for each further retransmission of one Interest (exponential back-off). Round trips of
  retransmitted Interests are not sampled (Karn: whose Data answers them is unknown).
* :class:`AimdWindow`: the congestion window. Slow start (one more Interest per Data)
  up to ``ssthresh``, then additive increase (one more per window's worth of Data, i.e.
  one per round trip); multiplicative decrease (``x md``) on a timeout or a congestion
  mark, at most once per round trip (a burst of losses from one congestion event halves
  the window once: only an Interest sent after the last decrease can decrease it again).

Both are plain state machines over given times, with no I/O: :class:`hosts.ndn.requester.
Requester` drives them. :attr:`AimdWindow.trace` keeps every change of the window (for the
tests and the reports) as ``(event, cwnd)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["AimdWindow", "RttEstimator"]


@dataclass
class RttEstimator:
    """Smoothed round trip and retransmission timeout (seconds)."""

    initial_rto: float = 1.0
    min_rto: float = 0.2
    max_rto: float = 4.0
    margin: float = 0.0      # least margin over srtt (Linux TCP keeps its rto_min here)
    srtt: float | None = None
    rttvar: float = 0.0
    samples: int = 0

    def add(self, rtt: float) -> None:
        """One round-trip sample of an Interest sent once."""
        rtt = max(rtt, 0.0)
        if self.srtt is None:
            self.srtt, self.rttvar = rtt, rtt / 2
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - rtt)
            self.srtt = 0.875 * self.srtt + 0.125 * rtt
        self.samples += 1

    def rto(self, retries: int = 0) -> float:
        """The timeout of an Interest sent ``retries`` times before (doubled per retry)."""
        base = self.initial_rto if self.srtt is None else self.srtt + max(4 * self.rttvar, self.margin)
        base = min(self.max_rto, max(self.min_rto, base))
        return min(self.max_rto, base * (2 ** min(retries, 16)))


@dataclass
class AimdWindow:
    """Additive-increase, multiplicative-decrease window of outstanding Interests."""

    initial: float = 2.0
    maximum: float = 64.0
    minimum: float = 1.0
    md: float = 0.5
    cwnd: float = 0.0
    ssthresh: float = float("inf")
    last_decrease: float = float("-inf")
    increases: int = 0
    decreases: int = 0
    trace: list[tuple[str, float]] = field(default_factory=list)
    trace_limit: int = 10_000

    def __post_init__(self) -> None:
        if not 1.0 <= self.initial <= self.maximum or not 0.0 < self.md < 1.0:
            raise ValueError("window: need 1 <= initial <= maximum and 0 < md < 1")
        self.minimum = min(max(self.minimum, 1.0), self.initial)
        self.cwnd = self.cwnd or self.initial

    @property
    def size(self) -> int:
        """How many Interests may be outstanding now."""
        return max(1, int(self.cwnd))

    def _log(self, event: str) -> None:
        if len(self.trace) < self.trace_limit:
            self.trace.append((event, round(self.cwnd, 3)))

    def on_data(self) -> None:
        """A Data answered an outstanding Interest: grow (slow start, then +1 per RTT)."""
        if self.cwnd >= self.maximum:
            return
        if self.cwnd < self.ssthresh:
            self.cwnd += 1.0
        else:
            self.cwnd += 1.0 / self.cwnd
        self.cwnd = min(self.cwnd, self.maximum)
        self.increases += 1
        self._log("increase")

    def on_loss(self, sent_at: float, now: float) -> bool:
        """A timeout (or congestion mark) on an Interest sent at ``sent_at``: halve the
        window, unless it was sent before the last decrease (the same congestion event).
        Returns whether the window decreased."""
        if sent_at <= self.last_decrease:
            return False
        self.ssthresh = max(self.minimum, self.cwnd * self.md)
        self.cwnd = self.ssthresh
        self.last_decrease = now
        self.decreases += 1
        self._log("decrease")
        return True

    def summary(self) -> dict[str, float | int]:
        """Counts and extremes of the window, for an agent's JSON summary."""
        sizes = [c for _, c in self.trace] or [self.cwnd]
        first = next((i for i, (e, _) in enumerate(self.trace) if e == "decrease"), -1)
        return {"cwnd": round(self.cwnd, 3), "ssthresh": (round(self.ssthresh, 3)
                                                          if self.ssthresh != float("inf") else None),
                "max_cwnd": max(sizes), "increases": self.increases, "decreases": self.decreases,
                "decreased_to": [c for e, c in self.trace if e == "decrease"][:50],
                "increases_after_first_decrease": sum(
                    e == "increase" for e, _ in self.trace[first + 1:]) if first >= 0 else None}
