"""NDN directly over Ethernet (EtherType 0x8624 to NDN's multicast MAC) on an AF_PACKET
socket: the experiment's NDN transport through ndn.p4."""

from __future__ import annotations

import errno
import struct
import time
from collections.abc import Iterator
from typing import Any

from hosts.net import drain, packet_socket
from wire.ndn import ETHERTYPE_NDN, NDN_MAC, Packet, decode

from .stats import FaceStats

__all__ = ["EthernetFace"]


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
