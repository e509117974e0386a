"""The token frame (docs/token.md): token-passing gradient broadcast over Ethernet frames of
EtherType ``TOKEN_ETHERTYPE`` carrying a 32-byte token header (whose ``next_holder`` is the
token) and, for GRAD and READ/READ_REPLY, 128 int32 values. Mirrors
p4src/include/token_headers.p4 (tests/test_wire_constants.py)."""

from __future__ import annotations

import struct
from enum import IntEnum, IntFlag
from typing import Any, NamedTuple

import numpy as np

from wire.ina import BE_I32
from wire.ports import TOKEN_ETHERTYPE

__all__ = [
    "ETH_HEADER", "TOKEN_BROADCAST_MAC", "TOKEN_ETHERTYPE", "TOKEN_HEADER", "TOKEN_HEADER_LEN",
    "TOKEN_MAX_FRAGS", "TOKEN_MAX_MEMBERS", "TOKEN_VALUES", "TOKEN_VALUES_LEN", "TokenDecodeError",
    "TokenFlags", "TokenHeader", "TokenMsg", "decode_token", "encode_token", "mac_bytes", "mac_text",
    "token_values",
]

TOKEN_VALUES = 128
TOKEN_MAX_MEMBERS = 31  # sequence numbers 1..31 (one bit each in a 32-bit bitmap)
TOKEN_MAX_FRAGS = 256  # fragments of TOKEN_VALUES per gradient the NIC can hold
TOKEN_BROADCAST_MAC = b"\xff" * 6
# msg_type, flags, sender, next_holder, batch, pass_no, bitmap, frag, nfrags, member, count,
# mac, aux
TOKEN_HEADER = struct.Struct("!BBBBIIIHHBB6sI")
TOKEN_HEADER_LEN = TOKEN_HEADER.size  # 32
TOKEN_VALUES_LEN = 4 * TOKEN_VALUES
ETH_HEADER = struct.Struct("!6s6sH")
assert TOKEN_HEADER_LEN == 32


class TokenMsg(IntEnum):
    """Token ``msg_type`` values (< 0x10: host <-> own NIC only; >= 0x10: broadcasts)."""

    CONFIG = 0x01
    READ = 0x02
    READ_REPLY = 0x03
    TICK = 0x04
    RESEND_DUE = 0x05
    PASS = 0x06  # host -> own NIC: the NIC emits the TOKEN (next holder from its roster)
    FORM_START = 0x10
    FORM_REPLY = 0x11
    ROSTER = 0x12
    MODEL = 0x20
    DATA = 0x21
    DATA_DONE = 0x22
    DATA_ACK = 0x23
    TOKEN = 0x30
    GRAD = 0x31
    NODE_LOST = 0x32
    ABNORMAL = 0x33
    REJOIN_QUERY = 0x34
    REJOIN_REPLY = 0x35
    REJOIN = 0x36
    STOP = 0x37
    NACK = 0x38  # re-send fragments [frag, nfrags) of batch, member = the broadcaster


class TokenFlags(IntFlag):
    """Token ``flags`` bits."""

    RESEND = 0x01  # a re-sent broadcast (a NIC's RESEND_DUE)
    LAST = 0x02  # last ROSTER frame; last READ of a batch
    PREV = 0x04  # TOKEN: its nfrags count fragments of batch - 1 (a batch-opening token)


class TokenHeader(NamedTuple):
    """The 32-byte token header, field order as on the wire (``mac`` as 6 bytes)."""

    msg_type: int
    flags: int = 0
    sender: int = 0
    next_holder: int = 0
    batch: int = 0
    pass_no: int = 0
    bitmap: int = 0
    frag: int = 0
    nfrags: int = 0
    member: int = 0
    count: int = 0
    mac: bytes = bytes(6)
    aux: int = 0


class TokenDecodeError(ValueError):
    """A frame that is not a well-formed token frame."""


def mac_bytes(mac: str | bytes) -> bytes:
    """``"00:00:0a:00:00:01"`` (or 6 bytes) -> 6 bytes."""
    if isinstance(mac, bytes | bytearray):
        if len(mac) != 6:
            raise ValueError(f"a MAC is 6 bytes, got {len(mac)}")
        return bytes(mac)
    b = bytes.fromhex(mac.replace(":", "").replace("-", ""))
    if len(b) != 6:
        raise ValueError(f"bad MAC {mac!r}")
    return b


def mac_text(mac: bytes) -> str:
    """6 bytes -> ``"00:00:0a:00:00:01"``."""
    return ":".join(f"{b:02x}" for b in mac)


def encode_token(header: TokenHeader, src: bytes, dst: bytes = TOKEN_BROADCAST_MAC,
                 values: Any = None, payload: bytes = b"") -> bytes:
    """One token Ethernet frame: Ethernet + token header (+ 128 int32 values for GRAD and
    READ, zeros when ``values`` is None) + raw ``payload`` (MODEL, DATA)."""
    out = ETH_HEADER.pack(dst, src, TOKEN_ETHERTYPE) + TOKEN_HEADER.pack(*header)
    if header.msg_type in (TokenMsg.GRAD, TokenMsg.READ, TokenMsg.READ_REPLY):
        if values is None:
            out += bytes(TOKEN_VALUES_LEN)
        else:
            a = np.asarray(values)
            if a.shape != (TOKEN_VALUES,) or a.dtype.kind not in "iu":
                raise ValueError(f"token values must be {TOKEN_VALUES} integers, got {a.dtype} {a.shape}")
            out += a.astype(BE_I32).tobytes()
    return out + payload


def decode_token(frame: bytes | bytearray | memoryview) -> tuple[bytes, bytes, TokenHeader, memoryview]:
    """``(dst, src, header, rest)`` of a token frame; ``rest`` is what follows the header
    (values or raw payload). Raises :class:`TokenDecodeError` on anything else."""
    if len(frame) < ETH_HEADER.size + TOKEN_HEADER_LEN:
        raise TokenDecodeError(f"frame of {len(frame)} bytes is too short for a token frame")
    dst, src, etype = ETH_HEADER.unpack_from(frame)
    if etype != TOKEN_ETHERTYPE:
        raise TokenDecodeError(f"EtherType {etype:#06x} is not {TOKEN_ETHERTYPE:#06x}")
    hdr = TokenHeader._make(TOKEN_HEADER.unpack_from(frame, ETH_HEADER.size))
    return dst, src, hdr, memoryview(frame)[ETH_HEADER.size + TOKEN_HEADER_LEN:]


def token_values(rest: bytes | memoryview) -> np.ndarray:
    """The 128 int32 values at the start of ``rest`` (see :func:`decode_token`)."""
    if len(rest) < TOKEN_VALUES_LEN:
        raise TokenDecodeError(f"{len(rest)} bytes of values, expected {TOKEN_VALUES_LEN}")
    return np.frombuffer(rest, dtype=BE_I32, count=TOKEN_VALUES).astype(np.int32)
