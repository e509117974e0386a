"""The native backend's state and packet path as seen from Python (ctypes).

``NativeBackend(prog)`` builds the program's C, creates one native instance and moves
the program's state into it: register cells and counters become list-like views of
native memory (``CellsView``), so the P4Runtime server, the runtime CLI and the Python
packet path read and write the same cells; table writes, which keep going to the Python
``state.Table`` (the control plane's record), reach the native table at once
(``Table.on_change``): one entry in place (tblops.c), or a whole copy. Each native call takes the instance's lock, so a read or write is
atomic with respect to packets.
"""

from __future__ import annotations

import contextlib
import ctypes
import random
import threading
from collections.abc import Iterator
from typing import Any

from targets.embedded.action_profiles import IndirectRef
from targets.embedded.native.build import build
from targets.embedded.native.cgen import NativeGen, reads_clock
from targets.embedded.native.direct import (
    DirectCells,
    bind_direct,
    encode_key,
    encode_params,
    limbs,
    sort_key,
)
from targets.embedded.native.nmeters import adopt_meters, bind_meters
from targets.embedded.native.nprofiles import NativeProfiles, bind_profiles, ref_data
from targets.embedded.native.nvsets import NativeValueSets, bind_vsets

_U64 = ctypes.c_uint64
_EV_PIN = 1 << 63  # meta.c: a packet-in's first word
_MASK64 = (1 << 64) - 1


def _join(limbs: Any) -> int:
    return sum(int(x) << (64 * i) for i, x in enumerate(limbs))


