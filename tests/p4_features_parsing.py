"""Models of value_set.p4, varbit_features.p4 and union_features.p4 for the P4-features
tests: parser value sets, varbit fields and header unions, computed in plain Python.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest
from finsy import (
    P4ValueSetEntry,
)
from finsy.p4entity import P4ValueSetMember

from tests.conformance_rig import (
    Case,
    Out,
    Rig,
    _eth,
    ones_complement_csum,
)
from tests.p4_features_selector import ETH_PROBE

# =========================================================================================
# value_set.p4: parser value sets, written over P4Runtime (ValueSetEntry MODIFY)
# BMv2 (src/bm_sim/parser.cpp, ParseVSetCommon): a set of exact values, stored
# compressed and compared with the select key laid out field by field in whole bytes.
# BMv2's P4Runtime server (PI, 2023) answers UNIMPLEMENTED to ValueSetEntry writes and
# reads, so on BMv2 only the empty sets are exercised.
# =========================================================================================
VS_SETS = {"ethertypes": [0x1234, 0x9000], "lows": [0x123, 0xABC], "pairs": [(0xF, 0x001), (0x1, 0x123)]}


def _vs(ethertype: int, hi4: int, low12: int, tag: int, path: int = 0) -> bytes:
    return _eth(ethertype) + struct.pack("!HBB", hi4 << 12 | low12, tag, path) + b"vset"


def vs_path(ethertype: int, hi4: int, low12: int, tag: int, sets: dict[str, list[Any]]) -> int | None:
    """The program's parse path (None: not parsed, dropped), in select order."""
    if ethertype != ETH_PROBE and ethertype not in sets.get("ethertypes", []):
        return None
    if low12 in sets.get("lows", []):
        return 1
    if (hi4, low12) in sets.get("pairs", []):
        return 2
    return 3 if tag == 0x55 else 4


VS_FRAMES = [(0x88B6, 0x1, 0x123, 0x55), (0x88B6, 0x1, 0x123, 0x00), (0x1234, 0x1, 0x123, 0x00),
             (0x9000, 0xF, 0x001, 0x55), (0x88B6, 0x2, 0xABC, 0x00), (0x88B6, 0x1, 0x001, 0x55),
             (0x88B6, 0xF, 0x001, 0x00), (0x7777, 0x1, 0x123, 0x55), (0x0800, 0xF, 0x001, 0x55)]


def vs_expect(frame: tuple[int, int, int, int], port: int, sets: dict[str, list[Any]]) -> list[Out]:
    path = vs_path(*frame, sets)
    return [] if path is None else [(port, _vs(*frame, path))]


def vs_setup(rig: Rig) -> None:
    """value_set.p4 starts with empty sets."""


def _vs_cases() -> list[Case]:
    return [Case(f"empty_sets_{i}", 1 + i % 4, _vs(*f), vs_expect(f, 1 + i % 4, {})) for i, f in enumerate(VS_FRAMES)]


def _vs_write(rig: Rig, sets: dict[str, list[Any]]) -> None:
    ups = []
    for name, values in sets.items():
        members = [P4ValueSetMember({"hi4": v[0], "low12": v[1]}) if isinstance(v, tuple) else P4ValueSetMember(v)
                   for v in values]
        ups.append(~P4ValueSetEntry(name, members=members))
    rig.write(*ups)


_PVS_SCRIPT = """
import sys
from bmpy_utils import thrift_connect_standard
client = thrift_connect_standard("127.0.0.1", 9090)
for line in sys.stdin.read().split():
    name, _, value = line.partition("=")
    if not value:
        client.bm_parse_vset_clear(0, name)
    else:
        client.bm_parse_vset_add(0, name, bytes.fromhex(value))
"""


