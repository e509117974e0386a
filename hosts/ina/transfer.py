"""One INA allreduce on the wire (docs/ina.md, "Worker" and "Loss recovery"): first
sends up to the congestion window, RESULTs collected, losses recovered by evidence.

Recovery, the worker's part: a NACK from the PS (it lacks this worker's contribution to
a fragment) gets the fragment re-sent straight to the PS at once (``resend_nack``); a
RESULT missing while ``REORDER_ALLOWANCE`` RESULTs of later fragments have arrived, and
still missing a reorder window later (``RttEstimator.reorder_window``: two of the least
round trips, the time the PS's own recovery of a lost GRAD takes), gets a request to
the PS (a header-only NACK from the worker, ``request_fast``), which answers with the
RESULT it holds, or, when the fragment is still incomplete, asks the workers it lacks;
and one timer per allreduce (RFC 6298, ``RttEstimator``) sends the
same request for the oldest fragment without a RESULT when nothing arrives for a whole
timeout (``request_timer``): the last resort, for the last fragments, which no later
RESULT reveals. A worker never re-sends values the PS did not ask for.

The loop of ``Worker.allreduce``: one non-blocking UDP socket multiplexed with
``select``; the hot path is batched in C when it can be (``hosts/ina/batched.py``:
``sendmmsg``/``recvmmsg``, no Python a datagram), else plain ``struct`` + ``bytes``
slicing, with the loop's counters in locals inside each step.
"""

from __future__ import annotations

import select
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from hosts.ina.agent import InaTimeoutError
from hosts.ina.batched import worker_path
from hosts.ina.congestion import CongestionControl, RttEstimator
from hosts.ina.fastpath import rare_gc
from hosts.ina.stamp import admitted
from wire.ina import INA_HEADER, INA_HEADER_LEN, InaFlags, MsgType
from wire.ina_policy import FragmentRouting

_RECV_SIZE = 2048
#: a RESULT counts as lost (and is asked for) once this many RESULTs of later fragments
#: have arrived: TCP's three duplicate acknowledgements; below it, reordering
REORDER_ALLOWANCE = 3
#: the switches' default aggregator timeout (INA_AGGREGATOR_TIMEOUT_US, docs/ina.md,
#: "Aging"): a contribution idle longer may have been taken over
AGGREGATOR_TIMEOUT_S = 1.0


