"""Packet formats of the host agents (wire layouts fixed in docs/*.md).

Two views of every format, which the tests keep identical byte for byte:

* scapy ``Packet`` classes (``INA``, ``INAValues``), for tests, debugging and pcap
  dissection. They are built lazily on first attribute access (PEP 562), because
  importing scapy costs 1-3 s and the agents never need it.
* a ``struct``-based codec (``encode_ina``/``decode_ina`` and the raw ``INA_HEADER``
  struct) for the agents' hot path: scapy builds ~40 packets/s, the agents must do
  tens of thousands.

Technique 1, in-network aggregation (docs/ina.md): UDP port 40000, payload = 52-byte
INA header (a 256-bit contributor bitmap) + V big-endian two's-complement int32 values,
V = 64 (the default), 128 or 256 per job (``INA_VALUE_SIZES``; docs/ina.md, "Values per
packet").

Reserved for the other techniques (add their formats here, same two views):

* technique 2, NDN: TLV v0.3 (python-ndn) over UDP 6363 / EtherType 0x8624
* technique 3, differentiated blocks: UDP 40001
* technique 4, BCube level exchanges: UDP 40002
* technique 5, token broadcast: EtherType 0x88B5 (over IP for tests: UDP 40003)
"""

from __future__ import annotations

import struct
from enum import IntEnum, IntFlag
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

if TYPE_CHECKING:  # the scapy classes exist only after the first lazy access
    from scapy.packet import Packet

__all__ = [
    "BCUBE_UDP_PORT",
    "DIFF_UDP_PORT",
    "INA",  # noqa: F822 (lazy, module __getattr__)
    "INAValues",  # noqa: F822
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
    "InaHeader",
    "MsgType",
    "NDN_UDP_PORT",
    "TOKEN_UDP_PORT",
    "check_values_per_packet",
    "decode_ina",
    "decode_ina_header",
    "encode_ina",
    "ina_packet_len",
]

# UDP ports: mirror p4src/include/config.p4 (change both together).
INA_UDP_PORT = 40000  # 1: in-network aggregation
DIFF_UDP_PORT = 40001  # 3: differentiated blocks (unreliable)
BCUBE_UDP_PORT = 40002  # 4: BCube level exchanges
TOKEN_UDP_PORT = 40003  # 5: token broadcast over IP (tests)
NDN_UDP_PORT = 6363  # 2: NDN over UDP

# ----------------------------------------------------------------------------- INA


class MsgType(IntEnum):
    """INA ``msg_type`` values."""

    GRAD = 1  # worker -> aggregating switch or PS
    PARTIAL = 2  # switch -> PS
    RESULT = 3  # PS -> workers (via s_d's multicast, or unicast)
    CLEAR = 4  # PS -> switch: free the aggregator of a finished fragment


class InaFlags(IntFlag):
    """INA ``flags`` bits."""

    RETX = 0x01  # a retransmission (always sent straight to the PS with tag 0)
    VIA_SD = 0x02  # the tagged switch sends its aggregate to s_d (merged again), not the PS


#: Values per packet (one fragment) a job may choose, smallest (the default) first: one
#: compiled ina.p4 each (p4src/gen_lanes.py INA_VALUE_SIZES says the same).
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

    _HEAD = struct.Struct("!BBHIHH")  # 12 bytes before the bitmap
    _TAIL = struct.Struct("!HHBHB")  # 8 bytes after it

    def __init__(self) -> None:
        self.size = self._HEAD.size + INA_BITMAP_BYTES + self._TAIL.size

    def pack(self, msg_type: int, job_id: int, worker_id: int, fragment: int, tag: int,
             origin: int, bitmap: int, count: int, fanin: int, flags: int, sd_fanin: int,
             max_exp: int = 0) -> bytes:
        """The header's wire bytes; ``struct.error``/``OverflowError`` on out-of-range
        fields (a negative or wider-than-256-bit bitmap included)."""
        try:
            bm = bitmap.to_bytes(INA_BITMAP_BYTES, "big")
        except (OverflowError, AttributeError) as e:
            raise struct.error(f"bitmap {bitmap!r} does not fit {INA_MAX_WORKERS} bits") from e
        return (self._HEAD.pack(msg_type, job_id, worker_id, fragment, tag, origin) + bm
                + self._TAIL.pack(count, fanin, flags, sd_fanin, max_exp))

    def unpack_from(self, data: Any, offset: int = 0) -> tuple[int, ...]:
        """The 12 fields at ``offset`` of ``data`` (``struct.error`` if too short)."""
        h = self._HEAD.unpack_from(data, offset)
        b = offset + self._HEAD.size
        if len(data) < b + INA_BITMAP_BYTES + self._TAIL.size:
            raise struct.error(f"INA header needs {self.size} bytes")
        bm = int.from_bytes(data[b:b + INA_BITMAP_BYTES], "big")
        return (*h, bm, *self._TAIL.unpack_from(data, b + INA_BITMAP_BYTES))


