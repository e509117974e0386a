"""Direct counters and meters of the native backend as seen from Python (direct.c), and
how table entries are laid out in native memory (keys, action data, scan order).

Every entry of a table with a direct counter or meter gets a cell handle, carried in its
last action data slot; its packets, bytes and meter state live in that native cell. The
Python ``TableEntry`` stays the control plane's record: ``Table.direct_read()`` (before
the P4Runtime server reads counters) copies the native counters into it, and
``Table.direct_written(entry)`` (after it wrote an entry's counters or meter config, or
the default's counters) copies them into native memory. A deleted entry's handle is
reused only once the delete has reached native memory (``commit``).
"""

from __future__ import annotations

import ctypes
from typing import Any

_NONE = (1 << 64) - 1  # the default entry's counters (np_direct_*'s handle)
_MASK64 = (1 << 64) - 1


def limbs(v: int, n: int) -> list[int]:
    """``v`` as ``n`` 64-bit limbs, least significant first."""
    return [(v >> (64 * i)) & _MASK64 for i in range(n)]


def bind_direct(lib: ctypes.CDLL) -> None:
    """Declare direct.c's entry points."""
    vp, u64, i, dbl = ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int, ctypes.c_double
    lib.np_direct_reserve.restype, lib.np_direct_reserve.argtypes = i, [vp, i, u64]
    lib.np_direct_set.restype, lib.np_direct_set.argtypes = i, [vp, i, u64, i, u64, u64, i, dbl, dbl, dbl, dbl]
    lib.np_direct_get.restype, lib.np_direct_get.argtypes = i, [vp, i, u64, ctypes.POINTER(u64), ctypes.POINTER(u64)]


