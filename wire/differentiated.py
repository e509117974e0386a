"""Differentiated transmission on the wire (docs/differentiated.md).

* Block messages: the six location fields first, in the specified order; then the block's
  iteration, sender, level, flags and value count; then ``count`` big-endian float32
  values. Unreliable blocks travel on UDP port ``DIFF_UDP_PORT``, one DSCP per level, each
  datagram holding block messages of one level back to back (up to ``MAX_DATAGRAM``
  bytes, so packet counts compare with TCP's full segments); important ones on the
  reliable channel.
* Reliable channel: one TCP connection per worker to the PS (port ``DIFF_TCP_PORT``),
  DSCP ``DSCP_IMPORTANT`` (the highest priority queue). It carries framed messages
  ``kind (1 byte) | length (4 bytes, big-endian) | body``: the worker's hello, each
  iteration's manifest, the important block messages, and the PS's new parameters back.
* DSCP per level and the switches' priority of each (the controller installs
  :func:`dscp_priority_map`).

The scapy view: :func:`wire.scapy_layers.diff_block_layer`; the sockets:
``hosts/differentiated/channel.py``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from wire.ports import DIFF_UDP_PORT

__all__ = [
    "DIFF_BLOCK_HEADER",
    "DIFF_BLOCK_HEADER_LEN",
    "DIFF_LEVEL_IMPORTANT",
    "DIFF_TCP_PORT",
    "DIFF_UDP_PORT",
    "DSCP_BEST_EFFORT",
    "DSCP_IMPORTANT",
    "DSCP_LEVELS",
    "FRAME",
    "MAX_DATAGRAM",
    "NB_QUEUES",
    "DiffBlockHeader",
    "DiffDecodeError",
    "Kind",
    "ack_body",
    "decode_diff_block",
    "dscp_priority_map",
    "encode_diff_block",
    "frame",
    "level_dscp",
    "level_priority",
    "manifest",
    "pack_datagrams",
    "parse_ack",
    "params_body",
    "parse_manifest",
    "parse_params",
]

# ----------------------------------------------------------------------------- block messages

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
    """The 34-byte block header, field order as on the wire (the six location fields first)."""

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


# ----------------------------------------------------------------------------- channels

DSCP_IMPORTANT = 46  # EF
DSCP_LEVELS = (34, 26, 18, 10, 12, 20, 28)  # AF41, AF31, AF21, AF11, AF12, AF22, AF32: levels 1..7
DSCP_BEST_EFFORT = 0  # the all-unreliable contrast: every block on one (lowest) priority
MAX_DATAGRAM = 1400  # UDP payload bytes (fits a 1500-byte MTU with IP and UDP headers)
NB_QUEUES = 8


class Kind:
    """TCP message kinds."""

    HELLO = b"H"  # worker -> PS: rank (u16), world (u16)
    MANIFEST = b"M"  # worker -> PS: iteration, important blocks, unreliable datagrams per level
    BLOCK = b"B"  # worker -> PS: one important block message (above)
    PARAMS = b"P"  # PS -> worker: iteration (u32), stop flag (u8), float32 parameters
    ACK = b"A"  # PS -> worker (error feedback): iteration (u32), blocks (u32), delivered bitmap
    BYE = b"X"  # worker -> PS: summary JSON


FRAME = struct.Struct("!cI")
MANIFEST = struct.Struct("!IIH")  # iteration, important blocks, levels; then u32 datagrams per level
PARAMS = struct.Struct("!IB")
ACK = struct.Struct("!II")  # iteration, number of blocks; then the bitmap, ceil(blocks / 8) bytes


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


def frame(kind: bytes, body: bytes = b"") -> bytes:
    """A framed message as bytes (to send several in one ``sendall``)."""
    return FRAME.pack(kind, len(body)) + body


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


def ack_body(iteration: int, delivered: Sequence[bool] | np.ndarray) -> bytes:
    """Body of an ACK: which of one worker's blocks of ``iteration`` went into the PS's
    update (bit j of the bitmap, most significant bit first, set for block j); the
    worker keeps the others as its error-feedback residual."""
    mask = np.asarray(delivered, dtype=bool).ravel()
    return ACK.pack(iteration, mask.size) + np.packbits(mask).tobytes()


def parse_ack(body: bytes) -> tuple[int, np.ndarray]:
    """(iteration, delivered mask as a bool array); :class:`DiffDecodeError` when the body
    is shorter than its header or its bitmap."""
    if len(body) < ACK.size:
        raise DiffDecodeError(f"ACK truncated: {len(body)} bytes, expected at least {ACK.size}")
    it, n = ACK.unpack_from(body)
    need = ACK.size + (n + 7) // 8
    if len(body) != need:
        raise DiffDecodeError(f"ACK of {n} blocks has {len(body)} bytes, expected {need}")
    bits = np.unpackbits(np.frombuffer(body, dtype=np.uint8, offset=ACK.size), count=n)
    return it, bits.astype(bool)


assert DIFF_BLOCK_HEADER_LEN < MAX_DATAGRAM
