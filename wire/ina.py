"""The INA packet (docs/ina.md): UDP port ``INA_UDP_PORT``, payload = the 52-byte INA
header (a 256-bit contributor bitmap) + V big-endian two's-complement int32 values, V = 64
(the default), 128 or 256 per job (``INA_VALUE_SIZES``; docs/ina.md, "Values per packet").

A ``struct``-based codec (``encode_ina``/``decode_ina`` and the raw ``INA_HEADER``) for the
agents' hot path; :mod:`wire.scapy_layers` has the scapy view (tests keep the two identical
byte for byte). p4src/include/config.p4 and p4src/gen_lanes.py mirror the sizes
(tests/test_wire_constants.py).
"""

from __future__ import annotations

import struct
from enum import IntEnum, IntFlag
from typing import Any, NamedTuple

import numpy as np

from wire.ports import INA_UDP_PORT

__all__ = [
    "BE_I32",
    "INA_BITMAP_BYTES",
    "INA_HEADER",
    "INA_HEADER_LEN",
    "INA_MAX_VALUES",
    "INA_MAX_WORKERS",
    "INA_NO_EXP",
    "INA_PACKET_LEN",
    "INA_UDP_PORT",
    "INA_VALUES",
    "INA_VALUES_LEN",
    "INA_VALUE_SIZES",
    "InaDecodeError",
    "InaFlags",
    "HEADER_ONLY_TYPES",
    "InaHeader",
    "MsgType",
    "check_values_per_packet",
    "decode_ina",
    "decode_ina_header",
    "encode_ina",
    "ina_packet_len",
    "values_to_bytes",
]

#: big-endian int32: every technique's fixed-point values on the wire
BE_I32 = np.dtype(">i4")


class MsgType(IntEnum):
    """INA ``msg_type`` values."""

    GRAD = 1  # worker -> aggregating switch or PS
    PARTIAL = 2  # switch -> PS
    RESULT = 3  # PS -> workers (via s_d's multicast, or unicast)
    CLEAR = 4  # PS -> switch: free the aggregator of a finished fragment
    # header only, loss recovery (docs/ina.md, "Loss recovery"): PS -> worker "re-send
    # this fragment to me"; PS -> switch "flush: send me what you hold for it";
    # worker -> PS "I lack this fragment's RESULT"
    NACK = 5


#: message types that are the header alone (no values)
HEADER_ONLY_TYPES = frozenset({MsgType.CLEAR, MsgType.NACK})


class InaFlags(IntFlag):
    """INA ``flags`` bits."""

    RETX = 0x01  # a retransmission (always sent straight to the PS with tag 0)
    VIA_SD = 0x02  # the tagged switch sends its aggregate to s_d (merged again), not the PS


#: Values per packet (one fragment) a job may choose, smallest (the default) first: one
#: compiled ina.p4 each (p4src/gen_lanes.py and p4src/include/config.p4 say the same;
#: tests/test_wire_constants.py checks).
INA_VALUE_SIZES = (64, 128, 256)
INA_VALUES = INA_VALUE_SIZES[0]  # the default; p4src/include/config.p4 says the same
INA_MAX_VALUES = INA_VALUE_SIZES[-1]
INA_MAX_WORKERS = 256  # bitmap width: worker ranks 0..255
INA_BITMAP_BYTES = INA_MAX_WORKERS // 8  # 32: the contributor bitmap on the wire
#: ``max_exp`` of a block with no proposal (plain fixed point, or all zeros): 0 is below
#: every biased exponent, so it never wins the max (docs/ina.md, "Block floating point").
INA_NO_EXP = 0


class _InaHeaderCodec:
    """The INA header's ``struct``: like ``struct.Struct`` (``pack``, ``unpack_from``,
    ``size``) but with the 256-bit bitmap as a Python ``int``.

    Fields, in wire order: msg_type, job_id, worker_id, fragment, tag, origin, bitmap,
    count, fanin, flags, sd_fanin, max_exp. ``pack`` takes 11 or 12 of them (``max_exp``
    defaults to 0); ``unpack_from`` returns all 12."""

    # one struct for the whole header, the bitmap as its 32 bytes: one call a packet
    # (the agents' per-packet cost; two structs and a slice cost 4x as much)
    _ALL = struct.Struct(f"!BBHIHH{INA_BITMAP_BYTES}sHHBHB")

    def __init__(self) -> None:
        self.size = self._ALL.size

    def pack(self, msg_type: int, job_id: int, worker_id: int, fragment: int, tag: int,
             origin: int, bitmap: int, count: int, fanin: int, flags: int, sd_fanin: int,
             max_exp: int = 0) -> bytes:
        """The header's wire bytes; ``struct.error``/``OverflowError`` on out-of-range
        fields (a negative or wider-than-256-bit bitmap included)."""
        try:
            bm = bitmap.to_bytes(INA_BITMAP_BYTES, "big")
        except (OverflowError, AttributeError) as e:
            raise struct.error(f"bitmap {bitmap!r} does not fit {INA_MAX_WORKERS} bits") from e
        return self._ALL.pack(msg_type, job_id, worker_id, fragment, tag, origin, bm, count,
                              fanin, flags, sd_fanin, max_exp)

    def unpack_from(self, data: Any, offset: int = 0) -> tuple[int, ...]:
        """The 12 fields at ``offset`` of ``data`` (``struct.error`` if too short)."""
        mt, job, wid, frag, tag, origin, bm, cnt, fanin, flags, sdf, mx = self._ALL.unpack_from(data, offset)
        return mt, job, wid, frag, tag, origin, int.from_bytes(bm, "big"), cnt, fanin, flags, sdf, mx


