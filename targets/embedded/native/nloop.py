"""The data-plane loop in C for the ports that native programs serve (loop.c).

``NativeLoop(py_epoll)`` holds a second epoll set: the port sockets of every switch whose
program runs natively (``glue.native_rx_ok``), plus the Python loop's own epoll, which
keeps the wake-up pipes and the ports of Python-backend switches. ``run`` waits and
works in C (receive batch, pipelines, send batch, for every ready port) until it is idle,
a time budget passes, a packet needs the Python path, or the Python epoll is readable;
the Python loop then folds the counters, finishes that packet, beats the heartbeat and
runs its timers. ``refresh`` moves sockets between the two sets when a switch changes
(a program swap, capture handlers added): a switch the C loop cannot serve keeps its
ports in the Python loop, with one log line saying why.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import math
import select
import time
from pathlib import Path
from typing import Any

from targets.embedded.native import glue, memlink, tmglue
from targets.embedded.native.build import build

log = logging.getLogger("gradnet.switch")
_HERE = Path(__file__).parent
BUDGET_US = 20_000  # C work between two returns to Python (heartbeat, counters, timers)
RECHECK_S = 0.1  # how often refresh looks at the switches without a wake-up
IDLE, BUDGET, SLOW, PYTHON = range(4)


class Source(ctypes.Structure):
    """One natively served port socket (loop.c's src_t)."""

    _fields_ = [(n, ctypes.c_void_p) for n in
                ("rx", "pending", "ctx", "fast", "txfd", "cnt", "slow", "slowlen", "slowinfo")] + [
        ("t0_ns", ctypes.c_int64), ("fd", ctypes.c_int32), ("port", ctypes.c_uint32),
        ("nbq", ctypes.c_uint32), ("ts", ctypes.c_uint32), ("ring", ctypes.c_void_p), ("drain", ctypes.c_void_p)]


def _addr(obj: Any) -> int:
    return ctypes.cast(obj, ctypes.c_void_p).value or 0


def build_loop() -> Path:
    """The shared object of loop.c (built once into the native cache)."""
    return build((_HERE / "memlink.c").read_text() + (_HERE / "loop.c").read_text())


def _requeue_pending(sw: Any, nat: Any) -> int:
    """Run through the switch's program now the frames that ``nat`` (an instance the loop
    in C stops serving: a program swap, capture handlers, a trace) still holds of its last
    receive batch -- older than anything in the sockets, so first -- and send what they
    made; how many. Without this they would be lost with the instance."""
    buf, port = ctypes.create_string_buffer(65536 + 8), ctypes.c_uint32()
    frames = []
    while n := nat.lib.np_rx_take(nat.ctx, buf, len(buf), ctypes.byref(port)):
        frames.append((port.value, buf.raw[:n]))
    for p, frame in frames:
        sw._receive(p, frame)
    if sw._txq:
        sw._send()
    return len(frames)


class NativeLoop:
    """The C half of the data-plane loop (see the module doc)."""

    PYTHON = PYTHON

    def __init__(self, py_epoll: select.epoll) -> None:
        self.lib = ctypes.CDLL(str(build_loop()))
        memlink.bind(self.lib)
        self.lib.gl_take.restype = ctypes.c_int
        self.lib.gl_take.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
        self._tidx, self._tval = (ctypes.c_uint32 * 256)(), (ctypes.c_uint64 * 256)()
        self.lib.gl_run.restype = ctypes.c_int
        self.lib.gl_run.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                                    ctypes.c_int64, ctypes.POINTER(ctypes.c_int)]
        self.py_ep = py_epoll
        self.ep = select.epoll()
        self.ep.register(py_epoll.fileno(), select.EPOLLIN)
        self.native_fds: set[int] = set()
        self.sources: list[tuple[Any, Any, int]] = []  # (switch, program, port), by source index
        self.switches: list[Any] = []
        self._arr: Any = None
        self._keep: list[Any] = []
        self._key: tuple = ()
        self._why: dict[int, str] = {}
        self._which = ctypes.c_int()
        self._stale, self._checked, self._checked_at = True, None, 0.0
        self._learners: list[tuple[Any, Any]] = []  # (switch, instance) of programs with digests

    def close(self) -> None:
        self.ep.close()

    def refresh(self, switches: list[Any]) -> bool:
        """Serve natively the ports of every switch that allows it; True when any."""
        # Every iteration of the Python loop asks; what changes a switch (a program, rates,
        # a trace, a capture) wakes it, which returns here as PYTHON: look again then, and
        # every RECHECK_S, not at every slow packet (20 switches' keys cost ~0.1-0.3 ms).
        now = time.monotonic()
        if not self._stale and switches is self._checked and now - self._checked_at < RECHECK_S:
            return bool(self.sources)
        self._stale, self._checked, self._checked_at = False, switches, now
        links = memlink.update(self.lib, switches, glue.native_rx_ok)  # before the keys: it sets the port tables
        key = (links, *(self._switch_key(sw) for sw in switches))
        if key == self._key:
            return bool(self.sources)
        self._key = key
        want: dict[int, tuple[Any, int]] = {}
        for sw in switches:
            if glue.native_rx_ok(sw):
                want.update((fd, (sw, port)) for fd, port in sw._fd_port.items())
            else:
                self._say_why(sw)
        for fd in self.native_fds - set(want):  # back to the Python loop
            self.ep.unregister(fd)
            self.py_ep.register(fd, select.EPOLLIN)
        for fd in set(want) - self.native_fds:
            with contextlib.suppress(FileNotFoundError):  # a caller of its own (tests) never registered it
                self.py_ep.unregister(fd)
            self.ep.register(fd, select.EPOLLIN)
        self.native_fds = set(want)
        self._requeue()
        rings = [(pl.peer, pl.peer_port, pl.ring) for sw in switches for port, pl in
                 getattr(sw, "peer_links", {}).items() if port in sw._ml]
        self._build(want, rings)
        log.info("data-plane loop in C: %d ports of %d switches (%d in-memory link directions)",
                 len(self.sources), len(self.switches), len(rings))
        return bool(self.sources)

    def _requeue(self) -> None:
        """Before the sources change: the frames that an instance no longer served still
        holds of its batch go to the switch's program now, in order (_requeue_pending)."""
        done: set[int] = set()
        for sw, prog, _ in self.sources:
            nat = prog.native
            if nat is None or id(nat) in done or (sw.program is prog and glue.native_rx_ok(sw)):
                continue
            done.add(id(nat))
            if nat.dqn is not None and nat.dqn.value:
                glue.deliver_digests(sw, nat)
            if nat.lib.np_rx_pending(nat.ctx):
                log.info("device %d: %d frames left in a receive batch run on the program it has now",
                         sw.device_id, _requeue_pending(sw, nat))

    def _switch_key(self, sw: Any) -> tuple:
        if not glue.native_rx_ok(sw):
            return (id(sw), None)
        fast = tmglue.fast_ports(sw, glue._fast_ports(sw))
        return (id(sw), id(sw.program), id(fast), id(glue._tx_fds(sw)), tuple(sw._fd_port))

    def _say_why(self, sw: Any) -> None:
        prog = sw.program
        if prog is None or prog.native is None:
            return
        why = ("capture handlers" if sw.tx_handlers else "a trace" if "_receive" in sw.__dict__
               else f"{sw.nb_queues} priority queues (native: at most 8)")
        if self._why.get(id(sw)) != why:
            self._why[id(sw)] = why
            log.info("device %d: its ports run in the Python loop (%s)", sw.device_id, why)

    def _build(self, want: dict[int, tuple[Any, int]], rings: list[tuple[Any, int, int]]) -> None:
        """The sources: every socket of ``want`` and every ring (receiving switch, port, ring)."""
        arr = (Source * max(1, len(want) + len(rings)))()
        keep: list[Any] = []
        self.sources, seen = [], {}
        items = [(fd, sw, port, 0) for fd, (sw, port) in want.items()] + [(-1, sw, p, r) for sw, p, r in rings]
        for i, (fd, sw, port, ring) in enumerate(items):
            prog, nat = sw.program, sw.program.native
            fast, txfd, cnt = tmglue.fast_ports(sw, glue._fast_ports(sw)), glue._tx_fds(sw), glue.counters(sw, prog)
            keep += [fast, txfd, cnt, nat]
            s = arr[i]
            s.rx, s.ring = _addr(nat.lib.np_rx_ml if ring else nat.lib.np_rx), ring or None
            s.pending, s.drain = _addr(nat.lib.np_rx_pending), _addr(nat.lib.np_tm_drain)
            s.ctx, s.fast = nat.ctx, _addr(ctypes.c_char_p(fast))
            s.txfd, s.cnt, s.slow = ctypes.addressof(txfd), ctypes.addressof(cnt), ctypes.addressof(nat.slow)
            s.slowlen, s.slowinfo = ctypes.addressof(nat.slowlen), ctypes.addressof(nat.slowinfo)
            s.t0_ns = int(sw._t0 * 1e9)
            s.fd, s.port, s.nbq, s.ts = fd, port, sw.nb_queues, int(nat.clocked)
            glue.clock(sw, nat)  # the clock origin, for the times tm.c takes
            self.sources.append((sw, prog, port))
            seen[id(sw)] = sw
        self._arr, self._keep, self.switches = arr, keep, list(seen.values())
        self._learners = list({id(sw.program.native): (sw, sw.program.native) for sw in self.switches
                               if sw.program.native.dqn is not None}.values())

    def _take(self, cnt: Any) -> list[tuple[int, int]]:
        """The nonzero counter words, zeroed (loop.c's gl_take: a C scan, not numpy's)."""
        out: list[tuple[int, int]] = []
        while True:
            k = self.lib.gl_take(cnt, len(cnt), self._tidx, self._tval, 256)
            out += zip(self._tidx[:k], self._tval[:k], strict=True)
            if k < 256:
                return out

    def run(self, wait_s: float) -> tuple[int, Any]:
        """Work in C until idle (after ``wait_s`` at most when nothing comes), the
        budget, a slow packet or the Python epoll; fold the counters; finish the slow
        packet. Returns the reason and the switch that had a slow packet (or None)."""
        rc = self.lib.gl_run(self.ep.fileno(), self.py_ep.fileno(), self._arr, len(self.sources),
                             max(0, math.ceil(wait_s * 1000)), BUDGET_US, ctypes.byref(self._which))
        if rc == PYTHON:
            self._stale = True
        for sw in self.switches:
            cnt = sw._native_cnt
            if cnt[glue.CNT_TOUCHED]:  # set by loop.c when a source of sw did work
                glue.fold(sw, self._take)
        for sw, nat in self._learners:  # digests queued in C, at the end of the batch
            if nat.dqn.value:
                glue.deliver_digests(sw, nat)
        if rc == SLOW:
            sw, prog, port = self.sources[self._which.value]
            glue.finish_slow(sw, prog, port)
            return rc, sw
        if rc < 0:
            raise OSError(ctypes.get_errno(), "native loop: epoll_wait failed")
        return rc, None


def make(py_epoll: select.epoll) -> NativeLoop | None:
    """A NativeLoop, or None (one log line) when loop.c cannot be built."""
    try:
        return NativeLoop(py_epoll)
    except Exception as e:  # no compiler, a read-only cache: the Python loop serves every port
        log.info("native data-plane loop not used (%s): ports run in the Python loop", e)
        return None
