"""Two switches running one program, one per backend, fed the same frames and entries
(the equivalence tests of the native backend, tests/test_native_*.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from targets.embedded.state import TableEntry
from targets.embedded.switch import Switch

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = sorted([*(ROOT / "p4src" / "build").glob("*.json"), *(ROOT / "tests" / "p4" / "build").glob("*.json")])


def pair(path: Path, **kw: Any) -> tuple[Switch, Switch]:
    """A Python-backend and a native-backend switch running ``path``, clocks frozen
    (the ingress timestamp is data the programs store)."""
    out = []
    for backend in ("python", "native"):
        sw = Switch(seed=1, backend=backend, **kw)
        sw.install_program(sw.load_program(path.read_bytes()))
        sw._now_us = lambda: 123456  # type: ignore[method-assign]
        sw.seen = []  # type: ignore[attr-defined]  # packet-ins and digests, in order
        sw.packet_in_handlers.append(lambda f, seen=sw.seen: seen.append(("in", f)))
        sw.digest_handlers.append(lambda n, v, seen=sw.seen: seen.append(("digest", n, v)))
        out.append(sw)
    assert out[0].program.native is None and out[1].program.native is not None
    return out[0], out[1]


def random_actions(prog: Any, table: str) -> list[Any]:
    """The table's actions that draw no random number (the backends' generators differ)."""
    spec_actions = {int(a["id"]): a for a in prog.spec["actions"]}
    infos = prog._table_actions[table].values()
    return [i for i in infos
            if not any(p["op"] == "modify_field_rng_uniform" for p in spec_actions[i.id]["primitives"])]


def key_values(prog: Any, frames: list[bytes]) -> dict[int, list[int]]:
    """Per PHV slot, the values the parser finds there in ``frames`` (so that random
    entries can hit)."""
    seen: dict[int, set[int]] = {}
    for f in frames:
        F = prog.new_phv()
        prog.parse(F, f)
        for s, v in enumerate(F):
            seen.setdefault(s, set()).add(v)
    return {s: sorted(v) for s, v in seen.items()}


def random_key(tbl: Any, slots: list[int | None], values: dict[int, list[int]], rng: np.random.Generator) -> tuple:
    key = []
    for kf, s in zip(tbl.keys, slots, strict=True):
        w = kf.bitwidth
        full = (1 << w) - 1
        pool = values.get(s, []) if s is not None else []
        v = int(pool[int(rng.integers(len(pool)))]) & full if pool and rng.random() < 0.8 else \
            int(rng.integers(0, min(full, 2**62) + 1))
        mt = kf.match_type
        if mt == "exact":
            key.append(v)
        elif mt == "lpm":
            plen = int(rng.integers(0, w + 1))
            key.append((v & (full ^ ((1 << (w - plen)) - 1)), plen))
        elif mt in ("ternary", "optional"):
            mask = full if rng.random() < 0.5 else int(rng.integers(0, min(full, 2**62) + 1)) & full
            mask = 0 if mt == "optional" and mask != full else mask
            key.append((v & mask, mask))
        else:
            lo = max(0, v - int(rng.integers(0, 4)))
            key.append((lo, min(full, v + int(rng.integers(0, 4)))))
    return tuple(key)


def fill_tables(sws: tuple[Switch, Switch], frames: list[bytes], rng: np.random.Generator,
                per_table: int = 12) -> int:
    """The same random entries (keys taken mostly from the frames' fields) and random
    default actions into every table of both switches; returns how many went in."""
    prog0 = sws[0].program
    values = key_values(prog0, frames)
    spec_tables = {t["name"]: t for p in prog0.spec["pipelines"] for t in p["tables"]}
    n = 0
    for name, tbl in prog0.tables.items():
        acts = random_actions(prog0, name)
        if not acts or tbl.profile is not None:
            continue
        slots = [prog0.headers[k["target"]].base if k["match_type"] == "valid" else prog0.field_slot(k["target"])
                 for k in spec_tables[name]["key"]]
        for _ in range(per_table if tbl.keys else 0):
            key = random_key(tbl, slots, values, rng)
            keep = [a for a in acts if "drop" not in a.name.rsplit(".", 1)[-1]] or acts
            pick = keep if rng.random() < 0.85 else acts  # mostly actions that let packets on
            info = pick[int(rng.integers(len(pick)))]
            params = tuple(int(rng.integers(0, min((1 << w) - 1, 2**62) + 1)) for _, w in info.params)
            prio = int(rng.integers(1, 1000)) if tbl.needs_priority else 0
            ok = 0
            for sw in sws:
                p = sw.program
                try:
                    p.tables[name].insert(TableEntry(key, p.action_call(name, info.name, params), prio))
                    ok += 1
                except Exception:  # a duplicate key, a full table: the same on both
                    pass
            n += ok // 2
        if not tbl.default_const and rng.random() < 0.2:
            info = acts[int(rng.integers(len(acts)))]
            params = tuple(int(rng.integers(0, min((1 << w) - 1, 2**62) + 1)) for _, w in info.params)
            for sw in sws:
                sw.program.tables[name].set_default(sw.program.action_call(name, info.name, params))
    return n


def fill_profiles(sws: tuple[Switch, Switch], frames: list[bytes], rng: np.random.Generator) -> int:
    """The same random members, groups (random weights, one empty) and entries pointing
    at them into every action profile and its tables of both switches; returns how many
    entries went in."""
    from targets.embedded.action_profiles import IndirectRef

    prog0 = sws[0].program
    values = key_values(prog0, frames)
    spec_tables = {t["name"]: t for p in prog0.spec["pipelines"] for t in p["tables"]}
    n = 0
    for name, ap0 in prog0.action_profiles.items():
        infos = list(prog0._profile_actions.get(name, {}).values())
        members = list(range(1, 9))
        for mid in members:
            info = infos[int(rng.integers(len(infos)))]
            params = tuple(int(rng.integers(0, min((1 << w) - 1, 2**62) + 1)) for _, w in info.params)
            for sw in sws:
                sw.program.action_profiles[name].add_member(mid, sw.program.profile_action_call(name, info.name, params))
        groups = [1, 2, 3, 4] if ap0.with_selector else []
        for gid in groups:
            pick = [] if gid == 4 else sorted({int(m) for m in rng.choice(members, size=int(rng.integers(1, 6)))})
            weights = [(m, int(rng.integers(1, 4))) for m in pick]
            for sw in sws:
                sw.program.action_profiles[name].add_group(gid, 0, weights)
        for tname, tbl in prog0.tables.items():
            if tbl.profile is not ap0:
                continue
            slots = [prog0.field_slot(k["target"]) for k in spec_tables[tname]["key"]]
            for _ in range(12):
                key = random_key(tbl, slots, values, rng)
                gid = groups[int(rng.integers(len(groups)))] if groups and rng.random() < 0.6 else None
                mid = members[int(rng.integers(len(members)))]
                for sw in sws:
                    ap = sw.program.action_profiles[name]
                    ref = IndirectRef(group=ap.groups[gid]) if gid is not None else IndirectRef(member=ap.members[mid])
                    try:
                        sw.program.tables[tname].insert(TableEntry(key, ref))
                        n += 1
                    except Exception:  # a duplicate key: the same on both
                        pass
    return n // 2


def fill_value_sets(sws: tuple[Switch, Switch], rng: np.random.Generator) -> int:
    """The same random members (common EtherTypes among them) into every parser value
    set of both switches; returns how many went in."""
    n = 0
    for name, vs in sws[0].program.value_sets.items():
        widths = vs.uses[0].widths if vs.uses else [vs.bitwidth]
        members = set()
        for _ in range(vs.size):
            members.add(tuple(int(rng.choice([0x0800, 0x86DD, 0x88B6, int(rng.integers(0, 1 << w))])) & ((1 << w) - 1)
                              for w in widths))
        for sw in sws:
            sw.program.value_sets[name].set_members(sorted(members), widths)
        n += len(members)
    return n


def snapshot(sw: Switch) -> dict[str, Any]:
    """Everything the program keeps, and the switch's own counters."""
    p = sw.program
    st = sw.stats
    for t in p.tables.values():
        t.direct_read()  # the native backend's direct counters into the entries
    return {
        "direct": {n: (sorted((repr(e.key), e.priority, e.packets, e.bytes) for e in t.entries()),
                       t.default_packets, t.default_bytes) for n, t in p.tables.items()},
        "registers": {n: list(r.cells) for n, r in p.registers.items()},
        "counters": {n: (list(c.packets), list(c.bytes)) for n, c in p.counters.items()},
        "stats": (st.pipeline_drops, st.no_such_port, st.priority_out_of_range, st.loop_limit, st.errors),
        "queues": {port: (list(q.enqueued), list(q.dropped)) for port, q in sw._tm.items()},
        "seen": list(sw.seen),  # type: ignore[attr-defined]
    }


def run_both(sws: tuple[Switch, Switch], frames: list[tuple[int, bytes]]) -> list[tuple[Any, Any]]:
    """Frames through both switches; the (python, native) outputs that differ."""
    diffs = []
    for port, f in frames:
        a, b = sws[0].process(port, f), sws[1].process(port, f)
        for sw, o in zip(sws, (a, b), strict=True):
            for p, _ in o:
                sw.stats.ports[p].tx += 1  # what left (process() sends nothing)
        if a != b:
            diffs.append((a, b))
    return diffs



def python_out(py: Switch, frames: list[tuple[int, bytes]]) -> dict[int, list[bytes]]:
    """The frames the Python-backend switch sends for ``frames`` (port, frame), per port,
    its tx counters kept as the loop would."""
    out: dict[int, list[bytes]] = {}
    for p, f in frames:
        for q, frame in py.process(p, f):
            py.stats.ports[q].tx += 1
            out.setdefault(q, []).append(frame)
    return out


def through_c_loop(sw: Switch, frames: list[tuple[int, bytes]], ports: range, chunk: int) -> dict[int, list[bytes]]:
    """``frames`` (port, frame) through ``sw``'s data-plane loop in C over datagram socket
    pairs, ``chunk`` frames at a time, each chunk run until the loop is idle (a packet the
    Python path finishes included); what left, per port (ports that sent nothing left out)."""
    import select
    import socket

    from targets.embedded.native.nloop import NativeLoop

    pairs = {p: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM) for p in ports}
    for a, b in pairs.values():
        a.setblocking(False)
        b.setblocking(False)
    sw._ports = {p: a for p, (a, _) in pairs.items()}
    sw._fd_port = {a.fileno(): p for p, (a, _) in pairs.items()}
    ep = select.epoll()
    loop = NativeLoop(ep)
    got: dict[int, list[bytes]] = {}
    try:
        assert loop.refresh([sw])
        for i in range(0, len(frames), chunk):
            for p, f in frames[i:i + chunk]:
                pairs[p][1].send(f)
            while loop.run(0.01)[0] != 0:
                pass
            for p, (_, b) in pairs.items():
                while True:
                    try:
                        got.setdefault(p, []).append(b.recv(70000))
                    except BlockingIOError:
                        break
    finally:
        loop.close()
        ep.close()
        for a, b in pairs.values():
            a.close()
            b.close()
    return {p: v for p, v in got.items() if v}