INA_HEADER = _InaHeaderCodec()
INA_HEADER_LEN = INA_HEADER.size  # 52
INA_VALUES_LEN = 4 * INA_VALUES  # 256 (default size)
INA_PACKET_LEN = INA_HEADER_LEN + INA_VALUES_LEN  # 308: the UDP payload (default size)
assert INA_HEADER_LEN == 52


def check_values_per_packet(values_per_packet: Any) -> int:
    """``values_per_packet`` as an ``int`` if it is one of ``INA_VALUE_SIZES``, else
    ``ValueError`` (a switch runs the ina.p4 compiled for one size)."""
    if isinstance(values_per_packet, bool) or values_per_packet not in INA_VALUE_SIZES:
        raise ValueError(f"values per packet must be one of {', '.join(map(str, INA_VALUE_SIZES))}, "
                         f"got {values_per_packet!r}")
    return int(values_per_packet)


def ina_packet_len(values_per_packet: int = INA_VALUES) -> int:
    """UDP payload bytes of an INA packet carrying values: 308, 564 or 1076."""
    return INA_HEADER_LEN + 4 * check_values_per_packet(values_per_packet)


class InaDecodeError(ValueError):
    """A datagram that is not a well-formed INA packet."""


class InaHeader(NamedTuple):
    """The 52-byte INA header, field order as on the wire."""

    msg_type: int
    job_id: int
    worker_id: int
    fragment: int
    tag: int
    origin: int
    bitmap: int
    count: int
    fanin: int
    flags: int
    sd_fanin: int
    max_exp: int = 0


def values_to_bytes(values: Any, values_per_packet: int | None = None) -> bytes:
    """``values_per_packet`` int32 values (array-like, or their wire bytes) -> wire bytes.
    None: as many as ``values`` has if that is one of ``INA_VALUE_SIZES`` (zeros: 64)."""
    v = None if values_per_packet is None else check_values_per_packet(values_per_packet)
    if values is None:
        return bytes(4 * (v or INA_VALUES))
    if isinstance(values, bytes | bytearray | memoryview):
        b = bytes(values)
        want = [4 * v] if v else [4 * n for n in INA_VALUE_SIZES]
        if len(b) not in want:
            raise ValueError(f"values must be {' or '.join(map(str, want))} bytes, got {len(b)}")
        return b
    a = np.asarray(values)
    shapes = [(v,)] if v else [(n,) for n in INA_VALUE_SIZES]
    if a.shape not in shapes:
        raise ValueError(f"values must have shape {' or '.join(map(str, shapes))}, got {a.shape}")
    if a.dtype.kind not in "iu":
        raise ValueError(f"values must be integers (fixed point), got dtype {a.dtype}")
    if a.dtype.itemsize > 4 and (a.min() < -(2**31) or a.max() > 2**31 - 1):
        raise ValueError("values out of int32 range")
    return a.astype(BE_I32).tobytes()


def encode_ina(
    msg_type: int,
    job_id: int,
    worker_id: int = 0,
    fragment: int = 0,
    tag: int = 0,
    origin: int = 0,
    bitmap: int = 0,
    count: int = 0,
    fanin: int = 0,
    flags: int = 0,
    sd_fanin: int = 0,
    values: Any = None,
    max_exp: int = 0,
    values_per_packet: int | None = None,
) -> bytes:
    """One INA UDP payload: ``ina_packet_len(V)`` bytes (308 for 64 values), or the
    52-byte header alone for ``CLEAR`` and ``NACK``, which carry no values. ``values``:
    V int32s, their ``4·V`` wire bytes, or None (zeros; must be None for ``CLEAR`` and
    ``NACK``);
    ``values_per_packet`` V: one of ``INA_VALUE_SIZES``, None = as many as ``values``
    has (64 for zeros). Raises ``struct.error``/``ValueError`` on out-of-range fields."""
    hdr = INA_HEADER.pack(
        msg_type, job_id, worker_id, fragment, tag, origin, bitmap, count, fanin, flags,
        sd_fanin, max_exp,
    )
    if msg_type in HEADER_ONLY_TYPES:
        if values is not None:
            raise ValueError(f"a {MsgType(msg_type).name} carries no values")
        return hdr
    return hdr + values_to_bytes(values, values_per_packet)


def decode_ina_header(data: bytes | bytearray | memoryview,
                      values_per_packet: int = INA_VALUES) -> InaHeader:
    """The header of an INA payload of ``values_per_packet`` values; raises
    ``InaDecodeError`` if it is too short (``ina_packet_len``, 52 for a ``CLEAR`` or
    ``NACK``)."""
    need = ina_packet_len(values_per_packet)
    if len(data) < need and not (len(data) >= INA_HEADER_LEN and data[0] in HEADER_ONLY_TYPES):
        raise InaDecodeError(f"INA packet is {len(data)} bytes, expected {need}")
    return InaHeader._make(INA_HEADER.unpack_from(data))


def decode_ina(data: bytes | bytearray | memoryview,
               values_per_packet: int = INA_VALUES) -> tuple[InaHeader, np.ndarray]:
    """Header and values (native ``int32`` array of ``values_per_packet``) of an INA
    payload.

    Bytes beyond ``ina_packet_len`` (e.g. Ethernet padding) are ignored; shorter input
    raises ``InaDecodeError``. The message type is not checked here (receivers count
    unknown types themselves). A ``CLEAR`` or ``NACK`` (header only) decodes with zeros."""
    hdr = decode_ina_header(data, values_per_packet)
    if len(data) < ina_packet_len(values_per_packet):  # a CLEAR or NACK
        return hdr, np.zeros(values_per_packet, np.int32)
    vals = np.frombuffer(data, dtype=BE_I32, count=values_per_packet, offset=INA_HEADER_LEN)
    return hdr, vals.astype(np.int32)


