"""Single-entry table writes on the native backend (tblops.c): inserts, modifies and
deletes on exact (hashed), LPM and ternary (scanned) tables, one at a time and inside a
P4Runtime-style batch, leave native memory matching the Python table -- the same frames
out of forward.p4 on both backends after every round of random writes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scapy.all import IP, UDP, Ether

from targets.embedded.native.build import compiler
from targets.embedded.state import StateError, TableEntry
from tests.native_pair import PROGRAMS, pair, run_both, snapshot

pytestmark = pytest.mark.skipif(compiler() is None, reason="no C compiler")

ROUTES, MACS = "MyIngress.forwarding.ipv4_routes", "MyEgress.mac_rewrite.port_macs"
DSCP = "MyIngress.priority_classifier.dscp_priority"


def _write(sws: tuple[Any, Any], rng: np.random.Generator) -> None:
    """One random write, the same on both switches (a refused one refused on both)."""
    table = str(rng.choice([ROUTES, MACS, DSCP]))
    op = str(rng.choice(["insert", "insert", "modify", "delete"]))
    if table == ROUTES:
        plen = int(rng.choice([8, 16, 24, 32]))
        action, params, prio = "MyIngress.forwarding.set_next_hop", (int(rng.integers(1, 2**48)), int(rng.integers(1, 8))), 0
        key: tuple = ((0x0A000000 | int(rng.integers(0, 4)) << 16 | int(rng.integers(0, 3)) << 8) >> (32 - plen) << (32 - plen),
               plen),
    elif table == MACS:
        key, action, params, prio = (int(rng.integers(0, 40)),), "MyEgress.mac_rewrite.set_source_mac", (
            int(rng.integers(1, 2**48)),), 0
    else:
        key = ((int(rng.integers(0, 4)) << 6, 0xC0 if rng.random() < 0.5 else 0xFC),)
        action, params, prio = "MyIngress.priority_classifier.set_priority", (int(rng.integers(0, 4)),), int(
            rng.integers(1, 4))
    for sw in sws:
        t = sw.program.tables[table]
        try:
            if op == "insert":
                t.insert(TableEntry(key, sw.program.action_call(table, action, params), prio))
            elif op == "modify":
                t.modify(key, prio, sw.program.action_call(table, action, params))
            else:
                t.delete(key, prio)
        except StateError:
            pass


def _frames(rng: np.random.Generator) -> list[tuple[int, bytes]]:
    return [(1, bytes(Ether(src="00:00:0a:00:00:01", dst="02:00:00:01:00:01")
                      / IP(src="10.0.0.1", dst=f"10.{int(rng.integers(0, 4))}.{int(rng.integers(0, 3))}.9",
                           tos=int(rng.integers(0, 4)) << 6) / UDP(sport=7, dport=5000)))
            for _ in range(40)]


@pytest.mark.parametrize("batched", [False, True])
def test_random_single_entry_writes_match_python(batched: bool) -> None:
    """40 rounds of 12 random writes (each table sees inserts over existing keys,
    modifies and deletes of missing ones too), then frames to every address and DSCP:
    the same outputs, port by port, as the Python backend; the native tables were
    never copied whole after the first load."""
    import contextlib

    sws = pair(next(p for p in PROGRAMS if p.stem == "forward"), priority_queues=4)
    nat = sws[1].program.native
    copies = []
    whole = nat._sync_table
    nat._sync_table = lambda tbl: (copies.append(tbl.name), whole(tbl))  # type: ignore[method-assign]
    rng = np.random.default_rng(17 + batched)
    for _ in range(40):
        with nat.deferred_sync() if batched else contextlib.nullcontext():
            for _ in range(12):
                _write(sws, rng)
        diffs = run_both(sws, _frames(rng))
        assert not diffs, diffs[0]
    assert snapshot(sws[0]) == snapshot(sws[1])
    assert copies == []
    assert sum(p.tx for p in sws[1].stats.ports.values()) > 100  # routes were there to route
    assert len(sws[1].program.tables[ROUTES]) > 5 and len(sws[1].program.tables[MACS]) > 5


def test_deletes_keep_the_exact_hash_whole() -> None:
    """An exact table filled with 511 entries then emptied in random order, one delete
    at a time (each moves the last entry into the hole and shifts the hash chain): the
    entries around every 50th step found while present, missed once deleted."""
    sws = pair(next(p for p in PROGRAMS if p.stem == "forward"), priority_queues=4)
    sw = sws[1]
    p = sw.program
    p.tables[ROUTES].insert(TableEntry(((0x0A000000, 8),), p.action_call(
        ROUTES, "MyIngress.forwarding.set_next_hop", (0x020000000002, 2))))
    for port in range(511):
        p.tables[MACS].insert(TableEntry((port,), p.action_call(MACS, "MyEgress.mac_rewrite.set_source_mac",
                                                                (0x020000000000 + port,))))
    frame = bytes(Ether(src="00:00:0a:00:00:01", dst="02:00:00:01:00:01") / IP(src="10.0.0.1", dst="10.0.0.9")
                  / UDP(sport=7, dport=5000))
    order = np.random.default_rng(2).permutation(511).tolist()
    gone: set[int] = set()
    for i, port in enumerate(order):
        p.tables[MACS].delete((port,), 0)
        gone.add(port)
        if i % 50 == 0:
            for probe in order[i - 5 if i >= 5 else 0:i + 5]:
                ent = p.tables[ROUTES]
                ent.modify(((0x0A000000, 8),), 0, p.action_call(ROUTES, "MyIngress.forwarding.set_next_hop",
                                                              (0x020000000002, probe)))
                out = sw.process(1, frame)
                want = bytes.fromhex("00000a000001") if probe in gone else (0x020000000000 + probe).to_bytes(6, "big")
                assert [(q, f[6:12]) for q, f in out] == [(probe, want)], (probe, i)
