"""Conformance models of parser_features.p4, action_features.p4 and hash_checksum.p4:
setup writes, expected outputs computed in plain Python, and the cases.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

from finsy import (
    P4CounterEntry,
    P4MeterConfig,
    P4MeterEntry,
)
from scapy.layers.inet import ICMP, IP, TCP, UDP, IPOption_EOL, IPOption_NOP
from scapy.layers.l2 import Ether

from tests.conformance_models_tables import METER_CONFIG, _as_bmv2, _read_error, _write_error
from tests.conformance_rig import (
    DST,
    M32,
    SRC,
    Case,
    Rig,
    _clamp,
    _eth,
    _field,
    _ip,
    _zero,
    crc16_arc,
    ones_complement_csum,
)
from tests.p4.packets import (
    Arith,
    Extra,
    HashProbe,
)


# =========================================================================================
# parser_features.p4
# =========================================================================================
def _mpls(label: int, bos: int, ttl: int = 64, tc: int = 0) -> bytes:
    return ((label << 12) | (tc << 9) | (bos << 8) | ttl).to_bytes(4, "big")


UDP4 = bytes(_ip() / UDP(sport=1111, dport=2222) / b"udp-payload")
TCP4 = bytes(_ip() / TCP(sport=1111, dport=2222, flags="S"))
ICMP4 = bytes(_ip() / ICMP())
PUSHED = [_mpls(100, 0), _mpls(200, 1)]


def _pcase(name: str, ethertype: int, labels: list[bytes], rest: bytes, result: tuple[int, int, int, int], *,
           parsed: int | None = None, out_labels: list[bytes] | None = None, out_type: int | None = None,
           port: int = 1) -> Case:
    """A parser_features case. The output is ethernet (ether type ``out_type`` if the
    ingress pushed labels) | parse_result | the stack as ingress left it | the labels the
    parser did not take | the rest, unchanged."""
    parsed = len(labels) if parsed is None else parsed
    stack = labels[:parsed] if out_labels is None else out_labels
    frame = _eth(ethertype) + b"".join(labels) + rest
    out = _eth(out_type or ethertype) + bytes(result) + b"".join(stack) + b"".join(labels[parsed:]) + rest
    return Case(name, port, frame, [(port, out)])


def _parser_cases() -> list[Case]:
    m = _mpls
    five = [m(21, 0), m(22, 0), m(23, 0), m(24, 0), m(25, 1)]
    five_pop = [m(3, 0), m(32, 0), m(33, 0), m(34, 0), m(35, 1)]
    three_pop = [m(3, 0), m(2000, 0), m(3000, 1, ttl=7)]
    return [
        # IPv4 (no labels): two labels pushed, ether type becomes MPLS
        _pcase("ipv4_udp", 0x0800, [], UDP4, (0x09, 0, 0, 0), out_labels=PUSHED, out_type=0x8847),
        _pcase("ipv4_tcp_wildcard_arm", 0x0800, [], TCP4, (0x11, 0, 0, 0), out_labels=PUSHED, out_type=0x8847),
        _pcase("ipv4_icmp_wildcard_arm", 0x0800, [], ICMP4, (0x11, 0, 0, 0), out_labels=PUSHED, out_type=0x8847),
        _pcase("ipv4_fragment_tcp", 0x0800, [], bytes(_ip(frag=5, proto=6) / (b"x" * 20)), (0x11, 0, 0, 0),
               out_labels=PUSHED, out_type=0x8847),
        _pcase("ipv4_fragment_udp_default", 0x0800, [], bytes(_ip(frag=5, proto=17) / (b"y" * 12)), (0x01, 0, 0, 0),
               out_labels=PUSHED, out_type=0x8847),
        _pcase("ipv4_proto_0x20_default", 0x0800, [], bytes(_ip(proto=0x20) / (b"z" * 8)), (0x01, 0, 0, 0),
               out_labels=PUSHED, out_type=0x8847),
        # verify() errors: ipv4 stays valid, no push
        _pcase("ipv4_options_verify", 0x0800, [],
               bytes(_ip(options=[IPOption_NOP(), IPOption_NOP(), IPOption_NOP(), IPOption_EOL()])
                     / UDP(sport=1, dport=2)), (0x01, 0, 5, 0)),
        _pcase("ipv4_version6_verify", 0x0800, [], bytes(_ip(version=6) / UDP(sport=1, dport=2)), (0x01, 0, 4, 0)),
        # PacketTooShort: ipv4 invalid, the 10 bytes stay payload
        _pcase("ipv4_truncated", 0x0800, [], UDP4[:10], (0x00, 0, 1, 0)),
        _pcase("ipv4_empty", 0x0800, [], b"", (0x00, 0, 1, 0)),
        # MPLS stacks
        _pcase("mpls_one_label", 0x8847, [m(1000, 1)], UDP4, (0x0F, 1, 0, 0x01)),
        _pcase("mpls_masked_0x8846", 0x8846, [m(1001, 1)], UDP4, (0x0F, 1, 0, 0x01)),
        _pcase("mpls_pop_implicit_null", 0x8847, three_pop, UDP4, (0x0F, 3, 0, 0x07), out_labels=three_pop[1:]),
        _pcase("mpls_four_labels", 0x8847, [m(11, 0), m(12, 0), m(13, 0), m(14, 1)], UDP4, (0x0F, 4, 0, 0x0F)),
        _pcase("mpls_stack_overflow", 0x8847, five, UDP4, (0x02, 4, 3, 0x0F), parsed=4),
        _pcase("mpls_stack_overflow_then_pop", 0x8847, five_pop, UDP4, (0x02, 4, 3, 0x0F), parsed=4,
               out_labels=five_pop[1:4]),
        _pcase("mpls_label3_at_bottom_not_popped", 0x8847, [m(41, 0), m(3, 1)], UDP4, (0x0F, 2, 0, 0x03)),
        _pcase("mpls_tcp_inside", 0x8847, [m(42, 1)], TCP4, (0x17, 1, 0, 0x01)),
        _pcase("mpls_lookahead_not_ipv4", 0x8847, [m(51, 1)], b"\x60\x00\x00\x00" + b"v6" * 10, (0x06, 1, 0, 0x01)),
        _pcase("mpls_lookahead_past_end", 0x8847, [m(61, 1)], b"", (0x06, 1, 1, 0x01)),
        _pcase("mpls_truncated_label", 0x8847, [], b"\x00\x01", (0x00, 0, 1, 0x00)),
        _pcase("mpls_ipv4_options_behind_label", 0x8847, [m(71, 1)],
               bytes(_ip(options=[IPOption_NOP(), IPOption_NOP(), IPOption_NOP(), IPOption_EOL()])),
               (0x07, 1, 5, 0x01)),
        # 0x88xx experimental header
        _pcase("exp_kind1", 0x88B6, [], bytes([1, 4]) + b"abcd", (0x60, 0, 0, 0)),
        _pcase("exp_kind2_len16", 0x88B6, [], bytes([2, 16]) + b"q" * 16, (0x60, 0, 0, 0)),
        # a select without default that matches nothing: BMv2 accepts, no NoMatch error
        # (ParseState::find_next_state returns the null default state)
        _pcase("exp_select_no_match_accepts", 0x88B6, [], bytes([3, 0]) + b"zz", (0x20, 0, 0, 0)),
        _pcase("exp_verify_too_long", 0x88B5, [], bytes([1, 17]), (0x20, 0, 6, 0)),
        _pcase("exp_0x8848_is_not_mpls", 0x8848, [], bytes([2, 0]), (0x60, 0, 0, 0)),
        _pcase("exp_truncated", 0x88B6, [], b"\x01", (0x00, 0, 1, 0)),
        # anything else: accept, nothing parsed after ethernet
        _pcase("other_ethertype", 0x86DD, [], b"\x60" + b"\x00" * 39, (0x00, 0, 0, 0), port=3),
    ]


def parser_setup(rig: Rig) -> None:
    """parser_features.p4 needs no control-plane state."""


# =========================================================================================
# action_features.p4
# =========================================================================================
ARITH_AT = 14  # arith_t follows ethernet


def arith_model(a: int, b: int, shift: int, s: int, u8a: int, u8b: int, flags: int,
                extra_in: bool) -> tuple[dict[str, int], int | None]:
    """The result fields of action_features.p4 (Python ints masked to each field's
    width; signed fields as Python ints) and whether/what extra_t is emitted
    (None: invalid at the end; else 'keep' is signalled by -1)."""
    gt = int(a > b)
    cmp = (int(a == b) | int(a != b) << 1 | int(a < b) << 2 | int(a >= b) << 3 | int(s < 0) << 4
           | int(a > b and s < 0) << 5 | int(a == b or u8a > u8b) << 6 | int(u8a != u8b) << 7)
    r = {
        "sum": (a + b) & M32, "diff": (a - b) & M32, "prod": (a * b) & M32, "neg": -a & M32,
        "shl": (a << shift) & M32, "shr": a >> shift, "shl_const": (a << 3) & M32,
        "slice": a >> 8 & 0xFFFF, "concat": (a & 0xFFFF) << 16 | (b & 0xFFFF),
        "slice_set": (a & ~0xFF0 & M32) | u8a << 4, "trunc": a & 0xFF, "zext": u8a, "sext": s,
        "s_as_bits": s & 0xFF, "sshr": s >> 2, "sat_add": min(u8a + u8b, 0xFF), "sat_sub": max(u8b - u8a, 0),
        "ssat_add": _clamp(s - 100, 8), "ssat_sub": _clamp(s - 100, 8),
        "bitwise": ((a & b) ^ ((~a & M32) | (b >> 8))) & M32, "max_ab": max(a, b), "cmp": cmp,
        "bool_bits": gt << 7 | (0x80 & 0x7F), "rand": 0, "meter_color": 0,
    }
    valid = extra_in
    if flags & 0x02:
        valid = False
    new_value: int | None = -1 if valid else None
    if flags & 0x04 and not valid:
        valid, new_value = True, 0xCAFE
    r["valid_bits"] = int(extra_in) | int(valid) << 1 | gt << 2
    return r, new_value


def _arith_frame(*, extra: int | None = None, payload: bytes = b"", ethertype: int = 0x88B6,
                 **fields: int) -> bytes:
    p = Ether(dst=DST, src=SRC, type=ethertype) / Arith(**fields)
    if extra is not None:
        p = p / Extra(value=extra)
    return bytes(p) + payload


def _acase(name: str, *, a: int = 0, b: int = 0, shift: int = 0, s: int = 0, u8a: int = 0, u8b: int = 0,
           flags: int = 0, counter_index: int = 0, extra: int | None = None, payload: bytes = b"",
           port: int = 1) -> Case:
    ops = {"a": a, "b": b, "shift": shift, "s": s, "u8a": u8a, "u8b": u8b, "flags": flags,
           "counter_index": counter_index}
    frame = _arith_frame(extra=extra, payload=payload, **ops)
    if flags & 0x80:
        return Case(name, port, frame, [])
    results, new_extra = arith_model(a, b, shift, s, u8a, u8b, flags, extra is not None)
    out_extra = extra if new_extra == -1 else new_extra
    return Case(name, port, frame, [(port, _arith_frame(extra=out_extra, payload=payload, **ops, **results))])


def arith_mask(frame: bytes, check: bool = True) -> bytes:
    """``rand`` must be in [100, 199]; then it is zeroed."""
    if check and len(frame) >= ARITH_AT + len(Arith()):
        rand = _field(frame, Arith, ARITH_AT, "rand")
        assert 100 <= rand <= 199, f"random() result {rand} outside [100, 199]"
    return _zero(frame, Arith, ARITH_AT, ("rand",))


def _action_cases() -> list[Case]:
    return [
        _acase("basic", a=0x12345678, b=0x0000F00D, shift=4, s=-100, u8a=200, u8b=100),
        _acase("wraparound", a=0xFFFFFFF0, b=0x20, shift=31, s=127, u8a=255, u8b=255),
        _acase("product_overflow", a=0x89ABCDEF, b=0xFEDCBA98, shift=1, s=1, u8a=1, u8b=2),
        _acase("shift_by_width", a=0xDEADBEEF, b=1, shift=32, s=-1, u8a=0, u8b=0),
        _acase("shift_past_width", a=0xDEADBEEF, b=2, shift=40, s=-2, u8a=3, u8b=1),
        _acase("shift_255", a=0x80000001, b=0x80000001, shift=255, s=-128, u8a=128, u8b=128),
        _acase("equal_operands", a=7, b=7, shift=0, s=0, u8a=9, u8b=9),
        _acase("signed_min", a=0, b=M32, shift=8, s=-128, u8a=0, u8b=255),
        _acase("signed_sat_boundary", a=100, b=99, shift=16, s=-28, u8a=10, u8b=250),
        _acase("extra_kept", a=5, b=3, flags=0x01, extra=0x1111),
        _acase("extra_invalidated", a=5, b=3, flags=0x03, extra=0x2222),
        _acase("extra_made_valid", a=1, b=3, flags=0x04),
        _acase("extra_already_valid", a=1, b=3, flags=0x05, extra=0x3333),
        _acase("extra_invalidated_then_valid", a=9, b=3, flags=0x07, extra=0x4444),
        _acase("payload_kept", a=11, b=12, s=5, payload=b"trailing-bytes"),
        _acase("extra_inserted_before_payload", a=11, b=12, flags=0x04, payload=b"after"),
        _acase("extra_truncated_parser_error", a=2, b=1, flags=0x01, payload=b"\x7f"),
        _acase("counter_index_15", a=3, b=4, counter_index=15, port=4),
        _acase("drop_flag", a=1, b=2, flags=0x80),
        _acase("drop_flag_with_extra", a=1, b=2, flags=0x81, extra=0x5555),
        Case("truncated_arith_dropped", 1, _arith_frame(a=1)[:30], []),
        Case("other_ethertype_dropped", 2, _arith_frame(a=1, ethertype=0x88B7), []),
    ]


def action_setup(rig: Rig) -> None:
    """Configure probe_meter index 3 (cir 1/s burst 1, pir 1/s burst 2)."""
    rig.write(~P4MeterEntry("probe_meter", index=3, config=METER_CONFIG))


def arith_meter_colors(rig: Rig) -> list[int]:
    """Four back-to-back packets on meter index 3: green, yellow, red, red in BMv2."""
    frame = _arith_frame(a=1, b=2, counter_index=3)
    return [_field(f, Arith, ARITH_AT, "meter_color") for _, f in rig.burst(1, [frame] * 4, 4)]


def arith_meter_config(rig: Rig) -> list[tuple[int, int, int, int] | None]:
    """probe_meter configs read back over P4Runtime: index 3 (configured), 4 (not)."""
    out: list[tuple[int, int, int, int] | None] = []
    for index in (3, 4):
        (entry,) = rig.client.read(P4MeterEntry("probe_meter", index=index))
        c = entry.config
        out.append(None if c is None else (c.cir, c.cburst, c.pir, c.pburst))
    return out


def arith_counter(rig: Rig) -> tuple[int, int, int]:
    """Packets and bytes of probe_counter[5] after three packets; and the bytes sent."""
    sizes = 0
    for n in (0, 7, 100):
        frame = _arith_frame(a=n, b=1, counter_index=5, payload=b"p" * n)
        sizes += len(frame)
        assert len(rig.exchange(2, frame, 1)) == 1
    (entry,) = rig.client.read(P4CounterEntry("probe_counter", index=5))
    return entry.data.packet_count, entry.data.byte_count, sizes


_BAD_METER = P4MeterConfig(cir=10, cburst=1, pir=1, pburst=1)  # peak rate below committed rate
#: (what, request, BMv2 1.15's code, the embedded target's code), as TABLE_WRITE_ERRORS
ARITH_INDEX_ERRORS: list[tuple[str, Callable[[Rig], str], str, str]] = [
    ("counter write past the end", lambda r: _write_error(r, ~P4CounterEntry("probe_counter", index=16)),
     "UNKNOWN", "OUT_OF_RANGE"),
    ("counter read past the end", lambda r: _read_error(r, P4CounterEntry("probe_counter", index=16)),
     "UNKNOWN", "OUT_OF_RANGE"),
    ("meter write past the end", lambda r: _write_error(r, ~P4MeterEntry("probe_meter", index=16, config=METER_CONFIG)),
     "UNKNOWN", "OUT_OF_RANGE"),
    ("meter read past the end", lambda r: _read_error(r, P4MeterEntry("probe_meter", index=16)),
     "UNKNOWN", "OUT_OF_RANGE"),
    ("meter peak rate below committed", lambda r: _write_error(r, ~P4MeterEntry("probe_meter", index=1,
                                                                               config=_BAD_METER)),
     "UNKNOWN", "INVALID_ARGUMENT"),
]


def arith_index_codes(rig: Rig) -> list[str]:
    """The code of each of ``ARITH_INDEX_ERRORS``."""
    return [req(rig) for _, req, _, _ in ARITH_INDEX_ERRORS]


def arith_index_errors(rig: Rig) -> list[str]:
    """``arith_index_codes`` in BMv2's terms."""
    return _as_bmv2(rig, arith_index_codes(rig), ARITH_INDEX_ERRORS)


