"""Counters and meters (indirect and direct) and registers."""

from __future__ import annotations

from finsy.proto import p4d, p4i, p4r

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
from targets.embedded.p4runtime.pipeline import Pipeline, TableInfo

PACKETS_UNITS = (p4i.CounterSpec.PACKETS, p4i.CounterSpec.BOTH, p4i.CounterSpec.UNSPECIFIED)
BYTES_UNITS = (p4i.CounterSpec.BYTES, p4i.CounterSpec.BOTH, p4i.CounterSpec.UNSPECIFIED)


class CountersMixin(ServiceBase):
    """Write and read counter, meter and register cells."""

    @staticmethod
    def _counter_data(unit: int, packets: int, nbytes: int) -> p4r.CounterData:
        data = p4r.CounterData()
        if unit in PACKETS_UNITS:
            data.packet_count = packets
        if unit in BYTES_UNITS:
            data.byte_count = nbytes
        return data

    def _write_counter(self, pl: Pipeline, t: int, ce: p4r.CounterEntry) -> None:
        ci = pl.counters.get(ce.counter_id)
        if ci is None:
            raise invalid_id()
        index = self._index(ce)
        if index is None:
            raise P4RuntimeError(SC.UNIMPLEMENTED, "Wildcard write is not supported for indirect counters yet")
        self._check_update_type(t, p4r.Update.MODIFY, p4r.Update.DELETE)
        packets, nbytes = ci.array.read(index)
        if t == p4r.Update.DELETE:  # PI resets the cell
            packets = nbytes = 0
        else:
            if ci.unit in PACKETS_UNITS:
                packets = ce.data.packet_count
            if ci.unit in BYTES_UNITS:
                nbytes = ce.data.byte_count
        ci.array.write(index, packets, nbytes)

    def _read_counter(self, pl: Pipeline, ce: p4r.CounterEntry, out: list[p4r.Entity]) -> None:
        if ce.counter_id == 0:
            infos = list(pl.counters.values())
        else:
            ci = pl.counters.get(ce.counter_id)
            if ci is None:
                if ce.counter_id in pl.direct_counters:
                    raise P4RuntimeError(SC.INVALID_ARGUMENT, "Cannot use CounterEntry with a direct counter")
                raise invalid_id()
            infos = [ci]
        index = self._index(ce)
        for ci in infos:
            indexes = range(ci.size) if index is None else [index]
            for i in indexes:
                packets, nbytes = ci.array.read(i)
                out.append(p4r.Entity(counter_entry=p4r.CounterEntry(
                    counter_id=ci.id, index=p4r.Index(index=i), data=self._counter_data(ci.unit, packets, nbytes))))

    def _direct_counter_table(self, pl: Pipeline, dce: p4r.DirectCounterEntry) -> TableInfo:
        if not dce.HasField("table_entry"):
            raise P4RuntimeError(SC.INVALID_ARGUMENT, "Missing table_entry field in DirectCounterEntry")
        if dce.table_entry.table_id == 0:
            raise P4RuntimeError(SC.UNIMPLEMENTED, "Reading all direct counters for ALL tables is not supported yet")
        ti = pl.table(dce.table_entry.table_id)
        if not ti.direct_counter:
            raise P4RuntimeError(SC.INVALID_ARGUMENT, "Table has no direct counters")
        return ti

    def _write_direct_counter(self, pl: Pipeline, t: int, dce: p4r.DirectCounterEntry) -> None:
        ti = self._direct_counter_table(pl, dce)
        te = dce.table_entry
        key, prio = self._decode_key(ti, te)
        self._check_update_type(t, p4r.Update.MODIFY, p4r.Update.DELETE)
        unit = pl.direct_counter_units[ti.direct_counter]
        ti.table.direct_read()  # the unit not written keeps its count
        if te.is_default_action:
            packets, nbytes = ti.table.default_packets, ti.table.default_bytes
        else:
            entry = ti.table.get(key, prio)
            if entry is None:
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "Cannot map table entry to handle")
            packets, nbytes = entry.packets, entry.bytes
        if t == p4r.Update.DELETE:
            packets = nbytes = 0
        else:
            if unit in PACKETS_UNITS:
                packets = dce.data.packet_count
            if unit in BYTES_UNITS:
                nbytes = dce.data.byte_count
        if te.is_default_action:
            ti.table.default_packets, ti.table.default_bytes = packets, nbytes
            ti.table.direct_written(None)
        else:
            entry.packets, entry.bytes = packets, nbytes
            ti.table.direct_written(entry)

    def _read_direct_counter(self, pl: Pipeline, dce: p4r.DirectCounterEntry, out: list[p4r.Entity]) -> None:
        ti = self._direct_counter_table(pl, dce)
        te = dce.table_entry
        unit = pl.direct_counter_units[ti.direct_counter]
        ti.table.direct_read()
        if te.is_default_action:
            self._decode_key(ti, te)
            data = self._counter_data(unit, ti.table.default_packets, ti.table.default_bytes)
            out.append(p4r.Entity(direct_counter_entry=p4r.DirectCounterEntry(table_entry=te, data=data)))
            return
        if te.match:
            key, prio = self._decode_key(ti, te)
            if ti.table.get(key, prio) is None:
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "Cannot map table entry to handle")
        for entry in self._select_entries(ti, te):
            tentry = self._encode_entry(pl, ti, entry, counters=False)
            tentry.ClearField("action")
            data = self._counter_data(unit, entry.packets, entry.bytes)
            out.append(p4r.Entity(direct_counter_entry=p4r.DirectCounterEntry(table_entry=tentry, data=data)))

    def _write_register(self, pl: Pipeline, t: int, re: p4r.RegisterEntry) -> None:
        ri = pl.registers.get(re.register_id)
        if ri is None:
            raise invalid_id()
        self._check_update_type(t, p4r.Update.MODIFY)
        index = self._index(re)
        if re.data.WhichOneof("data") != "bitstring":
            raise P4RuntimeError(SC.INVALID_ARGUMENT, f"register {ri.name}: data must be a bitstring")
        value = decode_bytes(re.data.bitstring, ri.bitwidth, f"register {ri.name}")
        if index is None:
            for i in range(ri.size):
                ri.array.write(i, value)
        else:
            ri.array.write(index, value)

    def _read_register(self, pl: Pipeline, re: p4r.RegisterEntry, out: list[p4r.Entity]) -> None:
        infos = all_or_one(pl.registers, re.register_id)
        index = self._index(re)
        for ri in infos:
            indexes = range(ri.size) if index is None else [index]
            for i in indexes:
                out.append(p4r.Entity(register_entry=p4r.RegisterEntry(
                    register_id=ri.id, index=p4r.Index(index=i),
                    data=p4d.P4Data(bitstring=encode_bytes(ri.array.read(i))))))

    def _write_meter(self, pl: Pipeline, t: int, me: p4r.MeterEntry) -> None:
        mi = pl.meters.get(me.meter_id)
        if mi is None:
            raise invalid_id()
        self._check_update_type(t, p4r.Update.MODIFY)
        index = self._index(me)
        indexes = range(mi.size) if index is None else [index]
        if not me.HasField("config"):
            for i in indexes:
                if not 0 <= i < mi.size:
                    raise P4RuntimeError(SC.OUT_OF_RANGE, f"meter {mi.name}: index {i} out of range")
                mi.array.clear_config(i)  # unconfigured: every packet is green
            return
        cfg = meter_config(me.config)
        for i in indexes:
            if cfg is None:
                mi.array.clear_config(i)
            else:
                mi.array.set_config(i, *cfg)

    def _read_meter(self, pl: Pipeline, me: p4r.MeterEntry, out: list[p4r.Entity]) -> None:
        infos = all_or_one(pl.meters, me.meter_id)
        index = self._index(me)
        for mi in infos:
            indexes = range(mi.size) if index is None else [index]
            for i in indexes:
                if not 0 <= i < mi.size:
                    raise P4RuntimeError(SC.OUT_OF_RANGE, f"meter {mi.name}: index {i} out of range")
                entry = p4r.MeterEntry(meter_id=mi.id, index=p4r.Index(index=i))
                cfg = mi.array.configs[i]
                if cfg is not None:
                    entry.config.CopyFrom(p4r.MeterConfig(cir=cfg[0], cburst=cfg[1], pir=cfg[2], pburst=cfg[3]))
                out.append(p4r.Entity(meter_entry=entry))

    def _direct_meter_entry(self, pl: Pipeline, dme: p4r.DirectMeterEntry, reading: bool) -> TableInfo:
        te = dme.table_entry
        if not dme.HasField("table_entry"):
            raise P4RuntimeError(SC.INVALID_ARGUMENT, "Missing table_entry field in DirectMeterEntry")
        if te.table_id == 0:
            raise P4RuntimeError(SC.UNIMPLEMENTED, "Reading all direct meters for ALL tables is not supported")
        ti = pl.table(te.table_id)
        if not ti.direct_meter:
            raise P4RuntimeError(SC.INVALID_ARGUMENT, "Table has no direct meters")
        if te.is_default_action:
            raise P4RuntimeError(SC.UNIMPLEMENTED, "Direct meters of default entries are not supported")
        if te.match or not reading:
            key, prio = self._decode_key(ti, te)
            if ti.table.get(key, prio) is None:
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "Cannot map table entry to handle")
        return ti

    def _write_direct_meter(self, pl: Pipeline, t: int, dme: p4r.DirectMeterEntry) -> None:
        ti = self._direct_meter_entry(pl, dme, reading=False)
        self._check_update_type(t, p4r.Update.MODIFY)
        key, prio = self._decode_key(ti, dme.table_entry)
        entry = ti.table.get(key, prio)
        assert entry is not None
        # A new config restarts the meter with full buckets (the data plane creates it
        # from meter_config on the next packet); no config: unconfigured, always green.
        entry.meter_config = meter_config(dme.config) if dme.HasField("config") else None
        entry.meter = None
        ti.table.direct_written(entry, counters=False, meter=True)

    def _read_direct_meter(self, pl: Pipeline, dme: p4r.DirectMeterEntry, out: list[p4r.Entity]) -> None:
        ti = self._direct_meter_entry(pl, dme, reading=True)
        for entry in self._select_entries(ti, dme.table_entry):
            tentry = self._encode_entry(pl, ti, entry, counters=False)
            tentry.ClearField("action")
            ent = p4r.DirectMeterEntry(table_entry=tentry)
            if entry.meter_config is not None:
                ent.config.CopyFrom(meter_config_msg(entry.meter_config))
            out.append(p4r.Entity(direct_meter_entry=ent))
