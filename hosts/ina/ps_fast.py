"""The PS's fast case in C (``dgram_ps.c``, ``ina_ps_fast``): a GRAD (a worker's from its
own address, or one a switch of the job passed on) for a fragment of the current round
that lacks all its contributors and is not finished, summed in C into the job's own
``acc``, with no Python for that datagram. Everything else, and each fragment such a GRAD completes, is
``ParameterServer``'s as before (hosts/ina/ps.py): its decisions stay the one
definition, and C takes only the case in which they all say "sum it".

The bitmaps summed so far (``JobState.have``, ``max_exp``) are mirrored: C changes its
copy and lists the fragments it changed, which Python reads back (``sync``) before it
handles anything; what Python changes (one fragment a datagram it handles, or every
fragment at a new round) it writes back (``push``) before C goes on.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from hosts.ina import native
from hosts.ina.native import addr_of

__all__ = ["FastJob", "fast_jobs"]

_C, _I32, _U32, _I64 = ctypes.c_void_p, ctypes.c_int32, ctypes.c_uint32, ctypes.c_int64
# the K_* counters of dgram_ps.c, in order: the JobStats fields they add to
_COUNTERS = ("packets_in", "bytes_in", "grad_in", "forwarded_in", "merged_grad_in",
             "contributions", "accepted_grad", "count_mismatch")


class _PsJob(ctypes.Structure):
    """dgram_ps.c's ``psjob_t``."""

    _fields_ = [("packet_len", _I32), ("num_fragments", _I32), ("vpp", _I32), ("nsw", _I32),
                ("nwk", _I32), ("stamp", _U32), ("offset", _I64), ("cycle", _I64), ("round_w", _I64),
                ("full", _C), ("sw_ips", _C), ("wk_ips", _C), ("wk_bits", _C), ("have", _C),
                ("max_exp", _C), ("acc", _C), ("counters", _C), ("dirty", _C), ("ndirty", _I32),
                ("mark", _C)]


def _bits(v: int) -> np.ndarray:
    return np.frombuffer(v.to_bytes(32, "big"), dtype=np.uint8)


class FastJob:
    """One job's mirror for the C fast case."""

    def __init__(self, jb: Any) -> None:
        self.jb = jb
        n_f = jb.num_fragments
        wk = sorted(jb.worker_bits.items())
        self.sw = np.array([native.ip_u32(ip) for ip in sorted(jb.switch_srcs)] or [0], np.uint32)
        self.wk = np.array([native.ip_u32(ip) for ip, _ in wk] or [0], np.uint32)
        self.wk_bits = np.concatenate([_bits(b) for _, b in wk] or [_bits(0)])
        self.full = _bits(jb.full).copy()
        self.have = np.zeros((n_f, 32), dtype=np.uint8)
        self.max_exp = np.zeros(n_f, dtype=np.uint8)
        self.counters = np.zeros(len(_COUNTERS), dtype=np.int64)
        self.dirty = np.zeros(n_f, dtype=np.int32)
        self.mark = np.zeros(n_f, dtype=np.uint8)
        assert jb.acc.flags.c_contiguous and jb.acc.dtype == np.int32
        self.c = _PsJob(jb.packet_len, n_f, jb.values_per_packet, len(jb.switch_srcs), len(wk),
                        jb.stamp, jb.offset, jb.cycle, 0, addr_of(self.full), addr_of(self.sw),
                        addr_of(self.wk), addr_of(self.wk_bits), addr_of(self.have),
                        addr_of(self.max_exp), addr_of(jb.acc), addr_of(self.counters),
                        addr_of(self.dirty), 0, addr_of(self.mark))
        self.round = -1
        self.push_all()

    def push_all(self) -> None:
        """Python's state into the mirror: at the start and at each new round."""
        jb = self.jb
        self.have[:] = 0
        for f, h in enumerate(jb.have):
            if h:
                self.have[f] = _bits(h)
        self.max_exp[:] = jb.max_exp
        self.round, self.c.round_w = jb.round, jb.round % jb.cycle

    def push(self, f: int) -> None:
        """Python handled a datagram of fragment ``f`` (or began a round)."""
        jb = self.jb
        if jb.round != self.round:
            self.push_all()
        elif 0 <= f < jb.num_fragments:
            self.have[f] = _bits(jb.have[f])
            self.max_exp[f] = jb.max_exp[f]

    def sync(self, now: float) -> None:
        """What C summed into Python's state and counters (before Python reads them)."""
        n = self.c.ndirty
        if not n:
            return
        jb, have, mx = self.jb, self.have, self.max_exp
        for f in self.dirty[:n].tolist():
            jb.have[f] = int.from_bytes(have[f].tobytes(), "big")
            jb.max_exp[f] = int(mx[f])
        self.mark[self.dirty[:n]] = 0
        self.c.ndirty = 0
        st = jb.stats
        for name, v in zip(_COUNTERS, self.counters.tolist(), strict=True):
            setattr(st, name, getattr(st, name) + v)
        self.counters[:] = 0
        if st.first_packet_s is None:
            st.first_packet_s = now


def fast_jobs(ps: Any) -> tuple[dict[int, FastJob], Any] | None:
    """Every job's mirror and the 256-entry job table C reads (None: a job has an
    address that is not IPv4, so no fast case)."""
    try:
        jobs = {j: FastJob(jb) for j, jb in ps.jobs.items()}
    except OSError:
        return None
    table = (ctypes.c_void_p * 256)()
    for j, fj in jobs.items():
        table[j] = ctypes.addressof(fj.c)
    return jobs, table
