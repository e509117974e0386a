"""Multicast and clone sessions on the native backend, the Python side (the C side is
pre.c).

The PRE's groups and clone sessions are copied into native memory as the control plane
writes them (``glue.replication_engine``); a packet whose ingress sets ``mcast_grp`` or
asks for an ingress clone is replicated in C: each copy's egress, checksum update and
deparse. ``send_replicas`` counts and sends what the C code finished when the Python
loop called it (``glue.receive``; the batched receive, io.c, sends them itself), and
``resume`` finishes in Python a replication that stopped at a copy C cannot finish (a
shaped port, the CPU port, an egress asking for a clone or a recirculation). An
egress clone (E2E) of a unicast is made in C too, after its original.
"""

from __future__ import annotations

import ctypes
from typing import Any

REPLICATED, REPLICA_STOP = 6, 7  # np_process: every copy finished / stopped at one
ST_MCAST, ST_I2E, ST_UNICAST, ST_E2E = range(4)  # pre.c: the stage a stopped replication was in


def _count_enqueue(sw: Any, port: int, prio: int) -> None:
    q = sw._tm.get(port) or sw._queue(port)
    q.enqueued[sw.nb_queues - 1 - prio] += 1


def egress_tail(sw: Any, prog: Any, port: int, F: list[int], payload: bytes, length: int, trunc: int = 0,
                loops: int = 0) -> None:
    """``Switch._egress_tail`` for a packet whose egress ran in C, as ``Switch._enqueue``
    runs it: while a drain runs, so that what it enqueues (an egress clone) waits in its
    queue and leaves after this packet, as on the Python backend."""
    was, sw._draining = sw._draining, True
    try:
        sw._egress_tail(prog, port, F, payload, length, trunc, sw._txq, loops)
    finally:
        sw._draining = was  # the queued copy: process() drains next, the loop's service()


def send_replicas(sw: Any, nat: Any) -> None:
    """Count and transmit, in order, the copies the last native call finished."""
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
        if rc == 1:  # the original, dropped by ingress
            stats.pipeline_drops += 1
            continue
        if rc == 4:  # priority beyond the last queue
            sw._queue(port)
            stats.priority_out_of_range += 1
            continue
        _count_enqueue(sw, port, prio)
        if rc == 5:  # the copy's egress dropped it
            stats.pipeline_drops += 1
            continue
        sw._transmit(port, ctypes.string_at(arena + off, length), sw._txq)


def resume(sw: Any, prog: Any, frame: bytes) -> None:
    """Finish in Python a replication the native code stopped (REPLICA_STOP) at copy k
    of a stage -- a group's replicas, an I2E clone session's copies (then the original
    goes on), or the original's own unicast: k's egress tail when its egress ran in C,
    then the copies after it (or from k), as ``Switch._replicate`` and
    ``Switch._ingress_tail`` do."""
    nat = prog.native
    key, egressed, stage = ctypes.c_uint64(), ctypes.c_uint32(), ctypes.c_uint32()
    args = (ctypes.byref(key), ctypes.byref(egressed), ctypes.byref(stage), nat._F, nat._W)
    nat.lib.np_mc_stop(nat.ctx, 1, *args)
    C0 = nat.unpack()  # an I2E or E2E clone's PHV before its egress
    k = nat.lib.np_mc_stop(nat.ctx, 0, *args)
    F0 = nat.unpack()  # the PHV ingress left
    F, off = nat.phv()
    payload, length = frame[off:], len(frame)
    if stage.value == ST_UNICAST:
        if egressed.value:
            port = F0[prog.sm_egress_spec]
            _count_enqueue(sw, port, F0[prog.sm_priority] if prog.sm_priority is not None else 0)
            egress_tail(sw, prog, port, F, payload, length)
        else:
            sw._ingress_tail(prog, F0, frame, payload, length, 0)
        return
    base, trunc, replicas = F0, 0, sw.pre.groups.get(key.value, [])
    if stage.value in (ST_I2E, ST_E2E):  # E2E: the original left before the copies
        session = sw.pre.clone_sessions.get(key.value)
        base, trunc, replicas = C0, session.packet_length_bytes if session else 0, session.replicas if session else []
    if egressed.value and k < len(replicas):
        port = replicas[k].port
        _count_enqueue(sw, port, base[prog.sm_priority] if prog.sm_priority is not None else 0)
        egress_tail(sw, prog, port, F, payload, length, trunc)
        k += 1
    sw._replicate(prog, base, payload, length, replicas[k:], trunc)
    if stage.value == ST_I2E:  # then the original, as after an ingress without clone
        sw._ingress_tail(prog, F0, frame, payload, length, 0)
