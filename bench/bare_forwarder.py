"""The ceiling for a Python switch: a bare AF_PACKET forwarder with no P4 at all.

``python -m bench.bare_forwarder IFACE_A IFACE_B`` copies every frame that arrives on one
interface to the other, with the same socket options and epoll loop shape as the embedded
target's data plane (non-blocking AF_PACKET sockets, up to 64 frames per wake-up). Whatever
the embedded target adds on top of this (parsing, tables, traffic manager) is its cost; the
target benchmark runs it in the same testbed, in the same run, as the bound next to the
embedded target's rate.

It prints ``ready`` once both sockets are bound and runs until SIGTERM.
"""

from __future__ import annotations

import select
import signal
import socket
import sys

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23


def _open(iface: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
    s.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_RCVBUFFORCE", 33), 8 << 20)
    s.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_SNDBUFFORCE", 32), 8 << 20)
    s.bind((iface, ETH_P_ALL))
    s.setblocking(False)
    return s


def forward(a: str, b: str) -> None:
    """Forward frames between interfaces ``a`` and ``b`` until SIGTERM."""
    sa, sb = _open(a), _open(b)
    peer = {sa.fileno(): (sa, sb), sb.fileno(): (sb, sa)}
    ep = select.epoll()
    for fd in peer:
        ep.register(fd, select.EPOLLIN)
    stop = False

    def _term(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _term)
    print("ready", flush=True)
    while not stop:
        try:
            events = ep.poll(0.5)
        except InterruptedError:
            continue
        for fd, _ in events:
            src, dst = peer[fd]
            recv, send = src.recv, dst.send
            for _ in range(64):
                try:
                    frame = recv(65536)
                except (BlockingIOError, InterruptedError):
                    break
                try:  # noqa: SIM105 (contextlib.suppress costs a call per frame)
                    send(frame)
                except (BlockingIOError, OSError):
                    pass  # a full transmit queue drops, as a switch's would


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: ``IFACE_A IFACE_B``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m bench.bare_forwarder IFACE_A IFACE_B", file=sys.stderr)
        return 2
    forward(*args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
