"""BCube/BML messages (docs/bcube.md): framed messages on TCP connections between servers,
TCP port ``BCUBE_TCP_PORT``. A message is the 16-byte header below followed by ``count``
big-endian int32 fixed-point values. The schedule they follow: :mod:`wire.bcube_schedule`;
the scapy view: :func:`wire.scapy_layers.bcube_layer`."""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import NamedTuple

import numpy as np

from wire.ina import BE_I32
from wire.ports import BCUBE_UDP_PORT

__all__ = [
    "BCUBE_HEADER",
    "BCUBE_HEADER_LEN",
    "BCUBE_MAGIC",
    "BCUBE_MAX_VALUES",
    "BCUBE_TCP_PORT",
    "BcubeDecodeError",
    "BcubeHeader",
    "BcubeMsg",
    "decode_bcube_header",
    "encode_bcube_header",
    "encode_bcube_values",
]


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
    return np.asarray(values, dtype=np.int32).astype(BE_I32).tobytes()
