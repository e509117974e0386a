"""Action profiles and selectors: members, groups, one-shot action sets, and the
entries of tables they implement."""

from __future__ import annotations

from finsy.proto import p4r

from targets.embedded import action_profiles, state
from targets.embedded.p4runtime.base import ServiceBase
from targets.embedded.p4runtime.common import SC, P4RuntimeError, invalid_id
from targets.embedded.p4runtime.pipeline import Pipeline, ProfileInfo, TableInfo, action_params
from targets.embedded.state import StateError


class ProfilesMixin(ServiceBase):
    """Write and read action profile members and groups, and indirect table entries."""

    def _profile(self, pl: Pipeline, profile_id: int) -> ProfileInfo:
        pi = pl.profiles.get(profile_id)
        if pi is None:
            raise invalid_id()
        return pi

    def _profile_action(self, pl: Pipeline, pi: ProfileInfo, action: p4r.Action) -> state.ActionCall:
        """An action of a member / one-shot action set, checked as PI does."""
        act = pl.actions.get(action.action_id)
        if act is None:
            raise invalid_id()
        return pl.program.profile_action_call(pi.name, act.name, action_params(act, action))

    def _write_profile_member(self, pl: Pipeline, t: int, m: p4r.ActionProfileMember) -> None:
        pi = self._profile(pl, m.action_profile_id)
        self._check_update_type(t, p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE)
        ap = pi.profile
        ap.use_mode("manual")
        if t == p4r.Update.DELETE:
            ap.delete_member(m.member_id)
            return
        call = self._profile_action(pl, pi, m.action)
        if t == p4r.Update.INSERT:
            ap.add_member(m.member_id, call)
        else:
            ap.modify_member(m.member_id, call)

    def _write_profile_group(self, pl: Pipeline, t: int, g: p4r.ActionProfileGroup) -> None:
        pi = self._profile(pl, g.action_profile_id)
        self._check_update_type(t, p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE)
        ap = pi.profile
        ap.use_mode("manual")
        if t == p4r.Update.DELETE:
            ap.delete_group(g.group_id)
            return
        if g.max_size < 0:
            raise P4RuntimeError(SC.INVALID_ARGUMENT, "Group max_size cannot be less than 0")
        if pi.max_group_size > 0 and g.max_size > pi.max_group_size:
            raise P4RuntimeError(SC.INVALID_ARGUMENT, "Group max_size cannot exceed static max_group_size (from P4Info)")
        weights = [(m.member_id, m.weight) for m in g.members]
        if t == p4r.Update.INSERT:
            ap.add_group(g.group_id, g.max_size, weights)
        else:
            ap.modify_group(g.group_id, g.max_size, weights)

    def _decode_indirect(self, pl: Pipeline, ti: TableInfo, te: p4r.TableEntry) -> action_profiles.IndirectRef:
        """The member / group a table entry of an indirect table points at (a one-shot
        action set becomes a new hidden group)."""
        pi = self._profile(pl, ti.profile)
        ap = pi.profile
        kind = te.action.WhichOneof("type")
        if kind == "action":
            raise P4RuntimeError(SC.INVALID_ARGUMENT, f"Cannot provide direct action for indirect table {ti.id}")
        if kind == "action_profile_action_set":
            ap.use_mode("oneshot")
            actions = [(self._profile_action(pl, pi, a.action), a.weight)
                       for a in te.action.action_profile_action_set.action_profile_actions]
            if pi.max_group_size > 0 and sum(w for _, w in actions) > pi.max_group_size:
                raise P4RuntimeError(SC.RESOURCE_EXHAUSTED, "Sum of weights exceeds static max_group_size (from P4Info)")
            ref = action_profiles.IndirectRef(group=ap.add_oneshot(actions))
        else:
            ap.use_mode("manual")
            if kind == "action_profile_member_id":
                ref = action_profiles.IndirectRef(member=ap.member(te.action.action_profile_member_id))
            elif kind == "action_profile_group_id":
                ref = action_profiles.IndirectRef(group=ap.groups.get(te.action.action_profile_group_id))
            else:
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "Invalid table action type")
            if ref.member is None and ref.group is None:
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "Invalid member / group id")
        if ref.group is not None and (not ap.with_selector or not ref.group.select):
            # BMv2 refuses a group in a table without selector, or an empty group
            self._release(ap, ref)
            raise P4RuntimeError(SC.UNKNOWN, "Error when adding match entry to target")
        return ref

    @staticmethod
    def _hold(ref: action_profiles.IndirectRef, n: int) -> None:
        target = ref.member if ref.member is not None else ref.group
        if target is not None:
            target.refs += n

    @staticmethod
    def _release(ap: action_profiles.ActionProfile, ref: action_profiles.IndirectRef) -> None:
        """Drop the hidden group of a one-shot action set."""
        if ref.group is not None and ref.group.oneshot is not None:
            ap.delete_oneshot(ref.group)

    def _write_indirect_table(self, pl: Pipeline, ti: TableInfo, t: int, te: p4r.TableEntry) -> None:
        if te.is_default_action:
            raise P4RuntimeError(SC.INVALID_ARGUMENT, f"Cannot set / reset default action for indirect table {ti.id}")
        table = ti.table
        ap = pl.profiles[ti.profile].profile
        key, prio = self._decode_key(ti, te)
        if t == p4r.Update.DELETE:
            entry = table.get(key, prio)
            table.delete(key, prio)
            if entry is not None:
                self._hold(entry.action, -1)
                self._release(ap, entry.action)
            return
        if not te.HasField("action"):
            raise P4RuntimeError(SC.INVALID_ARGUMENT, "'action' field must be set")
        self._check_entry_extras(ti, te)
        old = table.get(key, prio) if t == p4r.Update.MODIFY else None
        if t == p4r.Update.MODIFY and old is None:
            raise P4RuntimeError(SC.NOT_FOUND, f"table {ti.name}: no such entry")
        ref = self._decode_indirect(pl, ti, te)
        try:
            if t == p4r.Update.INSERT:
                entry = state.TableEntry(key, ref, prio, idle_timeout_ns=te.idle_timeout_ns,  # type: ignore[arg-type]
                                         metadata=bytes(te.metadata))
                if te.HasField("counter_data"):
                    entry.packets, entry.bytes = te.counter_data.packet_count, te.counter_data.byte_count
                table.insert(entry)
            else:
                table.modify(key, prio, ref)  # type: ignore[arg-type]
                old.metadata, old.idle_timeout_ns = bytes(te.metadata), te.idle_timeout_ns  # type: ignore[union-attr]
        except StateError:
            self._release(ap, ref)
            raise
        self._hold(ref, 1)
        if old is not None:
            self._hold(old.action, -1)  # type: ignore[arg-type]
            self._release(ap, old.action)  # type: ignore[arg-type]

    def _encode_indirect(self, ref: action_profiles.IndirectRef) -> p4r.TableAction:
        if ref.member is not None:
            return p4r.TableAction(action_profile_member_id=ref.member.id)
        g = ref.group
        assert g is not None
        if g.oneshot is None:
            return p4r.TableAction(action_profile_group_id=g.id)
        pl = self._need_pipeline()
        action_set = p4r.ActionProfileActionSet()
        for call, w in g.oneshot:
            ta = self._encode_action(pl, call)
            if ta is not None:
                action_set.action_profile_actions.add(action=ta.action, weight=w)
        return p4r.TableAction(action_profile_action_set=action_set)

    def _read_profile_members(self, pl: Pipeline, m: p4r.ActionProfileMember, out: list[p4r.Entity]) -> None:
        infos = list(pl.profiles.values()) if m.action_profile_id == 0 else [self._profile(pl, m.action_profile_id)]
        for pi in infos:
            ap = pi.profile
            if ap.mode == "oneshot" and (ap.members or ap.groups):
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "Invalid attempt to mix action selector programming modes")
            # PI lists BMv2's members, so a member with weight copies appears once per copy
            for _, member in ap.member_handles():
                if m.member_id in (0, member.id):
                    ta = self._encode_action(pl, member.action)
                    out.append(p4r.Entity(action_profile_member=p4r.ActionProfileMember(
                        action_profile_id=pi.id, member_id=member.id, action=ta.action if ta else None)))

    def _read_profile_groups(self, pl: Pipeline, g: p4r.ActionProfileGroup, out: list[p4r.Entity]) -> None:
        infos = list(pl.profiles.values()) if g.action_profile_id == 0 else [self._profile(pl, g.action_profile_id)]
        for pi in infos:
            ap = pi.profile
            if ap.mode == "oneshot" and (ap.members or ap.groups):
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "Invalid attempt to mix action selector programming modes")
            for grp in sorted(ap.groups.values(), key=lambda x: x.handle):
                if g.group_id not in (0, grp.id):
                    continue
                members = [p4r.ActionProfileGroup.Member(member_id=mid, weight=w)
                           for mid, w in sorted(grp.weights.items())]
                out.append(p4r.Entity(action_profile_group=p4r.ActionProfileGroup(
                    action_profile_id=pi.id, group_id=grp.id, members=members, max_size=grp.max_size)))
