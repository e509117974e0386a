"""Model of action_selector.p4 for the P4-features tests: members, weighted groups,
one-shot action sets and BMv2's pick, computed in plain Python.
"""

from __future__ import annotations

import struct
from typing import Any

from finsy import (
    P4ActionProfileGroup,
    P4ActionProfileMember,
    P4IndirectAction,
    P4Member,
    P4TableAction,
    P4TableEntry,
    P4TableMatch,
)

from targets.p4rt_client import P4RuntimeError
from tests.conformance_rig import (
    Case,
    Out,
    Rig,
    _eth,
    crc16_arc,
)

ETH_PROBE = 0x88B6
def _write_error(rig: Rig, *updates: Any) -> str:
    """Write and return the first per-update error code ('' when it succeeds)."""
    try:
        rig.write(*updates)
    except P4RuntimeError as e:
        return e.details[0].split(":", 1)[0] if e.details else e.code
    return ""


# =========================================================================================
# action_selector.p4: action profiles and selectors over P4Runtime
# BMv2 (src/bm_sim/action_profile.cpp, PI/src/group_selection.cpp) picks
# sorted(member handles of the group)[crc16(selector fields) % n]; PI
# (proto/frontend/src/action_prof_mgr.cpp) gives a member one BMv2 handle, and one more
# per unit of weight above 1 (the lowest free handle, members walked by id, copies a
# group no longer needs freed after the walk).
# =========================================================================================
SEL_PROFILE, TAG_PROFILE = "ecmp_selector", "tag_profile"
SEL_MEMBERS = {1: (1, 0x0101), 2: (2, 0x0202), 3: (3, 0x0303), 4: (4, 0x0404)}  # id -> (port, tag)
SEL_NOACTION = 5  # a member running NoAction
TAG_MEMBERS = {1: 0x0A01, 2: 0x0A02}
# key -> the group's pick list (member ids in BMv2 handle order), or a member id.
# Handles: members 1..5 get 0..4; group 10 gives member 2 weight 2: its copy is handle 5.
SEL_ENTRIES: dict[int, list[int]] = {1: [1, 2, 3, 2], 2: [3], 3: [1, 4], 5: [SEL_NOACTION]}
TAG_ENTRIES = {1: 1, 2: 2}
FLOWS = [(0, 7), (1, 7), (2, 7), (3, 7), (0xDEADBEEF, 0x1234), (0x0A000001, 80), (0x0A000002, 443), (77, 0)]


def _sel(key: int, fa: int, fb: int, mtag: int = 0, ptag: int = 0, run: int = 0) -> bytes:
    return _eth(ETH_PROBE) + struct.pack("!HIHHHB", key, fa, fb, mtag, ptag, run) + b"selector"


def selector_pick(members: list[int], fa: int, fb: int) -> int:
    """The member BMv2 picks: CRC-16/ARC over flow_a ++ flow_b, modulo the pick list."""
    return members[crc16_arc(struct.pack("!IH", fa, fb)) % len(members)]


def sel_expect(key: int, fa: int, fb: int, port: int, picks: dict[int, list[int]] | None = None,
               members: dict[int, tuple[int, int]] | None = None) -> list[Out]:
    picks = SEL_ENTRIES if picks is None else picks
    members = SEL_MEMBERS if members is None else members
    out_port, mtag, run = port, 0, 0  # a miss takes no arm of the action_run switch
    if key in picks:
        member = selector_pick(picks[key], fa, fb)
        if member == SEL_NOACTION:
            run = 2
        else:
            (out_port, mtag), run = members[member], 1
    ptag = TAG_MEMBERS[TAG_ENTRIES[key]] if key in TAG_ENTRIES else 0
    return [(out_port, _sel(key, fa, fb, mtag, ptag, run))]


