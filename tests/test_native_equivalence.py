"""The native backend against the Python one: the same frames and entries give
byte-identical frames out, egress ports, packet-ins, digests, registers, counters and
switch counters, for every program the native backend accepts; what it refuses is
listed with the feature it lacks (tests/native_pair.py builds the pairs)."""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pytest
from scapy.all import IP, UDP, Ether

from bench import frame_fuzz
from targets.embedded import compiler as compiler_mod
from targets.embedded.codegen import support
from targets.embedded.compiler import load_file
from targets.embedded.native.build import compiler
from targets.embedded.native.cexpr import Unsupported
from targets.embedded.native.nmeters import set_meter_clock
from targets.embedded.state import Replica, TableEntry
from tests.native_pair import (
    PROGRAMS,
    fill_profiles,
    fill_tables,
    fill_value_sets,
    pair,
    run_both,
    snapshot,
)

pytestmark = pytest.mark.skipif(compiler() is None, reason="no C compiler")

# What the native backend refuses today, and why (anything else must be accepted).
REFUSED = {
    "action_features": "signed fields",
}
ROUTES = "MyIngress.forwarding.ipv4_routes"
ACCEPTED = [p for p in PROGRAMS if p.stem not in REFUSED]


def _probes(rng: np.random.Generator) -> list[bytes]:
    """Frames of the conformance programs' probe headers (tests/p4/packets.py), with
    random field values."""
    import random

    from scapy.all import Packet, fuzz

    from tests.p4 import packets

    random.seed(int(rng.integers(2**32)))  # scapy's fuzz() draws from random
    classes = [c for c in vars(packets).values()
               if isinstance(c, type) and issubclass(c, Packet) and c.__module__ == packets.__name__]
    out = []
    for c in classes:
        for _ in range(4):
            out.append(bytes(Ether(src="00:00:0a:00:00:01", dst="00:00:0a:00:00:02") / fuzz(c())))
            out.append(bytes(Ether() / IP(dst="10.0.0.2", proto=253) / fuzz(c())))
            out.append(bytes(Ether() / IP(dst="10.0.0.2") / UDP(dport=40000) / fuzz(c())))
    return out


def _frames(rng: np.random.Generator, n: int) -> list[bytes]:
    peers = [("00:00:0a:00:00:01", "10.0.0.1"), ("00:00:0a:00:00:03", "10.0.0.3")]
    seeds = frame_fuzz.corpus("00:00:0a:00:00:02", "10.0.0.2", peers) + _probes(rng)
    return seeds + [frame_fuzz.mutate(seeds, rng) for _ in range(n)]


def test_refusals_name_the_missing_feature() -> None:
    from targets.embedded.native.cgen import NativeGen

    for path in PROGRAMS:
        prog = load_file(str(path))
        if path.stem in REFUSED:
            with pytest.raises(Unsupported, match=REFUSED[path.stem]):
                NativeGen(prog)
        else:
            assert "g_ingress" in NativeGen(prog).source


