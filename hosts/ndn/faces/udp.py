"""NDN packets in UDP datagrams (port 6363), addressed by host: the IP-unicast and IP
multicast baselines through forward.p4."""

from __future__ import annotations

import errno
import time
from collections.abc import Iterator, Mapping
from typing import Any

from ndn.encoding import Component

from hosts.net import udp_socket, wait_readable
from wire.ndn import NDN_UDP_PORT, Packet, decode, marker

from .stats import FaceStats

__all__ = ["UdpFace"]

#: linux/in.h (Python's socket module does not name it)
_IP_RECVERR = 11
#: errors a UDP socket with IP_RECVERR reports for earlier datagrams (ICMP): not fatal
_UDP_SOFT_ERRORS = (errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EHOSTDOWN)


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
        self.sock = udp_socket("0.0.0.0", NDN_UDP_PORT, rcvbuf=rcvbuf, sndbuf=4 << 20, force=False,
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
            return self.hosts[host], NDN_UDP_PORT
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