def selector_setup(rig: Rig) -> None:
    """Members, two groups (one weighted), entries on members and groups."""
    rig.write(*[+P4ActionProfileMember(SEL_PROFILE, member_id=m, action=P4TableAction("set_out", port=p, tag=t))
                for m, (p, t) in SEL_MEMBERS.items()],
              +P4ActionProfileMember(SEL_PROFILE, member_id=SEL_NOACTION, action=P4TableAction("NoAction")))
    rig.write(*[+P4ActionProfileMember(TAG_PROFILE, member_id=m, action=P4TableAction("set_prof", tag=t))
                for m, t in TAG_MEMBERS.items()])
    rig.write(+P4ActionProfileGroup(SEL_PROFILE, group_id=10, members=[P4Member(1, weight=1), P4Member(2, weight=2),
                                                                       P4Member(3, weight=1)]),
              +P4ActionProfileGroup(SEL_PROFILE, group_id=11, members=[P4Member(4, weight=1), P4Member(1, weight=1)]))
    rig.write(+P4TableEntry("ecmp", match=P4TableMatch(key=1), action=P4IndirectAction(group_id=10)),
              +P4TableEntry("ecmp", match=P4TableMatch(key=2), action=P4IndirectAction(member_id=3)),
              +P4TableEntry("ecmp", match=P4TableMatch(key=3), action=P4IndirectAction(group_id=11)),
              +P4TableEntry("ecmp", match=P4TableMatch(key=5), action=P4IndirectAction(member_id=SEL_NOACTION)))
    rig.write(*[+P4TableEntry("prof", match=P4TableMatch(key=k), action=P4IndirectAction(member_id=m))
                for k, m in TAG_ENTRIES.items()])


def _selector_cases() -> list[Case]:
    cases = []
    for key in (1, 2, 3, 4, 5):
        for i, (fa, fb) in enumerate(FLOWS if key in (1, 3) else FLOWS[:2]):
            port = 1 + i % 4
            cases.append(Case(f"key{key}_flow{i}", port, _sel(key, fa, fb), sel_expect(key, fa, fb, port)))
    return cases


def _flow_outputs(rig: Rig, key: int) -> list[Out]:
    out = []
    for fa, fb in FLOWS:
        out += rig.exchange(1, _sel(key, fa, fb), 1)
    return out


def selector_changes(rig: Rig) -> list[tuple[str, Any]]:
    """Group and member changes, refused deletes, reads, then one-shot action sets."""
    obs: list[tuple[str, Any]] = []
    # Member 2 leaves group 10 (its handles 1 and 5 are freed only after the walk),
    # member 3 gets weight 3: new copies 6, 7. Pick list: handles 0, 2, 6, 7.
    obs.append(("modify_group", _write_error(rig, ~P4ActionProfileGroup(
        SEL_PROFILE, group_id=10, members=[P4Member(1, weight=1), P4Member(3, weight=3)]))))
    obs.append(("after_modify_group", _flow_outputs(rig, 1)))
    obs.append(("modify_member", _write_error(rig, ~P4ActionProfileMember(
        SEL_PROFILE, member_id=3, action=P4TableAction("set_out", port=4, tag=0x0333)))))
    obs.append(("after_modify_member", _flow_outputs(rig, 1)))
    obs.append(("delete_member_in_group", _write_error(rig, -P4ActionProfileMember(SEL_PROFILE, member_id=1))))
    obs.append(("delete_group_in_use", _write_error(rig, -P4ActionProfileGroup(SEL_PROFILE, group_id=11))))
    obs.append(("entry_unknown_member", _write_error(rig, +P4TableEntry(
        "ecmp", match=P4TableMatch(key=9), action=P4IndirectAction(member_id=99)))))
    obs.append(("direct_action_on_indirect_table", _write_error(rig, +P4TableEntry(
        "ecmp", match=P4TableMatch(key=9), action=P4TableAction("set_out", port=1, tag=1)))))
    obs.append(("duplicate_member", _write_error(rig, +P4ActionProfileMember(
        SEL_PROFILE, member_id=4, action=P4TableAction("set_out", port=1, tag=1)))))
    obs.append(("delete_unused_member", _write_error(rig, -P4ActionProfileMember(SEL_PROFILE, member_id=2))))
    obs.append(("default_on_indirect_table", _write_error(rig, ~P4TableEntry(
        "ecmp", is_default_action=True, action=P4IndirectAction(member_id=1)))))
    (default,) = rig.client.read(P4TableEntry("ecmp", is_default_action=True))
    obs.append(("read_default", (default.is_default_action, default.action)))
    obs.append(("duplicate_entry", _write_error(rig, +P4TableEntry(
        "ecmp", match=P4TableMatch(key=1), action=P4IndirectAction(member_id=1)))))
    obs.append(("modify_missing_entry", _write_error(rig, ~P4TableEntry(
        "ecmp", match=P4TableMatch(key=77), action=P4IndirectAction(member_id=1)))))
    members = rig.client.read(P4ActionProfileMember(SEL_PROFILE))
    obs.append(("read_members", [(m.member_id, m.action.name, m.action.args.get("port")) for m in members]))
    groups = rig.client.read(P4ActionProfileGroup(SEL_PROFILE))
    obs.append(("read_groups", [(g.group_id, [(m.member_id, m.weight) for m in g.members]) for g in groups]))
    entries = rig.client.read(P4TableEntry("ecmp"))
    obs.append(("read_entries", sorted((e.match["key"], e.action.member_id, e.action.group_id) for e in entries)))
    obs.append(("mix_modes", _write_error(rig, +P4TableEntry("ecmp", match=P4TableMatch(key=9), action=P4IndirectAction(
        [(1, P4TableAction("set_out", port=1, tag=1))])))))
    # Empty the profile; then it may be programmed with one-shot action sets.
    rig.write(*[-P4TableEntry("ecmp", match=P4TableMatch(key=k)) for k in (1, 2, 3, 5)])
    rig.write(-P4ActionProfileGroup(SEL_PROFILE, group_id=10), -P4ActionProfileGroup(SEL_PROFILE, group_id=11))
    rig.write(*[-P4ActionProfileMember(SEL_PROFILE, member_id=m) for m in (1, 3, 4, SEL_NOACTION)])
    oneshot = [(1, P4TableAction("set_out", port=2, tag=0x0B01)), (3, P4TableAction("set_out", port=3, tag=0x0B02))]
    obs.append(("oneshot_insert", _write_error(rig, +P4TableEntry(
        "ecmp", match=P4TableMatch(key=1), action=P4IndirectAction(oneshot)))))
    obs.append(("after_oneshot", _flow_outputs(rig, 1)))
    (entry,) = rig.client.read(P4TableEntry("ecmp", match=P4TableMatch(key=1)))
    obs.append(("read_oneshot", [(w, a.args["port"]) for w, a in entry.action.action_set]))
    obs.append(("oneshot_empty", _write_error(rig, +P4TableEntry(
        "ecmp", match=P4TableMatch(key=2), action=P4IndirectAction([])))))
    return obs


