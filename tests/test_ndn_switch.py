"""ndn.p4 on the embedded target, in process: parser bounds, FIB, PIT, persistent PIT,
nonces, lifetimes, soft-state subscriptions (the same program on both targets over real
ports: test_ndn_dataplane.py).

The committed p4c output of p4src/ndn.p4 runs through ``Switch.process``; packets are
built with python-ndn exactly as the host agents build them. The network-level tests
(every step of the method across a fat-tree) are in test_ndn_network.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ndn.encoding import InterestParam, MetaInfo, make_data, make_interest

from controller.ndn import (
    NDN_DROP_REASONS,
    NDN_EVENTS,
    OUT_VIA_PIPELINE,
    PERSISTENT,
    NameBoundsError,
    PersistentPit,
    TransientPit,
    check_name,
    components,
    prefix_hash,
)
from controller.ndn.persistent_pit import PERSISTENT_LIFETIME_US
from controller.p4runtime import Program
from targets.embedded.state import Replica, TableEntry
from targets.embedded.switch import Switch
from wire.ndn import NDN_MAC, data_packet, interest_packet, name_of

ROOT = Path(__file__).resolve().parent.parent
NDN_JSON = ROOT / "p4src" / "build" / "ndn.json"
FIB = "MyIngress.fib.fib"
PPIT = "MyIngress.persistent_pit.persistent_pit"
SRC = bytes.fromhex("00000a000001")


def frame(pkt: bytes, ethertype: int = 0x8624) -> bytes:
    return NDN_MAC + SRC + ethertype.to_bytes(2, "big") + pkt


def ndn_switch() -> Switch:
    """ndn.json in process, with every subset of ports 1..4 as a multicast group, as the
    controller installs them (TransientPit.port_groups)."""
    s = Switch(seed=1, cpu_port=255)
    s.install_program(s.load_program(NDN_JSON.read_bytes()))
    for g in TransientPit.port_groups([1, 2, 3, 4]):
        e = g.entity if hasattr(g, "entity") else g
        s.pre.set_group(e.multicast_group_id, [Replica(r[0] if isinstance(r, tuple) else r, 0)
                                               for r in e.replicas], create=True)
    return s


@pytest.fixture
def sw() -> Switch:
    return ndn_switch()


def route(sw: Switch, prefix: str, port: int) -> None:
    p = sw.program
    k = len(check_name(prefix))
    key = tuple((prefix_hash(prefix), 0xFFFFFFFF) if i == k else (0, 0) for i in range(1, 7))
    p.tables[FIB].insert(TableEntry(key, p.action_call(FIB, "MyIngress.fib.set_next_hop", (port,)), priority=k))


def counters(sw: Switch) -> tuple[dict[str, int], dict[str, int]]:
    c = sw.program.counters
    drops = {NDN_DROP_REASONS.get(i, str(i)): c["MyIngress.drops.ndn_drops"].read(i)[0] for i in range(24)}
    ev = {NDN_EVENTS.get(i, str(i)): c["MyIngress.drops.ndn_events"].read(i)[0] for i in range(16)}
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


def _controller_mode(sw: Switch, lifetime_us: int = 6_000_000) -> None:
    p = sw.program
    t = "MyIngress.persistent_pit.subscription_config"
    p.tables[t].set_default(p.action_call(t, "MyIngress.persistent_pit.set_subscriptions", (1, lifetime_us)))


def _sub_lifetime(sw: Switch, lifetime_us: int) -> None:
    p = sw.program
    t = "MyIngress.persistent_pit.subscription_config"
    p.tables[t].set_default(p.action_call(t, "MyIngress.persistent_pit.set_subscriptions", (0, lifetime_us)))


def _later(sw: Switch, seconds: float) -> None:
    """Move the switch's clock (ingress_global_timestamp) ``seconds`` on."""
    sw._t0 -= seconds


def ins(gpu: str, ps: str = "h1") -> bytes:
    return interest_packet(name_of(b"*insert*", ps, "train", gpu))


def dist(v: int = 1, seg: int = 0, ps: str = "h1") -> bytes:
    return data_packet(name_of(b"*distribute*", ps, "train", f"v={v}", f"seg={seg}"), b"x" * 100)


def ack(gpu: str) -> bytes:
    return data_packet(name_of(b"*distribute*", "h1", "train", gpu), b"")


