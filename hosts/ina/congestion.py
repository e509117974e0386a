"""The INA worker's congestion window and retransmission timer (docs/ina.md,
"Congestion window" and "Loss recovery").

The timer is TCP's (RFC 6298): one per allreduce, for the oldest fragment without a
RESULT, restarted by every new RESULT, its timeout ``srtt + 4 rttvar`` from measured
round trips (``RttEstimator``, kept by the worker across allreduces), never below
``timeout`` (the floor) and doubled per expiry up to a ceiling. It is the last resort:
losses are found from evidence first (hosts/ina/transfer.py).

``fixed``: always ``window`` fragments outstanding; the timeout's ceiling is
``max_backoff``. ``aimd``: a congestion window up to ``window`` (slow start from 2,
halved at most once per window of sends on a timeout, then +1 per window of RESULTs);
the ceiling is ``MAX_RTO_FACTOR`` x ``timeout``.
"""

from __future__ import annotations

#: ``Worker(congestion=...)``: a fixed window, or AIMD (docs/ina.md, "Congestion window")
CONGESTION_MODES = ("fixed", "aimd")
#: congestion "aimd": every timer at most 8 x --timeout (a PS must linger longer)
MAX_RTO_FACTOR = 8
#: the timeout from the samples stays within RTO_SPREAD x the floor (backoff aside)
RTO_SPREAD = 2
#: RFC 6298's clock granularity G in ``srtt + max(G, 4 rttvar)``: a steady RTT (rttvar
#: near 0) must not leave the timer at the bare srtt
_GRANULARITY_S = 0.01
#: the least reorder window: completions through different switches, and a busy CPU's
#: pauses, reorder RESULTs by milliseconds while the least round trip through native
#: switches is under one (a window of 2 ms asked for RESULTs already on their way)
REORDER_FLOOR_S = 0.01
#: how far spurious requests may widen the reorder window (RACK's multiplier, RFC 8985)
REORDER_MULT_MAX = 16
#: the least tail-loss probe timeout: a busy CPU's pauses between the last RESULTs
TAIL_PROBE_FLOOR_S = 0.02


