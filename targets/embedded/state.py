"""Runtime state of the embedded target that the control plane reads and writes.

Tables, register arrays, counters, parser value sets and the packet replication engine
(multicast groups and clone sessions); action profiles are in ``action_profiles``, meters
in ``codegen.support``. Values are plain Python integers; match keys are tuples with
one element per key field of the table, in the order of the BMv2 JSON (which is also the
order of the match fields in P4Info):

- exact:    ``value``
- lpm:      ``(value, prefix_len)``
- ternary:  ``(value, mask)``
- optional: ``(value, mask)`` with mask all ones or 0 (wildcard)
- range:    ``(low, high)``

Priorities follow P4Runtime: a larger number wins.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any


class StateError(Exception):
    """A control-plane request that cannot be applied; ``code`` is a gRPC status name."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _mask(width: int) -> int:
    return (1 << width) - 1


@dataclass(slots=True)
class ActionCall:
    """An action with bound action data, ready to execute."""

    name: str
    params: tuple[int, ...]
    fn: Callable[..., Any] | None = None


@dataclass(slots=True)
class TableEntry:
    """One table entry; ``key`` uses the per-match-kind formats of the module doc."""

    key: tuple
    action: ActionCall
    priority: int = 0
    is_const: bool = False
    packets: int = 0
    bytes: int = 0
    meter_config: tuple | None = None
    meter: Any = None  # run-time state of the direct meter (compiler.Meter)
    idle_timeout_ns: int = 0
    metadata: bytes = b""


@dataclass(slots=True)
class KeyField:
    """A match field of a table: name (as in P4Info), match kind and bit width."""

    name: str
    match_type: str
    bitwidth: int


