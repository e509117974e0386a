"""P4Runtime v1 gRPC server of the embedded target.

It plays the part of the PI server inside BMv2's ``simple_switch_grpc`` (p4lang/PI,
``proto/server`` + ``proto/frontend``): same API version ("1.3.0"), same status codes,
and the same messages where clients match on them (finsy looks for "Election id already
exists" and "No forwarding pipeline config set for this device").

Behaviour, as in PI:

- One device, ``switch.device_id``. Arbitration per role (P4Runtime spec, "Client
  Arbitration"): among the streams of one role (``Role.name``; "" is the default role)
  the highest election id is primary; every stream of that role hears when its primary
  changes, a backup that joins or changes its id hears only about itself. Election ids
  are unique within a role. Roles carry no config (a ``Role.config`` is refused): every
  role may write every entity.
- Writes and pipeline changes only from a primary (beyond PI, which accepts them from
  anyone while no stream is open): a Write must name the role and election id of that
  role's primary on an open StreamChannel, else PERMISSION_DENIED. Pipeline changes
  (SetForwardingPipelineConfig) only from the default role's primary. Reads are open to
  every client. PacketOut from a role's primary; PacketIn and digests go to the primary
  of every role.
- Write runs CONTINUE_ON_ERROR only (other atomicities: UNIMPLEMENTED). When an update
  fails, the call ends with UNKNOWN and one ``p4.v1.Error`` per update (OK ones included)
  packed into the ``grpc-status-details-bin`` trailer.
- Unknown P4 ids: INVALID_ARGUMENT "Invalid P4 id". Bytestrings may be shorter or longer
  than the canonical form as long as the value fits the bit width; replies are canonical.
- Reads stop at the first entity that fails. A table read with an empty match returns
  every entry (table_id 0: every table); default entries only when asked for with
  ``is_default_action``. Counter, register and meter reads without index return every cell.
- PacketOut from the primary only: the ``packet_out`` controller header of the P4Info is
  built from the metadata (fields MSB first in P4Info order, missing ones zero, zero bits
  padding the end to a whole byte, as PI's ``PacketOutMutate``) and prepended to the
  payload. Frames the switch sends to its CPU port lose the ``packet_in`` header and go to
  the primary as PacketIn. A bad PacketOut is answered with a StreamError.
- Digests go out as DigestList only for digests configured with a DigestEntry; samples
  are batched by ``max_list_size``/``max_timeout_ns`` and, with ``ack_timeout_ns`` > 0,
  a sample still waiting for its ack is not sent again.

- Action profiles and selectors as PI over BMv2: members, groups with weights (a member
  gets one BMv2 handle per unit of weight, so a wildcard member read lists it once per
  handle, as PI does), table entries on a member or group, one-shot action sets (a
  hidden group per entry; a profile takes one programming mode until emptied). Refused
  deletes of members or groups still in use answer UNKNOWN, as BMv2's errors reach PI.
  Watch ports are accepted and ignored (ports are always up).

Beyond PI: registers can be read and written (MODIFY; no index = every cell), indirect
meters are configurable, parser value sets are written and read (ValueSetEntry MODIFY;
PI answers UNIMPLEMENTED; size and duplicate members checked as the P4Runtime spec
says), and RECONCILE_AND_COMMIT keeps table entries, counters, registers and PRE state
of objects whose names survive (not action profile members and groups).

Not implemented (UNIMPLEMENTED): direct meters, extern entries, atomic write modes.
Idle timeouts are stored and read back but no IdleTimeoutNotification is ever sent.
VERIFY_AND_SAVE keeps the new pipeline aside until COMMIT; until then Read/Write keep
using the running one.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import grpc
from finsy.proto import p4d, p4i, p4r, p4r_grpc, rpc_status
from google.protobuf import any_pb2

from targets.embedded import state
from targets.embedded.compiler import CompileError
from targets.embedded.state import StateError

if TYPE_CHECKING:
    from targets.embedded.compiler import Program
    from targets.embedded.switch import Switch

log = logging.getLogger("gradnet.p4runtime")

API_VERSION = "1.3.0"
MAX_CONNECTIONS = 16
ERROR_SPACE = "ALL-sswitch-p4org"
FIRST_RESERVED_GROUP_ID = 1 << 15  # PI keeps groups above this for clone sessions
MAX_CLONE_SESSION_ID = 32768
READ_CHUNK = 1000  # entities per ReadResponse, keeps messages far below gRPC's 4 MB
PACKET_IN_BACKLOG = 10000  # per stream; past it packet-ins are dropped (and counted)
MAX_MESSAGE = 256 * 1024 * 1024

SC = grpc.StatusCode
_SetAction = p4r.SetForwardingPipelineConfigRequest
_GetType = p4r.GetForwardingPipelineConfigRequest
_MatchType = p4i.MatchField
_MATCH_KINDS = {
    _MatchType.EXACT: "exact",
    _MatchType.LPM: "lpm",
    _MatchType.TERNARY: "ternary",
    _MatchType.RANGE: "range",
    _MatchType.OPTIONAL: "optional",
}
_PACKETS_UNITS = (p4i.CounterSpec.PACKETS, p4i.CounterSpec.BOTH, p4i.CounterSpec.UNSPECIFIED)
_BYTES_UNITS = (p4i.CounterSpec.BYTES, p4i.CounterSpec.BOTH, p4i.CounterSpec.UNSPECIFIED)


class P4RuntimeError(Exception):
    """A request that fails with a gRPC status ``code``."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @classmethod
    def from_state(cls, e: StateError) -> P4RuntimeError:
        """Map a state-layer error (status given by name) to a P4RuntimeError."""
        return cls(getattr(SC, e.code, SC.UNKNOWN), str(e))


def _invalid_id() -> P4RuntimeError:
    return P4RuntimeError(SC.INVALID_ARGUMENT, "Invalid P4 id")


_E = TypeVar("_E")


def _action_params(act: _Action, action: p4r.Action) -> tuple[int, ...]:
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


def _all_or_one(entities: Mapping[int, _E], entity_id: int) -> list[_E]:
    """Every entity (id 0: P4Runtime's wildcard read) or the one with ``entity_id``."""
    if entity_id == 0:
        return list(entities.values())
    e = entities.get(entity_id)
    if e is None:
        raise _invalid_id()
    return [e]


# -- bytestrings ------------------------------------------------------------------------
def decode_bytes(value: bytes, bitwidth: int, what: str) -> int:
    """A P4Runtime bytestring as an int; OUT_OF_RANGE if it is empty or needs more than
    ``bitwidth`` bits (spec, "Bytestrings"; BMv2's PI answers INVALID_ARGUMENT for a
    value too wide and takes an empty string as 0: bench/p4rt_fuzz.py ``BMV2_DIFFERS``).

    A string padded with leading zero bytes is accepted, as the spec requires.
    """
    if not value:
        raise P4RuntimeError(SC.OUT_OF_RANGE, f"{what}: empty bytestring")
    v = int.from_bytes(value, "big")
    if v >> bitwidth:
        raise P4RuntimeError(SC.OUT_OF_RANGE, f"{what}: bytestring provided does not fit within {bitwidth} bits")
    return v


def encode_bytes(value: int) -> bytes:
    """The canonical P4Runtime bytestring of ``value`` (no leading zero bytes; 0 -> b'\\0')."""
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def _u128(msg: p4r.Uint128) -> int:
    return (msg.high << 64) | msg.low


def _to_u128(v: int) -> p4r.Uint128:
    return p4r.Uint128(high=v >> 64, low=v & ((1 << 64) - 1))


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


# -- the pipeline: P4Info <-> compiled program ------------------------------------------
@dataclass(slots=True)
class _Field:
    id: int
    name: str
    bitwidth: int
    kind: str = ""


@dataclass(slots=True)
class _Action:
    id: int
    name: str
    params: list[_Field]
    param_pos: dict[int, int]


