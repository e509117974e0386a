"""The sockets of differentiated transmission's channels: DSCP marking and the reliable
channel's framed messages (format: :mod:`wire.differentiated`)."""

from __future__ import annotations

import socket

from wire.differentiated import FRAME

__all__ = ["recv_exact", "recv_msg", "send_msg", "set_dscp"]


def set_dscp(sock: socket.socket, dscp: int) -> None:
    """Mark everything ``sock`` sends with ``dscp`` (the kernel writes the TOS byte)."""
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, dscp << 2)


def send_msg(sock: socket.socket, kind: bytes, body: bytes = b"") -> None:
    """One framed message on a TCP socket."""
    sock.sendall(FRAME.pack(kind, len(body)) + body)


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
