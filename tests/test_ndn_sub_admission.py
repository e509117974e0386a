"""ndn.p4's subscription admission (ndn_sub_admission.p4, docs/trust.md) on the embedded
target, in process: only a job's members subscribe under its prefix, each job's
persistent PIT slot is the controller's, not the name's hash, and what is refused is
counted. The open mode (no jobs) keeps the hashed slots, which the first test attacks.

Switch layout: port 1 toward the PS (a switch), port 2 GPU h2 (a member), port 3 a
downstream switch (its subscriptions were admitted there), port 4 a host outside the job.
"""

from __future__ import annotations

import pytest

from controller.ndn import NdnJob, NdnSubAdmission, prefix_hash
from controller.ndn.sub_admission import _key
from controller.p4runtime import Program
from targets.embedded.state import TableEntry
from targets.embedded.switch import Switch
from tests.test_ndn_switch import NDN_JSON, counters, dist, frame, ins, ndn_switch, route
from topologies import leaf_spine
from wire.ndn import data_packet, interest_packet, name_of

ADM = "MyIngress.sub_admission"


def colliding_prefixes(target: str = "/h1/train", n: int = 40) -> list[str]:
    """``n`` prefixes /hX/tK of an outsider's choosing whose *open* slot (the low 8 bits of
    the crc32 of /PS/train) is ``target``'s: computed the old way, as the attacker did."""
    want = prefix_hash(target) & 0xFF
    out = [p for k in range(20000) for p in (f"/h6/t{k}",) if prefix_hash(p) & 0xFF == want]
    assert len(out) >= n
    return out[:n]


def planted(prefix: str, gpu: str = "h6") -> bytes:
    ps, train = prefix.strip("/").split("/")
    return interest_packet(name_of(b"*insert*", ps, train, gpu))


def guard(sw: Switch, slots: dict[str, int], members: list[tuple[int, str]], fabric: list[int]) -> None:
    """What NdnSubAdmission installs, written straight into the embedded tables."""
    p = sw.program
    t = f"{ADM}.sub_guard_config"
    p.tables[t].set_default(p.action_call(t, f"{ADM}.set_guard", (1,)))
    for prefix, slot in slots.items():
        t = f"{ADM}.ndn_sub_slots"
        p.tables[t].insert(TableEntry(tuple(_key(prefix).values()), p.action_call(t, f"{ADM}.set_slot", (slot,))))
    for port in fabric:
        t = f"{ADM}.ndn_fabric_ports"
        p.tables[t].insert(TableEntry((port,), p.action_call(t, f"{ADM}.fabric_port", ())))
    for port, prefix in members:
        t = f"{ADM}.ndn_sub_members"
        p.tables[t].insert(TableEntry((port, *_key(prefix).values()), p.action_call(t, f"{ADM}.member", ())))


@pytest.fixture
def sw() -> Switch:
    s = ndn_switch()
    route(s, "/h1", 1)
    route(s, "/h6", 1)
    return s


def test_open_slots_let_an_outsider_block_a_job(sw: Switch) -> None:
    """Without the guard (the attack): one planted name in /h1/train's hashed slot, and
    the GPU's own subscription is a counted collision."""
    bad = planted(colliding_prefixes(n=1)[0])
    assert sw.process(4, frame(bad)) == [(1, frame(bad))]
    assert sw.process(2, frame(ins("h2"))) == []
    assert counters(sw)[0] == {"subscription_collision": 1}


def test_guarded_outsider_flood_is_refused_and_counted(sw: Switch) -> None:
    guard(sw, {"/h1/train": 7}, [(2, "/h1/train")], fabric=[1, 3])
    names = colliding_prefixes()
    for p in names:                                                  # colliding, no job's
        assert sw.process(4, frame(planted(p))) == []
    for _ in range(5):                                               # the job's own prefix
        assert sw.process(4, frame(ins("h6"))) == []
    unsub = interest_packet(name_of(b"*unsubscribe*", "h1", "train", "h2"))
    assert sw.process(4, frame(unsub)) == []
    i2, i3 = ins("h2"), ins("h3")
    assert sw.process(2, frame(i2)) == [(1, frame(i2))]              # the member
    assert sw.process(3, frame(i3)) == [(1, frame(i3))]              # from a downstream switch
    assert sorted(p for p, _ in sw.process(1, frame(dist()))) == [2, 3]
    drops, ev = counters(sw)
    assert drops == {"subscription_unknown_job": len(names), "subscription_not_member": 6}
    assert ev["subscribed"] == 2 and ev["distributed"] == 1


def test_guarded_slots_are_the_controllers_not_the_hash(sw: Switch) -> None:
    """Two jobs whose hashed slots collide each get their own slot; a distribute Data of a
    prefix with no slot finds no subscribers."""
    other = colliding_prefixes(n=1)[0]
    guard(sw, {"/h1/train": 0, other: 1}, [(2, "/h1/train"), (4, other)], fabric=[1, 3])
    assert sw.process(2, frame(ins("h2")))[0][0] == 1
    assert sw.process(4, frame(planted(other)))[0][0] == 1           # no collision now
    ps, train = other.strip("/").split("/")
    d_other = data_packet(name_of(b"*distribute*", ps, train, "v=1", "seg=0"), b"x")
    assert [p for p, _ in sw.process(1, frame(d_other))] == [4]
    assert [p for p, _ in sw.process(1, frame(dist()))] == [2]
    route(sw, "/h5", 1)
    assert sw.process(1, frame(dist(ps="h5"))) == []                 # no job: no slot
    drops, _ = counters(sw)
    assert drops == {"no_subscribers": 1}


def test_the_controller_plan_names_members_fabric_and_slots() -> None:
    topo = leaf_spine(2, 2, 3)
    prog = Program.load(NDN_JSON)
    adm = prog.block(NdnSubAdmission)
    jobs = [NdnJob("h1", ("h2", "h4", "h5")), NdnJob("h6", ("h3",), train="t")]
    plan = adm.plan(topo, jobs)
    assert set(plan) == set(topo.switches())
    tables = {s: [e.table_id.split(".")[-1] for e in ups[1:]] for s, ups in plan.items()}
    for s, names in tables.items():
        assert names.count("ndn_sub_slots") == 2
        fabric = [p for p, n in topo.ports(s).items() if topo.is_switch(n)]
        assert names.count("ndn_fabric_ports") == len(fabric)
    members = {s: names.count("ndn_sub_members") for s, names in tables.items()}
    assert sum(members.values()) == 4
    assert members[topo.iface("h2")["switch"]] >= 1
    wide = leaf_spine(1, 10, 1)                          # a spine with 10 switch-facing ports
    spine = next(s for s in wide.switches() if len(wide.ports(s)) == 10)
    names = [e.table_id.split(".")[-1] for e in adm.plan(wide, jobs[:1])[spine]]
    assert names.count("ndn_fabric_ports") == 8          # ndn.p4 takes Interests on 1..8 only
    with pytest.raises(Exception, match="one prefix"):
        adm.plan(topo, [NdnJob("h1"), NdnJob("h1")])