# =========================================================================================
# hash_checksum.p4
# =========================================================================================
IPV4_AT = 14


def _hframe(a: int, b: int, c: int, *, src: str = "10.1.2.3", dst: str = "192.168.7.9", ttl: int = 64,
            bad_checksum: bool = False, payload: bytes = b"", ihl_options: bool = False, proto: int = 253) -> bytes:
    ip = IP(src=src, dst=dst, ttl=ttl, id=0x4242, proto=proto)
    if ihl_options:
        ip.options = [IPOption_NOP(), IPOption_NOP(), IPOption_NOP(), IPOption_EOL()]
    frame = bytearray(bytes(Ether(dst=DST, src=SRC) / ip / HashProbe(a=a, b=b, c=c) / payload))
    if bad_checksum:
        frame[IPV4_AT + 10] ^= 0x5A
    return bytes(frame)


def hash_expect(frame: bytes) -> bytes:
    """TTL - 1, a recomputed IPv4 checksum and the hash results, from the input bytes."""
    ip = bytearray(frame[IPV4_AT:IPV4_AT + 20])
    received_ok = ones_complement_csum(bytes(ip)) == 0
    ip[8] = (ip[8] - 1) & 0xFF
    ip[10:12] = b"\x00\x00"
    ip[10:12] = ones_complement_csum(bytes(ip)).to_bytes(2, "big")
    probe = frame[IPV4_AT + 20:IPV4_AT + 20 + len(HashProbe())]
    data = probe[:10]  # a (32) ++ b (32) ++ c (16)
    crc16 = crc16_arc(data)
    results = HashProbe(
        a=int.from_bytes(data[0:4], "big"), b=int.from_bytes(data[4:8], "big"), c=int.from_bytes(data[8:10], "big"),
        crc16=crc16, crc32=zlib.crc32(data), identity=int.from_bytes(data[0:4], "big"),
        csum16=ones_complement_csum(data), crc16_mod=1000 + crc16 % 100,
        crc32_ipv4=zlib.crc32(bytes(ip[12:20]) + bytes([ip[9]])), checksum_error=int(not received_ok))
    return frame[:IPV4_AT] + bytes(ip) + bytes(results) + frame[IPV4_AT + 20 + len(HashProbe()):]


