"""The INA worker's congestion window and retransmission timer (docs/ina.md,
"Congestion window").

``fixed``: always ``window`` fragments outstanding and a fixed first timeout, doubled
per retransmission up to ``max_backoff``. ``aimd``: a congestion window up to
``window`` (slow start from 2, halved at most once per window of sends on a timeout,
then +1 per window of RESULTs) and a retransmission timeout from the measured RTT as
TCP's (RFC 6298), never below ``timeout`` and never above ``MAX_RTO_FACTOR`` x it.
"""

from __future__ import annotations

import time

#: ``Worker(congestion=...)``: a fixed window, or AIMD (docs/ina.md, "Congestion window")
CONGESTION_MODES = ("fixed", "aimd")
#: congestion "aimd": every timer at most 8 x --timeout (a PS must linger longer)
MAX_RTO_FACTOR = 8


class CongestionControl:
    """One allreduce's window and timers.

    Args:
        mode: one of ``CONGESTION_MODES``.
        window: most fragments outstanding (with "aimd": the cap of ``cwnd``).
        timeout: the first retransmission timeout (with "aimd": the floor of the RTO).
        max_backoff: upper bound of a retransmission interval.
    """

    def __init__(self, mode: str, window: int, timeout: float, max_backoff: float) -> None:
        self.aimd = mode == "aimd"
        self.window, self.timeout, self.max_backoff = window, timeout, max_backoff
        # congestion window (aimd): slow start to ssthresh, then additive increase; a
        # timeout of a fragment sent after the last decrease halves it (once per window)
        self.cwnd = float(min(2, window)) if self.aimd else float(window)
        self.ssthresh = float(window)
        self.seq_of: dict[int, int] = {}  # fragment -> send sequence number of its last send
        self.recover = 0  # sends numbered below this were in flight at the last decrease
        # aimd: RTO = srtt + 4 rttvar (RFC 6298), sampled from each fragment's last send
        self.last_sent: dict[int, float] = {}
        self.srtt = self.rttvar = 0.0
        # rto: rto_base backed off (at most 4x) since the last sample
        self.rto = self.rto_base = timeout
        # every timer stays under MAX_RTO_FACTOR x --timeout: a RESULT waits for the other
        # ranks, so one rank's long timer lengthens the others' samples, and unbounded
        # the ranks' timers feed each other (docs/ina.md)
        self.max_rto = MAX_RTO_FACTOR * timeout

    def on_send(self, f: int, seq: int, now: float) -> None:
        """Fragment ``f`` went out as send number ``seq`` at ``now``."""
        self.seq_of[f] = seq
        if self.aimd:
            self.last_sent[f] = now

    def on_result(self, f: int) -> float:
        """Fragment ``f`` has its RESULT (aimd only): grow the window, take an RTT
        sample from its last send; returns the new RTO."""
        cwnd, window = self.cwnd, self.window
        if cwnd < window:
            self.cwnd = min(float(window), cwnd + (1.0 if cwnd < self.ssthresh else 1.0 / cwnd))
        # every RESULT is a sample, from the last send (docs/ina.md)
        rtt = time.monotonic() - self.last_sent[f]
        if self.srtt == 0.0:
            self.srtt, self.rttvar = rtt, rtt / 2
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - rtt)
            self.srtt = 0.875 * self.srtt + 0.125 * rtt
        self.rto = self.rto_base = min(max(self.timeout, self.srtt + 4 * self.rttvar),
                                       self.max_rto)
        return self.rto

    def on_timeout(self, f: int, sent: int) -> bool:
        """Fragment ``f``'s timer fired with ``sent`` sends so far; True when the window
        was halved (aimd, and ``f`` was sent after the last decrease)."""
        if not self.aimd or self.seq_of.get(f, 0) < self.recover:
            return False
        self.ssthresh = self.cwnd = max(1.0, self.cwnd / 2)
        self.recover = sent
        # RFC 6298 5.5: back the timer off until the next valid RTT sample, but at most
        # 4x: a RESULT also waits for the other ranks, whose own backoff would otherwise
        # compound with this one without bound
        self.rto = min(2 * self.rto, 4 * self.rto_base, self.max_rto)
        return True

    def backoff(self, attempts: int) -> float:
        """Seconds until the next retransmission after ``attempts`` of them."""
        if self.aimd:
            cap = max(self.max_backoff, min(4 * self.rto_base, self.max_rto))
        else:
            cap = self.max_backoff
        return min(self.rto * (2 ** attempts), cap)
