"""Socket plumbing every host agent shares: buffers, sockets, the receive loop, timers.

Each agent keeps its own protocol logic; what they all need from the kernel is here once:

* :func:`set_buffers` -- large send/receive buffers (``SO_RCVBUFFORCE``/``SO_SNDBUFFORCE``
  as root, so ``net.core.[rw]mem_max`` does not cap them; the plain options otherwise).
  A window of datagrams from every worker at once must not overflow a default buffer.
* :func:`udp_socket`, :func:`packet_socket` -- the two datagram sockets the agents use
  (UDP for INA, the IP baselines and the differentiated unreliable channel; AF_PACKET for
  NDN over Ethernet and the token LAN).
* :func:`wait_readable` and :func:`drain` -- the receive loop: wait up to a timeout for the
  first datagram, then take every queued one without blocking.
* :class:`Deadline` and :class:`Timers` -- bounded run times and retransmission timers
  (a heap of due times keyed by what is waiting).
* :func:`net_dev`, :func:`nic_counters`, :func:`parse_net_dev` -- the interfaces' byte and
  packet counters (``/proc/net/dev``; the one reader of them).
"""

from __future__ import annotations

import contextlib
import heapq
import select
import socket
import time
from collections.abc import Callable, Hashable, Iterator
from typing import Any, NamedTuple

# Linux socket option numbers without a name in Python's socket module.
SO_SNDBUFFORCE = getattr(socket, "SO_SNDBUFFORCE", 32)
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23
DEFAULT_BUF = 8 << 20


def set_buffers(sock: socket.socket, rcvbuf: int | None = DEFAULT_BUF,
                sndbuf: int | None = DEFAULT_BUF, force: bool = True) -> None:
    """Set the socket's receive and send buffers (``None`` leaves one alone).

    With ``force`` the forced options (root) ignore the system-wide maxima, falling back
    to the plain options without root; without ``force`` the plain options apply, capped
    by ``net.core.[rw]mem_max``."""
    for size, forced, plain in ((rcvbuf, SO_RCVBUFFORCE, socket.SO_RCVBUF),
                                (sndbuf, SO_SNDBUFFORCE, socket.SO_SNDBUF)):
        if size is None:
            continue
        if force:
            try:
                sock.setsockopt(socket.SOL_SOCKET, forced, size)
                continue
            except OSError:
                pass
        sock.setsockopt(socket.SOL_SOCKET, plain, size)


def udp_socket(bind_ip: str = "", port: int = 0, *, rcvbuf: int | None = DEFAULT_BUF,
               sndbuf: int | None = DEFAULT_BUF, force: bool = True,
               blocking: bool = False) -> socket.socket:
    """A UDP socket bound to ``bind_ip:port`` with large buffers (non-blocking by default).

    A bind failure is re-raised with the address in its message and the socket closed."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    set_buffers(sock, rcvbuf, sndbuf, force)
    try:
        sock.bind((bind_ip, port))
    except OSError as e:
        sock.close()
        raise OSError(e.errno, f"cannot bind UDP {bind_ip or '0.0.0.0'}:{port}: {e.strerror}") from None
    sock.setblocking(blocking)
    return sock


def packet_socket(iface: str, ethertype: int, *, rcvbuf: int | None = DEFAULT_BUF,
                  sndbuf: int | None = DEFAULT_BUF, force: bool = True,
                  ignore_outgoing: bool = False) -> socket.socket:
    """An AF_PACKET socket on ``iface`` that sees only frames of ``ethertype``;
    ``ignore_outgoing`` asks the kernel not to loop the socket's own sends back."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ethertype))
    set_buffers(sock, rcvbuf, sndbuf, force)
    if ignore_outgoing:
        with contextlib.suppress(OSError):
            sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
    try:
        sock.bind((iface, ethertype))
    except OSError as e:
        sock.close()
        raise OSError(e.errno, f"cannot bind AF_PACKET on {iface}: {e.strerror}") from None
    return sock