class RttEstimator:
    """Smoothed round trip and its variation (RFC 6298), and the timeout they give.

    A sample is the time from a fragment's last data send to its RESULT, so it includes
    the wait for the other ranks: a rank that computes slower lengthens every other
    rank's samples, and their timers follow instead of firing. Fragments whose RESULT
    was asked for again give no sample (Karn's rule: which send it answers is unknown).

    Args:
        floor: the least timeout (the worker's ``--timeout``), also the first one.
        ceiling: the largest timeout, backoff included.
    """

    def __init__(self, floor: float, ceiling: float) -> None:
        self.floor, self.ceiling = floor, max(ceiling, floor)
        self.srtt = self.rttvar = 0.0
        self.min_rtt = float("inf")  # the least sample: the network's share of a round trip
        self.samples = 0
        self.rto = floor
        self.reorder_mult = 1  # doubled by each spurious request, as RACK does on a DSACK
        self.probe_mult = 1  # doubled by each spurious tail-loss probe

    def sample(self, rtt: float) -> float:
        """Take one round-trip sample (seconds); returns the new timeout."""
        if self.samples == 0:
            self.srtt, self.rttvar = rtt, rtt / 2
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - rtt)
            self.srtt = 0.875 * self.srtt + 0.125 * rtt
        self.samples += 1
        if rtt < self.min_rtt:
            self.min_rtt = rtt
        rto = self.srtt + max(_GRANULARITY_S, 4 * self.rttvar)
        # at most RTO_SPREAD x the floor before backoff: a RESULT waits for every rank,
        # so the samples grow with every wait on another rank's recovery, and unbounded
        # the timer of every rank grew to the ceiling (a second of stall per lost packet
        # among the last fragments, which only the timer finds). The timer only asks
        # (52 bytes), so firing early costs little.
        self.rto = min(max(self.floor, rto), RTO_SPREAD * self.floor, self.ceiling)
        return self.rto

    def reorder_window(self) -> float:
        """How long a RESULT that later RESULTs passed may still come before it is asked
        for: two of the least round trips (the PS's own recovery of a lost GRAD, its
        NACK and the re-send, takes about one; a flush one more), times the spurious-
        request multiplier, at least ``REORDER_FLOOR_S``, at most half the timeout.
        Before any sample: half the timeout."""
        if self.samples == 0:
            return self.rto / 2
        return min(max(2 * self.min_rtt * self.reorder_mult, REORDER_FLOOR_S), self.rto / 2)

    def spurious_request(self) -> None:
        """A RESULT asked for early came twice (the original was only late): widen the
        reorder window."""
        self.reorder_mult = min(2 * self.reorder_mult, REORDER_MULT_MAX)

    def probe_timeout(self) -> float:
        """The timer's first expiry after a new RESULT, a request or a re-send: the
        timeout itself (the tail-loss probe, ``tail_probe_timeout``, comes earlier)."""
        return self.rto

    def tail_probe_timeout(self) -> float:
        """How long after its last send or RESULT a worker with every fragment sent
        waits before it asks for the last RESULTs still missing (RFC 8985's PTO): two
        smoothed round trips, times the spurious-probe multiplier, at least
        ``TAIL_PROBE_FLOOR_S``, never past the timer. Before any sample: the timer."""
        if self.samples == 0:
            return self.rto
        return min(max(2 * self.srtt * self.probe_mult, TAIL_PROBE_FLOOR_S), self.rto)

    def spurious_probe(self) -> None:
        """A RESULT the tail-loss probe asked for came twice (it was only late): wait
        longer before the next probe."""
        self.probe_mult = min(2 * self.probe_mult, REORDER_MULT_MAX)

    def backoff(self, expiries: int) -> float:
        """The timeout after ``expiries`` expiries without a new RESULT in between
        (0: the first full timeout, after the probe)."""
        return min(self.rto * (2 ** expiries), self.ceiling)


class CongestionControl:
    """One allreduce's window.

    Args:
        mode: one of ``CONGESTION_MODES``.
        window: most fragments outstanding (with "aimd": the cap of ``cwnd``).
    """

    def __init__(self, mode: str, window: int) -> None:
        self.aimd = mode == "aimd"
        self.window = window
        # congestion window (aimd): slow start to ssthresh, then additive increase; a
        # timeout of a fragment sent after the last decrease halves it (once per window)
        self.cwnd = float(min(2, window)) if self.aimd else float(window)
        self.ssthresh = float(window)
        self.seq_of: dict[int, int] = {}  # fragment -> send sequence number of its last send
        self.recover = 0  # sends numbered below this were in flight at the last decrease

    def on_result(self) -> None:
        """A fragment has its RESULT (aimd only): grow the window."""
        cwnd, window = self.cwnd, self.window
        if cwnd < window:
            self.cwnd = min(float(window), cwnd + (1.0 if cwnd < self.ssthresh else 1.0 / cwnd))

    def on_loss(self, f: int, sent: int) -> bool:
        """Fragment ``f`` was found lost (the timer fired on it, or the PS NACKed it, as
        TCP halves on a fast retransmit) with ``sent`` sends so far; True when the
        window was halved (aimd, and ``f`` was sent after the last decrease)."""
        if not self.aimd or self.seq_of.get(f, 0) < self.recover:
            return False
        self.ssthresh = self.cwnd = max(1.0, self.cwnd / 2)
        self.recover = sent
        return True


def rto_ceiling(mode: str, timeout: float, max_backoff: float) -> float:
    """The largest timer of a worker (``--congestion``, ``--timeout``, ``--max-backoff``):
    a PS must linger longer than this after its job completes."""
    if mode == "aimd":
        return MAX_RTO_FACTOR * timeout
    return max(max_backoff, timeout)