INA_HEADER = _InaHeaderCodec()
INA_HEADER_LEN = INA_HEADER.size  # 52
INA_VALUES_LEN = 4 * INA_VALUES  # 256 (default size)
INA_PACKET_LEN = INA_HEADER_LEN + INA_VALUES_LEN  # 308: the UDP payload (default size)
assert INA_HEADER_LEN == 52

_BE_I32 = np.dtype(">i4")


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
    return a.astype(_BE_I32).tobytes()


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
    52-byte header alone for ``CLEAR``, which carries no values. ``values``: V int32s,
    their ``4·V`` wire bytes, or None (zeros; must be None for ``CLEAR``);
    ``values_per_packet`` V: one of ``INA_VALUE_SIZES``, None = as many as ``values``
    has (64 for zeros). Raises ``struct.error``/``ValueError`` on out-of-range fields."""
    hdr = INA_HEADER.pack(
        msg_type, job_id, worker_id, fragment, tag, origin, bitmap, count, fanin, flags,
        sd_fanin, max_exp,
    )
    if msg_type == MsgType.CLEAR:
        if values is not None:
            raise ValueError("a CLEAR carries no values")
        return hdr
    return hdr + values_to_bytes(values, values_per_packet)


def decode_ina_header(data: bytes | bytearray | memoryview,
                      values_per_packet: int = INA_VALUES) -> InaHeader:
    """The header of an INA payload of ``values_per_packet`` values; raises
    ``InaDecodeError`` if it is too short (``ina_packet_len``, 52 for a ``CLEAR``)."""
    need = ina_packet_len(values_per_packet)
    if len(data) < need and not (len(data) >= INA_HEADER_LEN and data[0] == MsgType.CLEAR):
        raise InaDecodeError(f"INA packet is {len(data)} bytes, expected {need}")
    return InaHeader._make(INA_HEADER.unpack_from(data))


def decode_ina(data: bytes | bytearray | memoryview,
               values_per_packet: int = INA_VALUES) -> tuple[InaHeader, np.ndarray]:
    """Header and values (native ``int32`` array of ``values_per_packet``) of an INA
    payload.

    Bytes beyond ``ina_packet_len`` (e.g. Ethernet padding) are ignored; shorter input
    raises ``InaDecodeError``. The message type is not checked here (receivers count
    unknown types themselves). A ``CLEAR`` (header only) decodes with zeros."""
    hdr = decode_ina_header(data, values_per_packet)
    if len(data) < ina_packet_len(values_per_packet):  # a CLEAR
        return hdr, np.zeros(values_per_packet, np.int32)
    vals = np.frombuffer(data, dtype=_BE_I32, count=values_per_packet, offset=INA_HEADER_LEN)
    return hdr, vals.astype(np.int32)


# ----------------------------------------------------------------------------- scapy

_SCAPY: dict[str, type[Packet]] = {}


def _build_scapy_layers() -> dict[str, type[Packet]]:
    """Define the scapy layers and bind them (once)."""
    if _SCAPY:
        return _SCAPY
    from scapy.fields import (
        ByteEnumField,
        ByteField,
        Field,
        FieldListField,
        FlagsField,
        IntField,
        ShortField,
        SignedIntField,
    )
    from scapy.layers.inet import UDP
    from scapy.packet import Packet, bind_layers

    class BitmapField(Field[int, bytes]):
        """The 256-bit contributor bitmap: an ``int`` in Python, 32 bytes on the wire."""

        def __init__(self, name: str, default: int) -> None:
            super().__init__(name, default, f"{INA_BITMAP_BYTES}s")

        def i2m(self, pkt: Packet | None, x: int | None) -> bytes:
            return int(x or 0).to_bytes(INA_BITMAP_BYTES, "big")

        def m2i(self, pkt: Packet | None, x: bytes) -> int:
            return int.from_bytes(x, "big")

        def any2i(self, pkt: Packet | None, x: Any) -> int:
            return int.from_bytes(x, "big") if isinstance(x, bytes) else int(x)

        def i2repr(self, pkt: Packet | None, x: int) -> str:
            return hex(x)

    class INA(Packet):
        """INA header (docs/ina.md); its payload is ``INAValues``."""

        name = "INA"
        fields_desc = [
            ByteEnumField("msg_type", MsgType.GRAD, {m.value: m.name for m in MsgType}),
            ByteField("job_id", 0),
            ShortField("worker_id", 0),
            IntField("fragment", 0),
            ShortField("tag", 0),
            ShortField("origin", 0),
            BitmapField("bitmap", 0),
            ShortField("count", 0),
            ShortField("fanin", 0),
            FlagsField("flags", 0, 8, ["RETX", "VIA_SD"]),  # bit 0, bit 1
            ShortField("sd_fanin", 0),
            ByteField("max_exp", 0),
        ]

    class INAValues(Packet):
        """The signed int32 fixed-point values that follow the INA header: 64, 128 or
        256 (``INA_VALUE_SIZES``); a dissected packet has as many as its payload holds."""

        name = "INAValues"
        fields_desc = [
            FieldListField(
                "values",
                [0] * INA_VALUES,
                # no count: the rest of the payload (IP and UDP strip any Ethernet padding)
                SignedIntField("v", 0),
                max_count=INA_MAX_VALUES,
            )
        ]

        def post_build(self, pkt: bytes, pay: bytes) -> bytes:
            # a short list would silently build a short packet: refuse instead
            if len(self.values) not in INA_VALUE_SIZES:
                raise ValueError(f"INAValues needs {' or '.join(map(str, INA_VALUE_SIZES))} "
                                 f"values, got {len(self.values)}")
            return pkt + pay

    bind_layers(UDP, INA, dport=INA_UDP_PORT)
    bind_layers(INA, INAValues)
    _SCAPY.update(INA=INA, INAValues=INAValues)
    return _SCAPY


def __getattr__(name: str) -> Any:
    # PEP 562: ``from hosts.packets import INA`` imports scapy on first use only.
    if name in ("INA", "INAValues"):
        return _build_scapy_layers()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ----------------------------------------------------------------------------- BCube / BML
# Technique 4 (docs/bcube.md): framed messages on TCP connections between servers,
# TCP port BCUBE_TCP_PORT (the number reserved for BCube above). A message is the
# 16-byte header below followed by ``count`` big-endian int32 fixed-point values.


class BcubeMsg(IntEnum):
    """BCube/baseline ``msg_type`` values."""

    HELLO = 1  # first message of a connection: who connects, on which level
    REDUCE = 2  # BML aggregation stage: a slice to be reduced by the receiver
    GATHER = 3  # BML distribution stage: a fully reduced slice
    PUSH = 4  # PS baselines: a worker's shard to its parameter server
    PULL = 5  # PS baselines: a summed shard back to a worker
    RING_REDUCE = 6  # ring all-reduce, reduce-scatter step
    RING_GATHER = 7  # ring all-reduce, all-gather step
    ROUND = 8  # repeated all-reduce (hosts.bml.collective): later messages are round ``offset``


BCUBE_TCP_PORT = BCUBE_UDP_PORT
BCUBE_MAGIC = 0xBC03
BCUBE_MAX_VALUES = 2**32 - 1
# magic, msg_type, thread, stage, level, sender, offset, count
BCUBE_HEADER = struct.Struct("!HBBBBHII")
BCUBE_HEADER_LEN = BCUBE_HEADER.size  # 16
assert BCUBE_HEADER_LEN == 16


class BcubeDecodeError(ValueError):
    """Bytes that are not a BCube message header."""


class BcubeHeader(NamedTuple):
    """The 16-byte BCube message header, field order as on the wire."""

    msg_type: int
    thread: int
    stage: int
    level: int
    sender: int
    offset: int  # index of the first value in the whole gradient
    count: int  # int32 values that follow


def encode_bcube_header(msg_type: int, thread: int = 0, stage: int = 0, level: int = 0,
                        sender: int = 0, offset: int = 0, count: int = 0) -> bytes:
    """A BCube header; ``struct.error`` on out-of-range fields."""
    return BCUBE_HEADER.pack(BCUBE_MAGIC, msg_type, thread, stage, level, sender, offset, count)


def decode_bcube_header(data: bytes | bytearray | memoryview) -> BcubeHeader:
    """Parse a header; :class:`BcubeDecodeError` on short input, bad magic or type."""
    if len(data) < BCUBE_HEADER_LEN:
        raise BcubeDecodeError(f"BCube header is {len(data)} bytes, expected {BCUBE_HEADER_LEN}")
    magic, *fields = BCUBE_HEADER.unpack_from(data)
    if magic != BCUBE_MAGIC:
        raise BcubeDecodeError(f"bad BCube magic {magic:#06x} (expected {BCUBE_MAGIC:#06x})")
    hdr = BcubeHeader(*fields)
    if hdr.msg_type not in BcubeMsg._value2member_map_:
        raise BcubeDecodeError(f"unknown BCube msg_type {hdr.msg_type}")
    return hdr


def encode_bcube_values(values: np.ndarray) -> bytes:
    """int32 values as wire bytes (big-endian)."""
    return np.asarray(values, dtype=np.int32).astype(_BE_I32).tobytes()


_BCUBE_SCAPY: dict[str, type[Packet]] = {}


def bcube_layer() -> type[Packet]:
    """The scapy layer ``BCube`` (header + int32 values; built on first call, scapy is
    slow to import), bound to TCP port BCUBE_TCP_PORT: it dissects a segment that starts
    a message (TCP streams do not keep message boundaries)."""
    if _BCUBE_SCAPY:
        return _BCUBE_SCAPY["BCube"]
    from scapy.fields import (
        ByteEnumField,
        ByteField,
        FieldListField,
        IntField,
        ShortField,
        SignedIntField,
        XShortField,
    )
    from scapy.layers.inet import TCP
    from scapy.packet import Packet, bind_layers

    class BCube(Packet):
        """BCube/BML message (docs/bcube.md)."""

        name = "BCube"
        fields_desc = [
            XShortField("magic", BCUBE_MAGIC),
            ByteEnumField("msg_type", BcubeMsg.REDUCE, {m.value: m.name for m in BcubeMsg}),
            ByteField("thread", 0),
            ByteField("stage", 0),
            ByteField("level", 0),
            ShortField("sender", 0),
            IntField("offset", 0),
            IntField("count", None),
            FieldListField("values", [], SignedIntField("", 0), count_from=lambda p: p.count),
        ]

        def post_build(self, p: bytes, pay: bytes) -> bytes:
            if self.count is None:
                p = p[:12] + struct.pack("!I", len(self.values)) + p[16:]
            return p + pay

    for field in ("dport", "sport"):
        bind_layers(TCP, BCube, **{field: BCUBE_TCP_PORT})
    _BCUBE_SCAPY["BCube"] = BCube
    return BCube


# ----------------------------------------------------------------------------- differentiated
# Technique 3 (docs/differentiated.md): gradient block messages. The six fields of the
# seed's claim 3 come first, in its order; then the block's iteration, sender, level,
# flags and value count; then ``count`` big-endian float32 values. Unreliable blocks
# travel on UDP port DIFF_UDP_PORT (several block messages of one level per datagram),
# reliable ones on a TCP stream (port DIFF_TCP_PORT) framed by hosts/differentiated/wire.py.

DIFF_TCP_PORT = DIFF_UDP_PORT
# tensor_index, block_index, first_block, last_block, tensor_bytes, position,
# iteration, worker, level, flags, count
DIFF_BLOCK_HEADER = struct.Struct("!HIIIIIIHBBI")
DIFF_BLOCK_HEADER_LEN = DIFF_BLOCK_HEADER.size  # 34
assert DIFF_BLOCK_HEADER_LEN == 34
DIFF_LEVEL_IMPORTANT = 0  # ``level`` of an important (reliable) block; 1.. unimportant
_BE_F32 = np.dtype(">f4")


class DiffDecodeError(ValueError):
    """Bytes that are not a well-formed differentiated block message."""


class DiffBlockHeader(NamedTuple):
    """The 34-byte block header, field order as on the wire (claim 3's six first)."""

    tensor_index: int  # which gradient tensor (parameter) of the model
    block_index: int  # global block number (blocks of all tensors numbered in order)
    first_block: int  # block_index of the tensor's first block
    last_block: int  # block_index of the tensor's last block
    tensor_bytes: int  # the whole tensor's size in bytes (float32)
    position: int  # byte offset of this block inside its tensor
    iteration: int  # training iteration (synchronisation round)
    worker: int  # sender's rank
    level: int  # 0: important (reliable); 1..L: unimportant level, 1 most important
    flags: int  # reserved, 0
    count: int  # float32 values that follow


def encode_diff_block(hdr: DiffBlockHeader, values: np.ndarray) -> bytes:
    """One block message: header + ``values`` as big-endian float32 (bit-exact).

    ``hdr.count`` must equal ``values.size``; ``struct.error`` on out-of-range fields."""
    v = np.asarray(values, dtype=np.float32).ravel()
    if hdr.count != v.size:
        raise ValueError(f"header count {hdr.count} != {v.size} values")
    return DIFF_BLOCK_HEADER.pack(*hdr) + v.astype(_BE_F32).tobytes()


def decode_diff_block(data: bytes | bytearray | memoryview,
                      offset: int = 0) -> tuple[DiffBlockHeader, np.ndarray, int]:
    """Parse the block message at ``offset``; returns (header, float32 values, offset of
    the next message). :class:`DiffDecodeError` on truncated or inconsistent input."""
    if len(data) - offset < DIFF_BLOCK_HEADER_LEN:
        raise DiffDecodeError(f"block header truncated: {len(data) - offset} bytes, "
                              f"expected {DIFF_BLOCK_HEADER_LEN}")
    hdr = DiffBlockHeader(*DIFF_BLOCK_HEADER.unpack_from(data, offset))
    start = offset + DIFF_BLOCK_HEADER_LEN
    end = start + 4 * hdr.count
    if end > len(data):
        raise DiffDecodeError(f"block {hdr.block_index}: {hdr.count} values announced, "
                              f"{(len(data) - start) // 4} present")
    if not hdr.first_block <= hdr.block_index <= hdr.last_block:
        raise DiffDecodeError(f"block {hdr.block_index} outside its tensor's blocks "
                              f"{hdr.first_block}..{hdr.last_block}")
    if hdr.position + 4 * hdr.count > hdr.tensor_bytes:
        raise DiffDecodeError(f"block {hdr.block_index} at byte {hdr.position} (+{4 * hdr.count}) "
                              f"overruns its {hdr.tensor_bytes}-byte tensor")
    values = np.frombuffer(bytes(data[start:end]), dtype=_BE_F32).astype(np.float32)
    return hdr, values, end


_DIFF_SCAPY: dict[str, type[Packet]] = {}


def diff_block_layer() -> type[Packet]:
    """The scapy layer ``DiffBlock`` (built on first call; scapy is slow to import),
    bound to UDP port DIFF_UDP_PORT. Its ``values`` are the big-endian float32 payload."""
    if _DIFF_SCAPY:
        return _DIFF_SCAPY["DiffBlock"]
    from scapy.fields import (
        ByteField,
        FieldListField,
        IEEEFloatField,
        IntField,
        ShortField,
    )
    from scapy.layers.inet import UDP
    from scapy.packet import Packet, bind_layers

    class DiffBlock(Packet):
        """Differentiated block message (docs/differentiated.md)."""

        name = "DiffBlock"
        fields_desc = [
            ShortField("tensor_index", 0),
            IntField("block_index", 0),
            IntField("first_block", 0),
            IntField("last_block", 0),
            IntField("tensor_bytes", 0),
            IntField("position", 0),
            IntField("iteration", 0),
            ShortField("worker", 0),
            ByteField("level", 0),
            ByteField("flags", 0),
            IntField("count", None),
            FieldListField("values", [], IEEEFloatField("", 0.0), count_from=lambda p: p.count),
        ]

        def post_build(self, p: bytes, pay: bytes) -> bytes:
            if self.count is None:
                p = p[:30] + struct.pack("!I", len(self.values)) + p[34:]
            return p + pay

    bind_layers(UDP, DiffBlock, dport=DIFF_UDP_PORT)
    bind_layers(DiffBlock, DiffBlock)  # the next block message of the same datagram
    _DIFF_SCAPY["DiffBlock"] = DiffBlock
    return DiffBlock


# ----------------------------------------------------------------------------- token (technique 5)
# Token-passing gradient broadcast (docs/token.md): Ethernet frames of EtherType 0x88B5
# carrying a 32-byte token header (whose ``next_holder`` is the token) and, for GRAD and
# READ/READ_REPLY, 128 int32 values. Mirrors p4src/include/token_headers.p4.

__all__ += [
    "ETH_HEADER", "TOKEN_BROADCAST_MAC", "TOKEN_ETHERTYPE", "TOKEN_HEADER", "TOKEN_HEADER_LEN",
    "TOKEN_MAX_FRAGS", "TOKEN_MAX_MEMBERS", "TOKEN_VALUES", "TOKEN_VALUES_LEN", "TokenDecodeError",
    "TokenFlags", "TokenHeader", "TokenMsg", "decode_token", "encode_token", "mac_bytes", "mac_text",
    "token_values",
]

TOKEN_ETHERTYPE = 0x88B5
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

    RESEND = 0x01  # a re-sent broadcast (s136)
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
            out += a.astype(_BE_I32).tobytes()
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
    return np.frombuffer(rest, dtype=_BE_I32, count=TOKEN_VALUES).astype(np.int32)
