"""Action profiles and selectors of the embedded target, as BMv2 + PI keep them:
members, groups with weights (member handles allocated in PI's order, so a selector
picks the same member as on BMv2) and one-shot action sets."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from targets.embedded.state import ActionCall, StateError


@dataclass(eq=False, slots=True)
class ProfileMember:
    """An action profile member: its action and the BMv2 member handles that carry it.

    ``handles[0]`` is the member itself; PI creates one more copy per unit of weight
    beyond 1 that some group gives it (``weight_counts``: weight -> groups using it).
    """

    id: int
    action: ActionCall
    handles: list[int] = field(default_factory=list)
    weight_counts: dict[int, int] = field(default_factory=lambda: {1: 1})
    refs: int = 0  # table entries pointing at the member


@dataclass(eq=False, slots=True)
class ProfileGroup:
    """An action selector group: member id -> weight, and the data plane's pick list."""

    id: int
    max_size: int = 0
    weights: dict[int, int] = field(default_factory=dict)
    handles: set[int] = field(default_factory=set)
    select: list[ProfileMember] = field(default_factory=list)
    refs: int = 0
    oneshot: list[tuple[ActionCall, int]] | None = None  # the action set of a one-shot group
    handle: int = 0  # BMv2 group handle (reads list groups in this order)


@dataclass(slots=True)
class IndirectRef:
    """``TableEntry.action`` of a table with an action profile: a member or a group."""

    member: ProfileMember | None = None
    group: ProfileGroup | None = None


