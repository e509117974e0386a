"""The worker's native, batched packet path (``hosts/ina/native.py``, ``dgram.c``): the
first sends of a window in one ``sendmmsg`` per 64, every waiting datagram in one
``recvmmsg`` per 64, RESULTs classified and copied in C; Python runs once a batch, not
once a datagram. With a fixed window and fixed point the whole loop runs in C
(``NativeWorkerPath.pump``) until Python is needed. ``FragmentTransfer``
(hosts/ina/transfer.py) uses it for its two hot steps when ``worker_path`` gives one;
recovery (NACKs, requests, re-sends, timers) stays in Python, where it was.

The same decisions as the Python path, in the same order, with two differences of
timing only: a batch's RESULTs are taken before its NACKs (a NACK for a fragment whose
RESULT is in the same batch is stale), and a batch (or a run of the C loop) yields one
round-trip sample (its newest RESULT that answers a single send; RFC 6298 asks for one
a round trip at least).
"""

from __future__ import annotations

import ctypes
import errno
import math
import time
from typing import Any

import numpy as np

from hosts.ina import native
from hosts.ina.native import BATCH, Codes, Slots, addr_of, buffer_addr, check
from wire.ina import INA_HEADER, INA_HEADER_LEN, InaFlags, MsgType

__all__ = ["NativeWorkerPath", "worker_path"]

_RETX = int(InaFlags.RETX)
#: receive coalescing sleeps only with this many fragments outstanding (fewer: the
#: window's last RESULTs, or a small window, are waited for as they come)
COALESCE_MIN = 16


class _WJob(ctypes.Structure):
    """dgram.c's ``wjob_t``."""

    _fields_ = [("sources", ctypes.c_void_p), ("nsrc", ctypes.c_int), ("pl", ctypes.c_int),
                ("vl", ctypes.c_int), ("job", ctypes.c_uint32), ("stamp", ctypes.c_uint32),
                ("full", ctypes.c_void_p), ("offset", ctypes.c_int64), ("n_f", ctypes.c_int),
                ("done", ctypes.c_void_p), ("result", ctypes.c_void_p)]


class _WStep(ctypes.Structure):
    """dgram.c's ``wstep_t``."""

    _fields_ = [("next_f", ctypes.c_int), ("hi", ctypes.c_int), ("holes", ctypes.c_int),
                ("asked", ctypes.c_void_p), ("accepted", ctypes.c_int), ("last", ctypes.c_int),
                ("in_order", ctypes.c_int), ("rtt_f", ctypes.c_int), ("others", ctypes.c_int)]


class _WSend(ctypes.Structure):
    """dgram.c's ``wsend_t``."""

    _fields_ = [("tmpl", ctypes.c_void_p), ("payload", ctypes.c_void_p), ("vl", ctypes.c_int),
                ("meta", ctypes.c_void_p), ("dests", ctypes.c_void_p), ("offset", ctypes.c_uint32),
                ("scratch", ctypes.c_void_p), ("sent_at", ctypes.c_void_p), ("n_f", ctypes.c_int)]


class _WPump(ctypes.Structure):
    """dgram.c's ``wpump_t``."""

    _fields_ = [("wake_ns", ctypes.c_int64), ("pto_ns", ctypes.c_int64), ("timer_ns", ctypes.c_int64),
                ("coalesce_ns", ctypes.c_int64), ("coalesce_min", ctypes.c_int), ("window", ctypes.c_int),
                ("next_f", ctypes.c_int), ("n_done", ctypes.c_int), ("outstanding", ctypes.c_int),
                ("sent", ctypes.c_int), ("blocked", ctypes.c_int), ("send_blocked", ctypes.c_int),
                ("progressed", ctypes.c_int), ("rtt_f", ctypes.c_int), ("rtt_s", ctypes.c_double),
                ("k", ctypes.c_int)]


_P_BATCH = 1  # dgram.c's P_BATCH: a batch for Python
#: the pump comes back to Python at least this often (the progress callback, 0.1 s)
_PUMP_MAX_S = 0.05


def worker_path(tr: Any) -> NativeWorkerPath | None:
    """The native path for transfer ``tr``, or None: the Python path (forced, no
    compiler, fault injection, or a destination that is not IPv4)."""
    w = tr.w
    if w.faults is not None:
        return None
    lib = native.library()
    if lib is None:
        return None
    dests = sorted(set(tr.dest))
    sa = native.sockaddrs(dests)
    if sa is None:
        return None
    try:
        sources = np.array([native.ip_u32(s) for s in sorted(w.result_sources)], dtype=np.uint32)
    except OSError:
        return None
    return NativeWorkerPath(lib, tr, dests, sa, sources)