def _bmv2_pvs(rig: Rig, sets: dict[str, list[Any]]) -> None:
    """Fill BMv2's value sets over its Thrift API (its P4Runtime server cannot; and
    1.15's ``simple_switch_CLI pvs_add`` sends one byte too many under Python 3, which
    BMv2 answers with an assertion failure). Values are compressed, fields back to back."""
    cli = shutil.which("simple_switch_CLI")
    site = sorted(Path(cli).resolve().parent.parent.glob("lib/python3*/site-packages")) if cli else []
    if not site:
        pytest.skip("BMv2's P4Runtime server cannot write value sets and its Thrift Python API is missing")
    widths = {"ethertypes": 16, "lows": 12, "pairs": 16}
    lines = []
    for name, values in sets.items():
        lines.append(f"VParser.{name}")
        for v in values:
            value = (v[0] << 12 | v[1]) if isinstance(v, tuple) else v
            lines.append(f"VParser.{name}={value.to_bytes((widths[name] + 7) // 8, 'big').hex()}")
    r = subprocess.run(["ip", "netns", "exec", rig.tb.ns_sw, "python3", "-c", _PVS_SCRIPT], input="\n".join(lines),
                       capture_output=True, text=True, timeout=30, env={"PYTHONPATH": str(site[0]), "PATH": "/usr/bin:/bin"})
    if r.returncode != 0:
        pytest.skip(f"BMv2's Thrift API unreachable (built without Thrift?): {r.stderr[-300:]}")


# =========================================================================================
# varbit_features.p4: extract with a length, emit, csum16 over a varbit field
# BMv2 (src/bm_sim/parser.cpp extract_VL): length % 8 -> ParserInvalidArgument, then
# too few bytes left -> PacketTooShort, then fixed part + length > the header's
# max_length (32 bytes here) -> HeaderTooShort. A parser error leaves the header
# invalid and the rest of the packet payload; an invalid header is not emitted.
# =========================================================================================
VB_ERR = {"NoError": 0, "PacketTooShort": 1, "HeaderTooShort": 4, "ParserInvalidArgument": 6}
VB_MAX_BYTES = 32  # opts_t: 1 fixed byte + varbit<248>
REST = b"REST"


def _vb_hdr(length: int, mode: int, csum: int = 0, mn: int = 0, mx: int = 0, err: int = 0, flags: int = 0,
            plen: int = 0) -> bytes:
    return struct.pack("!BBHBBBBH", length, mode, csum, mn, mx, err, flags, plen)


def vb_expect(length: int, mode: int, kind: int, opts: bytes, tail: bytes, port: int,
              rest: bytes = REST) -> tuple[bytes, list[Out]]:
    """(frame sent, expected output) for one varbit_features.p4 case."""
    after = bytes([kind]) + opts + tail + rest
    frame = _eth(ETH_PROBE) + _vb_hdr(length, mode) + after
    nbits = length * 8 + (4 if mode == 1 else 0)
    if nbits % 8:
        err, opts_ok = VB_ERR["ParserInvalidArgument"], False
    elif len(after) < 1 + nbits // 8:
        err, opts_ok = VB_ERR["PacketTooShort"], False
    elif 1 + nbits // 8 > VB_MAX_BYTES:
        err, opts_ok = VB_ERR["HeaderTooShort"], False
    else:
        opts_ok = True
        err = VB_ERR["NoError"] if len(after) >= 1 + length + 2 else VB_ERR["PacketTooShort"]
    tail_ok = opts_ok and err == 0
    flags = (1 if opts_ok else 0) | (2 if tail_ok else 0)
    emit_opts = opts_ok and mode != 2
    emit_tail = tail_ok and mode != 3
    # mode 5, setInvalid + setValid: fields zeroed, the width kept (0 if never extracted)
    revalidated = mode == 5 and not opts_ok
    if mode == 5 and opts_ok:
        kind, opts = 0, bytes(length)
    csum = 0
    if emit_opts:
        csum = ones_complement_csum(bytes([length, mode, kind]) + opts[:length])
    elif revalidated:
        csum = ones_complement_csum(bytes([length, mode, 0]))
    # egress packet_length: the received length, less what setInvalid removed, plus setValid
    plen = len(frame) - (1 + length if opts_ok and mode == 2 else 0) - (2 if tail_ok and mode == 3 else 0) \
        + (1 if mode == 4 or revalidated else 0)
    out = _eth(ETH_PROBE) + _vb_hdr(length, mode, csum, 1, VB_MAX_BYTES, err, flags, plen)
    # mode 4: opts2 = 0x77 ++ opts.opts, emitted after opts; an unparsed opts has width 0
    copy = (b"\x77" + (opts[:length] if opts_ok else b"")) if mode == 4 else b""
    if opts_ok:
        rest = after[1 + length:]  # tail and payload
        if emit_opts:
            out += bytes([kind]) + opts[:length]
        out += copy
        if tail_ok:
            if emit_tail:
                out += rest[:2]
            rest = rest[2:]
        out += rest
    else:
        out += (b"\x00" if revalidated else b"") + copy + after
    return frame, [(port, out)]