def wait_readable(sock: socket.socket, timeout: float) -> bool:
    """Wait up to ``timeout`` s (negative = 0) until ``sock`` has something to read."""
    r, _, _ = select.select([sock], [], [], max(0.0, timeout))
    return bool(r)


def drain(sock: socket.socket, timeout: float, size: int = 65536,
          skip_outgoing: bool = False) -> Iterator[tuple[bytes, Any]]:
    """The receive loop: wait up to ``timeout`` for the first datagram, then yield every
    queued ``(data, address)`` without blocking. ``skip_outgoing`` drops the frames an
    AF_PACKET socket sees of its own sends."""
    if not wait_readable(sock, timeout):
        return
    recvfrom, flags = sock.recvfrom, socket.MSG_DONTWAIT
    while True:
        try:
            data, addr = recvfrom(size, flags)
        except (BlockingIOError, InterruptedError):
            return
        if skip_outgoing and addr[2] == socket.PACKET_OUTGOING:
            continue
        yield data, addr


class Deadline:
    """A bound on an agent's run time, on the monotonic clock."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.at = clock() + seconds

    def remaining(self) -> float:
        """Seconds left (never negative)."""
        return max(0.0, self.at - self._clock())

    def expired(self) -> bool:
        """True once the bound has passed."""
        return self._clock() >= self.at


class Timers:
    """Retransmission timers: arm a key for a due time, pop the keys that fell due.

    Re-arming a key supersedes its earlier due time; cancelled and superseded entries
    stay in the heap and are skipped lazily, so arm/cancel are O(log n)/O(1)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Hashable]] = []
        self._due: dict[Hashable, float] = {}
        self._seq = 0

    def __len__(self) -> int:
        return len(self._due)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._due

    def arm(self, key: Hashable, due: float) -> None:
        """(Re)start ``key``'s timer to fire at ``due``."""
        self._due[key] = due
        self._seq += 1
        heapq.heappush(self._heap, (due, self._seq, key))

    def cancel(self, key: Hashable) -> None:
        """Stop ``key``'s timer (no error if none is armed)."""
        self._due.pop(key, None)

    def next_due(self) -> float | None:
        """The earliest armed due time, or ``None``."""
        heap = self._heap
        while heap and self._due.get(heap[0][2]) != heap[0][0]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def pop_due(self, now: float) -> list[Hashable]:
        """Disarm and return every key whose due time is ``<= now``, earliest first."""
        out = []
        heap = self._heap
        while heap and heap[0][0] <= now:
            due, _, key = heapq.heappop(heap)
            if self._due.get(key) == due:
                del self._due[key]
                out.append(key)
        return out


def peak_rss_mib() -> float:
    """This process's peak resident memory in MiB (``VmHWM``). Not ``ru_maxrss``: that
    keeps the peak of the process image before ``exec``, so an agent spawned by a large
    launcher would report the launcher's memory."""
    try:
        for line in open("/proc/self/status"):  # noqa: SIM115 (one short read)
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class NicCounters(NamedTuple):
    """An interface's kernel counters (``/proc/net/dev``)."""

    rx_bytes: int = 0
    rx_packets: int = 0
    tx_bytes: int = 0
    tx_packets: int = 0


def parse_net_dev(text: str) -> dict[str, NicCounters]:
    """``{iface: counters}`` from the text of ``/proc/net/dev`` (read here, or inside
    another namespace with ``cat /proc/net/dev``)."""
    out = {}
    for line in text.splitlines():
        name, sep, rest = line.partition(":")
        f = rest.split()
        if sep and len(f) >= 10 and f[0].isdigit():  # the two header lines have no ':'
            out[name.strip()] = NicCounters(int(f[0]), int(f[1]), int(f[8]), int(f[9]))
    return out


def net_dev() -> dict[str, NicCounters]:
    """The counters of every interface of this process's network namespace."""
    with open("/proc/net/dev") as f:
        return parse_net_dev(f.read())


def nic_counters(iface: str) -> NicCounters:
    """(rx_bytes, rx_packets, tx_bytes, tx_packets) of ``iface`` in this namespace (zeros
    if it has none of that name)."""
    return net_dev().get(iface, NicCounters())