@dataclass
class WorkerStats:
    """What one ``allreduce`` did."""

    rank: int
    job: int
    elements: int = 0
    fragments: int = 0
    packets_sent: int = 0  # GRAD datagrams handed to the socket, re-sends included
    # re-sends and requests, by reason (docs/ina.md, "Loss recovery"): GRADs re-sent on
    # the PS's NACK; header-only requests for a RESULT on evidence (later RESULTs in)
    # and on the timer. retransmissions is their sum.
    retransmissions: int = 0
    resend_nack: int = 0
    request_fast: int = 0
    spurious_requests: int = 0  # early requests whose original RESULT came too
    request_timer: int = 0
    request_probe: int = 0  # requests of the tail-loss probe (every fragment sent)
    spurious_probes: int = 0  # ... whose original RESULT came too
    nacks_in: int = 0  # NACKs from the PS for this worker
    stale_nacks: int = 0  # ... for a fragment already done or not sent yet
    bytes_sent: int = 0  # UDP payload bytes
    results: int = 0  # fragments completed by a RESULT
    duplicate_results: int = 0
    stale_results: int = 0  # RESULT for a fragment not sent yet (older run, other offset)
    ignored: int = 0  # wrong size, wrong type, wrong job, out of range, bad bitmap
    refused_source: int = 0  # a RESULT from an address not the job's PS or s_d (docs/trust.md)
    refused_stamp: int = 0  # a RESULT without the job's admission stamp (hosts/ina/stamp.py)
    send_blocked: int = 0  # socket buffer full: waited for it to drain
    window_decreases: int = 0  # congestion "aimd": times a loss (timer, NACK) halved the window
    rto_s: float = 0.0  # the retransmission timeout at the end (RTT-based, RFC 6298)
    srtt_s: float = 0.0  # the smoothed round trip at the end
    fault_drops: int = 0  # TEST ONLY: dropped by FaultInjection
    duration_s: float = 0.0
    native: bool = False  # the batched native packet path ran (hosts/ina/batched.py)

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
    ``worker`` is the ``hosts.ina.worker.Worker`` sending (its socket, settings and
    ``rtt``, the round-trip estimator it keeps across allreduces).
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
        self.path = routing.paths.tolist()  # RESULTs of one path arrive in order
        self.grad_t = int(MsgType.GRAD)
        self.bit, self.full = 1 << worker.rank, (1 << worker.num_workers) - 1
        sock, faults = worker.sock, worker.faults
        self.sendto = sock.sendto if faults is None else (lambda d, a: faults.send(sock, d, a))
        recvfrom = sock.recvfrom if faults is None else (lambda n: faults.recv(sock, n))
        self.vl = 4 * worker.values_per_packet
        self.pl = INA_HEADER_LEN + self.vl
        self.cc = CongestionControl(worker.congestion, worker.window)
        self.rtt: RttEstimator = worker.rtt
        self.result = bytearray(n_f * self.vl)
        self.done = bytearray(n_f)
        self.asked = bytearray(n_f)  # a RESULT request went out: no RTT sample (Karn)
        self.requested = bytearray(n_f)  # ... a request (not only a NACK's re-send)
        self.early = bytearray(n_f)  # ... asked on reorder evidence (request_fast)
        self.probed = bytearray(n_f)  # ... asked by the tail-loss probe
        self.probe = TailProbe()
        self.sent_at = [0.0] * n_f  # each fragment's last data send
        # fragments without a RESULT below the highest RESULT in: fragment -> RESULTs of
        # later fragments since (REORDER_ALLOWANCE of them: ask for it)
        self.holes: dict[int, int] = {}
        # fragments past REORDER_ALLOWANCE later RESULTs -> when to ask for their RESULT
        self.suspects: dict[int, float] = {}
        self.hi = -1  # highest fragment with a RESULT
        self.lo = 0  # lowest fragment without one
        self.timer_at: float | None = None  # the one retransmission timer (None: idle)
        self.expiries = 0  # timer expiries since the last new RESULT (backoff)
        self.next_f = self.n_done = self.outstanding = self.sent = 0
        self.requests = 0
        self.blocked = False
        # what the per-packet steps read, bound once (one tuple unpack per step, not a
        # dozen attribute lookups: the steps run once per select wake-up)
        w = worker
        self._send_ctx = (self.cc, self.done, lookahead, n_f, self.vl, self.sendto, payload,
                          self.sent_at, INA_HEADER.pack, self.grad_t, w.job_id, w.rank, self.bit,
                          offset, self.tags, self.fanin, self.flags, self.sd_fanin, self.dest,
                          self.exp_of, self.cc.seq_of)
        self._recv_ctx = (stats, self.cc, self.done, self.result, on_result, recvfrom,
                          w.result_sources, INA_HEADER.unpack_from, int(MsgType.RESULT), w.job_id,
                          INA_HEADER_LEN, self.vl, self.pl, n_f, offset, self.full, w.stamp)
        # the batched native path (hosts/ina/batched.py), or None: the Python one below
        self.native = worker_path(self)
        stats.native = self.native is not None
        self.t0 = time.monotonic()

    def run(self) -> bytearray:
        """The RESULT values of every fragment, concatenated; ``InaTimeoutError`` past
        the worker's ``max_time``."""
        with rare_gc():  # a tuple or two a packet, no cycles: few collections mid-transfer
            return self._run()

    def _run(self) -> bytearray:
        w, n_f = self.w, self.n_f
        t0 = self.t0
        deadline = t0 + w.max_time
        last_progress = t0
        # what queued up before this allreduce (a NACK the PS sent while this worker was
        # still computing) is read before the first sends, so it is found stale
        self._receive()
        while self.n_done < n_f:
            busy = self._send_new(time.monotonic())
            busy = self._receive() or busy
            now = time.monotonic()
            if self.suspects:
                self._ask_suspects(now)
            if self.timer_at is not None and now >= self.timer_at:
                self._timer_expired(now)
            if self.next_f >= n_f and self.probe.due(self, now):
                self._tail_probe()
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
        self._final_stats(time.monotonic())
        return self.result

    def _final_stats(self, now: float) -> None:
        st, w = self.st, self.w
        st.packets_sent = self.sent
        st.retransmissions = st.resend_nack + st.request_fast + st.request_timer + st.request_probe
        st.bytes_sent = self.sent * self.pl + self.requests * INA_HEADER_LEN
        st.results = self.n_done
        st.fault_drops = w.faults.dropped if w.faults else 0
        st.duration_s = now - self.t0
        st.rto_s, st.srtt_s = round(self.rtt.rto, 6), round(self.rtt.srtt, 6)

    def _header(self, f: int, tag: int, fanin: int, flags: int, sd_fanin: int) -> bytes:
        w = self.w
        return INA_HEADER.pack(self.grad_t, w.job_id, w.rank, f + self.offset, tag, 0,
                               self.bit, 1, fanin, flags, sd_fanin, self.exp_of[f])

    def _send_new(self, now: float) -> bool:
        """First sends, up to the window; True when anything went out."""
        if self.native is not None:
            return self.native.send_new(self, now)
        (cc, done, look, n_f, vl, sendto, payload, sent_at, pack, grad_t, job, rank, bit, offset,
         tags, fanin, flags, sd_fanin, dest, exp_of, seq_of) = self._send_ctx
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
            seq_of[f] = sent  # for the aimd window: sends numbered after its last decrease
            sent_at[f] = now
            sent += 1
            next_f += 1
            outstanding += 1
            busy = True
        if busy and self.timer_at is None:
            self.timer_at = now + self.rtt.probe_timeout()
        self.next_f, self.sent, self.outstanding = next_f, sent, outstanding
        return busy

    def _receive(self) -> bool:
        """Everything already received; True when anything arrived."""
        if self.native is not None:
            return self.native.receive(self)
        (st, cc, done, result, on_result, recvfrom, sources, unpack_from, result_t, job,
         hl, vl, pl, n_f, offset, full, stamp) = self._recv_ctx
        next_f, n_done, outstanding = self.next_f, self.n_done, self.outstanding
        busy = got = False
        while True:
            try:
                data, src = recvfrom(_RECV_SIZE)
            except (BlockingIOError, InterruptedError):
                break
            except ConnectionRefusedError:  # ICMP from an earlier send; harmless
                continue
            busy = True
            if src[0] not in sources:  # only the job's PS (via s_d) sends RESULTs and NACKs
                st.refused_source += 1
                continue
            if len(data) != pl:  # not this job's values per packet, or a NACK
                if len(data) == hl and data[0] == _NACK:
                    self._on_nack(data)
                else:
                    st.ignored += 1
                continue
            mt, j, wid, frag, _, _, bm, _, _, rflags, _, mx = unpack_from(data)
            if not admitted(stamp, wid):  # never admitted by a switch of the job
                st.refused_stamp += 1
                continue
            f = frag - offset
            if mt != result_t or j != job or not 0 <= f < n_f or bm != full:
                st.ignored += 1
            elif done[f]:
                self._duplicate_result(f)
            elif f >= next_f:  # we have not contributed yet: not ours
                st.stale_results += 1
            else:
                result[f * vl:(f + 1) * vl] = data[hl:pl]
                if on_result is not None:
                    on_result(f, mx)
                done[f] = 1
                n_done += 1
                outstanding -= 1
                got = True
                if not self.asked[f] and not rflags & _RETX:  # Karn: not a recovered one
                    self.rtt.sample(time.monotonic() - self.sent_at[f])
                if cc.aimd:
                    cc.on_result()
                if f != self.hi + 1 or self.holes:
                    self._evidence(f)
                else:
                    self.hi = f
        self.n_done, self.outstanding = n_done, outstanding
        if got:  # progress: the timer restarts, backoff ends
            self.expiries = 0
            self.timer_at = time.monotonic() + self.rtt.probe_timeout() if outstanding else None
        return busy

    def _duplicate_result(self, f: int) -> None:
        """A RESULT of fragment ``f`` again: counted; if we had asked for it early or
        probed it, the ask was spurious (the original came too)."""
        st = self.st
        st.duplicate_results += 1
        if self.early[f]:  # asked early, and the original came too: reordered
            self.early[f] = 0
            st.spurious_requests += 1
            self.rtt.spurious_request()
        elif self.probed[f]:  # probed, and the original came too: only late
            self.probed[f] = 0
            st.spurious_probes += 1
            self.rtt.spurious_probe()

    def _evidence(self, f: int) -> None:
        """Fragment ``f`` has its RESULT out of order (or holes are open): every
        fragment below it of the same path (the same switches) still without one has one
        more later RESULT against it; at ``REORDER_ALLOWANCE`` its RESULT is asked for.
        RESULTs of other paths are no evidence: the PS completes fragments of different
        switches out of order by dozens (the early requests of a lossless fat-tree run)."""
        holes, done, path = self.holes, self.done, self.path
        holes.pop(f, None)
        self.suspects.pop(f, None)
        if f > self.hi:
            for g in range(self.hi + 1, f):
                if not done[g]:
                    holes[g] = 0
            self.hi = f
        pf = path[f]
        for g in [g for g in holes if g < f and path[g] == pf]:
            n = holes[g] + 1
            if n >= REORDER_ALLOWANCE:
                del holes[g]
                if not self.asked[g]:
                    self.suspects[g] = time.monotonic() + self.rtt.reorder_window()
            else:
                holes[g] = n

    def _ask_suspects(self, now: float) -> None:
        """Ask for the RESULTs whose reorder window has passed."""
        for g in [g for g, t in self.suspects.items() if t <= now]:
            del self.suspects[g]
            if not self.done[g] and not self.asked[g]:
                self.st.request_fast += 1
                self.early[g] = 1
                self._request(g)

    def _tail_probe(self) -> None:
        """Every fragment is sent and nothing came for a probe timeout: ask for the
        last RESULTs still missing that no later RESULT can reveal (at most
        ``REORDER_ALLOWANCE``, the highest: their answers are the later RESULTs that
        reveal any earlier gap), once each (``request_probe``)."""
        done, asked, hi, holes = self.done, self.asked, self.hi, self.holes
        tail = [g for g in range(self.next_f - 1, self.lo - 1, -1)
                if not done[g] and not asked[g] and (g > hi or g in holes)]
        for g in tail[:REORDER_ALLOWANCE]:
            self.st.request_probe += 1
            self.holes.pop(g, None)
            self.probed[g] = 1
            self._request(g)

    def _request(self, f: int) -> None:
        """Ask the PS for fragment ``f``'s RESULT (a header-only NACK with this worker's
        bit): it answers with the RESULT it holds, or asks whoever it lacks."""
        w = self.w
        self.asked[f] = self.requested[f] = 1
        pkt = INA_HEADER.pack(_NACK, w.job_id, w.rank, f + self.offset, 0, 0, self.bit, 1, 0, 0, 0)
        try:
            self.sendto(pkt, w.ps_addr)
            self.requests += 1
        except BlockingIOError:
            self.st.send_blocked += 1
        self._rearm()

    def _rearm(self) -> None:
        """A request or a re-send went out: give its answer a probe timeout before the
        timer asks again (a backed-off timer keeps its later deadline)."""
        t = time.monotonic() + self.rtt.probe_timeout()
        if self.timer_at is None or self.timer_at < t:
            self.timer_at = t

    def _on_nack(self, data: bytes) -> None:
        """The PS lacks this worker's contribution to a fragment: re-send it to the PS
        (tag 0, ``RETX``) at once."""
        st = self.st
        _, j, _, frag, _, _, bm, _, _, _, _, _ = INA_HEADER.unpack_from(data)
        f = frag - self.offset
        if j != self.w.job_id or not bm & self.bit:
            st.ignored += 1
            return
        st.nacks_in += 1
        if not 0 <= f < self.next_f or self.done[f]:
            st.stale_nacks += 1
            return
        st.resend_nack += 1
        if self.cc.on_loss(f, self.sent):
            st.window_decreases += 1
        self.holes.pop(f, None)  # being recovered: no request for it
        self.suspects.pop(f, None)
        self.asked[f] = 1  # its RESULT answers one of two sends: no RTT sample
        now = time.monotonic()
        # the answer to this worker's own request, for a GRAD sent longer ago than a
        # switch holds an idle aggregator: it was taken over, and so, likely, were the
        # round's others (one loss in transit is a NACK on the PS's evidence, or younger)
        taken_over = self.requested[f] and now - self.sent_at[f] >= AGGREGATOR_TIMEOUT_S
        self._resend(f, now)
        if taken_over:
            self._ask_overdue(f, now)

    def _ask_overdue(self, f: int, now: float) -> None:
        """The PS lacked this worker's contribution to fragment ``f``, which the worker
        had asked the RESULT of and sent over ``AGGREGATOR_TIMEOUT_S`` ago: ask at once for
        every later fragment without a RESULT that went out half a timeout ago or earlier
        and was not asked for yet (``request_fast``). When a rank lags the others by more
        than the aggregator timeout, its GRADs take the round's aggregators over (the
        same key past the timeout: docs/ina.md, "Aging") and drop the others' sums; asked
        one per timer expiry, such a round came back one fragment per timeout (60 in
        24 s). Without a NACK nothing is asked early: a rank waiting on a slow one is
        not missing at the PS, and is never NACKed."""
        done, asked, sent_at, st = self.done, self.asked, self.sent_at, self.st
        old = now - self.rtt.rto / 2
        for g in range(f + 1, self.next_f):
            if not done[g] and not asked[g] and sent_at[g] <= old:
                st.request_fast += 1
                self.holes.pop(g, None)
                self.suspects.pop(g, None)
                self._request(g)

    def _resend(self, f: int, now: float) -> None:
        vl = self.vl
        pkt = self._header(f, 0, 0, int(InaFlags.RETX), 0)
        try:
            self.sendto(pkt + self.payload[f * vl:(f + 1) * vl], self.w.ps_addr)
            self.cc.seq_of[f] = self.sent
            self.sent_at[f] = now
            self.sent += 1
        except BlockingIOError:
            self.st.send_blocked += 1
        self._rearm()

    def _timer_expired(self, now: float) -> None:
        """No new RESULT for a whole timeout: ask for the oldest fragment without one
        (the last resort) and back the timer off."""
        done, lo = self.done, self.lo
        while lo < self.next_f and done[lo]:
            lo += 1
        self.lo = lo
        if lo >= self.next_f:  # nothing outstanding (BFP gating): idle
            self.timer_at = None
            return
        if self.cc.on_loss(lo, self.sent):
            self.st.window_decreases += 1
        self.st.request_timer += 1
        self.holes.pop(lo, None)
        self._request(lo)
        self.timer_at = now + max(self.rtt.backoff(self.expiries), self.rtt.probe_timeout())
        self.expiries += 1

    def _timeout(self, now: float) -> InaTimeoutError:
        """The error for a run past ``max_time`` (with the stats so far)."""
        w, n_f = self.w, self.n_f
        missing = [f for f in range(n_f) if not self.done[f]]
        self._final_stats(now)
        ps_addr = w.ps_addr
        return InaTimeoutError(
            f"job {w.job_id} rank {w.rank}: {len(missing)} of {n_f} fragments still have no "
            f"RESULT after {w.max_time:g} s (first missing: {missing[:5]}; "
            f"{self.st.retransmissions} re-sends and requests to the PS at "
            f"{ps_addr[0]}:{ps_addr[1]}); is the PS running with this job and fragment count?",
            self.st,
        )

    def _wait(self, now: float, deadline: float) -> None:
        """Sleep until a packet, buffer space or the timer."""
        sock = self.w.sock
        if self.native is not None and self.native.coalesce(self):
            return  # slept so that more RESULTs arrive together (hosts/ina/batched.py)
        wait = min(self.timer_at - now if self.timer_at is not None else 0.05, deadline - now)
        if self.suspects:
            wait = min(wait, min(self.suspects.values()) - now)
        if self.probe.at is not None:
            wait = min(wait, self.probe.at - now)
        wset = [sock] if self.blocked else []
        _, writable, _ = select.select([sock], wset, [], max(wait, 0.0))
        if writable:
            self.blocked = False


class TailProbe:
    """When the tail-loss probe fires (RFC 8985's TLP): a probe timeout
    (``RttEstimator.tail_probe_timeout``) after the last send or new RESULT, once every
    fragment is sent and some RESULT is missing; once per such quiet spell. The last
    fragments' losses (a GRAD, a PARTIAL or a RESULT) are found so within two round
    trips and the PS's answer, not a whole timeout (0.2-0.4 s)."""

    __slots__ = ("at", "mark")

    def __init__(self) -> None:
        self.at: float | None = None
        self.mark = (-1, -1)  # (fragments sent, RESULTs in) when last armed

    def due(self, tr: FragmentTransfer, now: float) -> bool:
        """True when the probe fires now (``tr``: the transfer, all sent)."""
        mark = (tr.next_f, tr.n_done)
        if mark != self.mark:  # progress: (re)arm from now
            self.mark = mark
            self.at = now + tr.rtt.tail_probe_timeout() if tr.outstanding else None
            return False
        if self.at is None or now < self.at:
            return False
        self.at = None
        return True


_NACK, _RETX = int(MsgType.NACK), int(InaFlags.RETX)
