"""The receiving side (the PS) of differentiated transmission.

* blocks received over the reliable protocol (TCP) go into the **reliable channel
  buffer**, those over the unreliable protocol (UDP) into the **unreliable channel
  buffer** (two ``queue.Queue``, filled by one socket-reader thread per connection and
  one for the UDP socket);
* the **unreliable receive engine** (a thread) takes datagrams from its buffer,
  decapsulates their block messages and stores the values in the data buffer;
* the **reliable receive engine** (a thread) does the same for the reliable
  buffer and tracks whether every important block of the iteration has arrived;
* once they have (and after an optional grace period for unreliable blocks),
  :meth:`DataBuffer.take` hands each worker's blocks to the caller, which rebuilds the
  tensors with :meth:`BlockLayout.reconstruct` (missing blocks zero-filled).

Membership (docs/trust.md): given the job's members (worker rank -> source IP address),
the receiver accepts a TCP connection only from a member's address whose HELLO names
that member's rank, and a datagram only from a member's address; a block message is
kept only when its worker field is a rank of its sender (the connection's rank, or the
ranks of the datagram's source address). Everything else is refused and counted
(``ReceiveStats.refused_*``), so a host outside the job cannot add to the sum.

Asynchronous receive, delayed update: an unreliable block that arrives after its
iteration was reconstructed is not thrown away; its values are added into the next
iteration's aggregate (at most ``staleness`` iterations late, older ones are counted as
stale and dropped).
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import queue
import socket
import struct
import threading
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

import numpy as np

from hosts.differentiated.channel import recv_msg
from wire.differentiated import (
    DIFF_BLOCK_HEADER,
    DIFF_BLOCK_HEADER_LEN,
    DIFF_LEVEL_IMPORTANT,
    DiffDecodeError,
    Kind,
    decode_diff_block,
    parse_manifest,
)

from .blocks import BlockLayout

log = logging.getLogger("gradnet.differentiated.receiver")
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux's value
_CMSG_SPACE = socket.CMSG_SPACE(16)  # one struct timespec
LATE_BINS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)


@dataclass
class ReceiveStats:
    """What the receiver saw, per unreliable level (index 0 = important/TCP)."""

    datagrams: collections.Counter = field(default_factory=collections.Counter)  # level -> datagrams
    blocks: collections.Counter = field(default_factory=collections.Counter)  # level -> blocks
    udp_bytes: int = 0
    tcp_bytes: int = 0
    late_blocks: int = 0  # arrived after their iteration: applied in a later one
    stale_blocks: int = 0  # too late even for that: dropped
    bad_messages: int = 0
    duplicates: int = 0
    refused_connections: int = 0  # TCP from a non-member's address, or a HELLO of another rank
    refused_datagrams: int = 0  # UDP from a non-member's address
    refused_blocks: int = 0  # a block whose worker field is not a rank of its sender
    #: late and stale blocks by how long after their iteration closed they came (upper
    #: bounds of the bins in seconds, ``LATE_BINS``; the last bin is everything later)
    late_after: list[int] = field(default_factory=lambda: [0] * (len(LATE_BINS) + 1))

    #: of those, the ones whose datagram had reached the PS's NIC (kernel timestamp)
    #: before the iteration closed: late in the PS's processing, not in the network
    late_in_host: int = 0

    def note_late(self, seconds: float, at_nic: float | None = None) -> None:
        """Count one block stored ``seconds`` after its iteration closed, its datagram at
        the NIC ``at_nic`` seconds after it (negative: before)."""
        self.late_after[int(np.searchsorted(LATE_BINS, seconds))] += 1
        if at_nic is not None and at_nic < 0:
            self.late_in_host += 1

    def refused(self) -> dict[str, int]:
        """The refusal counters by name (the PS's summary)."""
        return {"connections": self.refused_connections, "datagrams": self.refused_datagrams,
                "blocks": self.refused_blocks}


class DataBuffer:
    """The data buffer both engines store into, per iteration and worker."""

    def __init__(self, layout: BlockLayout, world: int, staleness: int = 1) -> None:
        self.layout = layout
        self.world = world
        self.staleness = staleness
        self.cond = threading.Condition()
        self.iteration = 0
        self.blocks: dict[int, dict[int, dict[int, np.ndarray]]] = collections.defaultdict(
            lambda: collections.defaultdict(dict))
        self.manifests: dict[int, dict[int, tuple[int, list[int], bytes]]] = collections.defaultdict(dict)
        self.important_got: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
        self.carry: list[tuple[int, np.ndarray]] = []  # (block_index, values) of late blocks
        self.stats = ReceiveStats()
        self.byes: dict[int, dict] = {}
        self.first_block_at: dict[int, float] = {}
        self.closed_at: dict[int, float] = {}  # iteration -> when take() closed it

    # -- engines ------------------------------------------------------------------------
    def manifest(self, worker: int, body: bytes) -> None:
        """A worker announced iteration ``it``: ``important`` blocks on the reliable channel."""
        it, important, datagrams, levels = parse_manifest(body)
        with self.cond:
            self.manifests[it][worker] = (important, datagrams, levels)
            self.cond.notify_all()

    def store(self, data: bytes | memoryview, reliable: bool,
              ranks: Collection[int] | None = None, arrival: float | None = None) -> None:
        """Decapsulate the block messages of ``data`` and keep their values; with
        ``ranks`` (the ranks its sender may speak for), blocks of other workers are
        refused and counted. ``arrival``: when the datagram reached the NIC (monotonic)."""
        off = 0
        n = len(data)
        with self.cond:
            while off < n:
                try:
                    hdr, values, off = decode_diff_block(data, off)
                except DiffDecodeError as e:
                    self.stats.bad_messages += 1
                    log.warning("bad block message: %s", e)
                    return
                if hdr.block_index >= len(self.layout) or hdr.worker >= self.world:
                    self.stats.bad_messages += 1
                    continue
                if ranks is not None and hdr.worker not in ranks:
                    self.stats.refused_blocks += 1
                    continue
                level = DIFF_LEVEL_IMPORTANT if reliable else max(1, hdr.level)
                self.stats.blocks[level] += 1
                it = hdr.iteration
                if it < self.iteration:
                    if it in self.closed_at:
                        closed = self.closed_at[it]
                        self.stats.note_late(time.monotonic() - closed,
                                             None if arrival is None else arrival - closed)
                    if it >= self.iteration - self.staleness:
                        self.stats.late_blocks += 1
                        self.carry.append((hdr.block_index, values))
                    else:
                        self.stats.stale_blocks += 1
                    continue
                slot = self.blocks[it][hdr.worker]
                if hdr.block_index in slot:
                    self.stats.duplicates += 1
                    continue
                self.first_block_at.setdefault(it, time.monotonic())
                slot[hdr.block_index] = values
                if reliable:
                    self.important_got[it][hdr.worker] += 1
            self.cond.notify_all()

    # -- consumer -----------------------------------------------------------------------
    def _important_complete(self, it: int) -> bool:
        m = self.manifests.get(it, {})
        if len(m) < self.world:
            return False
        got = self.important_got[it]
        return all(got[w] >= m[w][0] for w in m)

    def _all_complete(self, it: int) -> bool:
        b = self.blocks.get(it, {})
        return len(b) == self.world and all(len(v) == len(self.layout) for v in b.values())

    def wait_ready(self, it: int, grace: float, timeout: float) -> tuple[bool, float]:
        """Block until every important block of iteration ``it`` is in, then up to
        ``grace`` seconds more for unreliable blocks (less if all arrive). Returns
        (important complete, seconds waited in the grace period)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while not self._important_complete(it):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False, 0.0
                self.cond.wait(min(left, 0.5))
            t0 = time.monotonic()
            end = t0 + grace
            while not self._all_complete(it):
                left = end - time.monotonic()
                if left <= 0:
                    break
                self.cond.wait(left)
            return True, time.monotonic() - t0

    def take(self, it: int) -> tuple[dict[int, dict[int, np.ndarray]], list[tuple[int, np.ndarray]],
                                     dict[int, bytes]]:
        """Close iteration ``it``: its blocks per worker, the late blocks to fold in, and
        each worker's block levels (its manifest); later arrivals of ``it`` become late
        blocks."""
        with self.cond:
            blocks = {w: dict(v) for w, v in self.blocks.pop(it, {}).items()}
            levels = {w: m[2] for w, m in self.manifests.get(it, {}).items()}
            carry, self.carry = self.carry, []
            self.iteration = it + 1
            self.closed_at[it] = time.monotonic()
            for old in [k for k in self.manifests if k <= it - self.staleness]:
                del self.manifests[old]
                self.important_got.pop(old, None)
            return blocks, carry, levels

    def wait_byes(self, timeout: float) -> None:
        """Wait until every worker said goodbye (or ``timeout``)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while len(self.byes) < self.world:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self.cond.wait(left)


class Receiver:
    """The PS's two channels, their buffers and their receive engines (threads).

    ``tcp`` is a listening TCP socket, ``udp`` a bound UDP socket; :attr:`data` is the
    data buffer. :meth:`send_all` sends a framed message to every connected worker.
    ``members``: the source IP address of each rank (``members[r]``); None accepts any
    source (a loopback run), otherwise non-members are refused and counted.
    """

    def __init__(self, layout: BlockLayout, world: int, tcp: socket.socket, udp: socket.socket,
                 staleness: int = 1, members: Sequence[str] | None = None) -> None:
        if members is not None and len(members) != world:
            raise ValueError(f"{len(members)} member addresses for a world of {world}")
        self.data = DataBuffer(layout, world, staleness)
        self.world = world
        self.members = list(members) if members is not None else None
        # source address -> the ranks it may send blocks for
        self.ranks_of: dict[str, frozenset[int]] = {}
        for r, ip in enumerate(self.members or []):
            self.ranks_of[ip] = self.ranks_of.get(ip, frozenset()) | {r}
        self.tcp = tcp
        self.udp = udp
        # the kernel stamps each datagram's arrival: late blocks are told apart by it
        udp.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.reliable_buffer: queue.Queue = queue.Queue()  # (worker, kind, body)
        self.unreliable_buffer: queue.Queue = queue.Queue()  # (sender's ranks or None, datagram)
        self.conns: dict[int, socket.socket] = {}
        self._conn_ready = threading.Condition()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> Receiver:
        """Start the acceptor, the UDP reader and both receive engines."""
        for name, fn in (("accept", self._accept), ("udp-reader", self._udp_reader),
                         ("reliable-engine", self._reliable_engine),
                         ("unreliable-engine", self._unreliable_engine)):
            t = threading.Thread(target=fn, name=name, daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def wait_workers(self, timeout: float) -> None:
        """Block until every worker has connected and said hello."""
        deadline = time.monotonic() + timeout
        with self._conn_ready:
            while len(self.conns) < self.world:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{len(self.conns)} of {self.world} workers connected")
                self._conn_ready.wait(left)

    def send_all(self, message: bytes) -> None:
        """Send one framed message to every worker (their TCP connections)."""
        for s in list(self.conns.values()):
            with contextlib.suppress(OSError):
                s.sendall(message)

    def send_to(self, worker: int, message: bytes) -> None:
        """Send one framed message to one worker (nothing if it is not connected)."""
        s = self.conns.get(worker)
        if s is not None:
            with contextlib.suppress(OSError):
                s.sendall(message)

    def stop(self) -> None:
        """Stop the threads and close the sockets."""
        self._stop.set()
        self.reliable_buffer.put(None)
        self.unreliable_buffer.put(None)
        for s in (*self.conns.values(), self.tcp, self.udp):
            with contextlib.suppress(OSError):
                s.close()

    # -- socket readers (fill the channel buffers) --------------------------------------
    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, peer = self.tcp.accept()
            except OSError:
                return
            if self.members is not None and peer[0] not in self.ranks_of:
                self._refuse(conn, f"connection from non-member {peer[0]}")
                continue
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._tcp_reader, args=(conn, peer[0]), daemon=True).start()

    def _refuse(self, conn: socket.socket, why: str) -> None:
        with self.data.cond:
            self.data.stats.refused_connections += 1
        log.warning("refused: %s", why)
        with contextlib.suppress(OSError):
            conn.close()

    def _tcp_reader(self, conn: socket.socket, peer: str) -> None:
        f = conn.makefile("rb", buffering=1 << 16)
        try:
            first = recv_msg(f)
        except (OSError, ValueError):
            first = None
        if first is None or first[0] != Kind.HELLO:
            conn.close()
            return
        worker = int.from_bytes(first[1][:2], "big")
        if self.members is not None and worker not in self.ranks_of.get(peer, ()):
            self._refuse(conn, f"{peer} said hello as rank {worker}")
            return
        with self._conn_ready:
            self.conns[worker] = conn
            self._conn_ready.notify_all()
        while True:
            try:
                msg = recv_msg(f)
            except OSError:
                msg = None
            if msg is None:
                return
            with self.data.cond:
                self.data.stats.tcp_bytes += 5 + len(msg[1])
            self.reliable_buffer.put((worker, *msg))

    def _recv_datagram(self) -> tuple | None:
        """One datagram from the UDP socket as the unreliable buffer's item ``(ranks,
        datagram, arrival)`` (arrival: the kernel's receive time on the monotonic clock),
        or None for a refused one; OSError passes up."""
        dgram, anc, _flags, src = self.udp.recvmsg(65535, _CMSG_SPACE)
        arrival = None
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= 16:
                sec, nsec = struct.unpack("qq", data[:16])
                arrival = time.monotonic() - (time.time() - (sec + nsec * 1e-9))
        ranks = None
        if self.members is not None:
            ranks = self.ranks_of.get(src[0])
            if ranks is None:
                with self.data.cond:
                    self.data.stats.refused_datagrams += 1
                return None
        return ranks, dgram, arrival

    def _udp_reader(self) -> None:
        while not self._stop.is_set():
            try:
                item = self._recv_datagram()
            except OSError:
                return
            if item is not None:
                self.unreliable_buffer.put(item)

    # -- receive engines ------------------------------------------------------------------
    def _reliable_engine(self) -> None:
        while True:
            item = self.reliable_buffer.get()
            if item is None:
                return
            worker, kind, body = item
            if kind == Kind.MANIFEST:
                self.data.manifest(worker, body)
            elif kind == Kind.BLOCK:
                # a connection speaks for its own rank only
                self.data.store(body, reliable=True,
                                ranks=None if self.members is None else (worker,))
            elif kind == Kind.BYE:
                with self.data.cond:
                    self.data.byes[worker] = json.loads(body or b"{}")
                    self.data.cond.notify_all()
            else:
                self.data.stats.bad_messages += 1

    def _unreliable_engine(self) -> None:
        while True:
            item = self.unreliable_buffer.get()
            if item is None:
                return
            self._store_datagram(item)

    def _store_datagram(self, item: tuple) -> None:
        ranks, dgram, arrival = item
        # every block of a datagram has the same level: count the datagram under it
        level = DIFF_BLOCK_HEADER.unpack_from(dgram)[8] if len(dgram) >= DIFF_BLOCK_HEADER_LEN else 0
        with self.data.cond:
            self.data.stats.datagrams[level] += 1
            self.data.stats.udp_bytes += len(dgram)
        self.data.store(dgram, reliable=False, ranks=ranks, arrival=arrival)