class Table:
    """A match-action table with BMv2 lookup semantics.

    Lookup strategy is chosen from the match kinds at load time: a dict for exact-only
    tables, one dict per prefix length for a single LPM field (longest prefix first), and
    a priority-ordered scan for ternary, range and optional fields.
    """

    def __init__(
        self,
        name: str,
        keys: list[KeyField],
        action_names: list[str],
        max_size: int,
        default: ActionCall,
        default_const: bool = False,
        has_direct_counter: bool = False,
        resolve: Callable[[str, tuple[int, ...]], ActionCall] | None = None,
    ) -> None:
        self.name = name
        self.keys = keys
        self.action_names = action_names
        self.max_size = max_size
        self.initial_default = default
        self.default = default
        self.default_const = default_const
        self.has_direct_counter = has_direct_counter
        self.default_packets = 0
        self.default_bytes = 0
        self._resolve = resolve
        kinds = {k.match_type for k in keys}
        if kinds <= {"exact"}:
            self.kind = "exact"
        elif kinds <= {"exact", "lpm"} and sum(k.match_type == "lpm" for k in keys) == 1:
            self.kind = "lpm"
            self._lpm_pos = next(i for i, k in enumerate(keys) if k.match_type == "lpm")
            self._lpm_width = keys[self._lpm_pos].bitwidth
        else:
            self.kind = "ternary"
        self.needs_priority = self.kind == "ternary"
        self._entries: dict[tuple, TableEntry] = {}
        self._exact: dict[tuple, TableEntry] = {}
        self._lpm: dict[int, dict[tuple, TableEntry]] = {}
        self._lpm_lens: list[int] = []
        self._scan: list[TableEntry] = []
        self._lock = threading.Lock()
        # tables with an action profile / selector: an action_profiles.ActionProfile (not
        # imported here: that module builds on this one)
        self.profile: Any = None
        # called after every change of its entries or default with the table, what changed
        # ("insert", "modify", "delete" with the entry, "default"; None: anything) (the
        # native backend follows it in native memory)
        self.on_change: Callable[[Table, str | None, TableEntry | None], None] | None = None
        # the native backend's direct counters and meters: on_direct after an entry's
        # (None: the default's) counters or meter config were written here, on_read before
        # they are read (they count in native memory)
        self.on_direct: Callable[[Table, TableEntry | None, bool, bool], None] | None = None
        self.on_read: Callable[[Table], None] | None = None

    def _changed(self, op: str | None = None, entry: TableEntry | None = None) -> None:
        if self.on_change is not None:
            self.on_change(self, op, entry)

    def direct_written(self, entry: TableEntry | None, counters: bool = True, meter: bool = False) -> None:
        """After writing ``entry``'s counters (when ``counters``; None: the default's) and
        its meter config (when ``meter``) in place."""
        if self.on_direct is not None:
            self.on_direct(self, entry, counters, meter)

    def direct_read(self) -> None:
        """Before reading the entries' direct counters."""
        if self.on_read is not None:
            self.on_read(self)

    # -- control plane -------------------------------------------------------------
    def _identity(self, key: tuple, priority: int) -> tuple:
        return (key, priority if self.needs_priority else 0)

    def _check_key(self, key: tuple) -> tuple:
        if len(key) != len(self.keys):
            raise StateError(
                "INVALID_ARGUMENT",
                f"table {self.name}: {len(key)} match fields given, {len(self.keys)} expected",
            )
        out = []
        for kf, v in zip(self.keys, key, strict=True):
            m = _mask(kf.bitwidth)
            if kf.match_type == "exact":
                if not 0 <= v <= m:
                    raise StateError("INVALID_ARGUMENT", f"{self.name}.{kf.name}: value {v} exceeds {kf.bitwidth} bits")
                out.append(v)
            elif kf.match_type == "lpm":
                value, plen = v
                if not 0 <= plen <= kf.bitwidth:
                    raise StateError("INVALID_ARGUMENT", f"{self.name}.{kf.name}: prefix length {plen} out of range")
                pmask = m ^ _mask(kf.bitwidth - plen)
                if value & ~pmask & m or value > m:
                    raise StateError("INVALID_ARGUMENT", f"{self.name}.{kf.name}: LPM value has bits past the prefix")
                out.append((value, plen))
            elif kf.match_type in ("ternary", "optional"):
                value, mask = v
                if value & ~mask or value > m or mask > m:
                    raise StateError("INVALID_ARGUMENT", f"{self.name}.{kf.name}: ternary value has bits outside the mask")
                out.append((value, mask))
            elif kf.match_type == "range":
                lo, hi = v
                if lo > hi or hi > m:
                    raise StateError("INVALID_ARGUMENT", f"{self.name}.{kf.name}: bad range [{lo}, {hi}]")
                out.append((lo, hi))
            else:
                raise StateError("UNIMPLEMENTED", f"match kind {kf.match_type}")
        return tuple(out)

    def insert(self, entry: TableEntry) -> None:
        """Add an entry; ALREADY_EXISTS if an entry with the same key and priority exists."""
        entry.key = self._check_key(entry.key)
        if self.needs_priority and entry.priority <= 0 and not entry.is_const:
            raise StateError("INVALID_ARGUMENT", f"table {self.name}: ternary/range entries need a priority > 0")
        ident = self._identity(entry.key, entry.priority)
        with self._lock:
            if ident in self._entries:
                raise StateError("ALREADY_EXISTS", f"table {self.name}: entry already exists")
            if len(self._entries) >= self.max_size:
                raise StateError("RESOURCE_EXHAUSTED", f"table {self.name} is full ({self.max_size} entries)")
            self._entries[ident] = entry
            self._index_add(entry)
        self._changed("insert", entry)

    def modify(self, key: tuple, priority: int, action: ActionCall) -> TableEntry:
        """Replace the action of an existing entry."""
        key = self._check_key(key)
        with self._lock:
            entry = self._entries.get(self._identity(key, priority))
            if entry is None:
                raise StateError("NOT_FOUND", f"table {self.name}: no such entry")
            if entry.is_const:
                raise StateError("PERMISSION_DENIED", f"table {self.name}: entry is const")
            entry.action = action
        self._changed("modify", entry)
        return entry

    def delete(self, key: tuple, priority: int) -> None:
        """Remove an entry; NOT_FOUND if absent."""
        key = self._check_key(key)
        with self._lock:
            entry = self._entries.pop(self._identity(key, priority), None)
            if entry is None:
                raise StateError("NOT_FOUND", f"table {self.name}: no such entry")
            if entry.is_const:
                self._entries[self._identity(key, priority)] = entry
                raise StateError("PERMISSION_DENIED", f"table {self.name}: entry is const")
            self._index_remove(entry)
        self._changed("delete", entry)

    def get(self, key: tuple, priority: int) -> TableEntry | None:
        """The entry with exactly this key and priority, if any."""
        return self._entries.get(self._identity(self._check_key(key), priority))

    def clear(self) -> None:
        """Remove every non-const entry."""
        with self._lock:
            for ident, entry in list(self._entries.items()):
                if not entry.is_const:
                    del self._entries[ident]
                    self._index_remove(entry)
        self._changed()

    def entries(self) -> Iterator[TableEntry]:
        """A snapshot of all entries."""
        return iter(list(self._entries.values()))

    def __len__(self) -> int:
        return len(self._entries)

    def set_default(self, action: ActionCall) -> None:
        """Change the default action (PERMISSION_DENIED if the program made it const)."""
        if self.default_const:
            raise StateError("PERMISSION_DENIED", f"table {self.name}: default action is const")
        if action.name not in self.action_names:
            raise StateError("INVALID_ARGUMENT", f"table {self.name}: action {action.name} not allowed")
        self.default = action
        self._changed("default")

    def reset_default(self) -> None:
        """Back to the program's default action."""
        self.default = self.initial_default
        self._changed("default")

    # -- indexes -------------------------------------------------------------------
    def _lpm_index_key(self, key: tuple) -> tuple[int, tuple]:
        plen = key[self._lpm_pos][1]
        flat = tuple(k[0] if i == self._lpm_pos else k for i, k in enumerate(key))
        return plen, flat

    def _index_add(self, entry: TableEntry) -> None:
        if self.kind == "exact":
            self._exact[entry.key] = entry
        elif self.kind == "lpm":
            plen, flat = self._lpm_index_key(entry.key)
            bucket = self._lpm.setdefault(plen, {})
            bucket[flat] = entry
            self._lpm_lens = sorted(self._lpm, reverse=True)
        else:
            # A new list, not an in-place sort: the data plane may be scanning the old
            # one. Stable: among equal priorities the earlier entry wins.
            self._scan = sorted([*self._scan, entry], key=lambda e: -e.priority)

    def _index_remove(self, entry: TableEntry) -> None:
        if self.kind == "exact":
            self._exact.pop(entry.key, None)
        elif self.kind == "lpm":
            plen, flat = self._lpm_index_key(entry.key)
            bucket = self._lpm.get(plen, {})
            bucket.pop(flat, None)
            if not bucket:
                self._lpm.pop(plen, None)
            self._lpm_lens = sorted(self._lpm, reverse=True)
        else:
            self._scan = [e for e in self._scan if e is not entry]

    # -- data plane ----------------------------------------------------------------
    def lookup(self, key: tuple) -> TableEntry | None:
        """The matching entry for a packet's key values, or None on a miss."""
        if self.kind == "exact":
            return self._exact.get(key)
        if self.kind == "lpm":
            pos = self._lpm_pos
            width = self._lpm_width
            v = key[pos]
            for plen in self._lpm_lens:
                masked = (v >> (width - plen)) << (width - plen)
                probe = key[:pos] + (masked,) + key[pos + 1:]
                e = self._lpm[plen].get(probe)
                if e is not None:
                    return e
            return None
        for e in self._scan:
            if _matches(self.keys, e.key, key):
                return e
        return None