class NativeWorkerPath:
    """The batched send and receive of one ``FragmentTransfer``."""

    def __init__(self, lib: Any, tr: Any, dests: list[tuple[str, int]], sa: np.ndarray,
                 sources: np.ndarray) -> None:
        w = tr.w
        self.lib, self.fd = lib, w.sock.fileno()
        index = {a: i for i, a in enumerate(dests)}
        n_f = tr.n_f
        # per fragment: tag, fanin, flags, sd_fanin, max_exp, destination index
        dest_idx = np.fromiter((index[a] for a in tr.dest), dtype=np.int32, count=n_f)
        self.meta = np.ascontiguousarray(np.stack(
            [np.asarray(tr.tags), np.asarray(tr.fanin), np.asarray(tr.flags),
             np.asarray(tr.sd_fanin), np.asarray(tr.exp_of, dtype=np.int64), dest_idx],
            axis=1).astype(np.int32))
        self.sa, self.sources = sa, sources
        self.tmpl = np.frombuffer(INA_HEADER.pack(int(MsgType.GRAD), w.job_id, w.rank, 0, 0, 0,
                                                  tr.bit, 1, 0, 0, 0, 0), dtype=np.uint8).copy()
        self.full = np.frombuffer(tr.full.to_bytes(32, "big"), dtype=np.uint8).copy()
        self.p_payload, self._payload_view = buffer_addr(tr.payload)
        self.p_done, self.done = buffer_addr(tr.done)
        p_result, self._result_view = buffer_addr(tr.result)
        self.asked = np.frombuffer(tr.asked, dtype=np.uint8)
        self.scratch = np.zeros(BATCH * INA_HEADER_LEN, dtype=np.uint8)
        self.s = Slots()
        self.job = _WJob(addr_of(sources), sources.size, tr.pl, tr.vl, w.job_id, w.stamp,
                         addr_of(self.full), tr.offset, n_f, self.p_done, p_result)
        self.p_job = ctypes.addressof(self.job)
        self.step = _WStep(0, -1, 0, addr_of(self.asked))
        self.p_step = ctypes.addressof(self.step)
        self.p_meta, self.p_tmpl = addr_of(self.meta), addr_of(self.tmpl)
        self.p_sa, self.p_scratch = addr_of(self.sa), addr_of(self.scratch)
        self.coalesce_s = native.coalesce_us() * 1e-6
        # the whole loop in C (``pump``) when nothing needs Python a RESULT: a fixed
        # window, fixed point (no lookahead, no callback)
        self.pumps = tr.on_result is None and not tr.cc.aimd and not tr.lookahead
        tr.sent_at = np.zeros(n_f)  # float seconds, written by the C pump too
        self.send_ctx = _WSend(self.p_tmpl, self.p_payload, tr.vl, self.p_meta, self.p_sa,
                               tr.offset, self.p_scratch, addr_of(tr.sent_at), n_f)
        self.p_send = ctypes.addressof(self.send_ctx)
        self.pstate = _WPump(coalesce_ns=int(self.coalesce_s * 1e9), coalesce_min=COALESCE_MIN)
        self.p_pump = ctypes.addressof(self.pstate)

    def send_new(self, tr: Any, now: float) -> bool:
        """First sends, up to the window (``FragmentTransfer._send_new``). False: the
        loop need not come round again for them (``receive`` sends what its RESULTs
        free, and a full socket buffer is waited for)."""
        f0, n_f = tr.next_f, tr.n_f
        room = min(math.ceil(tr.cc.cwnd) - tr.outstanding, n_f - f0)
        if room <= 0 or (self.pumps and tr.sent):  # the pump sends after the first window
            return False
        r = self.lib.ina_send_grads(self.fd, self.p_tmpl, self.p_payload, tr.vl, self.p_meta,
                                    self.p_sa, tr.offset, f0, room, self.p_done, tr.lookahead,
                                    self.p_scratch)
        if r == -errno.EAGAIN:
            r = 0
        check(r)
        f = f0 + r
        look = tr.lookahead
        if r < room and not (look and f >= look and not self.done[f - look]):
            tr.st.send_blocked += 1  # not gated: the socket buffer is full
            tr.blocked = True
        if r == 0:
            return False
        # for the aimd window: sends numbered after its last decrease
        tr.cc.seq_of.update(zip(range(f0, f), range(tr.sent, tr.sent + r), strict=True))
        tr.sent_at[f0:f] = [now] * r
        tr.sent += r
        tr.next_f = f
        tr.outstanding += r
        if tr.timer_at is None:
            tr.timer_at = now + tr.rtt.probe_timeout()
        return False

    def receive(self, tr: Any) -> bool:
        """Everything already received (``FragmentTransfer._receive``), then the first
        sends its RESULTs made room for. True when a whole batch came (more may wait)."""
        if self.pumps and tr.sent:
            return self.pump(tr)
        s, step, lib, fd = self.s, self.step, self.lib, self.fd
        got = full = False
        while True:
            step.next_f, step.hi, step.holes = tr.next_f, tr.hi, len(tr.holes)
            k = check(lib.ina_worker_recv(fd, self.p_job, self.p_step, s.p_slots, BATCH,
                                          s.p_lens, s.p_srcs, s.p_out))
            if k == 0:
                break
            n = step.accepted
            if step.others or not step.in_order or tr.on_result is not None or tr.cc.aimd:
                self._batch(tr, k)
            elif n:  # the common case: RESULTs only, in order
                tr.n_done += n
                tr.outstanding -= n
                tr.hi = step.last
                if step.rtt_f >= 0:
                    tr.rtt.sample(time.monotonic() - tr.sent_at[step.rtt_f])
            got = got or n > 0
            full = k == BATCH
            if not full:  # drained: one more call would find the socket empty
                break
        if got:
            tr.expiries = 0  # progress: the timer restarts, backoff ends
            now = time.monotonic()
            tr.timer_at = now + tr.rtt.probe_timeout() if tr.outstanding else None
            self.send_new(tr, now)
        return full

    def pump(self, tr: Any) -> bool:
        """The transfer's loop in C (dgram.c ``ina_worker_pump``) until Python is
        needed: a timer of its own due, a batch with anything but in-order RESULTs
        (taken here as ``receive`` takes it), the tail (every fragment sent), or done.
        True: the loop need not wait (the pump did)."""
        p, s = self.pstate, self.step
        now = time.monotonic()
        wake = min(tr.t0 + tr.w.max_time, now + _PUMP_MAX_S)
        if tr.suspects:
            wake = min(wake, *tr.suspects.values())
        if tr.probe.at is not None:
            wake = min(wake, tr.probe.at)
        p.wake_ns, p.pto_ns = int(wake * 1e9), int(tr.rtt.probe_timeout() * 1e9)
        p.timer_ns = -1 if tr.timer_at is None else int(tr.timer_at * 1e9)
        p.window = math.ceil(tr.cc.cwnd)
        p.next_f, p.n_done, p.outstanding, p.sent = tr.next_f, tr.n_done, tr.outstanding, tr.sent
        p.blocked = int(tr.blocked)
        s.hi, s.holes = tr.hi, len(tr.holes)
        ss = self.s
        rc = check(self.lib.ina_worker_pump(self.fd, self.p_job, self.p_step, self.p_send,
                                            self.p_pump, ss.p_slots, ss.p_lens, ss.p_srcs, ss.p_out))
        tr.next_f, tr.n_done, tr.outstanding, tr.sent = p.next_f, p.n_done, p.outstanding, p.sent
        tr.blocked, tr.hi = bool(p.blocked), s.hi
        tr.st.send_blocked += p.send_blocked
        tr.timer_at = None if p.timer_ns < 0 else p.timer_ns * 1e-9
        if p.rtt_f >= 0:  # one sample a pump (RFC 6298: one a round trip at least)
            tr.rtt.sample(p.rtt_s)
        got = bool(p.progressed)
        if rc == _P_BATCH:
            self._batch(tr, p.k)
            got = got or s.accepted > 0
        if got:
            tr.expiries = 0  # progress: the timer restarts, backoff ends
            if rc == _P_BATCH:
                now = time.monotonic()
                tr.timer_at = now + tr.rtt.probe_timeout() if tr.outstanding else None
        return True

    def coalesce(self, tr: Any) -> bool:
        """Receive coalescing (``GRADNET_INA_COALESCE_US``, off by default): with at
        least ``COALESCE_MIN`` fragments outstanding, sleep that long instead of waking
        on the first RESULT, so that one wake-up takes many. True when it slept."""
        if not self.coalesce_s or tr.outstanding < COALESCE_MIN or tr.blocked:
            return False
        time.sleep(self.coalesce_s)
        return True

    def _batch(self, tr: Any, k: int) -> None:
        out = self.s.out[:k]
        codes = out[:, 0]
        acc = codes == Codes.ACCEPT
        if not acc.all():
            self._others(tr, codes, out)
        if acc.any():
            self._accepted(tr, out[acc])
        for i in np.flatnonzero(codes == Codes.NACK).tolist():
            tr._on_nack(self.s.datagram(i))

    @staticmethod
    def _others(tr: Any, codes: np.ndarray, out: np.ndarray) -> None:
        st = tr.st
        n = np.bincount(codes, minlength=7).tolist()
        st.stale_results += n[Codes.STALE]
        st.ignored += n[Codes.IGNORED]
        st.refused_source += n[Codes.REFUSED_SOURCE]
        st.refused_stamp += n[Codes.REFUSED_STAMP]
        for f in out[codes == Codes.DUPLICATE, 1].tolist():
            tr._duplicate_result(f)

    def _accepted(self, tr: Any, acc: np.ndarray) -> None:
        fr = acc[:, 1]
        n = fr.size
        if tr.on_result is not None:  # block floating point: the next block's values
            for f, mx in zip(fr.tolist(), acc[:, 3].tolist(), strict=True):
                tr.on_result(f, mx)
        tr.n_done += n
        tr.outstanding -= n
        step = self.step
        if step.rtt_f >= 0:  # Karn: the newest RESULT that answers one send
            tr.rtt.sample(time.monotonic() - tr.sent_at[step.rtt_f])
        if tr.cc.aimd:
            for _ in range(n):
                tr.cc.on_result()
        if step.in_order:
            tr.hi = step.last  # in order, no holes: nothing to look for
        else:
            for f in fr.tolist():
                if f != tr.hi + 1 or tr.holes:
                    tr._evidence(f)
                else:
                    tr.hi = f
