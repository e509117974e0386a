"""Framed TCP between servers: one connection per (level, peer), bound to that level's NIC.

The kernel's TCP does the reliability (docs/bcube.md, "Loss"): a lost segment is
retransmitted by the sender's TCP, so the agents only frame messages
(:data:`wire.bcube.BCUBE_HEADER` + big-endian int32 values) and match them to the
schedule. Each connection has a writer thread (so a stage's sends to its ``N - 1``
peers leave at once and share the NIC as the kernel sees fit) and a reader thread that
files every message in an :class:`Inbox` under ``(msg_type, thread, stage, sender)``
and the round it belongs to: 0 for the one-shot agents; a repeated all-reduce
(:mod:`hosts.bml.collective`) opens round ``r >= 1`` on each connection with a
``ROUND`` message (``offset = r``) before that round's data, so messages of consecutive
rounds never share a key even when a peer is a round ahead.
Sockets release the GIL in ``sendmsg``/``recv_into``, so k threads keep k NICs busy;
the payload work per message is one numpy add.

The agents of one run start together: each writes ``<ready_dir>/<server>`` once its
connections are up and waits for the ``go`` file, which holds the common start time
(wall clock: all namespaces share the machine's clock).
"""

from __future__ import annotations

import contextlib
import json
import queue
import select
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hosts.net import net_dev
from wire.bcube import (
    BCUBE_HEADER_LEN,
    BcubeHeader,
    BcubeMsg,
    decode_bcube_header,
    encode_bcube_header,
)

__all__ = [
    "Inbox",
    "Link",
    "NicSampler",
    "PeerConn",
    "TransportError",
    "connect_mesh",
    "mark_ready",
    "wait_for_go",
]

_BE_I32 = np.dtype(">i4")


class TransportError(RuntimeError):
    """A connection could not be set up, broke, or a message did not come in time."""


@dataclass(frozen=True)
class Link:
    """One connection to make: to ``peer`` on ``level``, from ``my_ip`` to ``peer_ip``."""

    level: int
    peer: int
    my_ip: str
    peer_ip: str


Key = tuple[int, int, int, int]  # msg_type, thread, stage, sender