def selector_changes_expected() -> list[tuple[str, Any]]:
    after_group = [1, 3, 3, 3]
    members = dict(SEL_MEMBERS)

    def outs(picks: list[int], mem: dict[int, tuple[int, int]]) -> list[Out]:
        return [o for fa, fb in FLOWS for o in sel_expect(1, fa, fb, 1, {1: picks}, mem)]

    before_member = outs(after_group, members)
    members[3] = (4, 0x0333)
    oneshot = {1: (2, 0x0B01), 2: (3, 0x0B02)}
    return [
        ("modify_group", ""),
        ("after_modify_group", before_member),
        ("modify_member", ""),
        ("after_modify_member", outs(after_group, members)),
        ("delete_member_in_group", "UNKNOWN"),
        ("delete_group_in_use", "UNKNOWN"),
        ("entry_unknown_member", "INVALID_ARGUMENT"),
        ("direct_action_on_indirect_table", "INVALID_ARGUMENT"),
        ("duplicate_member", "ALREADY_EXISTS"),
        ("delete_unused_member", ""),
        ("default_on_indirect_table", "INVALID_ARGUMENT"),
        ("read_default", (True, None)),
        ("duplicate_entry", "ALREADY_EXISTS"),
        ("modify_missing_entry", "NOT_FOUND"),
        # PI lists BMv2's members: member 3's two weight copies (handles 6, 7) too
        ("read_members", [(1, "set_out", 1), (3, "set_out", 4), (4, "set_out", 4), (5, "NoAction", None),
                          (3, "set_out", 4), (3, "set_out", 4)]),
        ("read_groups", [(10, [(1, 1), (3, 3)]), (11, [(1, 1), (4, 1)])]),
        ("read_entries", [(1, None, 10), (2, 3, None), (3, None, 11), (5, 5, None)]),
        ("mix_modes", "INVALID_ARGUMENT"),
        ("oneshot_insert", ""),
        # one handle per unit of weight, in order: 0 -> first action, 1..3 -> second
        ("after_oneshot", outs([1, 2, 2, 2], oneshot)),
        ("read_oneshot", [(1, 2), (3, 3)]),
        ("oneshot_empty", "UNIMPLEMENTED"),
    ]
