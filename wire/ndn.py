"""NDN on the wire (ndn, docs/ndn.md): TLV v0.3 packets as python-ndn encodes them.

* Names are python-ndn component lists, checked against ndn.p4's parser bounds before
  anything is sent (:func:`check_name` raises :class:`NameBoundsError`);
  :func:`prefix_hash` is ndn.p4's ``h_k`` (the FIB's and persistent PIT's keys).
* Interests and Data: :func:`interest_packet`, :func:`data_packet`, :func:`decode`.
* float32 arrays travel as segments of :data:`SEGMENT_VALUES` values (one Data each,
  fitting a 1500-byte MTU).
* Over Ethernet: EtherType ``ETHERTYPE_NDN`` to NDN's multicast MAC :data:`NDN_MAC`; over
  UDP: port ``NDN_UDP_PORT`` (NFD's). The faces that send them: ``hosts/ndn/faces/``.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from ndn.encoding import (
    Component,
    InterestParam,
    MetaInfo,
    Name,
    make_data,
    make_interest,
    parse_data,
    parse_interest,
    parse_tl_num,
)

from wire.ports import ETHERTYPE_NDN, NDN_UDP_PORT

__all__ = [
    "DISTRIBUTE_MARKER",
    "ETHERTYPE_NDN",
    "INSERT_MARKER",
    "MAX_COMPONENT",
    "MAX_COMPONENT_TYPE",
    "MAX_DEPTH",
    "MAX_NAME_BYTES",
    "NDN_MAC",
    "NDN_UDP_PORT",
    "SEGMENT_VALUES",
    "UNSUBSCRIBE_MARKER",
    "NameBoundsError",
    "Packet",
    "check_name",
    "comp_str",
    "components",
    "data_packet",
    "decode",
    "interest_packet",
    "join_segments",
    "marker",
    "n_segments",
    "name_of",
    "ndn_payload",
    "prefix_hash",
    "seg_of",
    "segments",
    "version_of",
]

#: Parser bounds of ndn.p4 (p4src/include/ndn_headers.p4).
MAX_NAME_BYTES = 64
MAX_DEPTH = 6
MAX_COMPONENT = 16
MAX_COMPONENT_TYPE = 127
INSERT_MARKER = b"*insert*"
DISTRIBUTE_MARKER = b"*distribute*"
#: ours: ends a subscription before its soft state would expire (ndn_persistent_pit.p4)
UNSUBSCRIBE_MARKER = b"*unsubscribe*"


class NameBoundsError(ValueError):
    """An NDN name outside what ndn.p4's parser accepts (docs/ndn.md, "Bounds")."""


def components(name: str | Sequence[bytes]) -> list[tuple[int, bytes]]:
    """``[(type, value)]`` of a name (python-ndn string form or component list)."""
    n = Name.from_str(name) if isinstance(name, str) else list(name)
    return [(Component.get_type(c), bytes(Component.get_value(c))) for c in n]


def check_name(name: str | Sequence[bytes]) -> list[bytes]:
    """The name as python-ndn components, or :class:`NameBoundsError` when ndn.p4 would
    drop it: more than 6 components, a component value over 16 bytes or of type >= 128
    (or in a multi-byte TLV form), or a Name TLV value over 64 bytes."""
    n = Name.from_str(name) if isinstance(name, str) else [bytes(c) for c in name]
    text = Name.to_str(n)
    if not n:
        raise NameBoundsError("an NDN name needs at least one component")
    if len(n) > MAX_DEPTH:
        raise NameBoundsError(f"name {text} has {len(n)} components; ndn.p4 parses at most {MAX_DEPTH}")
    for c in n:
        t, v = Component.get_type(c), Component.get_value(c)
        if t > MAX_COMPONENT_TYPE:
            raise NameBoundsError(f"name {text}: component type {t} >= 128 is not parsed by ndn.p4")
        if len(v) > MAX_COMPONENT:
            raise NameBoundsError(f"name {text}: component {Component.to_str(c)!r} has {len(v)} bytes; "
                                  f"ndn.p4 parses at most {MAX_COMPONENT}")
    size = sum(len(c) for c in n)
    if size > MAX_NAME_BYTES:
        raise NameBoundsError(f"name {text} is {size} bytes long; ndn.p4 parses at most {MAX_NAME_BYTES}")
    return list(n)


def _slot(t: int, v: bytes) -> bytes:
    # One metadata slot of ndn.p4: type (8), length (8), value right-aligned in 128 bits.
    return bytes([t, len(v)]) + v.rjust(MAX_COMPONENT, b"\0")


def prefix_hash(name: str | Sequence[bytes], k: int | None = None) -> int:
    """crc32 of the first ``k`` components (default all), as ndn.p4's ``h_k``."""
    comps = components(name)
    k = len(comps) if k is None else k
    if not 1 <= k <= min(len(comps), MAX_DEPTH):
        raise NameBoundsError(f"prefix length {k} out of 1..{min(len(comps), MAX_DEPTH)}")
    return zlib.crc32(b"".join(_slot(t, v) for t, v in comps[:k])) & 0xFFFFFFFF


