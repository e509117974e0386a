"""How a switch picks its backend and runs a packet on the native one.

``attach(program, backend)`` gives a compiled Program its native instance
(``Program.native``) when the backend asks for it and the program allows it.
``receive(switch, program, port, frame)`` runs one frame: the native call finishes the
common path (parse to deparse, multicast replicas, clones, resubmit, recirculate and
truncate included: mcast.py, process.c; digests and packet-ins queued for
``deliver_digests``; a shaped queue in C on the batched paths: tmglue.py; the queue
clocks and depths: meta.c); where it stops -- a shaped queue here, a resubmit or
digest with an ingress clone, an egress clone of a replica -- the
switch's Python path resumes from the PHV the native code left, so every feature the
Python backend has keeps working, with the state in native memory.
"""

from __future__ import annotations

import ctypes
import logging
import os
import queue
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from targets.embedded.codegen.layout import CompileError
from targets.embedded.native import mcast, tmglue
from targets.embedded.native.cexpr import Unsupported

log = logging.getLogger("gradnet.switch")

BACKENDS = ("auto", "native", "python")
ENV = "GRADNET_BACKEND"
ML_FD = -2  # PortTable.fd of a port whose link runs in memory
CPU_FD = -3  # PortTable.fd of the CPU port: a packet-in (io.c's tx_port queues it, meta.c)
SENT, DROPPED, AFTER_INGRESS, AFTER_EGRESS, BAD_PRIORITY, EGRESS_DROPPED = range(6)
LOOP_LIMIT = 8  # a resubmit/recirculate chain cut at switch.MAX_LOOPS passes (process.c)


def default_backend() -> str:
    """The backend the environment asks for ($GRADNET_BACKEND), else auto: native where
    the program allows it and a C compiler is present (attach says what is missing)."""
    b = os.environ.get(ENV, "auto").strip().lower() or "auto"
    if b not in BACKENDS:
        log.warning("%s=%r is not auto, native or python: using auto", ENV, b)
        return "auto"
    return b


def check_backend(name: str) -> str:
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r} (auto, native or python)")
    return name


def attach(program: Any, backend: str, seed: int | None = None, on_ready: Callable[[], None] | None = None) -> None:
    """Run ``program`` natively when ``backend`` is native or auto and it can.

    native: build now, or raise CompileError naming what is missing. auto: one log line
    naming what is missing, and the Python backend; a program whose C is not in the cache
    yet compiles in a background thread while the Python backend serves (so a
    SetForwardingPipelineConfig never waits for the compiler), then ``on_ready`` is called
    and the switch's data-plane thread swaps it in (``adopt``)."""
    if backend == "python" or program.native is not None:
        return
    try:
        from targets.embedded.native.binding import NativeBackend  # ctypes, built on demand
        from targets.embedded.native.build import cached, compiler
        from targets.embedded.native.cgen import NativeGen

        gen = NativeGen(program)  # raises Unsupported naming what is missing
        if compiler() is None:
            raise Unsupported("no C compiler (cc, gcc or clang) on PATH")
        if backend == "auto" and on_ready is not None and cached(gen.source) is None:
            _compile_later(program, gen.source, on_ready)
            log.info("compiling the program to C in the background; the Python backend serves meanwhile")
            return
        program.native = NativeBackend(program, seed, gen=gen)
        log.info("program runs on the native backend (%s)", program.native.path.name)
    except Unsupported as e:
        if backend == "native":
            raise CompileError(f"native backend: unsupported: {e}") from e
        log.info("native backend not used: %s; running the Python backend", e)


# One background compiler per process, one program at a time: a program replaced (and
# freed) before its turn is skipped, so a client cycling through pipelines, or the
# config fuzzer, does not start one compiler per program.
_jobs: queue.SimpleQueue[tuple[weakref.ref, str, Callable[[], None]]] = queue.SimpleQueue()
_worker: list[threading.Thread] = []
_worker_lock = threading.Lock()


def _compile_later(program: Any, source: str, on_ready: Callable[[], None]) -> None:
    _jobs.put((weakref.ref(program), source, on_ready))
    with _worker_lock:
        if not _worker:
            _worker.append(threading.Thread(target=_compile_jobs, daemon=True, name="native-compile"))
            _worker[0].start()


def _compile_jobs() -> None:
    from targets.embedded.native.build import build
    from targets.embedded.native.cgen import NativeGen

    while True:
        ref, source, on_ready = _jobs.get()
        if ref() is None:
            continue  # replaced and gone before its turn
        t0 = time.monotonic()
        try:
            build(source)
            program = ref()
            if program is None:
                continue
            gen = NativeGen(program)  # again: the job kept no reference to the program
        except Exception as e:  # a generator bug or a broken compiler: the Python backend keeps serving
            log.warning("native backend not used: building the program failed (%s)", e)
            continue
        program.native_built = gen
        log.info("program compiled to C in %.1f s; the data plane swaps it in", time.monotonic() - t0)
        on_ready()
        del program, gen


