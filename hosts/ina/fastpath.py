"""The INA agents' per-packet costs, cut where Python allows (docs/ina.md, "The agents'
CPU").

What a worker's fragment costs here: a ``sendto`` and a ``recvfrom`` (the kernel's
UDP and loopback or veth work, about a third of the agents' CPU), and the interpreter's
steps around them. This module holds what takes interpreter steps off the hot paths
without touching the protocol:

- :func:`grad_packets`: every first-send GRAD of an allreduce built at once with numpy
  (headers as a structured array, values copied in one block), so a send is one
  ``sendto`` of a ready ``memoryview`` slice: no header packing, no slicing and joining
  of bytes per packet;
- :func:`rare_gc`: the cyclic garbage collector run rarely while a loop runs: the hot
  paths allocate a tuple or two a packet and create no cycles, yet every 700
  allocations started a collection (a few % of an agent's CPU).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np

from wire.ina import INA_BITMAP_BYTES, INA_HEADER_LEN, MsgType

#: The INA header as a numpy structured type (big-endian, no padding): the wire order of
#: ``wire.ina.INA_HEADER``.
HEADER_DTYPE = np.dtype([("msg_type", "u1"), ("job", "u1"), ("worker", ">u2"), ("fragment", ">u4"),
                         ("tag", ">u2"), ("origin", ">u2"), ("bitmap", f"V{INA_BITMAP_BYTES}"),
                         ("count", ">u2"), ("fanin", ">u2"), ("flags", "u1"), ("sd_fanin", ">u2"),
                         ("max_exp", "u1")])
assert HEADER_DTYPE.itemsize == INA_HEADER_LEN

_LIMITS = {"fragment": 2**32 - 1, "tag": 2**16 - 1, "fanin": 2**16 - 1, "flags": 255,
           "sd_fanin": 2**16 - 1, "max_exp": 255}


def grad_packets(job: int, rank: int, bit: int, offset: int, tags: Sequence[int],
                 fanin: Sequence[int], flags: Sequence[int], sd_fanin: Sequence[int],
                 exps: Sequence[int], payload: bytes | bytearray, vl: int) -> memoryview | None:
    """The first-send GRAD of each of the ``len(tags)`` fragments, back to back (fragment
    ``f`` at ``f * (INA_HEADER_LEN + vl)``): the bytes ``INA_HEADER.pack`` + the values
    slice would give. None when a field does not fit its width (the caller packs those
    one by one, and ``struct`` says what is wrong)."""
    n_f = len(tags)
    cols = {"fragment": np.arange(offset, offset + n_f, dtype=np.int64),
            "tag": np.asarray(tags, dtype=np.int64), "fanin": np.asarray(fanin, dtype=np.int64),
            "flags": np.asarray(flags, dtype=np.int64), "sd_fanin": np.asarray(sd_fanin, dtype=np.int64),
            "max_exp": np.asarray(exps, dtype=np.int64)}
    if (any(c.size and (c.min() < 0 or c.max() > _LIMITS[k]) for k, c in cols.items())
            or len(payload) < n_f * vl or not 0 <= bit < 1 << 8 * INA_BITMAP_BYTES):
        return None
    hdr = np.zeros(n_f, dtype=HEADER_DTYPE)
    hdr["msg_type"], hdr["job"], hdr["worker"], hdr["count"] = int(MsgType.GRAD), job, rank, 1
    hdr["bitmap"] = np.void(bit.to_bytes(INA_BITMAP_BYTES, "big"))
    for k, c in cols.items():
        hdr[k] = c
    pl = INA_HEADER_LEN + vl
    out = np.empty((n_f, pl), dtype=np.uint8)
    out[:, :INA_HEADER_LEN] = hdr.view(np.uint8).reshape(n_f, INA_HEADER_LEN)
    out[:, INA_HEADER_LEN:] = np.frombuffer(payload, np.uint8, n_f * vl).reshape(n_f, vl)
    return memoryview(out.reshape(-1))


@contextmanager
def rare_gc(threshold: int = 100_000) -> Iterator[None]:
    """Collections of the youngest generation every ``threshold`` allocations instead of
    700 for the block (thresholds back as they were after): the collector still runs,
    140 times less often."""
    old = gc.get_threshold()
    gc.set_threshold(max(threshold, old[0]), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)
