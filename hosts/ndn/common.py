"""NDN host side shared by the PS and GPU agents (technique 2, docs/ndn.md).

* Packets are NDN v0.3 TLV encoded and decoded by python-ndn (``ndn.encoding``); names
  are checked against ndn.p4's parser bounds before anything is sent
  (:func:`controller.ndn.check_name` raises :class:`NameBoundsError`).
* :class:`EthernetFace` sends them directly over Ethernet (EtherType 0x8624, NDN's
  multicast MAC 01:00:5e:00:17:aa as destination) on an AF_PACKET socket: the
  experiment's NDN transport through ``ndn.p4``.
* :class:`UdpFace` sends the same packets in UDP datagrams to port 6363 (NFD's port),
  addressed by host: the IP-unicast baseline through ``forward.p4``, where the PS sends
  every update once per GPU.
* float32 arrays travel as segments of :data:`SEGMENT_VALUES` values (one Data each,
  fitting a 1500-byte MTU).
* :class:`HarnessWork` is the time-to-accuracy harness's training (``experiments/train.py``,
  ``hosts/trainer.py``), for the agents' ``--train-model`` option.
"""

from __future__ import annotations

import errno
import os
import resource
import struct
import time
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from ndn.encoding import (
    Component,
    InterestParam,
    MetaInfo,
    Name,
    make_data,
    make_interest,
    parse_data,
    parse_interest,
    parse_tl_num,
)

from hosts.net import drain, packet_socket, udp_socket, wait_readable

__all__ = [
    "ETHERTYPE_NDN",
    "NDN_MAC",
    "SEGMENT_VALUES",
    "EthernetFace",
    "NameBoundsError",
    "Packet",
    "TcpFace",
    "UdpFace",
    "data_packet",
    "decode",
    "interest_packet",
    "join_segments",
    "ndn_payload",
    "nic_counters",
    "segments",
]

#: Parser bounds of ndn.p4 (p4src/include/ndn_headers.p4).
MAX_NAME_BYTES = 64
MAX_DEPTH = 6
MAX_COMPONENT = 16
MAX_COMPONENT_TYPE = 127
INSERT_MARKER = b"*insert*"
DISTRIBUTE_MARKER = b"*distribute*"
#: ours: ends a subscription before its soft state would expire (ndn_persistent_pit.p4)
UNSUBSCRIBE_MARKER = b"*unsubscribe*"


class NameBoundsError(ValueError):
    """An NDN name outside what ndn.p4's parser accepts (docs/ndn.md, "Bounds")."""


def components(name: str | Sequence[bytes]) -> list[tuple[int, bytes]]:
    """``[(type, value)]`` of a name (python-ndn string form or component list)."""
    n = Name.from_str(name) if isinstance(name, str) else list(name)
    return [(Component.get_type(c), bytes(Component.get_value(c))) for c in n]


def check_name(name: str | Sequence[bytes]) -> list[bytes]:
    """The name as python-ndn components, or :class:`NameBoundsError` when ndn.p4 would
    drop it: more than 6 components, a component value over 16 bytes or of type >= 128
    (or in a multi-byte TLV form), or a Name TLV value over 64 bytes."""
    n = Name.from_str(name) if isinstance(name, str) else [bytes(c) for c in name]
    text = Name.to_str(n)
    if not n:
        raise NameBoundsError("an NDN name needs at least one component")
    if len(n) > MAX_DEPTH:
        raise NameBoundsError(f"name {text} has {len(n)} components; ndn.p4 parses at most {MAX_DEPTH}")
    for c in n:
        t, v = Component.get_type(c), Component.get_value(c)
        if t > MAX_COMPONENT_TYPE:
            raise NameBoundsError(f"name {text}: component type {t} >= 128 is not parsed by ndn.p4")
        if len(v) > MAX_COMPONENT:
            raise NameBoundsError(f"name {text}: component {Component.to_str(c)!r} has {len(v)} bytes; "
                                  f"ndn.p4 parses at most {MAX_COMPONENT}")
    size = sum(len(c) for c in n)
    if size > MAX_NAME_BYTES:
        raise NameBoundsError(f"name {text} is {size} bytes long; ndn.p4 parses at most {MAX_NAME_BYTES}")
    return list(n)