def adopt(program: Any, seed: int | None, pre: Any = None) -> bool:
    """Swap in the native backend that ``attach`` built in the background (call from the
    data-plane thread, between packets, with the switch's control lock held: the state
    -- and the ``pre``'s groups and clone sessions -- moves into native memory). True
    when the program now runs natively."""
    gen, program.native_built = program.native_built, None
    if gen is None or program.native is not None:
        return program.native is not None
    from targets.embedded.native.binding import NativeBackend

    try:
        program.native = NativeBackend(program, seed, gen=gen)
    except Exception as e:
        log.warning("native backend not used: loading the compiled program failed (%s)", e)
        return False
    if pre is not None:
        program.native.set_pre(0, pre.groups)
        program.native.set_pre(1, pre.clone_sessions)
    log.info("program now runs on the native backend (%s)", program.native.path.name)
    return True


def replication_engine(sw: Any) -> Any:
    """A PRE for ``sw`` whose group and clone-session writes reach the native memory of
    the switch's program, when it has one (each write atomic with respect to packets)."""
    from targets.embedded.state import PacketReplicationEngine

    pre = PacketReplicationEngine()
    ref = weakref.ref(sw)
    for kind, entries in enumerate((pre.groups, pre.clone_sessions)):

        def changed(key: int | None, kind: int = kind, entries: Any = entries) -> None:
            s = ref()
            prog = s.program if s is not None else None
            if prog is not None and prog.native is not None:
                prog.native.set_pre(kind, entries, key)

        entries.on_change = changed
    return pre


def _fast_ports(sw: Any) -> bytes:
    """Per port (0..511): 1 when a packet to it may go straight from the native
    ingress to the native egress -- its queues have no rate (the CPU port too: a
    packet-in is queued in C for ``deliver_digests``)."""
    key = (getattr(sw, "_tm_version", 0), sw._shaped, len(sw._tm), sw.cpu_port)
    cached = getattr(sw, "_native_fast", None)
    if cached is not None and cached[0] == key:
        return cached[1]
    mask = bytearray(512)
    for p in range(512):
        q = sw._tm.get(p)
        if q is None:
            mask[p] = 0 if sw._shaped else 1
        else:
            mask[p] = int(q.port_rate is None and all(r is None for r in q.rate))
    sw._native_fast = (key, bytes(mask))
    return sw._native_fast[1]


def receive(sw: Any, prog: Any, port: int, frame: bytes) -> None:
    """Run one received frame through the native backend (see the module doc)."""
    nat = prog.native
    now = clock(sw, nat)
    rc = nat.lib.np_process(nat.ctx, frame, len(frame), port, now, sw.nb_queues, _fast_ports(sw), nat.out,
                            len(nat.out), ctypes.byref(nat.outlen), ctypes.byref(nat.outport),
                            ctypes.byref(nat.outprio))
    if nat.dqn is not None and nat.dqn.value:
        deliver_digests(sw, nat)
    loops = _loops(sw, nat) if nat.reenters else 0
    if loops:
        frame = nat.current_frame()  # a recirculation's frame: the one the Python path resumes with
    if rc == SENT:
        out = nat.outport.value
        _count_enqueue(sw, out, nat.outprio.value)
        sw._transmit(out, ctypes.string_at(nat.out, nat.outlen.value), sw._txq)
    elif rc == DROPPED:
        sw.stats.pipeline_drops += 1
    elif rc == EGRESS_DROPPED:
        _count_enqueue(sw, nat.outport.value, nat.outprio.value)
        sw.stats.pipeline_drops += 1
    elif rc == BAD_PRIORITY:
        sw._queue(nat.outport.value)
        sw.stats.priority_out_of_range += 1
    elif rc == AFTER_INGRESS:
        F, off = nat.phv()
        sw._ingress_tail(prog, F, frame, frame[off:], len(frame), loops)
    elif rc == AFTER_EGRESS:
        F, off = nat.phv()
        out = nat.outport.value
        _count_enqueue(sw, out, nat.outprio.value)
        mcast.egress_tail(sw, prog, out, F, frame[off:], len(frame), 0, loops)
    elif rc == LOOP_LIMIT:
        sw.stats.loop_limit += 1
    elif rc in (mcast.REPLICATED, mcast.REPLICA_STOP):
        mcast.send_replicas(sw, nat)
        if rc == mcast.REPLICA_STOP:
            mcast.resume(sw, prog, frame)
    else:
        raise RuntimeError(f"native packet path returned {rc}")


