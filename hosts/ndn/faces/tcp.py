"""NDN packets over the kernel's TCP, length-prefixed: the TCP parameter-server baseline."""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator, Mapping
from typing import Any

from ndn.encoding import Component

from wire.ndn import NDN_UDP_PORT, Packet, decode, marker

from .stats import FaceStats

__all__ = ["TcpFace"]


class TcpFace:
    """NDN packets over the kernel's TCP: the TCP parameter-server baseline.

    One connection per GPU: every GPU connects to the PS (``ps``, port 6363); each NDN
    packet travels as a 4-byte big-endian length and the packet. The PS (``listen``)
    addresses a GPU by its IP (a packet's ``source`` is its connection's peer IP); a
    packet for a GPU that has not connected yet waits until it does. Sockets are
    non-blocking with a send buffer per connection, flushed whenever the agent receives,
    so neither side ever blocks on a full window while the other sends (no deadlock).
    TCP recovers losses itself: the agents run with retransmission and probe timers far
    beyond a round (experiments/ndn.py), so nothing is sent twice by the application.
    """

    HEADER = 14 + 20 + 32 + 4   # Ethernet + IPv4 + TCP with timestamps + the length prefix

    def __init__(self, hosts: Mapping[str, str], me: str, ps: str, listen: bool,
                 connect_timeout: float = 60.0) -> None:
        import socket

        self.hosts = dict(hosts)
        self.stats = FaceStats()
        self.listen = listen
        self.conns: dict[str, socket.socket] = {}      # peer ip -> connection
        self.inbuf: dict[str, bytearray] = {}
        self.outbuf: dict[str, bytearray] = {}
        self.lsock: socket.socket | None = None
        self.ps_ip = self.hosts.get(ps, "")
        if listen:
            ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            ls.bind(("0.0.0.0", NDN_UDP_PORT))
            ls.listen(256)
            ls.setblocking(False)
            self.lsock = ls
        else:
            if not self.ps_ip:
                raise ValueError(f"no address for the PS {ps!r}")
            deadline = time.monotonic() + connect_timeout
            while True:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.settimeout(1.0)
                try:
                    s.connect((self.ps_ip, NDN_UDP_PORT))
                    break
                except OSError:
                    s.close()
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            self._add(self.ps_ip, s)

    def _add(self, ip: str, s: Any) -> None:
        import socket

        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        old = self.conns.get(ip)
        if old is not None:
            old.close()
        self.conns[ip] = s
        self.inbuf[ip] = bytearray()
        self.outbuf.setdefault(ip, bytearray())

    def address_of(self, name: list[bytes]) -> str:
        """The IP an Interest for ``name`` goes to (its first component after any marker)."""
        if not self.listen:
            return self.ps_ip
        i = 1 if marker(name) else 0
        host = bytes(Component.get_value(name[i])).decode()
        try:
            return self.hosts[host]
        except KeyError:
            raise ValueError(f"no address for NDN name prefix /{host}") from None

    def send(self, pkt: bytes, dest: Any = None, kind: str = "other") -> None:
        """Queue ``pkt`` on the connection to ``dest`` (an IP, or ``(ip, port)``), or to the
        host the Interest's name starts with; a GPU sends everything to the PS."""
        if not self.listen:
            ip = self.ps_ip
        elif dest is None:
            p = decode(pkt)
            assert p is not None
            ip = self.address_of(p.name)
        else:
            ip = dest[0] if isinstance(dest, tuple) else str(dest)
        self.outbuf.setdefault(ip, bytearray()).extend(struct.pack("!I", len(pkt)) + pkt)
        self.stats.count_tx(len(pkt) + self.HEADER, kind)
        self._flush(ip)

    def _flush(self, ip: str) -> None:
        s = self.conns.get(ip)
        buf = self.outbuf.get(ip)
        if s is None or not buf:
            return
        try:
            n = s.send(buf)
        except (BlockingIOError, InterruptedError):
            return
        del buf[:n]

    def recv(self, timeout: float) -> Iterator[Packet]:
        """Wait up to ``timeout`` s for data (sending queued bytes meanwhile), then yield
        every whole packet received."""
        import select

        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            by_sock = {s: ip for ip, s in self.conns.items()}
            rl = list(by_sock) + ([self.lsock] if self.lsock is not None else [])
            wl = [s for s, ip in by_sock.items() if self.outbuf.get(ip)]
            r, w, _ = select.select(rl, wl, [], max(0.0, deadline - time.monotonic()))
            for s in w:
                self._flush(by_sock[s])
            got = False
            for s in r:
                if s is self.lsock:
                    try:
                        c, (ip, _) = s.accept()
                    except (BlockingIOError, InterruptedError):
                        continue
                    self._add(ip, c)
                    self._flush(ip)
                    continue
                ip = by_sock[s]
                try:
                    chunk = s.recv(1 << 20)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    chunk = b""
                if not chunk:                      # the peer closed
                    s.close()
                    self.conns.pop(ip, None)
                    continue
                got = True
                buf = self.inbuf[ip]
                buf.extend(chunk)
                while len(buf) >= 4:
                    n = struct.unpack_from("!I", buf)[0]
                    if len(buf) < 4 + n:
                        break
                    pkt = bytes(buf[4:4 + n])
                    del buf[:4 + n]
                    self.stats.rx_bytes += n + self.HEADER
                    self.stats.rx_packets += 1
                    p = decode(pkt, source=(ip, NDN_UDP_PORT))
                    if p is not None:
                        yield p
            if got or time.monotonic() >= deadline:
                return

    def pending_bytes(self) -> int:
        """Bytes queued but not yet handed to the kernel."""
        return sum(len(b) for b in self.outbuf.values())

    def close(self, linger: float = 10.0) -> None:
        """Hand every queued byte to the kernel (up to ``linger`` s), then close."""
        end = time.monotonic() + linger
        while self.pending_bytes() and time.monotonic() < end:
            for _ in self.recv(0.05):
                pass
        for s in self.conns.values():
            s.close()
        if self.lsock is not None:
            self.lsock.close()