class Inbox:
    """Messages from every connection, waited for by round and key."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._msgs: dict[tuple[int, int, int, int, int], tuple[int, np.ndarray]] = {}
        self._error: BaseException | None = None
        self._gone: dict[int, BaseException] = {}  # sender -> why nothing more comes
        self._open: dict[int, int] = {}  # sender -> connections from it not yet ended

    def put(self, hdr: BcubeHeader, values: np.ndarray, rnd: int = 0) -> None:
        """File one message of round ``rnd`` (a second one under the same round and key is
        a protocol error)."""
        key = (rnd, hdr.msg_type, hdr.thread, hdr.stage, hdr.sender)
        with self._cond:
            if key in self._msgs:
                self._error = TransportError(f"duplicate message {key[1:]} in round {rnd}")
            self._msgs[key] = (hdr.offset, values)
            self._cond.notify_all()

    def fail(self, exc: BaseException) -> None:
        """Wake every waiter with ``exc`` (a reader thread lost its connection)."""
        with self._cond:
            if self._error is None:
                self._error = exc
            self._cond.notify_all()

    def opened(self, sender: int) -> None:
        """One more connection from ``sender`` feeds this inbox."""
        with self._cond:
            self._open[sender] = self._open.get(sender, 0) + 1

    def sender_gone(self, sender: int, exc: BaseException, clean: bool = False) -> None:
        """No more messages will come from ``sender``: a wait for one raises ``exc``
        (the others go on: a peer that closed after its last round is no error).
        ``clean``: one connection from ``sender`` ended with a FIN; the sender is gone
        only once all its connections have (a k-rail peer has one per rail, and one
        rail's FIN may overtake another rail's last messages)."""
        with self._cond:
            if clean and sender in self._open:
                self._open[sender] -= 1
                if self._open[sender] > 0:
                    return
            self._gone.setdefault(sender, exc)
            self._cond.notify_all()

    def get(self, key: Key, deadline: float, rnd: int = 0) -> tuple[int, np.ndarray]:
        """``(offset, values)`` of message ``key`` of round ``rnd``, waiting until
        ``deadline`` (``time.monotonic()``); :class:`TransportError` past it or on a
        broken link."""
        rkey = (rnd, *key)
        with self._cond:
            while rkey not in self._msgs:
                if self._error is not None:
                    raise self._error
                if key[3] in self._gone:
                    raise self._gone[key[3]]
                left = deadline - time.monotonic()
                if left <= 0:
                    name = BcubeMsg(key[0]).name
                    when = f" (round {rnd})" if rnd else ""
                    raise TransportError(f"timed out waiting for {name} thread {key[1]} "
                                         f"stage {key[2]} from server {key[3]}{when}")
                self._cond.wait(min(left, 1.0))
            return self._msgs.pop(rkey)


@dataclass
class PeerConn:
    """An established connection to ``peer`` on ``level`` (see the module doc)."""

    sock: socket.socket
    me: int
    peer: int
    level: int
    inbox: Inbox
    tx_bytes: int = 0
    rx_bytes: int = 0
    #: the connection's end (FIN, reset, bad message) makes every later wait for this
    #: peer's messages fail at once (a repeated all-reduce: the peer is gone) instead of
    #: running into the deadline; without it, a FIN just ends the reader and an error
    #: fails the whole inbox (the one-shot agents)
    fail_on_eof: bool = False
    _rx_round: int = 0
    _out: queue.Queue = field(default_factory=queue.Queue)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> None:
        """Start the reader and writer threads."""
        self.inbox.opened(self.peer)
        for fn, name in ((self._reader, "rx"), (self._writer, "tx")):
            t = threading.Thread(target=fn, name=f"{name}-l{self.level}-p{self.peer}", daemon=True)
            t.start()
            self._threads.append(t)

    def send(self, msg_type: int, thread: int, stage: int, offset: int, values: np.ndarray) -> None:
        """Queue one message; ``values`` are copied now (the caller may change them)."""
        payload = np.asarray(values, dtype=np.int32).astype(_BE_I32).tobytes()
        hdr = encode_bcube_header(msg_type, thread, stage, self.level, self.me, offset,
                                  len(payload) // 4)
        self._out.put((hdr, payload))

    def send_round(self, rnd: int) -> None:
        """Queue the ``ROUND`` marker: the messages queued after it belong to round ``rnd``."""
        self._out.put((encode_bcube_header(BcubeMsg.ROUND, level=self.level, sender=self.me,
                                           offset=rnd), b""))

    def _writer(self) -> None:
        try:
            while True:
                item = self._out.get()
                if item is None:
                    self.sock.shutdown(socket.SHUT_WR)  # FIN after everything queued
                    return
                hdr, payload = item
                self.sock.sendall(hdr + payload if len(payload) < 65536 else hdr)
                if len(payload) >= 65536:
                    self.sock.sendall(payload)
                self.tx_bytes += len(hdr) + len(payload)
        except OSError as e:
            self.inbox.fail(TransportError(f"send to server {self.peer} (level {self.level}): {e}"))

    def _recv_exact(self, view: memoryview) -> bool:
        got = 0
        while got < len(view):
            n = self.sock.recv_into(view[got:])
            if n == 0:
                if got == 0:
                    return False
                raise TransportError(f"server {self.peer} (level {self.level}) closed mid-message")
            got += n
        return True

    def _reader(self) -> None:
        head = bytearray(BCUBE_HEADER_LEN)
        try:
            while self._recv_exact(memoryview(head)):
                hdr = decode_bcube_header(head)
                if hdr.sender != self.peer:
                    raise TransportError(f"message from server {hdr.sender} on the connection "
                                         f"to server {self.peer}")
                if hdr.msg_type == BcubeMsg.ROUND:
                    if hdr.offset != self._rx_round + 1 or hdr.count:
                        raise TransportError(f"server {self.peer} opened round {hdr.offset} "
                                             f"after round {self._rx_round}")
                    self._rx_round = hdr.offset
                    self.rx_bytes += BCUBE_HEADER_LEN
                    continue
                buf = np.empty(hdr.count, dtype=_BE_I32)
                if hdr.count and not self._recv_exact(memoryview(buf).cast("B")):
                    raise TransportError(f"server {self.peer} closed mid-message")
                self.rx_bytes += BCUBE_HEADER_LEN + buf.nbytes
                self.inbox.put(hdr, buf.astype(np.int32), self._rx_round)
            if self.fail_on_eof:
                self.inbox.sender_gone(self.peer, TransportError(
                    f"server {self.me}: server {self.peer} (level {self.level}) closed the "
                    "connection"), clean=True)
        except (OSError, ValueError) as e:
            err = e if isinstance(e, TransportError) else TransportError(
                f"receive from server {self.peer} (level {self.level}): {e}")
            if self.fail_on_eof:
                self.inbox.sender_gone(self.peer, err)
            else:
                self.inbox.fail(err)

    def abort(self) -> None:
        """Close at once, both ways: wakes this connection's threads, and the peer's reader
        sees the connection end (a broken repeated all-reduce fails fast everywhere)."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self._out.put(None)
        self.sock.close()

    def send_fin(self) -> None:
        """Queue the FIN after the queued messages (:meth:`finish` does it too; call this
        on every connection first so that no two servers wait for each other's FIN)."""
        self._out.put(None)

    def finish(self, timeout: float) -> None:
        """Send FIN after the queued messages and wait for the peer's FIN (so no
        connection closes while the peer still sends), then close."""
        self._out.put(None)
        end = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, end - time.monotonic()))
        self.sock.close()


