"""What the INA worker and PS share besides the policy: their UDP socket, the bounded-time
error, and the test-only fault injection on the send path."""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hosts.ina import native
from hosts.net import udp_socket
from wire import argtypes
from wire.ina import INA_UDP_PORT, MsgType

_SOCK_BUF = 8 << 20  # large buffers: a window of fragments from every worker at once


class InaTimeoutError(TimeoutError):
    """An agent ran past its bounded total time; ``report`` holds what it had."""

    def __init__(self, message: str, report: Any = None) -> None:
        super().__init__(message)
        self.report = report


def open_ina_socket(bind_ip: str = "", port: int = INA_UDP_PORT) -> socket.socket:
    """A non-blocking UDP socket bound to ``bind_ip:port`` with large buffers.

    The UDP checksum is left to the kernel default (computed on send, checked on
    receive; a zero checksum from a switch is accepted). The native datagram paths
    (hosts/ina/native.py) are built and loaded here, at the agent's start, not in its
    first allreduce."""
    native.library()
    return udp_socket(bind_ip, port, rcvbuf=_SOCK_BUF, sndbuf=_SOCK_BUF)


@dataclass
class FaultInjection:
    """TEST ONLY: deterministic faults injected on an agent's socket: real datagrams that
    are never sent, or that arrived and are discarded unread (a real loss of a real
    packet, on the link next to the agent), or sent twice, or sent late.

    ``drop_every=k`` silently drops every k-th datagram sent (counted as sent);
    ``send_twice`` sends every datagram twice (duplicates); ``drop_sent`` /
    ``drop_received`` map an INA message type to the ordinals (1 = the first) of the
    datagrams of that type to drop on the way out / on arrival; ``hold_sent`` maps a
    message type to (n, k): its n-th datagram goes out after k more datagrams
    (reordering)."""

    drop_every: int = 0
    send_twice: bool = False
    drop_sent: dict[int, set[int]] = field(default_factory=dict)
    drop_received: dict[int, set[int]] = field(default_factory=dict)
    hold_sent: dict[int, tuple[int, int]] = field(default_factory=dict)
    _n: int = 0
    dropped: int = 0
    _sent_of: dict[int, int] = field(default_factory=dict)
    _recv_of: dict[int, int] = field(default_factory=dict)
    _held: list[list[Any]] = field(default_factory=list)  # [datagrams to go, data, addr]

    @staticmethod
    def _count(counts: dict[int, int], data: bytes) -> tuple[int, int]:
        t = data[0] if data else -1
        counts[t] = n = counts.get(t, 0) + 1
        return t, n

    def send(self, sock: socket.socket, data: bytes, addr: tuple[str, int]) -> None:
        """``sock.sendto(data, addr)``, with the faults."""
        self._n += 1
        t, n = self._count(self._sent_of, data)
        for h in list(self._held):  # held datagrams go out after k more
            h[0] -= 1
            if h[0] < 0:
                self._held.remove(h)
                sock.sendto(h[1], h[2])
        if (self.drop_every and self._n % self.drop_every == 0) or n in self.drop_sent.get(t, ()):
            self.dropped += 1
            return
        if t in self.hold_sent and self.hold_sent[t][0] == n:
            self._held.append([self.hold_sent[t][1] - 1, data, addr])
            return
        sock.sendto(data, addr)
        if self.send_twice:
            sock.sendto(data, addr)

    def recv(self, sock: socket.socket, size: int) -> tuple[bytes, Any]:
        """``sock.recvfrom(size)``, discarding the datagrams ``drop_received`` names."""
        while True:
            data, addr = sock.recvfrom(size)
            t, n = self._count(self._recv_of, data)
            if n in self.drop_received.get(t, ()):
                self.dropped += 1
                continue
            return data, addr


def parse_fault_spec(specs: list[str] | None) -> dict[int, set[int]]:
    """``["RESULT=3", "GRAD=1,5"]`` -> ``{3: {3}, 1: {1, 5}}`` (message type -> ordinals);
    ``ValueError`` with a one-line reason otherwise."""
    out: dict[int, set[int]] = {}
    for spec in specs or []:
        name, _, ns = spec.partition("=")
        try:
            t = int(MsgType[name.strip().upper()])
            ords = {int(x) for x in ns.split(",") if x.strip()}
        except (KeyError, ValueError):
            raise ValueError(f"fault spec {spec!r}: want TYPE=N[,N...] with TYPE one of "
                             f"{', '.join(m.name for m in MsgType)}") from None
        if not ords or min(ords) < 1:
            raise ValueError(f"fault spec {spec!r}: ordinals start at 1")
        out.setdefault(t, set()).update(ords)
    return out


def add_drop_options(ap: Any, agent: str, sent: str, received: str) -> None:
    """``--drop-sent`` / ``--drop-received TYPE=N[,N]`` (:func:`parse_fault_spec`) on an
    agent's parser; ``sent`` / ``received`` name the INA types that agent sends / receives."""
    ap.add_argument("--drop-sent", action="append", metavar="TYPE=N[,N]",
                    help=f"testing: drop the N-th datagram of INA type TYPE ({sent}) this "
                    f"{agent} sends (repeatable)")
    ap.add_argument("--drop-received", action="append", metavar="TYPE=N[,N]",
                    help=f"testing: discard the N-th datagram of INA type TYPE ({received}) "
                    f"this {agent} receives (repeatable)")


def add_worker_test_options(ap: Any) -> None:
    """The worker's testing options (an ``argparse.ArgumentParser``): faults on its
    socket (``worker_faults``) and a late start."""
    ap.add_argument("--send-twice", action="store_true",
                    help="testing: send every datagram twice (duplicate handling)")
    add_drop_options(ap, "worker", sent="GRAD, NACK", received="RESULT, NACK")
    ap.add_argument("--lag", type=argtypes.nonnegative, default=0.0, metavar="SECONDS",
                    help="testing: start the first allreduce this long after the others "
                    "(a rank lagging its round; with --ready-go, after the start signal)")


def worker_faults(args: Any) -> FaultInjection | None:
    """The ``FaultInjection`` that ``add_worker_test_options``' options ask for, or None."""
    if not (args.send_twice or args.drop_sent or args.drop_received):
        return None
    return FaultInjection(send_twice=args.send_twice, drop_sent=parse_fault_spec(args.drop_sent),
                          drop_received=parse_fault_spec(args.drop_received))


def progress_bar(enabled: bool) -> tuple[Any, Callable[[int, int], None] | None]:
    """A rich progress bar on stderr and its ``update(done, total)`` (None, None when
    not ``enabled``)."""
    if not enabled:
        return None, None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    prog = Progress(
        "[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), console=Console(stderr=True), transient=True,
    )
    task = prog.add_task("allreduce", total=None)

    def update(done: int, total: int) -> None:
        prog.update(task, completed=done, total=total)

    return prog, update