def test_subscription_in_the_data_plane_and_ack_to_its_subscriber_only(sw: Switch) -> None:
    """Steps 4.2 / 4.2.1 / 4.2.2 in the switch, no controller: an insert Interest adds its
    in-port to the persistent PIT and goes on along the FIB toward the PS; the updates
    are replicated to every subscribed port; each ack goes back to its own subscriber."""
    got: list[bytes] = []
    sw.packet_in_handlers.append(got.append)
    route(sw, "/h1", 1)                                              # the PS is behind port 1
    assert sw.process(1, frame(dist())) == []                        # nobody subscribed yet
    i3, i4 = ins("h3"), ins("h4")
    assert sw.process(2, frame(i3)) == [(1, frame(i3))]              # sent on toward the PS
    assert sw.process(3, frame(i4)) == [(1, frame(i4))]
    assert got == []                                                 # no packet-in
    d = dist()
    for _ in range(2):                                               # never consumed
        assert sorted(sw.process(1, frame(d))) == [(2, frame(d)), (3, frame(d))]
    a3, a4 = ack("h3"), ack("h4")
    assert sw.process(1, frame(a4)) == [(3, frame(a4))]              # h4's subscriber only
    assert sw.process(1, frame(a3)) == [(2, frame(a3))]
    assert sw.process(1, frame(a3)) == []                            # consumed: unsolicited
    drops, ev = counters(sw)
    assert drops == {"no_subscribers": 1, "unsolicited_data": 1}
    assert ev == {"subscribed": 2, "distributed": 2, "pit_hit": 2}


def test_controller_assisted_subscription_goes_on_through_the_fib(sw: Switch) -> None:
    """The older way, kept as an option: the insert Interest is punted; the controller
    sends it back through the pipeline (NDN_OUT_VIA_PIPELINE) and the FIB, not the
    controller, picks the port; its ack still reaches only the subscriber."""
    _controller_mode(sw)
    got: list[bytes] = []
    sw.packet_in_handlers.append(got.append)
    route(sw, "/h1", 4)
    i3 = ins("h3")
    assert sw.process(2, frame(i3)) == []
    assert len(got) == 1 and got[0][2:] == frame(i3)
    assert int.from_bytes(got[0][:2], "big") >> 7 == 2                # packet_in.ingress_port
    # the controller's packet-out: egress_port = the punted in-port, _pad = via pipeline
    out = ((2 << 7) | OUT_VIA_PIPELINE).to_bytes(2, "big") + frame(i3)
    assert sw.process(255, out) == [(4, frame(i3))]                  # the FIB's port
    a3 = ack("h3")
    assert sw.process(4, frame(a3)) == [(2, frame(a3))]
    # the controller writes the table entry and group: updates follow them
    _subscribed(sw, [2])
    d = dist()
    assert sw.process(4, frame(d)) == [(2, frame(d))]
    drops, ev = counters(sw)
    assert drops == {}
    assert ev == {"punted": 1, "forwarded": 1, "pit_hit": 1, "distributed": 1}


def test_duplicate_nonce_is_dropped_and_a_fresh_one_passes(sw: Switch) -> None:
    """The same (name, nonce) again, from any port, is a loop or a copy: dropped and
    counted; the consumer's retransmission with a fresh nonce goes on."""
    route(sw, "/h1", 1)
    i = interest_packet("/h1/train/v=1/seg=0")
    assert sw.process(2, frame(i)) == [(1, frame(i))]
    assert sw.process(2, frame(i)) == []                             # a copy
    assert sw.process(3, frame(i)) == []                             # back round a loop
    again = interest_packet("/h1/train/v=1/seg=0")                   # fresh nonce
    assert sw.process(2, frame(again)) == [(1, frame(again))]
    # the nonce is remembered for the Interest's lifetime, then forgotten
    _later(sw, 5.0)
    assert sw.process(2, frame(i)) == [(1, frame(i))]
    drops, ev = counters(sw)
    assert drops == {"duplicate_nonce": 2}
    assert ev == {"forwarded": 3}


def test_interest_lifetime_expires_pit_entries(sw: Switch) -> None:
    """An entry lives for its Interest's InterestLifetime (capped by pit_config); a Data
    that comes later finds it expired: dropped, counted, and the entry freed."""
    route(sw, "/h1", 1)
    short = bytes(make_interest(name_of("h1", "train", "v=1", "seg=1"), InterestParam(nonce=7, lifetime=100)))
    assert sw.process(2, frame(short)) == [(1, frame(short))]
    d = data_packet(name_of("h1", "train", "v=1", "seg=1"), b"y" * 10)
    _later(sw, 0.2)
    assert sw.process(1, frame(d)) == []                             # expired
    assert sw.process(1, frame(d)) == []                             # freed: unsolicited
    # a long lifetime is capped by pit_config (default 4 s)
    long_ = bytes(make_interest(name_of("h1", "train", "v=1", "seg=2"), InterestParam(nonce=8, lifetime=60000)))
    assert sw.process(3, frame(long_)) == [(1, frame(long_))]
    _later(sw, 4.1)
    d2 = data_packet(name_of("h1", "train", "v=1", "seg=2"), b"z")
    assert sw.process(1, frame(d2)) == []
    drops, _ = counters(sw)
    assert drops == {"pit_expired": 2, "unsolicited_data": 1}
    assert sw.program.counters["MyIngress.pit.pit_expired"].read(0)[0] == 2


