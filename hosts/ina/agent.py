"""What the INA worker and PS share besides the policy: their UDP socket, the bounded-time
error, and the test-only fault injection on the send path."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any

from hosts.net import udp_socket
from wire.ina import INA_UDP_PORT

_SOCK_BUF = 8 << 20  # large buffers: a window of fragments from every worker at once


class InaTimeoutError(TimeoutError):
    """An agent ran past its bounded total time; ``report`` holds what it had."""

    def __init__(self, message: str, report: Any = None) -> None:
        super().__init__(message)
        self.report = report


def open_ina_socket(bind_ip: str = "", port: int = INA_UDP_PORT) -> socket.socket:
    """A non-blocking UDP socket bound to ``bind_ip:port`` with large buffers.

    The UDP checksum is left to the kernel default (computed on send, checked on
    receive; a zero checksum from a switch is accepted)."""
    return udp_socket(bind_ip, port, rcvbuf=_SOCK_BUF, sndbuf=_SOCK_BUF)


@dataclass
class FaultInjection:
    """TEST ONLY: deterministic faults injected on an agent's send path.

    ``drop_every=k`` silently drops every k-th datagram (counted as sent);
    ``send_twice`` sends every datagram twice (duplicates)."""

    drop_every: int = 0
    send_twice: bool = False
    _n: int = 0
    dropped: int = 0

    def send(self, sock: socket.socket, data: bytes, addr: tuple[str, int]) -> None:
        self._n += 1
        if self.drop_every and self._n % self.drop_every == 0:
            self.dropped += 1
            return
        sock.sendto(data, addr)
        if self.send_twice:
            sock.sendto(data, addr)


