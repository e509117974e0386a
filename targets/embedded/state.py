"""Runtime state of the embedded target that the control plane reads and writes.

Tables, register arrays, counters, meters and the packet replication engine (multicast
groups and clone sessions). Values are plain Python integers; match keys are tuples with
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
        self.profile: ActionProfile | None = None  # tables with an action profile / selector

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

    def reset_default(self) -> None:
        """Back to the program's default action."""
        self.default = self.initial_default

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


@dataclass
class PacketReplicationEngine:
    """Multicast groups and clone sessions, as written by P4Runtime PRE entries."""

    groups: dict[int, list[Replica]] = field(default_factory=dict)
    clone_sessions: dict[int, CloneSession] = field(default_factory=dict)

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


# -- action profiles and selectors ---------------------------------------------------------
@dataclass(eq=False, slots=True)
class ProfileMember:
    """An action profile member: its action and the BMv2 member handles that carry it.

    ``handles[0]`` is the member itself; PI creates one more copy per unit of weight
    beyond 1 that some group gives it (``weight_counts``: weight -> groups using it).
    """

    id: int
    action: ActionCall
    handles: list[int] = field(default_factory=list)
    weight_counts: dict[int, int] = field(default_factory=lambda: {1: 1})
    refs: int = 0  # table entries pointing at the member


@dataclass(eq=False, slots=True)
class ProfileGroup:
    """An action selector group: member id -> weight, and the data plane's pick list."""

    id: int
    max_size: int = 0
    weights: dict[int, int] = field(default_factory=dict)
    handles: set[int] = field(default_factory=set)
    select: list[ProfileMember] = field(default_factory=list)
    refs: int = 0
    oneshot: list[tuple[ActionCall, int]] | None = None  # the action set of a one-shot group
    handle: int = 0  # BMv2 group handle (reads list groups in this order)


@dataclass(slots=True)
class IndirectRef:
    """``TableEntry.action`` of a table with an action profile: a member or a group."""

    member: ProfileMember | None = None
    group: ProfileGroup | None = None


