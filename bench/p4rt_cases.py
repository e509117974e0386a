"""The P4Runtime fuzz's deterministic cases (``bench/p4rt_fuzz.py``): the baseline
entries they refer to, one malformed update per rule of the spec, and the whole-request
refusals."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from finsy.proto import p4d, p4r

from bench.p4rt_schema import (
    DELETE,
    INSERT,
    MODIFY,
    Schema,
    Table,
    enc,
    entry,
    random_action,
    random_key,
    upd,
)


@dataclass
class Case:
    """One update and the code the spec requires for it."""

    name: str
    update: p4r.Update
    spec: str


@dataclass
class Refusal:
    """A whole Write that must be refused: ``overrides`` go to ``write_codes``."""

    name: str
    overrides: dict
    spec: str


def _first(tables: list[Table], pred: Callable[[Table], bool]) -> Table | None:
    return next((t for t in tables if pred(t)), None)


def baseline(s: Schema, rng: random.Random) -> tuple[list[p4r.Update], dict[str, p4r.TableEntry]]:
    """Valid entries the deterministic cases refer to: one per writable table (name ->
    the entry), plus multicast group 1 (ports 1 and 2)."""
    ups, entries = [], {}
    for t in s.writable():
        m, prio, _ = random_key(t, rng)
        te = entry(t, m, prio, random_action(s, t, rng))
        entries[t.name] = te
        ups.append(upd(INSERT, table_entry=te))
    ups.append(upd(INSERT, packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
        multicast_group_entry=p4r.MulticastGroupEntry(multicast_group_id=1, replicas=[
            p4r.Replica(egress_port=1, instance=0), p4r.Replica(egress_port=2, instance=0)]))))
    return ups, entries


class _CaseBuilder:
    """The deterministic cases of one schema, built section by section, in order."""

    def __init__(self, s: Schema, base: dict[str, p4r.TableEntry]) -> None:
        self.s, self.base, self.w = s, base, s.writable()
        self.cases: list[Case] = []

    def add(self, name: str, kind: int, te: p4r.TableEntry | None = None, spec: str = "INVALID_ARGUMENT",
            **entity: object) -> None:
        """One case: an update of ``kind`` on ``te`` (or the entity given by keyword)."""
        if te is not None:
            entity["table_entry"] = te
        self.cases.append(Case(name, upd(kind, **entity), spec))

    @staticmethod
    def copy(te: p4r.TableEntry) -> p4r.TableEntry:
        """A copy of ``te`` to break."""
        c = p4r.TableEntry()
        c.CopyFrom(te)
        return c

    def action_cases(self) -> None:
        """Entries whose action, params, update type or identity break a rule."""
        s, w, base = self.s, self.w, self.base
        t = _first(w, lambda t: any(s.params[a] for a in t.actions))
        if t is not None:
            te = base[t.name]
            aid = next(a for a in t.actions if s.params[a])
            pid, pw = s.params[aid][0]
            fresh = self.copy(te)
            fresh.action.action.action_id = aid
            del fresh.action.action.params[:]
            fresh.action.action.params.extend(p4r.Action.Param(param_id=p, value=b"\x00") for p, _ in s.params[aid])
            # a key nobody inserted: flip the entry's first exact/lpm/ternary value
            fresh_key(fresh, t)
            c = self.copy(fresh)
            c.table_id = s.unused_id(0x02)
            self.add("unknown table id", INSERT, c)
            c = self.copy(fresh)
            c.action.action.action_id = s.unused_id(0x01)
            self.add("unknown action id", INSERT, c)
            other = next((a for a in s.params if a not in t.actions and a not in t.default_only), None)
            if other is not None:
                c = self.copy(fresh)
                c.action.action.action_id = other
                del c.action.action.params[:]
                c.action.action.params.extend(p4r.Action.Param(param_id=p, value=b"\x00") for p, _ in s.params[other])
                self.add("action of another table", INSERT, c)
            c = self.copy(fresh)
            c.action.action.params[0].param_id = 0x7FFF
            self.add("unknown param id", INSERT, c)
            c = self.copy(fresh)
            del c.action.action.params[0]
            self.add("missing param", INSERT, c)
            c = self.copy(fresh)
            c.action.action.params.add(param_id=0x7FFE, value=b"\x01")
            self.add("extra param", INSERT, c)
            c = self.copy(fresh)
            c.action.action.params[0].value = enc(1 << pw)
            self.add("param wider than its field", INSERT, c, "OUT_OF_RANGE")
            c = self.copy(fresh)
            c.action.action.params[0].value = b""
            self.add("param empty bytestring", INSERT, c, "OUT_OF_RANGE")
            self.add("update type unspecified", p4r.Update.UNSPECIFIED, self.copy(fresh))
            c = self.copy(fresh)
            c.is_const = True
            self.add("is_const set in a write", INSERT, c)
            self.add("duplicate insert", INSERT, self.copy(te), "ALREADY_EXISTS")
            self.add("modify a missing entry", MODIFY, self.copy(fresh), "NOT_FOUND")
            self.add("delete a missing entry", DELETE, self.copy(fresh), "NOT_FOUND")
            c = self.copy(fresh)
            c.match.add().CopyFrom(c.match[0])
            self.add("duplicate match field", INSERT, c)
            c = self.copy(fresh)
            c.match[0].field_id = 0x7FFF
            self.add("unknown match field id", INSERT, c)
            c = p4r.TableEntry(table_id=t.id, is_default_action=True, action=fresh.action)
            self.add("INSERT of the default entry", INSERT, c)
            c = p4r.TableEntry(table_id=t.id, is_default_action=True, match=fresh.match)
            self.add("default entry with a match key", MODIFY, c)

    def exact_cases(self) -> None:
        """Exact keys too wide, empty, of the wrong kind; priorities where none belong."""
        w, base = self.w, self.base
        t = _first(w, lambda t: any(f.kind == "exact" for f in t.fields))
        if t is not None:
            te = self.copy(base[t.name])
            i = next(i for i, f in enumerate(t.fields) if f.kind == "exact")
            f = t.fields[i]
            c = self.copy(te)
            c.match[i].exact.value = enc(1 << f.width)
            self.add("exact key wider than its field", INSERT, c, "OUT_OF_RANGE")
            c = self.copy(te)
            c.match[i].exact.value = b""
            self.add("exact key empty bytestring", INSERT, c, "OUT_OF_RANGE")
            c = self.copy(te)
            c.match[i].ClearField("exact")
            c.match[i].lpm.value, c.match[i].lpm.prefix_len = b"\x01", 1
            self.add("wrong match kind", INSERT, c)
            if not t.needs_priority:
                c = self.copy(te)
                del c.match[i]
                self.add("missing exact field", INSERT, c)
                c = self.copy(te)
                fresh_key(c, t)
                c.priority = 10
                self.add("priority on an exact/lpm table", INSERT, c)
                c = self.copy(c)
                c.priority = -10
                self.add("negative priority on an exact/lpm table", INSERT, c)

    def lpm_cases(self) -> None:
        """LPM prefixes too long, bits set past the prefix, length 0."""
        w, base = self.w, self.base
        t = _first(w, lambda t: any(f.kind == "lpm" for f in t.fields))
        if t is not None:
            i = next(i for i, f in enumerate(t.fields) if f.kind == "lpm")
            f = t.fields[i]
            c = self.copy(base[t.name])
            c.match[i].lpm.prefix_len = f.width + 1
            self.add("LPM prefix longer than the field", INSERT, c)
            c = self.copy(base[t.name])
            c.match[i].lpm.value, c.match[i].lpm.prefix_len = enc((1 << f.width) - 1), 1
            self.add("LPM bits set past the prefix", INSERT, c)
            c = self.copy(base[t.name])
            c.match[i].lpm.value, c.match[i].lpm.prefix_len = b"\x00", 0
            self.add("LPM prefix length 0", INSERT, c)

    def ternary_cases(self) -> None:
        """Ternary values outside their mask, mask 0, missing or negative priority."""
        w, base = self.w, self.base
        t = _first(w, lambda t: any(f.kind == "ternary" for f in t.fields))
        if t is not None:
            i = next(i for i, f in enumerate(t.fields) if f.kind == "ternary")
            c = self.copy(base[t.name])
            c.match[i].ternary.value, c.match[i].ternary.mask = b"\x03", b"\x01"
            self.add("ternary value outside its mask", INSERT, c)
            c = self.copy(base[t.name])
            c.match[i].ternary.value, c.match[i].ternary.mask = b"\x00", b"\x00"
            self.add("ternary mask 0", INSERT, c)
            c = self.copy(base[t.name])
            c.priority = 0
            self.add("ternary entry without priority", INSERT, c)
            c = self.copy(base[t.name])
            c.priority = -5
            self.add("negative priority", INSERT, c)

    def range_cases(self) -> None:
        """Inverted ranges; range entries without priority."""
        w, base = self.w, self.base
        t = _first(w, lambda t: any(f.kind == "range" for f in t.fields))
        if t is not None:
            i = next(i for i, f in enumerate(t.fields) if f.kind == "range")
            c = self.copy(base[t.name])
            c.match[i].range.low, c.match[i].range.high = b"\x09", b"\x02"
            self.add("range low > high", INSERT, c)
            c = self.copy(base[t.name])
            c.priority = 0
            self.add("range entry without priority", INSERT, c)

    def const_cases(self) -> None:
        """Writes into a const table; a DEFAULT_ONLY action in an entry."""
        s, base = self.s, self.base
        t = _first(s.tables, lambda t: t.is_const and bool(t.actions) and bool(t.fields))
        if t is not None:
            m, prio, _ = random_key(t, random.Random(7))
            self.add("insert into a const table", INSERT, entry(t, m, prio, random_action(s, t, random.Random(7))),
                     "PERMISSION_DENIED")
        t = _first(s.tables, lambda t: bool(t.default_only) and not t.is_const and bool(t.fields))
        if t is not None and t.name in base:
            c = self.copy(base[t.name])
            fresh_key(c, t)
            aid = t.default_only[0]
            c.action.action.action_id = aid
            del c.action.action.params[:]
            c.action.action.params.extend(p4r.Action.Param(param_id=p, value=b"\x00") for p, _ in s.params.get(aid, []))
            self.add("DEFAULT_ONLY action in an entry", INSERT, c, "PERMISSION_DENIED")

    def multicast_cases(self) -> None:
        """Multicast group errors."""
        def mc(gid: int, *ports: tuple[int, int]) -> p4r.PacketReplicationEngineEntry:
            return p4r.PacketReplicationEngineEntry(multicast_group_entry=p4r.MulticastGroupEntry(
                multicast_group_id=gid, replicas=[p4r.Replica(egress_port=p, instance=i) for p, i in ports]))

        self.add("multicast group id 0", INSERT, packet_replication_engine_entry=mc(0, (1, 0)))
        self.add("multicast group inserted twice", INSERT, None, "ALREADY_EXISTS",
                 packet_replication_engine_entry=mc(1, (3, 0)))
        self.add("modify a missing multicast group", MODIFY, None, "NOT_FOUND", packet_replication_engine_entry=mc(77, (1, 0)))
        self.add("delete a missing multicast group", DELETE, None, "NOT_FOUND", packet_replication_engine_entry=mc(78))
        self.add("duplicate replica in a group", INSERT, packet_replication_engine_entry=mc(79, (1, 0), (1, 0)))

    def counter_register_cases(self) -> None:
        """Counter and register ids, indices and widths."""
        s = self.s
        self.add("unknown counter id", MODIFY, counter_entry=p4r.CounterEntry(
            counter_id=s.unused_id(0x12), index=p4r.Index(index=0)))
        for cid, size in list(s.counters.items())[:1]:
            self.add("counter INSERT", INSERT, counter_entry=p4r.CounterEntry(counter_id=cid, index=p4r.Index(index=0)))
            self.add("counter index past the array", MODIFY, None, "OUT_OF_RANGE",
                     counter_entry=p4r.CounterEntry(counter_id=cid, index=p4r.Index(index=size)))
            self.add("negative counter index", MODIFY, counter_entry=p4r.CounterEntry(
                counter_id=cid, index=p4r.Index(index=-1)))
        if s.registers:
            self.add("unknown register id", MODIFY, register_entry=p4r.RegisterEntry(
                register_id=s.unused_id(0x13), index=p4r.Index(index=0)))
            rid, (size, rw) = next(iter(s.registers.items()))
            self.add("register index past the array", MODIFY, None, "OUT_OF_RANGE", register_entry=p4r.RegisterEntry(
                register_id=rid, index=p4r.Index(index=size), data=p4d.P4Data(bitstring=b"\x01")))
            self.add("register value wider than a cell", MODIFY, None, "OUT_OF_RANGE", register_entry=p4r.RegisterEntry(
                register_id=rid, index=p4r.Index(index=0), data=p4d.P4Data(bitstring=enc(1 << rw))))


def deterministic_cases(s: Schema, base: dict[str, p4r.TableEntry]) -> list[Case]:
    """One malformed update per spec rule that ``s`` has an object for (see the fuzz's
    module doc)."""
    b = _CaseBuilder(s, base)
    for section in (b.action_cases, b.exact_cases, b.lpm_cases, b.ternary_cases, b.range_cases,
                    b.const_cases, b.multicast_cases, b.counter_register_cases):
        section()
    return b.cases


def fresh_key(te: p4r.TableEntry, t: Table) -> None:
    """Change ``te``'s key to one the baseline did not insert (still valid)."""
    for fm, f in zip(te.match, t.fields, strict=False):
        if f.kind == "exact":
            fm.exact.value = enc(int.from_bytes(fm.exact.value, "big") ^ 1)
            return
        if f.kind == "lpm":
            fm.lpm.value, fm.lpm.prefix_len = enc(1 << (f.width - 1) if fm.lpm.value != enc(1 << (f.width - 1))
                                                  else 0x3 << (f.width - 2)), 2
            return
    te.priority = te.priority + 1 if te.priority < 1000 else 1001


REFUSALS = [
    Refusal("unknown device id", {"device_id": 4242}, "NOT_FOUND"),
    Refusal("role without a stream", {"role": "nobody"}, "PERMISSION_DENIED"),
    Refusal("stale election id", {"election_id": 1}, "PERMISSION_DENIED"),
]
