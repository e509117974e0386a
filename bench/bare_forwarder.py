"""The ceilings for a Python switch: a bare AF_PACKET forwarder, and hand-coded programs.

``python -m bench.bare_forwarder IFACE_A IFACE_B`` copies every frame that arrives on one
interface to the other, with the same socket options and epoll loop shape as the embedded
target's data plane (non-blocking AF_PACKET sockets, up to 64 frames per wake-up). Whatever
the embedded target adds on top of this (parsing, tables, traffic manager) is its cost; the
target benchmark runs it in the same testbed, in the same run, as the bound next to the
embedded target's rate.

``--work forward`` and ``--work registers`` put between receive and send the fewest
Python operations that turn the benchmark's frame into the bytes forward.p4 or
registers.p4 send: what a P4 target written in Python could at best do per frame if it
knew the program and the traffic in advance. ``tests/test_bench_floors.py`` checks that
they produce exactly the embedded target's output bytes. The bare forwarder bounds the
I/O; these bound I/O plus the program's own work.

It prints ``ready`` once both sockets are bound and runs until SIGTERM.
"""

from __future__ import annotations

import argparse
import select
import signal
import socket
import struct
import sys
from collections.abc import Callable

import numpy as np

from wire.argtypes import described
from wire.ina import INA_UDP_PORT

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


_ETH_IPV4 = struct.Struct("!6s6sHBBHHHBBH4s4s")
_IPV4_WORDS = struct.Struct("!10H")
_AGG_HEAD = struct.Struct("!IB")  # registers.p4's agg_t: slot, reset, 3 bytes pad, 32 x 32-bit values
_AGG_SIZE = 8 + 32 * 4
_AGG_AT = 14 + 20 + 8


class HandForward:
    """forward.p4 for the benchmark's traffic, by hand: an IPv4 frame without options is
    dropped for a bad header checksum, TTL <= 1 or no route, else routed (exact
    destination: the benchmark's one /32 route) with both MACs rewritten, TTL decremented
    and the header checksum recomputed. Other frames (non-IPv4, IP options), which
    forward.p4 would count or forward, are just dropped: a bound, not a replacement."""

    def __init__(self, routes: dict[bytes, tuple[bytes, bytes]]) -> None:
        self.routes = routes  # IPv4 destination -> (next-hop MAC, egress port's MAC)

    def __call__(self, frame: bytes) -> bytes | None:
        """The frame forward.p4 sends for ``frame``, or None where it drops it."""
        if len(frame) < 34:
            return None
        _, _, etype, vihl, tos, tlen, ident, frag, ttl, proto, csum, src, dst = _ETH_IPV4.unpack_from(frame)
        if etype != 0x0800 or vihl != 0x45 or ttl <= 1:
            return None
        s = sum(_IPV4_WORDS.unpack_from(frame, 14)) - csum
        s = (s & 0xFFFF) + (s >> 16)
        s = (s & 0xFFFF) + (s >> 16)
        if ~s & 0xFFFF != csum:
            return None
        r = self.routes.get(dst)
        if r is None:
            return None
        s -= 0x100  # TTL - 1 in the high byte of its word
        s = (s & 0xFFFF) + (s >> 16)
        return _ETH_IPV4.pack(r[0], r[1], etype, vihl, tos, tlen, ident, frag, ttl - 1, proto,
                              ~s & 0xFFFF, src, dst) + frame[34:]


