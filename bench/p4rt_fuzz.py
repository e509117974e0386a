"""Malformed P4Runtime writes: every one gets the spec's error code, the switch keeps serving.

The cases are built from a program's P4Info, so any program can be fuzzed:

- ``deterministic_cases``: one malformed update per rule of the P4Runtime spec
  (section "Error Reporting" and each entity's rules): unknown table/action/param/field
  ids, values wider than their field (OUT_OF_RANGE, spec "Bytestrings"), empty
  bytestrings, bad LPM prefixes (too long, bits set past the prefix, length 0), ternary
  values outside their mask, inverted ranges, missing/extra/negative priorities,
  duplicate inserts, modifies/deletes of missing entries, const tables, default-entry
  misuse, multicast group errors, counter/register ids and indices; and whole-request
  refusals (unknown device, a role without a stream, a stale election id).
- ``random_batches``: a seeded stream of batches mixing valid inserts/modifies/deletes
  with mutated updates; the expected code of each is known from its mutation and a
  model of the installed keys. Afterwards every table is read back and compared with
  the model, and a valid write still succeeds.

``SPEC`` codes are what the spec requires; ``BMV2_DIFFERS`` lists where BMv2 1.15 (PI)
answers otherwise (the embedded target follows the spec; docs/trust.md).

    python -m bench.p4rt_fuzz [--programs table_features,forward,ina,ndn,nic,lan] [--batches 2000]
                              [--seed 1] [--target auto|embedded|bmv2]
"""

from __future__ import annotations

import contextlib
import random
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from finsy.proto import p4r

from bench.p4rt_cases import REFUSALS, baseline, deterministic_cases, fresh_key
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
from wire.argtypes import Parser, count, natural

ROOT = Path(__file__).resolve().parents[1]
PROGRAM_DIRS = {"table_features": ROOT / "tests" / "p4" / "build"}
DEFAULT_PROGRAMS = ("table_features", "forward", "ina", "ndn", "nic", "lan")

#: case name -> what BMv2 1.15's PI answers where it differs from the spec. The embedded
#: target follows the spec; the differential test maps through this table.
BMV2_DIFFERS: dict[str, str] = {
    # PI checks bytestrings with "does not fit within N bits": INVALID_ARGUMENT, where the
    # spec ("Bytestrings") says OUT_OF_RANGE; PI takes an empty string as 0.
    "param wider than its field": "INVALID_ARGUMENT",
    "exact key wider than its field": "INVALID_ARGUMENT",
    "param empty bytestring": "OK",
    "exact key empty bytestring": "OK",
    # PI answers UNKNOWN for writes the bmv2 backend refuses (const table, index range)
    "insert into a const table": "UNKNOWN",
    "counter index past the array": "UNKNOWN",
    # (random fuzz, bmv2_expect: a full table is UNKNOWN, the spec says RESOURCE_EXHAUSTED)
    # PI ignores is_const in a write, and a negative priority fails in the bmv2 backend
    "is_const set in a write": "OK",
    "negative priority": "UNKNOWN",
    "negative priority on an exact/lpm table": "OK",
    # PI answers PERMISSION_DENIED for an unknown device (the spec: NOT_FOUND), and it
    # applies a write whose role has no stream at all: a hole that only the embedded
    # target's per-role arbitration closes (docs/trust.md)
    "unknown device id": "PERMISSION_DENIED",
    "role without a stream": "OK",
    # BMv2's P4Runtime cannot write registers at all
    "unknown register id": "UNIMPLEMENTED",
    "register index past the array": "UNIMPLEMENTED",
    "register value wider than a cell": "UNIMPLEMENTED",
}


# ----------------------------------------------------------------------------- random
MUTATIONS: dict[str, str] = {
    "table id": "INVALID_ARGUMENT", "action id": "INVALID_ARGUMENT", "param id": "INVALID_ARGUMENT",
    "param count": "INVALID_ARGUMENT", "param width": "OUT_OF_RANGE", "key width": "OUT_OF_RANGE",
    "field id": "INVALID_ARGUMENT", "lpm prefix": "INVALID_ARGUMENT", "lpm bits": "INVALID_ARGUMENT",
    "ternary": "INVALID_ARGUMENT", "range": "INVALID_ARGUMENT", "priority": "INVALID_ARGUMENT",
    "negative priority": "INVALID_ARGUMENT",
    "update type": "INVALID_ARGUMENT",
}


