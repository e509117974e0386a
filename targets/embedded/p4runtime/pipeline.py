"""The forwarding pipeline: a P4Info checked against its compiled program, with the
id maps every service area looks entities up in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from finsy.proto import p4i, p4r

from targets.embedded import action_profiles, state
from targets.embedded.p4runtime.common import (
    SC,
    P4RuntimeError,
    decode_bytes,
    encode_bytes,
    invalid_id,
)

if TYPE_CHECKING:
    from targets.embedded.compiler import Program

_MatchType = p4i.MatchField
_MATCH_KINDS = {
    _MatchType.EXACT: "exact",
    _MatchType.LPM: "lpm",
    _MatchType.TERNARY: "ternary",
    _MatchType.RANGE: "range",
    _MatchType.OPTIONAL: "optional",
}


def _lookup(mapping: dict[str, Any], name: str) -> Any:
    """``mapping[name]``, or the one entry whose name equals ``name`` up to a dotted prefix."""
    if name in mapping:
        return mapping[name]
    hits = [k for k in mapping if k.endswith("." + name) or name.endswith("." + k)]
    return mapping[hits[0]] if len(hits) == 1 else None


def _bitwidth(spec: Any) -> int | None:
    """Width of a P4DataTypeSpec / P4BitstringLikeTypeSpec that is bit<W> or int<W>."""
    bs = spec.bitstring if hasattr(spec, "bitstring") else spec
    if bs.HasField("bit"):
        return bs.bit.bitwidth
    if bs.HasField("int"):
        return bs.int.bitwidth
    return None


@dataclass(slots=True)
class Field:
    id: int
    name: str
    bitwidth: int
    kind: str = ""


@dataclass(slots=True)
class ActionInfo:
    id: int
    name: str
    params: list[Field]
    param_pos: dict[int, int]


@dataclass(slots=True)
class TableInfo:
    id: int
    name: str
    table: state.Table
    fields: list[Field]
    field_pos: dict[int, int]
    actions: dict[int, int]  # action id -> ActionRef scope
    const_default: bool
    direct_counter: int
    direct_meter: int
    idle_timeout: bool
    needs_priority: bool
    is_const: bool
    profile: int = 0  # P4Info id of the action profile / selector implementing the table


@dataclass(slots=True)
class ProfileInfo:
    id: int
    name: str
    profile: action_profiles.ActionProfile
    max_group_size: int


@dataclass(slots=True)
class ValueSetInfo:
    id: int
    name: str
    value_set: state.ValueSet
    fields: list[Field]


@dataclass(slots=True)
class ArrayInfo:
    id: int
    name: str
    size: int
    array: Any
    unit: int = 0  # counters: CounterSpec.Unit
    bitwidth: int = 0  # registers


@dataclass(slots=True)
class DigestInfo:
    id: int
    name: str
    learn_list: str
    kind: str  # "struct", "tuple" or "bitstring"
    widths: list[int]


@dataclass(slots=True)
class ControllerHeader:
    fields: list[Field]
    index: dict[int, int]
    nbits: int

    @property
    def nbytes(self) -> int:
        return (self.nbits + 7) // 8


def action_params(act: ActionInfo, action: p4r.Action) -> tuple[int, ...]:
    """``action``'s parameter values in ``act``'s order, checked as PI does (count,
    unknown and duplicate ids, widths)."""
    if len(action.params) != len(act.params):
        raise P4RuntimeError(SC.INVALID_ARGUMENT, "Unexpected number of action parameters")
    values: list[int | None] = [None] * len(act.params)
    for p in action.params:
        i = act.param_pos.get(p.param_id)
        if i is None:
            raise P4RuntimeError(SC.INVALID_ARGUMENT, "Unknown action parameter")
        if values[i] is not None:
            raise P4RuntimeError(SC.INVALID_ARGUMENT, "Duplicate action parameter")
        f = act.params[i]
        values[i] = decode_bytes(p.value, f.bitwidth, f"{act.name}.{f.name}")
    return tuple(values)  # type: ignore[arg-type] (every slot filled: counts match, no duplicates)


def _mismatch(msg: str) -> P4RuntimeError:
    return P4RuntimeError(SC.INVALID_ARGUMENT, f"P4Info does not match the device config: {msg}")


class Pipeline:
    """A forwarding pipeline config checked against its compiled program, with id maps."""

    def __init__(self, config: p4r.ForwardingPipelineConfig, program: Program) -> None:
        self.p4info = p4i.P4Info()
        self.p4info.CopyFrom(config.p4info)
        self.device_config = bytes(config.p4_device_config)
        self.cookie: int | None = config.cookie.cookie if config.HasField("cookie") else None
        self.program = program
        # mapped in this order: the first mismatch found is the one reported
        self._map_actions(self.p4info, program)
        self._map_tables(self.p4info, program)
        self._map_value_sets(self.p4info, program)
        self._map_profiles(self.p4info, program)
        self._map_arrays(self.p4info, program)
        self._map_digests(self.p4info, program)
        self._map_controller_headers(self.p4info)

    def _map_actions(self, info: p4i.P4Info, program: Program) -> None:
        self.actions: dict[int, ActionInfo] = {}
        self.action_ids: dict[str, int] = {}
        for a in info.actions:
            params = [Field(p.id, p.name, p.bitwidth) for p in a.params]
            prog_action = _lookup(program.actions, a.preamble.name)
            if prog_action is None:
                raise _mismatch(f"action {a.preamble.name} not in the program")
            if [w for _, w in prog_action.params] != [p.bitwidth for p in params]:
                raise _mismatch(f"action {a.preamble.name}: parameters differ")
            act = ActionInfo(a.preamble.id, prog_action.name, params, {p.id: i for i, p in enumerate(params)})
            self.actions[act.id] = act
            self.action_ids[prog_action.name] = act.id

    def _map_tables(self, info: p4i.P4Info, program: Program) -> None:
        direct_counters = {c.preamble.id: c for c in info.direct_counters}
        direct_meters = {m.preamble.id for m in info.direct_meters}
        self.direct_meter_ids = direct_meters
        self.direct_counters: dict[int, int] = {c.preamble.id: c.direct_table_id for c in info.direct_counters}
        self.direct_counter_units = {c.preamble.id: c.spec.unit for c in info.direct_counters}
        self.tables: dict[int, TableInfo] = {}
        for t in info.tables:
            table = _lookup(program.tables, t.preamble.name)
            if table is None:
                raise _mismatch(f"table {t.preamble.name} not in the program")
            if t.implementation_id and table.profile is None:
                raise _mismatch(f"table {t.preamble.name} has no action profile in the program")
            fields = []
            for mf in t.match_fields:
                if mf.WhichOneof("match") != "match_type" or mf.match_type not in _MATCH_KINDS:
                    raise P4RuntimeError(SC.UNIMPLEMENTED, f"table {t.preamble.name}: match kind of {mf.name}")
                fields.append(Field(mf.id, mf.name, mf.bitwidth, _MATCH_KINDS[mf.match_type]))
            if [f.bitwidth for f in fields] != [k.bitwidth for k in table.keys]:
                raise _mismatch(f"table {t.preamble.name}: match fields differ")
            dc = next((r for r in t.direct_resource_ids if r in direct_counters), 0)
            dm = next((r for r in t.direct_resource_ids if r in direct_meters), 0)
            self.tables[t.preamble.id] = TableInfo(
                id=t.preamble.id,
                name=t.preamble.name,
                table=table,
                fields=fields,
                field_pos={f.id: i for i, f in enumerate(fields)},
                actions={r.id: r.scope for r in t.action_refs},
                const_default=bool(t.const_default_action_id),
                direct_counter=dc,
                direct_meter=dm,
                idle_timeout=t.idle_timeout_behavior == p4i.Table.NOTIFY_CONTROL,
                needs_priority=any(f.kind in ("ternary", "range", "optional") for f in fields),
                is_const=t.is_const_table,
                profile=t.implementation_id,
            )

    def _map_value_sets(self, info: p4i.P4Info, program: Program) -> None:
        self.value_sets: dict[int, ValueSetInfo] = {}
        for v in info.value_sets:
            vs = _lookup(program.value_sets, v.preamble.name)
            if vs is None:
                raise _mismatch(f"value set {v.preamble.name} not in the program")
            vfields = []
            for mf in v.match:
                if mf.WhichOneof("match") != "match_type" or mf.match_type != _MatchType.EXACT:
                    raise P4RuntimeError(SC.UNIMPLEMENTED, f"value set {v.preamble.name}: only exact matches")
                vfields.append(Field(mf.id, mf.name, mf.bitwidth, "exact"))
            if sum(f.bitwidth for f in vfields) != vs.bitwidth:
                raise _mismatch(f"value set {v.preamble.name}: width differs")
            self.value_sets[v.preamble.id] = ValueSetInfo(v.preamble.id, vs.name, vs, vfields)

    def _map_profiles(self, info: p4i.P4Info, program: Program) -> None:
        self.profiles: dict[int, ProfileInfo] = {}
        for ap in info.action_profiles:
            prof = _lookup(program.action_profiles, ap.preamble.name)
            if prof is None:
                raise _mismatch(f"action profile {ap.preamble.name} not in the program")
            if prof.with_selector != ap.with_selector:
                raise _mismatch(f"action profile {ap.preamble.name}: with_selector differs")
            self.profiles[ap.preamble.id] = ProfileInfo(ap.preamble.id, prof.name, prof, ap.max_group_size)

    def _map_arrays(self, info: p4i.P4Info, program: Program) -> None:
        """Counters, meters and registers."""
        self.counters: dict[int, ArrayInfo] = {}
        for c in info.counters:
            arr = _lookup(program.counters, c.preamble.name)
            if arr is None:
                raise _mismatch(f"counter {c.preamble.name} not in the program")
            self.counters[c.preamble.id] = ArrayInfo(c.preamble.id, c.preamble.name, arr.size, arr, unit=c.spec.unit)
        self.meters: dict[int, ArrayInfo] = {}
        for m in info.meters:
            arr = _lookup(program.meters, m.preamble.name)
            if arr is None:
                raise _mismatch(f"meter {m.preamble.name} not in the program")
            self.meters[m.preamble.id] = ArrayInfo(m.preamble.id, m.preamble.name, arr.size, arr)
        self.registers: dict[int, ArrayInfo] = {}
        for r in info.registers:
            arr = _lookup(program.registers, r.preamble.name)
            if arr is None:
                raise _mismatch(f"register {r.preamble.name} not in the program")
            width = _bitwidth(r.type_spec)
            if width is None:
                raise P4RuntimeError(SC.UNIMPLEMENTED, f"register {r.preamble.name}: only bit<W> cells")
            self.registers[r.preamble.id] = ArrayInfo(r.preamble.id, r.preamble.name, arr.size, arr, bitwidth=width)

    def _map_digests(self, info: p4i.P4Info, program: Program) -> None:
        self.digests: dict[int, DigestInfo] = {}
        self.digest_by_list: dict[str, int] = {}
        for d in info.digests:
            ll = _lookup(program.learn_lists, d.preamble.name)
            if ll is None:
                raise _mismatch(f"digest {d.preamble.name} not in the program")
            kind, widths = self._digest_layout(d)
            if widths != [w for _, w in ll.fields]:
                raise _mismatch(f"digest {d.preamble.name}: fields differ")
            self.digests[d.preamble.id] = DigestInfo(d.preamble.id, d.preamble.name, ll.name, kind, widths)
            self.digest_by_list[ll.name] = d.preamble.id

    def _map_controller_headers(self, info: p4i.P4Info) -> None:
        self.packet_in: ControllerHeader | None = None
        self.packet_out: ControllerHeader | None = None
        for h in info.controller_packet_metadata:
            fields = [Field(m.id, m.name, m.bitwidth) for m in h.metadata]
            hdr = ControllerHeader(fields, {f.id: i for i, f in enumerate(fields)}, sum(f.bitwidth for f in fields))
            if h.preamble.name == "packet_in":
                self.packet_in = hdr
            elif h.preamble.name == "packet_out":
                self.packet_out = hdr

    def _digest_layout(self, d: p4i.Digest) -> tuple[str, list[int]]:
        spec = d.type_spec
        kind = spec.WhichOneof("type_spec")
        if kind == "bitstring":
            members = [spec]
        elif kind == "tuple":
            members = list(spec.tuple.members)
        elif kind == "struct":
            st = self.p4info.type_info.structs.get(spec.struct.name)
            if st is None:
                raise P4RuntimeError(SC.INVALID_ARGUMENT, f"digest {d.preamble.name}: struct {spec.struct.name} not in P4Info")
            members = [m.type_spec for m in st.members]
        else:
            raise P4RuntimeError(SC.UNIMPLEMENTED, f"digest {d.preamble.name}: type {kind}")
        widths = []
        for m in members:
            w = _bitwidth(m) if m.WhichOneof("type_spec") == "bitstring" else None
            if w is None:
                raise P4RuntimeError(SC.UNIMPLEMENTED, f"digest {d.preamble.name}: only bit<W> members")
            widths.append(w)
        return kind, widths

    # -- lookups ------------------------------------------------------------------------
    def table(self, table_id: int) -> TableInfo:
        """The table with this P4Info id (INVALID_ARGUMENT if none)."""
        ti = self.tables.get(table_id)
        if ti is None:
            raise invalid_id()
        return ti

    # -- packet I/O ---------------------------------------------------------------------
    def packet_out_frame(self, pkt: p4r.PacketOut) -> bytes:
        """The frame for the switch's CPU port: packet_out header + payload."""
        hdr = self.packet_out
        if hdr is None:
            if pkt.metadata:
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "Unexpected metadata in PacketOut message")
            return bytes(pkt.payload)
        values = [0] * len(hdr.fields)
        for md in pkt.metadata:
            i = hdr.index.get(md.metadata_id)
            if i is None:
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "Unknown metadata id in PacketOut message")
            f = hdr.fields[i]
            values[i] = decode_bytes(md.value, f.bitwidth, f"packet_out.{f.name}")
        acc = 0
        for f, v in zip(hdr.fields, values, strict=True):
            acc = (acc << f.bitwidth) | v
        pad = hdr.nbytes * 8 - hdr.nbits
        return (acc << pad).to_bytes(hdr.nbytes, "big") + pkt.payload

    def packet_in_message(self, frame: bytes) -> p4r.PacketIn | None:
        """The PacketIn for a frame that left on the CPU port (None: shorter than the header)."""
        hdr = self.packet_in
        if hdr is None:
            return p4r.PacketIn(payload=frame)
        n = hdr.nbytes
        if len(frame) < n:
            return None
        acc = int.from_bytes(frame[:n], "big") >> (n * 8 - hdr.nbits)
        metadata = []
        for f in reversed(hdr.fields):
            metadata.append(p4r.PacketMetadata(metadata_id=f.id, value=encode_bytes(acc & ((1 << f.bitwidth) - 1))))
            acc >>= f.bitwidth
        metadata.reverse()
        return p4r.PacketIn(payload=frame[n:], metadata=metadata)