@dataclass(slots=True)
class _TableInfo:
    id: int
    name: str
    table: state.Table
    fields: list[_Field]
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
class _ProfileInfo:
    id: int
    name: str
    profile: state.ActionProfile
    max_group_size: int


@dataclass(slots=True)
class _ValueSetInfo:
    id: int
    name: str
    value_set: state.ValueSet
    fields: list[_Field]


@dataclass(slots=True)
class _ArrayInfo:
    id: int
    name: str
    size: int
    array: Any
    unit: int = 0  # counters: CounterSpec.Unit
    bitwidth: int = 0  # registers


@dataclass(slots=True)
class _DigestInfo:
    id: int
    name: str
    learn_list: str
    kind: str  # "struct", "tuple" or "bitstring"
    widths: list[int]


@dataclass(slots=True)
class _ControllerHeader:
    fields: list[_Field]
    index: dict[int, int]
    nbits: int

    @property
    def nbytes(self) -> int:
        return (self.nbits + 7) // 8


class Pipeline:
    """A forwarding pipeline config checked against its compiled program, with id maps."""

    def __init__(self, config: p4r.ForwardingPipelineConfig, program: Program) -> None:
        self.p4info = p4i.P4Info()
        self.p4info.CopyFrom(config.p4info)
        self.device_config = bytes(config.p4_device_config)
        self.cookie: int | None = config.cookie.cookie if config.HasField("cookie") else None
        self.program = program
        info = self.p4info

        def bad(msg: str) -> P4RuntimeError:
            return P4RuntimeError(SC.INVALID_ARGUMENT, f"P4Info does not match the device config: {msg}")

        self.actions: dict[int, _Action] = {}
        self.action_ids: dict[str, int] = {}
        for a in info.actions:
            params = [_Field(p.id, p.name, p.bitwidth) for p in a.params]
            prog_action = _lookup(program.actions, a.preamble.name)
            if prog_action is None:
                raise bad(f"action {a.preamble.name} not in the program")
            if [w for _, w in prog_action.params] != [p.bitwidth for p in params]:
                raise bad(f"action {a.preamble.name}: parameters differ")
            act = _Action(a.preamble.id, prog_action.name, params, {p.id: i for i, p in enumerate(params)})
            self.actions[act.id] = act
            self.action_ids[prog_action.name] = act.id

        direct_counters = {c.preamble.id: c for c in info.direct_counters}
        direct_meters = {m.preamble.id for m in info.direct_meters}
        self.direct_counters: dict[int, int] = {c.preamble.id: c.direct_table_id for c in info.direct_counters}
        self.direct_counter_units = {c.preamble.id: c.spec.unit for c in info.direct_counters}
        self.tables: dict[int, _TableInfo] = {}
        for t in info.tables:
            table = _lookup(program.tables, t.preamble.name)
            if table is None:
                raise bad(f"table {t.preamble.name} not in the program")
            if t.implementation_id and table.profile is None:
                raise bad(f"table {t.preamble.name} has no action profile in the program")
            fields = []
            for mf in t.match_fields:
                if mf.WhichOneof("match") != "match_type" or mf.match_type not in _MATCH_KINDS:
                    raise P4RuntimeError(SC.UNIMPLEMENTED, f"table {t.preamble.name}: match kind of {mf.name}")
                fields.append(_Field(mf.id, mf.name, mf.bitwidth, _MATCH_KINDS[mf.match_type]))
            if [f.bitwidth for f in fields] != [k.bitwidth for k in table.keys]:
                raise bad(f"table {t.preamble.name}: match fields differ")
            dc = next((r for r in t.direct_resource_ids if r in direct_counters), 0)
            dm = next((r for r in t.direct_resource_ids if r in direct_meters), 0)
            self.tables[t.preamble.id] = _TableInfo(
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

        self.value_sets: dict[int, _ValueSetInfo] = {}
        for v in info.value_sets:
            vs = _lookup(program.value_sets, v.preamble.name)
            if vs is None:
                raise bad(f"value set {v.preamble.name} not in the program")
            vfields = []
            for mf in v.match:
                if mf.WhichOneof("match") != "match_type" or mf.match_type != _MatchType.EXACT:
                    raise P4RuntimeError(SC.UNIMPLEMENTED, f"value set {v.preamble.name}: only exact matches")
                vfields.append(_Field(mf.id, mf.name, mf.bitwidth, "exact"))
            if sum(f.bitwidth for f in vfields) != vs.bitwidth:
                raise bad(f"value set {v.preamble.name}: width differs")
            self.value_sets[v.preamble.id] = _ValueSetInfo(v.preamble.id, vs.name, vs, vfields)

        self.profiles: dict[int, _ProfileInfo] = {}
        for ap in info.action_profiles:
            prof = _lookup(program.action_profiles, ap.preamble.name)
            if prof is None:
                raise bad(f"action profile {ap.preamble.name} not in the program")
            if prof.with_selector != ap.with_selector:
                raise bad(f"action profile {ap.preamble.name}: with_selector differs")
            self.profiles[ap.preamble.id] = _ProfileInfo(ap.preamble.id, prof.name, prof, ap.max_group_size)

        self.counters: dict[int, _ArrayInfo] = {}
        for c in info.counters:
            arr = _lookup(program.counters, c.preamble.name)
            if arr is None:
                raise bad(f"counter {c.preamble.name} not in the program")
            self.counters[c.preamble.id] = _ArrayInfo(c.preamble.id, c.preamble.name, arr.size, arr, unit=c.spec.unit)
        self.meters: dict[int, _ArrayInfo] = {}
        for m in info.meters:
            arr = _lookup(program.meters, m.preamble.name)
            if arr is None:
                raise bad(f"meter {m.preamble.name} not in the program")
            self.meters[m.preamble.id] = _ArrayInfo(m.preamble.id, m.preamble.name, arr.size, arr)
        self.direct_meter_ids = direct_meters
        self.registers: dict[int, _ArrayInfo] = {}
        for r in info.registers:
            arr = _lookup(program.registers, r.preamble.name)
            if arr is None:
                raise bad(f"register {r.preamble.name} not in the program")
            width = _bitwidth(r.type_spec)
            if width is None:
                raise P4RuntimeError(SC.UNIMPLEMENTED, f"register {r.preamble.name}: only bit<W> cells")
            self.registers[r.preamble.id] = _ArrayInfo(r.preamble.id, r.preamble.name, arr.size, arr, bitwidth=width)

        self.digests: dict[int, _DigestInfo] = {}
        self.digest_by_list: dict[str, int] = {}
        for d in info.digests:
            ll = _lookup(program.learn_lists, d.preamble.name)
            if ll is None:
                raise bad(f"digest {d.preamble.name} not in the program")
            kind, widths = self._digest_layout(d)
            if widths != [w for _, w in ll.fields]:
                raise bad(f"digest {d.preamble.name}: fields differ")
            self.digests[d.preamble.id] = _DigestInfo(d.preamble.id, d.preamble.name, ll.name, kind, widths)
            self.digest_by_list[ll.name] = d.preamble.id

        self.packet_in: _ControllerHeader | None = None
        self.packet_out: _ControllerHeader | None = None
        for h in info.controller_packet_metadata:
            fields = [_Field(m.id, m.name, m.bitwidth) for m in h.metadata]
            hdr = _ControllerHeader(fields, {f.id: i for i, f in enumerate(fields)}, sum(f.bitwidth for f in fields))
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
    def table(self, table_id: int) -> _TableInfo:
        """The table with this P4Info id (INVALID_ARGUMENT if none)."""
        ti = self.tables.get(table_id)
        if ti is None:
            raise _invalid_id()
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


# -- streams ----------------------------------------------------------------------------
_EOF = object()


@dataclass(eq=False)
class _Connection:
    """One StreamChannel: its election id and the queue of messages to send on it."""

    election_id: int = -1
    device_id: int | None = None
    role: str = ""
    out: queue.Queue = field(default_factory=queue.Queue)
    packet_in_drops: int = 0

    def send(self, item: Any) -> None:
        self.out.put(item)


@dataclass
class _Abort:
    error: P4RuntimeError


@dataclass
class _DigestState:
    config: p4r.DigestEntry.Config
    buffer: list[tuple[int, ...]] = field(default_factory=list)
    pending: dict[int, tuple[float, list[tuple[int, ...]]]] = field(default_factory=dict)
    cache: set[tuple[int, ...]] = field(default_factory=set)
    next_list_id: int = 1
    timer: threading.Timer | None = None


class _Status:
    """A ``grpc.Status`` for ``abort_with_status`` (grpcio-status is not a dependency)."""

    def __init__(self, code: grpc.StatusCode, message: str, details: list[any_pb2.Any] | None = None) -> None:
        status = rpc_status.Status(code=code.value[0], message=message, details=details or [])
        self.code = code
        self.details = message
        self.trailing_metadata = (("grpc-status-details-bin", status.SerializeToString()),)


def _abort(context: grpc.ServicerContext, e: P4RuntimeError, details: list[any_pb2.Any] | None = None) -> None:
    context.abort_with_status(_Status(e.code, e.message, details))


# -- the service ------------------------------------------------------------------------
class P4RuntimeService(p4r_grpc.P4RuntimeServicer):
    """The P4Runtime servicer over one embedded ``Switch``."""

    def __init__(self, switch: Switch) -> None:
        self.switch = switch
        self.pipeline: Pipeline | None = None
        self._saved: Pipeline | None = None
        self._lock = threading.RLock()  # pipeline changes, writes and reads
        self._conn_lock = threading.RLock()
        self._conns: list[_Connection] = []
        self._digests: dict[int, _DigestState] = {}
        self._digest_lock = threading.Lock()
        # PRE replicas remember whether the client wrote the port as bytes (1.4+) or as
        # egress_port, and reads answer in the same form, as PI does.
        self._port_forms: dict[tuple[str, int], list[int]] = {}
        self.packet_in_drops = 0
        self.digest_drops = 0

    # -- helpers ------------------------------------------------------------------------
    def _check_device(self, device_id: int) -> None:
        if device_id != self.switch.device_id:
            raise P4RuntimeError(SC.NOT_FOUND, f"Unknown device id {device_id}")

    def _primary(self, role: str = "") -> _Connection | None:
        return max((c for c in self._conns if c.role == role), key=lambda c: c.election_id, default=None)

    def _primaries(self) -> list[_Connection]:
        """The primary stream of every role that has one."""
        return [p for p in (self._primary(r) for r in {c.role for c in self._conns}) if p is not None]

    def _check_primary(self, request: Any, pipeline: bool = False) -> None:
        """A Write or SetForwardingPipelineConfig must come from the primary of its role
        (role and election id of an open stream); a pipeline change from the default
        role's."""
        role = request.role
        with self._conn_lock:
            primary = self._primary(role)
            if primary is None:
                raise P4RuntimeError(SC.PERMISSION_DENIED,
                                     f"Not primary: no StreamChannel open for role {role!r} "
                                     "(open one with a MasterArbitrationUpdate first)")
            if not request.HasField("election_id") or _u128(request.election_id) != primary.election_id:
                raise P4RuntimeError(SC.PERMISSION_DENIED, "Not primary")
        if pipeline and role:
            raise P4RuntimeError(SC.PERMISSION_DENIED,
                                 f"role {role!r} may not change the pipeline (only the default role)")

    def _need_pipeline(self) -> Pipeline:
        pl = self.pipeline
        if pl is None:
            raise P4RuntimeError(SC.FAILED_PRECONDITION, "No forwarding pipeline config set for this device")
        return pl

    # -- unary RPCs ---------------------------------------------------------------------
    def Capabilities(self, request: p4r.CapabilitiesRequest, context: grpc.ServicerContext) -> p4r.CapabilitiesResponse:
        """The P4Runtime API version this server implements."""
        return p4r.CapabilitiesResponse(p4runtime_api_version=API_VERSION)

    def SetForwardingPipelineConfig(
        self, request: p4r.SetForwardingPipelineConfigRequest, context: grpc.ServicerContext
    ) -> p4r.SetForwardingPipelineConfigResponse:
        """Verify, save and/or commit a P4Info + BMv2 JSON pipeline."""
        try:
            self._check_device(request.device_id)
            self._check_primary(request, pipeline=True)
            action = request.action
            if action not in (_SetAction.VERIFY, _SetAction.VERIFY_AND_SAVE, _SetAction.VERIFY_AND_COMMIT,
                              _SetAction.COMMIT, _SetAction.RECONCILE_AND_COMMIT):
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "Invalid SetForwardingPipeline action")
            with self._lock:
                if action == _SetAction.COMMIT:
                    if self._saved is None:
                        raise P4RuntimeError(SC.FAILED_PRECONDITION, "No saved forwarding pipeline config to commit")
                    pl, self._saved = self._saved, None
                    self._install(pl, reconcile=False)
                    return p4r.SetForwardingPipelineConfigResponse()
                pl = self._verify(request.config)
                if action == _SetAction.VERIFY_AND_SAVE:
                    self._saved = pl
                elif action != _SetAction.VERIFY:
                    self._install(pl, reconcile=action == _SetAction.RECONCILE_AND_COMMIT)
        except P4RuntimeError as e:
            _abort(context, e)
        return p4r.SetForwardingPipelineConfigResponse()

    def _verify(self, config: p4r.ForwardingPipelineConfig) -> Pipeline:
        if not config.HasField("p4info"):
            raise P4RuntimeError(SC.INVALID_ARGUMENT, "Missing P4Info in forwarding pipeline config")
        if not config.p4_device_config:
            raise P4RuntimeError(SC.INVALID_ARGUMENT, "Missing p4_device_config (BMv2 JSON) in forwarding pipeline config")
        try:
            program = self.switch.load_program(config.p4_device_config)
        except CompileError as e:
            raise P4RuntimeError(SC.INVALID_ARGUMENT, f"Invalid device config: {e}") from e
        except Exception as e:  # a compiler bug: report it, keep serving
            log.exception("compiling the device config failed")
            raise P4RuntimeError(SC.INTERNAL, f"Error when compiling the device config: {type(e).__name__}: {e}") from e
        return Pipeline(config, program)

    def _install(self, pl: Pipeline, reconcile: bool) -> None:
        old = self.pipeline
        pre = self.switch.pre
        keep_pre = None
        if reconcile and old is not None:
            _carry_state(old.program, pl.program)
            keep_pre = (dict(pre.groups), dict(pre.clone_sessions), dict(self._port_forms))
        self.switch.install_program(pl.program)
        if keep_pre is not None:
            pre.groups.update(keep_pre[0])
            pre.clone_sessions.update(keep_pre[1])
            self._port_forms = keep_pre[2]
        else:
            pre.groups.clear()
            pre.clone_sessions.clear()
            self._port_forms.clear()
        with self._digest_lock:
            for st in self._digests.values():
                if st.timer is not None:
                    st.timer.cancel()
            self._digests.clear()
        self.pipeline = pl
        log.info("device %d: pipeline committed (cookie %s)", self.switch.device_id, pl.cookie)

    def GetForwardingPipelineConfig(
        self, request: p4r.GetForwardingPipelineConfigRequest, context: grpc.ServicerContext
    ) -> p4r.GetForwardingPipelineConfigResponse:
        """The running pipeline: P4Info and/or device config, always with its cookie."""
        try:
            self._check_device(request.device_id)
            pl = self._need_pipeline()
            rt = request.response_type
            if rt not in (_GetType.ALL, _GetType.COOKIE_ONLY, _GetType.P4INFO_AND_COOKIE,
                          _GetType.DEVICE_CONFIG_AND_COOKIE):
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "Invalid response_type in GetForwardingPipelineConfigRequest")
        except P4RuntimeError as e:
            _abort(context, e)
        config = p4r.ForwardingPipelineConfig()
        if rt in (_GetType.ALL, _GetType.P4INFO_AND_COOKIE):
            config.p4info.CopyFrom(pl.p4info)
        if rt in (_GetType.ALL, _GetType.DEVICE_CONFIG_AND_COOKIE):
            config.p4_device_config = pl.device_config
        if pl.cookie is not None:
            config.cookie.cookie = pl.cookie
        return p4r.GetForwardingPipelineConfigResponse(config=config)

    # -- Write ----------------------------------------------------------------------------
    def Write(self, request: p4r.WriteRequest, context: grpc.ServicerContext) -> p4r.WriteResponse:
        """Apply the updates in order; report per-update errors as PI does."""
        try:
            self._check_device(request.device_id)
            self._check_primary(request)
            pl = self._need_pipeline()
            if request.atomicity != p4r.WriteRequest.CONTINUE_ON_ERROR:
                raise P4RuntimeError(SC.UNIMPLEMENTED, "Support for atomic write modes has not been implemented yet")
        except P4RuntimeError as e:
            _abort(context, e)
        errors: list[P4RuntimeError | None] = []
        with self._lock:
            for update in request.updates:
                try:
                    self._write_update(pl, update)
                    errors.append(None)
                except P4RuntimeError as e:
                    errors.append(e)
                except StateError as e:
                    errors.append(P4RuntimeError.from_state(e))
                except Exception as e:  # a bug here must not kill the server
                    log.exception("Write: internal error")
                    errors.append(P4RuntimeError(SC.INTERNAL, f"{type(e).__name__}: {e}"))
        failed = [e for e in errors if e is not None]
        if failed:
            details = []
            for e in errors:
                err = p4r.Error()
                if e is not None:
                    err.canonical_code = e.code.value[0]
                    err.message = e.message
                    err.space = ERROR_SPACE
                packed = any_pb2.Any()
                packed.Pack(err)
                details.append(packed)
            msg = f"{len(failed)} of {len(errors)} updates failed: {failed[0].code.name}: {failed[0].message}"
            _abort(context, P4RuntimeError(SC.UNKNOWN, msg), details)
        return p4r.WriteResponse()

    def _write_update(self, pl: Pipeline, update: p4r.Update) -> None:
        kind = update.entity.WhichOneof("entity")
        ent = getattr(update.entity, kind) if kind else None
        if kind == "table_entry":
            self._write_table(pl, update.type, ent)
        elif kind == "packet_replication_engine_entry":
            self._write_pre(update.type, ent)
        elif kind == "counter_entry":
            self._write_counter(pl, update.type, ent)
        elif kind == "direct_counter_entry":
            self._write_direct_counter(pl, update.type, ent)
        elif kind == "register_entry":
            self._write_register(pl, update.type, ent)
        elif kind == "meter_entry":
            self._write_meter(pl, update.type, ent)
        elif kind == "direct_meter_entry":
            self._write_direct_meter(pl, update.type, ent)
        elif kind == "digest_entry":
            self._write_digest(pl, update.type, ent)
        elif kind == "value_set_entry":
            self._write_value_set(pl, update.type, ent)
        elif kind == "action_profile_member":
            self._write_profile_member(pl, update.type, ent)
        elif kind == "action_profile_group":
            self._write_profile_group(pl, update.type, ent)
        elif kind is None:
            raise P4RuntimeError(SC.UNKNOWN, "Incorrect entity type")
        else:
            raise P4RuntimeError(SC.UNIMPLEMENTED, f"{kind} writes are not supported")

    @staticmethod
    def _check_update_type(t: int, *allowed: int) -> None:
        if t == p4r.Update.UNSPECIFIED:
            raise P4RuntimeError(SC.INVALID_ARGUMENT, "Update type is not set")
        if t not in (p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE):
            raise P4RuntimeError(SC.INVALID_ARGUMENT, "Invalid update type")
        if t not in allowed:
            raise P4RuntimeError(SC.INVALID_ARGUMENT, f"{p4r.Update.Type.Name(t)} update type not supported here")

    # -- tables ---------------------------------------------------------------------------
    def _decode_key(self, ti: _TableInfo, te: p4r.TableEntry) -> tuple[tuple, int]:
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

    def _decode_action(self, pl: Pipeline, ti: _TableInfo, te: p4r.TableEntry) -> state.ActionCall:
        kind = te.action.WhichOneof("type")
        if kind != "action":
            raise P4RuntimeError(SC.INVALID_ARGUMENT, f"Cannot provide indirect action for direct table {ti.id}")
        action = te.action.action
        act = pl.actions.get(action.action_id)
        if act is None:
            raise _invalid_id()
        scope = ti.actions.get(act.id)
        if scope is None:
            raise P4RuntimeError(SC.INVALID_ARGUMENT, "Invalid action for table")
        if scope == p4i.ActionRef.TABLE_ONLY and te.is_default_action:
            raise P4RuntimeError(SC.PERMISSION_DENIED, "Cannot use TABLE_ONLY action as default action")
        if scope == p4i.ActionRef.DEFAULT_ONLY and not te.is_default_action:
            raise P4RuntimeError(SC.PERMISSION_DENIED, "Cannot use DEFAULT_ONLY action in table entry")
        try:
            return pl.program.action_call(ti.table.name, act.name, _action_params(act, action))
        except StateError as e:
            raise P4RuntimeError.from_state(e) from e

    @staticmethod
    def _check_entry_extras(ti: _TableInfo, te: p4r.TableEntry) -> None:
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
                entry.meter_config = _meter_config(te.meter_config)
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
                return
            if not te.HasField("action"):
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "'action' field must be set for non-default entries")
            call = self._decode_action(pl, ti, te)
            self._check_entry_extras(ti, te)
            entry = table.modify(key, prio, call)
            entry.metadata = bytes(te.metadata)
            entry.idle_timeout_ns = te.idle_timeout_ns
            if te.HasField("meter_config"):
                entry.meter_config, entry.meter = _meter_config(te.meter_config), None
            if te.HasField("counter_data"):
                entry.packets, entry.bytes = te.counter_data.packet_count, te.counter_data.byte_count
        else:
            if te.is_default_action:
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "Cannot use DELETE for default entry")
            key, prio = self._decode_key(ti, te)
            table.delete(key, prio)

    # -- parser value sets (beyond PI, which answers UNIMPLEMENTED) -----------------------
    def _write_value_set(self, pl: Pipeline, t: int, ve: p4r.ValueSetEntry) -> None:
        vi = pl.value_sets.get(ve.value_set_id)
        if vi is None:
            raise _invalid_id()
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
        infos = _all_or_one(pl.value_sets, ve.value_set_id)
        for vi in infos:
            entry = p4r.ValueSetEntry(value_set_id=vi.id)
            for m in vi.value_set.members:
                member = entry.members.add()
                for f, v in zip(vi.fields, m, strict=True):
                    member.match.add(field_id=f.id, exact=p4r.FieldMatch.Exact(value=encode_bytes(v)))
            out.append(p4r.Entity(value_set_entry=entry))

    # -- action profiles ------------------------------------------------------------------
    def _profile(self, pl: Pipeline, profile_id: int) -> _ProfileInfo:
        pi = pl.profiles.get(profile_id)
        if pi is None:
            raise _invalid_id()
        return pi

    def _profile_action(self, pl: Pipeline, pi: _ProfileInfo, action: p4r.Action) -> state.ActionCall:
        """An action of a member / one-shot action set, checked as PI does."""
        act = pl.actions.get(action.action_id)
        if act is None:
            raise _invalid_id()
        return pl.program.profile_action_call(pi.name, act.name, _action_params(act, action))

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

    def _decode_indirect(self, pl: Pipeline, ti: _TableInfo, te: p4r.TableEntry) -> state.IndirectRef:
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
            ref = state.IndirectRef(group=ap.add_oneshot(actions))
        else:
            ap.use_mode("manual")
            if kind == "action_profile_member_id":
                ref = state.IndirectRef(member=ap.member(te.action.action_profile_member_id))
            elif kind == "action_profile_group_id":
                ref = state.IndirectRef(group=ap.groups.get(te.action.action_profile_group_id))
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
    def _hold(ref: state.IndirectRef, n: int) -> None:
        target = ref.member if ref.member is not None else ref.group
        if target is not None:
            target.refs += n

    @staticmethod
    def _release(ap: state.ActionProfile, ref: state.IndirectRef) -> None:
        """Drop the hidden group of a one-shot action set."""
        if ref.group is not None and ref.group.oneshot is not None:
            ap.delete_oneshot(ref.group)

    def _write_indirect_table(self, pl: Pipeline, ti: _TableInfo, t: int, te: p4r.TableEntry) -> None:
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

    def _encode_indirect(self, ref: state.IndirectRef) -> p4r.TableAction:
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

    def _encode_action(self, pl: Pipeline, call: state.ActionCall) -> p4r.TableAction | None:
        aid = pl.action_ids.get(call.name)
        if aid is None:
            return None
        act = pl.actions[aid]
        params = [p4r.Action.Param(param_id=f.id, value=encode_bytes(v))
                  for f, v in zip(act.params, call.params, strict=True)]
        return p4r.TableAction(action=p4r.Action(action_id=aid, params=params))

    def _encode_entry(self, pl: Pipeline, ti: _TableInfo, entry: state.TableEntry, counters: bool,
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
        if isinstance(entry.action, state.IndirectRef):
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
            te.meter_config.CopyFrom(_meter_config_msg(entry.meter_config))
        return te

    def _encode_default(self, pl: Pipeline, ti: _TableInfo, counters: bool) -> p4r.TableEntry:
        te = p4r.TableEntry(table_id=ti.id, is_default_action=True)
        action = self._encode_action(pl, ti.table.default)
        if action is not None:
            te.action.CopyFrom(action)
        if counters and ti.direct_counter:
            te.counter_data.CopyFrom(self._counter_data(pl.direct_counter_units[ti.direct_counter],
                                                        ti.table.default_packets, ti.table.default_bytes))
        return te

    def _select_entries(self, ti: _TableInfo, te: p4r.TableEntry) -> list[state.TableEntry]:
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
            if te.is_default_action:
                out.append(p4r.Entity(table_entry=self._encode_default(pl, ti, counters)))
                continue
            if te.HasField("time_since_last_hit") and not ti.idle_timeout:
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "Do not set time_since_last_hit for a ReadRequest if the "
                                     "table does not support idle timeout; yes, that includes wildcard reads")
            for entry in self._select_entries(ti, te):
                out.append(p4r.Entity(table_entry=self._encode_entry(pl, ti, entry, counters, meters)))

    # -- counters -------------------------------------------------------------------------
    @staticmethod
    def _counter_data(unit: int, packets: int, nbytes: int) -> p4r.CounterData:
        data = p4r.CounterData()
        if unit in _PACKETS_UNITS:
            data.packet_count = packets
        if unit in _BYTES_UNITS:
            data.byte_count = nbytes
        return data

    @staticmethod
    def _index(entry: Any) -> int | None:
        if not entry.HasField("index"):
            return None
        if entry.index.index < 0:
            raise P4RuntimeError(SC.INVALID_ARGUMENT, "A negative number is not a valid index value")
        return entry.index.index

    def _write_counter(self, pl: Pipeline, t: int, ce: p4r.CounterEntry) -> None:
        ci = pl.counters.get(ce.counter_id)
        if ci is None:
            raise _invalid_id()
        index = self._index(ce)
        if index is None:
            raise P4RuntimeError(SC.UNIMPLEMENTED, "Wildcard write is not supported for indirect counters yet")
        self._check_update_type(t, p4r.Update.MODIFY, p4r.Update.DELETE)
        packets, nbytes = ci.array.read(index)
        if t == p4r.Update.DELETE:  # PI resets the cell
            packets = nbytes = 0
        else:
            if ci.unit in _PACKETS_UNITS:
                packets = ce.data.packet_count
            if ci.unit in _BYTES_UNITS:
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
                raise _invalid_id()
            infos = [ci]
        index = self._index(ce)
        for ci in infos:
            indexes = range(ci.size) if index is None else [index]
            for i in indexes:
                packets, nbytes = ci.array.read(i)
                out.append(p4r.Entity(counter_entry=p4r.CounterEntry(
                    counter_id=ci.id, index=p4r.Index(index=i), data=self._counter_data(ci.unit, packets, nbytes))))

    def _direct_counter_table(self, pl: Pipeline, dce: p4r.DirectCounterEntry) -> _TableInfo:
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
            if unit in _PACKETS_UNITS:
                packets = dce.data.packet_count
            if unit in _BYTES_UNITS:
                nbytes = dce.data.byte_count
        if te.is_default_action:
            ti.table.default_packets, ti.table.default_bytes = packets, nbytes
        else:
            entry.packets, entry.bytes = packets, nbytes

    def _read_direct_counter(self, pl: Pipeline, dce: p4r.DirectCounterEntry, out: list[p4r.Entity]) -> None:
        ti = self._direct_counter_table(pl, dce)
        te = dce.table_entry
        unit = pl.direct_counter_units[ti.direct_counter]
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

    # -- registers ------------------------------------------------------------------------
    def _write_register(self, pl: Pipeline, t: int, re: p4r.RegisterEntry) -> None:
        ri = pl.registers.get(re.register_id)
        if ri is None:
            raise _invalid_id()
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
        infos = _all_or_one(pl.registers, re.register_id)
        index = self._index(re)
        for ri in infos:
            indexes = range(ri.size) if index is None else [index]
            for i in indexes:
                out.append(p4r.Entity(register_entry=p4r.RegisterEntry(
                    register_id=ri.id, index=p4r.Index(index=i),
                    data=p4d.P4Data(bitstring=encode_bytes(ri.array.read(i))))))

    # -- meters ---------------------------------------------------------------------------
    def _write_meter(self, pl: Pipeline, t: int, me: p4r.MeterEntry) -> None:
        mi = pl.meters.get(me.meter_id)
        if mi is None:
            raise _invalid_id()
        self._check_update_type(t, p4r.Update.MODIFY)
        index = self._index(me)
        indexes = range(mi.size) if index is None else [index]
        if not me.HasField("config"):
            for i in indexes:
                if not 0 <= i < mi.size:
                    raise P4RuntimeError(SC.OUT_OF_RANGE, f"meter {mi.name}: index {i} out of range")
                mi.array.clear_config(i)  # unconfigured: every packet is green
            return
        cfg = _meter_config(me.config)
        for i in indexes:
            if cfg is None:
                mi.array.clear_config(i)
            else:
                mi.array.set_config(i, *cfg)

    def _read_meter(self, pl: Pipeline, me: p4r.MeterEntry, out: list[p4r.Entity]) -> None:
        infos = _all_or_one(pl.meters, me.meter_id)
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

    def _direct_meter_entry(self, pl: Pipeline, dme: p4r.DirectMeterEntry, reading: bool) -> _TableInfo:
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
        entry.meter_config = _meter_config(dme.config) if dme.HasField("config") else None
        entry.meter = None

    def _read_direct_meter(self, pl: Pipeline, dme: p4r.DirectMeterEntry, out: list[p4r.Entity]) -> None:
        ti = self._direct_meter_entry(pl, dme, reading=True)
        for entry in self._select_entries(ti, dme.table_entry):
            tentry = self._encode_entry(pl, ti, entry, counters=False)
            tentry.ClearField("action")
            ent = p4r.DirectMeterEntry(table_entry=tentry)
            if entry.meter_config is not None:
                ent.config.CopyFrom(_meter_config_msg(entry.meter_config))
            out.append(p4r.Entity(direct_meter_entry=ent))

    # -- PRE ------------------------------------------------------------------------------
    @staticmethod
    def _decode_replicas(replicas: Any) -> tuple[list[state.Replica], list[int]]:
        out: list[state.Replica] = []
        forms: list[int] = []  # 0: egress_port, n > 0: port as n bytes
        seen = set()
        for r in replicas:
            kind = r.WhichOneof("port_kind")
            if kind == "egress_port":
                port, form = r.egress_port, 0
            elif kind == "port":
                if not r.port:
                    raise P4RuntimeError(SC.INVALID_ARGUMENT, "Port must not be the empty string")
                if len(r.port) > 4:
                    raise P4RuntimeError(SC.UNIMPLEMENTED,
                                         f"Got port of {len(r.port)} bytes, but only 4 bytes are supported")
                port, form = int.from_bytes(r.port, "big"), len(r.port)
            else:
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "Missing port in multicast group replica")
            if (port, r.instance) in seen:
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "Duplicate replica in multicast group")
            seen.add((port, r.instance))
            out.append(state.Replica(port, r.instance))
            forms.append(form)
        return out, forms

    def _encode_replicas(self, kind: str, ident: int, replicas: list[state.Replica]) -> list[p4r.Replica]:
        forms = self._port_forms.get((kind, ident), [])
        out = []
        for i, r in enumerate(replicas):
            form = forms[i] if i < len(forms) else 0
            if form:
                out.append(p4r.Replica(port=r.port.to_bytes(form, "big"), instance=r.rid))
            else:
                out.append(p4r.Replica(egress_port=r.port, instance=r.rid))
        return out

    def _write_pre(self, t: int, pe: p4r.PacketReplicationEngineEntry) -> None:
        pre = self.switch.pre
        kind = pe.WhichOneof("type")
        if kind == "multicast_group_entry":
            g = pe.multicast_group_entry
            gid = g.multicast_group_id
            if gid == 0:
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "0 is not a valid group id")
            if gid >= FIRST_RESERVED_GROUP_ID:
                raise P4RuntimeError(SC.OUT_OF_RANGE, "Group id value is too high")
            self._check_update_type(t, p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE)
            if t == p4r.Update.DELETE:
                pre.delete_group(gid)
                self._port_forms.pop(("mc", gid), None)
                return
            replicas, forms = self._decode_replicas(g.replicas)
            pre.set_group(gid, replicas, create=t == p4r.Update.INSERT)
            self._port_forms[("mc", gid)] = forms
        elif kind == "clone_session_entry":
            c = pe.clone_session_entry
            sid = c.session_id
            if sid == 0:
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "0 is not a valid session id")
            if sid >= MAX_CLONE_SESSION_ID:
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "Clone session id out-of-range")
            self._check_update_type(t, p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE)
            if t == p4r.Update.DELETE:
                pre.delete_clone_session(sid)
                self._port_forms.pop(("clone", sid), None)
                return
            if c.class_of_service != 0:
                raise P4RuntimeError(SC.UNIMPLEMENTED, "COS for clone sessions not supported yet")
            if c.packet_length_bytes < 0:
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "packet_length_bytes must not be negative")
            replicas, forms = self._decode_replicas(c.replicas)
            session = state.CloneSession(replicas, c.class_of_service, c.packet_length_bytes)
            pre.set_clone_session(sid, session, create=t == p4r.Update.INSERT)
            self._port_forms[("clone", sid)] = forms
        else:
            raise P4RuntimeError(SC.INVALID_ARGUMENT, "Invalid PRE operation")

    def _read_pre(self, pe: p4r.PacketReplicationEngineEntry, out: list[p4r.Entity]) -> None:
        pre = self.switch.pre
        kind = pe.WhichOneof("type")
        if kind == "multicast_group_entry":
            gid = pe.multicast_group_entry.multicast_group_id
            if gid >= FIRST_RESERVED_GROUP_ID:
                raise P4RuntimeError(SC.OUT_OF_RANGE, "Group id value is too high")
            if gid == 0:
                gids = sorted(pre.groups)
            elif gid in pre.groups:
                gids = [gid]
            else:
                raise P4RuntimeError(SC.NOT_FOUND, "Multicast group does not exist")
            for g in gids:
                entry = p4r.MulticastGroupEntry(multicast_group_id=g,
                                                replicas=self._encode_replicas("mc", g, pre.groups[g]))
                out.append(p4r.Entity(packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
                    multicast_group_entry=entry)))
        elif kind == "clone_session_entry":
            sid = pe.clone_session_entry.session_id
            if sid == 0:
                sids = sorted(pre.clone_sessions)
            elif sid in pre.clone_sessions:
                sids = [sid]
            else:
                raise P4RuntimeError(SC.NOT_FOUND, "Clone session id does not exist")
            for s in sids:
                cs = pre.clone_sessions[s]
                entry = p4r.CloneSessionEntry(session_id=s, replicas=self._encode_replicas("clone", s, cs.replicas),
                                              class_of_service=cs.class_of_service,
                                              packet_length_bytes=cs.packet_length_bytes)
                out.append(p4r.Entity(packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
                    clone_session_entry=entry)))
        else:
            raise P4RuntimeError(SC.INVALID_ARGUMENT, "Invalid PRE operation")

    # -- digests --------------------------------------------------------------------------
    def _write_digest(self, pl: Pipeline, t: int, de: p4r.DigestEntry) -> None:
        if de.digest_id not in pl.digests:
            raise _invalid_id()
        self._check_update_type(t, p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE)
        with self._digest_lock:
            st = self._digests.get(de.digest_id)
            if t == p4r.Update.DELETE:
                if st is None:
                    raise P4RuntimeError(SC.NOT_FOUND, "Digest not configured")
                if st.timer is not None:
                    st.timer.cancel()
                del self._digests[de.digest_id]
                return
            if t == p4r.Update.INSERT and st is not None:
                raise P4RuntimeError(SC.ALREADY_EXISTS, "Digest already configured")
            if t == p4r.Update.MODIFY and st is None:
                raise P4RuntimeError(SC.NOT_FOUND, "Digest not configured")
            if not de.HasField("config"):
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "Missing config field in DigestEntry")
            c = de.config
            if c.max_timeout_ns < 0 or c.max_list_size < 0 or c.ack_timeout_ns < 0:
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "DigestEntry config values must not be negative")
            if st is None:
                self._digests[de.digest_id] = _DigestState(p4r.DigestEntry.Config(
                    max_timeout_ns=c.max_timeout_ns, max_list_size=c.max_list_size, ack_timeout_ns=c.ack_timeout_ns))
            else:
                st.config.CopyFrom(c)

    def _read_digest(self, pl: Pipeline, de: p4r.DigestEntry, out: list[p4r.Entity]) -> None:
        if de.digest_id and de.digest_id not in pl.digests:
            raise _invalid_id()
        with self._digest_lock:
            for did, st in sorted(self._digests.items()):
                if de.digest_id in (0, did):
                    out.append(p4r.Entity(digest_entry=p4r.DigestEntry(digest_id=did, config=st.config)))

    def _on_digest(self, learn_list: str, samples: list[tuple[int, ...]]) -> None:
        """Digest handler of the switch (data-plane thread): batch, dedup, maybe send."""
        pl = self.pipeline
        did = pl.digest_by_list.get(learn_list) if pl is not None else None
        if did is None:
            return
        now = time.monotonic()
        with self._digest_lock:
            st = self._digests.get(did)
            if st is None:  # not configured: PI drops it too
                return
            ack_timeout = st.config.ack_timeout_ns / 1e9
            if ack_timeout > 0:
                for list_id, (sent, lst) in list(st.pending.items()):
                    if now - sent > ack_timeout:
                        del st.pending[list_id]
                        st.cache.difference_update(lst)
            for s in samples:
                if ack_timeout > 0:
                    if s in st.cache:
                        continue
                    st.cache.add(s)
                st.buffer.append(s)
            if not st.buffer:
                return
            c = st.config
            if c.max_timeout_ns == 0 or (c.max_list_size > 0 and len(st.buffer) >= c.max_list_size):
                self._flush_digest(pl, did, st)
            elif st.timer is None:
                st.timer = threading.Timer(c.max_timeout_ns / 1e9, self._digest_timeout, (pl, did, st))
                st.timer.daemon = True
                st.timer.start()

    def _digest_timeout(self, pl: Pipeline, did: int, st: _DigestState) -> None:
        with self._digest_lock:
            st.timer = None
            if self._digests.get(did) is st:
                self._flush_digest(pl, did, st)

    def _flush_digest(self, pl: Pipeline, did: int, st: _DigestState) -> None:
        """Send the buffered samples (caller holds the digest lock)."""
        if st.timer is not None:
            st.timer.cancel()
            st.timer = None
        di = pl.digests[did]
        size = st.config.max_list_size or len(st.buffer)
        buffered, st.buffer = st.buffer, []
        with self._conn_lock:
            primaries = self._primaries()
        for i in range(0, len(buffered), size):
            chunk = buffered[i:i + size]
            list_id = st.next_list_id
            st.next_list_id += 1
            if st.config.ack_timeout_ns > 0:
                st.pending[list_id] = (time.monotonic(), chunk)
            if not primaries:
                self.digest_drops += len(chunk)
                continue
            data = [_digest_data(di, s) for s in chunk]
            msg = p4r.StreamMessageResponse(digest=p4r.DigestList(
                digest_id=did, list_id=list_id, data=data, timestamp=time.time_ns()))
            for primary in primaries:
                primary.send(msg)

    def _digest_ack(self, ack: p4r.DigestListAck) -> None:
        with self._digest_lock:
            st = self._digests.get(ack.digest_id)
            if st is None:
                return
            item = st.pending.pop(ack.list_id, None)
            if item is not None:
                st.cache.difference_update(item[1])

    # -- Read -----------------------------------------------------------------------------
    def Read(self, request: p4r.ReadRequest, context: grpc.ServicerContext) -> Iterator[p4r.ReadResponse]:
        """Stream the requested entities (wildcards expanded)."""
        out: list[p4r.Entity] = []
        try:
            self._check_device(request.device_id)
            pl = self._need_pipeline()
            with self._lock:
                for entity in request.entities:
                    self._read_entity(pl, entity, out)
        except P4RuntimeError as e:
            _abort(context, e)
        except StateError as e:
            _abort(context, P4RuntimeError.from_state(e))
        except Exception as e:  # a bug must not kill the server
            log.exception("Read: internal error")
            _abort(context, P4RuntimeError(SC.INTERNAL, f"{type(e).__name__}: {e}"))
        if not out:
            yield p4r.ReadResponse()
        for i in range(0, len(out), READ_CHUNK):
            yield p4r.ReadResponse(entities=out[i:i + READ_CHUNK])

    def _read_entity(self, pl: Pipeline, entity: p4r.Entity, out: list[p4r.Entity]) -> None:
        kind = entity.WhichOneof("entity")
        ent = getattr(entity, kind) if kind else None
        if kind == "table_entry":
            self._read_table(pl, ent, out)
        elif kind == "packet_replication_engine_entry":
            self._read_pre(ent, out)
        elif kind == "counter_entry":
            self._read_counter(pl, ent, out)
        elif kind == "direct_counter_entry":
            self._read_direct_counter(pl, ent, out)
        elif kind == "register_entry":
            self._read_register(pl, ent, out)
        elif kind == "meter_entry":
            self._read_meter(pl, ent, out)
        elif kind == "digest_entry":
            self._read_digest(pl, ent, out)
        elif kind == "value_set_entry":
            self._read_value_set(pl, ent, out)
        elif kind == "action_profile_member":
            self._read_profile_members(pl, ent, out)
        elif kind == "action_profile_group":
            self._read_profile_groups(pl, ent, out)
        elif kind == "direct_meter_entry":
            self._read_direct_meter(pl, ent, out)
        elif kind is None:
            raise P4RuntimeError(SC.UNKNOWN, "Incorrect entity type")
        else:
            raise P4RuntimeError(SC.UNIMPLEMENTED, f"{kind} reads are not supported")

    # -- StreamChannel --------------------------------------------------------------------
    def StreamChannel(
        self, request_iterator: Iterator[p4r.StreamMessageRequest], context: grpc.ServicerContext
    ) -> Iterator[p4r.StreamMessageResponse]:
        """Arbitration, packet-out and digest acks in; arbitration, packet-in, digests out."""
        conn = _Connection()
        context.add_callback(lambda: conn.send(_EOF))
        reader = threading.Thread(target=self._stream_reader, args=(conn, request_iterator),
                                  name="p4rt-stream", daemon=True)
        reader.start()
        try:
            while True:
                item = conn.out.get()
                if item is _EOF:
                    return
                if isinstance(item, _Abort):
                    _abort(context, item.error)
                yield item
        finally:
            self._remove_connection(conn)

    def _stream_reader(self, conn: _Connection, requests: Iterator[p4r.StreamMessageRequest]) -> None:
        try:
            for req in requests:
                kind = req.WhichOneof("update")
                if kind == "arbitration":
                    try:
                        self._arbitrate(conn, req.arbitration)
                    except P4RuntimeError as e:
                        self._remove_connection(conn)
                        conn.send(_Abort(e))
                        return
                elif kind == "packet":
                    self._packet_out(conn, req.packet)
                elif kind == "digest_ack" and self._is_primary(conn):
                    self._digest_ack(req.digest_ack)
        except Exception as e:  # the client went away (RpcError) or a bug: end the stream
            if not isinstance(e, grpc.RpcError):
                log.exception("StreamChannel reader failed")
        conn.send(_EOF)

    def _is_primary(self, conn: _Connection) -> bool:
        with self._conn_lock:
            return conn.device_id is not None and self._primary(conn.role) is conn

    def _arbitrate(self, conn: _Connection, arb: p4r.MasterArbitrationUpdate) -> None:
        eid = _u128(arb.election_id)
        role = arb.role.name if arb.HasField("role") else ""
        if arb.HasField("role") and (arb.role.HasField("config") or arb.role.id):
            raise P4RuntimeError(SC.UNIMPLEMENTED, "Role config and numeric role ids are not supported "
                                                   "(name the role; every role has full access)")
        with self._conn_lock:
            if conn.device_id is None:
                self._check_device(arb.device_id)
                if len(self._conns) >= MAX_CONNECTIONS:
                    raise P4RuntimeError(SC.RESOURCE_EXHAUSTED, "Too many connections")
                if any(c.election_id == eid and c.role == role for c in self._conns):
                    raise P4RuntimeError(SC.INVALID_ARGUMENT, "Election id already exists")
                conn.device_id, conn.election_id, conn.role = arb.device_id, eid, role
                self._conns.append(conn)
                if self._primary(role) is conn:
                    self._notify_all(role)
                else:
                    self._notify(conn)
                return
            if arb.device_id != conn.device_id:
                raise P4RuntimeError(SC.FAILED_PRECONDITION, "Invalid device id")
            if role != conn.role:
                raise P4RuntimeError(SC.FAILED_PRECONDITION, "A stream cannot change its role")
            if eid == conn.election_id:  # PI answers nothing when the id does not change
                return
            if any(c is not conn and c.election_id == eid and c.role == role for c in self._conns):
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "New election id already exists")
            was_primary = self._primary(role) is conn
            conn.election_id = eid
            if (self._primary(role) is conn) != was_primary:
                self._notify_all(role)
            else:
                self._notify(conn)

    def _notify(self, conn: _Connection) -> None:
        primary = self._primary(conn.role)
        assert primary is not None
        is_primary = conn is primary
        status = rpc_status.Status(code=SC.OK.value[0] if is_primary else SC.ALREADY_EXISTS.value[0],
                                   message="Is primary" if is_primary else "Is backup")
        upd = p4r.MasterArbitrationUpdate(device_id=conn.device_id, election_id=_to_u128(primary.election_id),
                                          status=status)
        if conn.role:
            upd.role.name = conn.role
        conn.send(p4r.StreamMessageResponse(arbitration=upd))

    def _notify_all(self, role: str) -> None:
        for c in self._conns:
            if c.role == role:
                self._notify(c)

    def _remove_connection(self, conn: _Connection) -> None:
        with self._conn_lock:
            if conn not in self._conns:
                return
            was_primary = self._primary(conn.role) is conn
            self._conns.remove(conn)
            if was_primary and self._primary(conn.role) is not None:
                self._notify_all(conn.role)

    def close(self) -> None:
        """End every open stream (server shutdown)."""
        with self._conn_lock:
            conns, self._conns = self._conns, []
        for c in conns:
            c.send(_EOF)
        with self._digest_lock:
            for st in self._digests.values():
                if st.timer is not None:
                    st.timer.cancel()

    # -- packet I/O -----------------------------------------------------------------------
    def _packet_out(self, conn: _Connection, pkt: p4r.PacketOut) -> None:
        if not self._is_primary(conn):
            return  # PI ignores packet-outs from backups
        pl = self.pipeline
        if pl is None:
            return
        try:
            frame = pl.packet_out_frame(pkt)
            try:
                self.switch.inject_packet_out(frame)
            except ValueError as e:  # no CPU port configured
                raise P4RuntimeError(SC.FAILED_PRECONDITION, str(e)) from e
        except P4RuntimeError as e:
            conn.send(p4r.StreamMessageResponse(error=p4r.StreamError(
                canonical_code=e.code.value[0], message=e.message, space=ERROR_SPACE,
                packet_out=p4r.PacketOutError(packet_out=pkt))))

    def _on_packet_in(self, frame: bytes) -> None:
        """Packet-in handler of the switch (data-plane thread): queue a PacketIn."""
        pl = self.pipeline
        if pl is None:
            return
        with self._conn_lock:
            primaries = self._primaries()
        if not primaries:
            return
        msg = pl.packet_in_message(frame)
        if msg is None:
            self.packet_in_drops += 1
            return
        out = p4r.StreamMessageResponse(packet=msg)
        for primary in primaries:
            if primary.out.qsize() > PACKET_IN_BACKLOG:
                self.packet_in_drops += 1
                continue
            primary.send(out)