def clock(sw: Any, nat: Any) -> int:
    """The switch's time in microseconds (``Switch._now_us``) for a program that reads a
    clock of the traffic manager (0 for one that does not); the native code is given the
    switch's clock origin first (meta.c), for the times it takes itself."""
    if not nat.clocked:
        return 0
    if nat.t0 != sw._t0:
        nat.lib.np_clock_origin(nat.ctx, sw._t0)
        nat.t0 = sw._t0
    return sw._now_us()


def _loops(sw: Any, nat: Any, count: bool = True) -> int:
    """The resubmits and recirculations the last native call made of its packet; with
    ``count``, the queue of each recirculated pass counted (np_rx counts its own)."""
    enq, n = getattr(nat, "_lq", None), ctypes.c_uint32()
    if enq is None:
        enq = nat._lq = (ctypes.c_uint32 * 33)()
    loops = nat.lib.np_loops(nat.ctx, enq, ctypes.byref(n))
    for i in range(n.value if count else 0):
        _count_enqueue(sw, enq[i] & 511, (enq[i] >> 16) & 7)
    return loops


def deliver_digests(sw: Any, nat: Any) -> None:
    """Hand the digests and packet-ins the native code queued to the switch's digest and
    packet-in handlers, in order (as ``Switch._learn`` and ``Switch._transmit``; the data
    plane calls it after each batch, before a packet the Python path finishes)."""
    for name, values in nat.take_digests():
        if name is None:  # a packet-in (its CPU port's tx counted in C)
            for ph in sw.packet_in_handlers:
                ph(values)
            continue
        for h in sw.digest_handlers:
            h(name, [values])


def _count_enqueue(sw: Any, port: int, prio: int) -> None:
    q = sw._tm.get(port) or sw._queue(port)
    q.enqueued[sw.nb_queues - 1 - prio] += 1


class PortTable(ctypes.Structure):
    """Per port (0..511): the socket to send on (-1: none; -2: the ring in ``ml``, an
    in-memory link, memlink.c), as the native code reads it."""

    _fields_ = [("fd", ctypes.c_int32 * 512), ("ml", ctypes.c_void_p * 512)]


def _tx_fds(sw: Any) -> PortTable:
    """The switch's PortTable (rebuilt when its ports or in-memory links change)."""
    key = (tuple(sorted((p, s.fileno()) for p, s in sw._ports.items())),
           tuple(sorted((p, r.ring) for p, r in sw._ml.items())), sw.cpu_port)
    cached = getattr(sw, "_native_txfd", None)
    if cached is not None and cached[0] == key:
        return cached[1]
    tbl = PortTable()
    ctypes.memset(ctypes.addressof(tbl.fd), 0xFF, 4 * 512)
    for p, fd in key[0]:
        if 0 <= p < 512 and p != sw.cpu_port:
            tbl.fd[p] = fd
    for p, ring in key[1]:
        if 0 <= p < 512 and p != sw.cpu_port:
            tbl.fd[p], tbl.ml[p] = ML_FD, ring
    if sw.cpu_port is not None and 0 <= sw.cpu_port < 512:
        tbl.fd[sw.cpu_port] = CPU_FD
    sw._native_txfd = (key, tbl)
    return tbl


# The switch's counters as io.c lays them out (uint64 words; np_cnt_words() in all).
CNT_PIPE, CNT_NOPORT, CNT_TOUCHED, CNT_LOOP, CNT_RX = 0, 1, 2, 3, 8  # CNT_TOUCHED: loop.c, cleared by fold
CNT_TX, CNT_QDROP, CNT_PRIO, CNT_ENQ = CNT_RX + 512, CNT_RX + 1024, CNT_RX + 1536, CNT_RX + 2048
CNT_TMDROP = CNT_ENQ + 512 * 8  # [port * 8 + prio]: dropped by a full shaped queue (tm.c)
MAX_NATIVE_QUEUES = 8  # the counters hold 8 priorities a port (simple_switch's most)


def counters(sw: Any, prog: Any) -> Any:
    """The switch's native counters (one array, shared by every port it serves natively)."""
    cnt = getattr(sw, "_native_cnt", None)
    if cnt is None:
        cnt = sw._native_cnt = (ctypes.c_uint64 * prog.native.lib.np_cnt_words())()
    return cnt


