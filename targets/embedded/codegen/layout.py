"""Where a program's data lives in the PHV, and the objects the JSON declares.

At run time a packet is a flat list ``F`` of integers (the PHV): hidden slots first
(per-packet side effects of primitives), then each header instance's validity bit
followed by one slot per field, then one "next index" slot per header stack.
``LayoutMixin`` lays the headers out and builds registers, counters, meters, field
lists, digests, value sets and actions from the JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from targets.embedded import state
from targets.embedded.codegen.support import MeterArray

# Hidden PHV slots carrying per-packet side effects of primitives, and simple_switch's
# per-packet state outside the PHV: PKTLEN is its packet-length register (the received
# length, plus/minus each header that add_header/remove_header makes valid/invalid; egress
# reads standard_metadata.packet_length from it), ILEN the packet's ingress length (what
# counters and byte meters count), INPORT the port the packet arrived on.
EXIT, CLONE, CLONE_FL, RESUBMIT, RECIRC, LEARN, TRUNCATE, PKTLEN, ILEN, INPORT = range(10)
N_HIDDEN = 10
FLAG = 1 << 40  # marks "set" in CLONE/RESUBMIT/RECIRC so that id 0 stays usable


class CompileError(ValueError):
    """The BMv2 JSON is malformed or uses a feature the embedded target lacks."""


@dataclass
class ActionInfo:
    """An action of the program: name, BMv2 id and (name, bitwidth) parameters."""

    name: str
    id: int
    params: list[tuple[str, int]]
    fn: Callable[..., Any] | None = None


@dataclass
class LearnList:
    """A digest (BMv2 learn list): name, id and its (field name, bitwidth) list."""

    name: str
    id: int
    fields: list[tuple[str, int]]
    slots: list[int] = field(default_factory=list)


@dataclass
class HeaderLayout:
    """Where a header instance lives in the PHV."""

    name: str
    type_name: str
    base: int  # slot of the validity bit; fields follow
    fields: list[tuple[str, int, bool]]
    metadata: bool
    # a varbit field: its index in ``fields`` (listed with width 0), the header's
    # maximum size in bytes, and a hidden last field holding its current width in bits
    vl: int = -1
    vl_max_bytes: int = 0

    @property
    def nbits(self) -> int:
        return sum(w for _, w, _ in self.fields)

    def slot(self, fname: str) -> int:
        if fname == "$valid$":
            return self.base
        for i, (n, _, _) in enumerate(self.fields):
            if n == fname:
                return self.base + 1 + i
        raise CompileError(f"header {self.name} has no field {fname}")


@dataclass
class StackLayout:
    name: str
    headers: list[HeaderLayout]
    next_slot: int  # slot holding the stack's next index

    @property
    def stride(self) -> int:
        return len(self.headers[0].fields) + 1


def json_int(v: Any) -> int:
    """A JSON hexstr / int / bool as a Python int."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        return int(v, 0) if not v.startswith("-") else -int(v[1:], 0)
    raise CompileError(f"not a number: {v!r}")


