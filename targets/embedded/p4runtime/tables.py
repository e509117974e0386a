"""Table entries (match keys, direct actions, defaults) and parser value sets."""

from __future__ import annotations

from typing import Any

from finsy.proto import p4i, p4r

from targets.embedded import action_profiles, state
from targets.embedded.p4runtime.base import ServiceBase
from targets.embedded.p4runtime.common import (
    SC,
    P4RuntimeError,
    all_or_one,
    decode_bytes,
    encode_bytes,
    invalid_id,
    meter_config,
    meter_config_msg,
)
from targets.embedded.p4runtime.pipeline import Pipeline, TableInfo, action_params
from targets.embedded.state import StateError


class TablesMixin(ServiceBase):
    """Write and read table entries and parser value sets."""

    def _decode_key(self, ti: TableInfo, te: p4r.TableEntry) -> tuple[tuple, int]:
        if te.is_default_action:
            if te.match:
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "Non-empty key for default entry")
            if te.priority:
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "Non-zero priority for default entry")
            return (), 0
        if len(te.match) > len(ti.fields):
            raise P4RuntimeError(SC.INVALID_ARGUMENT, "Too many fields in match key")
        given: dict[int, p4r.FieldMatch] = {}
        for fm in te.match:
            pos = ti.field_pos.get(fm.field_id)
            if pos is None:
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "Unknown field in match key")
            if pos in given:
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "Duplicate field in match key")
            given[pos] = fm
        key: list[Any] = []
        for pos, f in enumerate(ti.fields):
            fm = given.get(pos)
            full = (1 << f.bitwidth) - 1
            what = f"{ti.name}.{f.name}"
            if fm is None:  # don't care
                if f.kind in ("lpm", "ternary", "optional"):
                    key.append((0, 0))
                elif f.kind == "range":
                    key.append((0, full))
                else:
                    raise P4RuntimeError(SC.INVALID_ARGUMENT, "Missing non-ternary field in match key")
                continue
            if fm.WhichOneof("field_match_type") != f.kind:
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "Invalid match type")
            if f.kind == "exact":
                key.append(decode_bytes(fm.exact.value, f.bitwidth, what))
            elif f.kind == "lpm":
                value = decode_bytes(fm.lpm.value, f.bitwidth, what)
                plen = fm.lpm.prefix_len
                if plen < 0:
                    raise P4RuntimeError(SC.INVALID_ARGUMENT, "Prefix length cannot be < 0")
                if plen > f.bitwidth:
                    raise P4RuntimeError(SC.INVALID_ARGUMENT, "Prefix length cannot be > bitwidth")
                if plen == 0:
                    raise P4RuntimeError(SC.INVALID_ARGUMENT, "Invalid reprsentation of 'don't care' LPM match, "
                                         "omit match field instead of using a prefix length of 0")
                if value & ((1 << (f.bitwidth - plen)) - 1):
                    raise P4RuntimeError(SC.INVALID_ARGUMENT, "Invalid LPM value, incorrect number of trailing zeros")
                key.append((value, plen))
            elif f.kind == "ternary":
                value = decode_bytes(fm.ternary.value, f.bitwidth, what)
                mask = decode_bytes(fm.ternary.mask, f.bitwidth, what)
                if mask == 0:
                    raise P4RuntimeError(SC.INVALID_ARGUMENT, "Invalid representation of 'don't care' ternary match, "
                                         "omit match field instead of using 0 mask")
                if value & ~mask:
                    raise P4RuntimeError(SC.INVALID_ARGUMENT, "Invalid ternary value, make sure value & mask == value")
                key.append((value, mask))
            elif f.kind == "range":
                lo = decode_bytes(fm.range.low, f.bitwidth, what)
                hi = decode_bytes(fm.range.high, f.bitwidth, what)
                if lo == 0 and hi == full:
                    raise P4RuntimeError(SC.INVALID_ARGUMENT, "Invalid representation of 'don't care' range match, "
                                         "omit match field instead of using low=0 and high=2**bitwidth-1")
                if lo > hi:
                    raise P4RuntimeError(SC.INVALID_ARGUMENT, "Invalid range value, make sure low <= high")
                key.append((lo, hi))
            else:  # optional
                key.append((decode_bytes(fm.optional.value, f.bitwidth, what), full))
        if not ti.needs_priority and te.priority != 0:  # negative too (spec: "must be zero")
            raise P4RuntimeError(SC.INVALID_ARGUMENT, "Non-zero priority for non-ternary match")
        if ti.needs_priority and te.priority <= 0:
            raise P4RuntimeError(SC.INVALID_ARGUMENT, "Zero or negative priority for ternary match")
        return tuple(key), te.priority

    def _decode_action(self, pl: Pipeline, ti: TableInfo, te: p4r.TableEntry) -> state.ActionCall:
        kind = te.action.WhichOneof("type")
        if kind != "action":
            raise P4RuntimeError(SC.INVALID_ARGUMENT, f"Cannot provide indirect action for direct table {ti.id}")
        action = te.action.action
        act = pl.actions.get(action.action_id)
        if act is None:
            raise invalid_id()
        scope = ti.actions.get(act.id)
        if scope is None:
            raise P4RuntimeError(SC.INVALID_ARGUMENT, "Invalid action for table")
        if scope == p4i.ActionRef.TABLE_ONLY and te.is_default_action:
            raise P4RuntimeError(SC.PERMISSION_DENIED, "Cannot use TABLE_ONLY action as default action")
        if scope == p4i.ActionRef.DEFAULT_ONLY and not te.is_default_action:
            raise P4RuntimeError(SC.PERMISSION_DENIED, "Cannot use DEFAULT_ONLY action in table entry")
        try:
            return pl.program.action_call(ti.table.name, act.name, action_params(act, action))
        except StateError as e:
            raise P4RuntimeError.from_state(e) from e

    @staticmethod
    def _check_entry_extras(ti: TableInfo, te: p4r.TableEntry) -> None:
        if te.HasField("time_since_last_hit"):
            raise P4RuntimeError(SC.INVALID_ARGUMENT, "has_time_since_last_hit must not be set in WriteRequest")
        if te.HasField("meter_config") or te.HasField("meter_counter_data"):
            if not ti.direct_meter:
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "Table has no direct meters")
            if te.HasField("meter_counter_data"):
                raise P4RuntimeError(SC.UNIMPLEMENTED, "Direct meter counters are not supported")
            if te.is_default_action:
                raise P4RuntimeError(SC.UNIMPLEMENTED, "Direct meters of default entries are not supported")
        if te.HasField("counter_data") and not ti.direct_counter:
            raise P4RuntimeError(SC.INVALID_ARGUMENT, "Table has no direct counters")
        if te.idle_timeout_ns < 0:
            raise P4RuntimeError(SC.INVALID_ARGUMENT, "idle_timeout_ns must be a positive value")
        if te.idle_timeout_ns > 0 and not ti.idle_timeout:
            raise P4RuntimeError(SC.INVALID_ARGUMENT, "idle_timeout_ns must be set to 0 for tables which do not "
                                 "support idle timeout")

    def _write_table(self, pl: Pipeline, t: int, te: p4r.TableEntry) -> None:
        ti = pl.table(te.table_id)
        self._check_update_type(t, p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE)
        if te.is_const:  # spec, "Table Entry": is_const must be false in every write
            raise P4RuntimeError(SC.INVALID_ARGUMENT, "is_const must not be set in a write")
        if ti.profile:
            self._write_indirect_table(pl, ti, t, te)
            return
        table = ti.table
        if ti.is_const and not te.is_default_action:
            raise P4RuntimeError(SC.PERMISSION_DENIED, f"table {ti.name} is const: its entries cannot be changed")
        if t == p4r.Update.INSERT:
            if te.is_default_action:
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "Cannot use INSERT for default entry")
            if not te.HasField("action"):
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "'action' field must be set")
            key, prio = self._decode_key(ti, te)
            call = self._decode_action(pl, ti, te)
            self._check_entry_extras(ti, te)
            entry = state.TableEntry(key, call, prio, idle_timeout_ns=te.idle_timeout_ns, metadata=bytes(te.metadata))
            if te.HasField("meter_config"):
                entry.meter_config = meter_config(te.meter_config)
            if te.HasField("counter_data"):
                entry.packets, entry.bytes = te.counter_data.packet_count, te.counter_data.byte_count
            table.insert(entry)
        elif t == p4r.Update.MODIFY:
            key, prio = self._decode_key(ti, te)
            if te.is_default_action:
                if ti.const_default or table.default_const:
                    raise P4RuntimeError(SC.PERMISSION_DENIED, f"Cannot set / reset default action for table {ti.id} "
                                         "which has a const default action")
                self._check_entry_extras(ti, te)
                if te.HasField("action"):
                    table.set_default(self._decode_action(pl, ti, te))
                else:
                    table.reset_default()
                if te.HasField("counter_data"):
                    table.default_packets = te.counter_data.packet_count
                    table.default_bytes = te.counter_data.byte_count
                    table.direct_written(None)
                return
            if not te.HasField("action"):
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "'action' field must be set for non-default entries")
            call = self._decode_action(pl, ti, te)
            self._check_entry_extras(ti, te)
            entry = table.modify(key, prio, call)
            entry.metadata = bytes(te.metadata)
            entry.idle_timeout_ns = te.idle_timeout_ns
            if te.HasField("meter_config"):
                entry.meter_config, entry.meter = meter_config(te.meter_config), None
            if te.HasField("counter_data"):
                entry.packets, entry.bytes = te.counter_data.packet_count, te.counter_data.byte_count
            table.direct_written(entry, te.HasField("counter_data"), te.HasField("meter_config"))
        else:
            if te.is_default_action:
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "Cannot use DELETE for default entry")
            key, prio = self._decode_key(ti, te)
            table.delete(key, prio)

    def _encode_action(self, pl: Pipeline, call: state.ActionCall) -> p4r.TableAction | None:
        aid = pl.action_ids.get(call.name)
        if aid is None:
            return None
        act = pl.actions[aid]
        params = [p4r.Action.Param(param_id=f.id, value=encode_bytes(v))
                  for f, v in zip(act.params, call.params, strict=True)]
        return p4r.TableAction(action=p4r.Action(action_id=aid, params=params))

    def _encode_entry(self, pl: Pipeline, ti: TableInfo, entry: state.TableEntry, counters: bool,
                      meters: bool = False) -> p4r.TableEntry:
        te = p4r.TableEntry(table_id=ti.id)
        for f, v in zip(ti.fields, entry.key, strict=True):  # don't-care fields are left out
            if f.kind == "exact":
                te.match.add(field_id=f.id, exact=p4r.FieldMatch.Exact(value=encode_bytes(v)))
            elif f.kind == "lpm":
                if v[1]:
                    te.match.add(field_id=f.id, lpm=p4r.FieldMatch.LPM(value=encode_bytes(v[0]), prefix_len=v[1]))
            elif f.kind == "ternary":
                if v[1]:
                    te.match.add(field_id=f.id, ternary=p4r.FieldMatch.Ternary(value=encode_bytes(v[0]),
                                                                                mask=encode_bytes(v[1])))
            elif f.kind == "optional":
                if v[1]:
                    te.match.add(field_id=f.id, optional=p4r.FieldMatch.Optional(value=encode_bytes(v[0])))
            elif v != (0, (1 << f.bitwidth) - 1):  # range
                te.match.add(field_id=f.id, range=p4r.FieldMatch.Range(low=encode_bytes(v[0]), high=encode_bytes(v[1])))
        if ti.needs_priority:
            te.priority = entry.priority
        if isinstance(entry.action, action_profiles.IndirectRef):
            action = self._encode_indirect(entry.action)
        else:
            action = self._encode_action(pl, entry.action)
        if action is not None:
            te.action.CopyFrom(action)
        te.metadata = entry.metadata
        te.idle_timeout_ns = entry.idle_timeout_ns
        te.is_const = entry.is_const
        if counters and ti.direct_counter:
            te.counter_data.CopyFrom(self._counter_data(pl.direct_counter_units[ti.direct_counter],
                                                        entry.packets, entry.bytes))
        if meters and entry.meter_config is not None:
            te.meter_config.CopyFrom(meter_config_msg(entry.meter_config))
        return te

    def _encode_default(self, pl: Pipeline, ti: TableInfo, counters: bool) -> p4r.TableEntry:
        te = p4r.TableEntry(table_id=ti.id, is_default_action=True)
        action = self._encode_action(pl, ti.table.default)
        if action is not None:
            te.action.CopyFrom(action)
        if counters and ti.direct_counter:
            te.counter_data.CopyFrom(self._counter_data(pl.direct_counter_units[ti.direct_counter],
                                                        ti.table.default_packets, ti.table.default_bytes))
        return te

    def _select_entries(self, ti: TableInfo, te: p4r.TableEntry) -> list[state.TableEntry]:
        if not te.match:
            return list(ti.table.entries())
        key, prio = self._decode_key(ti, te)
        entry = ti.table.get(key, prio)
        return [entry] if entry is not None else []

    def _read_table(self, pl: Pipeline, te: p4r.TableEntry, out: list[p4r.Entity]) -> None:
        if te.table_id == 0:
            if te.match:
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "A match key needs a table id")
            tables = list(pl.tables.values())
        else:
            tables = [pl.table(te.table_id)]
        counters = te.HasField("counter_data")
        meters = te.HasField("meter_config")
        for ti in tables:
            if counters:
                ti.table.direct_read()
            if te.is_default_action:
                out.append(p4r.Entity(table_entry=self._encode_default(pl, ti, counters)))
                continue
            if te.HasField("time_since_last_hit") and not ti.idle_timeout:
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "Do not set time_since_last_hit for a ReadRequest if the "
                                     "table does not support idle timeout; yes, that includes wildcard reads")
            for entry in self._select_entries(ti, te):
                out.append(p4r.Entity(table_entry=self._encode_entry(pl, ti, entry, counters, meters)))

    def _write_value_set(self, pl: Pipeline, t: int, ve: p4r.ValueSetEntry) -> None:
        vi = pl.value_sets.get(ve.value_set_id)
        if vi is None:
            raise invalid_id()
        self._check_update_type(t, p4r.Update.MODIFY)
        members = []
        for m in ve.members:
            values: list[int | None] = [None] * len(vi.fields)
            for fm in m.match:
                i = next((j for j, f in enumerate(vi.fields) if f.id == fm.field_id), None)
                if i is None:
                    raise P4RuntimeError(SC.INVALID_ARGUMENT, "Unknown field in value set member")
                if values[i] is not None:
                    raise P4RuntimeError(SC.INVALID_ARGUMENT, "Duplicate field in value set member")
                if fm.WhichOneof("field_match_type") != "exact":
                    raise P4RuntimeError(SC.INVALID_ARGUMENT, "Invalid match type")
                f = vi.fields[i]
                values[i] = decode_bytes(fm.exact.value, f.bitwidth, f"{vi.name}.{f.name or f.id}")
            if any(v is None for v in values):
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "Missing field in value set member")
            members.append(tuple(values))
        vi.value_set.set_members(members, [f.bitwidth for f in vi.fields])  # type: ignore[arg-type]

    def _read_value_set(self, pl: Pipeline, ve: p4r.ValueSetEntry, out: list[p4r.Entity]) -> None:
        infos = all_or_one(pl.value_sets, ve.value_set_id)
        for vi in infos:
            entry = p4r.ValueSetEntry(value_set_id=vi.id)
            for m in vi.value_set.members:
                member = entry.members.add()
                for f, v in zip(vi.fields, m, strict=True):
                    member.match.add(field_id=f.id, exact=p4r.FieldMatch.Exact(value=encode_bytes(v)))
            out.append(p4r.Entity(value_set_entry=entry))