def _slot(t: int, v: bytes) -> bytes:
    # One metadata slot of ndn.p4: type (8), length (8), value right-aligned in 128 bits.
    return bytes([t, len(v)]) + v.rjust(MAX_COMPONENT, b"\0")


def prefix_hash(name: str | Sequence[bytes], k: int | None = None) -> int:
    """crc32 of the first ``k`` components (default all), as ndn.p4's ``h_k``."""
    comps = components(name)
    k = len(comps) if k is None else k
    if not 1 <= k <= min(len(comps), MAX_DEPTH):
        raise NameBoundsError(f"prefix length {k} out of 1..{min(len(comps), MAX_DEPTH)}")
    return zlib.crc32(b"".join(_slot(t, v) for t, v in comps[:k])) & 0xFFFFFFFF





ETHERTYPE_NDN = 0x8624
NDN_MAC = bytes.fromhex("01005e0017aa")
UDP_PORT = 6363
#: float32 values per Data segment: 1,400 content bytes, the Data stays under 1,500.
SEGMENT_VALUES = 350
TLV_INTEREST, TLV_DATA = 0x05, 0x06


def ndn_payload(buf: bytes | memoryview) -> memoryview:
    """The NDN packet at the start of ``buf`` (Ethernet padding after it cut off).

    Raises ``ValueError`` when ``buf`` does not start with a whole TLV."""
    mv = memoryview(buf)
    typ, n1 = parse_tl_num(mv, 0)
    length, n2 = parse_tl_num(mv, n1)
    end = n1 + n2 + length
    if typ not in (TLV_INTEREST, TLV_DATA) or end > len(mv):
        raise ValueError("not a whole NDN Interest or Data")
    return mv[:end]


@dataclass
class Packet:
    """A decoded NDN packet: ``kind`` is ``"interest"`` or ``"data"``."""

    kind: str
    name: list[bytes]
    content: bytes = b""
    source: Any = None            # UdpFace: the sender's (ip, port)

    @property
    def uri(self) -> str:
        return Name.to_str(self.name)


def decode(buf: bytes | memoryview, source: Any = None) -> Packet | None:
    """Decode an Interest or Data (None for anything else or a malformed packet)."""
    try:
        pkt = ndn_payload(buf)
        if pkt[0] == TLV_INTEREST:
            name, _, _, _ = parse_interest(pkt, with_tl=True)
            return Packet("interest", [bytes(c) for c in name], source=source)
        name, _, content, _ = parse_data(pkt, with_tl=True)
        return Packet("data", [bytes(c) for c in name], bytes(content or b""), source=source)
    except Exception:  # python-ndn raises several types on bad input
        return None


_nonce = struct.unpack("I", os.urandom(4))[0]


def interest_packet(name: str | list[bytes], lifetime_ms: int = 4000) -> bytes:
    """An encoded Interest (fresh nonce); :class:`NameBoundsError` outside the bounds."""
    global _nonce
    comps = check_name(name)
    _nonce = (_nonce + 1) & 0xFFFFFFFF
    return bytes(make_interest(comps, InterestParam(lifetime=lifetime_ms, nonce=_nonce)))


def data_packet(name: str | list[bytes], content: bytes = b"", final_block: int | None = None) -> bytes:
    """An encoded Data (unsigned: the emulated network trusts its hosts)."""
    comps = check_name(name)
    meta = MetaInfo(final_block_id=Component.from_segment(final_block) if final_block is not None else None)
    return bytes(make_data(comps, meta, content))


