"""ndn.p4 on the embedded target, in process: parser bounds, FIB, PIT, persistent PIT.

The committed p4c output of p4src/ndn.p4 runs through ``Switch.process``; packets are
built with python-ndn exactly as the host agents build them. The network-level tests
(every step of the seed across a fat-tree) are in test_ndn_network.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ndn.encoding import InterestParam, MetaInfo, make_data, make_interest

from controller.ndn import (
    NDN_DROP_REASONS,
    NDN_EVENTS,
    NameBoundsError,
    PersistentPit,
    TransientPit,
    check_name,
    components,
    prefix_hash,
)
from controller.p4runtime import Program
from hosts.ndn.common import NDN_MAC, data_packet, interest_packet, name_of
from targets.embedded.state import Replica, TableEntry
from targets.embedded.switch import Switch

ROOT = Path(__file__).resolve().parent.parent
NDN_JSON = ROOT / "p4src" / "build" / "ndn.json"
FIB = "MyIngress.fib.fib"
PPIT = "MyIngress.persistent_pit.persistent_pit"
SRC = bytes.fromhex("00000a000001")


def frame(pkt: bytes, ethertype: int = 0x8624) -> bytes:
    return NDN_MAC + SRC + ethertype.to_bytes(2, "big") + pkt


@pytest.fixture
def sw() -> Switch:
    s = Switch(seed=1, cpu_port=255)
    s.install_program(s.load_program(NDN_JSON.read_bytes()))
    # every subset of ports 1..4 as the controller installs them (TransientPit.port_groups)
    for g in TransientPit.port_groups([1, 2, 3, 4]):
        e = g.entity if hasattr(g, "entity") else g
        s.pre.set_group(e.multicast_group_id, [Replica(r[0] if isinstance(r, tuple) else r, 0)
                                               for r in e.replicas], create=True)
    return s


def route(sw: Switch, prefix: str, port: int) -> None:
    p = sw.program
    k = len(check_name(prefix))
    key = tuple((prefix_hash(prefix), 0xFFFFFFFF) if i == k else (0, 0) for i in range(1, 7))
    p.tables[FIB].insert(TableEntry(key, p.action_call(FIB, "MyIngress.fib.set_next_hop", (port,)), priority=k))


def counters(sw: Switch) -> tuple[dict[str, int], dict[str, int]]:
    c = sw.program.counters
    drops = {NDN_DROP_REASONS.get(i, str(i)): c["MyIngress.drops.ndn_drops"].read(i)[0] for i in range(16)}
    ev = {NDN_EVENTS.get(i, str(i)): c["MyIngress.drops.ndn_events"].read(i)[0] for i in range(8)}
    return {k: v for k, v in drops.items() if v}, {k: v for k, v in ev.items() if v}


def test_fib_longest_prefix_and_bytes_unchanged(sw: Switch) -> None:
    route(sw, "/h2", 2)
    route(sw, "/h2/PS/train", 3)
    i1 = interest_packet("/h2/h1/train")
    i2 = interest_packet("/h2/PS/train/v=1/seg=3")
    assert sw.process(1, frame(i1)) == [(2, frame(i1))]
    assert sw.process(1, frame(i2)) == [(3, frame(i2))]
    assert counters(sw) == ({}, {"forwarded": 2})


def test_pit_aggregates_and_data_consumes(sw: Switch) -> None:
    route(sw, "/h1", 1)
    name = "/h1/train/v=2/seg=0"
    i = interest_packet(name)
    assert sw.process(2, frame(i)) == [(1, frame(i))]
    assert sw.process(3, frame(interest_packet(name))) == []          # aggregated
    again = interest_packet(name)
    assert sw.process(2, frame(again)) == [(1, frame(again))]        # retransmission
    d = data_packet(name, b"\x01" * 1400, final_block=3)
    assert sorted(sw.process(1, frame(d))) == [(2, frame(d)), (3, frame(d))]
    assert sw.process(1, frame(d)) == []                             # entry consumed
    drops, ev = counters(sw)
    assert drops == {"unsolicited_data": 1}
    assert ev == {"forwarded": 2, "aggregated": 1, "pit_hit": 1}


def test_insert_is_punted_and_distribute_follows_persistent_pit(sw: Switch) -> None:
    got: list[bytes] = []
    sw.packet_in_handlers.append(got.append)
    ins = interest_packet(name_of(b"*insert*", "h1", "train", "h3"))
    assert sw.process(2, frame(ins)) == []
    assert len(got) == 1 and got[0][2:] == frame(ins)
    assert int.from_bytes(got[0][:2], "big") >> 7 == 2                # packet_in.ingress_port
    route(sw, "/h1", 1)                                              # the PS is behind port 1
    dist = data_packet(name_of(b"*distribute*", "h1", "train", "v=1", "seg=0"), b"x" * 100)
    assert sw.process(1, frame(dist)) == []                          # no entry yet: counted
    p = sw.program
    key = PersistentPit.match(components("/h1/train"))
    p.tables[PPIT].insert(TableEntry(tuple(key.values()),
                                     p.action_call(PPIT, "MyIngress.persistent_pit.set_subscribers", (0x1000,))))
    sw.pre.set_group(0x1000, [Replica(2, 0), Replica(3, 0), Replica(4, 0)], create=True)
    for _ in range(2):                                               # never consumed
        assert sorted(sw.process(1, frame(dist))) == [(2, frame(dist)), (3, frame(dist)), (4, frame(dist))]
    drops, ev = counters(sw)
    assert drops == {"no_subscribers": 1}
    assert ev == {"punted": 1, "distributed": 2}


def _subscribed(sw: Switch, ports: list[int]) -> None:
    p = sw.program
    key = PersistentPit.match(components("/h1/train"))
    p.tables[PPIT].insert(TableEntry(tuple(key.values()),
                                     p.action_call(PPIT, "MyIngress.persistent_pit.set_subscribers", (0x1000,))))
    sw.pre.set_group(0x1000, [Replica(q, 0) for q in ports], create=True)


def test_distribute_only_from_the_fib_face_toward_the_ps(sw: Switch) -> None:
    """Upstream check: a distribute Data is replicated only when it comes in on the port
    the FIB names for the name after the marker; from any other port (a subscriber, a
    bystander) it is a counted ``not_upstream`` drop, and the PS's own Data still goes out."""
    _subscribed(sw, [2, 3])
    dist = data_packet(name_of(b"*distribute*", "h1", "train", "v=1", "seg=0"), b"x" * 100)
    assert sw.process(1, frame(dist)) == []                          # no FIB route toward /h1
    route(sw, "/h1", 1)
    for port in (2, 3, 4):                                           # subscribers, a bystander
        assert sw.process(port, frame(dist)) == []
    assert sorted(sw.process(1, frame(dist))) == [(2, frame(dist)), (3, frame(dist))]
    # the longest FIB prefix of /h1/train/... decides: /h1/train now goes out port 4
    route(sw, "/h1/train", 4)
    assert sw.process(1, frame(dist)) == []
    assert sorted(sw.process(4, frame(dist))) == [(2, frame(dist)), (3, frame(dist))]
    # a forged ack of a subscription, from a subscriber's port, is refused as well
    ack = data_packet(name_of(b"*distribute*", "h1", "train", "h3"), b"")
    assert sw.process(3, frame(ack)) == []
    drops, ev = counters(sw)
    assert drops == {"no_route": 1, "not_upstream": 5}
    assert ev == {"distributed": 2}


