"""One INA allreduce on the wire (docs/ina.md, "Worker"): first sends up to the
congestion window, RESULTs collected, timed-out fragments resent straight to the PS.

The loop of ``Worker.allreduce``: one non-blocking UDP socket multiplexed with
``select``; the hot path is plain ``struct`` + ``bytes`` slicing, with the loop's
counters in locals inside each step.
"""

from __future__ import annotations

import heapq
import select
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from hosts.ina.agent import InaTimeoutError
from hosts.ina.congestion import CongestionControl
from hosts.ina.stamp import admitted
from wire.ina import INA_HEADER, INA_HEADER_LEN, InaFlags, MsgType
from wire.ina_policy import FragmentRouting

_RECV_SIZE = 2048


@dataclass
class WorkerStats:
    """What one ``allreduce`` did."""

    rank: int
    job: int
    elements: int = 0
    fragments: int = 0
    packets_sent: int = 0  # GRAD datagrams handed to the socket, retransmissions included
    retransmissions: int = 0
    bytes_sent: int = 0  # UDP payload bytes
    results: int = 0  # fragments completed by a RESULT
    duplicate_results: int = 0
    stale_results: int = 0  # RESULT for a fragment not sent yet (older run, other offset)
    ignored: int = 0  # wrong size, wrong type, wrong job, out of range, bad bitmap
    refused_source: int = 0  # a RESULT from an address not the job's PS or s_d (docs/trust.md)
    refused_stamp: int = 0  # a RESULT without the job's admission stamp (hosts/ina/stamp.py)
    send_blocked: int = 0  # socket buffer full: waited for it to drain
    window_decreases: int = 0  # congestion "aimd": times a timeout halved the window
    rto_s: float = 0.0  # congestion "aimd": the last retransmission timeout from the RTT
    fault_drops: int = 0  # TEST ONLY: dropped by FaultInjection
    duration_s: float = 0.0

    @property
    def pps(self) -> float:
        """Datagrams sent plus received per second."""
        total = self.packets_sent + self.results + self.duplicate_results
        return total / self.duration_s if self.duration_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["pps"] = round(self.pps, 1)
        d["duration_s"] = round(self.duration_s, 6)
        return d