@dataclass
class Model:
    """Installed entry identities per table, as the spec says a write changes them."""

    keys: dict[tuple, p4r.TableEntry] = field(default_factory=dict)


def _break_key(kind: str, t: Table, c: p4r.TableEntry, rng: random.Random) -> bool:
    """Mutate ``c``'s match key by ``kind``; False when ``t`` has no field to break that way."""
    if kind == "key width":
        i = rng.randrange(len(t.fields))
        f, fm = t.fields[i], c.match[i]
        big = enc(rng.randint(1 << f.width, (1 << (f.width + 16)) - 1))
        if f.kind == "exact":
            fm.exact.value = big
        elif f.kind == "lpm":
            fm.lpm.value = big
        elif f.kind == "ternary":
            fm.ternary.mask = big
        elif f.kind == "range":
            fm.range.high = big
        else:
            fm.optional.value = big
    elif kind in ("lpm prefix", "lpm bits"):
        i = next((i for i, f in enumerate(t.fields) if f.kind == "lpm"), None)
        if i is None:
            return False
        w = t.fields[i].width
        if kind == "lpm prefix":
            c.match[i].lpm.prefix_len = rng.choice([w + 1, w + rng.randint(2, 200), 0])
        else:
            plen = rng.randint(1, w - 1) if w > 1 else None
            if plen is None:
                return False
            c.match[i].lpm.prefix_len = plen
            c.match[i].lpm.value = enc(int.from_bytes(c.match[i].lpm.value, "big") | (1 << rng.randrange(w - plen)))
    elif kind == "ternary":
        i = next((i for i, f in enumerate(t.fields) if f.kind == "ternary"), None)
        if i is None:
            return False
        w = t.fields[i].width
        mask = rng.getrandbits(w)
        if mask == (1 << w) - 1:
            mask = 0
        bit = rng.choice([b for b in range(w) if not mask >> b & 1])
        c.match[i].ternary.mask = enc(mask)
        c.match[i].ternary.value = enc((rng.getrandbits(w) & mask) | (1 << bit))
    elif kind == "range":
        i = next((i for i, f in enumerate(t.fields) if f.kind == "range"), None)
        if i is None:
            return False
        w = t.fields[i].width
        lo = rng.randint(1, (1 << w) - 1)
        c.match[i].range.low, c.match[i].range.high = enc(lo), enc(rng.randint(0, lo - 1))
    return True


def mutate(s: Schema, t: Table, te: p4r.TableEntry, rng: random.Random) -> tuple[str, p4r.Update] | None:
    """``te`` (a valid INSERT) broken in one way; None when ``t`` has nothing to break that way."""
    kind = rng.choice(list(MUTATIONS))
    c = p4r.TableEntry()
    c.CopyFrom(te)
    aid = c.action.action.action_id
    params = c.action.action.params
    typ = INSERT
    if kind == "table id":
        c.table_id = s.unused_id(0x02) + rng.randint(1, 1000)
    elif kind == "action id":
        c.action.action.action_id = s.unused_id(0x01) + rng.randint(1, 1000)
    elif kind == "param id":
        if not params:
            return None
        params[rng.randrange(len(params))].param_id = 0x7000 + rng.randint(0, 100)
    elif kind == "param count":
        if params and rng.random() < 0.5:
            del params[rng.randrange(len(params))]
        else:
            params.add(param_id=0x6000, value=b"\x01")
    elif kind == "param width":
        if not params:
            return None
        i = rng.randrange(len(params))
        width = dict(s.params[aid])[params[i].param_id]
        params[i].value = enc((1 << width) + rng.getrandbits(8))
    elif kind in ("key width", "lpm prefix", "lpm bits", "ternary", "range"):
        if not _break_key(kind, t, c, rng):
            return None
    elif kind == "field id":
        c.match[rng.randrange(len(c.match))].field_id = 0x7F00 + rng.randint(0, 50)
    elif kind == "priority":
        c.priority = 0 if t.needs_priority else rng.randint(1, 100)
    elif kind == "negative priority":
        if not t.needs_priority:
            return None
        c.priority = -rng.randint(1, 1 << 31)
    else:
        typ = rng.choice([p4r.Update.UNSPECIFIED, 7])
    return kind, p4r.Update(type=typ, entity=p4r.Entity(table_entry=c))