@pytest.mark.parametrize("path", ACCEPTED, ids=[p.stem for p in ACCEPTED])
def test_random_entries_and_frames_identical(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Random entries (keys mostly from the frames' own fields, random actions and
    defaults; members and groups of action profiles; value set members), random meter
    configurations (one clock, frozen, for both backends' meters)
    and 600 fuzzed frames of every protocol, into several ports."""
    rng = np.random.default_rng(zlib.crc32(path.stem.encode()))
    for mod in (support, compiler_mod):
        monkeypatch.setattr(mod, "monotonic", lambda: 1000.0)
    sws = pair(path, cpu_port=64, priority_queues=8)
    set_meter_clock(sws[1].program.native, 1000.0)
    for name, arr in sws[0].program.meters.items():
        for i in range(arr.size):
            cir, cb = int(rng.integers(0, 50)), int(rng.integers(0, 400))
            cfg = (cir, cb, cir + int(rng.integers(0, 50)), cb + int(rng.integers(0, 400)))
            for sw in sws:
                sw.program.meters[name].set_config(i, *cfg)
    for sw in sws:
        sw.pre.set_group(1, [Replica(2, 0), Replica(3, 7)], create=True)
        sw.pre.set_group(1001, [Replica(1, 0), Replica(4, 1)], create=True)
        routes = sw.program.tables.get(ROUTES)
        if routes is not None:  # a default route, so that the forwarding programs forward
            call = sw.program.action_call(ROUTES, "MyIngress.forwarding.set_next_hop", (0x020000000002, 2))
            routes.insert(TableEntry(((0, 0),), call))
    frames = _frames(rng, 600)
    fill_value_sets(sws, rng)
    assert fill_tables(sws, frames, rng) + fill_profiles(sws, frames, rng) > 0 or \
        not any(t.keys for t in sws[0].program.tables.values())
    for name in set(sws[0].program.direct_meters.values()):  # a config on some entries (direct.c)
        for e in sws[0].program.tables[name].entries():
            if rng.random() < 0.7:
                cir, cb = int(rng.integers(0, 50)), int(rng.integers(0, 30))
                for sw in sws:
                    t = sw.program.tables[name]
                    twin = t.get(e.key, e.priority)
                    twin.meter_config, twin.meter = (cir, cb, cir + 5, cb + 5), None
                    t.direct_written(twin, counters=False, meter=True)
    ports = [(int(rng.choice([0, 1, 2, 3, 64])), f) for f in frames]
    diffs = run_both(sws, ports)
    out = sum(len(b) for b in sws[1].seen) + sum(p.tx for p in sws[1].stats.ports.values())
    assert not diffs, f"{len(diffs)} frames differ, first: {diffs[0]}"
    assert snapshot(sws[0]) == snapshot(sws[1])
    if path.stem in ("lan", "nic", "cpu_io", "l2_path"):  # these forward without their controller
        assert out > 0


def test_forwarding_with_routes_ecmp_and_priorities_identical() -> None:
    """forward.p4 configured as a router: LPM routes (one an ECMP group over 3 members,
    crc16 of the 5-tuple), per-port MACs, DSCP priorities; UDP and TCP frames to many
    addresses, TTLs and ports give the same bytes out (TTL, MACs, checksums)."""
    from scapy.all import TCP

    path = next(p for p in PROGRAMS if p.stem == "forward")
    sws = pair(path, priority_queues=4)
    ecmp, macs = "MyIngress.forwarding.ecmp_members", "MyEgress.mac_rewrite.port_macs"
    dscp = "MyIngress.priority_classifier.dscp_priority"
    for sw in sws:
        p = sw.program

        def add(table: str, key: tuple, action: str, *params: int, prio: int = 0, p: object = p) -> None:
            p.tables[table].insert(TableEntry(key, p.action_call(table, action, params), prio))

        f = "MyIngress.forwarding."
        add(ROUTES, ((0x0A000000, 8),), f + "set_next_hop", 0x020000000201, 3)
        add(ROUTES, ((0x0A000002, 32),), f + "set_next_hop", 0x000000000002, 2)
        add(ROUTES, ((0x0A010000, 16),), f + "set_ecmp_group", 7, 3)
        for m in range(3):
            add(ecmp, (7, m), f + "set_next_hop", 0x0200000000A0 + m, 4 + m)
        for port in range(2, 7):
            add(macs, (port,), "MyEgress.mac_rewrite.set_source_mac", 0x020000000100 + port)
        add(dscp, ((0x20, 0xFC),), "MyIngress.priority_classifier.set_priority", 2, prio=10)
    rng = np.random.default_rng(11)
    frames = []
    for _ in range(300):
        dst = f"10.{int(rng.choice([0, 1, 9]))}.{int(rng.integers(0, 4))}.{int(rng.integers(0, 255))}"
        l4 = UDP(sport=int(rng.integers(1, 65535)), dport=5000) if rng.random() < 0.7 else TCP(sport=int(rng.integers(1, 65535)))
        ip = IP(src="10.0.0.1", dst=dst, ttl=int(rng.integers(0, 4)) or 64, tos=int(rng.choice([0, 0x80])))
        frames.append((1, bytes(Ether(src="00:00:0a:00:00:01", dst="02:00:00:01:00:01") / ip / l4 / rng.bytes(20))))
    diffs = run_both(sws, frames)
    assert not diffs, f"{len(diffs)} frames differ, first: {diffs[0]}"
    assert snapshot(sws[0]) == snapshot(sws[1])
    sent = {p: s.tx for p, s in sws[1].stats.ports.items() if s.tx}
    assert sum(sent.values()) > 150 and len(sent) >= 4, sent  # routed, and spread over the ECMP members


def _grad(frag: int, rank: int, vals: np.ndarray, fanin: int = 2) -> bytes:
    from wire.ina import MsgType, encode_ina

    pl = encode_ina(MsgType.GRAD, 1, rank, frag, 1, 0, 1 << rank, 1, fanin, values=vals)
    return bytes(Ether() / IP(src="10.0.0.2", dst="10.255.0.1") / UDP(sport=40000, dport=40000) / pl)


@pytest.mark.parametrize("values", [64, 256])
def test_ina_aggregation_identical(values: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The aggregating switch of job 1: GRADs of 3 ranks over 12 fragments, some
    repeated, sum exactly on both backends (every lane register, the 256-bit
    contributor bitmap); the complete aggregates leave identically."""
    from controller.ina import ina_program_path
    from tests.ina_probe import aggregating_switch

    sws = []
    for backend in ("python", "native"):
        monkeypatch.setenv("GRADNET_BACKEND", backend)
        sw, prog = aggregating_switch(ina_program_path(values).read_bytes())
        sw._now_us = lambda: 5000  # type: ignore[method-assign]
        sw.pre.set_group(1001, [Replica(2, 0), Replica(3, 0)], create=True)
        sw.seen = []  # type: ignore[attr-defined]
        sws.append(sw)
    assert sws[0].program.native is None and sws[1].program.native is not None
    rng = np.random.default_rng(values)
    frames = []
    for frag in range(12):
        for rank in range(3):
            vals = rng.integers(-(2**31), 2**31, values).astype(np.int32)
            frames.append((1, _grad(frag, rank, vals, fanin=3)))
            if rng.random() < 0.2:
                frames.append((1, frames[-1][1]))  # a retransmission
    diffs = run_both((sws[0], sws[1]), frames)
    assert not diffs, f"{len(diffs)} frames differ"
    a, b = snapshot(sws[0]), snapshot(sws[1])
    assert a == b
    bitmaps = a["registers"]["MyIngress.aggregator.agg_bitmap"]
    assert any(bitmaps) or sws[0].stats.ports[2].tx + len(sws[0]._txq) >= 0
    lanes = a["registers"]["MyIngress.aggregator.agg_value_00"]
    assert any(lanes)  # values were summed, not all dropped