def _vb_cases() -> list[Case]:
    spec: list[tuple[Any, ...]] = [  # name, len, mode, opts bytes, tail[, payload instead of REST]
        ("len4", 4, 0, b"\x01\x02\x03\x04", b"\xbe\xef"),
        ("len0", 0, 0, b"", b"\xbe\xef"),
        ("len31_max", 31, 0, bytes(range(31)), b"\xca\xfe"),
        ("len32_header_too_short", 32, 0, bytes(range(32)), b"\xca\xfe"),
        ("len200_header_too_short", 200, 0, bytes(200), b"\x00\x01"),
        ("odd_bits_invalid_argument", 4, 1, b"abcd", b"\x12\x34"),
        ("truncated_packet_too_short", 10, 0, b"short", b""),
        ("too_long_and_truncated", 40, 0, b"xyz", b""),
        ("tail_missing", 3, 0, b"abc", b"", b""),
        ("tail_one_byte", 3, 0, b"abc", b"", b"X"),
        ("opts_set_invalid", 5, 2, b"hello", b"\x0f\x0f"),
        ("tail_set_invalid", 2, 3, b"hi", b"\xf0\xf0"),
        ("len3_odd_sum", 3, 0, b"\xff\xfe\xfd", b"\x00\x00"),
        ("assign_varbit", 6, 4, b"varbit", b"\x5a\x5a"),
        ("assign_varbit_len0", 0, 4, b"", b"\x5a\x5a"),
        ("assign_unparsed_varbit", 12, 4, b"short", b""),
        ("invalidate_revalidate", 5, 5, b"abcde", b"\x33\x44"),
        ("invalidate_revalidate_len0", 0, 5, b"", b"\x33\x44"),
        ("invalidate_revalidate_unparsed", 9, 5, b"shrt", b""),
    ]
    cases = []
    for i, (name, length, mode, opts, tail, *rest) in enumerate(spec):
        port = 1 + i % 4
        frame, expect = vb_expect(length, mode, 0xA5, opts, tail, port, *rest)
        cases.append(Case(name, port, frame, expect))
    return cases


def vb_setup(rig: Rig) -> None:
    """varbit_features.p4 needs no control-plane state."""


# =========================================================================================
# union_features.p4: header unions and a header-union stack
# BMv2 (include/bm/bm_sim/header_unions.h): making a member valid (extract, setValid)
# invalidates the union's other member; the union is valid while a member is. A
# union stack extracts into its next element (StackOutOfBounds when full).
# =========================================================================================
UA, UB = 0x0A, 0x0B


def _ua(a: int) -> bytes:
    return bytes([UA]) + a.to_bytes(2, "big")


def _ub(b: int) -> bytes:
    return bytes([UB]) + b.to_bytes(4, "big")


def _uprobe(sel: int, op: int, *res: int) -> bytes:
    return bytes([sel, op, *res] + [0] * (5 - len(res)))