def _matches(keys: list[KeyField], ekey: tuple, key: tuple) -> bool:
    for kf, ev, v in zip(keys, ekey, key, strict=True):
        mt = kf.match_type
        if mt == "exact":
            if ev != v:
                return False
        elif mt == "lpm":
            value, plen = ev
            shift = kf.bitwidth - plen
            if (v >> shift) != (value >> shift):
                return False
        elif mt in ("ternary", "optional"):
            value, mask = ev
            if v & mask != value:
                return False
        elif mt == "range":
            lo, hi = ev
            if not lo <= v <= hi:
                return False
    return True


class RegisterArray:
    """A P4 register array of ``size`` cells of ``bitwidth`` bits."""

    def __init__(self, name: str, size: int, bitwidth: int) -> None:
        self.name = name
        self.size = size
        self.bitwidth = bitwidth
        self.mask = _mask(bitwidth)
        self.cells = [0] * size

    def read(self, index: int) -> int:
        if not 0 <= index < self.size:
            raise StateError("OUT_OF_RANGE", f"register {self.name}: index {index} >= size {self.size}")
        return self.cells[index]

    def write(self, index: int, value: int) -> None:
        if not 0 <= index < self.size:
            raise StateError("OUT_OF_RANGE", f"register {self.name}: index {index} >= size {self.size}")
        self.cells[index] = value & self.mask

    def reset(self) -> None:
        # In place: generated data-plane code holds a reference to ``cells``.
        self.cells[:] = [0] * self.size