def _digest_data(di: _DigestInfo, sample: tuple[int, ...]) -> p4d.P4Data:
    if di.kind == "bitstring":
        return p4d.P4Data(bitstring=encode_bytes(sample[0]))
    members = p4d.P4StructLike(members=[p4d.P4Data(bitstring=encode_bytes(v)) for v in sample])
    return p4d.P4Data(struct=members) if di.kind == "struct" else p4d.P4Data(tuple=members)


def _meter_config(c: p4r.MeterConfig) -> tuple[int, int, int, int] | None:
    """A MeterConfig as (cir, cburst, pir, pburst); None for PI's "default" (all -1)."""
    values = (c.cir, c.cburst, c.pir, c.pburst)
    if values == (-1, -1, -1, -1):
        return None
    if min(values) < 0:
        raise P4RuntimeError(SC.INVALID_ARGUMENT, "Negative meter rate or burst")
    if c.pir < c.cir:
        raise P4RuntimeError(SC.INVALID_ARGUMENT, "Meter peak rate is below the committed rate")
    return values


def _meter_config_msg(cfg: tuple[int, int, int, int]) -> p4r.MeterConfig:
    return p4r.MeterConfig(cir=cfg[0], cburst=cfg[1], pir=cfg[2], pburst=cfg[3])