class LayoutMixin:
    """PHV layout, field references and the program's stateful objects."""

    def _layout(self) -> None:
        spec = self.spec
        slot = self._layout_headers(N_HIDDEN)
        slot = self._layout_unions(slot)
        self.nslots = slot
        template = [0] * slot
        for h in self.headers.values():
            if h.metadata:
                template[h.base] = 1
        self.template = template
        # names and codes checked by check_spec; codes reach generated code as ints only
        self.errors = {name: int(code) for name, code in spec.get("errors", [])}
        for name, code in (("NoError", 0), ("PacketTooShort", 1), ("NoMatch", 2),
                           ("StackOutOfBounds", 3), ("HeaderTooShort", 4)):
            self.errors.setdefault(name, code)
        self.aliases = {a[0]: a[1] for a in spec.get("field_aliases", [])}
        self._layout_standard_metadata()

    def _layout_headers(self, slot: int) -> int:
        """Headers, then header stacks from ``slot`` on; returns the next free slot."""
        spec = self.spec
        types = {t["name"]: t for t in spec["header_types"]}
        self.headers: dict[str, HeaderLayout] = {}
        slot = N_HIDDEN
        for h in spec.get("headers", []):
            t = types[h["header_type"]]
            fields = []
            vl = -1
            for f in t["fields"]:
                if f[1] == "*":
                    if vl >= 0:
                        raise CompileError(f"header {h['name']}: more than one varbit field")
                    vl = len(fields)
                    fields.append((f[0], 0, False))
                    continue
                fields.append((f[0], int(f[1]), bool(f[2]) if len(f) > 2 else False))
            if vl >= 0:
                fields.append(("$vl_len$", 0, False))
            self.headers[h["name"]] = HeaderLayout(h["name"], t["name"], slot, fields, bool(h.get("metadata")),
                                                   vl, int(t.get("max_length", 0)) if vl >= 0 else 0)
            slot += 1 + len(fields)
        self.stacks: dict[str, StackLayout] = {}
        by_id = {h["id"]: h["name"] for h in spec.get("headers", [])}
        for s in spec.get("header_stacks", []):
            hs = [self.headers[by_id[i]] for i in s["header_ids"]]
            for a, b in zip(hs, hs[1:], strict=False):
                if b.base - a.base != len(a.fields) + 1:
                    raise CompileError(f"header stack {s['name']} elements are not contiguous")
            self.stacks[s["name"]] = StackLayout(s["name"], hs, slot)
            slot += 1
        return slot

    def _layout_unions(self, slot: int) -> int:
        """Header unions and header union stacks (from ``slot``); returns the next free slot."""
        spec = self.spec
        # Header unions: making a member valid (extract, setValid, assignment from a
        # valid header) invalidates the others (BMv2 HeaderUnion::make_header_valid).
        by_hid = {h["id"]: self.headers[h["name"]] for h in spec.get("headers", [])}
        self.unions: dict[str, list[HeaderLayout]] = {}
        self.union_siblings: dict[str, list[int]] = {}  # member header -> other members' bases
        for u in spec.get("header_unions", []):
            members = [by_hid[i] for i in u["header_ids"]]
            self.unions[u["name"]] = members
            for m in members:
                self.union_siblings[m.name] = [o.base for o in members if o is not m]
        self.union_stacks: dict[str, tuple[list[list[HeaderLayout]], int]] = {}  # elements, next slot
        uby_id = {u["id"]: u["name"] for u in spec.get("header_unions", [])}
        for us in spec.get("header_union_stacks", []):
            elems = [self.unions[uby_id[i]] for i in us["header_union_ids"]]
            strides = {b[0].base - a[0].base for a, b in zip(elems, elems[1:], strict=False)}
            if len(strides) > 1 or any([m.base - e[0].base for m in e] != [m.base - elems[0][0].base
                                                                            for m in elems[0]] for e in elems):
                raise CompileError(f"header union stack {us['name']}: elements are not laid out alike")
            self.union_stacks[us["name"]] = (elems, slot)
            slot += 1
        return slot

    def _layout_standard_metadata(self) -> None:
        sm = self.headers.get("standard_metadata")
        if sm is None:
            raise CompileError("program has no standard_metadata (not a v1model program?)")

        def sm_slot(name: str) -> int | None:
            try:
                return sm.slot(name)
            except CompileError:
                return None

        self.sm = {n: sm_slot(n) for n, _, _ in sm.fields}
        if "queueing_metadata.qid" in self.aliases and "qid" not in self.sm:
            # v1model has no qid: simple_switch writes it wherever the alias points.
            self.sm["qid"] = self.field_slot(["queueing_metadata", "qid"])
        for required in ("ingress_port", "egress_spec", "egress_port", "instance_type", "packet_length"):
            if self.sm.get(required) is None:
                raise CompileError(f"standard_metadata.{required} missing")
        # The slots the switch's packet flow touches for every packet, as attributes:
        # a dict lookup each costs as much as a line of generated code.
        self.sm_ingress_port: int = self.sm["ingress_port"]
        self.sm_egress_spec: int = self.sm["egress_spec"]
        self.sm_egress_port: int = self.sm["egress_port"]
        self.sm_instance_type: int = self.sm["instance_type"]
        self.sm_packet_length: int = self.sm["packet_length"]
        self.sm_checksum_error: int | None = self.sm.get("checksum_error")
        self.sm_mcast_grp: int | None = self.sm.get("mcast_grp")
        self.sm_priority: int | None = self.sm.get("priority")
        self.sm_qid: int | None = self.sm.get("qid")
        self.metadata_slots = [
            (h.base + 1, h.base + 1 + len(h.fields)) for h in self.headers.values() if h.metadata
        ]

    def field_slot(self, ref: list[str]) -> int:
        """PHV slot of a ``[header, field]`` reference (aliases resolved)."""
        hname, fname = ref
        joined = f"{hname}.{fname}"
        if joined in self.aliases:
            hname, fname = self.aliases[joined]
        h = self.headers.get(hname)
        if h is None:
            raise CompileError(f"unknown header {hname}")
        return h.slot(fname)

    def field_info(self, ref: list[str]) -> tuple[int, int, bool]:
        hname, fname = ref
        joined = f"{hname}.{fname}"
        if joined in self.aliases:
            hname, fname = self.aliases[joined]
        h = self.headers[hname]
        if fname == "$valid$":
            return h.base, 1, False
        for i, (n, w, s) in enumerate(h.fields):
            if n == fname:
                return h.base + 1 + i, w, s
        raise CompileError(f"header {hname} has no field {fname}")

    def _build_objects(self) -> None:
        spec = self.spec
        self.registers: dict[str, state.RegisterArray] = {}
        for r in spec.get("register_arrays", []):
            self.registers[r["name"]] = state.RegisterArray(r["name"], int(r["size"]), int(r["bitwidth"]))
        self.counters: dict[str, state.CounterArray] = {}
        self.direct_counters: dict[str, str] = {}
        for c in spec.get("counter_arrays", []):
            if c.get("is_direct"):
                self.direct_counters[c["name"]] = c["binding"]
            else:
                self.counters[c["name"]] = state.CounterArray(c["name"], int(c["size"]))
        self.meters: dict[str, MeterArray] = {}
        self.direct_meters: dict[str, str] = {}  # meter name -> table name
        self._direct_meter_specs: dict[str, dict[str, Any]] = {}
        for m in spec.get("meter_arrays", []):
            if m.get("is_direct"):
                self.direct_meters[m["name"]] = m["binding"]
                self._direct_meter_specs[m["name"]] = m
                continue
            self.meters[m["name"]] = MeterArray(m["name"], int(m["size"]), m.get("type", "packets"))
        self.field_lists: dict[int, list[int]] = {}
        for fl in spec.get("field_lists", []):
            slots = []
            for e in fl["elements"]:
                if e["type"] != "field":
                    raise CompileError(f"field list {fl['name']}: element type {e['type']}")
                slots.append(self.field_slot(e["value"]))
            self.field_lists[int(fl["id"])] = slots
        self.learn_lists: dict[str, LearnList] = {}
        self.learn_by_id: dict[int, LearnList] = {}
        for ll in spec.get("learn_lists", []):
            fields, slots = [], []
            for e in ll["elements"]:
                s, w, _ = self.field_info(e["value"])
                fields.append((".".join(e["value"]), w))
                slots.append(s)
            info = LearnList(ll["name"], int(ll["id"]), fields, slots)
            self.learn_lists[ll["name"]] = info
            self.learn_by_id[info.id] = info
        self.calculations = {c["name"]: c for c in spec.get("calculations", [])}
        self.value_sets: dict[str, state.ValueSet] = {
            v["name"]: state.ValueSet(v["name"], int(v["compressed_bitwidth"]), int(v.get("max_size", 0)))
            for v in spec.get("parse_vsets", [])}
        self.actions_by_id: dict[int, ActionInfo] = {}
        self.actions: dict[str, ActionInfo] = {}
        for a in spec.get("actions", []):
            info = ActionInfo(a["name"], int(a["id"]), [(p["name"], int(p["bitwidth"])) for p in a["runtime_data"]])
            self.actions_by_id[info.id] = info
            self.actions.setdefault(info.name, info)
