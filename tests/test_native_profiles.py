"""Action profiles and selectors on the native backend against the Python one
(action_selector.p4): members, weighted groups, one-shot action sets, an empty group,
member and group changes; every flow picks the same member on both backends (the
selector's crc16 over flow_a ++ flow_b, BMv2's member handles)."""

from __future__ import annotations

import pytest
from scapy.all import Ether
from scapy.fields import ByteField, IntField, ShortField
from scapy.packet import Packet

from targets.embedded.action_profiles import IndirectRef
from targets.embedded.native.build import compiler as c_compiler
from targets.embedded.state import TableEntry
from tests.native_pair import ROOT, pair

pytestmark = pytest.mark.skipif(c_compiler() is None, reason="no C compiler")

PATH = ROOT / "tests" / "p4" / "build" / "action_selector.json"
ECMP, PROF = "SIngress.ecmp", "SIngress.prof"
SEL, TAGS = "SIngress.ecmp_selector", "SIngress.tag_profile"


class Sel(Packet):
    """``sel_t`` of action_selector.p4."""

    name = "Sel"
    fields_desc = [ShortField("key", 0), IntField("flow_a", 0), ShortField("flow_b", 0),
                   ShortField("member_tag", 0), ShortField("prof_tag", 0), ByteField("run", 0)]


def _send(sws: tuple, key: int, flow: int) -> list[tuple[int, int, int, int]]:
    """(port, member_tag, prof_tag, run) of one probe on each backend, which must agree."""
    frame = bytes(Ether(src="00:00:0a:00:00:01", dst="00:00:0a:00:00:02", type=0x88B6) / Sel(key=key, flow_a=flow * 2654435761 & 0xFFFFFFFF, flow_b=flow & 0xFFFF))
    out = []
    for sw in sws:
        (port, f), = sw.process(5, frame)
        s = Sel(f[14:])
        out.append((port, s.member_tag, s.prof_tag, s.run))
    assert out[0] == out[1], out
    return out


def _each(sws: tuple, fn: object) -> None:
    for sw in sws:
        fn(sw.program)  # type: ignore[operator]


def test_member_choice_per_flow_identical() -> None:
    sws = pair(PATH)

    def setup(p: object) -> None:
        ap, tp = p.action_profiles[SEL], p.action_profiles[TAGS]
        for m in range(1, 6):
            ap.add_member(m, p.profile_action_call(SEL, "SIngress.set_out", (m, 0x100 + m)))
        ap.add_member(9, p.profile_action_call(SEL, "NoAction", ()))
        ap.add_group(1, 0, [(1, 1), (2, 3), (4, 2)])
        ap.add_group(2, 0, [(3, 1), (5, 1), (9, 1)])
        ap.add_group(3, 0, [])  # empty: a no-op
        tp.add_member(7, p.profile_action_call(TAGS, "SIngress.set_prof", (0x77,)))
        t = p.tables[ECMP]
        t.insert(TableEntry((1,), IndirectRef(group=ap.groups[1])))
        t.insert(TableEntry((2,), IndirectRef(group=ap.groups[2])))
        t.insert(TableEntry((3,), IndirectRef(group=ap.groups[3])))
        t.insert(TableEntry((4,), IndirectRef(member=ap.members[4])))
        p.tables[PROF].insert(TableEntry((1,), IndirectRef(member=tp.members[7])))

    _each(sws, setup)
    ports = {key: {_send(sws, key, f)[0][0] for f in range(200)} for key in (1, 2)}
    assert ports[1] == {1, 2, 4} and ports[2] == {3, 5}, ports  # every member of a group is picked
    assert {_send(sws, 2, f)[0][3] for f in range(50)} == {1, 2}  # set_out and the NoAction member
    assert _send(sws, 1, 0)[0][2] == 0x77  # the plain profile too
    assert {_send(sws, 3, f)[0][3] for f in range(5)} == {0}  # empty group: no action, run stays 0
    assert _send(sws, 4, 1)[0][:2] == (4, 0x104)
    assert _send(sws, 8, 1)[0][0] == 5  # a miss: back out of its port

    def change(p: object) -> None:  # a member's action, a group's members: every entry follows
        ap = p.action_profiles[SEL]
        ap.modify_member(4, p.profile_action_call(SEL, "SIngress.set_out", (6, 0x999)))
        ap.modify_group(1, 0, [(4, 1)])

    _each(sws, change)
    assert {_send(sws, 1, f)[0][:2] for f in range(50)} == {(6, 0x999)}
    assert _send(sws, 4, 1)[0][:2] == (6, 0x999)

    def oneshot(p: object) -> None:
        ap = p.action_profiles[SEL]
        t = p.tables[ECMP]
        t.delete((1,), 0)
        ap.delete_group(1)
        ap.delete_member(1)
        g = ap.add_oneshot([(p.profile_action_call(SEL, "SIngress.set_out", (7, 0x700)), 2),
                            (p.profile_action_call(SEL, "SIngress.set_out", (8, 0x800)), 1)])
        t.insert(TableEntry((6,), IndirectRef(group=g)))

    _each(sws, oneshot)
    assert {_send(sws, 6, f)[0][0] for f in range(100)} == {7, 8}
    assert _send(sws, 1, 3)[0][0] == 5  # the deleted entry: a miss