def marker(name: list[bytes]) -> str | None:
    """``"insert"`` / ``"distribute"`` when the first component is that marker."""
    if not name:
        return None
    v = bytes(Component.get_value(name[0]))
    return {INSERT_MARKER: "insert", DISTRIBUTE_MARKER: "distribute",
            UNSUBSCRIBE_MARKER: "unsubscribe"}.get(v)


def comp_str(c: bytes) -> str:
    """A component as text (generic: its bytes; typed: python-ndn's ``seg=5`` form)."""
    return Component.to_str(c)


def segments(arr: np.ndarray) -> list[bytes]:
    """A float32 array as little-endian segments of :data:`SEGMENT_VALUES` values."""
    raw = np.ascontiguousarray(arr, dtype="<f4").tobytes()
    step = SEGMENT_VALUES * 4
    return [raw[i:i + step] for i in range(0, max(len(raw), 1), step)] or [b""]


def n_segments(n_values: int) -> int:
    """How many segments a ``n_values`` float32 array takes."""
    return max(1, -(-n_values // SEGMENT_VALUES))


def join_segments(parts: Mapping[int, bytes], n_values: int) -> np.ndarray:
    """Reassemble ``{segment: bytes}`` into a float32 array (every segment present)."""
    raw = b"".join(parts[i] for i in range(n_segments(n_values)))
    return np.frombuffer(raw, dtype="<f4", count=n_values).copy()


def nic_counters(iface: str) -> tuple[int, int, int, int]:
    """(rx_bytes, rx_packets, tx_bytes, tx_packets) of ``iface`` in this namespace."""
    with open("/proc/net/dev") as f:
        for line in f:
            if ":" in line and line.split(":", 1)[0].strip() == iface:
                v = line.split(":", 1)[1].split()
                return int(v[0]), int(v[1]), int(v[8]), int(v[9])
    return 0, 0, 0, 0


@dataclass
class FaceStats:
    """Bytes and packets a face sent and received (NDN packets + their framing)."""

    tx_bytes: int = 0
    tx_packets: int = 0
    rx_bytes: int = 0
    rx_packets: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    packets_by_kind: dict[str, int] = field(default_factory=dict)

    def count_tx(self, nbytes: int, kind: str) -> None:
        self.tx_bytes += nbytes
        self.tx_packets += 1
        self.by_kind[kind] = self.by_kind.get(kind, 0) + nbytes
        self.packets_by_kind[kind] = self.packets_by_kind.get(kind, 0) + 1


class EthernetFace:
    """NDN directly over Ethernet on one interface (AF_PACKET, EtherType 0x8624)."""

    def __init__(self, iface: str, rcvbuf: int = 16 << 20) -> None:
        self.iface = iface
        self.sock = packet_socket(iface, ETHERTYPE_NDN, rcvbuf=rcvbuf, sndbuf=4 << 20, force=False)
        self.mac = self.sock.getsockname()[4][:6]
        self._hdr = NDN_MAC + self.mac + struct.pack("!H", ETHERTYPE_NDN)
        self.stats = FaceStats()

    def send(self, pkt: bytes, dest: Any = None, kind: str = "other") -> None:
        """Send one NDN packet (``dest`` is unused: the switches route by name)."""
        frame = self._hdr + pkt
        for attempt in range(400):
            try:
                self.sock.send(frame)
                break
            except OSError as e:
                # ENOBUFS: the link's queue is full (a slow link, many segments at once):
                # wait for it to drain rather than lose the packet or the agent
                if e.errno != errno.ENOBUFS or attempt == 399:
                    raise
                time.sleep(0.005)
        self.stats.count_tx(len(frame), kind)

    def recv(self, timeout: float) -> Iterator[Packet]:
        """The packets that arrive within ``timeout`` s (at least one wait, then drain)."""
        for frame, _ in drain(self.sock, timeout, skip_outgoing=True):
            self.stats.rx_bytes += len(frame)
            self.stats.rx_packets += 1
            p = decode(memoryview(frame)[14:])
            if p is not None:
                yield p

    def close(self) -> None:
        self.sock.close()


class UdpFace:
    """NDN packets in UDP datagrams (port 6363), addressed by host: the IP baselines.

    ``hosts`` maps host names (the first name component of an Interest) to IP addresses.
    A Data answers its Interest's sender; a distribute Data goes to every address in
    ``dest`` (the PS's subscribers), one datagram each (IP unicast), or once to an IP
    multicast group (``--transport ipmc``: the PS sends to ``(group, 6363)``).

    ``group``: this host joins the IP multicast group ``group`` on its address
    ``hosts[me]`` (IGMP join: the NIC accepts the group's MAC and the kernel delivers the
    group's datagrams to this socket) and sends multicast out of that address with a TTL
    that crosses the fabric (the default TTL of 1 would be dropped by forward.p4).

    Sends are paced by the NIC's queue: with ``IP_RECVERR`` a full queue answers
    ``ENOBUFS`` instead of dropping the datagram silently, and the send waits for it to
    drain (as :class:`EthernetFace` does), so a large update is not lost in the sender's
    own qdisc.
    """

    HEADER = 14 + 20 + 8   # Ethernet + IPv4 + UDP, for byte counts comparable with Ethernet

    def __init__(self, hosts: Mapping[str, str], rcvbuf: int = 16 << 20, group: str = "",
                 me: str = "") -> None:
        import socket

        self.hosts = dict(hosts)
        self.sock = udp_socket("0.0.0.0", UDP_PORT, rcvbuf=rcvbuf, sndbuf=4 << 20, force=False,
                               blocking=True)
        self.sock.setsockopt(socket.IPPROTO_IP, _IP_RECVERR, 1)
        self.group = group
        if group:
            local = self.hosts.get(me, "0.0.0.0")
            mreq = socket.inet_aton(group) + socket.inet_aton(local)
            self.sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
            self.sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(local))
            self.sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 16)
            self.sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 0)
        self.stats = FaceStats()

    def address_of(self, name: list[bytes]) -> tuple[str, int]:
        """Where an Interest for ``name`` goes: its first component after any marker."""
        i = 1 if marker(name) else 0
        host = bytes(Component.get_value(name[i])).decode()
        try:
            return self.hosts[host], UDP_PORT
        except KeyError:
            raise ValueError(f"no address for NDN name prefix /{host}") from None

    def send(self, pkt: bytes, dest: Any = None, kind: str = "other") -> None:
        """Send to ``dest`` ((ip, port)), or to the host the Interest's name starts with."""
        if dest is None:
            p = decode(pkt)
            assert p is not None
            dest = self.address_of(p.name)
        for attempt in range(2000):
            try:
                self.sock.sendto(pkt, dest)
                break
            except BlockingIOError:  # pragma: no cover - only with a full send buffer
                time.sleep(0.001)
            except OSError as e:
                if e.errno == errno.ENOBUFS and attempt < 1999:
                    time.sleep(0.002)           # the NIC's queue is full: let it drain
                    continue
                if e.errno in _UDP_SOFT_ERRORS:  # an ICMP error of an earlier datagram
                    continue
                raise
        self.stats.count_tx(len(pkt) + self.HEADER, kind)

    def recv(self, timeout: float, budget: float = 0.05) -> Iterator[Packet]:
        """As :meth:`EthernetFace.recv`, but draining for at most ``budget`` s: the
        agent's handlers may wait for the NIC's queue (``send``), and an endless stream of
        Interests would otherwise keep its timers (retransmissions, the assignment
        deadline) from running; what is left stays queued for the next call."""
        import socket

        if not wait_readable(self.sock, timeout):
            return
        end = time.monotonic() + budget
        while time.monotonic() < end:
            try:
                buf, addr = self.sock.recvfrom(65536, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                # IP_RECVERR reports ICMP errors (a host whose agent has already left)
                if e.errno in _UDP_SOFT_ERRORS:
                    continue
                raise
            self.stats.rx_bytes += len(buf) + self.HEADER
            self.stats.rx_packets += 1
            p = decode(buf, source=addr)
            if p is not None:
                yield p

    def close(self) -> None:
        self.sock.close()


#: linux/in.h (Python's socket module does not name it)
_IP_RECVERR = 11
#: errors a UDP socket with IP_RECVERR reports for earlier datagrams (ICMP): not fatal
_UDP_SOFT_ERRORS = (errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EHOSTDOWN)


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
            ls.bind(("0.0.0.0", UDP_PORT))
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
                    s.connect((self.ps_ip, UDP_PORT))
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
                    p = decode(pkt, source=(ip, UDP_PORT))
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


def name_of(*parts: str | bytes) -> list[bytes]:
    """A name from components: ``str`` parts in python-ndn URI form (``seg=3``, ``v=2``),
    ``bytes`` parts as generic components with those exact bytes."""
    out: list[bytes] = []
    for p in parts:
        if isinstance(p, bytes):
            out.append(bytes(Component.from_bytes(p)))
        else:
            out.append(bytes(Component.from_str(p)))
    return out


def seg_of(name: list[bytes]) -> int:
    """The segment number of a name ending in ``seg=N``."""
    return Component.to_number(name[-1])


def version_of(c: bytes) -> int:
    """The number of a ``v=N`` component."""
    return Component.to_number(c)


def make_face(transport: str, iface: str, hosts: Mapping[str, str], *, me: str = "",
              ps: str = "", group: str = "") -> EthernetFace | UdpFace | TcpFace:
    """``ndn`` -> :class:`EthernetFace` on ``iface``; ``ip`` -> :class:`UdpFace`;
    ``ipmc`` -> :class:`UdpFace` joined to the IP multicast group ``group``; ``tcp`` ->
    :class:`TcpFace` (the PS ``ps`` listens, every other agent connects to it)."""
    if transport == "ndn":
        return EthernetFace(iface)
    if transport == "ip":
        return UdpFace(hosts)
    if transport == "ipmc":
        if not group:
            raise ValueError("--transport ipmc needs --group (an IP multicast address)")
        return UdpFace(hosts, group=group, me=me)
    if transport == "tcp":
        return TcpFace(hosts, me, ps, listen=me == ps)
    raise ValueError(f"transport must be ndn, ip, ipmc or tcp, got {transport!r}")


#: the agents' --transport choices: NDN, and the IP baselines (unicast UDP, IP multicast, TCP)
TRANSPORTS = ("ndn", "ip", "ipmc", "tcp")


class Requester:
    """Outstanding Interests of one agent, retransmitted every ``timeout`` s.

    NDN consumers retransmit: a lost Interest or Data is recovered by sending the
    Interest again, with a fresh nonce (the switch's PIT re-forwards a retransmission
    from a port it already holds; a repeated nonce would be dropped as a duplicate). At most ``window`` Interests are outstanding; later ones wait in
    order, so a large array does not arrive as one burst that overflows the queues."""

    def __init__(self, face: EthernetFace | UdpFace, timeout: float = 0.5,
                 lifetime_ms: int = 4000, window: int = 64) -> None:
        self.face = face
        self.timeout = timeout
        self.lifetime_ms = lifetime_ms
        self.window = window
        self.pending: dict[bytes, tuple[bytes, float, str]] = {}
        self.backlog: dict[bytes, tuple[list[bytes], str]] = {}
        self.names: dict[bytes, list[bytes]] = {}
        self.retransmissions = 0

    @staticmethod
    def key(name: list[bytes]) -> bytes:
        return b"".join(name)

    def express(self, name: list[bytes], kind: str = "interest") -> None:
        """Send an Interest for ``name`` (or queue it behind the window) and keep it
        until :meth:`satisfied`."""
        k = self.key(name)
        if k in self.pending or k in self.backlog:
            return
        if len(self.pending) >= self.window:
            self.backlog[k] = (name, kind)
            return
        self._send(k, name, kind)

    def _send(self, k: bytes, name: list[bytes], kind: str) -> None:
        pkt = interest_packet(name, self.lifetime_ms)
        self.pending[k] = (pkt, time.monotonic() + self.timeout, kind)
        self.face.send(pkt, kind=kind)
        self.names[k] = name

    def satisfied(self, name: list[bytes]) -> bool:
        """Forget the Interest for ``name``; True when it was outstanding (or queued)."""
        k = self.key(name)
        if self.backlog.pop(k, None) is not None:
            return True
        if self.pending.pop(k, None) is None:
            return False
        self.names.pop(k, None)
        while self.backlog and len(self.pending) < self.window:
            nk = next(iter(self.backlog))
            nm, kind = self.backlog.pop(nk)
            self._send(nk, nm, kind)
        return True

    def tick(self) -> float:
        """Retransmit every Interest due; returns seconds until the next one is due."""
        now = time.monotonic()
        nxt = self.timeout
        for k, (pkt, due, kind) in list(self.pending.items()):
            if due <= now:
                # a retransmission carries a fresh nonce: the switches drop a repeated one
                # as a loop or a copy (ndn_nonce.p4)
                pkt = interest_packet(self.names[k], self.lifetime_ms)
                self.face.send(pkt, kind=kind)
                self.retransmissions += 1
                self.pending[k] = (pkt, now + self.timeout, kind)
            else:
                nxt = min(nxt, due - now)
        return max(nxt, 0.0)


def probe_timeout(delays: Sequence[float], factor: float, lo: float, hi: float, initial: float) -> float:
    """Step 5.3.1's probe timer: ``factor`` x the largest of the last five send-to-update
    delays, within ``lo`` .. ``hi``; ``initial`` before any delay is known."""
    recent = list(delays)[-5:]
    if not recent:
        return initial
    return min(hi, max(lo, factor * max(recent)))


def finish_estimate(old: float | None, took: float, wait: float, rtt: float) -> float:
    """Step 5.1's estimate of a GPU's finishing time after one more gradient.

    ``took``: round start (or the GPU's previous gradient) to its first segment; ``wait``:
    the PS's ask to that segment; ``rtt``: the smallest ``wait`` seen. A GPU that held the
    Interest (``wait`` clearly above ``rtt``) answered when it finished, so ``took`` is a
    measurement, averaged with the old estimate; one that answered at once was done
    before the PS asked, so the estimate shrinks to 0.7 x the smaller of the two."""
    if old is None:
        return took
    if wait > rtt + 0.02:
        return 0.5 * old + 0.5 * took
    return 0.7 * min(old, took)


def synthetic_gradient(params: np.ndarray, gpu: int, step: int, seed: int) -> np.ndarray:
    """A deterministic gradient-like float32 array that depends on the parameters it was
    computed on (so a GPU that missed an update would send a different gradient)."""
    rng = np.random.default_rng([seed, gpu, step])
    noise = (rng.standard_normal(params.size) * 0.01).astype(np.float32)
    return (noise + np.float32(0.01) * params).astype(np.float32)


def initial_params(n_values: int, seed: int) -> np.ndarray:
    """The PS's model initialisation (synthetic model)."""
    rng = np.random.default_rng([seed, 999])
    return (rng.standard_normal(n_values) * 0.1).astype(np.float32)


def sgd_step(params: np.ndarray, grads: list[np.ndarray], lr: float) -> np.ndarray:
    """``params - lr * mean(grads)`` in float32, summing in the given order."""
    total = np.zeros_like(params, dtype=np.float32)
    for g in grads:
        total = (total + g).astype(np.float32)
    return (params - np.float32(lr) * (total / np.float32(len(grads)))).astype(np.float32)


class DigitsTrainer:
    """Real gradients: ``hosts/training.py``'s digits CNN (3,818 float32 values) on this
    GPU's shard, one mini-batch per step, as a flat float32 vector."""

    def __init__(self, rank: int, world: int, seed: int, batch_size: int = 32) -> None:
        import torch

        from hosts import training as tr

        torch.set_num_threads(1)   # many agents share few cores
        self.tr = tr
        self.seed = seed
        self.batch_size = batch_size
        self.data = tr.load_digits_split(seed)
        self.model = tr.make_model(seed)
        self.like = tr.parameter_arrays(self.model)
        self.x, self.y = tr.worker_shard(self.data, rank, world) if world else (None, None)

    @staticmethod
    def initial(seed: int) -> np.ndarray:
        """The model's initial parameters (the PS's model initialisation data)."""
        from hosts import training as tr

        return tr.flatten(tr.parameter_arrays(tr.make_model(seed)))

    def gradient(self, params: np.ndarray, step: int) -> np.ndarray:
        """Cross-entropy gradient of mini-batch ``step`` at ``params``."""
        tr = self.tr
        tr.set_parameters(self.model, tr.unflatten(params, self.like))
        n_batches = max(1, -(-len(self.y) // self.batch_size))
        xb, yb = tr.batches(self.x, self.y, self.batch_size, step // n_batches, self.seed)[step % n_batches]
        return tr.flatten(tr.compute_gradients(self.model, xb, yb)).astype(np.float32)

    def accuracy(self, params: np.ndarray) -> float:
        """Test accuracy of ``params``."""
        self.tr.set_parameters(self.model, self.tr.unflatten(params, self.like))
        return float(self.tr.evaluate(self.model, self.data))


def add_harness_args(p: Any, role: str) -> Any:
    """The options of the time-to-accuracy harness's work (``experiments/train_ndn.py``),
    shared by the PS and the GPU (``role``); returns the argument group."""
    h = p.add_argument_group("the time-to-accuracy harness's work (experiments/train_ndn.py)")
    h.add_argument("--train-model", default="", metavar="NAME",
                   help="train hosts.training's model NAME as hosts/trainer.py does (sets --values; "
                        + ("every GPU must accept; evaluation records on stdout)" if role == "ps" else
                           "shard --gpu-index of --world; --compute-time then fixes each batch's "
                           "compute, 0: real)"))
    h.add_argument("--data", default="digits", help="--train-model: data set (hosts.training.load_data)")
    h.add_argument("--batch", type=int, default=16, help="--train-model: per-GPU batch size")
    h.add_argument("--steps-per-epoch", type=int, default=1,
                   help="--train-model: rounds per epoch (--rounds = epochs x this)")
    h.add_argument("--eval-every", type=int, default=0,
                   help="--train-model: evaluate (PS) or report weights (GPU) every K versions "
                        "besides each epoch's end (0: epochs only)")
    return h


def cpu_seconds() -> float:
    """User + system CPU seconds of this process."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class HarnessWork:
    """The time-to-accuracy harness's work (``experiments/train.py``): exactly what
    ``hosts/trainer.py`` trains, so that the NDN PS trains the same thing as every other
    scheme.

    ``hosts.training.build_model(model, seed)`` (initial weights), ``load_data(data,
    seed)``, rank ``rank``'s shard of ``world`` (``worker_shard``; ``rank`` None at the PS,
    which holds no shard), per-rank batch ``batch``, batch order ``batches(x, y, batch,
    epoch, seed)`` cut to the first ``steps_per_epoch`` full batches, and the SGD step
    ``w <- w - lr * sum / n`` of ``hosts.training.apply_gradients``. Round ``k`` (0-based)
    is batch ``k % steps_per_epoch`` of epoch ``k // steps_per_epoch``. Evaluations happen
    where the trainer's do: at version 0, every ``eval_every`` versions and at each epoch's
    end.
    """

    def __init__(self, model: str, data: str, seed: int, batch: int, steps_per_epoch: int,
                 eval_every: int = 0, rank: int | None = None, world: int = 1) -> None:
        import torch

        from hosts import training as tr

        if batch < 1 or steps_per_epoch < 1 or eval_every < 0:
            raise ValueError("--batch and --steps-per-epoch must be >= 1, --eval-every >= 0")
        torch.set_num_threads(1)   # many agents share few cores
        self.tr = tr
        self.seed, self.batch, self.steps_per_epoch, self.eval_every = seed, batch, steps_per_epoch, eval_every
        self.model = tr.build_model(model, seed)
        self.like = tr.parameter_arrays(self.model)
        self.data = tr.load_data(data, seed)
        self.x = self.y = None
        if rank is not None:
            self.x, self.y = tr.worker_shard(self.data, rank, world)
            if len(self.y) // batch < steps_per_epoch:
                raise ValueError(f"rank {rank}'s shard has {len(self.y) // batch} full batches of "
                                 f"{batch}, fewer than --steps-per-epoch {steps_per_epoch}")
        self._epoch = -1
        self._batches: list[Any] = []
        self._heldout: Any = None

    @property
    def values(self) -> int:
        """The model's size in float32 values."""
        return int(sum(a.size for a in self.like))

    def params(self) -> np.ndarray:
        """The model's parameters as one float32 vector."""
        return self.tr.flatten(self.tr.parameter_arrays(self.model))

    def load(self, params: np.ndarray) -> None:
        """Set the model's parameters to ``params`` (bit for bit)."""
        self.tr.set_parameters(self.model, self.tr.unflatten(params, self.like))

    def gradient(self, params: np.ndarray, step: int) -> np.ndarray:
        """The gradient of round ``step``'s batch at ``params`` (float32 vector)."""
        epoch, i = divmod(step, self.steps_per_epoch)
        if epoch != self._epoch:
            self._epoch = epoch
            self._batches = self.tr.batches(self.x, self.y, self.batch, epoch, self.seed)[:self.steps_per_epoch]
        self.load(params)
        xb, yb = self._batches[i]
        return self.tr.flatten(self.tr.compute_gradients(self.model, xb, yb)).astype(np.float32)

    def apply(self, grads: Sequence[np.ndarray], lr: float) -> np.ndarray:
        """The SGD step on the model's own parameters with the float32 sum of ``grads``
        (summed in the given order); returns the new parameters."""
        total = np.zeros(self.values, dtype=np.float32)
        for g in grads:
            total = (total + np.asarray(g, dtype=np.float32)).astype(np.float32)
        self.tr.apply_gradients(self.model, self.tr.unflatten(total, self.like), lr, scale=1.0 / len(grads))
        return self.params()

    def weights(self) -> str:
        """``hosts.trainer.weights_hash`` of the model (equal models, equal hashes)."""
        from hosts.trainer import weights_hash

        return weights_hash(self.model)

    def evaluate(self) -> dict[str, float]:
        """``{"test", "heldout"}`` accuracy of the model (``hosts.training.evaluate_sets``)."""
        if self._heldout is None:
            self._heldout = self.tr.heldout_set(self.data, self.seed)
        return self.tr.evaluate_sets(self.model, self.data, self._heldout)

    def is_eval_point(self, version: int) -> bool:
        """Whether the trainer evaluates after ``version`` steps."""
        return (version == 0 or version % self.steps_per_epoch == 0
                or bool(self.eval_every and version % self.eval_every == 0))

    def epoch_of(self, version: int) -> int:
        """The trainer's ``epoch`` field of an evaluation after ``version`` steps."""
        return 0 if version == 0 else (version - 1) // self.steps_per_epoch + 1
