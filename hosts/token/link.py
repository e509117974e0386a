"""A token node's link to its smart NIC and its frame-level I/O (token).

* :class:`NicLink` -- the one reused AF_PACKET socket to the NIC (``p4src/nic.p4``), token
  frames (EtherType 0x88B5) only, made by :func:`hosts.net.packet_socket`;
* :class:`FrameIO` -- what every part of a node (protocol, distribution, training) uses
  to talk: JSON event lines on stdout, token headers in the node's name, sending, and the
  receive loop that ticks the NIC every ``--tick`` seconds (the NIC evaluates its
  timeouts on the TICK);
* :class:`TokenError` -- the protocol cannot go on.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import deque
from typing import Any

from hosts.net import packet_socket, wait_readable
from wire.token import (
    TOKEN_ETHERTYPE,
    TokenDecodeError,
    TokenHeader,
    TokenMsg,
    decode_token,
    encode_token,
)

SOCK_BUF = 16 << 20


class TokenError(RuntimeError):
    """The protocol cannot go on (lost distribution, NIC not answering...)."""


class NicLink:
    """One reused AF_PACKET socket to the node's NIC, token frames only."""

    def __init__(self, iface: str) -> None:
        self.iface = iface
        self.sock = packet_socket(iface, TOKEN_ETHERTYPE, rcvbuf=SOCK_BUF, sndbuf=SOCK_BUF,
                                  ignore_outgoing=True)
        self.mac = self.sock.getsockname()[4][:6]
        self.sent = 0
        self.received = 0

    def send(self, frame: bytes) -> None:
        """Send one frame (retrying briefly when the kernel queue is full)."""
        for _ in range(100):
            try:
                self.sock.send(frame)
                self.sent += 1
                return
            except BlockingIOError:
                time.sleep(0.001)
            except OSError as e:
                if e.errno != 105:  # ENOBUFS
                    raise
                time.sleep(0.001)
        raise TokenError("cannot send to the NIC (queue full)")

    def recv(self, timeout: float) -> bytes | None:
        """One frame, or None after ``timeout`` seconds."""
        if not wait_readable(self.sock, timeout):
            return None
        self.received += 1
        return self.sock.recv(65536)


class FrameIO:
    """Mixin of :class:`hosts.token.node.Node`: events out, frames to and from the NIC.

    Uses the node's ``args``, ``link``, ``t0``, ``seq``, ``pending`` (frames taken off the
    socket by a loop that wanted something else, served first), and for the tick
    ``standby``, ``last_pass``, ``batch``, ``last_tick``."""

    args: argparse.Namespace
    link: NicLink
    t0: float
    seq: int
    pending: deque
    standby: bool
    last_pass: int
    batch: int
    last_tick: float

    def log(self, event: str, **kw: Any) -> None:
        """One JSON event line on stdout."""
        rec = {"event": event, "t": round(time.monotonic() - self.t0, 4), "node": self.seq, **kw}
        print(json.dumps(rec), flush=True)

    def header(self, msg: TokenMsg, **kw: Any) -> TokenHeader:
        return TokenHeader(msg_type=int(msg), sender=self.seq, **kw)

    def send(self, hdr: TokenHeader, values: Any = None, payload: bytes = b"") -> bytes:
        frame = encode_token(hdr, self.link.mac, values=values, payload=payload)
        self.link.send(frame)
        return frame

    def next_frame(self, timeout: float) -> tuple[TokenHeader, bytes, memoryview] | None:
        """The next token frame (pending ones first), or None on timeout; ticks the NIC."""
        if self.pending:
            return self.pending.popleft()
        deadline = time.monotonic() + timeout
        while True:
            self.maybe_tick()
            left = deadline - time.monotonic()
            frame = self.link.recv(min(max(left, 0.0), self.args.tick))
            if frame is not None:
                try:
                    _dst, src, hdr, rest = decode_token(frame)
                except TokenDecodeError:
                    continue
                self.last_frame_at = time.monotonic()  # for the max-time diagnosis
                if hdr.msg_type == TokenMsg.NACK:
                    self.on_nack(hdr)  # answered wherever the node waits
                    continue
                return hdr, src, rest
            if time.monotonic() >= deadline:
                return None

    def on_nack(self, hdr: TokenHeader) -> None:
        """A NACK for this node's broadcast (overridden by the protocol)."""

    def maybe_tick(self) -> None:
        """Periodic TICK: the NIC evaluates its timeouts on it."""
        now = time.monotonic()
        if self.seq and not self.standby and now - self.last_tick >= self.args.tick:
            self.last_tick = now
            self.send(self.header(TokenMsg.TICK, pass_no=self.last_pass, batch=self.batch),
                      payload=b"")
