"""The P4Runtime fuzz's view of a program (``bench/p4rt_fuzz.py``): the tables, actions,
counters and registers of its P4Info, and valid entries built from them."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from finsy.proto import p4i, p4r
from google.protobuf import text_format

INSERT, MODIFY, DELETE = p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE
KINDS = {p4i.MatchField.EXACT: "exact", p4i.MatchField.LPM: "lpm", p4i.MatchField.TERNARY: "ternary",
         p4i.MatchField.RANGE: "range", p4i.MatchField.OPTIONAL: "optional"}


@dataclass
class MatchF:
    id: int
    name: str
    kind: str
    width: int


@dataclass
class Table:
    id: int
    name: str
    fields: list[MatchF]
    actions: list[int]  # entry-usable action ids (not DEFAULT_ONLY)
    default_only: list[int]
    is_const: bool
    needs_priority: bool
    const_default: bool
    size: int


@dataclass
class Schema:
    """What the fuzz needs from a P4Info."""

    tables: list[Table]
    params: dict[int, list[tuple[int, int]]]  # action id -> [(param id, width)]
    counters: dict[int, int]  # id -> size
    registers: dict[int, tuple[int, int]]  # id -> (size, width)

    @classmethod
    def load(cls, p4info: Path) -> Schema:
        info = text_format.Parse(p4info.read_text(), p4i.P4Info())
        params = {a.preamble.id: [(p.id, p.bitwidth) for p in a.params] for a in info.actions}
        tables = []
        for t in info.tables:
            if t.implementation_id:  # indirect tables: not fuzzed here
                continue
            fields = [MatchF(m.id, m.name, KINDS.get(m.match_type, "other"), m.bitwidth) for m in t.match_fields]
            if any(f.kind == "other" for f in fields):
                continue
            acts = [a.id for a in t.action_refs if a.scope != p4i.ActionRef.DEFAULT_ONLY and a.id in params]
            donly = [a.id for a in t.action_refs if a.scope == p4i.ActionRef.DEFAULT_ONLY]
            tables.append(Table(t.preamble.id, t.preamble.name, fields, acts, donly, t.is_const_table,
                                any(f.kind in ("ternary", "range", "optional") for f in fields),
                                t.const_default_action_id != 0, t.size))
        counters = {c.preamble.id: c.size for c in info.counters}
        registers = {}
        for r in info.registers:
            bs = r.type_spec.bitstring
            w = bs.bit.bitwidth if bs.HasField("bit") else bs.int.bitwidth if bs.HasField("int") else 0
            if w:
                registers[r.preamble.id] = (r.size, w)
        return cls(tables, params, counters, registers)

    def writable(self) -> list[Table]:
        """Tables a controller may add entries to (not const, with a key and an action)."""
        return [t for t in self.tables if not t.is_const and t.fields and t.actions]

    def unused_id(self, base: int) -> int:
        """An id of P4Info's ``base`` prefix (0x02 tables, 0x01 actions ...) that no object has."""
        return (base << 24) | 0xABCDE


def enc(v: int) -> bytes:
    """Canonical P4Runtime bytestring."""
    return v.to_bytes(max(1, (v.bit_length() + 7) // 8), "big")



def random_key(t: Table, rng: random.Random) -> tuple[list[p4r.FieldMatch], int, tuple]:
    """A valid match key for ``t``, its priority, and its identity (for the model)."""
    out, ident = [], []
    for f in t.fields:
        full = (1 << f.width) - 1
        if f.kind == "exact":
            v = rng.getrandbits(f.width)
            out.append(p4r.FieldMatch(field_id=f.id, exact=p4r.FieldMatch.Exact(value=enc(v))))
            ident.append(v)
        elif f.kind == "lpm":
            plen = rng.randint(1, f.width)
            v = rng.getrandbits(f.width) & (full ^ ((1 << (f.width - plen)) - 1))
            out.append(p4r.FieldMatch(field_id=f.id, lpm=p4r.FieldMatch.LPM(value=enc(v), prefix_len=plen)))
            ident.append((v, plen))
        elif f.kind == "ternary":
            mask = rng.getrandbits(f.width) or 1
            v = rng.getrandbits(f.width) & mask
            out.append(p4r.FieldMatch(field_id=f.id, ternary=p4r.FieldMatch.Ternary(value=enc(v), mask=enc(mask))))
            ident.append((v, mask))
        elif f.kind == "range":
            lo, hi = sorted((rng.getrandbits(f.width), rng.getrandbits(f.width)))
            if (lo, hi) == (0, full):
                hi = full - 1
            out.append(p4r.FieldMatch(field_id=f.id, range=p4r.FieldMatch.Range(low=enc(lo), high=enc(hi))))
            ident.append((lo, hi))
        else:
            v = rng.getrandbits(f.width)
            out.append(p4r.FieldMatch(field_id=f.id, optional=p4r.FieldMatch.Optional(value=enc(v))))
            ident.append(v)
    prio = rng.randint(1, 1000) if t.needs_priority else 0
    return out, prio, (t.id, tuple(ident), prio)


def random_action(s: Schema, t: Table, rng: random.Random) -> p4r.TableAction:
    """A valid action of ``t`` with random parameters."""
    aid = rng.choice(t.actions)
    return p4r.TableAction(action=p4r.Action(action_id=aid, params=[
        p4r.Action.Param(param_id=pid, value=enc(rng.getrandbits(w))) for pid, w in s.params[aid]]))


def entry(t: Table, match: list[p4r.FieldMatch], prio: int, action: p4r.TableAction | None = None) -> p4r.TableEntry:
    """A table entry of ``t`` (with ``action`` when given)."""
    te = p4r.TableEntry(table_id=t.id, match=match, priority=prio)
    if action is not None:
        te.action.CopyFrom(action)
    return te


def upd(kind: int, **entity: object) -> p4r.Update:
    """One update of type ``kind`` on the entity given by keyword."""
    return p4r.Update(type=kind, entity=p4r.Entity(**entity))