class DirectCells:
    """The cell handles of one backend's tables with direct resources."""

    def __init__(self, be: Any) -> None:
        self.be = be
        gen = be.gen
        self.tables = {name for name in be.prog.tables if gen.has_direct(name)}
        self.handles: dict[str, dict[Any, int]] = {n: {} for n in self.tables}
        self.free: dict[str, list[int]] = {n: [] for n in self.tables}
        self.cap: dict[str, int] = dict.fromkeys(self.tables, 0)
        self.next: dict[str, int] = dict.fromkeys(self.tables, 0)  # handles handed out
        self.pending: list[tuple[str, int]] = []  # released, not yet reusable
        self._buf, self._add = (ctypes.c_uint64 * 2)(), (ctypes.c_uint64 * 2)()
        # (table, handle or _NONE) -> the counters native memory had when last synced: what
        # the Python entry counts beyond them, the Python path counted (a packet it finished)
        self.base: dict[tuple[str, int], tuple[int, int]] = {}
        for name in self.tables:
            tbl = be.prog.tables[name]
            tbl.on_direct, tbl.on_read = self.written, self.read
            self._reserve(name, 64)
            self.written(tbl, None, True, False)

    def _reserve(self, name: str, n: int) -> None:
        if n > self.cap[name]:
            cap = max(n, 2 * self.cap[name])
            if self.be.lib.np_direct_reserve(self.be.ctx, self.be.gen.tbl_index[name], cap):
                raise MemoryError(f"table {name}: no memory for {cap} direct cells")
            self.cap[name] = cap

    def handle(self, tbl: Any, op: str, entry: Any) -> int:
        """The cell of ``entry`` for a table change ``op`` (insert, modify, delete, copy):
        a new one for an entry not seen yet, its state written from the entry."""
        ident = tbl._identity(entry.key, entry.priority)
        hs = self.handles[tbl.name]
        h = hs.get(ident)
        if h is None:
            free = self.free[tbl.name]
            if free:
                h = free.pop()
            else:
                h = self.next[tbl.name]
                self.next[tbl.name] += 1
            self._reserve(tbl.name, h + 1)
            hs[ident] = h
            self._push(tbl, h, entry, True, True)
        if op == "delete":
            del hs[ident]
            self.pending.append((tbl.name, h))
        return h

    def sweep(self, tbl: Any, live: set[Any]) -> None:
        """After a whole copy: release the cells of entries gone."""
        hs = self.handles[tbl.name]
        for ident in [i for i in hs if i not in live]:
            self.pending.append((tbl.name, hs.pop(ident)))

    def commit(self) -> None:
        """The released cells may be reused (their entries left native memory)."""
        for name, h in self.pending:
            self.free[name].append(h)
        self.pending.clear()

    def _push(self, tbl: Any, h: int, entry: Any, counters: bool, meter: bool) -> None:
        cfg = entry.meter_config
        how = (2 if cfg is not None else 0) if meter else 1  # np_direct_set's meter
        if counters:
            self.base[(tbl.name, h)] = (entry.packets & _NONE, entry.bytes & _NONE)
        cir, cb, pir, pb = (float(x) for x in cfg) if cfg is not None else (0.0,) * 4
        self.be.lib.np_direct_set(self.be.ctx, self.be.gen.tbl_index[tbl.name], h, int(counters), entry.packets & _NONE,
                                  entry.bytes & _NONE, how, cir, cb, pir, pb)

    def written(self, tbl: Any, entry: Any, counters: bool, meter: bool) -> None:
        """``Table.on_direct``: an entry's counters (when ``counters``) and its meter
        config (when ``meter``: restarted from its next packet) were written in Python
        (entry None: the default's counters)."""
        t = self.be.gen.tbl_index[tbl.name]
        if entry is None:
            self.base[(tbl.name, _NONE)] = (tbl.default_packets & _NONE, tbl.default_bytes & _NONE)
            self.be.lib.np_direct_set(self.be.ctx, t, _NONE, 1, tbl.default_packets & _NONE,
                                      tbl.default_bytes & _NONE, 1, 0.0, 0.0, 0.0, 0.0)
            return
        h = self.handles[tbl.name].get(tbl._identity(entry.key, entry.priority))
        if h is not None:
            self._push(tbl, h, entry, counters, meter)

    def read(self, tbl: Any) -> None:
        """``Table.on_read``: the native counters into the table's entries (plus what the
        Python path counted in them since the last sync, added in native memory too)."""
        hs = self.handles[tbl.name]
        for e in tbl.entries():
            h = hs.get(tbl._identity(e.key, e.priority))
            if h is not None:
                e.packets, e.bytes = self._pull(tbl.name, h, e.packets, e.bytes)
        tbl.default_packets, tbl.default_bytes = self._pull(tbl.name, _NONE, tbl.default_packets, tbl.default_bytes)

    def _pull(self, name: str, h: int, packets: int, nbytes: int) -> tuple[int, int]:
        bp, bb = self.base.get((name, h), (0, 0))
        self._add[0], self._add[1] = (packets - bp) & _NONE, (nbytes - bb) & _NONE
        if self.be.lib.np_direct_get(self.be.ctx, self.be.gen.tbl_index[name], h, self._add, self._buf):
            return packets, nbytes
        got = int(self._buf[0]), int(self._buf[1])
        self.base[(name, h)] = got
        return got


# -- how entries are laid out in native memory (binding.py) -------------------------
def sort_key(tbl: Any, e: Any) -> int:
    """Where an entry sits in the native scan (descending): its prefix length in an LPM
    table, its priority in a ternary one, 0 in an exact one (hashed, not scanned)."""
    if tbl.kind == "lpm":
        return int(e.key[tbl._lpm_pos][1])
    return int(e.priority) if tbl.kind != "exact" else 0


def encode_key(keys: Any, key: tuple) -> tuple[list[int], list[int]]:
    """A key as native limbs: values and masks (a range: low and high)."""
    vals, masks = [], []
    for kf, v in zip(keys, key, strict=True):
        w = kf.bitwidth
        n = (w + 63) // 64
        full = (1 << w) - 1
        mt = kf.match_type
        if mt == "exact":
            value, mask = v, full
        elif mt == "lpm":
            value, plen = v
            mask = full ^ ((1 << (w - plen)) - 1)
        elif mt in ("ternary", "optional"):
            value, mask = v
        else:  # range: low in the value, high in the mask
            value, mask = v
        vals += limbs(value, n)
        masks += limbs(mask, n)
    return vals, masks


def encode_params(params: tuple[int, ...], n: int) -> list[int]:
    """Action data as ``n`` slots of four limbs."""
    out: list[int] = []
    for p in params:
        out += limbs(p, 4)
    return out + [0] * (4 * (n - len(params)))