def _bind(lib: ctypes.CDLL) -> None:
    vp, u32, i32 = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int32
    p64 = ctypes.POINTER(_U64)
    sigs = {
        "np_new": (vp, [_U64]), "np_free": (None, [vp]),
        "np_reg_get": (ctypes.c_int, [vp, ctypes.c_int, _U64, p64]),
        "np_reg_set": (ctypes.c_int, [vp, ctypes.c_int, _U64, p64]),
        "np_ctr_get": (ctypes.c_int, [vp, ctypes.c_int, _U64, p64]),
        "np_reg_dump": (ctypes.c_int, [vp, ctypes.c_int, p64]),
        "np_reg_load": (ctypes.c_int, [vp, ctypes.c_int, p64]),
        "np_ctr_set": (ctypes.c_int, [vp, ctypes.c_int, _U64, _U64, _U64]),
        "np_tbl_load": (ctypes.c_int, [vp, ctypes.c_int, ctypes.c_int, p64, p64, ctypes.POINTER(i32), p64, i32, p64,
                                       ctypes.POINTER(ctypes.c_int64)]),
        "np_tbl_op": (ctypes.c_int, [vp, ctypes.c_int, ctypes.c_int, p64, p64, ctypes.c_int64, i32, p64, ctypes.c_int]),
        "np_lock": (None, [vp]), "np_unlock": (None, [vp]),
        "np_phv": (u32, [vp, p64, p64]),
        "np_pre_set": (ctypes.c_int, [vp, ctypes.c_int, _U64, u32, ctypes.POINTER(u32), ctypes.POINTER(u32), u32]),
        "np_pre_del": (ctypes.c_int, [vp, ctypes.c_int, _U64]), "np_pre_clear": (ctypes.c_int, [vp, ctypes.c_int]),
        "np_mc_out": (u32, [vp, ctypes.POINTER(u32), u32]), "np_mc_arena": (vp, [vp]),
        "np_mc_stop": (u32, [vp, ctypes.c_int, p64, ctypes.POINTER(u32), ctypes.POINTER(u32), p64, p64]),
        "np_rx_pending": (u32, [vp]),
        "np_rx_take": (u32, [vp, ctypes.c_char_p, u32, ctypes.POINTER(u32)]),
        "np_loops": (u32, [vp, ctypes.POINTER(u32), ctypes.POINTER(u32)]),
        "np_cur": (u32, [vp, ctypes.c_char_p, u32]),
        "np_digests": (u32, [vp, p64, u32]), "np_dq_words": (u32, []), "np_dq_count": (vp, [vp]),
        "np_rx": (ctypes.c_int, [vp, ctypes.c_int, u32, _U64, u32, ctypes.c_char_p, ctypes.POINTER(i32), p64, u32,
                                 ctypes.c_char_p, ctypes.POINTER(u32), ctypes.POINTER(u32)]),
        "np_cnt_words": (u32, []), "np_clock_origin": (None, [vp, ctypes.c_double]),
        "np_process": (ctypes.c_int, [vp, ctypes.c_char_p, u32, u32, _U64, u32, ctypes.c_char_p, ctypes.c_char_p, u32,
                                      ctypes.POINTER(u32), ctypes.POINTER(u32), ctypes.POINTER(u32)]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args


class CellsView:
    """A list-like view of one native register (``kind`` "reg") or one column of a
    native counter (``kind`` "packets" / "bytes"): what ``RegisterArray.cells`` and
    ``CounterArray.packets/bytes`` were, with the same indexing and slice assignment."""

    def __init__(self, be: NativeBackend, kind: str, index: int, size: int) -> None:
        self._be, self._kind, self._k, self._size = be, kind, index, size
        self._buf = (_U64 * 4)()
        self.wide = True  # a register over 64 bits (set by the backend)

    def __len__(self) -> int:
        return self._size

    def _get(self, i: int) -> int:
        lib, ctx, buf = self._be.lib, self._be.ctx, self._buf
        if self._kind == "reg":
            lib.np_reg_get(ctx, self._k, i, buf)
            return _join(buf)
        lib.np_ctr_get(ctx, self._k, i, buf)
        return int(buf[0] if self._kind == "packets" else buf[1])

    def _set(self, i: int, v: int) -> None:
        lib, ctx = self._be.lib, self._be.ctx
        if self._kind == "reg":
            self._buf[:] = limbs(v, 4)
            lib.np_reg_set(ctx, self._k, i, self._buf)
            return
        lib.np_ctr_get(ctx, self._k, i, self._buf)
        p, b = int(self._buf[0]), int(self._buf[1])
        p, b = (v, b) if self._kind == "packets" else (p, v)
        lib.np_ctr_set(ctx, self._k, i, p & _MASK64, b & _MASK64)

    def _whole(self) -> list[int]:
        buf = (_U64 * (4 * self._size))()
        self._be.lib.np_reg_dump(self._be.ctx, self._k, buf)
        if not self.wide:  # one limb a cell
            return list(buf[0::4])
        return [_join(buf[4 * j:4 * j + 4]) for j in range(self._size)]

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            if self._kind == "reg" and i == slice(None):
                return self._whole()  # one native call, not one per cell
            return [self._get(j) for j in range(*i.indices(self._size))]
        if i < 0:
            i += self._size
        if not 0 <= i < self._size:
            raise IndexError("cell index out of range")
        return self._get(i)

    def __setitem__(self, i: int | slice, v: Any) -> None:
        if isinstance(i, slice):
            idx = range(*i.indices(self._size))
            vals = list(v)
            if len(vals) != len(idx):
                raise ValueError("slice assignment changes the size of native cells")
            if self._kind == "reg" and len(idx) == self._size and idx.step == 1:
                buf = (_U64 * (4 * self._size))(*[x for val in vals for x in limbs(val, 4)])
                self._be.lib.np_reg_load(self._be.ctx, self._k, buf)
                return
            for j, x in zip(idx, vals, strict=True):
                self._set(j, x)
            return
        if i < 0:
            i += self._size
        if not 0 <= i < self._size:
            raise IndexError("cell index out of range")
        self._set(i, v)

    def __iter__(self) -> Any:
        return iter(self[:])

    def __eq__(self, other: object) -> bool:
        return list(self) == list(other) if isinstance(other, list | CellsView) else NotImplemented

    def __repr__(self) -> str:
        return f"CellsView({self[:]!r})"


class NativeBackend:
    """One native instance of a compiled Program (see the module doc)."""

    def __init__(self, prog: Any, seed: int | None = None, extra_flags: tuple[str, ...] = (),
                 gen: NativeGen | None = None) -> None:
        self.prog = prog
        self.gen = gen or NativeGen(prog)  # raises Unsupported naming what is missing
        self._sync_lock = threading.Lock()  # one table copy at a time: the last one has the last write
        self._deferred: dict[str, Any] | None = None  # tables changed inside deferred_sync()
        self.path = build(self.gen.source, extra_flags)
        self.lib = ctypes.CDLL(str(self.path))
        _bind(self.lib)
        bind_meters(self.lib)
        bind_direct(self.lib)
        bind_profiles(self.lib)
        bind_vsets(self.lib)
        self.ctx = self.lib.np_new(seed if seed is not None else random.getrandbits(64))
        self.out = ctypes.create_string_buffer(65536 + self.gen.hdr_max + 64)
        self.outlen, self.outport, self.outprio = ctypes.c_uint32(), ctypes.c_uint32(), ctypes.c_uint32()
        self.slow = ctypes.create_string_buffer(65536 + 8)
        self.slowlen, self.slowinfo = ctypes.c_uint32(), ctypes.c_uint32()
        # resubmit or recirculate: a packet may make several passes (glue.receive asks)
        self.reenters = any(p["op"].startswith(("resubmit", "recirculate")) for a in prog.spec["actions"]
                            for p in a["primitives"])
        # digests and packet-ins queued in native memory (meta.c): the count read without a call
        self.dqn = ctypes.c_uint32.from_address(self.lib.np_dq_count(self.ctx))
        # the traffic manager's clocks (meta.c): the time passed in, from this origin
        self.clocked, self.t0 = reads_clock(prog), None
        self._F = (_U64 * prog.nslots)()
        self._W = (_U64 * (4 * max(1, len(self.gen.wide))))()
        self._adopt_state()

    def _adopt_state(self) -> None:
        prog = self.prog
        for name, reg in prog.registers.items():
            view = CellsView(self, "reg", self.gen.reg_index[name], reg.size)
            view.wide = reg.bitwidth > 64
            old = reg.cells
            view[:] = list(old)
            _rebind(prog._ns, old, view)
            reg.cells = view
        for name, ctr in prog.counters.items():
            k = self.gen.ctr_index[name]
            for kind in ("packets", "bytes"):
                view = CellsView(self, kind, k, ctr.size)
                view[:] = list(getattr(ctr, kind))
                setattr(ctr, kind, view)
        adopt_meters(self)
        self.direct = DirectCells(self)
        self.profiles = NativeProfiles(self)  # before the tables: their entries point into them
        self.value_sets = NativeValueSets(self)
        for tbl in prog.tables.values():
            tbl.on_change = self.sync_table  # first: a write from now on copies the table itself
            self.sync_table(tbl)

    def sync_table(self, tbl: Any, op: str | None = None, entry: Any = None) -> None:
        """Follow a change of a table (``Table.on_change``) in native memory: one entry
        inserted, modified or deleted, or the default set, in place (``op``); anything
        else copies the whole table. Inside ``deferred_sync``: when it ends."""
        deferred = self._deferred
        if deferred is not None and threading.get_ident() == self._defer_thread:
            ops = deferred.setdefault(tbl.name, (tbl, []))[1]
            if op is None or len(ops) > 16 + len(tbl) // 2:  # a copy costs less
                ops[:] = [None]
            elif ops[:1] != [None]:
                ops.append(self._encode_op(tbl, op, entry))
            return
        with self._sync_lock:
            if op is None or self._apply(tbl, [self._encode_op(tbl, op, entry)], locked=0):
                self._sync_table(tbl)
            self.direct.commit()

    def _encode_op(self, tbl: Any, op: str, entry: Any) -> tuple[Any, ...]:
        """One entry change as np_tbl_op's arguments (after the instance and table)."""
        np_, nk = self.gen.table_params(tbl), self.gen.key_limbs(tbl)
        k, m = ([0] * nk, [0] * nk) if entry is None else encode_key(tbl.keys, entry.key)
        arr = _U64 * max(1, nk)
        act, params = self._data(tbl, op, None if op == "default" else entry, np_)
        prio = 0 if entry is None else sort_key(tbl, entry)
        return _OPS[op], arr(*k), arr(*m), prio, act, (_U64 * max(1, 4 * np_))(*params)

    def _data(self, tbl: Any, op: str, entry: Any, np_: int) -> tuple[int, list[int]]:
        """An entry's (None: the default's) action id and data slots: a profile
        reference (nprofiles.py) or the action's parameters, and its direct cell."""
        action = tbl.default if entry is None else entry.action
        if isinstance(action, IndirectRef):
            act, params = 0, ref_data(action) + [0] * (4 * (np_ - 1))
        else:
            info = self.prog._table_actions[tbl.name].get(action.name)  # none: the empty default
            act, params = (-1 if info is None else info.id), encode_params(action.params, np_)
        if entry is not None and tbl.name in self.direct.tables:  # the entry's direct cell (direct.py)
            params[4 * (np_ - 1)] = self.direct.handle(tbl, op, entry)
        return act, params

    def _apply(self, tbl: Any, ops: list[tuple[Any, ...]], locked: int) -> bool:
        """Apply encoded changes to one table; True when one failed (copy the table)."""
        t = self.gen.tbl_index[tbl.name]
        return any([self.lib.np_tbl_op(self.ctx, t, *o, locked) for o in ops])

    @contextlib.contextmanager
    def deferred_sync(self) -> Iterator[None]:
        """Within it, table changes made by this thread reach native memory when it ends
        (a P4Runtime Write of many updates): the single-entry changes of every table
        under one hold of the instance's lock, so packets see the tables as they were
        until then. The Python table, the control plane's record, changes at once."""
        if self._deferred is not None:  # nested: the outer one copies
            yield
            return
        self._deferred, self._defer_thread = {}, threading.get_ident()
        try:
            yield
        finally:
            tables, self._deferred = self._deferred, None
            with self._sync_lock:
                whole = [tbl for tbl, ops in tables.values() if ops[:1] == [None]]
                self.lib.np_lock(self.ctx)
                try:
                    whole += [tbl for tbl, ops in tables.values() if ops[:1] != [None] and self._apply(tbl, ops, 1)]
                finally:
                    self.lib.np_unlock(self.ctx)
                for tbl in whole:
                    self._sync_table(tbl)
                self.direct.commit()

    def _sync_table(self, tbl: Any) -> None:
        gen = self.gen
        t = gen.tbl_index[tbl.name]
        nk, np_ = gen.key_limbs(tbl), gen.table_params(tbl)
        if tbl.kind == "exact":
            entries = list(tbl._exact.values())
        elif tbl.kind == "lpm":
            entries = [e for plen in list(tbl._lpm_lens) for e in list(tbl._lpm.get(plen, {}).values())]
        else:
            entries = list(tbl._scan)
        keys, masks, acts, data, prio = [], [], [], [], []
        direct = tbl.name in self.direct.tables
        for e in entries:
            k, m = encode_key(tbl.keys, e.key)
            keys += k
            masks += m
            act, params = self._data(tbl, "copy", e, np_)
            acts.append(act)
            data += params
            prio.append(sort_key(tbl, e))
        if direct:
            self.direct.sweep(tbl, {tbl._identity(e.key, e.priority) for e in entries})
        n = len(entries)
        arr = _U64 * max(1, n * nk)
        dact, dparams = self._data(tbl, "default", None, np_)
        self.lib.np_tbl_load(self.ctx, t, n, arr(*keys), arr(*masks), (ctypes.c_int32 * max(1, n))(*acts),
                             (_U64 * max(1, 4 * n * np_))(*data), dact, (_U64 * max(1, 4 * np_))(*dparams),
                             (ctypes.c_int64 * max(1, n))(*prio))

    def set_pre(self, kind: int, entries: dict[int, Any], key: int | None = None) -> None:
        """Copy PRE entry ``key`` of ``entries`` -- multicast groups (``kind`` 0, replica
        lists) or clone sessions (1, ``CloneSession``s); absent: delete it -- into native
        memory, or all of them when ``key`` is None; each write is atomic with respect to
        packets."""
        if key is None:
            self.lib.np_pre_clear(self.ctx, kind)
            for k in list(entries):
                self.set_pre(kind, entries, k)
            return
        value = entries.get(key)
        if value is None:
            self.lib.np_pre_del(self.ctx, kind, key & _MASK64)
            return
        replicas, trunc = (value, 0) if kind == 0 else (value.replicas, value.packet_length_bytes)
        n = len(replicas)
        arr = ctypes.c_uint32 * max(1, n)
        self.lib.np_pre_set(self.ctx, kind, key & _MASK64, n, arr(*[min(r.port, 0xFFFFFFFF) for r in replicas]),
                            arr(*[r.rid & 0xFFFFFFFF for r in replicas]), min(max(trunc, 0), 0xFFFFFFFF))

    def current_frame(self) -> bytes:
        """The frame of the last pass of the last packet (a recirculation's, process.c)."""
        buf = getattr(self, "_cur", None)
        if buf is None:
            buf = self._cur = ctypes.create_string_buffer(65536)
        return buf.raw[:self.lib.np_cur(self.ctx, buf, len(buf))]

    def take_digests(self) -> list[tuple[str | None, Any]]:
        """The events the native code queued since the last call, in order (meta.c):
        a digest as (learn list name, its field values), as ``Switch._learn`` hands them
        to its handlers; a packet-in as (None, its frame)."""
        buf = getattr(self, "_dq", None)
        if buf is None or len(buf) < self.dqn.value:
            buf = self._dq = (_U64 * max(self.lib.np_dq_words(), self.dqn.value))()
        n = self.lib.np_digests(self.ctx, buf, len(buf))
        if n == 0xFFFFFFFF:  # it grew meanwhile: nothing was taken
            self._dq = None
            return self.take_digests()
        out: list[tuple[str | None, Any]] = []
        i, wide, lists = 0, self.gen.wide, self.prog.learn_by_id
        while i < n:
            w = buf[i]
            i += 1
            if w & _EV_PIN:
                length = w & 0xFFFFFFFF
                out.append((None, ctypes.string_at(ctypes.addressof(buf) + 8 * i, length)))
                i += (length + 7) // 8
                continue
            ll = lists[w]
            values = []
            for s in ll.slots:
                k = 4 if s in wide else 1
                values.append(_join(buf[i:i + 4]) if k == 4 else buf[i])
                i += k
            out.append((ll.name, tuple(values)))
        return out

    def phv(self) -> tuple[list[int], int]:
        """The PHV the last ``process`` left (as the Python backend's list) and the
        payload offset."""
        off = self.lib.np_phv(self.ctx, self._F, self._W)
        return self.unpack(), off

    def unpack(self) -> list[int]:
        """The PHV in the instance's transfer buffers, as the Python backend's list."""
        F = list(self._F)
        W = self._W
        for s, i in self.gen.wide.items():
            F[s] = _join(W[4 * i:4 * i + 4])
        return F

    def close(self) -> None:
        self.dqn = None  # it points into the instance
        if self.ctx:
            self.lib.np_free(self.ctx)
            self.ctx = None

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # interpreter shutdown
            self.close()


_OPS = {"insert": 0, "modify": 1, "delete": 2, "default": 3}  # np_tbl_op's op


def _rebind(ns: dict[str, Any], old: Any, new: Any) -> None:
    """Point the generated Python code's names for ``old`` at ``new``."""
    for k, v in list(ns.items()):
        if v is old:
            ns[k] = new