class ActionProfile:
    """An action profile (``with_selector``: an action selector) as BMv2 + PI keep it.

    BMv2 member handles come from a handle manager that hands out the lowest free
    number; a group picks ``sorted(handles)[hash % len(handles)]`` (PI's
    ``GroupSelection`` over a ``RangeSet``), so the same member wins as on BMv2 only
    if handles are allocated and freed in PI's order: a member gets one handle when
    inserted, a group update walks members by id, creating the copies a higher weight
    needs (lowest free handle) and, after the walk, freeing copies no group needs any
    more. One-shot action sets create one handle per unit of weight, in order.
    """

    def __init__(self, name: str, size: int, with_selector: bool,
                 hash_fn: Callable[[list[int]], int] | None = None) -> None:
        self.name = name
        self.size = size
        self.with_selector = with_selector
        self.hash_fn = hash_fn
        self.members: dict[int, ProfileMember] = {}
        self.groups: dict[int, ProfileGroup] = {}
        self.mode: str | None = None  # "manual" or "oneshot" once used (PI refuses mixing)
        self._used: set[int] = set()
        self._gused: set[int] = set()
        self._handle_member: dict[int, ProfileMember] = {}
        self._oneshot_ids = 0

    # -- handles ---------------------------------------------------------------------
    def _alloc(self, m: ProfileMember) -> int:
        h = 0
        while h in self._used:
            h += 1
        self._used.add(h)
        self._handle_member[h] = m
        return h

    def _galloc(self, g: ProfileGroup) -> None:
        h = 0
        while h in self._gused:
            h += 1
        self._gused.add(h)
        g.handle = h

    def _free(self, h: int) -> None:
        self._used.discard(h)
        self._handle_member.pop(h, None)

    def use_mode(self, mode: str) -> None:
        """PI: a profile is programmed either manually or with one-shot action sets."""
        if self.mode != mode and (self.members or self.groups):
            raise StateError("INVALID_ARGUMENT", "Invalid attempt to mix action selector programming modes")
        self.mode = mode

    # -- members ---------------------------------------------------------------------
    def add_member(self, member_id: int, action: ActionCall) -> None:
        if member_id in self.members:
            raise StateError("ALREADY_EXISTS", f"Duplicate member id: {member_id}")
        m = ProfileMember(member_id, action)
        m.handles.append(self._alloc(m))
        self.members[member_id] = m

    def modify_member(self, member_id: int, action: ActionCall) -> None:
        m = self.members.get(member_id)
        if m is None:
            raise StateError("NOT_FOUND", f"Member id does not exist: {member_id}")
        m.action = action

    def delete_member(self, member_id: int) -> None:
        m = self.members.get(member_id)
        if m is None:
            raise StateError("NOT_FOUND", f"Member id does not exist: {member_id}")
        if m.refs or any(h in g.handles for g in self.groups.values() for h in m.handles):
            # BMv2: MBR_STILL_USED, which PI reports as UNKNOWN
            raise StateError("UNKNOWN", "Error when deleting member on target")
        for h in m.handles:
            self._free(h)
        del self.members[member_id]

    def member(self, member_id: int) -> ProfileMember | None:
        return self.members.get(member_id)

    # -- groups ----------------------------------------------------------------------
    def add_group(self, group_id: int, max_size: int, weights: list[tuple[int, int]]) -> None:
        if max_size < 0:
            raise StateError("INVALID_ARGUMENT", "Group max_size cannot be less than 0")
        if group_id in self.groups:
            raise StateError("ALREADY_EXISTS", f"Duplicate group id: {group_id}")
        g = ProfileGroup(group_id, max_size)
        self._galloc(g)
        self.groups[group_id] = g
        self._set_members(g, weights)

    def modify_group(self, group_id: int, max_size: int, weights: list[tuple[int, int]]) -> None:
        g = self.groups.get(group_id)
        if g is None:
            raise StateError("NOT_FOUND", f"Group id does not exist: {group_id}")
        if max_size != 0 and max_size != g.max_size:
            raise StateError("INVALID_ARGUMENT", "Cannot change group max_size after group creation")
        self._set_members(g, weights)

    def delete_group(self, group_id: int) -> None:
        g = self.groups.get(group_id)
        if g is None:
            raise StateError("NOT_FOUND", f"Group id does not exist: {group_id}")
        if g.refs:
            raise StateError("UNKNOWN", "Error when deleting group on target")  # BMv2: GRP_STILL_USED
        for mid, w in g.weights.items():
            m = self.members[mid]
            m.weight_counts[w] -= 1
            self._purge(m)
        self._gused.discard(g.handle)
        del self.groups[group_id]

    def _set_members(self, g: ProfileGroup, weights: list[tuple[int, int]]) -> None:
        """PI's group_update_members with INDIVIDUAL_ADDS_AND_REMOVES (what BMv2 supports)."""
        total = 0
        for _, w in weights:
            if w <= 0:
                raise StateError("INVALID_ARGUMENT", "Member weight must be a positive integer value")
            total += w
        if g.max_size > 0 and total > g.max_size:
            raise StateError("RESOURCE_EXHAUSTED", "Sum of member weights exceeds maximum group size")
        new: dict[int, int] = {}
        for mid, w in weights:
            if mid not in self.members:
                raise StateError("NOT_FOUND", f"Member id does not exist: {mid}")
            if mid in new:
                raise StateError("INVALID_ARGUMENT", f"Duplicate member id {mid} for group {g.id}, use weights instead")
            new[mid] = w
        changed = []
        for mid in sorted(set(g.weights) | set(new)):
            cw, nw = g.weights.get(mid, 0), new.get(mid, 0)
            if cw == nw:
                continue
            m = self.members[mid]
            changed.append(m)
            while len(m.handles) < nw:
                m.handles.append(self._alloc(m))
            if cw:
                m.weight_counts[cw] -= 1
            g.handles.difference_update(m.handles[nw:cw])
            g.handles.update(m.handles[cw:nw])
            if nw:
                m.weight_counts[nw] = m.weight_counts.get(nw, 0) + 1
        g.weights = new
        for m in changed:
            self._purge(m)
        self._reselect(g)

    def _purge(self, m: ProfileMember) -> None:
        """Free the weight copies of a member that no group needs any more."""
        top = max((w for w, c in m.weight_counts.items() if c > 0), default=1)
        for w in [w for w in m.weight_counts if w > top]:
            del m.weight_counts[w]
        while len(m.handles) > top:
            self._free(m.handles.pop())

    def _reselect(self, g: ProfileGroup) -> None:
        # A new list, not in place: the data plane may be picking from the old one.
        g.select = [self._handle_member[h] for h in sorted(g.handles)]

    # -- one-shot --------------------------------------------------------------------
    def add_oneshot(self, actions: list[tuple[ActionCall, int]]) -> ProfileGroup:
        """A hidden group for a table entry's action set (PI's ActionProfAccessOneshot)."""
        if not actions:
            raise StateError("UNIMPLEMENTED", "No support for empty action profile groups")
        for _, w in actions:
            if w <= 0:
                raise StateError("INVALID_ARGUMENT", "Member weight must be a positive integer value")
        self._oneshot_ids -= 1
        g = ProfileGroup(self._oneshot_ids, len(actions), oneshot=list(actions))
        self._galloc(g)
        for action, w in actions:
            m = ProfileMember(0, action)
            for _ in range(w):
                h = self._alloc(m)
                m.handles.append(h)
                g.handles.add(h)
        self.groups[g.id] = g
        self._reselect(g)
        return g

    def delete_oneshot(self, g: ProfileGroup) -> None:
        for h in sorted(g.handles):
            self._free(h)
        self._gused.discard(g.handle)
        self.groups.pop(g.id, None)

    # -- data plane ------------------------------------------------------------------
    def pick(self, ref: IndirectRef, F: list[int]) -> ActionCall | None:
        """The action a table hit on ``ref`` runs (None: an empty group, a no-op)."""
        if ref.member is not None:
            return ref.member.action
        sel = ref.group.select  # type: ignore[union-attr]
        if not sel:
            return None
        if self.hash_fn is None:
            return sel[0].action
        return sel[self.hash_fn(F) % len(sel)].action

    def member_handles(self) -> list[tuple[int, ProfileMember]]:
        """Every BMv2 member (weight copies included) by handle, as BMv2 lists them."""
        return sorted(self._handle_member.items(), key=lambda x: x[0])

    def clear(self) -> None:
        self.members.clear()
        self.groups.clear()
        self._used.clear()
        self._gused.clear()
        self._handle_member.clear()
        self.mode = None


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

    def clear(self) -> None:
        self.members = []
        for use in self.uses:
            use.keys = frozenset()