def _carry_state(old: Program, new: Program) -> None:
    """RECONCILE_AND_COMMIT: copy entries, defaults and counter/register cells by name."""
    try:
        for name, ot in old.tables.items():
            nt = new.tables.get(name)
            if ot.profile is not None:
                continue  # members and groups are not carried over: the client rewrites them
            if nt is None or [(k.match_type, k.bitwidth) for k in ot.keys] != [(k.match_type, k.bitwidth)
                                                                              for k in nt.keys]:
                continue
            for e in ot.entries():
                if e.is_const:
                    continue
                call = new.action_call(name, e.action.name, e.action.params)
                nt.insert(state.TableEntry(e.key, call, e.priority, packets=e.packets, bytes=e.bytes,
                                           idle_timeout_ns=e.idle_timeout_ns, metadata=e.metadata,
                                           meter_config=e.meter_config))
            if ot.default is not ot.initial_default and not nt.default_const:
                nt.set_default(new.action_call(name, ot.default.name, ot.default.params))
        for name, oc in old.counters.items():
            nc = new.counters.get(name)
            if nc is not None and nc.size == oc.size:
                nc.packets[:] = oc.packets
                nc.bytes[:] = oc.bytes
        for name, orr in old.registers.items():
            nr = new.registers.get(name)
            if nr is not None and nr.size == orr.size and nr.bitwidth == orr.bitwidth:
                nr.cells[:] = orr.cells
    except StateError as e:
        raise P4RuntimeError(SC.UNKNOWN, f"Error when reconciling config: {e}") from e


