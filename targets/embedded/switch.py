"""The embedded switch: packet I/O, simple_switch's packet flow and traffic manager.

One data-plane thread owns everything packets touch: it receives frames from
AF_PACKET sockets in batches, runs parser + ingress, hands packets to the traffic
manager (per-port strict-priority queues with optional rate and depth), runs egress +
deparser when a packet is dequeued, and transmits. Control-plane threads (P4Runtime)
only swap the program, edit table/PRE state, and inject packet-outs through a
thread-safe queue, so the data plane needs no locks on its hot path.

A program swap is atomic for packets: a packet takes the program once, when it arrives,
and keeps it to the end (its header-vector template, its traffic-manager slots, its
egress, even from a queue); the next packet takes the new one. No exception of the
packet path ends the data plane: the packet is dropped, counted in ``stats.errors`` and
logged (rate-limited), and the loop (``loop.run_switches``) beats a heartbeat that
``gradctl net ls`` and the watcher read (``liveness.py``, docs/faults.md).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from targets.embedded.codegen.layout import (
    CLONE,
    CLONE_FL,
    EXIT,
    FLAG,
    ILEN,
    INPORT,
    LEARN,
    PKTLEN,
    RECIRC,
    RESUBMIT,
    TRUNCATE,
)
from targets.embedded.compiler import Program
from targets.embedded.liveness import FaultLog, Heartbeat
from targets.embedded.loop import run_switches
from targets.embedded.native import glue as native_glue
from targets.embedded.state import Replica
from targets.embedded.tm_metadata import bind_metadata
from targets.embedded.traffic import PORT_CATCH_UP_S, PortQueues, TrafficConfigMixin

log = logging.getLogger("gradnet.switch")

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23
PACKET_AUXDATA = 8
TP_STATUS_VLAN_VALID, TP_STATUS_VLAN_TPID_VALID = 0x10, 0x40
AUXDATA_SPACE = socket.CMSG_SPACE(20)  # struct tpacket_auxdata
DROP_PORT = 511

# standard_metadata.instance_type values of simple_switch
NORMAL, INGRESS_CLONE, EGRESS_CLONE, RECIRCULATED, REPLICATION, RESUBMITTED = 0, 1, 2, 4, 5, 6
MAX_LOOPS = 32  # bound on resubmit/recirculate chains of one packet


@dataclass
class PortStats:
    """Per-port packet counters of the switch (not of the P4 program)."""

    rx: int = 0
    tx: int = 0
    queue_drops: int = 0


@dataclass
class SwitchStats:
    """Why packets left the switch without being sent."""

    pipeline_drops: int = 0
    no_such_port: int = 0
    priority_out_of_range: int = 0
    loop_limit: int = 0
    errors: int = 0
    ports: dict[int, PortStats] = field(default_factory=lambda: collections.defaultdict(PortStats))


class Switch(TrafficConfigMixin):
    """A software switch running one compiled P4 program with simple_switch semantics."""

    def __init__(
        self,
        device_id: int = 0,
        cpu_port: int | None = None,
        priority_queues: int = 1,
        queue_depth: int = 64,
        seed: int | None = None,
        backend: str | None = None,
    ) -> None:
        self.device_id = device_id
        self.backend = native_glue.check_backend(backend or native_glue.default_backend())
        self.cpu_port = cpu_port
        self.nb_queues = max(1, priority_queues)
        self.queue_depth = queue_depth
        self.seed = seed
        self.pre = native_glue.replication_engine(self)  # its groups followed into native memory
        self.program: Program | None = None
        self.packet_in_handlers: list[Callable[[bytes], None]] = []
        self.digest_handlers: list[Callable[[str, list[tuple[int, ...]]], None]] = []
        self.tx_handlers: list[Callable[[int, bytes], None]] = []
        self.stats = SwitchStats()
        self._ports: dict[int, socket.socket] = {}
        self._ifaces: dict[int, str] = {}
        self._fd_port: dict[int, int] = {}
        self._ml: dict[int, Any] = {}  # ports whose link runs in memory (native/memlink.py)
        self._tm: dict[int, PortQueues] = {}
        self._rate_cfg: dict[tuple[int | None, int | None], float] = {}
        self._depth_cfg: dict[tuple[int | None, int | None], int] = {}
        self._port_rate_cfg: dict[int | None, float | None] = {}
        self._port_frame_cfg: dict[int | None, int | None] = {}
        self._inject: collections.deque[tuple[int, bytes]] = collections.deque()
        self._txq: list[tuple[int, bytes]] = []  # frames ready to transmit
        self._draining = False
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = time.monotonic()
        self._debug = log.isEnabledFor(logging.DEBUG)
        self._shaped = False  # some queue or port has a rate: the loop must run the drain timer
        self._redrain = False  # a packet was queued while a drain ran: drain again
        self.heartbeat: Heartbeat | None = None  # the data-plane loop's, once it runs
        self._fault_log = FaultLog(log)
        # held by control-plane writes (P4Runtime) and by the data plane while it moves a
        # program's state into native memory (``_adopt_native``)
        self.ctrl_lock = threading.RLock()

    # ------------------------------------------------------------------ program
    def load_program(self, device_config: bytes | str) -> Program:
        """Compile BMv2 JSON (CompileError: a bad program, or one --backend native lacks)."""
        program = Program(device_config, seed=self.seed)
        bind_metadata(program)
        native_glue.attach(program, self.backend, self.seed, on_ready=self.wake)
        return program

    def install_program(self, program: Program) -> None:
        """Swap in a program (atomic for the data plane) and clear the PRE.

        Everything a packet needs of its program is bound to the program before it is
        published by one assignment: a packet that took the old one finishes with it."""
        self.pre.groups.clear()
        self.pre.clone_sessions.clear()
        bind_metadata(program)
        self.program = program
        self.wake()  # a loop in C serving the old program's ports returns and takes the new one
        log.info("device %d: program installed (%d tables)", self.device_id, len(program.tables))

    # ------------------------------------------------------------------ ports
    def add_port(self, port: int, iface: str) -> None:
        """Attach a Linux interface as switch port ``port`` (AF_PACKET, promiscuous)."""
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        try:
            s.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        except OSError:
            log.warning("PACKET_IGNORE_OUTGOING unsupported; own transmissions may loop back")
        # The kernel strips a VLAN tag before AF_PACKET sees the frame and reports it in
        # the auxiliary data; put it back, as BMv2's libpcap does.
        s.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
        for opt in (getattr(socket, "SO_RCVBUFFORCE", 33), socket.SO_RCVBUF):
            try:
                s.setsockopt(socket.SOL_SOCKET, opt, 8 << 20)
                break
            except OSError:
                continue
        with contextlib.suppress(OSError):
            s.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_SNDBUFFORCE", 32), 8 << 20)
        s.bind((iface, ETH_P_ALL))
        s.setblocking(False)
        self._ports[port] = s
        self._ifaces[port] = iface
        self._fd_port[s.fileno()] = port

    # ------------------------------------------------------------------ entry points
    def inject_packet_out(self, frame: bytes) -> None:
        """A packet-out from the controller: enters ingress on the CPU port."""
        if self.cpu_port is None:
            raise ValueError("switch has no CPU port")
        self._inject.append((self.cpu_port, frame))
        self.wake()

    def process(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        """Run one frame through the whole switch synchronously; return what leaves.

        Used by the I/O loop (which then transmits) and directly by tests and benchmarks.
        Rate-limited queues are not drained here.
        """
        if self.program is not None and self.program.native_built is not None:
            self._adopt_native()
        self._receive(port, frame)
        self._drain(time.monotonic())
        out, self._txq = self._txq, []
        return out

    def _now_us(self) -> int:
        return int((time.monotonic() - self._t0) * 1e6)

    # ------------------------------------------------------------------ ingress
    def _receive(self, port: int, frame: bytes) -> None:
        # The packet's one program, for all of it: the template and slots come from it.
        prog = self.program
        self.stats.ports[port].rx += 1
        if prog is None:
            return
        try:  # the whole packet path: a bug must not kill the data plane
            F = prog.template[:]
            F[prog.sm_ingress_port] = F[INPORT] = port
            F[prog.sm_packet_length] = len(frame)
            if prog.native is not None and "_receive" not in self.__dict__:  # a trace shadows it: Python
                native_glue.receive(self, prog, port, frame)
                return
            if prog.tm_ig_ts is not None:
                F[prog.tm_ig_ts] = self._now_us()
            self._ingress(prog, F, frame, len(frame), 0)
        except Exception:
            self.fault("processing a packet from port %d", port)

    def fault(self, what: str, *args: object) -> None:
        """Count a packet-path exception (``stats.errors``) and log it, rate-limited;
        call from an ``except`` block. The packet is dropped; the data plane goes on."""
        self.stats.errors += 1
        self._fault_log(f"device %d: error {what}", self.device_id, *args)

    def log_fault_now(self, what: str) -> None:
        """Log the exception being handled at once (the data plane itself failed)."""
        log.critical("device %d: %s", self.device_id, what, exc_info=True)

    def dataplane_status(self) -> dict[str, object]:
        """The data plane's liveness (``Heartbeat.status``; ``not started`` before its
        loop runs) with ``packet_errors``: packets dropped by an exception."""
        hb = self.heartbeat
        st: dict[str, object] = ({"state": "not started", "beats": 0, "age_s": None, "error": ""}
                                 if hb is None else hb.status())
        st["packet_errors"] = self.stats.errors
        return st

    def _ingress(self, prog: Program, F: list[int], frame: bytes, length: int, loops: int) -> None:
        F[PKTLEN] = F[ILEN] = length
        payload = frame[prog.parse(F, frame):]
        if prog.verify_checksums(F) and prog.sm_checksum_error is not None:
            F[prog.sm_checksum_error] = 1
        prog.ingress(F)
        F[EXIT] = 0
        self._ingress_tail(prog, F, frame, payload, length, loops)

    def _ingress_tail(self, prog: Program, F: list[int], frame: bytes, payload: bytes, length: int, loops: int) -> None:
        """What follows the ingress pipeline: clone, digest, resubmit, multicast, enqueue."""
        if self._debug:
            log.debug("ingress port %d: egress_spec=%d", F[prog.sm_ingress_port], F[prog.sm_egress_spec])
        if (F[CLONE] or F[LEARN] or F[RESUBMIT]) and self._ingress_extras(prog, F, frame, length, loops):
            return
        mg = prog.sm_mcast_grp
        if mg is not None and F[mg]:
            F[prog.sm_instance_type] = REPLICATION
            replicas = self.pre.groups.get(F[mg], [])
            self._replicate(prog, F, payload, length, replicas, 0)
            return
        port = F[prog.sm_egress_spec]
        if port == DROP_PORT:
            self.stats.pipeline_drops += 1
            return
        F[prog.sm_instance_type] = NORMAL
        self._enqueue(prog, port, F, payload, length, 0, loops)

    def _ingress_extras(self, prog: Program, F: list[int], frame: bytes, length: int, loops: int) -> bool:
        """Ingress clone, digest and resubmit, in simple_switch's order (apart from the
        common path: few packets ask for them); True when the packet was resubmitted."""
        sm = prog.sm
        if F[CLONE]:
            sid = F[CLONE] & ~FLAG
            fl = F[CLONE_FL]
            F[CLONE] = F[CLONE_FL] = 0
            session = self.pre.clone_sessions.get(sid)
            if session is not None:
                # simple_switch re-parses the frame as received (with the original
                # ingress_port, so that the parse is the same), then resets all metadata
                # -- parser_error and what the parser wrote included -- and copies the
                # field list; its length register is the ingress length.
                C = prog.template[:]
                C[sm["ingress_port"]] = C[INPORT] = F[INPORT]
                cpay = frame[prog.parse(C, frame):]
                prog.reset_metadata(C)
                prog.copy_field_list(C, F, fl)
                C[sm["instance_type"]] = INGRESS_CLONE
                C[PKTLEN] = C[ILEN] = length
                self._replicate(prog, C, cpay, length, session.replicas, session.packet_length_bytes)
        if F[LEARN]:
            self._learn(prog, F)
        if F[RESUBMIT]:
            self._reenter(prog, F, F[RESUBMIT] & ~FLAG, RESUBMITTED, frame, length, loops)
            return True
        return False

    def _reenter(self, prog: Program, F: list[int], field_list: int, instance_type: int,
                 frame: bytes, length: int, loops: int) -> None:
        """Resubmit or recirculate: ``frame`` enters ingress again with fresh metadata,
        except the field list's fields (bounded, so a looping program cannot hang us)."""
        if loops >= MAX_LOOPS:
            self.stats.loop_limit += 1
            return
        sm = prog.sm
        R = prog.template[:]
        R[INPORT] = F[INPORT]
        prog.copy_field_list(R, F, field_list)
        R[sm["instance_type"]] = instance_type
        R[sm["packet_length"]] = length
        self._ingress(prog, R, frame, length, loops + 1)

    def _replicate(self, prog: Program, F: list[int], payload: bytes, length: int,
                   replicas: list[Replica], trunc: int) -> None:
        rid = prog.sm.get("egress_rid")
        for r in replicas:
            C = F[:]
            if rid is not None:
                C[rid] = r.rid
            self._enqueue(prog, r.port, C, payload, length, trunc)

    def _learn(self, prog: Program, F: list[int]) -> None:
        ll = prog.learn_by_id.get(F[LEARN])
        F[LEARN] = 0
        if ll is None:
            return
        values = tuple(F[s] for s in ll.slots)
        for h in self.digest_handlers:
            h(ll.name, [values])

    # ------------------------------------------------------------------ traffic manager
    def _enqueue(self, prog: Program, port: int, F: list[int], payload: bytes, length: int, trunc: int,
                 loops: int = 0) -> None:  # loops: resubmits + recirculations so far (bounded)
        if not loops and prog.native is not None and native_glue.tm_push(self, prog, port, F, payload, length, trunc):
            return  # shaped in C (native/tm.c); a re-entered packet keeps its pass count in traffic.py's queue
        q = self._tm.get(port) or self._queue(port)
        if q.port_rate is not None and not any(q.queues):
            # an idle port earns no catch-up credit (see PORT_CATCH_UP_S): one frame at most
            now = time.monotonic()
            q.port_tokens = min(1.0, q.port_tokens + (now - q.port_last) * q.port_rate)
            q.port_last = now
        # simple_switch 1.15 drops a priority beyond the last queue, one queue included
        prio = F[prog.sm_priority] if prog.sm_priority is not None else 0
        if prio >= self.nb_queues:
            self.stats.priority_out_of_range += 1
            return
        if prog.tm_enq_depth is not None:
            F[prog.tm_enq_depth] = q.size()
        if prog.tm_enq_ts is not None:
            F[prog.tm_enq_ts] = self._now_us() & 0xFFFFFFFF
        slot = self.nb_queues - 1 - prio
        dq = q.queues[slot]
        if len(dq) >= q.depth[slot]:
            self.stats.ports[port].queue_drops += 1
            q.dropped[slot] += 1
            return
        q.enqueued[slot] += 1
        if self._draining:
            dq.append((prog, F, payload, length, trunc, loops))
            self._redrain = True
        elif q.rate[slot] is None:
            # Nothing shapes this queue: dequeue at once, so that a burst arriving
            # within one receive batch cannot overflow a queue a real switch would
            # have drained at line rate meanwhile.
            self._draining = True
            try:
                if q.port_rate is None and not any(q.queues):
                    # What _drain_port would do with the packet as the only one queued:
                    # straight to egress, without the round trip through the deque.
                    try:
                        self._egress(prog, port, prio, q, F, payload, length, trunc, self._txq, loops)
                    except Exception:
                        self.fault("in egress to port %d", port)
                else:
                    dq.append((prog, F, payload, length, trunc, loops))
                    self._drain_port(port, q, time.monotonic(), None)
            finally:
                self._draining = False
        else:
            dq.append((prog, F, payload, length, trunc, loops))

    def _drain(self, now: float, only_port: int | None = None) -> float | None:
        """Dequeue everything the rates allow; return seconds until the next dequeue."""
        wait: float | None = None
        self._draining = True
        try:
            items = [(only_port, self._tm[only_port])] if only_port is not None else list(self._tm.items())
            for port, q in items:
                wait = self._drain_port(port, q, now, wait)
        finally:
            self._draining = False
        return wait

    def _drain_port(self, port: int, q: PortQueues, now: float, wait: float | None) -> float | None:
        """Dequeue one port's queues, highest priority first, as far as rates allow.
        A queued packet leaves through the egress of the program it entered with."""
        prate = q.port_rate
        for i, dq in enumerate(q.queues):
            rate = q.rate[i]
            while dq:
                if prate is not None:
                    # a byte rate: the head packet costs its length in frames (at most one)
                    cost = 1.0 if q.port_frame is None else min(1.0, dq[0][3] / q.port_frame)
                    # while packets wait, the port earns up to PORT_CATCH_UP_S of credit: a
                    # drain that runs late (a busy CPU) sends what the line would have sent
                    q.port_tokens = min(max(1.0, prate * PORT_CATCH_UP_S),
                                        q.port_tokens + (now - q.port_last) * prate)
                    q.port_last = now
                    if q.port_tokens < cost:
                        # The port is busy: nothing may go, whatever its priority.
                        dt = (cost - q.port_tokens) / prate if prate > 0 else 1.0
                        return dt if wait is None else min(wait, dt)
                if rate is not None:
                    q.tokens[i] = min(1.0, q.tokens[i] + (now - q.last[i]) * rate)
                    q.last[i] = now
                    if q.tokens[i] < 1.0:
                        # This queue waits for tokens; lower ones may still go.
                        dt = (1.0 - q.tokens[i]) / rate if rate > 0 else 1.0
                        wait = dt if wait is None else min(wait, dt)
                        break
                    q.tokens[i] -= 1.0
                if prate is not None:
                    q.port_tokens -= cost
                prog, F, payload, length, trunc, loops = dq.popleft()
                try:
                    self._egress(prog, port, self.nb_queues - 1 - i, q, F, payload, length, trunc, self._txq, loops)
                except Exception:
                    self.fault("in egress to port %d", port)
        return wait

    # ------------------------------------------------------------------ egress
    def _egress(self, prog: Program, port: int, qid: int, q: PortQueues, F: list[int], payload: bytes,
                length: int, trunc: int, out: list[tuple[int, bytes]], loops: int = 0) -> None:
        if prog.tm_eg_ts is not None:
            F[prog.tm_eg_ts] = self._now_us()
        if prog.tm_deq_depth is not None:
            F[prog.tm_deq_depth] = q.size()
        if prog.tm_deq_delta is not None and prog.tm_enq_ts is not None:
            F[prog.tm_deq_delta] = (self._now_us() - F[prog.tm_enq_ts]) & 0xFFFFFFFF
        if prog.sm_qid is not None:
            F[prog.sm_qid] = qid
        F[prog.sm_egress_port] = port
        F[prog.sm_egress_spec] = 0
        F[prog.sm_packet_length] = F[PKTLEN]
        prog.egress(F)
        F[EXIT] = 0
        self._egress_tail(prog, port, F, payload, length, trunc, out, loops)

    def _egress_tail(self, prog: Program, port: int, F: list[int], payload: bytes, length: int, trunc: int,
                     out: list[tuple[int, bytes]], loops: int) -> None:
        """What follows the egress pipeline: clone, drop, checksums, deparse, recirculate."""
        if F[CLONE]:
            sm = prog.sm
            sid = F[CLONE] & ~FLAG
            fl = F[CLONE_FL]
            F[CLONE] = F[CLONE_FL] = 0
            session = self.pre.clone_sessions.get(sid)
            if session is not None:
                C = F[:]
                prog.reset_metadata(C)
                prog.copy_field_list(C, F, fl)
                C[sm["instance_type"]] = EGRESS_CLONE
                self._replicate(prog, C, payload, length, session.replicas, session.packet_length_bytes)
        if F[prog.sm_egress_spec] == DROP_PORT:
            self.stats.pipeline_drops += 1
            return
        prog.update_checksums(F, payload)
        frame = prog.deparse(F, payload)
        if F[TRUNCATE]:
            frame = frame[:F[TRUNCATE]]
        if trunc:
            frame = frame[:trunc]
        if F[RECIRC]:
            self._reenter(prog, F, F[RECIRC] & ~FLAG, RECIRCULATED, frame, len(frame), loops)
            return
        self._transmit(port, frame, out)

    def _transmit(self, port: int, frame: bytes, out: list[tuple[int, bytes]]) -> None:
        if port == self.cpu_port:
            for h in self.packet_in_handlers:
                h(frame)
            self.stats.ports[port].tx += 1
            return
        out.append((port, frame))

    def _send(self) -> None:
        out, self._txq = self._txq, []
        for port, frame in out:
            s = self._ml.get(port) or self._ports.get(port)
            for h in self.tx_handlers:
                h(port, frame)
            if s is None:
                if not self.tx_handlers:
                    self.stats.no_such_port += 1
                continue
            try:
                s.send(frame)
                self.stats.ports[port].tx += 1
            except (BlockingIOError, OSError):
                self.stats.ports[port].queue_drops += 1

    # ------------------------------------------------------------------ run loop
    def start(self) -> None:
        """Run the data plane in a background thread."""
        self._thread = threading.Thread(target=self.run, name=f"dataplane-{self.device_id}", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """Interrupt the data plane's wait (a packet-out, new rates, a stop)."""
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._wake_w, b"x")

    def stop(self) -> None:
        """Stop the data plane and close the ports."""
        self._stop.set()
        self.wake()
        if self._thread is not None:
            self._thread.join(timeout=5)
        for s in self._ports.values():
            s.close()
        self._ports.clear()

    def run(self) -> None:
        """The data-plane loop: receive in batches, process, drain queues, transmit."""
        run_switches([self], self._stop)

    # The loop's three steps, shared with ``run_switches`` (several switches, one thread).
    def event_fds(self) -> list[int]:
        """File descriptors whose readability the data plane waits for."""
        return [self._wake_r, *self._fd_port]

    def _adopt_native(self) -> None:
        """Swap in the program's native backend, compiled in the background, between two
        packets (data-plane thread). A control-plane write in progress holds ctrl_lock:
        then try again shortly rather than stall the packets."""
        if not self.ctrl_lock.acquire(blocking=False):
            threading.Timer(0.01, self.wake).start()
            return
        try:
            native_glue.adopt(self.program, self.seed, self.pre)
        finally:
            self.ctrl_lock.release()

    def native_loop_ok(self) -> bool:
        """Whether the C loop may serve this switch's ports (``glue.native_rx_ok``)."""
        return native_glue.native_rx_ok(self)

    def on_readable(self, fd: int) -> None:
        """Receive what is waiting on ``fd`` (a port, or the wake-up pipe)."""
        if fd == self._wake_r:
            with contextlib.suppress(BlockingIOError):
                os.read(self._wake_r, 4096)
            if self.program is not None and self.program.native_built is not None:
                self._adopt_native()
            while self._inject:
                p, frame = self._inject.popleft()
                self._receive(p, frame)
            return
        port = self._fd_port[fd]
        if native_glue.native_rx_ok(self):  # batched, in C
            return native_glue.rx(self, self.program, port, self._ports[port])
        recvmsg = self._ports[port].recvmsg
        for _ in range(64):
            try:
                frame, anc, _, _ = recvmsg(65536, AUXDATA_SPACE)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                break
            if anc and anc[0][2][0] & TP_STATUS_VLAN_VALID:
                frame = restore_vlan_tag(frame, anc[0][2])
            self._receive(port, frame)

    def service(self) -> float | None:
        """Drain what the queues' rates allow and transmit; return seconds until the
        next dequeue is due (None: nothing waits for a timer)."""
        timeout = None
        if self._shaped or self._redrain:
            # Unshaped queues are emptied as packets arrive; a full pass is needed
            # only for rates, or for what arrived while a drain was running.
            self._redrain = False
            timeout = self._drain(time.monotonic())
            if self._redrain:
                timeout = 0.0
        if self._txq:
            self._send()
        return native_glue.tm_service(self, timeout)  # the shaped queues in C (tm.c)


def restore_vlan_tag(frame: bytes, aux: bytes) -> bytes:
    """``frame`` with the 802.1Q tag the kernel moved into ``aux`` (struct tpacket_auxdata)
    put back after the MAC addresses, as libpcap (and so BMv2) does."""
    status = int.from_bytes(aux[0:4], "little")
    tci = int.from_bytes(aux[16:18], "little")
    tpid = int.from_bytes(aux[18:20], "little") if status & TP_STATUS_VLAN_TPID_VALID else 0x8100
    return frame[:12] + tpid.to_bytes(2, "big") + tci.to_bytes(2, "big") + frame[12:]