def _colliding_names() -> tuple[str, str]:
    """Two names whose hashes pick the same transient PIT entry (low 12 bits)."""
    seen: dict[int, str] = {}
    for n in range(100000):
        name = f"/h1/train/c{n}"
        k = prefix_hash(name) & 0xFFF
        if k in seen:
            return seen[k], name
        seen[k] = name
    raise AssertionError("no collision")


def test_a_hash_collision_never_delivers_data_under_another_name(sw: Switch) -> None:
    route(sw, "/h1", 1)
    a, b = _colliding_names()
    ia = interest_packet(a)
    assert sw.process(2, frame(ia)) == [(1, frame(ia))]
    db = data_packet(b, b"b")
    assert sw.process(1, frame(db)) == []                            # not a's Data
    da = data_packet(a, b"a")
    assert sw.process(1, frame(da)) == [(2, frame(da))]
    drops, _ = counters(sw)
    assert drops == {"unsolicited_data": 1}


def test_data_only_from_the_face_its_interest_went_out_of(sw: Switch) -> None:
    """A GPU's Interest goes out of the FIB's face (port 1); a Data of its exact name from
    any other port (a bystander that guessed or saw the name, a subscriber) is a counted
    ``data_not_upstream`` drop and leaves the PIT entry live; the producer's answer from
    port 1 is delivered."""
    route(sw, "/h1", 1)
    name = "/h1/train/v=1/seg=3"
    i = interest_packet(name)
    assert sw.process(2, frame(i)) == [(1, frame(i))]
    forged, real = data_packet(name, b"forged"), data_packet(name, b"real")
    for port in (3, 4, 2):
        assert sw.process(port, frame(forged)) == []
    assert sw.process(1, frame(real)) == [(2, frame(real))]
    drops, _ = counters(sw)
    assert drops == {"data_not_upstream": 3}


def test_subscriptions_are_soft_state(sw: Switch) -> None:
    """Refreshed by the GPU's insert Interests, expired when not refreshed, removed by
    an unsubscribe Interest (sent on toward the PS only when no port is left), and
    rebuilt by a refresh after a restart."""
    route(sw, "/h1", 1)
    _sub_lifetime(sw, 1_000_000)
    for port, g in ((2, "h2"), (3, "h3"), (4, "h4")):
        assert sw.process(port, frame(ins(g)))[0][0] == 1
    _later(sw, 0.6)
    sw.process(2, frame(ins("h2")))                                  # h2 refreshes
    sw.process(3, frame(ins("h3")))                                  # h3 refreshes
    _later(sw, 0.6)                                                  # h4's expired
    d = dist()
    assert sorted(p for p, _ in sw.process(1, frame(d))) == [2, 3]
    assert sw.program.counters["MyIngress.persistent_pit.subscriptions_expired"].read(0)[0] == 1
    u3 = interest_packet(name_of(b"*unsubscribe*", "h1", "train", "h3"))
    assert sw.process(3, frame(u3)) == []                            # h2 still subscribed
    assert [p for p, _ in sw.process(1, frame(d))] == [2]
    u2 = interest_packet(name_of(b"*unsubscribe*", "h1", "train", "h2"))
    assert sw.process(2, frame(u2)) == [(1, frame(u2))]              # none left: upstream too
    assert sw.process(1, frame(d)) == []
    drops, ev = counters(sw)
    assert drops == {"no_subscribers": 1}
    assert ev["unsubscribed"] == 2 and ev["distributed"] == 2


def test_persistent_subscriptions_live_until_unsubscribed(sw: Switch) -> None:
    """The persistent lifetime (``PERSISTENT``, what ``PersistentPit.config_entry`` writes
    for it): one insert Interest and no refresh keeps the port an hour later; a GPU that
    died subscribed keeps getting updates until the controller unsubscribes it on its
    behalf (its unsubscribe Interest, packet-out through the pipeline from its port)."""
    route(sw, "/h1", 1)
    _sub_lifetime(sw, PERSISTENT_LIFETIME_US)
    for port, g in ((2, "h2"), (3, "h3")):
        assert sw.process(port, frame(ins(g)))[0][0] == 1
    _later(sw, 3600.0)                                               # no refresh for an hour
    d = dist()
    assert sorted(q for q, _ in sw.process(1, frame(d))) == [2, 3]
    assert sw.program.counters["MyIngress.persistent_pit.subscriptions_expired"].read(0)[0] == 0
    # h3 died subscribed: the controller sends its unsubscribe through the pipeline
    u3 = interest_packet(name_of(b"*unsubscribe*", "h1", "train", "h3"))
    out = ((3 << 7) | OUT_VIA_PIPELINE).to_bytes(2, "big") + frame(u3)
    assert sw.process(255, out) == []                                # h2 left: not sent on
    assert [q for q, _ in sw.process(1, frame(d))] == [2]
    # h2 unsubscribes itself: none left, so the Interest goes on toward the PS
    u2 = interest_packet(name_of(b"*unsubscribe*", "h1", "train", "h2"))
    assert sw.process(2, frame(u2)) == [(1, frame(u2))]
    assert sw.process(1, frame(d)) == []
    _drops, ev = counters(sw)
    assert ev["unsubscribed"] == 2 and ev["distributed"] == 2