def run_threads(tasks: Iterable[tuple[str, Callable[[], None]]], inbox: Inbox) -> None:
    """Run each ``(name, fn)`` in its own thread (sockets release the GIL, so a server's
    NICs send together), wait for all, and raise the first error. A failing thread
    fails ``inbox`` first, so threads blocked on a receive wake up instead of waiting
    for a message that will never come."""
    errors: list[BaseException] = []

    def run(fn: Callable[[], None]) -> None:
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 (raised below)
            errors.append(exc)
            inbox.fail(exc)

    threads = [threading.Thread(target=run, args=(fn,), name=name) for name, fn in tasks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def _hello(me: int, level: int) -> bytes:
    return encode_bcube_header(BcubeMsg.HELLO, level=level, sender=me)


def _listeners(links: list[Link], port: int) -> dict[str, socket.socket]:
    """One non-blocking listening socket per local address of ``links``."""
    listeners: dict[str, socket.socket] = {}
    for ln in links:
        if ln.my_ip not in listeners:
            ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            ls.bind((ln.my_ip, port))
            ls.listen(64)
            ls.setblocking(False)
            listeners[ln.my_ip] = ls
    return listeners


def connect_mesh(me: int, links: Iterable[Link], port: int, inbox: Inbox,
                 timeout: float = 30.0,
                 fail_on_eof: bool = False) -> dict[tuple[int, int], PeerConn]:
    """Open every connection of ``links`` (keyed ``(level, peer)``) and start their threads
    (``fail_on_eof``: see :attr:`PeerConn.fail_on_eof`).

    The server with the lower index connects, binding its source address to ``my_ip`` so
    the connection leaves through that level's NIC; the other accepts on
    ``(my_ip, port)`` and learns who it is from the HELLO message. Retries refused
    connects (the peer may not listen yet) until ``timeout``.
    """
    links = list(links)
    deadline = time.monotonic() + timeout
    listeners = _listeners(links, port)
    expected = {(ln.level, ln.peer) for ln in links if ln.peer < me}
    conns: dict[tuple[int, int], PeerConn] = {}
    pending = [ln for ln in links if ln.peer > me]
    try:
        while pending or expected:
            if time.monotonic() > deadline:
                missing = [f"l{ln.level}->s{ln.peer}" for ln in pending] + [
                    f"l{lv}<-s{p}" for lv, p in sorted(expected)]
                raise TransportError(f"server {me}: connections not up after {timeout:g} s: "
                                     f"{', '.join(missing)}")
            for ln in list(pending):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.bind((ln.my_ip, 0))
                s.settimeout(2.0)
                try:
                    s.connect((ln.peer_ip, port))
                except OSError:
                    s.close()
                    continue
                s.settimeout(None)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                s.sendall(_hello(me, ln.level))
                conns[ln.level, ln.peer] = PeerConn(s, me, ln.peer, ln.level, inbox,
                                                    fail_on_eof=fail_on_eof)
                pending.remove(ln)
            ready, _, _ = select.select(list(listeners.values()), [], [], 0.05)
            for ls in ready:
                try:
                    s, _ = ls.accept()
                except BlockingIOError:
                    continue
                s.setblocking(True)
                s.settimeout(5.0)
                try:
                    head = s.recv(BCUBE_HEADER_LEN, socket.MSG_WAITALL)
                    hdr = decode_bcube_header(head)
                except (OSError, ValueError):
                    s.close()  # closed before its HELLO: that connect failed and is retried
                    continue
                if hdr.msg_type != BcubeMsg.HELLO or (hdr.level, hdr.sender) not in expected:
                    s.close()
                    raise TransportError(f"server {me}: unexpected connection {hdr}")
                s.settimeout(None)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                expected.discard((hdr.level, hdr.sender))
                conns[hdr.level, hdr.sender] = PeerConn(s, me, hdr.sender, hdr.level, inbox,
                                                        fail_on_eof=fail_on_eof)
    except BaseException:
        for c in conns.values():
            c.sock.close()
        raise
    finally:
        for ls in listeners.values():
            ls.close()
    for c in conns.values():
        c.start()
    return conns


class NicSampler:
    """Samples this namespace's NIC byte counters (``/proc/net/dev``) every ``period`` s."""

    def __init__(self, ifaces: list[str], period: float = 0.05) -> None:
        self.ifaces = ifaces
        self.period = period
        self.times: list[float] = []
        self.tx: dict[str, list[int]] = {i: [] for i in ifaces}
        self.rx: dict[str, list[int]] = {i: [] for i in ifaces}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nic-sampler", daemon=True)

    @staticmethod
    def read() -> dict[str, tuple[int, int]]:
        """``{iface: (rx_bytes, tx_bytes)}`` of the calling process's namespace."""
        return {name: (c.rx_bytes, c.tx_bytes) for name, c in net_dev().items()}

    def sample(self) -> None:
        """Take one sample now."""
        now = self.read()
        self.times.append(time.time())
        for i in self.ifaces:
            rx, tx = now.get(i, (0, 0))
            self.rx[i].append(rx)
            self.tx[i].append(tx)

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.sample()

    def start(self) -> None:
        """First sample now, then one every ``period``."""
        self.sample()
        self._thread.start()

    def stop(self) -> dict[str, Any]:
        """Last sample; the series as a JSON-ready dict."""
        self._stop.set()
        self._thread.join(1.0)
        self.sample()
        return {"t": self.times, "tx": self.tx, "rx": self.rx}


def mark_ready(ready_dir: str | Path, server: int) -> None:
    """Tell the runner this server's connections are up."""
    p = Path(ready_dir) / f"ready-{server}"
    p.write_text(json.dumps({"t": time.time()}))


def wait_for_go(go_file: str | Path, timeout: float) -> float:
    """Wait for the runner's go file, then until the start time it holds; return it."""
    end = time.monotonic() + timeout
    p = Path(go_file)
    while True:
        try:
            start = float(json.loads(p.read_text())["start"])
            break
        except (OSError, ValueError, KeyError):
            if time.monotonic() > end:
                raise TransportError(f"no go file {p} after {timeout:g} s") from None
            time.sleep(0.01)
    delay = start - time.time()
    if delay > 0:
        time.sleep(delay)
    return start
