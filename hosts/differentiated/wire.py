"""Channels of differentiated transmission: DSCP per level, sockets, TCP framing.

* Reliable channel: one kernel TCP connection per worker to the PS (port
  ``DIFF_TCP_PORT``), DSCP ``DSCP_IMPORTANT`` (highest priority queue) set with
  ``IP_TOS``. It carries framed messages: the worker's hello, each iteration's manifest,
  the important block messages, and the PS's new parameters back.
* Unreliable channels: UDP to port ``DIFF_UDP_PORT``, one socket (one DSCP) per level;
  each datagram holds block messages of one level back to back (up to
  ``MAX_DATAGRAM`` bytes), so packet counts are comparable with TCP's full segments.

A TCP message is ``kind (1 byte) | length (4 bytes, big-endian) | body``.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Sequence

import numpy as np

from hosts.packets import DIFF_BLOCK_HEADER_LEN, DIFF_TCP_PORT, DIFF_UDP_PORT

__all__ = [
    "DIFF_TCP_PORT",
    "DIFF_UDP_PORT",
    "DSCP_BEST_EFFORT",
    "DSCP_IMPORTANT",
    "DSCP_LEVELS",
    "MAX_DATAGRAM",
    "Kind",
    "dscp_priority_map",
    "level_dscp",
    "pack_datagrams",
]

DSCP_IMPORTANT = 46  # EF
DSCP_LEVELS = (34, 26, 18, 10, 12, 20, 28)  # AF41, AF31, AF21, AF11, AF12, AF22, AF32: levels 1..7
DSCP_BEST_EFFORT = 0  # the all-unreliable contrast: every block on one (lowest) priority
MAX_DATAGRAM = 1400  # UDP payload bytes (fits a 1500-byte MTU with IP and UDP headers)
NB_QUEUES = 8


class Kind:
    """TCP message kinds."""

    HELLO = b"H"  # worker -> PS: rank (u16), world (u16)
    MANIFEST = b"M"  # worker -> PS: iteration, important blocks, unreliable datagrams per level
    BLOCK = b"B"  # worker -> PS: one important block message (hosts.packets)
    PARAMS = b"P"  # PS -> worker: iteration (u32), stop flag (u8), float32 parameters
    BYE = b"X"  # worker -> PS: summary JSON


FRAME = struct.Struct("!cI")
MANIFEST = struct.Struct("!IIH")  # iteration, important blocks, levels; then u32 datagrams per level
PARAMS = struct.Struct("!IB")


def level_dscp(level: int, mode: str) -> int:
    """The DSCP of a block's level under a transport ``mode`` (reliable, unreliable,
    differentiated)."""
    if level == 0 or mode == "reliable":
        return DSCP_IMPORTANT
    if mode == "unreliable":
        return DSCP_BEST_EFFORT
    if not 1 <= level <= len(DSCP_LEVELS):
        raise ValueError(f"level {level} out of range 1..{len(DSCP_LEVELS)}")
    return DSCP_LEVELS[level - 1]


def level_priority(level: int, levels: int, nb_queues: int = NB_QUEUES) -> int:
    """The switch priority of a level: important = the highest (``nb_queues - 1``);
    levels 1..L spread below it, level L the lowest (0 when possible)."""
    top = nb_queues - 1
    if level == 0:
        return top
    if levels >= top:
        return max(0, top - level)
    return max(0, top - 1 - (level - 1) * (top - 1) // max(1, levels - 1)) if levels > 1 else top - 1


def dscp_priority_map(levels: int, nb_queues: int = NB_QUEUES) -> dict[int, int]:
    """``{dscp: priority}`` for the switches' ``dscp_priority`` table: EF on the highest
    queue, level l's DSCP on :func:`level_priority`, best effort on priority 0."""
    if not 1 <= levels <= len(DSCP_LEVELS):
        raise ValueError(f"levels must be in 1..{len(DSCP_LEVELS)}, got {levels}")
    rules = {DSCP_IMPORTANT: level_priority(0, levels, nb_queues), DSCP_BEST_EFFORT: 0}
    for lv in range(1, levels + 1):
        rules[DSCP_LEVELS[lv - 1]] = level_priority(lv, levels, nb_queues)
    return rules


def set_dscp(sock: socket.socket, dscp: int) -> None:
    """Mark everything ``sock`` sends with ``dscp`` (the kernel writes the TOS byte)."""
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, dscp << 2)


def pack_datagrams(messages: Sequence[bytes], limit: int = MAX_DATAGRAM) -> list[bytes]:
    """Concatenate block messages into datagrams of at most ``limit`` bytes (a message
    larger than ``limit`` travels alone)."""
    out: list[bytes] = []
    cur: list[bytes] = []
    size = 0
    for m in messages:
        if cur and size + len(m) > limit:
            out.append(b"".join(cur))
            cur, size = [], 0
        cur.append(m)
        size += len(m)
    if cur:
        out.append(b"".join(cur))
    return out


def send_msg(sock: socket.socket, kind: bytes, body: bytes = b"") -> None:
    """One framed message on a TCP socket."""
    sock.sendall(FRAME.pack(kind, len(body)) + body)


def frame(kind: bytes, body: bytes = b"") -> bytes:
    """A framed message as bytes (to send several in one ``sendall``)."""
    return FRAME.pack(kind, len(body)) + body


def recv_exact(f, n: int) -> bytes | None:  # noqa: ANN001 (a socket file object)
    """``n`` bytes from a buffered socket file, or None at end of stream."""
    data = f.read(n)
    if data is None or len(data) < n:
        return None
    return data


def recv_msg(f) -> tuple[bytes, bytes] | None:  # noqa: ANN001
    """The next framed message ``(kind, body)``, or None when the peer closed."""
    head = recv_exact(f, FRAME.size)
    if head is None:
        return None
    kind, n = FRAME.unpack(head)
    body = recv_exact(f, n) if n else b""
    if body is None:
        return None
    return kind, body


def manifest(iteration: int, important: int, datagrams: Sequence[int], levels: Sequence[int]) -> bytes:
    """Body of a MANIFEST: what one worker sends in one iteration: its important block
    count, its datagrams per unreliable level 1..L, and every block's level (one byte
    each), so the PS can tell the level of a block that never arrived."""
    return (MANIFEST.pack(iteration, important, len(datagrams))
            + struct.pack(f"!{len(datagrams)}I", *datagrams) + bytes(levels))


def parse_manifest(body: bytes) -> tuple[int, int, list[int], bytes]:
    """(iteration, important blocks, datagrams per level 1..L, level of every block)."""
    it, imp, n = MANIFEST.unpack_from(body)
    off = MANIFEST.size + 4 * n
    return it, imp, list(struct.unpack_from(f"!{n}I", body, MANIFEST.size)), body[off:]


def params_body(iteration: int, stop: bool, values: np.ndarray) -> bytes:
    """Body of a PARAMS message (float32, big-endian)."""
    return PARAMS.pack(iteration, int(stop)) + np.asarray(values, dtype=">f4").tobytes()


def parse_params(body: bytes) -> tuple[int, bool, np.ndarray]:
    """(iteration, stop, float32 parameters)."""
    it, stop = PARAMS.unpack_from(body)
    return it, bool(stop), np.frombuffer(body[PARAMS.size:], dtype=">f4").astype(np.float32)


assert DIFF_BLOCK_HEADER_LEN < MAX_DATAGRAM
