"""Multicast on the native backend, the Python side (the C side is pre.c).

The PRE's groups are copied into native memory as the control plane writes them
(``Switch._groups_changed``); a packet whose ingress sets ``mcast_grp`` is replicated
in C: each replica's egress, checksum update and deparse. ``send_replicas`` counts and
sends what the C code finished when the Python loop called it (``glue.receive``; the
batched receive, io.c, sends them itself), and ``resume`` finishes in Python a
replication that stopped at a replica C cannot finish (a shaped port, the CPU port, an
egress asking for clone, truncate or recirculate).
"""

from __future__ import annotations

import ctypes
from typing import Any

REPLICATED, REPLICA_STOP = 6, 7  # np_process: every replica finished / stopped at one


def _count_enqueue(sw: Any, port: int, prio: int) -> None:
    q = sw._tm.get(port) or sw._queue(port)
    q.enqueued[sw.nb_queues - 1 - prio] += 1


def egress_tail(sw: Any, prog: Any, port: int, F: list[int], payload: bytes, length: int) -> None:
    """``Switch._egress_tail`` for a packet whose egress ran in C, as ``Switch._enqueue``
    runs it: while a drain runs, so that what it enqueues (an egress clone) waits in its
    queue and leaves after this packet, as on the Python backend."""
    was, sw._draining = sw._draining, True
    try:
        sw._egress_tail(prog, port, F, payload, length, 0, sw._txq, 0)
    finally:
        sw._draining = was  # the queued copy: process() drains next, the loop's service()


def send_replicas(sw: Any, nat: Any) -> None:
    """Count and transmit, in order, the replicas the last native call finished."""
    rec = getattr(nat, "_mc_rec", None)
    if rec is None:
        rec = nat._mc_rec = (ctypes.c_uint32 * (5 * 64))()
    n = nat.lib.np_mc_out(nat.ctx, rec, len(rec) // 5)
    if n > len(rec) // 5:  # a bigger group than any before
        rec = nat._mc_rec = (ctypes.c_uint32 * (5 * n))()
        nat.lib.np_mc_out(nat.ctx, rec, n)
    if not n:
        return
    arena = nat.lib.np_mc_arena(nat.ctx)
    stats = sw.stats
    for i in range(n):
        off, length, port, prio, rc = rec[5 * i:5 * i + 5]
        if rc == 4:  # priority beyond the last queue
            sw._queue(port)
            stats.priority_out_of_range += 1
            continue
        _count_enqueue(sw, port, prio)
        if rc == 5:  # the replica's egress dropped it
            stats.pipeline_drops += 1
            continue
        sw._transmit(port, ctypes.string_at(arena + off, length), sw._txq)


def resume(sw: Any, prog: Any, frame: bytes) -> None:
    """Finish in Python a replication the native code stopped (REPLICA_STOP) at replica
    k: its egress tail when its egress ran in C, then the replicas after it (or from
    k), from the PHV ingress left, as ``Switch._replicate`` does."""
    nat = prog.native
    gid, egressed = ctypes.c_uint64(), ctypes.c_uint32()
    k = nat.lib.np_mc_stop(nat.ctx, ctypes.byref(gid), ctypes.byref(egressed), nat._F, nat._W)
    F0 = nat.unpack()
    F, off = nat.phv()
    payload, length = frame[off:], len(frame)
    replicas = sw.pre.groups.get(gid.value, [])
    if egressed.value and k < len(replicas):
        port = replicas[k].port
        _count_enqueue(sw, port, F0[prog.sm_priority] if prog.sm_priority is not None else 0)
        egress_tail(sw, prog, port, F, payload, length)
        k += 1
    sw._replicate(prog, F0, payload, length, replicas[k:], 0)