def fold(sw: Any, take: Callable[[Any], list[tuple[int, int]]] | None = None) -> bool:
    """Add what the native code counted since the last fold to ``sw.stats`` and the traffic
    manager's per-queue counts, and zero it; True when it counted anything. ``take``:
    the nonzero (index, value) words, zeroed (the C loop's scan; default numpy's)."""
    cnt = getattr(sw, "_native_cnt", None)
    if cnt is None:
        return False
    if take is not None:
        pairs = take(cnt)
    else:
        import numpy as np  # here: a switch without a native program never needs it

        a = np.frombuffer(cnt, dtype=np.uint64)
        nz = np.flatnonzero(a)
        pairs = list(zip(nz.tolist(), a[nz].tolist(), strict=True))
        a[nz] = 0
    if not pairs:
        return False
    stats, ports, nbq = sw.stats, sw.stats.ports, sw.nb_queues
    for i, v in pairs:
        if i >= CNT_TMDROP:
            port, prio = divmod(i - CNT_TMDROP, 8)
            q = sw._tm.get(port) or sw._queue(port)
            q.dropped[nbq - 1 - prio] += v
        elif i >= CNT_ENQ:
            port, prio = divmod(i - CNT_ENQ, 8)
            q = sw._tm.get(port) or sw._queue(port)
            q.enqueued[nbq - 1 - prio] += v
        elif i >= CNT_PRIO:
            sw._queue(i - CNT_PRIO)
            stats.priority_out_of_range += v
        elif i >= CNT_QDROP:
            ports[i - CNT_QDROP].queue_drops += v
        elif i >= CNT_TX:
            ports[i - CNT_TX].tx += v
        elif i >= CNT_RX:
            ports[i - CNT_RX].rx += v
        elif i == CNT_PIPE:
            stats.pipeline_drops += v
        elif i == CNT_NOPORT:
            stats.no_such_port += v
        elif i == CNT_LOOP:
            stats.loop_limit += v
    return True


def native_rx_ok(sw: Any) -> bool:
    """Whether the switch's ports can be received natively (batched, in C): a native
    program, no per-frame capture handlers, at most 8 priority queues, no trace (a trace
    shadows ``_receive``; traced packets run the Python pipeline, on the native state)."""
    prog = sw.program
    return (prog is not None and prog.native is not None and not sw.tx_handlers
            and sw.nb_queues <= MAX_NATIVE_QUEUES and "_receive" not in sw.__dict__)


def finish_slow(sw: Any, prog: Any, port: int) -> None:
    """Finish in Python the packet the native code handed back (its frame in
    ``nat.slow``, its PHV in the instance), then send what it made."""
    nat = prog.native
    if nat.dqn is not None and nat.dqn.value:  # those of the packets before it first
        deliver_digests(sw, nat)
    slow = nat.slowlen.value
    if not slow:
        return
    nat.slowlen.value = 0
    info = nat.slowinfo.value
    rc, out = info & 0xFF, (info >> 8) & 0xFFF
    frame = nat.slow.raw[:slow]  # the frame of its last pass (io.c)
    loops = _loops(sw, nat, count=False) if nat.reenters else 0
    try:
        F, off = nat.phv()
        if rc == AFTER_INGRESS:
            sw._ingress_tail(prog, F, frame, frame[off:], slow, loops)
        elif rc == mcast.REPLICA_STOP:  # the replicas before it left from C
            mcast.resume(sw, prog, frame)
        else:
            mcast.egress_tail(sw, prog, out, F, frame[off:], slow, 0, loops)
    except Exception:
        sw.fault("processing a packet from port %d", port)
    if sw._txq:  # out now, before the frames after it (which native code sends at once)
        sw._send()


def rx(sw: Any, prog: Any, port: int, sock: Any) -> None:
    """Receive and run what waits on ``port``'s socket in native batches (recvmmsg; the
    frames the native code finishes leave by sendmmsg from there), count what each packet
    did, and finish in Python the packets it hands back, in their order. (The native
    loop, nloop.py, does the same for every port at once; this serves a switch whose
    loop runs in Python.)"""
    nat = prog.native
    cnt = counters(sw, prog)
    total = 0
    while True:
        now = clock(sw, nat)
        fast = tmglue.fast_ports(sw, _fast_ports(sw))  # 2: a port shaped in C
        n = nat.lib.np_rx(nat.ctx, sock.fileno(), port, now, sw.nb_queues, fast, _tx_fds(sw).fd, cnt, 64,
                          nat.slow, ctypes.byref(nat.slowlen), ctypes.byref(nat.slowinfo))
        if n <= 0:
            fold(sw)
            return
        total += n
        slow = nat.slowlen.value
        fold(sw)
        finish_slow(sw, prog, port)
        # About 64 frames a call, as the Python path takes (the traffic manager drains
        # between calls), but never frames left in the batch: epoll would not bring us back.
        if not nat.lib.np_rx_pending(nat.ctx) and (total >= 64 or (not slow and n < 64)):
            return


def tm_service(sw: Any, timeout: float | None) -> float | None:
    """``Switch.service``'s last step: drain the shaped queues in C (tmglue.service)."""
    return tmglue.service(sw, timeout, sys.modules[__name__])


def tm_push(sw: Any, prog: Any, port: int, F: list[int], payload: bytes, length: int, trunc: int) -> bool:
    """``Switch._enqueue`` for a port shaped in C (tmglue.push): True when it took the packet."""
    return tmglue.push(sw, prog, port, F, payload, length, trunc, sys.modules[__name__])