# -- the server -------------------------------------------------------------------------
@dataclass(frozen=True)
class ServerTls:
    """TLS for the P4Runtime server, as simple_switch_grpc's ``--grpc-server-ssl`` flags:
    the server's certificate chain and key (PEM files), and optionally a CA to verify
    clients against; ``client_auth`` requires a client certificate signed by it (mutual
    TLS, ``--grpc-server-with-client-auth``)."""

    cert: str | Path
    key: str | Path
    cacert: str | Path | None = None
    client_auth: bool = False

    def credentials(self) -> grpc.ServerCredentials:
        """gRPC server credentials; ``ValueError`` when the files do not make a valid set."""
        if self.client_auth and self.cacert is None:
            raise ValueError("client authentication needs a CA certificate (--grpc-server-cacert)")
        try:
            key, cert = Path(self.key).read_bytes(), Path(self.cert).read_bytes()
            ca = Path(self.cacert).read_bytes() if self.cacert is not None else None
        except OSError as e:
            raise ValueError(f"cannot read a TLS file: {e}") from e
        return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca,
                                           require_client_auth=self.client_auth)


class P4RuntimeServer:
    """A gRPC server exposing ``P4RuntimeService`` for ``switch`` on ``address``
    (plain, or TLS / mutual TLS with ``tls``)."""

    def __init__(self, switch: Switch, address: str = "127.0.0.1:9559", max_workers: int = 2 * MAX_CONNECTIONS + 8,
                 tls: ServerTls | None = None) -> None:
        self.switch = switch
        self.address = address
        self.tls = tls
        self.service = P4RuntimeService(switch)
        self.port: int | None = None
        self._max_workers = max_workers
        self._server: grpc.Server | None = None
        self._handlers: list[tuple[list[Any], Callable[..., None]]] = []

    def start(self) -> int:
        """Listen and serve; returns the bound TCP port (useful with port 0)."""
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=self._max_workers, thread_name_prefix="p4rt"),
            options=[("grpc.max_receive_message_length", MAX_MESSAGE),
                     ("grpc.max_send_message_length", MAX_MESSAGE),
                     ("grpc.so_reuseport", 0)],
        )
        p4r_grpc.add_P4RuntimeServicer_to_server(self.service, server)
        if self.tls is not None:
            port = server.add_secure_port(self.address, self.tls.credentials())
        else:
            port = server.add_insecure_port(self.address)
        if port == 0:
            raise RuntimeError(f"cannot listen on {self.address}")
        server.start()
        self._server = server
        self.port = port
        self._handlers = [(self.switch.packet_in_handlers, self.service._on_packet_in),
                          (self.switch.digest_handlers, self.service._on_digest)]
        for handlers, fn in self._handlers:
            handlers.append(fn)
        log.info("device %d: P4Runtime server on %s", self.switch.device_id, self.address)
        return port

    def stop(self, grace: float | None = 1.0) -> None:
        """Stop serving: close the streams, then the server."""
        for handlers, fn in self._handlers:
            if fn in handlers:
                handlers.remove(fn)
        self._handlers = []
        self.service.close()
        if self._server is not None:
            self._server.stop(grace).wait()
            self._server = None

    def __enter__(self) -> P4RuntimeServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
