"""Compile a BMv2 JSON program (p4c-bm2-ss, v1model) into Python code.

The JSON is walked once, at load time, and turned into Python source that is then
``exec``-ed: one function for the parser, one per action, one per table or conditional
node of each pipeline, one for the deparser and one per checksum or hash calculation.
At run time a packet is a flat list ``F`` of integers (the PHV): each header instance
owns one slot for its validity bit followed by one slot per field, so generated code
reads and writes fields as ``F[17]`` with no dictionary look-ups or object allocation.

Semantics follow BMv2's ``simple_switch`` (behavioral-model 1.15): arithmetic is on
unbounded integers with p4c's explicit masks, assignment truncates to the destination
width, a parser error stops parsing and the packet enters ingress with
``standard_metadata.parser_error`` set, and the unparsed rest of the packet is payload.
"""

from __future__ import annotations

import json
import logging
import random
import re
import struct as _struct
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from targets.embedded import state
from targets.embedded.config_check import SAFE_BUILTINS, SpecError, check_source, check_spec
from targets.embedded.state import ActionCall, StateError

log = logging.getLogger("gradnet.switch")

# Hidden PHV slots carrying per-packet side effects of primitives, and simple_switch's
# per-packet state outside the PHV: PKTLEN is its packet-length register (the received
# length, plus/minus each header that add_header/remove_header makes valid/invalid; egress
# reads standard_metadata.packet_length from it), ILEN the packet's ingress length (what
# counters and byte meters count), INPORT the port the packet arrived on.
EXIT, CLONE, CLONE_FL, RESUBMIT, RECIRC, LEARN, TRUNCATE, PKTLEN, ILEN, INPORT = range(10)
N_HIDDEN = 10
FLAG = 1 << 40  # marks "set" in CLONE/RESUBMIT/RECIRC so that id 0 stays usable
# BMv2's PI inverts priorities around INT_MAX (pi_tables_imp.cpp BM_MAX_PRIORITY): a const
# entry of BMv2 priority p (1, 2, ... in program order) reads back as INT_MAX - p.
CONST_PRIORITY_BASE = (1 << 31) - 1


class CompileError(ValueError):
    """The BMv2 JSON is malformed or uses a feature the embedded target lacks."""


class _TooLong(Exception):
    """An inlined parser would be too long (``Program._parser_inline``)."""


class ParserError(Exception):
    """Raised inside generated parser code; ``code`` is the P4 error value."""

    def __init__(self, code: int) -> None:
        self.code = code


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


class Meter:
    """One two-rate three-colour meter with BMv2's exact algorithm (meters.cpp).

    Rates are checked peak first, then committed (``Meter::set_rates`` stores {CIR, PIR}
    and reverses the list); the first one short of tokens gives the colour (2 red,
    1 yellow) and later rates are not charged. Unconfigured meters return green (0).
    """

    __slots__ = ("rates", "t0")

    def __init__(self) -> None:
        self.rates: list[list[float]] | None = None
        self.t0 = 0.0

    def configure(self, cir: float, cburst: int, pir: float, pburst: int) -> None:
        if pir < cir:
            raise StateError("INVALID_ARGUMENT", "meter: peak rate below committed rate")
        # [rate per second, burst, tokens, tokens credited since t0, colour]
        self.rates = [[float(pir), pburst, float(pburst), 0.0, 2], [float(cir), cburst, float(cburst), 0.0, 1]]
        self.t0 = _monotonic()

    def clear(self) -> None:
        self.rates = None

    def execute(self, size: int, now: float) -> int:
        if self.rates is None:
            return 0
        elapsed = now - self.t0
        color = 0
        for r in self.rates:
            credited = elapsed * r[0]
            r[2] = min(r[2] + credited - r[3], r[1])
            r[3] = credited
            if r[2] < size:
                color = r[4]
                break
            r[2] -= size
        return color


class MeterArray:
    """An indirect meter array (packets or bytes)."""

    GREEN, YELLOW, RED = 0, 1, 2

    def __init__(self, name: str, size: int, unit: str) -> None:
        self.name = name
        self.size = size
        self.unit = unit  # "packets" or "bytes"
        self.meters = [Meter() for _ in range(size)]
        self.configs: list[tuple[int, int, int, int] | None] = [None] * size

    def _check(self, index: int) -> None:
        if not 0 <= index < self.size:
            raise StateError("OUT_OF_RANGE", f"meter {self.name}: index {index} out of range")

    def clear_config(self, index: int) -> None:
        self._check(index)
        self.configs[index] = None
        self.meters[index].clear()

    def set_config(self, index: int, cir: int, cburst: int, pir: int, pburst: int) -> None:
        self._check(index)
        self.meters[index].configure(cir, cburst, pir, pburst)
        self.configs[index] = (cir, cburst, pir, pburst)

    def execute(self, index: int, length: int, now: float) -> int:
        if not 0 <= index < self.size:
            return self.GREEN
        return self.meters[index].execute(1 if self.unit == "packets" else length, now)


def direct_meter_execute(entry: state.TableEntry, unit: str, length: int) -> int:
    """Execute the direct meter of a table entry (configured via ``entry.meter_config``)."""
    m = entry.meter
    if m is None:
        if entry.meter_config is None:
            return 0
        m = entry.meter = Meter()
        m.configure(*entry.meter_config)
    return m.execute(1 if unit == "packets" else length, _monotonic())


# -- hash algorithms (bit-exact with behavioral-model's calculations.cpp) ---------------
def _make_crc_table(poly: int, width: int) -> list[int]:
    top = 1 << (width - 1)
    mask = (1 << width) - 1
    table = []
    for byte in range(256):
        rem = byte << (width - 8)
        for _ in range(8):
            rem = ((rem << 1) ^ poly) if rem & top else (rem << 1)
        table.append(rem & mask)
    return table


def _reflect(v: int, nbits: int) -> int:
    r = 0
    for i in range(nbits):
        if v >> i & 1:
            r |= 1 << (nbits - 1 - i)
    return r


_CCITT_TABLE = _make_crc_table(0x1021, 16)


def _make_reflected_table(poly: int, width: int) -> list[int]:
    # the table of a reflected CRC: bit-reversed inputs, remainder shifted right
    rpoly = _reflect(poly, width)
    table = []
    for byte in range(256):
        rem = byte
        for _ in range(8):
            rem = (rem >> 1) ^ rpoly if rem & 1 else rem >> 1
        table.append(rem)
    return table


_CRC16_RTABLE = _make_reflected_table(0x8005, 16)


def crc16(buf: bytes) -> int:
    """CRC-16/ARC as BMv2's ``crc16`` (reflected in and out: computed right-shifting,
    which spares reflecting every byte and the result)."""
    rem = 0
    t = _CRC16_RTABLE
    for b in buf:
        rem = t[(rem ^ b) & 0xFF] ^ (rem >> 8)
    return rem


def crc32(buf: bytes) -> int:
    """Standard CRC-32 (as BMv2's ``crc32``)."""
    return zlib.crc32(buf) & 0xFFFFFFFF


def crc_ccitt(buf: bytes) -> int:
    rem = 0xFFFF
    for b in buf:
        rem = (_CCITT_TABLE[b ^ (rem >> 8)] ^ (rem << 8)) & 0xFFFF
    return rem


def csum16(buf: bytes) -> int:
    """Internet checksum (ones' complement of the ones' complement sum).

    The end-around-carry sum of 16-bit words is the buffer, read as one big integer,
    modulo 0xFFFF (2**16 = 1 mod 0xFFFF), except that a non-zero buffer never sums to
    ones' complement +0: one bignum operation instead of a loop over the words."""
    n = int.from_bytes(buf, "big") << (8 if len(buf) & 1 else 0)  # odd length: pad a zero byte
    s = n % 0xFFFF
    if s == 0 and n:
        s = 0xFFFF
    return ~s & 0xFFFF


def xor16(buf: bytes) -> int:
    r = 0
    for i in range(0, len(buf) - 1, 2):
        r ^= (buf[i] << 8) | buf[i + 1]
    if len(buf) & 1:
        r ^= buf[-1] << 8
    return r


def identity(buf: bytes) -> int:
    return int.from_bytes(buf[:8], "big")


class _RoundRobin:
    def __init__(self) -> None:
        self.i = 0

    def __call__(self, buf: bytes) -> int:
        self.i += 1
        return self.i - 1


HASH_ALGOS: dict[str, Callable[[], Callable[[bytes], int]]] = {
    "crc16": lambda: crc16,
    "crc16_custom": lambda: crc16,
    "crc32": lambda: crc32,
    "crc32_custom": lambda: crc32,
    "crcCCITT": lambda: crc_ccitt,
    "csum16": lambda: csum16,
    "cksum16": lambda: csum16,
    "xor16": lambda: xor16,
    "identity": lambda: identity,
    "round_robin": _RoundRobin,
}