def random_batch(s: Schema, model: Model, rng: random.Random, size: int) -> list[tuple[p4r.Update, str, str]]:
    """``size`` updates with (update, expected code, what it is); applies them to ``model``."""
    out: list[tuple[p4r.Update, str, str]] = []
    tables = s.writable()
    while len(out) < size:
        t = rng.choice(tables)
        r = rng.random()
        installed = [k for k in model.keys if k[0] == t.id]
        if r < 0.35:
            m, prio, ident = random_key(t, rng)
            te = entry(t, m, prio, random_action(s, t, rng))
            code = ("ALREADY_EXISTS" if ident in model.keys
                    else "RESOURCE_EXHAUSTED" if t.size and len(installed) >= t.size else "OK")
            if code == "OK":
                model.keys[ident] = te
            out.append((upd(INSERT, table_entry=te), code, "insert into a full table"
                        if code == "RESOURCE_EXHAUSTED" else "insert"))
        elif r < 0.45 and installed:
            ident = rng.choice(installed)
            old = model.keys[ident]
            if rng.random() < 0.5:
                te = p4r.TableEntry()
                te.CopyFrom(old)
                out.append((upd(INSERT, table_entry=te), "ALREADY_EXISTS", "duplicate insert"))
            else:
                te = entry(t, list(old.match), old.priority, random_action(s, t, rng))
                model.keys[ident] = te
                out.append((upd(MODIFY, table_entry=te), "OK", "modify"))
        elif r < (0.7 if t.size and len(installed) >= t.size // 2 else 0.55) and installed:
            ident = rng.choice(installed)
            old = model.keys.pop(ident)
            out.append((upd(DELETE, table_entry=entry(t, list(old.match), old.priority)), "OK", "delete"))
        elif r < 0.6:
            m, prio, ident = random_key(t, rng)
            kind = rng.choice([MODIFY, DELETE])
            te = entry(t, m, prio, random_action(s, t, rng) if kind == MODIFY else None)
            if ident in model.keys:
                continue
            out.append((upd(kind, table_entry=te), "NOT_FOUND", "missing entry"))
        else:
            m, prio, _ = random_key(t, rng)
            got = mutate(s, t, entry(t, m, prio, random_action(s, t, rng)), rng)
            if got is None:
                continue
            kind, u = got
            out.append((u, MUTATIONS[kind], kind))
    return out


# ----------------------------------------------------------------------------- rig
def program_files(name: str) -> tuple[Path, Path]:
    """(BMv2 JSON, P4Info) of a fuzzable program."""
    d = PROGRAM_DIRS.get(name, ROOT / "p4src" / "build")
    return d / f"{name}.json", d / f"{name}.p4info.txt"


@contextlib.contextmanager
def switch(target: str, program: str) -> Iterator[object]:
    """A switch process (embedded or BMv2) in its own namespace with ``program`` loaded;
    yields a primary ``P4RuntimeClient`` (election id 10, so a lower one is stale)."""
    from targets.p4rt_client import P4RuntimeClient
    from targets.testbed import Testbed

    json_path, p4info = program_files(program)
    with Testbed(2, target=target) as tb, P4RuntimeClient(tb.grpc_addr, device_id=0, election_id=10) as c:
        c.set_pipeline(p4info, json_path)
        c.testbed = tb  # type: ignore[attr-defined]
        yield c


def read_identities(client: object, s: Schema) -> set[tuple]:
    """Identities of every entry in the writable tables (as ``random_key`` makes them)."""
    req = p4r.ReadRequest(device_id=client.device_id, entities=[  # type: ignore[attr-defined]
        p4r.Entity(table_entry=p4r.TableEntry(table_id=t.id)) for t in s.writable()])
    tables = {t.id: t for t in s.writable()}
    out = set()
    for resp in client._stub.Read(req, timeout=30):  # type: ignore[attr-defined]
        for e in resp.entities:
            te = e.table_entry
            t = tables[te.table_id]
            given = {fm.field_id: fm for fm in te.match}
            ident = []
            for f in t.fields:
                fm = given[f.id]
                if f.kind == "exact":
                    ident.append(int.from_bytes(fm.exact.value, "big"))
                elif f.kind == "lpm":
                    ident.append((int.from_bytes(fm.lpm.value, "big"), fm.lpm.prefix_len))
                elif f.kind == "ternary":
                    ident.append((int.from_bytes(fm.ternary.value, "big"), int.from_bytes(fm.ternary.mask, "big")))
                elif f.kind == "range":
                    ident.append((int.from_bytes(fm.range.low, "big"), int.from_bytes(fm.range.high, "big")))
                else:
                    ident.append(int.from_bytes(fm.optional.value, "big"))
            out.add((t.id, tuple(ident), te.priority))
    return out


def run_deterministic(client: object, s: Schema, seed: int = 1) -> dict[str, tuple[str, str]]:
    """Install the baseline, send every deterministic case and refusal (one Write each);
    returns name -> (code got, spec code)."""
    ups, base = baseline(s, random.Random(seed))
    got = client.write_codes(ups)  # type: ignore[attr-defined]
    if set(got) != {"OK"}:
        raise RuntimeError(f"baseline entries refused: {got}")
    out = {}
    for case in deterministic_cases(s, base):
        (code,) = client.write_codes([case.update])  # type: ignore[attr-defined]
        out[case.name] = (code, case.spec)
        u = case.update
        if code == "OK" and u.type == INSERT and u.entity.HasField("table_entry"):
            # accepted where it should not be (a target that differs): undo, so the
            # next cases see the baseline only
            client.write_codes([upd(DELETE, table_entry=u.entity.table_entry)])  # type: ignore[attr-defined]
    t = s.writable()[0]
    fresh = p4r.TableEntry()
    fresh.CopyFrom(base[t.name])
    fresh_key(fresh, t)
    for r in REFUSALS:  # a write that would succeed, sent where it must be refused
        (code,) = client.write_codes([upd(INSERT, table_entry=fresh)], **r.overrides)  # type: ignore[attr-defined]
        out[r.name] = (code, r.spec)
        if code == "OK":
            client.write_codes([upd(DELETE, table_entry=fresh)])  # type: ignore[attr-defined]
    # remove the baseline: a random fuzz may follow on the same switch
    undo = [p4r.Update(type=DELETE, entity=u.entity) for u in reversed(ups)]
    if set(client.write_codes(undo)) != {"OK"}:  # type: ignore[attr-defined]
        raise RuntimeError("baseline entries could not be deleted")
    return out


@dataclass
class FuzzResult:
    updates: int = 0
    mismatches: list[tuple[str, str, str]] = field(default_factory=list)  # (what, expected, got)
    codes: dict[str, int] = field(default_factory=dict)
    model_ok: bool = False
    still_writes: bool = False
    seconds: float = 0.0


def run_random(client: object, s: Schema, seed: int, batches: int, batch_size: int = 16,
               expect: Callable[[str, str], str] | None = None) -> FuzzResult:
    """``batches`` random batches; every code checked against the expected one (mapped by
    ``expect(what, spec_code)`` for a target that differs), then the tables against the
    model, then a fresh valid write."""
    rng = random.Random(seed)
    model = Model()
    res = FuzzResult()
    t0 = time.monotonic()
    for _ in range(batches):
        batch = random_batch(s, model, rng, batch_size)
        got = client.write_codes([u for u, _, _ in batch])  # type: ignore[attr-defined]
        for (_, want, what), code in zip(batch, got, strict=True):
            res.updates += 1
            res.codes[code] = res.codes.get(code, 0) + 1
            want = expect(what, want) if expect else want
            if code != want:
                res.mismatches.append((what, want, code))
    res.model_ok = read_identities(client, s) == set(model.keys)
    # still serving: in every table, one entry out and a fresh one in
    ups = []
    for t in s.writable():
        mine = [k for k in model.keys if k[0] == t.id]
        if mine:
            old = model.keys.pop(mine[0])
            ups.append(upd(DELETE, table_entry=entry(t, list(old.match), old.priority)))
        m, prio, ident = random_key(t, rng)
        if ident not in model.keys:
            ups.append(upd(INSERT, table_entry=entry(t, m, prio, random_action(s, t, rng))))
    res.still_writes = set(client.write_codes(ups)) == {"OK"}  # type: ignore[attr-defined]
    res.seconds = time.monotonic() - t0
    return res


def bmv2_expect(what: str, spec: str) -> str:
    """What BMv2 answers for a random update of kind ``what`` (see ``BMV2_DIFFERS``)."""
    return {"param width": "INVALID_ARGUMENT", "key width": "INVALID_ARGUMENT",
            "negative priority": "UNKNOWN", "insert into a full table": "UNKNOWN"}.get(what, spec)


def main(argv: list[str] | None = None) -> int:
    """Deterministic cases and a long random fuzz per program and target; a table."""
    ap = Parser(prog="python -m bench.p4rt_fuzz", description=__doc__.split("\n")[0])
    ap.add_argument("--programs", default=",".join(DEFAULT_PROGRAMS),
                    help=f"comma-separated compiled programs (default {','.join(DEFAULT_PROGRAMS)})")
    ap.add_argument("--batches", type=count, default=2000, help="random write batches per program (default 2000)")
    ap.add_argument("--seed", type=natural, default=1, help="the cases' and the fuzz's seed (default 1)")
    ap.add_argument("--target", default="auto", choices=("auto", "embedded", "bmv2"))
    args = ap.parse_args(argv)
    programs = [s.strip() for s in args.programs.split(",") if s.strip()]
    missing = [s for s in programs if not all(f.is_file() for f in program_files(s))]
    if missing or not programs:
        ap.error(f"argument --programs: no compiled program {missing[0]!r} (make p4)" if missing
                 else "argument --programs: expected comma-separated programs")
    import os

    if os.geteuid() != 0:
        print("p4rt fuzz: needs root (network namespaces); skipped")
        return 0
    targets = ["embedded", "bmv2"] if args.target == "auto" else [args.target]
    if "bmv2" in targets and not shutil.which("simple_switch_grpc"):
        targets.remove("bmv2")
        print("p4rt fuzz: simple_switch_grpc not on PATH: BMv2 left out")
    rc = 0
    print(f"{'program':15} {'target':9} {'cases':>5} {'spec':>5} {'updates':>7} {'wrong':>5} "
          f"{'model':>5} {'alive':>5} {'s':>5}")
    for prog in programs:
        s = Schema.load(program_files(prog)[1])
        if not s.writable():
            print(f"{prog:15} (no table a controller writes entries to)")
            continue
        for target in targets:
            with switch(target, prog) as c:
                det = run_deterministic(c, s, args.seed)
                agree = sum(
                    (got == spec) if target == "embedded" else got == BMV2_DIFFERS.get(n, spec)
                    for n, (got, spec) in det.items())
                res = run_random(c, s, args.seed, args.batches,
                                 expect=None if target == "embedded" else bmv2_expect)
            bad = len(res.mismatches) or agree != len(det) or not res.model_ok or not res.still_writes
            rc |= int(bad)
            print(f"{prog:15} {target:9} {len(det):5} {agree:5} {res.updates:7} {len(res.mismatches):5} "
                  f"{'ok' if res.model_ok else 'BAD':>5} {'yes' if res.still_writes else 'NO':>5} "
                  f"{res.seconds:5.1f}")
            for n, (got, spec) in det.items():
                want = spec if target == "embedded" else BMV2_DIFFERS.get(n, spec)
                if got != want:
                    print(f"    {n}: got {got}, want {want}")
            for m in res.mismatches[:5]:
                print(f"    random {m[0]}: want {m[1]}, got {m[2]}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