def union_expect(sel: int, op: int, body: bytes, port: int) -> tuple[bytes, list[Out]]:
    """(frame, expected output) for union_features.p4: a model of its parser, of
    BMv2's union validity, and of its deparser."""
    u: dict[str, bytes] = {}  # the union's valid member (at most one)
    us: list[tuple[str, bytes] | None] = [None, None, None]
    err, o = 0, 0
    if sel in (1, 2):
        size = 3 if sel == 1 else 5
        if len(body) < size:
            err = 1
        else:
            u = {"a" if sel == 1 else "b": body[:size]}
            o = size
    elif sel == 3:
        nxt = 0
        while True:
            if o >= len(body):
                err = 1  # lookahead<bit<8>> past the end
                break
            kind = body[o]
            if kind not in (UA, UB):
                break
            if nxt == 3:
                err = 3
                break
            size = 3 if kind == UA else 5
            if len(body) - o < size:
                err = 1
                break
            us[nxt] = ("a" if kind == UA else "b", body[o:o + size])
            o += size
            nxt += 1

    def bits() -> tuple[int, int]:
        b = (1 if "a" in u else 0) | (2 if "b" in u else 0) | (4 if u else 0)
        for i in range(3):
            b |= (8 << i) if us[i] and us[i][0] == "a" else 0
        for i in range(2):
            b |= (0x40 << i) if us[i] and us[i][0] == "b" else 0
        more = 1 if us[2] and us[2][0] == "b" else 0
        for i in range(3):
            more |= (2 << i) if us[i] else 0
        return b, more

    before = bits()
    if op == 1:
        u = {"b": _ub(0xB0B0B0B0)}
    elif op == 2:
        u.pop("a", None)
    elif op == 3:
        u = {"a": _ua(0xA0A0)}
    elif op == 4:
        us[1] = ("b", _ub(0x11111111))
    elif op == 5:  # BMv2's union-stack push_front(1): a rotation, nothing invalidated
        us = [us[2], us[0], us[1]]
    elif op == 6:
        us = [us[1], us[2], us[0]]
    elif op == 7:
        us[0] = next(iter(u.items()), None)
    after = bits()
    frame = _eth(ETH_PROBE) + _uprobe(sel, op) + body
    out = (_eth(ETH_PROBE) + _uprobe(sel, op, *before, *after, err) + u.get("a", b"") + u.get("b", b"")
           + b"".join(e[1] for e in us if e) + body[o:])
    return frame, [(port, out)]


def _union_cases() -> list[Case]:
    spec = [  # name, sel, op, body after the probe
        ("member_a", 1, 0, _ua(0x1234) + REST),
        ("member_b", 2, 0, _ub(0xDEADBEEF) + REST),
        ("a_then_setvalid_b", 1, 1, _ua(0x1234) + REST),
        ("b_then_setvalid_b", 2, 1, _ub(0x01020304) + REST),
        ("a_then_setinvalid_a", 1, 2, _ua(0x1234) + REST),
        ("b_then_setvalid_a", 2, 3, _ub(0x01020304) + REST),
        ("a_then_setvalid_a", 1, 3, _ua(0x5678) + REST),
        ("empty_union_setvalid_b", 0, 1, REST),
        ("member_a_truncated", 1, 0, b"\x0a\x01"),
        ("stack_a_b_a", 3, 0, _ua(1) + _ub(2) + _ua(3) + REST),
        ("stack_b_b", 3, 0, _ub(5) + _ub(6) + REST),
        ("stack_overflow", 3, 0, _ua(1) + _ua(2) + _ub(3) + _ua(4) + REST),
        ("stack_lookahead_past_end", 3, 0, _ua(1)),
        ("stack_element_setvalid_b", 3, 4, _ua(1) + _ua(2) + _ua(3) + REST),
        ("stack_empty_setvalid_b", 3, 4, REST),
        ("stack_push_front", 3, 5, _ua(1) + _ub(2) + REST),
        ("stack_push_front_full", 3, 5, _ua(1) + _ub(2) + _ua(3) + REST),
        ("stack_pop_front", 3, 6, _ua(1) + _ub(2) + REST),
        ("stack_pop_front_full", 3, 6, _ub(1) + _ua(2) + _ub(3) + REST),
        ("union_assign_to_stack", 2, 7, _ub(0x0C0D0E0F) + REST),
        ("union_assign_invalid_to_stack", 0, 7, REST),
    ]
    cases = []
    for i, (name, sel, op, body) in enumerate(spec):
        port = 1 + i % 4
        frame, expect = union_expect(sel, op, body, port)
        cases.append(Case(name, port, frame, expect))
    return cases


def union_setup(rig: Rig) -> None:
    """union_features.p4 needs no control-plane state."""