class CounterArray:
    """An indirect counter array: per index a [packets, bytes] pair."""

    def __init__(self, name: str, size: int, kind: str = "packets_and_bytes") -> None:
        self.name = name
        self.size = size
        self.kind = kind
        self.packets = [0] * size
        self.bytes = [0] * size

    def count(self, index: int, length: int) -> None:
        if 0 <= index < self.size:
            self.packets[index] += 1
            self.bytes[index] += length

    def read(self, index: int) -> tuple[int, int]:
        if not 0 <= index < self.size:
            raise StateError("OUT_OF_RANGE", f"counter {self.name}: index {index} >= size {self.size}")
        return self.packets[index], self.bytes[index]

    def write(self, index: int, packets: int, nbytes: int) -> None:
        if not 0 <= index < self.size:
            raise StateError("OUT_OF_RANGE", f"counter {self.name}: index {index} >= size {self.size}")
        self.packets[index] = packets
        self.bytes[index] = nbytes


@dataclass(slots=True)
class Replica:
    """One copy made by the PRE: egress port and replication id (egress_rid)."""

    port: int
    rid: int


@dataclass
class CloneSession:
    """A clone (mirroring) session: where the copies go, and an optional truncation."""

    replicas: list[Replica]
    class_of_service: int = 0
    packet_length_bytes: int = 0


class GroupTable(dict):
    """The PRE's multicast groups (group id -> replicas) or clone sessions (id ->
    ``CloneSession``): a dict that calls ``on_change`` with the id written or deleted
    (None: any number of them), so that a copy elsewhere (the native backend's, in
    native memory) follows every write."""

    on_change: Callable[[int | None], None] | None = None

    def _changed(self, gid: int | None) -> None:
        if self.on_change is not None:
            self.on_change(gid)

    def __setitem__(self, gid: int, replicas: list[Replica]) -> None:
        super().__setitem__(gid, replicas)
        self._changed(gid)

    def __delitem__(self, gid: int) -> None:
        super().__delitem__(gid)
        self._changed(gid)

    def pop(self, gid: int, *default: Any) -> Any:
        had = gid in self
        out = super().pop(gid, *default)
        if had:
            self._changed(gid)
        return out

    def popitem(self) -> tuple[int, list[Replica]]:
        out = super().popitem()
        self._changed(out[0])
        return out

    def setdefault(self, gid: int, default: Any = None) -> Any:
        had = gid in self
        out = super().setdefault(gid, default)
        if not had:
            self._changed(gid)
        return out

    def clear(self) -> None:
        super().clear()
        self._changed(None)

    def update(self, *args: Any, **kw: Any) -> None:
        super().update(*args, **kw)
        self._changed(None)

    def __ior__(self, other: Any) -> GroupTable:
        self.update(other)
        return self