def test_out_of_bound_and_malformed_packets_are_counted_drops(sw: Switch) -> None:
    route(sw, "/h2", 2)
    deep = bytes(make_interest("/h2/a/b/c/d/e/f", InterestParam(nonce=1)))
    long_comp = bytes(make_interest("/h2/" + "x" * 17, InterestParam(nonce=1)))
    long_name = bytes(make_interest("/h2/" + "/".join(["abcdefghijklmn"] * 4), InterestParam(nonce=1)))
    big_type = bytes(make_interest([b"\x08\x02h2", b"\x80\x01x"], InterestParam(nonce=1)))
    overrun = bytearray(interest_packet("/h2/abc"))
    overrun[5] = 10                                  # first component overruns the Name
    truncated = interest_packet("/h2/abcdef")[:10]
    five_byte = bytes([0x05, 0xFE, 0, 0, 0, 10]) + bytes(10)
    not_name = bytes([0x05, 0x04, 0x0A, 0x02, 0, 0])
    lp = bytes([0x64, 0x02, 0x00, 0x00])
    for bad in (deep, long_comp, long_name, big_type, bytes(overrun), truncated, five_byte, not_name, lp):
        assert sw.process(1, frame(bad)) == []
    assert sw.process(1, frame(b"\x45" + bytes(40), 0x0800)) == []
    assert sw.process(1, frame(interest_packet("/h9"))) == []        # no FIB entry
    assert sw.process(9, frame(interest_packet("/h2/q"))) == []      # port > 8
    drops, _ = counters(sw)
    assert drops == {"not_ndn": 2, "length_form": 1, "malformed": 2, "name_too_long": 1,
                     "name_too_deep": 1, "component_too_long": 2, "parser_error": 1,
                     "no_route": 1, "port_range": 1}
    ok = interest_packet("/h2/still/works")
    assert sw.process(1, frame(ok)) == [(2, frame(ok))]              # keeps forwarding


def test_host_side_bounds_are_clear_errors() -> None:
    for bad in ("/a/b/c/d/e/f/g", "/" + "x" * 17, "/" + "/".join(["abcdefghijklmn"] * 5)):
        with pytest.raises(NameBoundsError):
            interest_packet(bad)
    assert len(check_name("/a/b/c/d/e/f")) == 6
    # a 16-byte component at the bound, and a 3-byte-length Data, are fine
    d = bytes(make_data("/h1/" + "y" * 16, MetaInfo(), b"z" * 1400))
    assert d[1] == 0xFD


def test_program_blocks_bind() -> None:
    prog = Program.load(NDN_JSON)
    from controller.ndn import NdnDrops, NdnFib

    for cls in (NdnFib, TransientPit, PersistentPit, NdnDrops):
        prog.block(cls)
