"""The switch's shaped queues in native memory (tm.c): configuration, draining, counters.

A port with a rate (``set_queue_rate``, ``set_port_rate``: traffic.py) is shaped. Where
the switch's ports are received natively in batches (``glue.native_rx_ok``: the C loop,
or ``glue.rx`` in a Python loop), a unicast packet to a shaped port is queued in C after
ingress, with its PHV, and leaves through the native egress when the rates allow
(tm.c, the same token buckets as traffic.py): the batched paths pass ``fast_ports``'s
mask, 2 for such a port. The C loop drains on a timer (loop.c); a Python loop drains in
``Switch.service`` (``service`` here). What the Python path queues itself -- a frame
received one at a time (``Switch._receive``: packet-outs, traces, capture handlers), a
replica or clone to a shaped port -- waits in traffic.py's queues of the same port.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import types
from typing import Any

log = logging.getLogger("gradnet.switch")
SHAPED = 2  # fast-mask value of a port shaped in C
_MAXQ = 8  # tm.c's TM_MAXQ
TM_QUEUED, TM_FULL = 10, 11  # np_process / np_tm_push: queued in a shaped queue; dropped, the queue full (api.c)
_M64 = (1 << 64) - 1


def _bind(lib: ctypes.CDLL) -> None:
    if getattr(lib, "_tm_bound", False):
        return
    vp, u32, dbl = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_double
    u32p = ctypes.POINTER(u32)
    lib.np_tm_cfg.restype = ctypes.c_int
    lib.np_tm_cfg.argtypes = [vp, u32, u32, ctypes.POINTER(dbl), u32p, dbl, u32, u32]
    lib.np_tm_clock.restype, lib.np_tm_clock.argtypes = None, [vp, dbl]
    lib.np_tm_occupancy.restype, lib.np_tm_occupancy.argtypes = ctypes.c_int, [vp, u32, u32]
    lib.np_tm_drain.restype = ctypes.c_int
    lib.np_tm_push.restype = ctypes.c_int
    lib.np_tm_push.argtypes = [vp, vp, vp, ctypes.c_char_p, u32, u32, u32, u32]
    lib.np_tm_drain_port.restype = ctypes.c_int
    lib.np_tm_drain_port.argtypes = [vp, u32, vp, vp, ctypes.c_char_p, u32p, u32p]
    lib.np_tm_drain.argtypes = [vp, dbl, vp, vp, ctypes.c_char_p, u32p, u32p, ctypes.POINTER(dbl)]
    lib._tm_bound = True


def fast_ports(sw: Any, base: bytes) -> bytes:
    """``base`` (glue._fast_ports: 1 straight to egress, 0 the Python path) with 2 for
    every port shaped in C; writes the queues' configuration into the native program
    when it changed. The same object while nothing changed (the C loop's key)."""
    nat = sw.program.native
    key = (getattr(sw, "_tm_version", 0), id(nat), sw.cpu_port, sw.nb_queues, base)
    cached = getattr(sw, "_native_tm_fast", None)
    if cached is not None and cached[0] == key:
        return cached[1]
    mask = bytearray(base)
    if sw.nb_queues <= _MAXQ:
        _configure(sw, nat, mask)
    sw._native_tm_fast = (key, bytes(mask))
    return sw._native_tm_fast[1]


def _port_cfg(sw: Any, p: int) -> Any:
    q = sw._tm.get(p)
    if q is None:  # traffic.py's configuration of a port it has not queued for yet
        n = sw.nb_queues
        q = types.SimpleNamespace(rate=[None] * n, depth=[sw.queue_depth] * n, port_rate=None, port_frame=None)
        sw._apply_cfg(p, q)
    return q


def _configure(sw: Any, nat: Any, mask: bytearray) -> None:
    """Mark in ``mask`` the ports with a rate that the Python path would queue (0 in it),
    write their rates and depths, and unshape the ports that were shaped."""
    _bind(nat.lib)
    was: set[int] = getattr(nat, "tm_ports", set())
    cfg = {}
    for p in range(512):
        if not mask[p] and p != sw.cpu_port:
            q = _port_cfg(sw, p)
            if q.port_rate is None and all(r is None for r in q.rate):
                mask[p] = 1  # no rate after all (traffic.py empties such a queue at once)
            else:
                mask[p], cfg[p] = SHAPED, q
    now = set(cfg)
    nbq = sw.nb_queues
    rate, depth = (ctypes.c_double * _MAXQ)(), (ctypes.c_uint32 * _MAXQ)()
    for p in sorted(now | was):
        q = cfg.get(p) or _port_cfg(sw, p)
        for i in range(nbq):
            rate[i] = -1.0 if q.rate[i] is None else float(q.rate[i])
            depth[i] = max(0, min(int(q.depth[i]), 0xFFFFFFFF))
        prate = -1.0 if q.port_rate is None else float(q.port_rate)
        if nat.lib.np_tm_cfg(nat.ctx, p, nbq, rate, depth, prate, q.port_frame or 0, int(p in now)) != 0:
            raise MemoryError(f"native traffic manager: configuring port {p} failed")
    nat.tm_occupancy = functools.partial(occupancy, nat)  # traffic.py's queue_stats asks it
    if now != was:
        log.info("device %d: %d shaped ports queue in C (native traffic manager)", sw.device_id, len(now))
    nat.tm_ports = now


def service(sw: Any, timeout: float | None, g: Any) -> float | None:
    """Drain the native shaped queues of ``sw``'s program as far as the rates allow (a
    packet whose egress the Python path finishes, finished here); ``timeout`` lowered to
    the next departure (Switch.service's answer). ``g``: the glue module (g.py, which
    imports this one), for the switch's native counters and Python path."""
    prog = sw.program
    nat = prog.native if prog is not None else None
    if nat is None or not getattr(nat, "tm_ports", None) and not getattr(nat, "tm_used", False):
        return timeout
    nat.tm_used = True  # once shaped, drained until the program goes (what is queued stays)
    if g.native_rx_ok(sw):
        fast_ports(sw, g._fast_ports(sw))  # a rate written since the last batch reaches C first
    wait = ctypes.c_double()
    cnt, txfd = g.counters(sw, prog), g._tx_fds(sw)
    was, sw._draining = sw._draining, True  # what the Python path queues meanwhile: the next drain
    try:
        while True:
            k = nat.lib.np_tm_drain(nat.ctx, -1.0, txfd.fd, cnt, nat.slow, ctypes.byref(nat.slowlen),
                                    ctypes.byref(nat.slowinfo), ctypes.byref(wait))
            if k:  # what left is counted (tx, egress drops): into SwitchStats
                g.fold(sw)
            if not nat.slowlen.value:
                break
            g.finish_slow(sw, prog, (nat.slowinfo.value >> 8) & 0xFFF)
    finally:
        sw._draining = was
    if sw._redrain:
        return 0.0
    if wait.value < 0:
        return timeout
    return wait.value if timeout is None else min(timeout, wait.value)


def push(sw: Any, prog: Any, port: int, F: list[int], payload: bytes, length: int, trunc: int, g: Any) -> bool:
    """``Switch._enqueue`` for a port shaped in C: the packet the Python path made (a
    replica, a clone, a frame received one at a time) joins the port's native queues, so
    one scheduler serves the port; counted as traffic.py counts. False: not such a port
    (or a truncated copy, which the Python queues keep), the caller queues it. ``g``: as
    for ``service``."""
    nat = prog.native
    if trunc or port not in getattr(nat, "tm_ports", ()):
        return False
    _bind(nat.lib)
    Fa, Wa = nat._F, nat._W
    Fa[:] = [v & _M64 for v in F]
    for s, i in nat.gen.wide.items():
        Wa[4 * i:4 * i + 4] = [(F[s] >> (64 * k)) & _M64 for k in range(4)]
    rc = nat.lib.np_tm_push(nat.ctx, Fa, Wa, payload, len(payload), length, port, sw.nb_queues)
    if rc == 2:
        return False
    prio = F[prog.sm_priority] if prog.sm_priority is not None else 0
    q = sw._tm.get(port) or sw._queue(port)
    if rc == 4:
        sw.stats.priority_out_of_range += 1
    elif rc == TM_FULL:
        sw.stats.ports[port].queue_drops += 1
        q.dropped[sw.nb_queues - 1 - prio] += 1
    else:
        q.enqueued[sw.nb_queues - 1 - prio] += 1
        if rc == TM_QUEUED + 16:  # a queue without a rate: out now, as traffic.py's _enqueue
            if sw._draining:
                sw._redrain = True
            else:
                _drain_port(sw, prog, port, g)
    return True


def _drain_port(sw: Any, prog: Any, port: int, g: Any) -> None:
    nat = prog.native
    cnt, txfd = g.counters(sw, prog), g._tx_fds(sw)
    sw._draining = True  # what the Python path enqueues meanwhile waits for the next drain
    try:
        while nat.lib.np_tm_drain_port(nat.ctx, port, txfd.fd, cnt, nat.slow, ctypes.byref(nat.slowlen),
                                       ctypes.byref(nat.slowinfo)):
            g.fold(sw)
            g.finish_slow(sw, prog, port)
        g.fold(sw)
    finally:
        sw._draining = False


def occupancy(nat: Any, port: int, slot: int) -> int:
    """Packets waiting in the native queue ``slot`` of ``port`` (0: none, or the program
    is gone); ``nat.tm_occupancy`` once it has shaped ports."""
    if not nat.ctx:
        return 0
    return max(0, nat.lib.np_tm_occupancy(nat.ctx, port, slot))


def set_clock(nat: Any, t: float | None) -> None:
    """Run the native traffic manager on time ``t`` (seconds, the switch's monotonic
    clock) from now on, or the real clock again (None): deterministic tests."""
    _bind(nat.lib)
    nat.lib.np_tm_clock(nat.ctx, -1.0 if t is None else float(t))