@dataclass
class PacketReplicationEngine:
    """Multicast groups and clone sessions, as written by P4Runtime PRE entries."""

    groups: GroupTable = field(default_factory=GroupTable)
    clone_sessions: GroupTable = field(default_factory=GroupTable)  # id -> CloneSession

    @staticmethod
    def _store(table: dict, key: int, value: object, create: bool, what: str) -> None:
        """P4Runtime INSERT (``create``) or MODIFY of one PRE entry."""
        if key <= 0:
            raise StateError("INVALID_ARGUMENT", f"{what} id must be > 0")
        exists = key in table
        if create and exists:
            raise StateError("ALREADY_EXISTS", f"{what} {key} exists")
        if not create and not exists:
            raise StateError("NOT_FOUND", f"{what} {key} does not exist")
        table[key] = value

    def set_group(self, group_id: int, replicas: list[Replica], *, create: bool) -> None:
        self._store(self.groups, group_id, list(replicas), create, "multicast group")

    def delete_group(self, group_id: int) -> None:
        if self.groups.pop(group_id, None) is None:
            raise StateError("NOT_FOUND", f"multicast group {group_id} does not exist")

    def set_clone_session(self, session_id: int, session: CloneSession, *, create: bool) -> None:
        self._store(self.clone_sessions, session_id, session, create, "clone session")

    def delete_clone_session(self, session_id: int) -> None:
        if self.clone_sessions.pop(session_id, None) is None:
            raise StateError("NOT_FOUND", f"clone session {session_id} does not exist")


# -- parser value sets -------------------------------------------------------------------
class ValueSetUse:
    """One ``select`` that uses a value set: its key's field widths, its mask, and the
    set's values laid out the way the parser builds that key (each field in whole
    bytes), which is what BMv2's ``ParseVSetCommon::do_padding`` compares against."""

    __slots__ = ("keys", "mask", "widths")

    def __init__(self, widths: list[int], mask: int | None) -> None:
        self.widths = widths
        self.mask = mask
        self.keys: frozenset[int] = frozenset()

    def pad(self, value: int) -> int:
        """A compressed value (fields back to back) as the byte-padded select key."""
        out, shift = 0, sum(self.widths)
        for w in self.widths:
            shift -= w
            out = (out << ((w + 7) // 8 * 8)) | ((value >> shift) & _mask(w))
        return out if self.mask is None else out & self.mask


class ValueSet:
    """A parser value set (``value_set<T>(size)``): members are tuples of field values
    (P4Info match fields in order); P4Runtime replaces the whole set at once."""

    def __init__(self, name: str, bitwidth: int, size: int) -> None:
        self.name = name
        self.bitwidth = bitwidth
        self.size = size
        self.members: list[tuple[int, ...]] = []
        self.widths: list[int] | None = None  # field widths, from P4Info
        self.uses: list[ValueSetUse] = []
        self.on_change: Callable[[ValueSet], None] | None = None  # after each write (the native backend copies it)

    def add_use(self, widths: list[int], mask: int | None) -> ValueSetUse:
        use = ValueSetUse(widths, mask)
        self.uses.append(use)
        return use

    def set_members(self, members: list[tuple[int, ...]], widths: list[int]) -> None:
        """Replace the set; P4Runtime: RESOURCE_EXHAUSTED past ``size``, ALREADY_EXISTS
        for a duplicate member."""
        if len(members) > self.size:
            raise StateError("RESOURCE_EXHAUSTED", f"value set {self.name}: {len(members)} members, size {self.size}")
        unique = list(dict.fromkeys(members))
        if len(unique) != len(members):
            raise StateError("ALREADY_EXISTS", f"value set {self.name}: duplicate member")
        compressed = []
        for m in unique:
            v = 0
            for x, w in zip(m, widths, strict=True):
                v = (v << w) | x
            compressed.append(v)
        self.members, self.widths = unique, widths
        for use in self.uses:  # a new frozenset: the data plane may be reading the old one
            use.keys = frozenset(use.pad(v) for v in compressed)
        if self.on_change is not None:
            self.on_change(self)

    def clear(self) -> None:
        self.members = []
        for use in self.uses:
            use.keys = frozenset()
        if self.on_change is not None:
            self.on_change(self)