class ActionProfile:
    """An action profile (``with_selector``: an action selector) as BMv2 + PI keep it.

    BMv2 member handles come from a handle manager that hands out the lowest free
    number; a group picks ``sorted(handles)[hash % len(handles)]`` (PI's
    ``GroupSelection`` over a ``RangeSet``), so the same member wins as on BMv2 only
    if handles are allocated and freed in PI's order: a member gets one handle when
    inserted, a group update walks members by id, creating the copies a higher weight
    needs (lowest free handle) and, after the walk, freeing copies no group needs any
    more. One-shot action sets create one handle per unit of weight, in order.
    """

    def __init__(self, name: str, size: int, with_selector: bool,
                 hash_fn: Callable[[list[int]], int] | None = None) -> None:
        self.name = name
        self.size = size
        self.with_selector = with_selector
        self.hash_fn = hash_fn
        self.members: dict[int, ProfileMember] = {}
        self.groups: dict[int, ProfileGroup] = {}
        self.mode: str | None = None  # "manual" or "oneshot" once used (PI refuses mixing)
        self._used: set[int] = set()
        self._gused: set[int] = set()
        self._handle_member: dict[int, ProfileMember] = {}
        self._oneshot_ids = 0
        # called with the profile after each change (the native backend copies it)
        self.on_change: Callable[[ActionProfile], None] | None = None

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change(self)

    # -- handles ---------------------------------------------------------------------
    def _alloc(self, m: ProfileMember) -> int:
        h = 0
        while h in self._used:
            h += 1
        self._used.add(h)
        self._handle_member[h] = m
        return h

    def _galloc(self, g: ProfileGroup) -> None:
        h = 0
        while h in self._gused:
            h += 1
        self._gused.add(h)
        g.handle = h

    def _free(self, h: int) -> None:
        self._used.discard(h)
        self._handle_member.pop(h, None)

    def use_mode(self, mode: str) -> None:
        """PI: a profile is programmed either manually or with one-shot action sets."""
        if self.mode != mode and (self.members or self.groups):
            raise StateError("INVALID_ARGUMENT", "Invalid attempt to mix action selector programming modes")
        self.mode = mode

    # -- members ---------------------------------------------------------------------
    def add_member(self, member_id: int, action: ActionCall) -> None:
        if member_id in self.members:
            raise StateError("ALREADY_EXISTS", f"Duplicate member id: {member_id}")
        m = ProfileMember(member_id, action)
        m.handles.append(self._alloc(m))
        self.members[member_id] = m
        self._changed()

    def modify_member(self, member_id: int, action: ActionCall) -> None:
        m = self.members.get(member_id)
        if m is None:
            raise StateError("NOT_FOUND", f"Member id does not exist: {member_id}")
        m.action = action
        self._changed()

    def delete_member(self, member_id: int) -> None:
        m = self.members.get(member_id)
        if m is None:
            raise StateError("NOT_FOUND", f"Member id does not exist: {member_id}")
        if m.refs or any(h in g.handles for g in self.groups.values() for h in m.handles):
            # BMv2: MBR_STILL_USED, which PI reports as UNKNOWN
            raise StateError("UNKNOWN", "Error when deleting member on target")
        for h in m.handles:
            self._free(h)
        del self.members[member_id]
        self._changed()

    def member(self, member_id: int) -> ProfileMember | None:
        return self.members.get(member_id)

    # -- groups ----------------------------------------------------------------------
    def add_group(self, group_id: int, max_size: int, weights: list[tuple[int, int]]) -> None:
        if max_size < 0:
            raise StateError("INVALID_ARGUMENT", "Group max_size cannot be less than 0")
        if group_id in self.groups:
            raise StateError("ALREADY_EXISTS", f"Duplicate group id: {group_id}")
        g = ProfileGroup(group_id, max_size)
        self._galloc(g)
        self.groups[group_id] = g
        self._set_members(g, weights)
        self._changed()

    def modify_group(self, group_id: int, max_size: int, weights: list[tuple[int, int]]) -> None:
        g = self.groups.get(group_id)
        if g is None:
            raise StateError("NOT_FOUND", f"Group id does not exist: {group_id}")
        if max_size != 0 and max_size != g.max_size:
            raise StateError("INVALID_ARGUMENT", "Cannot change group max_size after group creation")
        self._set_members(g, weights)
        self._changed()

    def delete_group(self, group_id: int) -> None:
        g = self.groups.get(group_id)
        if g is None:
            raise StateError("NOT_FOUND", f"Group id does not exist: {group_id}")
        if g.refs:
            raise StateError("UNKNOWN", "Error when deleting group on target")  # BMv2: GRP_STILL_USED
        for mid, w in g.weights.items():
            m = self.members[mid]
            m.weight_counts[w] -= 1
            self._purge(m)
        self._gused.discard(g.handle)
        del self.groups[group_id]
        self._changed()

    def _set_members(self, g: ProfileGroup, weights: list[tuple[int, int]]) -> None:
        """PI's group_update_members with INDIVIDUAL_ADDS_AND_REMOVES (what BMv2 supports)."""
        total = 0
        for _, w in weights:
            if w <= 0:
                raise StateError("INVALID_ARGUMENT", "Member weight must be a positive integer value")
            total += w
        if g.max_size > 0 and total > g.max_size:
            raise StateError("RESOURCE_EXHAUSTED", "Sum of member weights exceeds maximum group size")
        new: dict[int, int] = {}
        for mid, w in weights:
            if mid not in self.members:
                raise StateError("NOT_FOUND", f"Member id does not exist: {mid}")
            if mid in new:
                raise StateError("INVALID_ARGUMENT", f"Duplicate member id {mid} for group {g.id}, use weights instead")
            new[mid] = w
        changed = []
        for mid in sorted(set(g.weights) | set(new)):
            cw, nw = g.weights.get(mid, 0), new.get(mid, 0)
            if cw == nw:
                continue
            m = self.members[mid]
            changed.append(m)
            while len(m.handles) < nw:
                m.handles.append(self._alloc(m))
            if cw:
                m.weight_counts[cw] -= 1
            g.handles.difference_update(m.handles[nw:cw])
            g.handles.update(m.handles[cw:nw])
            if nw:
                m.weight_counts[nw] = m.weight_counts.get(nw, 0) + 1
        g.weights = new
        for m in changed:
            self._purge(m)
        self._reselect(g)

    def _purge(self, m: ProfileMember) -> None:
        """Free the weight copies of a member that no group needs any more."""
        top = max((w for w, c in m.weight_counts.items() if c > 0), default=1)
        for w in [w for w in m.weight_counts if w > top]:
            del m.weight_counts[w]
        while len(m.handles) > top:
            self._free(m.handles.pop())

    def _reselect(self, g: ProfileGroup) -> None:
        # A new list, not in place: the data plane may be picking from the old one.
        g.select = [self._handle_member[h] for h in sorted(g.handles)]

    # -- one-shot --------------------------------------------------------------------
    def add_oneshot(self, actions: list[tuple[ActionCall, int]]) -> ProfileGroup:
        """A hidden group for a table entry's action set (PI's ActionProfAccessOneshot)."""
        if not actions:
            raise StateError("UNIMPLEMENTED", "No support for empty action profile groups")
        for _, w in actions:
            if w <= 0:
                raise StateError("INVALID_ARGUMENT", "Member weight must be a positive integer value")
        self._oneshot_ids -= 1
        g = ProfileGroup(self._oneshot_ids, len(actions), oneshot=list(actions))
        self._galloc(g)
        for action, w in actions:
            m = ProfileMember(0, action)
            for _ in range(w):
                h = self._alloc(m)
                m.handles.append(h)
                g.handles.add(h)
        self.groups[g.id] = g
        self._reselect(g)
        self._changed()
        return g

    def delete_oneshot(self, g: ProfileGroup) -> None:
        for h in sorted(g.handles):
            self._free(h)
        self._gused.discard(g.handle)
        self.groups.pop(g.id, None)
        self._changed()

    # -- data plane ------------------------------------------------------------------
    def pick(self, ref: IndirectRef, F: list[int]) -> ActionCall | None:
        """The action a table hit on ``ref`` runs (None: an empty group, a no-op)."""
        if ref.member is not None:
            return ref.member.action
        sel = ref.group.select  # type: ignore[union-attr]
        if not sel:
            return None
        if self.hash_fn is None:
            return sel[0].action
        return sel[self.hash_fn(F) % len(sel)].action

    def member_handles(self) -> list[tuple[int, ProfileMember]]:
        """Every BMv2 member (weight copies included) by handle, as BMv2 lists them."""
        return sorted(self._handle_member.items(), key=lambda x: x[0])

    def clear(self) -> None:
        self.members.clear()
        self.groups.clear()
        self._used.clear()
        self._gused.clear()
        self._handle_member.clear()
        self.mode = None
        self._changed()