NDN_MAC = bytes.fromhex("01005e0017aa")
#: float32 values per Data segment: 1,400 content bytes, the Data stays under 1,500.
SEGMENT_VALUES = 350
TLV_INTEREST, TLV_DATA = 0x05, 0x06


def ndn_payload(buf: bytes | memoryview) -> memoryview:
    """The NDN packet at the start of ``buf`` (Ethernet padding after it cut off).

    Raises ``ValueError`` when ``buf`` does not start with a whole TLV."""
    mv = memoryview(buf)
    typ, n1 = parse_tl_num(mv, 0)
    length, n2 = parse_tl_num(mv, n1)
    end = n1 + n2 + length
    if typ not in (TLV_INTEREST, TLV_DATA) or end > len(mv):
        raise ValueError("not a whole NDN Interest or Data")
    return mv[:end]


@dataclass
class Packet:
    """A decoded NDN packet: ``kind`` is ``"interest"`` or ``"data"``."""

    kind: str
    name: list[bytes]
    content: bytes = b""
    source: Any = None            # UdpFace: the sender's (ip, port)

    @property
    def uri(self) -> str:
        return Name.to_str(self.name)


def decode(buf: bytes | memoryview, source: Any = None) -> Packet | None:
    """Decode an Interest or Data (None for anything else or a malformed packet)."""
    try:
        pkt = ndn_payload(buf)
        if pkt[0] == TLV_INTEREST:
            name, _, _, _ = parse_interest(pkt, with_tl=True)
            return Packet("interest", [bytes(c) for c in name], source=source)
        name, _, content, _ = parse_data(pkt, with_tl=True)
        return Packet("data", [bytes(c) for c in name], bytes(content or b""), source=source)
    except Exception:  # python-ndn raises several types on bad input
        return None


_nonce = struct.unpack("I", os.urandom(4))[0]


def interest_packet(name: str | list[bytes], lifetime_ms: int = 4000) -> bytes:
    """An encoded Interest (fresh nonce); :class:`NameBoundsError` outside the bounds."""
    global _nonce
    comps = check_name(name)
    _nonce = (_nonce + 1) & 0xFFFFFFFF
    return bytes(make_interest(comps, InterestParam(lifetime=lifetime_ms, nonce=_nonce)))


def data_packet(name: str | list[bytes], content: bytes = b"", final_block: int | None = None) -> bytes:
    """An encoded Data (unsigned: the emulated network trusts its hosts)."""
    comps = check_name(name)
    meta = MetaInfo(final_block_id=Component.from_segment(final_block) if final_block is not None else None)
    return bytes(make_data(comps, meta, content))


def marker(name: list[bytes]) -> str | None:
    """``"insert"`` / ``"distribute"`` when the first component is that marker."""
    if not name:
        return None
    v = bytes(Component.get_value(name[0]))
    return {INSERT_MARKER: "insert", DISTRIBUTE_MARKER: "distribute",
            UNSUBSCRIBE_MARKER: "unsubscribe"}.get(v)


def comp_str(c: bytes) -> str:
    """A component as text (generic: its bytes; typed: python-ndn's ``seg=5`` form)."""
    return Component.to_str(c)


def segments(arr: np.ndarray) -> list[bytes]:
    """A float32 array as little-endian segments of :data:`SEGMENT_VALUES` values."""
    raw = np.ascontiguousarray(arr, dtype="<f4").tobytes()
    step = SEGMENT_VALUES * 4
    return [raw[i:i + step] for i in range(0, max(len(raw), 1), step)] or [b""]


def n_segments(n_values: int) -> int:
    """How many segments a ``n_values`` float32 array takes."""
    return max(1, -(-n_values // SEGMENT_VALUES))


def join_segments(parts: Mapping[int, bytes], n_values: int) -> np.ndarray:
    """Reassemble ``{segment: bytes}`` into a float32 array (every segment present)."""
    raw = b"".join(parts[i] for i in range(n_segments(n_values)))
    return np.frombuffer(raw, dtype="<f4", count=n_values).copy()


def name_of(*parts: str | bytes) -> list[bytes]:
    """A name from components: ``str`` parts in python-ndn URI form (``seg=3``, ``v=2``),
    ``bytes`` parts as generic components with those exact bytes."""
    out: list[bytes] = []
    for p in parts:
        if isinstance(p, bytes):
            out.append(bytes(Component.from_bytes(p)))
        else:
            out.append(bytes(Component.from_str(p)))
    return out


def seg_of(name: list[bytes]) -> int:
    """The segment number of a name ending in ``seg=N``."""
    return Component.to_number(name[-1])


def version_of(c: bytes) -> int:
    """The number of a ``v=N`` component."""
    return Component.to_number(c)