class FragmentTransfer:
    """Send ``n_f`` fragments of ``payload`` and collect their RESULTs.

    Block floating point: ``exps`` is each fragment's ``max_exp``; fragment
    ``f >= lookahead`` goes out only once fragment ``f - lookahead`` has its RESULT, and
    ``on_result(f, max_exp)`` (called on each RESULT) has written its values into
    ``payload`` (then a bytearray) by then. ``stats`` is filled in as it goes.
    ``worker`` is the ``hosts.ina.worker.Worker`` sending (its socket and settings).
    """

    def __init__(self, worker: Any, stats: WorkerStats, payload: bytes | bytearray,
                 n_f: int, routing: FragmentRouting, offset: int, *,
                 exps: list[int] | None = None, lookahead: int = 0,
                 on_result: Callable[[int, int], None] | None = None) -> None:
        self.w, self.st = worker, stats
        self.payload, self.n_f, self.offset = payload, n_f, offset
        self.exp_of = exps or [0] * n_f
        self.lookahead, self.on_result = lookahead, on_result
        self.dest = worker._destinations(routing)
        self.tags = routing.tags.tolist()
        self.fanin = routing.fanin.tolist()
        self.flags = routing.flags.tolist()
        self.sd_fanin = routing.sd_fanin.tolist()
        self.grad_t = int(MsgType.GRAD)
        self.bit, self.full = 1 << worker.rank, (1 << worker.num_workers) - 1
        sock, faults = worker.sock, worker.faults
        self.sendto = sock.sendto if faults is None else (lambda d, a: faults.send(sock, d, a))
        self.vl = 4 * worker.values_per_packet
        self.pl = INA_HEADER_LEN + self.vl
        self.cc = CongestionControl(worker.congestion, worker.window, worker.timeout,
                                    worker.max_backoff)
        self.result = bytearray(n_f * self.vl)
        self.done = bytearray(n_f)
        self.attempts: dict[int, int] = {}
        self.timers: list[tuple[float, int]] = []  # (deadline, fragment), lazily deleted
        self.next_f = self.n_done = self.outstanding = self.sent = self.retx_n = 0
        self.blocked = False
        # what the per-packet steps read, bound once (one tuple unpack per step, not a
        # dozen attribute lookups: the steps run once per select wake-up)
        w = worker
        self._send_ctx = (self.cc, self.done, lookahead, n_f, self.vl, self.sendto, payload,
                          self.timers, INA_HEADER.pack, self.grad_t, w.job_id, w.rank, self.bit,
                          offset, self.tags, self.fanin, self.flags, self.sd_fanin, self.dest,
                          self.exp_of, self.cc.seq_of, self.cc.last_sent, self.cc.aimd)
        self._recv_ctx = (stats, self.cc, self.done, self.result, on_result, w.sock.recvfrom,
                          w.result_sources, INA_HEADER.unpack_from, int(MsgType.RESULT), w.job_id,
                          INA_HEADER_LEN, self.vl, self.pl, n_f, offset, self.full, w.stamp)
        self.t0 = time.monotonic()

    def run(self) -> bytearray:
        """The RESULT values of every fragment, concatenated; ``InaTimeoutError`` past
        the worker's ``max_time``."""
        w, n_f = self.w, self.n_f
        t0 = self.t0
        deadline = t0 + w.max_time
        last_progress = t0
        while self.n_done < n_f:
            busy = self._send_new(time.monotonic())
            busy = self._receive() or busy
            now = time.monotonic()
            self._retransmit_due(now)
            if w.progress is not None and now - last_progress >= 0.1:
                last_progress = now
                w.progress(self.n_done, n_f)
            if self.n_done >= n_f:
                break
            if now > deadline:
                raise self._timeout(now)
            if not busy:  # nothing to do right now: sleep until a packet, buffer space or a timer
                self._wait(now, deadline)
        if w.progress is not None:
            w.progress(self.n_done, n_f)
        st = self.st
        st.packets_sent, st.retransmissions, st.bytes_sent = self.sent, self.retx_n, self.sent * self.pl
        st.results = self.n_done
        st.fault_drops = w.faults.dropped if w.faults else 0
        st.duration_s = time.monotonic() - t0
        return self.result

    def _header(self, f: int, tag: int, fanin: int, flags: int, sd_fanin: int) -> bytes:
        w = self.w
        return INA_HEADER.pack(self.grad_t, w.job_id, w.rank, f + self.offset, tag, 0,
                               self.bit, 1, fanin, flags, sd_fanin, self.exp_of[f])

    def _send_new(self, now: float) -> bool:
        """First sends, up to the window; True when anything went out."""
        (cc, done, look, n_f, vl, sendto, payload, timers, pack, grad_t, job, rank, bit, offset,
         tags, fanin, flags, sd_fanin, dest, exp_of, seq_of, last_sent, aimd) = self._send_ctx
        heappush = heapq.heappush
        next_f, sent, outstanding = self.next_f, self.sent, self.outstanding
        busy = False
        while outstanding < cc.cwnd and next_f < n_f and (
                next_f < look or not look or done[next_f - look]):
            f = next_f
            pkt = pack(grad_t, job, rank, f + offset, tags[f], 0, bit, 1, fanin[f], flags[f],
                       sd_fanin[f], exp_of[f])
            try:
                sendto(pkt + payload[f * vl:(f + 1) * vl], dest[f])
            except BlockingIOError:
                self.st.send_blocked += 1
                self.blocked = True
                break
            seq_of[f] = sent  # as cc.on_send, inline: this is the hot path
            if aimd:
                last_sent[f] = now
            sent += 1
            next_f += 1
            outstanding += 1
            heappush(timers, (now + cc.rto, f))
            busy = True
        self.next_f, self.sent, self.outstanding = next_f, sent, outstanding
        return busy

    def _receive(self) -> bool:
        """Everything already received; True when anything arrived."""
        (st, cc, done, result, on_result, recvfrom, sources, unpack_from, result_t, job,
         hl, vl, pl, n_f, offset, full, stamp) = self._recv_ctx
        next_f, n_done, outstanding, aimd = self.next_f, self.n_done, self.outstanding, cc.aimd
        busy = False
        while True:
            try:
                data, src = recvfrom(_RECV_SIZE)
            except (BlockingIOError, InterruptedError):
                break
            except ConnectionRefusedError:  # ICMP from an earlier send; harmless
                continue
            busy = True
            if src[0] not in sources:  # only the job's PS (via s_d) sends RESULTs
                st.refused_source += 1
                continue
            if len(data) != pl:  # not this job's values per packet
                st.ignored += 1
                continue
            mt, j, wid, frag, _, _, bm, _, _, _, _, mx = unpack_from(data)
            if not admitted(stamp, wid):  # never admitted by a switch of the job
                st.refused_stamp += 1
                continue
            f = frag - offset
            if mt != result_t or j != job or not 0 <= f < n_f or bm != full:
                st.ignored += 1
            elif done[f]:
                st.duplicate_results += 1
            elif f >= next_f:  # we have not contributed yet: not ours
                st.stale_results += 1
            else:
                result[f * vl:(f + 1) * vl] = data[hl:pl]
                if on_result is not None:
                    on_result(f, mx)
                done[f] = 1
                n_done += 1
                outstanding -= 1
                if aimd:
                    st.rto_s = cc.on_result(f)
        self.n_done, self.outstanding = n_done, outstanding
        return busy

    def _retransmit_due(self, now: float) -> None:
        """Timeouts -> retransmit straight to the PS (tag 0, RETX, exponential backoff)."""
        timers = self.timers
        if not timers or timers[0][0] > now:  # the common case: nothing due
            return
        st, cc, done, attempts, vl = self.st, self.cc, self.done, self.attempts, self.vl
        ps_addr, retx = self.w.ps_addr, int(InaFlags.RETX)
        while timers and timers[0][0] <= now:
            f = heapq.heappop(timers)[1]
            if done[f]:
                continue
            k = attempts.get(f, 0) + 1
            attempts[f] = k
            if cc.on_timeout(f, self.sent):
                st.window_decreases += 1
            pkt = self._header(f, 0, 0, retx, 0)
            try:
                self.sendto(pkt + self.payload[f * vl:(f + 1) * vl], ps_addr)
                cc.on_send(f, self.sent, now)
                self.sent += 1
                self.retx_n += 1
            except BlockingIOError:
                st.send_blocked += 1
            heapq.heappush(timers, (now + cc.backoff(k), f))

    def _timeout(self, now: float) -> InaTimeoutError:
        """The error for a run past ``max_time`` (with the stats so far)."""
        st, w, n_f = self.st, self.w, self.n_f
        missing = [f for f in range(n_f) if not self.done[f]]
        st.packets_sent, st.retransmissions = self.sent, self.retx_n
        st.bytes_sent, st.duration_s = self.sent * self.pl, now - self.t0
        ps_addr = w.ps_addr
        return InaTimeoutError(
            f"job {w.job_id} rank {w.rank}: {len(missing)} of {n_f} fragments still have no "
            f"RESULT after {w.max_time:g} s (first missing: {missing[:5]}; "
            f"{self.retx_n} retransmissions to the PS at {ps_addr[0]}:{ps_addr[1]}); "
            f"is the PS running with this job and fragment count?",
            st,
        )

    def _wait(self, now: float, deadline: float) -> None:
        """Sleep until a packet, buffer space or the next timer."""
        timers, sock = self.timers, self.w.sock
        wait = min(timers[0][0] - now if timers else 0.05, deadline - now)
        wset = [sock] if self.blocked else []
        _, writable, _ = select.select([sock], wset, [], max(wait, 0.0))
        if writable:
            self.blocked = False