class HandRegisters:
    """registers.p4 by hand: for an aggregation frame, add its 32 values into the slot's
    registers (or clear the slot), write the sums into the frame and zero the UDP
    checksum; other frames pass unchanged. A slot's 32 registers are one row of a numpy
    array of big-endian uint32, so the 32 read-add-writes are one vector add straight
    from the frame's bytes (2-3x faster than a list comprehension) and wrap at 2^32."""

    def __init__(self, slots: int = 1024) -> None:
        self.rows = np.zeros((slots, 32), dtype=">u4")
        self.slots = slots

    def __call__(self, frame: bytes) -> bytes | None:
        """The frame registers.p4 sends for ``frame``."""
        if (len(frame) < _AGG_AT + _AGG_SIZE or frame[12:14] != b"\x08\x00" or frame[14] & 0x0F != 5
                or frame[20] & 0x1F or frame[21] or frame[23] != 17
                or frame[36] << 8 | frame[37] != INA_UDP_PORT):
            return frame
        slot, reset = _AGG_HEAD.unpack_from(frame, _AGG_AT)
        row = self.rows[slot & (self.slots - 1)]
        if reset == 1:
            row[:] = 0
        else:
            row += np.frombuffer(frame, ">u4", 32, _AGG_AT + 8)
        return (frame[:40] + b"\x00\x00" + frame[_AGG_AT:_AGG_AT + 8] + row.tobytes()
                + frame[_AGG_AT + _AGG_SIZE:])


# The forward.p4 entries the target benchmark installs (bench/target_bench.py), which the
# hand-coded forward.p4 hard-wires: one route, its next hop's MAC and egress port, and
# that port's MAC.
BENCH_DST = "10.0.0.2"
BENCH_NEXT_HOP_MAC = 0x000000000002
BENCH_EGRESS_PORT = 2
BENCH_PORT_MAC = 0x020000000102


def bench_work(name: str) -> Callable[[bytes], bytes | None] | None:
    """The per-frame work of ``--work NAME`` as the target benchmark configures it
    (forward: the BENCH_* entries)."""
    if name == "none":
        return None
    if name == "forward":
        return HandForward({socket.inet_aton(BENCH_DST): (BENCH_NEXT_HOP_MAC.to_bytes(6, "big"),
                                                          BENCH_PORT_MAC.to_bytes(6, "big"))})
    if name == "registers":
        return HandRegisters()
    raise ValueError(f"unknown work {name!r} (none, forward, registers)")


def forward(a: str, b: str, work: Callable[[bytes], bytes | None] | None = None) -> None:
    """Forward frames between interfaces ``a`` and ``b`` until SIGTERM, through ``work``
    (frame in, frame out or None to drop) when given."""
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
                if work is not None:
                    frame = work(frame)
                    if frame is None:
                        continue
                try:  # noqa: SIM105 (contextlib.suppress costs a call per frame)
                    send(frame)
                except (BlockingIOError, OSError):
                    pass  # a full transmit queue drops, as a switch's would


def forward_c(a: str, b: str) -> None:
    """Forward frames between ``a`` and ``b`` in C (bench/bare_forwarder.c, built by the
    native backend's build path) until SIGTERM: the I/O ceiling of a C switch."""
    import ctypes
    from pathlib import Path

    from targets.embedded.native.build import build

    lib = ctypes.CDLL(str(build((Path(__file__).parent / "bare_forwarder.c").read_text())))
    sa, sb = _open(a), _open(b)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # bf_run never returns to Python
    print("ready", flush=True)
    lib.bf_run(sa.fileno(), sb.fileno())


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: ``[--work none|forward|registers|c] IFACE_A IFACE_B``."""
    p = argparse.ArgumentParser(prog="python -m bench.bare_forwarder", description=described(__doc__))
    p.add_argument("--work", default="none", choices=("none", "forward", "registers", "c"),
                   help="hand-coded per-frame work between receive and send (default: none); c: no work, the "
                        "loop itself in C (bench/bare_forwarder.c), the ceiling for the native backend")
    p.add_argument("iface_a")
    p.add_argument("iface_b")
    args = p.parse_args(argv)
    if args.work == "c":
        forward_c(args.iface_a, args.iface_b)
    else:
        forward(args.iface_a, args.iface_b, bench_work(args.work))
    return 0


if __name__ == "__main__":
    sys.exit(main())