def _int(v: Any) -> int:
    """A JSON hexstr / int / bool as a Python int."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        return int(v, 0) if not v.startswith("-") else -int(v[1:], 0)
    raise CompileError(f"not a number: {v!r}")


_AST_LOCK = threading.Lock()
_LABEL = re.compile(r"[A-Za-z0-9_./-]{1,200}")  # the program's path, shown in tracebacks


def _reject_constant(name: str) -> Any:
    """``json.loads`` hook: NaN and Infinity are not JSON and not in a BMv2 config."""
    raise ValueError(f"non-standard JSON constant {name}")


def _signed(v: int, w: int) -> int:
    v &= (1 << w) - 1
    return v - (1 << w) if v >> (w - 1) else v


# How many levels of conditionals a node's return evaluates in place (see _gen_pipeline).
_INLINE_DEPTH = 3

_PIECES = ((8, "Q"), (4, "I"), (2, "H"), (1, "B"))


def _struct_plan(fields: list[tuple[str, int, bool]]) -> tuple[str, list[tuple[list[int], list[tuple[int, int, int, bool]]]]]:
    """How a whole-byte header maps onto one ``struct`` format: the fields grouped into
    the shortest runs that end on a byte boundary (a "chunk": one field of whole bytes,
    or sub-byte fields such as IPv4's version and ihl), each chunk read as a few
    big-endian integers. Returns the format and, per chunk, the byte sizes of its
    pieces and its fields as (field index, width, shift inside the chunk, signed)."""
    fmt = "!"
    chunks: list[tuple[list[int], list[tuple[int, int, int, bool]]]] = []
    run: list[tuple[int, int, bool]] = []
    bits = 0
    for i, (_, w, sg) in enumerate(fields):
        run.append((i, w, sg))
        bits += w
        if bits % 8:
            continue
        nb, pieces = bits // 8, []
        while nb:
            size, code = next((sz, c) for sz, c in _PIECES if sz <= nb)
            pieces.append(size)
            fmt += code
            nb -= size
        shift, members = bits, []
        for j, wj, sj in run:
            shift -= wj
            members.append((j, wj, shift, sj))
        chunks.append((pieces, members))
        run, bits = [], 0
    return fmt, chunks


_INDEX_SET = re.compile(r"    _i = (.+)$")
# a store to a PHV slot, maybe guarded by a register index check
_SLOT_STORE = re.compile(r"    (if 0 <= _i < \d+: )?F\[(\d+)\] = (.+)$")
_CELL_STORE = re.compile(r"    if 0 <= _i < \d+: _R\d+\[_i\] = ")
_GUARD = re.compile(r"    if 0 <= _i < (\d+): ")
_SLOT_REF = re.compile(r"F\[(\d+)\]")
_NAME = re.compile(r"\b[A-Za-z_]\w*")
# names a pure slot expression may use: the PHV, the action data, operators
_PURE_NAMES = frozenset({"F", "D", "if", "else", "and", "or", "not", "True", "False"})


def _drop_repeated_index(lines: list[str]) -> list[str]:
    """Drop ``_i = X`` when ``_i`` already holds X's value: a straight-line action that
    reads and writes 32 registers at one index (the aggregator) computes it once, not
    64 times.

    Values are compared as text, after one step of value numbering: a slot last set by
    an unconditional store of a pure expression (PHV slots, action data, operators)
    stands for that expression, so ``F[11] = (F[118] & 1023)`` ... ``_i = F[11]`` and
    ``F[12] = (F[118] & 1023)`` ... ``_i = F[12]`` are one index (p4c gives every
    register access its own temporary). A store to a slot forgets every value that
    reads it; a register-cell store forgets nothing; any other line forgets all."""
    out: list[str] = []
    held: str | None = None
    defs: dict[str, str] = {}
    for ln in lines:
        m = _INDEX_SET.match(ln)
        if m:
            x = m.group(1)
            r = _SLOT_REF.fullmatch(x)
            v = defs.get(r.group(1), x) if r else x
            if v == held:
                continue
            held = v
            out.append(ln)
            continue
        out.append(ln)
        st = _SLOT_STORE.match(ln)
        if st and ";" not in ln:
            guard, k, e = st.groups()
            defs = {j: d for j, d in defs.items() if j != k and k not in _SLOT_REF.findall(d)}
            if held is not None and k in _SLOT_REF.findall(held):
                held = None
            if (guard is None and k not in _SLOT_REF.findall(e)
                    and all(n in _PURE_NAMES for n in _NAME.findall(e))):
                defs[k] = e
        elif not (_CELL_STORE.match(ln) and ";" not in ln):
            held, defs = None, {}
    return out


def _hoist_index_guards(lines: list[str]) -> list[str]:
    """Check a register index once for all the accesses that share it.

    Every register access is guarded (``if 0 <= _i < N: ...``: out of range, simple_switch
    leaves the destination or the cell alone). Where the lines after one ``_i = X`` up to
    the next hold two or more guards, all against one size, they become
    ``if 0 <= _i < N: <the lines, unguarded> else: <the lines as they were>``: the same
    behaviour, one comparison instead of 64 in the aggregator."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        ln = lines[i]
        out.append(ln)
        i += 1
        if not _INDEX_SET.match(ln):
            continue
        j = i
        while j < len(lines) and not _INDEX_SET.match(lines[j]):
            j += 1
        seg = lines[i:j]
        guards = [g.group(1) for g in map(_GUARD.match, seg) if g]
        if len(guards) >= 2 and len(set(guards)) == 1:
            out.append(f"    if 0 <= _i < {guards[0]}:")
            for s in seg:
                g = _GUARD.match(s)
                out.append("        " + s[g.end():] if g else "    " + s)
            out.append("    else:")
            out.extend("    " + s for s in seg)
        else:
            out.extend(seg)
        i = j
    return out


def _emit_transitions(trans: list[tuple[str | None, str | None]], ind: str, out: list[str],
                      goto: Callable[[str | None, str], None]) -> None:
    """A parse state's transitions as ``if cond: / elif cond: / else:`` blocks at ``ind``;
    ``goto(next_state, indent)`` appends what entering a state is (None: accept). With no
    default transition and no match, simple_switch 1.15 goes to the (null) default next
    state, i.e. accepts with no error -- not NoMatch."""
    first = True
    for cond, nxt in trans:
        if cond is None:
            if first:
                goto(nxt, ind)
            else:
                out.append(f"{ind}else:")
                goto(nxt, ind + "  ")
            return
        out.append(f"{ind}{'if' if first else 'elif'} {cond}:")
        goto(nxt, ind + "  ")
        first = False
    if first:
        out.append(f"{ind}return o")
    else:
        out.append(f"{ind}else:")
        out.append(f"{ind}  return o")


class Program:
    """A BMv2 JSON program compiled to Python; see the module doc.

    Public attributes are what the control plane uses: ``tables``, ``actions``,
    ``registers``, ``counters``, ``direct_counters``, ``meters``, ``learn_lists``.
    The data plane calls ``parse``, ``ingress``, ``egress``, ``deparse``,
    ``verify_checksums`` and ``update_checksums``.
    """

    def __init__(self, spec: dict[str, Any] | str | bytes, seed: int | None = None) -> None:
        # The config is untrusted data (it arrives over P4Runtime): see config_check for
        # the three layers that keep it from running code or exhausting the switch.
        if isinstance(spec, bytes | str):
            try:
                spec = json.loads(spec, parse_constant=_reject_constant)
            except (ValueError, UnicodeDecodeError, RecursionError) as e:
                raise CompileError(f"device config is not valid JSON: {type(e).__name__}: {e}") from e
        if not isinstance(spec, dict) or "header_types" not in spec or "pipelines" not in spec:
            raise CompileError("device config is not a BMv2 JSON program (no header_types/pipelines)")
        try:
            check_spec(spec)
        except SpecError as e:
            raise CompileError(f"invalid BMv2 JSON: {e}") from e
        self.spec = spec
        self.rng = random.Random(seed)
        self._src: list[str] = []
        self._ns: dict[str, Any] = {}
        self._uid = 0
        self._nparams: int | None = None  # action parameters of the action being generated
        try:
            self._layout()
            self._build_objects()
            self._gen_all()
        except CompileError:
            raise
        except SpecError as e:
            raise CompileError(f"invalid BMv2 JSON: {e}") from e
        except (KeyError, IndexError, TypeError, ValueError, AttributeError, OverflowError,
                RecursionError, StopIteration, ZeroDivisionError) as e:
            raise CompileError(f"malformed BMv2 JSON: {type(e).__name__}: {e}") from e

    # ------------------------------------------------------------------ layout
    def _layout(self) -> None:
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

    # ------------------------------------------------------------------ objects
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

    # ------------------------------------------------------------------ codegen helpers
    def _name(self, prefix: str) -> str:
        self._uid += 1
        return f"{prefix}{self._uid}"

    def _bind(self, prefix: str, obj: Any) -> str:
        name = self._name(prefix)
        self._ns[name] = obj
        return name

    def _header_base(self, operand: dict[str, Any]) -> str:
        """Python expression for the base slot of a (possibly dynamic) header operand."""
        t, v = operand["type"], operand["value"]
        if t == "header":
            if v in self.headers:
                return str(self.headers[v].base)
            raise CompileError(f"unknown header {v}")
        if t == "expression":
            e = v
            if e["op"] == "dereference_header_stack":
                st = self.stacks[e["left"]["value"]]
                idx = self.expr(e["right"])
                return f"({st.headers[0].base} + ({idx}) * {st.stride})"
            raise CompileError(f"header expression op {e['op']}")
        if t == "stack_field":
            raise CompileError("stack_field used as header")
        raise CompileError(f"operand {t} is not a header")

    def _varbit_len_slot(self, operand: dict[str, Any]) -> int | None:
        """The width slot of a varbit field operand (None: not a varbit field)."""
        if operand.get("type") != "field":
            return None
        h = self.headers.get(self.aliases.get(".".join(operand["value"]), operand["value"])[0])
        if h is None or h.vl < 0 or self.field_slot(operand["value"]) != h.base + 1 + h.vl:
            return None
        return h.base + len(h.fields)

    def _union_invalidate(self, operand: dict[str, Any], ind: str, cond: str) -> list[str]:
        """Statements invalidating the other members of the union ``operand`` belongs
        to (when ``cond``, the member's validity after the operation, holds)."""
        if operand["type"] != "header" or operand["value"] not in self.union_siblings:
            return []
        sibs = "; ".join(f"F[{b}] = 0" for b in self.union_siblings[operand["value"]])
        return [f"{ind}if {cond}: {sibs}"]

    def _stack_last_base(self, st: StackLayout) -> str:
        return f"({st.headers[0].base} + (F[{st.next_slot}] - 1) * {st.stride})"

    def lvalue(self, operand: dict[str, Any]) -> tuple[str, int, bool]:
        """(target expression, bitwidth, signed) of an assignable operand."""
        t, v = operand["type"], operand["value"]
        if t == "field":
            s, w, sg = self.field_info(v)
            return f"F[{s}]", w, sg
        if t == "stack_field":
            st = self.stacks[v[0]]
            h = st.headers[0]
            for i, (n, w, sg) in enumerate(h.fields):
                if n == v[1]:
                    return f"F[{self._stack_last_base(st)} + {1 + i}]", w, sg
            raise CompileError(f"stack {v[0]} has no field {v[1]}")
        if t == "expression" and v["op"] == "access_field":
            hb = self._header_base(v["left"])
            off = _int(v["right"]["value"]) if isinstance(v["right"], dict) else int(v["right"])
            hdr = self._header_of_access(v["left"])
            _, w, sg = hdr.fields[off]
            return f"F[{hb} + {1 + off}]", w, sg
        raise CompileError(f"cannot assign to operand of type {t}")

    def _header_of_access(self, operand: dict[str, Any]) -> HeaderLayout:
        if operand["type"] == "header":
            return self.headers[operand["value"]]
        e = operand["value"]
        return self.stacks[e["left"]["value"]].headers[0]

    def store(self, operand: dict[str, Any], value: str, bits: int | None = None) -> str:
        """Statement assigning ``value`` to an operand, truncated to its width; ``bits``
        bounds the value's bit length when it is known non-negative (``_bits``), and a
        value that already fits is stored without the mask."""
        target, w, sg = self.lvalue(operand)
        if sg:
            return f"{target} = _sgn({value}, {w})"
        if bits is not None and bits <= w:
            return f"{target} = {value}"
        return f"{target} = ({value}) & {(1 << w) - 1:#x}"

    def _bits(self, operand: dict[str, Any] | None) -> int | None:
        """An upper bound on the bit length of an operand's value, for a value that is a
        non-negative int by construction; None when unknown (signed, bool, calls, ...).

        Sound because every PHV slot of an unsigned field holds a value of its width:
        the parser extracts exactly that many bits and every store masks (or, here,
        proves the mask redundant)."""
        if operand is None:
            return None
        t = operand.get("type")
        v = operand.get("value")
        if t == "hexstr":
            n = _int(v)
            return n.bit_length() if n >= 0 else None
        if t == "field":
            if self._varbit_len_slot(operand) is not None:
                return None
            _, w, sg = self.field_info(v)
            return None if sg else w
        if t != "expression":
            return None
        if "op" not in v:
            return self._bits(v)
        op = v["op"]
        lb, rb = self._bits(v.get("left")), self._bits(v.get("right"))
        if op == "&":  # x & c with c >= 0 lies in [0, c] whatever x is
            known = [b for b in (lb, rb) if b is not None]
            return min(known) if known else None
        if lb is None or rb is None:
            return None
        if op == "+":
            return max(lb, rb) + 1
        if op in ("|", "^"):
            return max(lb, rb)
        if op == ">>":
            return lb
        if op in ("?", "?:"):
            return max(lb, rb)
        return None

    def expr(self, operand: dict[str, Any] | None) -> str:
        """Python expression source for a BMv2 JSON operand / expression."""
        if operand is None:
            raise CompileError("missing operand")
        t = operand["type"]
        v = operand.get("value")
        if t == "hexstr":
            return str(_int(v))
        if t == "bool":
            return "True" if v else "False"
        if t == "field":
            return f"F[{self.field_slot(v)}]"
        if t in ("runtime_data", "local"):
            # "local": an action parameter used inside an expression (BMv2 P4Objects.cpp:
            # "runtime data for expressions in actions"), e.g. a slice assignment `f[7:0] = param`.
            i = int(v)
            if self._nparams is not None and not 0 <= i < self._nparams:
                raise CompileError(f"action parameter {i} out of range (the action has {self._nparams})")
            return f"D[{i}]"
        if t == "header":
            return self._header_base(operand)
        if t == "stack_field":
            return self.lvalue(operand)[0]
        if t in ("header_stack", "string"):
            if not isinstance(v, str):
                raise CompileError(f"{t} operand: expected a string, got {type(v).__name__}")
            return repr(v)  # a string literal: data, never code
        if t == "expression":
            if "op" not in v:  # p4c sometimes wraps an expression in a second one
                return self.expr(v)
            return self._op(v)
        if t == "lookahead":  # only valid in parser code, where pkt and o exist
            off, w = int(v[0]), int(v[1])
            return f"_look(pkt, o, {off}, {w})"
        raise CompileError(f"unsupported operand type {t}")

    def _op(self, e: dict[str, Any]) -> str:
        op = e["op"]
        left, right = e.get("left"), e.get("right")
        binops = {"+": "+", "-": "-", "*": "*", "<<": "<<", ">>": ">>", "&": "&", "|": "|",
                  "^": "^", "==": "==", "!=": "!=", ">": ">", ">=": ">=", "<": "<", "<=": "<=",
                  "and": "and", "or": "or"}
        if op in binops:
            if left is None:
                return f"({binops[op]}{self.expr(right)})"
            return f"({self.expr(left)} {binops[op]} {self.expr(right)})"
        if op == "/":
            return f"({self.expr(left)} // {self.expr(right)})"
        if op == "%":
            return f"({self.expr(left)} % {self.expr(right)})"
        if op == "not":
            return f"(not {self.expr(right)})"
        if op == "~":
            return f"(~{self.expr(right)})"
        if op == "d2b":
            return f"({self.expr(right)} != 0)"
        if op == "b2d":
            return f"int({self.expr(right)})"
        if op == "valid":
            return f"(F[{self._header_base(right)}] == 1)"
        if op == "valid_union":
            if right.get("type") != "header_union" or right["value"] not in self.unions:
                # BMv2 refuses it too (p4c 1.2.4 emits this for a union stack element)
                raise CompileError(f"Invalid reference to object of type '{right.get('type')}' "
                                   f"with name '{right.get('value')}'")
            members = self.unions[right["value"]]
            return "(" + " or ".join(f"F[{m.base}] == 1" for m in members) + ")"
        if op in ("?", "?:"):
            c = e["cond"]
            return f"({self.expr(left)} if {self.expr(c)} else {self.expr(right)})"
        if op == "two_comp_mod":
            return f"_sgn({self.expr(left)}, {self.expr(right)})"
        if op == "sat_cast":
            return f"_satc({self.expr(left)}, {self.expr(right)})"
        if op == "usat_cast":
            return f"_usatc({self.expr(left)}, {self.expr(right)})"
        if op == "access_field":
            return self.lvalue({"type": "expression", "value": e})[0]
        if op == "dereference_header_stack":
            return self._header_base({"type": "expression", "value": e})
        if op in ("last_stack_index", "size_stack") and (right or left)["value"] in self.union_stacks:
            elems, nslot = self.union_stacks[(right or left)["value"]]
            return f"(F[{nslot}] - 1)" if op == "last_stack_index" else str(len(elems))
        if op == "last_stack_index":
            st = self.stacks[right["value"] if right else left["value"]]
            return f"(F[{st.next_slot}] - 1)"
        if op == "size_stack":
            st = self.stacks[right["value"] if right else left["value"]]
            return str(len(st.headers))
        if op == "min":
            return f"min({self.expr(left)}, {self.expr(right)})"
        if op == "max":
            return f"max({self.expr(left)}, {self.expr(right)})"
        raise CompileError(f"unsupported expression op {op!r}")

    # ------------------------------------------------------------------ primitives
    def primitive(self, p: dict[str, Any], out: list[str], ind: str) -> None:
        """Append the statements of one primitive call to ``out``."""
        op = p["op"]
        a = p.get("parameters", [])
        sm = self.sm
        if op == "assign_VL" or (op in ("assign", "modify_field") and self._varbit_len_slot(a[0]) is not None):
            # varbit = varbit (BMv2 assign_VL): value and current width
            dl, sl = self._varbit_len_slot(a[0]), self._varbit_len_slot(a[1])
            if dl is None or sl is None:
                raise CompileError("a varbit field can only be assigned from a varbit field")
            out.append(f"{ind}F[{self.field_slot(a[0]['value'])}] = F[{self.field_slot(a[1]['value'])}]; "
                       f"F[{dl}] = F[{sl}]")
        elif op in ("assign", "modify_field"):
            out.append(ind + self.store(a[0], self.expr(a[1]), self._bits(a[1])))
        elif op == "assign_header":
            dst, src = self._header_base(a[0]), self._header_base(a[1])
            n = len(self._header_of_access(a[0]).fields) + 1
            out.append(f"{ind}_d = {dst}; _s = {src}; F[_d:_d + {n}] = F[_s:_s + {n}]")
            out.extend(self._union_invalidate(a[0], ind, "F[_d]"))
        elif op == "assign_header_stack":
            d, s = self.stacks[a[0]["value"]], self.stacks[a[1]["value"]]
            n = len(d.headers) * d.stride
            db, sb = d.headers[0].base, s.headers[0].base
            out.append(f"{ind}F[{db}:{db + n}] = F[{sb}:{sb + n}]; F[{d.next_slot}] = F[{s.next_slot}]")
        elif op == "add_header" and self._header_of_access(a[0]).vl >= 0:
            # BMv2 resets the fields but keeps the varbit's width, and counts it
            h = self._header_of_access(a[0])
            n = len(h.fields)
            out.append(f"{ind}_b = {self._header_base(a[0])}")
            out.append(f"{ind}if not F[_b]: F[_b:_b + {n}] = _ZERO{n}; F[{PKTLEN}] += {h.nbits // 8} + (F[_b + {n}] >> 3)")
            self._ns[f"_ZERO{n}"] = [1] + [0] * (n - 1)
            out.extend(self._union_invalidate(a[0], ind, "1"))
        elif op == "add_header":
            hb = self._header_base(a[0])
            n = len(self._header_of_access(a[0]).fields)
            nb = self._header_of_access(a[0]).nbits // 8
            out.append(f"{ind}_b = {hb}")
            out.append(f"{ind}if not F[_b]: F[_b:_b + {n + 1}] = _ZERO{n + 1}; F[{PKTLEN}] += {nb}")
            self._ns[f"_ZERO{n + 1}"] = [1] + [0] * n
            out.extend(self._union_invalidate(a[0], ind, "1"))
        elif op == "remove_header":
            h = self._header_of_access(a[0])
            nb = h.nbits // 8
            vl = f" + (F[_b + {len(h.fields)}] >> 3)" if h.vl >= 0 else ""
            out.append(f"{ind}_b = {self._header_base(a[0])}")
            out.append(f"{ind}if F[_b]: F[_b] = 0; F[{PKTLEN}] -= {nb}{vl}")
        elif op in ("push", "pop") and a[0]["type"] == "header_union_stack":
            elems, nslot = self.union_stacks[a[0]["value"]]
            stride = elems[1][0].base - elems[0][0].base if len(elems) > 1 else 0
            fn = "_upush" if op == "push" else "_upop"
            out.append(f"{ind}{fn}(F, {elems[0][0].base}, {len(elems)}, {stride}, {nslot}, {self.expr(a[1])})")
        elif op in ("push", "pop"):
            st = self.stacks[a[0]["value"]]
            cnt = self.expr(a[1])
            fn = "_push" if op == "push" else "_pop"
            out.append(f"{ind}{fn}(F, {st.headers[0].base}, {len(st.headers)}, {st.stride}, {st.next_slot}, {cnt})")
        elif op == "mark_to_drop":
            out.append(f"{ind}F[{sm['egress_spec']}] = 511")
            if sm.get("mcast_grp") is not None:
                out.append(f"{ind}F[{sm['mcast_grp']}] = 0")
        elif op == "exit":
            out.append(f"{ind}F[{EXIT}] = 1")
            out.append(f"{ind}return")
        elif op == "modify_field_with_hash_based_offset":
            calc = self._calc_fn(a[2]["value"])
            base, size = self.expr(a[1]), self.expr(a[3])
            # simple_switch treats a max of 0 as 1 (the result is then just base).
            out.append(f"{ind}_sz = {size} or 1")
            out.append(ind + self.store(a[0], f"{base} + {calc}(F) % _sz"))
        elif op == "modify_field_rng_uniform":
            # lo > hi: simple_switch leaves the destination unchanged
            out.append(f"{ind}_lo = {self.expr(a[1])}; _hi = {self.expr(a[2])}")
            out.append(f"{ind}if _lo <= _hi: " + self.store(a[0], "_rand(_lo, _hi)"))
        elif op == "register_read":
            reg = self.registers[a[1]["value"]]
            cells = self._bind("_R", reg.cells)
            out.append(f"{ind}_i = {self.expr(a[2])}")
            # out of bounds: simple_switch leaves the destination unchanged
            out.append(f"{ind}if 0 <= _i < {reg.size}: " + self.store(a[0], f"{cells}[_i]", reg.bitwidth))
        elif op == "register_write":
            reg = self.registers[a[0]["value"]]
            cells = self._bind("_R", reg.cells)
            out.append(f"{ind}_i = {self.expr(a[1])}")
            val, vb = self.expr(a[2]), self._bits(a[2])
            val = val if vb is not None and vb <= reg.bitwidth else f"({val}) & {reg.mask:#x}"
            out.append(f"{ind}if 0 <= _i < {reg.size}: {cells}[_i] = {val}")
        elif op == "count":
            c = self._bind("_C", self.counters[a[0]["value"]])
            out.append(f"{ind}{c}.count({self.expr(a[1])}, F[{ILEN}])")
        elif op == "execute_meter":
            m = self._bind("_M", self.meters[a[0]["value"]])
            out.append(ind + self.store(a[2], f"{m}.execute({self.expr(a[1])}, F[{ILEN}], _now())"))
        elif op == "clone_ingress_pkt_to_egress" or op == "clone_egress_pkt_to_egress":
            fl = self.expr(a[1]) if len(a) > 1 else "0"
            out.append(f"{ind}F[{CLONE}] = {FLAG} | ({self.expr(a[0])}); F[{CLONE_FL}] = {fl}")
        elif op == "resubmit":
            fl = self.expr(a[0]) if a else "0"
            out.append(f"{ind}F[{RESUBMIT}] = {FLAG} | ({fl})")
        elif op == "recirculate":
            fl = self.expr(a[0]) if a else "0"
            out.append(f"{ind}F[{RECIRC}] = {FLAG} | ({fl})")
        elif op == "generate_digest":
            out.append(f"{ind}F[{LEARN}] = {self.expr(a[1])}")
        elif op == "truncate":
            out.append(f"{ind}F[{TRUNCATE}] = {self.expr(a[0])}")
        elif op == "log_msg":
            fmt = a[0]["value"]
            if not isinstance(fmt, str):
                raise CompileError("log_msg: the format is not a string")
            args = [self.expr(x) for x in a[1]["value"]] if len(a) > 1 else []
            out.append(f"{ind}_log({fmt!r}, [{', '.join(args)}])")
        elif op in ("assert", "assume"):
            out.append(f"{ind}if not ({self.expr(a[0])}): _log('assertion failed: ' + {op!r}, [])")
        elif op in ("add", "subtract"):  # P4_14-era primitives
            sign = "+" if op == "add" else "-"
            out.append(ind + self.store(a[0], f"{self.expr(a[1])} {sign} {self.expr(a[2])}"))
        else:
            raise CompileError(f"unsupported primitive {op!r}")

    def _calc_fn(self, name: str) -> str:
        """Name of a generated function computing calculation ``name`` over the PHV."""
        key = f"_calc::{name}"
        if key in self._ns:
            return self._ns[key]
        calc = self.calculations.get(name)
        if calc is None:
            raise CompileError(f"unknown calculation {name}")
        algo_name = calc["algo"]
        if algo_name not in HASH_ALGOS:
            raise CompileError(f"unsupported hash algorithm {algo_name!r}")
        algo_fn = HASH_ALGOS[algo_name]()
        algo = self._bind("_A", algo_fn)
        fname = self._name("_calc")
        lines = [f"def {fname}(F, P=b''):", "    v = 0; n = 0"]
        run: list[tuple[int, int, bool]] = []  # consecutive fields under one validity test
        run_cond = ""

        def flush() -> None:
            if run:
                total = sum(w for _, w, _ in run)
                parts, shift = [], total
                for s, w, sg in run:
                    shift -= w
                    # an unsigned field's slot holds its width; a signed one may be negative
                    f = f"(F[{s}] & {(1 << w) - 1:#x})" if sg else f"F[{s}]"
                    parts.append(f"({f} << {shift})" if shift else f)
                lines.append(f"    {run_cond}v = (v << {total}) | {' | '.join(parts)}; n += {total}")
                run.clear()

        for e in calc["input"]:
            t = e["type"]
            if t == "field":
                s, w, sg = self.field_info(e["value"])
                hdr = self.headers[self.aliases.get(".".join(e["value"]), e["value"])[0]]
                cond = "" if hdr.metadata else f"if F[{hdr.base}]: "
                if hdr.vl >= 0 and s == hdr.base + 1 + hdr.vl:  # a varbit field: its current width
                    flush()
                    ln = f"F[{hdr.base + len(hdr.fields)}]"
                    lines.append(f"    {cond}v = (v << {ln}) | F[{s}]; n += {ln}")
                    continue
                if run and cond != run_cond:
                    flush()
                run_cond = cond
                run.append((s, w, sg))
                continue
            flush()
            if t == "hexstr":
                w = int(e["bitwidth"])
                lines.append(f"    v = (v << {w}) | {_int(e['value']) & ((1 << w) - 1)}; n += {w}")
            elif t == "header":
                h = self.headers[e["value"]]
                if h.vl >= 0:
                    raise CompileError(f"calculation {name}: whole header {h.name} with a varbit field")
                parts = " | ".join(
                    f"((F[{h.base + 1 + i}] & {(1 << w) - 1:#x}) << {sum(x[1] for x in h.fields[i + 1:])})"
                    for i, (_, w, _) in enumerate(h.fields)
                )
                lines.append(f"    if F[{h.base}]: v = (v << {h.nbits}) | {parts}; n += {h.nbits}")
            elif t == "payload":
                lines.append("    pay = True")
            else:
                raise CompileError(f"calculation {name}: input type {t}")
        flush()
        lines.append("    nb = (n + 7) >> 3")
        payload = any(e["type"] == "payload" for e in calc["input"])
        if algo_fn is csum16 and not payload:
            # csum16 of the bytes, without making them: the buffer as one integer
            # (zero-padded to whole 16-bit words) modulo 0xFFFF, as csum16() computes
            lines.append("    x = v << (nb * 8 - n + (8 if nb & 1 else 0))")
            lines.append("    s = x % 0xFFFF")
            lines.append("    return ~(0xFFFF if s == 0 and x else s) & 0xFFFF")
        else:
            lines.append("    buf = (v << (nb * 8 - n)).to_bytes(nb, 'big')")
            if payload:
                lines.append("    buf += bytes(P)")
            lines.append(f"    return {algo}(buf)")
        self._src.append("\n".join(lines))
        self._ns[key] = fname
        return fname

    # ------------------------------------------------------------------ actions
    def _gen_action(self, a: dict[str, Any]) -> str:
        fname = f"_act{int(a['id'])}"
        self._nparams = len(a["runtime_data"])
        try:
            return self._gen_action_body(a, fname)
        finally:
            self._nparams = None

    def _gen_action_body(self, a: dict[str, Any], fname: str) -> str:
        prims = a["primitives"]
        lines = [f"def {fname}(F, D):"]
        if not prims:
            lines.append("    pass")
        elif any(p["op"] in ("_jump", "_jump_if_zero") for p in prims):
            # p4c lowers `if` inside actions to jumps: run them with a program counter.
            lines.append("    pc = 0")
            lines.append("    while True:")
            for i, p in enumerate(prims):
                lines.append(f"        {'if' if i == 0 else 'elif'} pc == {i}:")
                if p["op"] == "_jump":
                    lines.append(f"            pc = {_int(p['parameters'][0]['value'])}; continue")
                elif p["op"] == "_jump_if_zero":
                    cond = self.expr(p["parameters"][0])
                    tgt = _int(p["parameters"][1]["value"])
                    lines.append(f"            if not ({cond}): pc = {tgt}; continue")
                else:
                    self.primitive(p, lines, "            ")
                lines.append(f"            pc = {i + 1}")
            lines.append("        else:")
            lines.append("            return")
        else:
            for p in prims:
                self.primitive(p, lines, "    ")
            lines = _hoist_index_guards(_drop_repeated_index(lines))
        self._src.append("\n".join(lines))
        return fname

    # ------------------------------------------------------------------ parser
    def _gen_parser(self, parser: dict[str, Any]) -> None:
        states = {s["name"]: i for i, s in enumerate(parser["parse_states"])}
        by_name = {s["name"]: s for s in parser["parse_states"]}
        init = parser["init_state"]
        inline = self._parser_inline(parser, by_name, init)
        lines = ["def _parse(F, pkt):", "    o = 0; n = len(pkt)", "    try:"]
        if inline is not None:
            # An acyclic parse graph: each path is straight-line code, nested ifs for
            # the transitions, no state variable or dispatch loop.
            lines += inline
        else:
            lines += [f"      st = {states[init]}", "      while True:"]

            def goto(nxt: str | None, ind: str) -> None:
                lines.append(f"{ind}st = {states[nxt]}" if nxt is not None else f"{ind}return o")

            for i, s in enumerate(parser["parse_states"]):
                lines.append(f"        {'if' if i == 0 else 'elif'} st == {i}:")
                body, trans = self._parser_state(s, "          ")
                lines.extend(body)
                _emit_transitions(trans, "          ", lines, goto)
            lines.append("        else: return o")
        lines.append("    except _PE as e:")
        lines.append(f"        F[{self.sm['parser_error']}] = e.code")
        lines.append("        return o")
        self._src.append("\n".join(lines))

    _PARSER_INLINE_LINES = 1500  # beyond this many lines of inlined paths, a state machine

    def _parser_inline(self, parser: dict[str, Any], by_name: dict[str, dict[str, Any]],
                       init: str) -> list[str] | None:
        """The parser as nested straight-line code, or None where that does not apply: a
        loop in the parse graph (header stacks), a value set (its uses are registered
        once per transition) or too many paths."""
        for st in parser["parse_states"]:
            if any(tr.get("type") == "parse_vset" for tr in st["transitions"]):
                return None
        # acyclic? (depth-first search, grey = on the current path)
        colour: dict[str, int] = {}

        def cyclic(name: str) -> bool:
            colour[name] = 1
            for tr in by_name[name]["transitions"]:
                nxt = tr["next_state"]
                if nxt is None:
                    continue
                if nxt not in by_name:
                    raise CompileError(f"parser: unknown state {nxt!r}")
                if colour.get(nxt) == 1 or (nxt not in colour and cyclic(nxt)):
                    return True
            colour[name] = 2
            return False

        if cyclic(init):
            return None
        out: list[str] = []

        def emit(nxt: str | None, ind: str) -> None:
            if nxt is None:
                out.append(f"{ind}return o")
                return
            if len(out) > self._PARSER_INLINE_LINES:
                raise _TooLong
            body, trans = self._parser_state(by_name[nxt], ind)
            out.extend(body)
            _emit_transitions(trans, ind, out, emit)

        try:
            emit(init, "      ")
        except _TooLong:
            return None
        return out

    def _parser_state(self, s: dict[str, Any], ind: str) -> tuple[list[str], list[tuple[str | None, str | None]]]:
        """One parse state: its statements (operations, then the transition key ``k``) and
        its transitions in order, (condition or None for the default, next state)."""
        body: list[str] = []
        for op in s["parser_ops"]:
            self._parser_op(op, body, ind)
        key_parts = []
        key_bits = 0
        key_widths: list[int] = []  # value sets need the fields' own widths
        for k in s.get("transition_key", []):
            if k["type"] == "field":
                sl, w, _ = self.field_info(k["value"])
                wb = (w + 7) // 8 * 8
                key_parts.append((f"F[{sl}]", wb))
                key_bits += wb
                key_widths.append(w)
            elif k["type"] == "stack_field":
                tgt, w, _ = self.lvalue(k)
                wb = (w + 7) // 8 * 8
                key_parts.append((tgt, wb))
                key_bits += wb
                key_widths.append(w)
            elif k["type"] == "lookahead":
                off, w = int(k["value"][0]), int(k["value"][1])
                wb = (w + 7) // 8 * 8
                key_parts.append((f"_look(pkt, o, {off}, {w})", wb))
                key_bits += wb
                key_widths.append(w)
            elif k["type"] == "expression":
                raise CompileError("expression in transition key")
            else:
                raise CompileError(f"transition key type {k['type']}")
        if key_parts:
            expr, shift = [], key_bits
            for src, wb in key_parts:
                shift -= wb
                expr.append(f"({src} << {shift})" if shift else f"({src})")
            body.append(f"{ind}k = {' | '.join(expr)}")
        trans: list[tuple[str | None, str | None]] = []
        for tr in s["transitions"]:
            nxt = tr["next_state"]
            ttype = tr.get("type", "hexstr")
            if ttype == "default":
                trans.append((None, nxt))
                break
            if ttype == "hexstr":
                val = _int(tr["value"])
                mask = tr.get("mask")
                cond = f"k & {_int(mask)} == {val & _int(mask)}" if mask is not None else f"k == {val}"
            elif ttype == "parse_vset":
                vs = self.value_sets.get(tr["value"])
                if vs is None:
                    raise CompileError(f"unknown parser value set {tr['value']!r}")
                mask = tr.get("mask")
                shadow = vs.add_use(key_widths, _int(mask) if mask is not None else None)
                sname = self._bind("_VS", shadow)
                cond = f"k & {_int(mask)} in {sname}.keys" if mask is not None else f"k in {sname}.keys"
            else:
                raise CompileError(f"transition type {ttype}")
            trans.append((cond, nxt))
        return body, trans

    def _extract_vl_lines(self, h: HeaderLayout, base: str, length: str, ind: str, out: list[str]) -> None:
        """extract(hdr, length) as BMv2's extract_VL: the length must be whole bytes
        (ParserInvalidArgument), then fit the packet (PacketTooShort), then the header's
        maximum size (HeaderTooShort)."""
        if h.nbits % 8:
            raise CompileError(f"header {h.name}: fixed fields are not a whole number of bytes")
        fixed = h.nbits // 8
        e = self.errors
        out.append(f"{ind}_vl = {length}")
        out.append(f"{ind}if _vl % 8: raise _PE({e.get('ParserInvalidArgument', 6)})")
        out.append(f"{ind}_nb = {fixed} + (_vl >> 3)")
        out.append(f"{ind}if o + _nb > n: raise _PE({e['PacketTooShort']})")
        if h.vl_max_bytes:
            out.append(f"{ind}if _nb > {h.vl_max_bytes}: raise _PE({e['HeaderTooShort']})")
        out.append(f"{ind}v = int.from_bytes(pkt[o:o + _nb], 'big'); o += _nb")
        after = sum(w for _, w, _ in h.fields[h.vl + 1:])
        for i, (_, w, sg) in enumerate(h.fields[:-1]):
            if i == h.vl:
                val = f"(v >> {after}) & ((1 << _vl) - 1)"
            else:
                rest = sum(x for _, x, _ in h.fields[i + 1:])
                shift = f"{rest} + _vl" if i < h.vl else str(rest)
                val = f"(v >> ({shift})) & {(1 << w) - 1:#x}"
                if sg:
                    val = f"_sgn({val}, {w})"
            out.append(f"{ind}F[{base} + {1 + i}] = {val}")
        out.append(f"{ind}F[{base} + {len(h.fields)}] = _vl")
        out.append(f"{ind}F[{base}] = 1")

    def _extract_lines(self, h: HeaderLayout, base: str, ind: str, out: list[str]) -> None:
        if h.vl >= 0:
            raise CompileError(f"header {h.name} has a varbit field: 'extract' needs a length (extract_VL)")
        if h.nbits % 8:
            raise CompileError(f"header {h.name} is not a whole number of bytes")
        nb = h.nbits // 8
        out.append(f"{ind}if o + {nb} > n: raise _PE({self.errors['PacketTooShort']})")
        # one struct.unpack_from into small integers, then shifts and masks on those:
        # cheaper than slicing a bignum of the whole header field by field
        fmt, chunks = _struct_plan(h.fields)
        st = self._bind("_ST", _struct.Struct(fmt))
        names = [f"u{k}" for k in range(len(fmt) - 1)]
        out.append(f"{ind}{', '.join(names)}{',' if len(names) == 1 else ''} = {st}.unpack_from(pkt, o); o += {nb}")
        vals: list[str] = []
        k = 0
        for pieces, members in chunks:
            rest = sum(pieces) * 8
            terms = []
            for size in pieces:
                rest -= size * 8
                terms.append(f"(u{k} << {rest})" if rest else f"u{k}")
                k += 1
            c = terms[0] if len(terms) == 1 else f"({' | '.join(terms)})"
            for _, w, shift, sg in members:
                if len(members) == 1:
                    val = c
                else:
                    val = f"({c} >> {shift}) & {(1 << w) - 1:#x}" if shift else f"{c} & {(1 << w) - 1:#x}"
                vals.append(f"_sgn({val}, {w})" if sg else val)
        if base.isdigit():
            b = int(base)
            out.append(f"{ind}F[{b + 1}:{b + 1 + len(vals)}] = ({', '.join(vals)},)")
        else:
            out.extend(f"{ind}F[{base} + {1 + i}] = {val}" for i, val in enumerate(vals))
        out.append(f"{ind}F[{base}] = 1")

    def _parser_op(self, op: dict[str, Any], out: list[str], ind: str) -> None:
        name = op["op"]
        params = op["parameters"]
        if name == "extract":
            p = params[0]
            if p["type"] == "regular":
                h = self.headers[p["value"]]
                self._extract_lines(h, str(h.base), ind, out)
                for sb in self.union_siblings.get(h.name, []):
                    out.append(f"{ind}F[{sb}] = 0")
            elif p["type"] == "union_stack":
                elems, nslot = self.union_stacks[p["value"][0]]
                names = [m.name.rsplit(".", 1)[-1] for m in elems[0]]
                k = names.index(p["value"][1])
                first = elems[0][k]
                stride = elems[1][0].base - elems[0][0].base if len(elems) > 1 else 0
                out.append(f"{ind}_i = F[{nslot}]")
                out.append(f"{ind}if _i >= {len(elems)}: raise _PE({self.errors['StackOutOfBounds']})")
                out.append(f"{ind}_b = {first.base} + _i * {stride}")
                self._extract_lines(first, "_b", ind, out)
                for o in elems[0]:
                    if o is not first:
                        out.append(f"{ind}F[{o.base} + _i * {stride}] = 0")
                out.append(f"{ind}F[{nslot}] = _i + 1")
            elif p["type"] == "stack":
                st = self.stacks[p["value"]]
                out.append(f"{ind}_i = F[{st.next_slot}]")
                out.append(f"{ind}if _i >= {len(st.headers)}: raise _PE({self.errors['StackOutOfBounds']})")
                out.append(f"{ind}_b = {st.headers[0].base} + _i * {st.stride}")
                self._extract_lines(st.headers[0], "_b", ind, out)
                out.append(f"{ind}F[{st.next_slot}] = _i + 1")
            else:
                raise CompileError(f"extract of {p['type']} is not supported")
        elif name == "set":
            if params[1]["type"] == "lookahead":
                # BMv2 (ParserOpSet<ParserLookAhead>) checks only the width, not the offset.
                nb = (int(params[1]["value"][1]) + 7) // 8
                out.append(f"{ind}if n - o < {nb}: raise _PE({self.errors['PacketTooShort']})")
            out.append(ind + self.store(params[0], self.expr(params[1]), self._bits(params[1])))
        elif name == "verify":
            cond = self.expr(params[0])
            err = self.expr(params[1]) if params[1]["type"] != "error" else str(self.errors[params[1]["value"]])
            out.append(f"{ind}if not ({cond}): raise _PE({err})")
        elif name == "primitive":
            for p in params:
                self.primitive(p, out, ind)
        elif name == "advance":
            bits = self.expr(params[0])
            out.append(f"{ind}_a = ({bits}) >> 3")
            out.append(f"{ind}if o + _a > n: raise _PE({self.errors['PacketTooShort']})")
            out.append(f"{ind}o += _a")
        elif name == "extract_VL":
            p = params[0]
            length = self.expr(params[1])
            if p["type"] == "regular":
                h = self.headers[p["value"]]
                self._extract_vl_lines(h, str(h.base), length, ind, out)
                for sb in self.union_siblings.get(h.name, []):
                    out.append(f"{ind}F[{sb}] = 0")
            elif p["type"] == "stack":
                st = self.stacks[p["value"]]
                out.append(f"{ind}_i = F[{st.next_slot}]")
                out.append(f"{ind}if _i >= {len(st.headers)}: raise _PE({self.errors['StackOutOfBounds']})")
                out.append(f"{ind}_b = {st.headers[0].base} + _i * {st.stride}")
                self._extract_vl_lines(st.headers[0], "_b", length, ind, out)
                out.append(f"{ind}F[{st.next_slot}] = _i + 1")
            else:
                raise CompileError(f"extract_VL of {p['type']} is not supported")
        else:
            raise CompileError(f"unsupported parser op {name!r}")

    # ------------------------------------------------------------------ deparser
    def _gen_deparser(self, dep: dict[str, Any]) -> None:
        lines = ["def _deparse(F, payload):", "    out = []"]
        for hname in dep["order"]:
            h = self.headers[hname]
            if h.vl >= 0:
                lines.append(self._deparse_vl(h))
                continue
            fmt, chunks = _struct_plan(h.fields)
            st = self._bind("_ST", _struct.Struct(fmt))
            args = []
            for pieces, members in chunks:
                parts = []
                for i, w, shift, sg in members:
                    fv = f"F[{h.base + 1 + i}]"
                    if sg:
                        fv = f"({fv} & {(1 << w) - 1:#x})"
                    parts.append(f"({fv} << {shift})" if shift else fv)
                c = " | ".join(parts)
                if len(pieces) == 1:
                    args.append(c)
                    continue
                rest = sum(pieces) * 8
                for n, size in enumerate(pieces):
                    rest -= size * 8
                    src = f"(_c := {c})" if n == 0 else "_c"
                    args.append(f"({src} >> {rest}) & {(1 << size * 8) - 1:#x}" if rest else f"{src} & {(1 << size * 8) - 1:#x}")
            lines.append(f"    if F[{h.base}]: out.append({st}.pack({', '.join(args)}))")
        lines.append("    out.append(payload)")
        lines.append("    return b''.join(out)")
        self._src.append("\n".join(lines))

    def _deparse_vl(self, h: HeaderLayout) -> str:
        """Emit a header with a varbit field: its bits as extracted (or assigned)."""
        b = h.base
        parts = []
        for i, (_, w, sg) in enumerate(h.fields[:-1]):
            fv = f"F[{b + 1 + i}]"
            rest = sum(x for _, x, _ in h.fields[i + 1:])
            if i == h.vl:
                parts.append(f"({fv} << {rest})" if rest else fv)
                continue
            if sg:
                fv = f"({fv} & {(1 << w) - 1:#x})"
            shift = f"({rest} + _l)" if i < h.vl else str(rest)
            parts.append(f"({fv} << {shift})" if shift != "0" else fv)
        return (f"    if F[{b}]: _l = F[{b + len(h.fields)}]; "
                f"out.append(({' | '.join(parts)}).to_bytes({h.nbits // 8} + (_l >> 3), 'big'))")

    # ------------------------------------------------------------------ checksums
    def _gen_checksums(self) -> None:
        ver = ["def _verify_checksums(F):", "    bad = 0"]
        upd = ["def _update_checksums(F, P=b''):"]
        for c in self.spec.get("checksums", []):
            calc = self._calc_fn(c["calculation"])
            tgt, w, _ = self.lvalue({"type": "field", "value": c["target"]})
            cond = self.expr(c["if_cond"]) if c.get("if_cond") else "True"
            if c.get("verify"):
                ver.append(f"    if ({cond}) and ({calc}(F) & {(1 << w) - 1:#x}) != {tgt}: bad = 1")
            if c.get("update"):
                upd.append(f"    if {cond}: {tgt} = {calc}(F, P) & {(1 << w) - 1:#x}")
        ver.append("    return bad")
        if len(upd) == 1:
            upd.append("    pass")
        self._src.append("\n".join(ver))
        self._src.append("\n".join(upd))

    # ------------------------------------------------------------------ pipelines
    def _gen_pipeline(self, pl: dict[str, Any]) -> None:
        nodes: dict[str, str] = {}
        for t in pl["tables"]:
            nodes[t["name"]] = self._name("_n")
        for c in pl.get("conditionals", []):
            nodes[c["name"]] = self._name("_n")

        def ref(name: str | None) -> str:
            return "None" if name is None else nodes[name]

        conds = {c["name"]: c for c in pl.get("conditionals", [])}

        def follow(name: str | None, depth: int = 0) -> str:
            """The next node as an expression: conditionals (pure reads of the PHV)
            evaluated in place, a few levels deep, instead of being called one by one
            through the pipeline loop."""
            c = conds.get(name) if name is not None else None
            if c is None or depth >= _INLINE_DEPTH:
                return ref(name)
            return (f"({follow(c.get('true_next'), depth + 1)} if {self.expr(c['expression'])} "
                    f"else {follow(c.get('false_next'), depth + 1)})")

        tables_by_name = {t["name"]: t for t in pl["tables"]}
        for t in pl["tables"]:
            tbl = self._make_table(t)
            tname = self._bind("_T", tbl)
            key_src = []
            for k in t["key"]:
                mt = k["match_type"]
                if mt == "valid":
                    key_src.append(f"F[{self.headers[k['target']].base}]")
                    continue
                s, w, _ = self.field_info(k["target"])
                src = f"F[{s}]"
                if k.get("mask"):
                    src = f"({src} & {_int(k['mask'])})"
                key_src.append(src)
            keyexpr = f"({', '.join(key_src)},)" if key_src else "()"
            if tbl.profile is not None:
                self._gen_indirect_node(t, tbl, tname, keyexpr, nodes[t["name"]], ref, follow)
                self.tables[t["name"]] = tbl
                continue
            # Only an action that calls exit() can stop the pipeline here.
            exits = any(self._action_exits.get(i, True) for i in t.get("action_ids", [])) or not t.get("action_ids")
            exit_check = [f"    if F[{EXIT}]: return None"] if exits else []
            if not key_src:
                # A keyless table (p4c wraps every bare action call in one) always
                # misses: its default action, which the control plane may change.
                lines = [f"def {nodes[t['name']]}(F):", f"    c = {tname}.default"]
                if t["name"] in self.direct_counters.values():
                    lines.append(f"    {tname}.default_packets += 1; {tname}.default_bytes += F[{ILEN}]")
                lines += ["    c.fn(F, c.params)", *exit_check, self._next_node(t, ref, follow, "c.name")]
                self._src.append("\n".join(lines))
                self.tables[t["name"]] = tbl
                continue
            lookup = f"{tname}.lookup({keyexpr})"
            lines = [f"def {nodes[t['name']]}(F):",
                     f"    e = {lookup}",
                     "    if e is None:",
                     f"        c = {tname}.default",
                     ]
            if t["name"] in self.direct_counters.values():
                lines.append(f"        {tname}.default_packets += 1; {tname}.default_bytes += F[{ILEN}]")
            lines += ["        c.fn(F, c.params)", "    else:", "        c = e.action"]
            if t["name"] in self.direct_counters.values():
                lines.append(f"        e.packets += 1; e.bytes += F[{ILEN}]")
            dm = t.get("direct_meters")
            if dm:
                mspec = self._direct_meter_specs[dm]
                target, _, _ = self.lvalue({"type": "field", "value": mspec["result_target"]})
                unit = mspec.get("type", "packets")
                if unit not in ("packets", "bytes"):
                    raise CompileError(f"direct meter {dm}: unit {unit!r}")
                # BMv2 runs the direct meter on a hit, before the action.
                lines.insert(-1, f"        {target} = _dmx(e, {unit!r}, F[{ILEN}])")
            lines.append("        c.fn(F, c.params)")
            lines += exit_check
            lines.append(self._next_node(t, ref, follow, "c.name"))
            self._src.append("\n".join(lines))
            self.tables[t["name"]] = tbl
        del tables_by_name
        for c in pl.get("conditionals", []):
            lines = [f"def {nodes[c['name']]}(F):",
                     f"    return {follow(c['name'])}"]
            self._src.append("\n".join(lines))
        init = pl.get("init_table")
        if pl["name"] not in ("ingress", "egress"):  # the only two compiled (_gen_all)
            raise CompileError(f"pipeline {pl['name']!r}")
        lines = [f"def _pipe_{pl['name']}(F):", f"    n = {follow(init)}", "    while n is not None:", "        n = n(F)"]
        self._src.append("\n".join(lines))

    def _gen_indirect_node(self, t: dict[str, Any], tbl: state.Table, tname: str, keyexpr: str, fname: str,
                           ref: Callable[[str | None], str],
                           follow: Callable[[str | None], str]) -> None:
        """A table node with an action profile: a hit picks the member's action (from the
        group by the selector hash); a miss runs the default, BMv2's no-op until set."""
        ap = self._bind("_AP", tbl.profile)
        plen = f"F[{ILEN}]"  # counters and meters count the ingress length, as in BMv2
        counted = t["name"] in self.direct_counters.values()
        lines = [f"def {fname}(F):",
                 f"    e = {tname}.lookup({keyexpr})" if keyexpr != "()" else "    e = None",
                 "    if e is None:",
                 f"        c = {tname}.default"]
        if counted:
            lines.append(f"        {tname}.default_packets += 1; {tname}.default_bytes += {plen}")
        lines += ["    else:", f"        c = {ap}.pick(e.action, F)"]
        if counted:
            lines.append(f"        e.packets += 1; e.bytes += {plen}")
        if t.get("direct_meters"):
            mspec = self._direct_meter_specs[t["direct_meters"]]
            target, _, _ = self.lvalue({"type": "field", "value": mspec["result_target"]})
            unit = mspec.get("type", "packets")
            if unit not in ("packets", "bytes"):
                raise CompileError(f"direct meter of table {t['name']}: unit {unit!r}")
            lines.append(f"        {target} = _dmx(e, {unit!r}, {plen})")
        lines += ["    if c is not None: c.fn(F, c.params)", f"    if F[{EXIT}]: return None"]
        # the empty default action (c.name "") and an empty group go to the table's base
        # next node, like BMv2's default_default_entry
        lines.append(self._next_node(t, ref, follow, "c.name if c is not None else ''",
                                     default_to_base=True))
        self._src.append("\n".join(lines))

    def _next_node(self, t: dict[str, Any], ref: Callable[[str | None], str],
                   follow: Callable[[str | None], str], action_name: str,
                   default_to_base: bool = False) -> str:
        """The ``return`` line of a table node: by hit/miss, or by the action that ran
        (``action_name``, an expression; an unlisted one goes to the base next node when
        ``default_to_base``). ``follow`` turns a statically known next node into an
        expression (conditionals evaluated in place)."""
        nt = t.get("next_tables", {})
        if "__HIT__" in nt or "__MISS__" in nt:
            return f"    return {follow(nt.get('__MISS__'))} if e is None else {follow(nt.get('__HIT__'))}"
        distinct = set(nt.values())
        if len(distinct) <= 1:
            return f"    return {follow(distinct.pop() if distinct else t.get('base_default_next'))}"
        nmap = self._name("_NX")
        self._deferred.append((nmap, dict(nt.items()), ref))
        if default_to_base:
            return f"    return {nmap}.get({action_name}, {ref(t.get('base_default_next'))})"
        return f"    return {nmap}[{action_name}]"

    def _make_table(self, t: dict[str, Any]) -> state.Table:
        ttype = t.get("type", "simple")
        if ttype not in ("simple", "indirect", "indirect_ws"):
            raise CompileError(f"table {t['name']}: unknown table type {ttype!r}")
        keys = []
        for k in t["key"]:
            mt = k["match_type"]
            if mt == "valid":
                keys.append(state.KeyField(k.get("name", k["target"]), "exact", 1))
                continue
            _, w, _ = self.field_info(k["target"])
            keys.append(state.KeyField(k.get("name", ".".join(k["target"])), mt, w))
        action_names = [self.actions_by_id[i].name for i in t["action_ids"]]
        self._table_actions[t["name"]] = {self.actions_by_id[i].name: self.actions_by_id[i] for i in t["action_ids"]}
        de = t.get("default_entry")
        if ttype != "simple":
            # BMv2: an indirect table's default is an empty (no-op) action until the
            # control plane sets one; p4c emits no default_entry for it.
            default, default_const = ActionCall("", (), _noop), False
        elif de:
            info = self.actions_by_id[de["action_id"]]
            default = ActionCall(info.name, tuple(_int(x) for x in de.get("action_data", [])))
            default_const = bool(de.get("action_const"))
        else:
            info = self.actions_by_id[t["action_ids"][0]]
            default = ActionCall(info.name, tuple(0 for _ in info.params))
            default_const = False
        tbl = state.Table(t["name"], keys, action_names, int(t.get("max_size", 1024)),
                          default, default_const, t["name"] in self.direct_counters.values())
        if ttype != "simple":
            ap = self.action_profiles.get(t.get("action_profile", ""))
            if ap is None:
                raise CompileError(f"table {t['name']}: unknown action profile {t.get('action_profile')!r}")
            if ap.with_selector != (ttype == "indirect_ws"):
                raise CompileError(f"table {t['name']}: {ttype} table with action profile {ap.name}")
            tbl.profile = ap
            for a in action_names:
                self._profile_actions.setdefault(ap.name, {})[a] = self._table_actions[t["name"]][a]
        self._const_entries.append((tbl, t.get("entries", [])))
        return tbl

    def _make_action_profiles(self, pl: dict[str, Any]) -> None:
        for ap in pl.get("action_profiles", []):
            sel = ap.get("selector")
            prof = state.ActionProfile(ap["name"], int(ap.get("max_size", 0)), sel is not None)
            if sel is not None:
                for e in sel["input"]:
                    if e["type"] != "field":
                        raise CompileError(f"action selector {ap['name']}: input type {e['type']}")
                # BMv2 builds a Calculation over the selector fields: the same bytes
                # (fields of invalid headers left out) and algorithm as a hash().
                cname = f"$selector::{ap['name']}"
                self.calculations[cname] = {"name": cname, "algo": sel["algo"], "input": sel["input"]}
                self._selector_hashes.append((prof, self._calc_fn(cname)))
            self.action_profiles[ap["name"]] = prof

    # ------------------------------------------------------------------ all
    def _gen_all(self) -> None:
        self.tables: dict[str, state.Table] = {}
        self._table_actions: dict[str, dict[str, ActionInfo]] = {}
        self._const_entries: list[tuple[state.Table, list[dict[str, Any]]]] = []
        self._deferred: list[tuple[str, dict[str, str | None], Callable[[str | None], str]]] = []
        self.action_profiles: dict[str, state.ActionProfile] = {}
        self._profile_actions: dict[str, dict[str, ActionInfo]] = {}
        self._selector_hashes: list[tuple[state.ActionProfile, str]] = []
        for a in self.spec.get("actions", []):
            self.actions_by_id[int(a["id"])].fn = self._gen_action(a)  # type: ignore[assignment]
        # which actions may stop the pipeline (a table with none needs no exit check)
        self._action_exits = {int(a["id"]): any(p.get("op") == "exit" for p in a.get("primitives", []))
                              for a in self.spec.get("actions", [])}
        parsers = self.spec.get("parsers", [])
        if len(parsers) != 1:
            raise CompileError(f"expected one parser, found {len(parsers)}")
        self._gen_parser(parsers[0])
        deparsers = self.spec.get("deparsers", [])
        if len(deparsers) != 1:
            raise CompileError(f"expected one deparser, found {len(deparsers)}")
        self._gen_deparser(deparsers[0])
        self._gen_checksums()
        pipes = {p["name"]: p for p in self.spec["pipelines"]}
        for name in ("ingress", "egress"):
            if name not in pipes:
                raise CompileError(f"pipeline {name} missing")
            self._make_action_profiles(pipes[name])
        for name in ("ingress", "egress"):
            self._gen_pipeline(pipes[name])
        ns = self._ns
        ns.update(_PE=ParserError, _sgn=_signed, _satc=_sat_cast, _usatc=_usat_cast,
                  _push=_stack_push, _pop=_stack_pop, _upush=_union_stack_push, _upop=_union_stack_pop, _look=_lookahead,
                  _rand=self.rng.randint, _log=_log_msg, _now=_monotonic, _dmx=direct_meter_execute)
        src = "\n\n".join(self._src)
        self.source = src
        # Last line of defence: only whitelisted syntax, attributes and names, and a
        # builtins table without __import__/open/eval (config_check, layer 3).
        for nmap, _, _ in self._deferred:
            ns[nmap] = None  # bound below, once the node functions exist
        program = self.spec.get("program")
        label = program if isinstance(program, str) and _LABEL.fullmatch(program) else "program"
        # One AST conversion at a time per process: CPython 3.11 keeps its AST recursion
        # depth per interpreter, and a switch group loading pipelines on several threads
        # got "SystemError: AST constructor recursion depth mismatch" (gh-106905).
        with _AST_LOCK:
            tree = check_source(src, ns)
            try:
                code = compile(tree, f"<p4:{label}>", "exec")
            except SyntaxError as e:  # a bug in this compiler, not in the user's JSON
                raise CompileError(f"internal code generation error: {e}") from e
        ns["__builtins__"] = dict(SAFE_BUILTINS)
        exec(code, ns)
        for nmap, mapping, ref in self._deferred:
            ns[nmap] = {a: ns[ref(v)] if v is not None else None for a, v in mapping.items()}
        for info in self.actions_by_id.values():
            info.fn = ns[info.fn]  # type: ignore[index]
        for prof, calc in self._selector_hashes:
            prof.hash_fn = ns[calc]
        for tname, tbl in self.tables.items():
            if tbl.profile is not None:
                continue
            tbl.initial_default = self.action_call(tname, tbl.initial_default.name, tbl.initial_default.params)
            tbl.default = tbl.initial_default
        for tbl, entries in self._const_entries:
            for i, e in enumerate(entries):
                tbl.insert(self._const_entry(tbl, e, i))
        self.parse: Callable[[list[int], bytes], int] = ns["_parse"]
        self.deparse: Callable[[list[int], bytes], bytes] = ns["_deparse"]
        self.verify_checksums: Callable[[list[int]], int] = ns["_verify_checksums"]
        self.update_checksums: Callable[..., None] = ns["_update_checksums"]
        self.ingress: Callable[[list[int]], None] = ns["_pipe_ingress"]
        self.egress: Callable[[list[int]], None] = ns["_pipe_egress"]

    def _const_entry(self, tbl: state.Table, e: dict[str, Any], index: int) -> state.TableEntry:
        key = []
        for kf, mk in zip(tbl.keys, e["match_key"], strict=True):
            mt = mk["match_type"]
            if mt in ("exact", "valid"):
                key.append(_int(mk["key"]))
            elif mt == "lpm":
                key.append((_int(mk["key"]), int(mk["prefix_length"])))
            elif mt in ("ternary", "optional"):
                mask = _int(mk.get("mask", hex((1 << kf.bitwidth) - 1)))
                key.append((_int(mk["key"]) & mask, mask))
            elif mt == "range":
                key.append((_int(mk["start"]), _int(mk["end"])))
            else:
                raise CompileError(f"const entry match type {mt}")
        ae = e["action_entry"]
        info = self.actions_by_id[ae["action_id"]]
        call = self.action_call(tbl.name, info.name, tuple(_int(x) for x in ae.get("action_data", [])))
        # BMv2: a smaller priority value wins; ours follows P4Runtime (larger wins), so
        # map BMv2's 1, 2, 3... onto descending positive P4Runtime priorities.
        prio = CONST_PRIORITY_BASE - int(e.get("priority", index + 1)) if tbl.needs_priority else 0
        return state.TableEntry(tuple(key), call, prio, is_const=True)

    # ------------------------------------------------------------------ control-plane API
    def action_call(self, table: str | None, action: str, params: tuple[int, ...]) -> ActionCall:
        """Bind an action by name for ``table`` (None: any action), checking parameters."""
        if table is not None:
            allowed = self._table_actions.get(table)
            if allowed is None:
                raise StateError("NOT_FOUND", f"unknown table {table}")
            info = allowed.get(action)
            if info is None:
                raise StateError("INVALID_ARGUMENT", f"action {action} is not an action of table {table}")
        else:
            info = self.actions.get(action)
            if info is None:
                raise StateError("NOT_FOUND", f"unknown action {action}")
        if len(params) != len(info.params):
            raise StateError("INVALID_ARGUMENT",
                             f"action {action}: {len(params)} parameters given, {len(info.params)} expected")
        for (pname, w), v in zip(info.params, params, strict=True):
            if not 0 <= v < (1 << w):
                raise StateError("INVALID_ARGUMENT", f"action {action}: parameter {pname} does not fit in {w} bits")
        return ActionCall(info.name, tuple(params), info.fn)

    def profile_action_call(self, profile: str, action: str, params: tuple[int, ...]) -> ActionCall:
        """Bind an action for a member of action profile ``profile`` (an action of one
        of the tables it implements), checking parameters."""
        allowed = self._profile_actions.get(profile, {})
        info = allowed.get(action)
        if info is None:
            raise StateError("INVALID_ARGUMENT", "Invalid action for action profile")
        for tname, tbl in self.tables.items():
            if tbl.profile is self.action_profiles[profile] and action in self._table_actions[tname]:
                return self.action_call(tname, action, params)
        raise StateError("INVALID_ARGUMENT", "Invalid action for action profile")

    def reset_state(self) -> None:
        """Clear registers, counters, meters and table entries (const entries stay)."""
        for r in self.registers.values():
            r.reset()
        for c in self.counters.values():
            c.packets[:] = [0] * c.size
            c.bytes[:] = [0] * c.size
        for t in self.tables.values():
            t.clear()
            t.reset_default()
            t.default_packets = t.default_bytes = 0
        for ap in self.action_profiles.values():
            ap.clear()
        for vs in self.value_sets.values():
            vs.clear()

    def new_phv(self) -> list[int]:
        """A fresh PHV: all headers invalid, metadata zero."""
        return self.template[:]

    def reset_metadata(self, F: list[int]) -> None:
        """Zero every metadata field (BMv2 ``reset_metadata``)."""
        for a, b in self.metadata_slots:
            F[a:b] = [0] * (b - a)

    def copy_field_list(self, dst: list[int], src: list[int], fl_id: int) -> None:
        for s in self.field_lists.get(fl_id, []):
            dst[s] = src[s]


def _noop(F: list[int], D: tuple[int, ...]) -> None:
    """BMv2's empty action (the default of a table with an action profile)."""


def _sat_cast(v: int, w: int) -> int:
    lo, hi = -(1 << (w - 1)), (1 << (w - 1)) - 1
    return lo if v < lo else hi if v > hi else v


def _usat_cast(v: int, w: int) -> int:
    hi = (1 << w) - 1
    return 0 if v < 0 else hi if v > hi else v


def _stack_push(F: list[int], base: int, size: int, stride: int, nslot: int, count: int) -> None:
    count = min(count, size)
    end = base + size * stride
    F[base + count * stride:end] = F[base:end - count * stride]
    for i in range(count):
        F[base + i * stride] = 0
    F[nslot] = min(F[nslot] + count, size)


def _stack_pop(F: list[int], base: int, size: int, stride: int, nslot: int, count: int) -> None:
    count = min(count, size)
    end = base + size * stride
    F[base:end - count * stride] = F[base + count * stride:end]
    for i in range(size - count, size):
        F[base + i * stride] = 0
    F[nslot] = max(F[nslot] - count, 0)


def _swap(F: list[int], a: int, b: int, stride: int) -> None:
    F[a:a + stride], F[b:b + stride] = F[b:b + stride], F[a:a + stride]


def _union_stack_push(F: list[int], base: int, size: int, stride: int, nslot: int, count: int) -> None:
    """push_front on a header-union stack exactly as BMv2 1.15 (StackP4_16): the same
    element swaps as for a header stack, but marking a union invalid is a no-op there,
    so the front elements keep the values swapped into them."""
    if count <= 0:
        return
    F[nslot] = min(size, F[nslot] + count)
    for i in range(size - 1, count - 1, -1):
        _swap(F, base + i * stride, base + (i - count) * stride, stride)


def _union_stack_pop(F: list[int], base: int, size: int, stride: int, nslot: int, count: int) -> None:
    """pop_front on a header-union stack as BMv2 1.15 (see _union_stack_push)."""
    if count <= 0:
        return
    F[nslot] -= min(F[nslot], count)
    for i in range(max(size - count, 0)):
        _swap(F, base + i * stride, base + (i + count) * stride, stride)


def _lookahead(pkt: bytes, o: int, off: int, w: int) -> int:
    start = o * 8 + off
    nb = (start % 8 + w + 7) // 8
    chunk = int.from_bytes(pkt[start // 8:start // 8 + nb].ljust(nb, b"\x00"), "big")
    return (chunk >> (nb * 8 - start % 8 - w)) & ((1 << w) - 1)


def _log_msg(fmt: str, args: list[int]) -> None:
    for a in args:
        fmt = fmt.replace("{}", str(a), 1)
    log.info("log_msg: %s", fmt)


_monotonic = time.monotonic


def load_file(path: str) -> Program:
    """Compile a BMv2 JSON file."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise CompileError(f"cannot read {path}: {e}") from e
    return Program(data)