def _hcase(name: str, a: int, b: int, c: int, port: int = 1, **kw: Any) -> Case:
    frame = _hframe(a, b, c, **kw)
    return Case(name, port, frame, [(port, hash_expect(frame))])


def _hash_cases() -> list[Case]:
    return [
        _hcase("zeros", 0, 0, 0),
        _hcase("pattern", 0x01234567, 0x89ABCDEF, 0x1357),
        _hcase("all_ones", M32, M32, 0xFFFF, src="255.255.255.255", dst="0.0.0.0"),
        _hcase("ascii", int.from_bytes(b"1234", "big"), int.from_bytes(b"5678", "big"), int.from_bytes(b"9\x00", "big")),
        _hcase("bad_ipv4_checksum", 0xCAFEBABE, 0x0BADF00D, 0xABCD, bad_checksum=True),
        _hcase("ttl_wraps", 0x11111111, 0x22222222, 0x3333, ttl=0),
        _hcase("payload_after_probe", 0xA5A5A5A5, 0x5A5A5A5A, 0x0F0F, payload=b"payload!" * 3, port=2),
        Case("ipv4_options_not_probed_dropped", 1, _hframe(1, 2, 3, ihl_options=True), []),
        Case("other_protocol_dropped", 1, _hframe(1, 2, 3, proto=17), []),
        Case("not_ipv4_dropped", 1, bytes(Ether(dst=DST, src=SRC, type=0x88B6) / HashProbe()), []),
    ]


def hash_setup(rig: Rig) -> None:
    """hash_checksum.p4 needs no control-plane state."""