def test_persistent_lifetime_is_what_the_controller_writes() -> None:
    pp = Program.load(NDN_JSON).block(PersistentPit)
    assert pp.config_entry("switch", PERSISTENT).action.args["lifetime_us"] == PERSISTENT_LIFETIME_US
    assert pp.config_entry("switch", 6.0).action.args["lifetime_us"] == 6_000_000


def test_subscriptions_are_rebuilt_by_refreshes_after_a_restart() -> None:
    def fresh() -> Switch:
        s = ndn_switch()
        route(s, "/h1", 1)
        return s

    sw = fresh()
    sw.process(2, frame(ins("h2")))
    assert [p for p, _ in sw.process(1, frame(dist()))] == [2]
    sw = fresh()                                                     # restarted: registers empty
    assert sw.process(1, frame(dist())) == []
    sw.process(2, frame(ins("h2")))                                  # the GPU's next refresh
    assert [p for p, _ in sw.process(1, frame(dist()))] == [2]


def test_subscription_slot_of_another_live_name_is_a_counted_drop(sw: Switch) -> None:
    route(sw, "/h1", 1)
    route(sw, "/h5", 1)
    seen: dict[int, str] = {}
    for n in range(10000):                                           # two /PS/train, one slot
        t = f"t{n}"
        k = prefix_hash(f"/h1/{t}") & 0xFF
        if k in seen:
            break
        seen[k] = t
    t1, t2 = seen[k], t
    i1 = interest_packet(name_of(b"*insert*", "h1", t1, "h2"))
    i2 = interest_packet(name_of(b"*insert*", "h1", t2, "h3"))
    assert sw.process(2, frame(i1)) == [(1, frame(i1))]
    assert sw.process(3, frame(i2)) == []
    d2 = data_packet(name_of(b"*distribute*", "h1", t2, "v=1", "seg=0"), b"x")
    assert sw.process(1, frame(d2)) == []                            # never t1's subscribers
    drops, _ = counters(sw)
    assert drops == {"subscription_collision": 1, "no_subscribers": 1}


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
    from controller.ndn import NdnDrops, NdnFib, NdnNonce

    for cls in (NdnFib, NdnNonce, TransientPit, PersistentPit, NdnDrops):
        prog.block(cls)


def test_a_limited_port_starts_at_most_its_budget_of_pit_entries_a_second(sw: Switch) -> None:
    """pit_port_budget (installed by NdnDeployment for every host port in no job): port 3
    may start 5 entries a second. Its sixth new name within the second is a counted
    ``pit_budget`` drop and leaves the PIT as it was (a live entry of port 2 that the
    same slot holds is not taken over); joining a live entry of the same name is free;
    a second later the window starts again. Port 2, unlimited, is never refused."""
    route(sw, "/h1", 1)
    p = sw.program
    t = "MyIngress.pit.pit_port_budget"
    p.tables[t].insert(TableEntry((3,), p.action_call(t, "MyIngress.pit.limit", (5,))))

    def interest(name: str, nonce: int) -> bytes:
        return frame(bytes(make_interest(name_of(*name.strip("/").split("/")), InterestParam(nonce=nonce))))

    a, b = _colliding_names()  # b's slot is a's
    assert sw.process(2, interest(a, 1)) == [(1, interest(a, 1))]          # port 2: a live entry
    for i in range(5):
        n = f"/h1/train/o{i}"
        assert sw.process(3, interest(n, 100 + i)) == [(1, interest(n, 100 + i))]
    assert sw.process(3, interest(b, 200)) == []                           # over: refused
    assert sw.process(3, interest(a, 201)) == []                           # joins a's entry: free
    da = data_packet(name_of(*a.strip("/").split("/")), b"a")
    out = sw.process(1, frame(da))
    assert sorted(port for port, _ in out) == [2, 3]                       # a's entry intact
    for i in range(20):                                                    # port 2: no budget
        n = f"/h1/train/p{i}"
        assert sw.process(2, interest(n, 300 + i)) == [(1, interest(n, 300 + i))]
    _later(sw, 1.01)
    assert sw.process(3, interest(b, 202)) == [(1, interest(b, 202))]      # a new window
    drops, _ = counters(sw)
    assert drops == {"pit_budget": 1}
