"""Conformance and differential tests of the embedded target against BMv2 ``simple_switch``.

Every conformance program of ``tests/p4/`` runs in a real testbed (``targets.testbed``:
the switch process in its own network namespace, veth ports, P4Runtime over a Unix
socket) on each target: ``embedded`` always, ``bmv2`` when ``simple_switch_grpc`` is on
PATH. Frames are built with scapy (``tests/p4/packets.py``) and every expected output
frame and port is computed here, independently, in plain Python: CRC-16/ARC, zlib's
CRC-32 and ones' complement sums, masked and saturating arithmetic, table lookups with
LPM / ternary priorities, stack push/pop, parser errors, multicast and clone copies.
Exact bytes are asserted wherever the result is deterministic; timestamps, queue depths
and ``random()`` are checked for plausibility and masked by name.

One testbed per program and target (class-scoped fixture), many frames per testbed.
``test_differential`` runs the same setup and frame sequence through a fresh embedded
switch and a fresh BMv2 and compares the outputs byte for byte (masked fields named in
``ProgramSpec.masked``).

BMv2 semantics these tests pin down (sources: behavioral-model 1.15,
``targets/simple_switch/simple_switch.cpp`` and ``src/bm_sim/``):

- a parser ``lookahead`` past the end of the packet is ``PacketTooShort``
  (``ParserOpSet<ParserLookAhead>``);
- a ``select`` without a default arm that matches nothing accepts the packet with no
  error (``ParseState::find_next_state``), not with ``NoMatch``;
- a select mask compares ``key & mask == value & mask``: ``0x8847 &&& 0xFFFE`` matches
  0x8846 and 0x8847, not 0x8848;
- a two-rate meter checks the peak rate first (red), then the committed rate (yellow):
  ``Meter::set_rates`` reverses the {CIR, PIR} list;
- an I2E clone re-parses the packet as received and keeps only the preserved field
  list; an E2E clone copies the headers as egress left them; clone sessions are
  multicast groups in PI, so a clone's ``egress_rid`` is its replica's ``instance``;
- ``priority`` picks the egress queue and a priority beyond the last queue is dropped,
  even with the default single queue (``SimpleSwitch::enqueue``: "Priority out of
  range, dropping packet"); ``--priority-queues N`` (after ``--``) gives N queues and
  ``qid`` is the priority;
- egress ``packet_length`` is the packet-length register: the received length +/- every
  header an action made valid/invalid (``add_header``/``remove_header`` primitives); an
  E2E clone inherits the original's after its egress, I2E clones and resubmits get the
  ingress length, recirculated packets the deparsed one (``instance_meta.p4``);
- an I2E clone's metadata is reset after the re-parse: ``parser_error``, ``ingress_port``
  and what the parser wrote are 0 unless in the field list;
- an action parameter inside an expression is the operand ``local`` (``l2_path.p4``);
- BMv2's libpcap restores the 802.1Q tag the kernel strips (so do these tests' sockets);
- per-update errors BMv2's PI reports as UNKNOWN (const table, index past the end) are
  named precisely by the embedded target, a listed difference (``TABLE_WRITE_ERRORS``).
"""

from __future__ import annotations

import contextlib
import copy
import os
import queue
import select
import shutil
import struct
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from finsy import (
    P4CloneSessionEntry,
    P4CounterEntry,
    P4DigestEntry,
    P4DirectCounterEntry,
    P4DirectMeterEntry,
    P4MeterConfig,
    P4MeterEntry,
    P4MulticastGroupEntry,
    P4RegisterEntry,
    P4TableAction,
    P4TableEntry,
    P4TableMatch,
)
from scapy.fields import BitField
from scapy.layers.inet import ICMP, IP, TCP, UDP, IPOption_EOL, IPOption_NOP
from scapy.layers.l2 import ARP, Ether

from targets.embedded.switch import (
    AUXDATA_SPACE,
    PACKET_AUXDATA,
    SOL_PACKET,
    TP_STATUS_VLAN_VALID,
    restore_vlan_tag,
)
from targets.launch import bmv2_available
from targets.p4rt_client import P4RuntimeClient, P4RuntimeError
from targets.testbed import Testbed as SwitchTestbed
from tests.p4.packets import (
    Arith,
    Echo,
    Extra,
    HashProbe,
    ImProbe,
    RegisterHeavy,
    RepProbe,
    TableProbe,
)

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "tests" / "p4" / "build"
TARGETS = ("embedded", "bmv2")
NPORTS = 4
DST, SRC = "02:00:00:00:00:02", "02:00:00:00:00:01"
SETTLE = 0.04     # s to wait for unexpected extra frames after the expected ones arrived
DROP_WAIT = 0.25  # s of silence that counts as "dropped"
M32 = 0xFFFFFFFF

pytestmark = [
    pytest.mark.net,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, veth pairs)"),
]

Out = tuple[int, bytes]  # (switch port the frame left on, frame bytes)


# -- the rig: a testbed with one program loaded over P4Runtime ---------------------------
class Rig:
    """A running testbed for one conformance program on one target."""

    def __init__(self, program: str, target: str, priority_queues: int = 1) -> None:
        self.program = program
        self.target = target
        self.json = BUILD / f"{program}.json"
        self.p4info = BUILD / f"{program}.p4info.txt"
        self.tb = SwitchTestbed(NPORTS, target=target, json_path=str(self.json), priority_queues=priority_queues)
        self._client: P4RuntimeClient | None = None
        self.t_start = 0.0

    @property
    def client(self) -> P4RuntimeClient:
        assert self._client is not None, "rig not started"
        return self._client

    def start(self) -> Rig:
        """Start the switch and set the pipeline (both targets get it over P4Runtime)."""
        self.t_start = time.monotonic()
        self.tb.start()
        for s in self.tb.socks.values():  # see the VLAN tags the kernel strips (collect)
            s.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
        try:
            self._client = P4RuntimeClient(self.tb.grpc_addr, device_id=self.tb.device_id)
            assert self._client.is_primary
            self._client.set_pipeline(self.p4info, self.json)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Close the P4Runtime stream and stop the testbed (namespaces deleted)."""
        if self._client is not None:
            self._client.close()
            self._client = None
        self.tb.stop()
        shutil.rmtree(self.tb.dir, ignore_errors=True)  # the switch's log and socket directory

    def write(self, *updates: Any) -> None:
        """P4Runtime Write of finsy entities (``+`` insert, ``~`` modify, ``-`` delete)."""
        self.client.write(*updates)

    def collect(self, n: int, timeout: float = 3.0, settle: float = SETTLE) -> list[Out]:
        """Frames from all ports: wait for ``n`` (then ``settle`` more s for extras), or
        listen for ``DROP_WAIT`` s when ``n`` is 0."""
        socks = self.tb.socks
        by_fd = {s.fileno(): p for p, s in socks.items()}
        out: list[Out] = []
        end = time.monotonic() + (timeout if n > 0 else DROP_WAIT)
        settled = False
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return out
            ready, _, _ = select.select(list(socks.values()), [], [], left)
            for s in ready:
                while True:
                    try:
                        frame, anc, _, _ = s.recvmsg(65536, AUXDATA_SPACE)
                    except BlockingIOError:
                        break
                    if anc and anc[0][2][0] & TP_STATUS_VLAN_VALID:
                        frame = restore_vlan_tag(frame, anc[0][2])
                    out.append((by_fd[s.fileno()], frame))
            if not settled and n > 0 and len(out) >= n:
                settled = True
                end = time.monotonic() + settle

    def exchange(self, port: int, frame: bytes, n: int, timeout: float = 3.0) -> list[Out]:
        """Send ``frame`` into ``port``; return what comes out (see ``collect``)."""
        self.tb.drain()
        self.tb.send(port, frame)
        return self.collect(n, timeout)

    def burst(self, port: int, frames: list[bytes], n: int, timeout: float = 5.0) -> list[Out]:
        """Send frames back to back, then collect ``n`` outputs."""
        self.tb.drain()
        for f in frames:
            self.tb.send(port, f)
        return self.collect(n, timeout)



# -- cases, program specs, comparison ----------------------------------------------------
@dataclass
class Case:
    """One frame into ``port`` and every ``(port, frame)`` expected out (empty: dropped)."""

    name: str
    port: int
    frame: bytes
    expect: list[Out]


def _no_mask(frame: bytes, check: bool = True) -> bytes:
    return frame


@dataclass
class ProgramSpec:
    """How to drive one conformance program.

    ``setup`` installs the control-plane state; ``cases`` run in order (``ordered``:
    they depend on each other, e.g. register contents); ``mask(frame, check=True)``
    checks the plausibility of the fields that are not deterministic (named in
    ``masked``) and zeroes them; each of ``extras`` drives
    a scenario and returns what it observed (counters, meter colours, packet-ins), for
    its own conformance test and for the differential test.
    """

    setup: Callable[[Rig], None]
    cases: list[Case]
    mask: Callable[..., bytes] = _no_mask
    masked: tuple[str, ...] = ()
    extras: list[Callable[[Rig], Any]] = field(default_factory=list)
    ordered: bool = False


def _field_span(cls: type, name: str) -> tuple[int, int]:
    """(byte offset, byte length) of a field of a probe header class."""
    off = 0
    for f in cls.fields_desc:
        size = f.size // 8 if isinstance(f, BitField) else int(f.sz)
        if f.name == name:
            return off, size
        off += size
    raise KeyError(name)


def _field(frame: bytes, cls: type, at: int, name: str) -> int:
    off, size = _field_span(cls, name)
    return int.from_bytes(frame[at + off:at + off + size], "big")


def _zero(frame: bytes, cls: type, at: int, names: tuple[str, ...]) -> bytes:
    buf = bytearray(frame)
    for name in names:
        off, size = _field_span(cls, name)
        if at + off + size <= len(buf):
            buf[at + off:at + off + size] = bytes(size)
    return bytes(buf)


def _first_diff(a: bytes, b: bytes) -> str:
    n = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    lo = max(0, n - 4)
    return (f"first difference at byte {n} (lengths {len(a)}/{len(b)}): "
            f"expected ...{a[lo:n + 8].hex(' ')}... got ...{b[lo:n + 8].hex(' ')}...")


def assert_outputs(rig: Rig, got: list[Out], expect: list[Out], what: str) -> None:
    """Exact comparison of (port, frame) multisets, with a readable failure message."""
    g, e = sorted(got), sorted(expect)
    if g == e:
        return
    lines = [f"[{rig.target}] {rig.program} {what}: expected {len(e)} frame(s) on ports "
             f"{[p for p, _ in e]}, got {len(g)} on ports {[p for p, _ in g]}"]
    for (pe, fe), (pg, fg) in zip(e, g, strict=False):
        if (pe, fe) != (pg, fg):
            lines.append(f"  port {pe} vs {pg}: {_first_diff(fe, fg)}")
    lines.append("switch log tail:\n" + rig.tb.log_tail(12))
    pytest.fail("\n".join(lines))


def run_case(rig: Rig, spec: ProgramSpec, case: Case) -> None:
    """Send one case's frame and assert the exact outputs (masked fields zeroed)."""
    got = rig.exchange(case.port, case.frame, len(case.expect))
    got = [(p, spec.mask(f)) for p, f in got]
    expect = [(p, spec.mask(f, check=False)) for p, f in case.expect]
    assert_outputs(rig, got, expect, case.name)


def _eth(ethertype: int, dst: str = DST, src: str = SRC) -> bytes:
    return bytes(Ether(dst=dst, src=src, type=ethertype))


def _ip(**kw: Any) -> IP:
    kw.setdefault("src", "10.0.0.1")
    kw.setdefault("dst", "10.0.0.2")
    return IP(id=1, ttl=64, **kw)


# -- independent reference implementations ------------------------------------------------
def crc16_arc(data: bytes) -> int:
    """CRC-16/ARC (poly 0x8005 reflected = 0xA001, init 0, no final xor), bit by bit."""
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc


def ones_complement_csum(data: bytes) -> int:
    """Internet checksum: complement of the 16-bit ones' complement sum."""
    if len(data) % 2:
        data += b"\x00"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _clamp(v: int, bits: int) -> int:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return max(lo, min(hi, v))


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
# table_features.p4
# =========================================================================================
T_EXACT = {5: 0x0505, 7: 0x0707}
T_EXACT_DEFAULT = 0xEEEE
T_LPM = [(0x0A000000, 8, 0x0008), (0x0A010000, 16, 0x0016), (0x0A020000, 16, 0x0216)]  # 10.2/16: metered
T_TERNARY = [  # (value, mask, extra.isValid(), priority, action, parameter)
    (0x1200, 0xFF00, 0, 10, "set_ternary", 0x0001),
    (0x1234, 0xFFFF, 0, 20, "ternary_then_range", None),
    (0x0000, 0x0000, 1, 5, "set_ternary", 0x00EE),
]
T_RANGE = [(100, 199, 10, 1), (150, 250, 20, 2)]  # (low, high, priority, value)
T_CONST = [(0x01, 0xFF, 1), (0x10, 0xF0, 2)]      # const entries, in program order
METER_CONFIG = P4MeterConfig(cir=1, cburst=1, pir=1, pburst=2)


def _ip4(v: int) -> str:
    return ".".join(str(v >> s & 0xFF) for s in (24, 16, 8, 0))


def table_setup(rig: Rig) -> None:
    """The entries of table_features.p4's header comment (plus a metered 10.2/16)."""
    ups: list[Any] = []
    for key, value in T_EXACT.items():
        ups.append(+P4TableEntry("t_exact", match=P4TableMatch(exact_key=key),
                                 action=P4TableAction("set_exact", value=value)))
    for prefix, plen, value in T_LPM:
        ups.append(+P4TableEntry("t_lpm", match=P4TableMatch(lpm_key=f"{_ip4(prefix)}/{plen}"),
                                 action=P4TableAction("set_lpm", value=value)))
    for value, mask, valid, prio, action, param in T_TERNARY:
        act = P4TableAction(action, value=param) if param is not None else P4TableAction(action)
        ups.append(+P4TableEntry("t_ternary", match=P4TableMatch({"ternary_key": f"{value:#x}/&{mask:#x}",
                                                                  "$valid$": valid}),
                                 action=act, priority=prio))
    for lo, hi, prio, value in T_RANGE:
        ups.append(+P4TableEntry("t_range", match=P4TableMatch(range_key=f"{lo}...{hi}"),
                                 action=P4TableAction("set_range", value=value), priority=prio))
    rig.write(*ups)
    rig.write(~P4DirectMeterEntry(table_entry=P4TableEntry("t_lpm", match=P4TableMatch(lpm_key="10.2.0.0/16")),
                                  config=METER_CONFIG))


def table_model(exact_key: int, lpm_key: int, ternary_key: int, range_key: int, const_key: int,
                extra: int | None, lpm_color: int = 0, exact_default: int = T_EXACT_DEFAULT) -> dict[str, int]:
    """The result fields table_features.p4 writes, computed from the installed entries."""
    r = {"exact_result": 0, "lpm_result": 0, "ternary_result": 0, "range_result": 0,
         "const_result": 0, "path": 0, "lpm_color": lpm_color}
    if exact_key in T_EXACT:
        r["exact_result"] = T_EXACT[exact_key]
        r["path"] |= 0x01
        best = None
        for prefix, plen, value in T_LPM:
            if lpm_key >> (32 - plen) == prefix >> (32 - plen) and (best is None or plen > best[0]):
                best = (plen, value)
        if best is not None:
            r["lpm_result"] = best[1]
            r["lpm_color"] = 0  # the direct meter (green unless it is configured) writes it on a hit
    else:
        r["exact_result"] = exact_default
        r["path"] |= 0x02
    valid = int(extra is not None)
    hits = [t for t in T_TERNARY if ternary_key & t[1] == t[0] and t[2] == valid]
    if not hits:
        r["path"] |= 0x10
    else:
        _, _, _, _, action, param = max(hits, key=lambda t: t[3])
        if action == "set_ternary":
            r["ternary_result"] = param  # type: ignore[assignment]
            r["path"] |= 0x04
        else:
            r["ternary_result"] = 0x7777
            rhits = [t for t in T_RANGE if t[0] <= range_key <= t[1]]
            if rhits:
                r["range_result"] = max(rhits, key=lambda t: t[2])[3]
            r["path"] |= 0x08
    for value, mask, result in T_CONST:
        if const_key & mask == value:
            r["const_result"] = result
            break
    else:
        r["const_result"] = 0xFFFF
        r["path"] |= 0x20
    if exact_key != 0xFFFFFFFF:
        r["path"] |= 0x80
    return r


def _tframe(exact_key: int = 0, lpm_key: int = 0, ternary_key: int = 0, range_key: int = 0, const_key: int = 0,
            extra: int | None = None, lpm_color: int = 0, results: dict[str, int] | None = None) -> bytes:
    fields = {"lpm_color": lpm_color, **(results or {})}
    p = Ether(dst=DST, src=SRC) / TableProbe(exact_key=exact_key, lpm_key=lpm_key, ternary_key=ternary_key,
                                           range_key=range_key, const_key=const_key,
                                           has_extra=int(extra is not None), **fields)
    if extra is not None:
        p = p / Extra(value=extra)
    return bytes(p)


def _tcase(name: str, port: int = 1, **keys: Any) -> Case:
    keys.setdefault("lpm_color", 0x55)  # shows whether the direct meter wrote it
    args = {k: keys.get(k, 0) for k in ("exact_key", "lpm_key", "ternary_key", "range_key", "const_key")}
    results = table_model(**args, extra=keys.get("extra"), lpm_color=keys["lpm_color"])
    frame = _tframe(**keys)
    out = _tframe(**{k: v for k, v in keys.items() if k != "lpm_color"}, results=results)
    return Case(name, port, frame, [(port, out)])


def _table_cases() -> list[Case]:
    net = 0x0A000000
    return [
        _tcase("exact_hit_lpm_longest", exact_key=5, lpm_key=net | 0x010203),
        _tcase("exact_hit_lpm_short", exact_key=5, lpm_key=net | 0x090909),
        _tcase("exact_hit_lpm_miss", exact_key=5, lpm_key=0x0B000001),
        _tcase("exact_miss_default_params", exact_key=6, lpm_key=net | 0x010203),
        _tcase("ternary_priority_then_range_low", exact_key=5, ternary_key=0x1234, range_key=120),
        _tcase("ternary_range_overlap_priority", exact_key=5, ternary_key=0x1234, range_key=160),
        _tcase("ternary_range_bounds_100", ternary_key=0x1234, range_key=100),
        _tcase("ternary_range_bounds_199", ternary_key=0x1234, range_key=199),
        _tcase("ternary_range_bounds_250", ternary_key=0x1234, range_key=250),
        _tcase("ternary_range_miss", ternary_key=0x1234, range_key=251),
        _tcase("ternary_masked_match", ternary_key=0x12AB),
        _tcase("ternary_miss_default_arm", ternary_key=0x1334),
        _tcase("ternary_valid_key", ternary_key=0x1234, extra=0xBEEF),
        _tcase("ternary_valid_key_wildcard", ternary_key=0x5555, extra=0x0001, range_key=120),
        _tcase("const_exact_entry", const_key=0x01),
        _tcase("const_masked_entry", const_key=0x11),
        _tcase("const_masked_entry_2", const_key=0x1F),
        _tcase("const_default_miss", const_key=0x05),
        _tcase("const_zero_miss", const_key=0x00),
        _tcase("exit_before_reflect", exact_key=0xFFFFFFFF, ternary_key=0x1200, const_key=0x01),
        _tcase("other_port", port=3, exact_key=5, lpm_key=net | 0x010101, ternary_key=0x1234, range_key=180,
               const_key=0x10, extra=0x0102),
        Case("not_a_probe_dropped", 1, bytes(Ether(dst=DST, src=SRC) / _ip() / UDP()), []),
        Case("truncated_probe_dropped", 2, _tframe(exact_key=5)[:24], []),
    ]


def table_meter_colors(rig: Rig) -> list[tuple[int, int]]:
    """Four back-to-back hits on the metered entry (cir 1/s burst 1, pir 1/s burst 2):
    (lpm_result, colour) per packet; BMv2 gives green, yellow, red, red."""
    frame = _tframe(exact_key=5, lpm_key=0x0A020304, lpm_color=0x55)
    outs = rig.burst(1, [frame] * 4, 4)
    return [(_field(f, TableProbe, 14, "lpm_result"), _field(f, TableProbe, 14, "lpm_color")) for _, f in outs]


def table_direct_meter_config(rig: Rig) -> list[tuple[int, int, int, int] | None]:
    """The direct meter configs read back over P4Runtime: 10.2/16 (configured), 10.1/16 (not)."""
    out: list[tuple[int, int, int, int] | None] = []
    for prefix in ("10.2.0.0/16", "10.1.0.0/16"):
        (entry,) = rig.client.read(P4DirectMeterEntry(table_entry=P4TableEntry("t_lpm",
                                                                              match=P4TableMatch(lpm_key=prefix))))
        c = entry.config
        out.append(None if c is None else (c.cir, c.cburst, c.pir, c.pburst))
    return out


def table_direct_counter(rig: Rig) -> tuple[int, int, int]:
    """Three hits on t_exact key 7 (frames of growing size), then the direct counter."""
    sizes = 0
    for extra_len in (0, 10, 33):
        frame = _tframe(exact_key=7) + b"\x00" * extra_len
        sizes += len(frame)
        assert len(rig.exchange(1, frame, 1)) == 1
    (entry,) = rig.client.read(P4DirectCounterEntry(table_entry=P4TableEntry("t_exact",
                                                                             match=P4TableMatch(exact_key=7))))
    return entry.data.packet_count, entry.data.byte_count, sizes


def table_default_action(rig: Rig) -> list[int]:
    """exact_result on a miss with the default changed over P4Runtime, then restored."""
    seen = []
    for value in (0xD00D, T_EXACT_DEFAULT):
        rig.write(~P4TableEntry("t_exact", action=P4TableAction("exact_miss", value=value), is_default_action=True))
        (_, f), = rig.exchange(1, _tframe(exact_key=99), 1)
        seen.append(_field(f, TableProbe, 14, "exact_result"))
    return seen


def table_const_writes(rig: Rig) -> list[bool]:
    """Writes the program forbids: the const default and an entry of a const table."""
    rejected = []
    for update in (~P4TableEntry("t_const", action=P4TableAction("set_const", value=5), is_default_action=True),
                   +P4TableEntry("t_const", match=P4TableMatch(const_key="0x05/&0xff"),
                                 action=P4TableAction("set_const", value=5), priority=10)):
        try:
            rig.write(update)
            rejected.append(False)
        except P4RuntimeError:
            rejected.append(True)
    # the const default still applies
    (_, f), = rig.exchange(1, _tframe(const_key=0x05), 1)
    rejected.append(_field(f, TableProbe, 14, "const_result") == 0xFFFF)
    return rejected


def table_const_entries(rig: Rig) -> list[tuple[int, int, int, int]]:
    """t_const's const entries read back: (priority, value, mask, set_const value).
    BMv2's PI inverts BMv2 priorities 1, 2 (program order) around INT_MAX."""
    out = []
    for e in rig.client.read(P4TableEntry("t_const")):
        fm = e.match["const_key"]
        value, mask = (fm, 0xFF) if isinstance(fm, int) else fm
        out.append((e.priority, int(value), int(mask), int(e.action.args["value"])))
    return sorted(out)


def table_const_entries_expected() -> list[tuple[int, int, int, int]]:
    """What ``table_const_entries`` must read."""
    return sorted(((1 << 31) - 1 - (i + 1), v, m, r) for i, (v, m, r) in enumerate(T_CONST))


def _write_error(rig: Rig, update: Any) -> str:
    """The canonical code of one update's error ("OK" if the write succeeded)."""
    try:
        rig.write(update)
    except P4RuntimeError as e:
        return e.details[0].split(":", 1)[0] if e.details else e.code
    return "OK"


def _read_error(rig: Rig, entity: Any) -> str:
    """The status code of a Read ("OK" if it succeeded)."""
    try:
        rig.client.read(entity)
    except P4RuntimeError as e:
        return e.code
    return "OK"


def _te(key: int, action: str = "set_exact", **params: int) -> P4TableEntry:
    return P4TableEntry("t_exact", match=P4TableMatch(exact_key=key), action=P4TableAction(action, **params))


#: Writes a controller gets wrong: (what, update, BMv2 1.15's code, the embedded
#: target's code). BMv2's PI answers UNKNOWN where the target library fails; the
#: embedded target names the cause there (docs/embedded.md).
TABLE_WRITE_ERRORS: list[tuple[str, Callable[[], Any], str, str]] = [
    ("duplicate key", lambda: +_te(5, value=1), "ALREADY_EXISTS", "ALREADY_EXISTS"),
    ("modify a missing entry", lambda: ~_te(99, value=1), "NOT_FOUND", "NOT_FOUND"),
    ("delete a missing entry", lambda: -_te(99, value=1), "NOT_FOUND", "NOT_FOUND"),
    ("entry of a const table", lambda: +P4TableEntry("t_const", match=P4TableMatch(const_key="0x05/&0xff"),
                                                     action=P4TableAction("set_const", value=5), priority=10),
     "UNKNOWN", "PERMISSION_DENIED"),
    ("const default action", lambda: ~P4TableEntry("t_const", action=P4TableAction("set_const", value=5),
                                                   is_default_action=True), "PERMISSION_DENIED", "PERMISSION_DENIED"),
    ("ternary entry without priority", lambda: +P4TableEntry("t_ternary", match=P4TableMatch(ternary_key="0x1/&0xf"),
                                                             action=P4TableAction("set_ternary", value=1)),
     "INVALID_ARGUMENT", "INVALID_ARGUMENT"),
]


def _as_bmv2(rig: Rig, codes: list[str], table: list[tuple[str, Any, str, str]]) -> list[str]:
    """Codes in BMv2's terms: the embedded target's deliberately precise codes mapped to
    what BMv2 answers in their place (for the differential test)."""
    if rig.target != "embedded":
        return codes
    return [bmv2 if code == ours else code for code, (_, _, bmv2, ours) in zip(codes, table, strict=True)]


def table_write_codes(rig: Rig) -> list[str]:
    """The per-update code of each of ``TABLE_WRITE_ERRORS``."""
    return [_write_error(rig, make()) for _, make, _, _ in TABLE_WRITE_ERRORS]


def table_write_errors(rig: Rig) -> list[str]:
    """``table_write_codes`` in BMv2's terms."""
    return _as_bmv2(rig, table_write_codes(rig), TABLE_WRITE_ERRORS)


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


# =========================================================================================
# replication.p4
# =========================================================================================
MC_GROUP = [(1, 10), (2, 20)]       # multicast group 1: (port, rid)
I2E_SESSION, E2E_SESSION = 5, 6
I2E_REPLICA, E2E_REPLICA = (3, 0), (4, 9)  # clone sessions: (port, instance -> egress_rid)
NORMAL, INGRESS_CLONE, EGRESS_CLONE, RECIRC, REPLICATION, RESUBMIT = 0, 1, 2, 4, 5, 6


def replication_setup(rig: Rig) -> None:
    """Multicast group 1 and clone sessions 5 and 6 (replication.p4's header comment)."""
    rig.write(+P4MulticastGroupEntry(1, replicas=MC_GROUP),
              +P4CloneSessionEntry(I2E_SESSION, replicas=[I2E_REPLICA]),
              +P4CloneSessionEntry(E2E_SESSION, replicas=[E2E_REPLICA]))


def _rep(**fields: int) -> bytes:
    return bytes(Ether(dst=DST, src=SRC) / RepProbe(**fields))


def _rcase(name: str, sent: dict[str, int], outs: list[dict[str, int]], port: int = 1) -> Case:
    """``outs``: per copy, the probe fields that differ from what was sent, plus 'port'."""
    expect = []
    for o in outs:
        o = dict(o)
        out_port = o.pop("port")
        expect.append((out_port, _rep(**{**sent, **o})))
    return Case(name, port, _rep(**sent), expect)


def replication_pre_changes(rig: Rig) -> list[list[Out]]:
    """Outputs after P4Runtime changes to the PRE: group 1 modified to one replica,
    clone session 5 deleted (clone() to a missing session is a no-op); both restored."""
    seen = []
    rig.write(~P4MulticastGroupEntry(1, replicas=[(4, 44)]))
    seen.append(sorted(rig.exchange(1, _rep(op=1, mcast_grp=1, out_port=3), 1)))
    rig.write(~P4MulticastGroupEntry(1, replicas=MC_GROUP), -P4CloneSessionEntry(I2E_SESSION))
    seen.append(sorted(rig.exchange(1, _rep(op=2, out_port=2), 1)))
    rig.write(+P4CloneSessionEntry(I2E_SESSION, replicas=[I2E_REPLICA]))
    seen.append(sorted(rig.exchange(1, _rep(op=2, out_port=2), 2)))
    return seen


def replication_pre_expected() -> list[list[Out]]:
    """What ``replication_pre_changes`` must see."""
    mc = _rep(op=1, mcast_grp=1, out_port=3, egress_instance_type=REPLICATION, egress_rid=44, egress_port=4)
    orig = _rep(op=2, out_port=2, tag=0xA5, egress_port=2)
    clone = _rep(op=2, out_port=2, tag=0xA5, egress_instance_type=INGRESS_CLONE, egress_rid=I2E_REPLICA[1],
                 egress_port=I2E_REPLICA[0])
    return [[(4, mc)], [(2, orig)], sorted([(2, orig), (I2E_REPLICA[0], clone)])]


def _replication_cases() -> list[Case]:
    zero = {"ingress_instance_type": 0, "resubmit_count": 0, "recirc_count": 0}
    garbage = {"ingress_instance_type": 0x77, "resubmit_count": 0x66, "recirc_count": 0x55,
               "egress_instance_type": 0x44, "tag": 0x33, "egress_rid": 0x2222, "egress_port": 0x1111}
    i2e_port, i2e_rid = I2E_REPLICA
    e2e_port, e2e_rid = E2E_REPLICA
    return [
        _rcase("multicast_copies", {"op": 1, "mcast_grp": 1, "out_port": 4},
               [{"port": p, "egress_instance_type": REPLICATION, "egress_rid": rid, "egress_port": p}
                for p, rid in MC_GROUP]),
        _rcase("multicast_wins_over_drop_port", {"op": 1, "mcast_grp": 1, "out_port": 511}, [
            {"port": p, "egress_instance_type": REPLICATION, "egress_rid": rid, "egress_port": p}
            for p, rid in MC_GROUP], port=3),
        _rcase("multicast_group_zero_is_unicast", {"op": 1, "mcast_grp": 0, "out_port": 3},
               [{"port": 3, "egress_port": 3}]),
        _rcase("multicast_unknown_group", {"op": 1, "mcast_grp": 2, "out_port": 3}, []),
        # I2E: the clone is re-parsed from the packet as received (garbage result fields
        # survive) with only the field list (tag) preserved; the original keeps ingress's work.
        _rcase("clone_i2e", {"op": 2, "out_port": 2, **garbage}, [
            {"port": 2, **zero, "egress_instance_type": NORMAL, "tag": 0xA5, "egress_rid": 0, "egress_port": 2},
            {"port": i2e_port, "egress_instance_type": INGRESS_CLONE, "tag": 0xA5, "egress_rid": i2e_rid,
             "egress_port": i2e_port}]),
        _rcase("clone_i2e_original_dropped", {"op": 2, "out_port": 511}, [
            {"port": i2e_port, "egress_instance_type": INGRESS_CLONE, "tag": 0xA5, "egress_rid": i2e_rid,
             "egress_port": i2e_port}]),
        # E2E: the clone copies the headers as egress left them, metadata reset
        _rcase("clone_e2e", {"op": 3, "out_port": 2, "tag": 0x12}, [
            {"port": 2, "egress_instance_type": NORMAL, "tag": 0, "egress_port": 2},
            {"port": e2e_port, "egress_instance_type": EGRESS_CLONE, "tag": 0, "egress_rid": e2e_rid,
             "egress_port": e2e_port}]),
        _rcase("resubmit_preserves_field_list", {"op": 4, "out_port": 3, **garbage}, [
            {"port": 3, "ingress_instance_type": RESUBMIT, "resubmit_count": 1, "recirc_count": 0,
             "egress_instance_type": NORMAL, "tag": 0, "egress_rid": 0, "egress_port": 3}], port=2),
        _rcase("recirculate_preserves_field_list", {"op": 5, "out_port": 2}, [
            {"port": 2, "ingress_instance_type": RECIRC, "recirc_count": 1, "egress_instance_type": NORMAL,
             "egress_port": 2}]),
        _rcase("plain_unicast", {"op": 9, "out_port": 4, "egress_rid": 7}, [
            {"port": 4, "egress_port": 4, "egress_rid": 0}], port=2),
        _rcase("drop_port", {"op": 0, "out_port": 511}, []),
        Case("not_a_probe_dropped", 1, bytes(Ether(dst=DST, src=SRC, type=0x0800) / _ip()), []),
    ]


# =========================================================================================
# metadata_echo.p4
# =========================================================================================
ECHO_AT = 14
ECHO_GROUP = [(3, 30), (4, 40)]
ECHO_VOLATILE = ("ingress_global_timestamp", "enq_timestamp", "deq_timedelta", "egress_global_timestamp")


def echo_setup(rig: Rig) -> None:
    """Multicast group 1 for the echo's set_mcast_grp."""
    rig.write(+P4MulticastGroupEntry(1, replicas=ECHO_GROUP))


def echo_mask(frame: bytes, check: bool = True) -> bytes:
    """Check the clock fields against each other, then zero them.

    Both targets take them from one microsecond clock: ingress <= enqueue <= egress,
    and deq_timedelta is read just after egress_global_timestamp."""
    if check and len(frame) >= ECHO_AT + len(Echo()):
        e = Echo(frame[ECHO_AT:ECHO_AT + len(Echo())])
        assert 0 < e.ingress_global_timestamp <= e.enq_timestamp <= e.egress_global_timestamp, \
            f"timestamps out of order: ingress {e.ingress_global_timestamp}, enq {e.enq_timestamp}, " \
            f"egress {e.egress_global_timestamp}"
        spent = (e.egress_global_timestamp - e.enq_timestamp) & M32
        assert 0 <= e.deq_timedelta - spent < 20_000, f"deq_timedelta {e.deq_timedelta} vs {spent} us"
    return _zero(frame, Echo, ECHO_AT, ECHO_VOLATILE)


def _echo(payload: bytes = b"", **fields: int) -> bytes:
    return bytes(Ether(dst=DST, src=SRC) / Echo(**fields)) + payload


def _ecase(name: str, port: int, sent: dict[str, int], outs: list[dict[str, int]], payload: bytes = b"") -> Case:
    frame = _echo(payload, **sent)
    expect = []
    for o in outs:
        o = dict(o)
        out_port = o.pop("port")
        fields = {**sent, "ingress_port": port, "egress_spec": sent.get("out_port") or port,
                  "packet_length": len(frame), "egress_port": out_port, "mcast_grp": sent.get("set_mcast_grp", 0),
                  "priority": sent.get("set_priority", 0) & 7, **o}
        expect.append((out_port, _echo(payload, **fields)))
    return Case(name, port, frame, expect)


def _echo_cases() -> list[Case]:
    return [
        _ecase("reflect", 2, {}, [{"port": 2}]),
        _ecase("out_port", 1, {"out_port": 3}, [{"port": 3}]),
        # one queue per port (no --priority-queues): simple_switch 1.15 drops every
        # priority but 0 ("Priority out of range, dropping packet"); 9 is 1 in bit<3>
        _ecase("priority_beyond_one_queue_dropped", 1, {"out_port": 4, "set_priority": 5}, []),
        _ecase("priority_truncated_to_3_bits_dropped", 4, {"set_priority": 9}, []),
        _ecase("priority_8_truncated_to_0_carried", 4, {"set_priority": 8}, [{"port": 4}]),
        _ecase("packet_length_with_payload", 3, {"out_port": 2}, [{"port": 2}], payload=b"x" * 77),
        _ecase("multicast", 1, {"set_mcast_grp": 1}, [
            {"port": p, "egress_instance_type": REPLICATION, "egress_rid": rid} for p, rid in ECHO_GROUP]),
        Case("truncated_echo_dropped", 1, _echo()[:40], []),
        Case("drop_port", 1, _echo(out_port=511), []),
    ]


def echo_queue_burst(rig: Rig, n: int = 24) -> list[Echo]:
    """``n`` frames back to back into port 1, all to port 2."""
    outs = rig.burst(1, [_echo(out_port=2, _pad0=i) for i in range(n)], n)
    assert {p for p, _ in outs} == {2} and len(outs) == n
    return [Echo(f[ECHO_AT:]) for _, f in outs]


# =========================================================================================
# cpu_io.p4
# =========================================================================================
MAC1, MAC2, MAC4 = "00:00:00:00:00:01", "00:00:00:00:00:02", "00:00:00:00:00:04"
BCAST = "ff:ff:ff:ff:ff:ff"
CPU_GROUP = [1, 2, 3]


def _mac_int(mac: str) -> int:
    return int(mac.replace(":", ""), 16)


def cpu_setup(rig: Rig) -> None:
    """Digests sent one by one at once, no ack cache; multicast group 1 for broadcast."""
    rig.write(+P4DigestEntry("mac_learn_digest_t", max_list_size=1, max_timeout_ns=0, ack_timeout_ns=0),
              +P4MulticastGroupEntry(1, replicas=CPU_GROUP))


def _l2(src: str, dst: str, tag: bytes) -> bytes:
    return bytes(Ether(src=src, dst=dst, type=0x88B6) / (tag + b"." * 30))


def _digest(client: P4RuntimeClient, timeout: float) -> list[tuple[int, ...]] | None:
    try:
        msg = client.digests.get(timeout=timeout)
    except queue.Empty:
        return None
    return [tuple(int.from_bytes(m.bitstring, "big") for m in d.struct.members) for d in msg.data]


def _packet_in(rig: Rig, timeout: float) -> tuple[bytes, dict[str, int]] | None:
    """The next PacketIn as (payload, {metadata name: value}), or None."""
    try:
        msg = rig.client.packet_ins.get(timeout=timeout)
    except queue.Empty:
        return None
    assert rig.client.schema is not None
    names = {m.id: m.name for m in rig.client.schema.controller_packet_metadata["packet_in"].metadata}
    return bytes(msg.payload), {names[m.metadata_id]: int.from_bytes(m.value, "big") for m in msg.metadata}


def cpu_flow(rig: Rig) -> list[tuple[str, Any]]:
    """The learning-switch scenario of cpu_io.p4's header comment; what each step gave:
    data-plane frames, PacketIns (payload, metadata) and digests."""
    c = rig.client
    obs: list[tuple[str, Any]] = []

    def step(name: str, port: int | None, frame: bytes, n: int, want_packet_in: bool, want_digest: bool) -> None:
        """Send ``frame`` into ``port`` (None: as a PacketOut to port 3); record what came."""
        if port is None:
            rig.tb.drain()
            c.packet_out(frame, egress_port=3, _pad=0)
            outs = rig.collect(n)
        else:
            outs = rig.exchange(port, frame, n)
        obs.append((f"{name}:data", sorted(outs)))
        obs.append((f"{name}:packet_in", _packet_in(rig, 3.0 if want_packet_in else 0.2)))
        obs.append((f"{name}:digest", _digest(c, 3.0 if want_digest else 0.2)))

    # 1. unknown source and destination: digest + packet-in, nothing on data ports
    step("unknown", 1, _l2(MAC1, MAC2, b"a"), 0, True, True)
    # 2. controller learns MAC1 -> port 1; reverse frame is forwarded, MAC2 digested
    rig.write(+P4TableEntry("dmac", match=P4TableMatch(dst_addr=MAC1), action=P4TableAction("forward", port=1)),
              +P4TableEntry("learned_macs", match=P4TableMatch(src_addr=MAC1), action=P4TableAction("NoAction")))
    step("forward", 2, _l2(MAC2, MAC1, b"b"), 1, False, True)
    # 3. learned source, unknown destination: packet-in only
    step("learned_src", 1, _l2(MAC1, MAC2, b"c"), 0, True, False)
    # 4. packet-out to port 3: the frame as given, no lookup
    step("packet_out", None, _l2(MAC4, MAC2, b"d"), 1, False, False)
    # 5. broadcast via multicast group 1
    rig.write(+P4TableEntry("dmac", match=P4TableMatch(dst_addr=BCAST), action=P4TableAction("set_mcast", group=1)))
    step("broadcast", 4, _l2(MAC4, BCAST, b"e"), len(CPU_GROUP), False, True)
    return obs


def cpu_expected() -> list[tuple[str, Any]]:
    """What ``cpu_flow`` must observe."""
    meta1 = {"ingress_port": 1, "_pad": 0}
    a, b, cc, d, e = (_l2(MAC1, MAC2, b"a"), _l2(MAC2, MAC1, b"b"), _l2(MAC1, MAC2, b"c"),
                      _l2(MAC4, MAC2, b"d"), _l2(MAC4, BCAST, b"e"))
    return [
        ("unknown:data", []), ("unknown:packet_in", (a, meta1)), ("unknown:digest", [(_mac_int(MAC1), 1)]),
        ("forward:data", [(1, b)]), ("forward:packet_in", None), ("forward:digest", [(_mac_int(MAC2), 2)]),
        ("learned_src:data", []), ("learned_src:packet_in", (cc, meta1)), ("learned_src:digest", None),
        ("packet_out:data", [(3, d)]), ("packet_out:packet_in", None), ("packet_out:digest", None),
        ("broadcast:data", sorted((p, e) for p in CPU_GROUP)), ("broadcast:packet_in", None),
        ("broadcast:digest", [(_mac_int(MAC4), 4)]),
    ]


# =========================================================================================
# registers.p4
# =========================================================================================
REG_FORWARD = {1: 2, 2: 1}
SLOTS = 1024
V = [(i * 0x9E3779B9 + 0x7F000000) & M32 for i in range(32)]
W = [(i * 1000003) & M32 for i in range(32)]


def registers_setup(rig: Rig) -> None:
    """port_forward 1 -> 2, 2 -> 1 (other ports: default drop)."""
    rig.write(*(+P4TableEntry("port_forward", match=P4TableMatch(ingress_port=i),
                              action=P4TableAction("set_egress_port", port=o)) for i, o in REG_FORWARD.items()))


def _agg(index: int, values: list[int], reset: int = 0, chksum: int | None = None, sport: int = 5000) -> bytes:
    return bytes(Ether(dst=DST, src=SRC) / _ip() / UDP(sport=sport, dport=40000, chksum=chksum)
                 / RegisterHeavy(index=index, reset=reset, values=values))


def _register_cases() -> list[Case]:
    """An ordered sequence; expected values from a model of the registers."""
    regs: dict[int, list[int]] = {}
    cases = []

    def agg(name: str, port: int, index: int, values: list[int], reset: int = 0) -> None:
        slot = index & (SLOTS - 1)
        old = regs.get(slot, [0] * 32)
        new = [0] * 32 if reset else [(o + v) & M32 for o, v in zip(old, values, strict=True)]
        regs[slot] = new
        out = REG_FORWARD.get(port)
        expect = [] if out is None else [(out, _agg(index, new, reset, chksum=0))]
        cases.append(Case(name, port, _agg(index, values, reset), expect))

    agg("slot7_first", 1, 7, V)
    agg("slot7_second_doubles", 2, 7, V)
    agg("slot7_alias_index_masked", 1, 7 + SLOTS, V)
    agg("slot8_independent", 1, 8, W)
    agg("slot7_reset", 1, 7, V, reset=1)
    agg("slot7_after_reset", 2, 7, W)
    agg("slot9_dropped_but_aggregated", 3, 9, W)
    agg("slot9_sees_dropped_packet", 1, 9, W)
    agg("slot_max_index", 2, M32, V)
    plain = bytes(Ether(dst=DST, src=SRC) / _ip() / UDP(sport=5000, dport=1234) / (b"\x01" * 40))
    cases.append(Case("plain_udp_forwarded", 1, plain, [(2, plain)]))
    v6 = bytes(Ether(dst=DST, src=SRC, type=0x86DD) / (b"\x60" + b"\x00" * 50))
    cases.append(Case("not_ipv4_forwarded", 2, v6, [(1, v6)]))
    opts = bytes(Ether(dst=DST, src=SRC) / _ip(options=[IPOption_NOP()] * 3 + [IPOption_EOL()])
                 / UDP(sport=1, dport=40000) / RegisterHeavy(index=7, values=V))
    cases.append(Case("ipv4_options_not_aggregated", 1, opts, [(2, opts)]))
    short = _agg(7, V)[:14 + 20 + 8 + 30]
    cases.append(Case("agg_truncated_forwarded_untouched", 1, short, [(2, short)]))
    cases.append(Case("port3_dropped", 3, plain, []))
    return cases


REG_CASES = _register_cases()


READBACK_SLOT = 100  # a slot the sequence does not use


def register_readback(rig: Rig) -> list[int]:
    """Aggregate V twice into slot 100 (from port 1, then port 2), then read agg_r05,
    agg_r31 and agg_r00 at that slot over P4Runtime (expected: 2 * V, mod 2^32)."""
    for port in (1, 2):
        assert len(rig.exchange(port, _agg(READBACK_SLOT, V), 1)) == 1
    out = []
    for reg in ("agg_r05", "agg_r31", "agg_r00"):
        (entry,) = rig.client.read(P4RegisterEntry(reg, index=READBACK_SLOT))
        out.append(int(entry.data))
    return out


# =========================================================================================
# l2_path.p4
# =========================================================================================
L2_DMAC = {DST: 2, BCAST: 4}     # dmac entries: destination MAC -> port
L2_DEFAULT_PORT = 3              # dmac's default action, forward(3), set over P4Runtime
L2_ROUTES = {"10.0.0.2": 1}      # ipv4_host: destination -> port (TTL - 1)
L2_SMAC_LOW = {2: 0x22, 3: 0x33}  # port_smac: egress_port -> new src_addr[7:0]
PACKET_TOO_SHORT = 1


def l2_setup(rig: Rig) -> None:
    """The entries of l2_path.p4's header comment; dmac's default becomes forward(3)."""
    ups: list[Any] = [+P4TableEntry("dmac", match=P4TableMatch(dst_addr=mac), action=P4TableAction("forward", port=p))
                      for mac, p in L2_DMAC.items()]
    ups += [+P4TableEntry("ipv4_host", match=P4TableMatch(dst_addr=ip), action=P4TableAction("route", port=p))
            for ip, p in L2_ROUTES.items()]
    ups += [+P4TableEntry("port_smac", match=P4TableMatch(egress_port=p), action=P4TableAction("rewrite_smac", low=v))
            for p, v in L2_SMAC_LOW.items()]
    rig.write(*ups)
    rig.write(~P4TableEntry("dmac", action=P4TableAction("forward", port=L2_DEFAULT_PORT), is_default_action=True))


def _l2_out(frame: bytes, in_port: int, out_port: int, error: int = 0) -> bytes:
    """What l2_path.p4's egress makes of a bridged ``frame`` (see its header comment)."""
    src = int.from_bytes(frame[6:12], "big")
    low = L2_SMAC_LOW.get(out_port, src & 0xFF)
    src = (src & 0xFF00_0000_0000) | (in_port & 0xFF) << 32 | len(frame) << 16 | error << 8 | low
    return frame[:6] + src.to_bytes(6, "big") + frame[12:]


def _l2_case(name: str, port: int, frame: bytes, error: int = 0) -> Case:
    dst = ":".join(f"{b:02x}" for b in frame[:6])
    out = L2_DMAC.get(dst, L2_DEFAULT_PORT)
    return Case(name, port, frame, [(out, _l2_out(frame, port, out, error))])


def _l2_cases() -> list[Case]:
    other = "02:00:00:00:00:99"
    udp = bytes(_ip(dst="10.0.0.9") / UDP(sport=7, dport=9) / (b"u" * 18))
    routed_in = bytes(Ether(dst=DST, src=SRC) / _ip(dst="10.0.0.2") / UDP(sport=7, dport=9) / b"routed")
    ip = IP(routed_in[14:34])
    ip.ttl, ip.chksum = 63, None
    routed_out = _l2_out(routed_in[:14] + bytes(ip) + routed_in[34:], 2, L2_ROUTES["10.0.0.2"])
    return [
        _l2_case("arp_request_broadcast", 1, bytes(Ether(dst=BCAST, src=SRC) / ARP(pdst="10.0.0.2"))),
        _l2_case("arp_reply_known_dst", 3, bytes(Ether(dst=DST, src=SRC) / ARP(op=2))),
        _l2_case("arp_unknown_dst_default_action", 2, bytes(Ether(dst=other, src=SRC) / ARP(op=2))),
        _l2_case("unknown_ethertype", 1, _eth(0x9000) + b"raw-frame" * 5),
        _l2_case("unknown_ethertype_default_action", 4, _eth(0x9000, dst=other) + b"x" * 46),
        _l2_case("ipv6_frame", 1, _eth(0x86DD) + b"\x60" + b"\x00" * 39),
        _l2_case("vlan_tagged", 2, _eth(0x8100) + b"\x00\x05\x08\x00" + udp),
        _l2_case("ethernet_header_only_14_bytes", 1, _eth(0x9000)),
        _l2_case("ethernet_header_only_default_action", 2, _eth(0x88CC, dst=other)),
        _l2_case("ipv4_type_14_bytes_parser_error", 1, _eth(0x0800), PACKET_TOO_SHORT),
        _l2_case("ipv4_truncated_10_bytes", 3, _eth(0x0800) + udp[:10], PACKET_TOO_SHORT),
        _l2_case("ipv4_truncated_19_bytes_default_action", 4, _eth(0x0800, dst=other) + udp[:19], PACKET_TOO_SHORT),
        _l2_case("ipv4_exactly_20_bytes_bridged", 1, _eth(0x0800) + udp[:20]),
        _l2_case("ipv4_no_route_bridged", 2, _eth(0x0800) + udp),
        Case("ipv4_routed_ttl_and_checksum", 2, routed_in, [(L2_ROUTES["10.0.0.2"], routed_out)]),
    ]


def l2_default_drop(rig: Rig) -> list[list[Out]]:
    """dmac's default set to drop() (the program's own default) drops an unknown
    destination; back to forward(3), the frame goes out on port 3 again."""
    frame = _eth(0x9000, dst="02:00:00:00:00:77") + b"d" * 20
    seen = []
    for action, n in ((P4TableAction("drop"), 0), (P4TableAction("forward", port=L2_DEFAULT_PORT), 1)):
        rig.write(~P4TableEntry("dmac", action=action, is_default_action=True))
        seen.append(sorted(rig.exchange(1, frame, n)))
    return seen


def l2_default_drop_expected() -> list[list[Out]]:
    """What ``l2_default_drop`` must see."""
    frame = _eth(0x9000, dst="02:00:00:00:00:77") + b"d" * 20
    return [[], [(L2_DEFAULT_PORT, _l2_out(frame, 1, L2_DEFAULT_PORT))]]


# =========================================================================================
# instance_meta.p4
# =========================================================================================
IM_GROUP = [(2, 21), (3, 31)]              # multicast group 1: (port, rid)
IM_I2E, IM_E2E = (3, 7), (4, 9)            # clone sessions 5 and 6: (port, instance -> egress_rid)
IM_PROBE_LEN = len(ImProbe())
IM_EXTRA_IN, IM_EXTRA_ING, IM_EXTRA_EG = 0x11223344, 0xABCD0123, 0x4567CDEF
PROBE_MAGIC_ERROR = 0xEE                   # magic that fails the parser's verify()
CPU_PORT_NUM = 255                         # the testbed's --cpu-port


def im_setup(rig: Rig) -> None:
    """Multicast group 1 and clone sessions 5 (I2E) and 6 (E2E)."""
    rig.write(+P4MulticastGroupEntry(1, replicas=IM_GROUP),
              +P4CloneSessionEntry(5, replicas=[IM_I2E]), +P4CloneSessionEntry(6, replicas=[IM_E2E]))


def _im(payload: bytes = b"", extra: int | None = None, **fields: int) -> bytes:
    f = bytes(Ether(dst=DST, src=SRC) / ImProbe(**{"has_extra": int(extra is not None), **fields}))
    return f + (b"" if extra is None else extra.to_bytes(4, "big")) + payload


@dataclass
class _ImPacket:
    """simple_switch's view of one instance_meta.p4 packet: parsed headers, payload,
    metadata and the packet-length register."""

    probe: dict[str, int]
    extra: int | None
    payload: bytes
    meta: dict[str, int]          # parser_mark, tag, instance_type, ingress_port, parser_error
    length: int                   # the packet-length register
    packet_in: int | None = None  # packet_in_t.ingress_port when valid

    def deparse(self) -> bytes:
        pin = b"" if self.packet_in is None else (self.packet_in << 7).to_bytes(2, "big")
        ext = b"" if self.extra is None else self.extra.to_bytes(4, "big")
        return pin + bytes(Ether(dst=DST, src=SRC) / ImProbe(**self.probe)) + ext + self.payload


def _im_parse(frame: bytes, port: int) -> _ImPacket:
    """The parser on a frame into ``port`` (not the CPU port): metadata all zero but
    the parser's mark; a bad magic stops parsing after the probe (ProbeMagic = 2 here)."""
    probe = ImProbe(frame[14:14 + IM_PROBE_LEN]).fields
    rest = frame[14 + IM_PROBE_LEN:]
    meta = {"parser_mark": 0x77, "tag": 0, "instance_type": 0, "ingress_port": port, "parser_error": 0}
    extra = None
    if probe["magic"] == PROBE_MAGIC_ERROR:
        meta["parser_error"] = 2
    elif probe["has_extra"] == 1:
        extra, rest = int.from_bytes(rest[:4], "big"), rest[4:]
    return _ImPacket(dict(probe), extra, rest, meta, len(frame))


def _im_ingress(p: _ImPacket, ilen: int) -> None:
    """ImIngress on one pass (``ilen``: standard_metadata.packet_length of this pass)."""
    m, pr = p.meta, p.probe
    pr.update(i_instance_type=m["instance_type"], i_parser_error=int(m["parser_error"] != 0),
              i_ingress_port=m["ingress_port"], i_packet_length=ilen)
    if pr["hdr_ops"] & 1 and p.extra is None:
        p.extra, p.length = IM_EXTRA_ING, p.length + 4
    elif pr["hdr_ops"] & 1:
        p.extra = IM_EXTRA_ING
    if pr["hdr_ops"] & 2 and p.extra is not None:
        p.extra, p.length = None, p.length - 4


def _im_egress(p: _ImPacket, port: int, rid: int) -> None:
    """ImEgress (without its clone/recirculate decisions)."""
    m, pr = p.meta, p.probe
    pr.update(e_instance_type=m["instance_type"], e_parser_error=m["parser_error"],
              e_ingress_port=m["ingress_port"], e_egress_spec=0, e_egress_port=port, e_egress_rid=rid,
              e_mcast_grp=m.get("mcast_grp", 0), e_packet_length=p.length, e_priority=0, e_checksum_error=0,
              e_parser_mark=m["parser_mark"], e_tag=m["tag"])
    if m["instance_type"] == 0:
        if pr["hdr_ops"] & 4:
            if p.extra is None:
                p.length += 4
            p.extra = IM_EXTRA_EG
        if pr["hdr_ops"] & 8 and p.extra is not None:
            p.extra, p.length = None, p.length - 4


def _reset_meta(p: _ImPacket, tag: int, instance_type: int) -> None:
    p.meta = {"parser_mark": 0, "tag": tag, "instance_type": instance_type, "ingress_port": 0, "parser_error": 0}


def im_model(frame: bytes, port: int) -> list[Out]:
    """What simple_switch 1.15 sends for ``frame`` into data port ``port``, worked out
    from its rules (see instance_meta.p4's header comment); CPU-port output not modelled."""
    out: list[Out] = []

    def egress(p: _ImPacket, eport: int, rid: int) -> None:
        _im_egress(p, eport, rid)
        op = p.probe["op"]
        if p.meta["instance_type"] == 0 and op == 3:
            c = copy.deepcopy(p)  # headers as egress left them, metadata reset
            _reset_meta(c, 0, 2)
            egress(c, IM_E2E[0], IM_E2E[1])
        if p.meta["instance_type"] == 0 and op == 5 and p.meta["tag"] != 0xC7:
            d = p.deparse()  # re-parsed from the deparsed frame, metadata reset
            r = _im_parse(d, 0)
            r.meta.update(tag=0xC7, instance_type=4)
            ingress(r, len(d))
            return
        out.append((eport, p.deparse()))

    def ingress(p: _ImPacket, ilen: int) -> None:
        _im_ingress(p, ilen)
        op, first = p.probe["op"], p.meta["instance_type"] == 0
        eport = p.probe["out_port"] & 0x1FF
        if first and op == 2:
            c = _im_parse(frame, port)  # I2E: the frame as received, re-parsed
            _reset_meta(c, 0xA5, 1)
            c.length = len(frame)
            p.meta["tag"] = 0xA5
            egress(c, IM_I2E[0], IM_I2E[1])
        if first and op == 4:
            r = _im_parse(frame, 0)  # resubmit: the frame as received, metadata reset
            r.meta.update(tag=0xB6, instance_type=6)
            ingress(r, len(frame))
            return
        p.meta["instance_type"] = 0
        if first and op == 1 and p.probe["mcast_grp"] == 1:
            p.meta["instance_type"], p.meta["mcast_grp"] = 5, 1
            for gport, rid in IM_GROUP:
                egress(copy.deepcopy(p), gport, rid)
            return
        if first and op == 1 and p.probe["mcast_grp"] != 0:
            return  # an unknown group: no copies
        if eport != 511:
            egress(p, eport, 0)

    ingress(_im_parse(frame, port), len(frame))
    return out


def _imcase(name: str, port: int, payload: bytes = b"", extra: int | None = None, **fields: int) -> Case:
    frame = _im(payload, extra, **fields)
    return Case(name, port, frame, im_model(frame, port))


def _im_cases() -> list[Case]:
    return [
        _imcase("normal", 1, out_port=2),
        _imcase("normal_payload_and_extra", 2, payload=b"p" * 33, extra=IM_EXTRA_IN, out_port=4),
        _imcase("normal_ingress_adds_header", 1, hdr_ops=1, out_port=2),
        _imcase("normal_ingress_removes_header", 1, extra=IM_EXTRA_IN, hdr_ops=2, out_port=3),
        _imcase("normal_egress_adds_header", 4, hdr_ops=4, out_port=1),
        _imcase("normal_egress_removes_header", 3, extra=IM_EXTRA_IN, hdr_ops=8, out_port=3),
        _imcase("normal_parser_error", 2, magic=PROBE_MAGIC_ERROR, extra=IM_EXTRA_IN, out_port=1),
        _imcase("multicast", 1, op=1, mcast_grp=1, out_port=4),
        _imcase("multicast_ingress_adds_header", 4, op=1, mcast_grp=1, hdr_ops=1, payload=b"m" * 7),
        _imcase("clone_i2e", 1, op=2, out_port=2),
        _imcase("clone_i2e_ingress_removes_header", 2, op=2, extra=IM_EXTRA_IN, hdr_ops=2, out_port=1),
        _imcase("clone_i2e_parser_error_reset", 1, op=2, magic=PROBE_MAGIC_ERROR, out_port=2),
        _imcase("clone_i2e_original_dropped", 1, op=2, out_port=511),
        _imcase("clone_e2e", 1, op=3, out_port=2),
        _imcase("clone_e2e_after_ingress_add", 2, op=3, hdr_ops=1, payload=b"e" * 11, out_port=2),
        _imcase("clone_e2e_after_egress_add", 3, op=3, hdr_ops=4, out_port=1),
        _imcase("clone_e2e_after_egress_remove", 3, op=3, extra=IM_EXTRA_IN, hdr_ops=8, out_port=1),
        _imcase("resubmit", 2, op=4, out_port=3),
        _imcase("resubmit_ingress_adds_header", 2, op=4, hdr_ops=1, out_port=3),
        _imcase("recirculate", 1, op=5, out_port=4),
        _imcase("recirculate_egress_adds_header", 1, op=5, hdr_ops=4, payload=b"r" * 5, out_port=4),
    ]


def im_cpu_paths(rig: Rig) -> list[tuple[str, Any]]:
    """PacketOut (ingress invalidates packet_out_t), a packet to the CPU port (egress makes
    packet_in_t valid) and an E2E clone of it: data-port frames and PacketIns."""
    obs: list[tuple[str, Any]] = []
    rig.tb.drain()
    rig.client.packet_out(_im(b"o" * 9, hdr_ops=1, out_port=9), egress_port=2, _pad=0)
    obs.append(("packet_out", sorted(rig.collect(1))))
    for name, frame in (("to_cpu", _im(out_port=CPU_PORT_NUM)), ("to_cpu_e2e_clone", _im(op=3, out_port=CPU_PORT_NUM))):
        outs = rig.exchange(1, frame, 1 if "clone" in name else 0)
        obs.append((f"{name}:data", sorted(outs)))
        obs.append((f"{name}:packet_in", _packet_in(rig, 3.0)))
    return obs


def im_cpu_expected() -> list[tuple[str, Any]]:
    """What ``im_cpu_paths`` must observe (simple_switch 1.15)."""
    po_in = _im(b"o" * 9, hdr_ops=1, out_port=9)
    po_len = len(po_in) + 2  # packet_out_t arrives on the CPU port in front of the frame
    po_out = _im(b"o" * 9, IM_EXTRA_ING, has_extra=0, hdr_ops=1, out_port=9, i_ingress_port=CPU_PORT_NUM, i_packet_length=po_len,
                 e_ingress_port=CPU_PORT_NUM, e_egress_port=2, e_packet_length=po_len - 2 + 4, e_parser_mark=0x77)
    cpu = dict(out_port=CPU_PORT_NUM, i_ingress_port=1, e_ingress_port=1, e_egress_port=CPU_PORT_NUM,
               e_parser_mark=0x77)
    sent = _im(out_port=CPU_PORT_NUM)
    to_cpu = _im(**cpu, i_packet_length=len(sent), e_packet_length=len(sent))
    c_orig = _im(op=3, **cpu, i_packet_length=len(sent), e_packet_length=len(sent))
    # the clone copies the headers as egress left them, packet_in_t included, and the
    # length register after it became valid
    c_clone = (1 << 7).to_bytes(2, "big") + _im(
        op=3, out_port=CPU_PORT_NUM, i_ingress_port=1, i_packet_length=len(sent), e_instance_type=2,
        e_egress_port=IM_E2E[0], e_egress_rid=IM_E2E[1], e_packet_length=len(sent) + 2)
    meta = {"ingress_port": 1, "_pad": 0}
    return [("packet_out", [(2, po_out)]),
            ("to_cpu:data", []), ("to_cpu:packet_in", (to_cpu, meta)),
            ("to_cpu_e2e_clone:data", [(IM_E2E[0], c_clone)]), ("to_cpu_e2e_clone:packet_in", (c_orig, meta))]


# =========================================================================================
# specs, fixtures, tests
# =========================================================================================
SPECS: dict[str, ProgramSpec] = {
    "parser_features": ProgramSpec(parser_setup, _parser_cases()),
    "table_features": ProgramSpec(table_setup, _table_cases(), extras=[
        table_meter_colors, table_direct_meter_config, table_direct_counter, table_default_action,
        table_const_writes, table_const_entries, table_write_errors]),
    "action_features": ProgramSpec(action_setup, _action_cases(), mask=arith_mask, masked=("arith.rand",),
                                   extras=[arith_meter_colors, arith_meter_config, arith_counter,
                                           arith_index_errors]),
    "hash_checksum": ProgramSpec(hash_setup, _hash_cases()),
    "replication": ProgramSpec(replication_setup, _replication_cases(), extras=[replication_pre_changes]),
    "metadata_echo": ProgramSpec(echo_setup, _echo_cases(), mask=echo_mask,
                                 masked=tuple(f"echo.{n}" for n in ECHO_VOLATILE)),
    "cpu_io": ProgramSpec(cpu_setup, [], extras=[cpu_flow]),
    "registers": ProgramSpec(registers_setup, REG_CASES, ordered=True),
    "l2_path": ProgramSpec(l2_setup, _l2_cases(), extras=[l2_default_drop]),
    "instance_meta": ProgramSpec(im_setup, _im_cases(), extras=[im_cpu_paths]),
}


def _ids(case: Case) -> str:
    return case.name


@pytest.fixture(scope="module", params=TARGETS)
def target(request: pytest.FixtureRequest) -> str:
    """Each target in turn; bmv2 only where simple_switch_grpc is installed."""
    if request.param == "bmv2" and not bmv2_available():
        pytest.skip("real BMv2 not installed: simple_switch_grpc is not on PATH")
    return request.param


@contextlib.contextmanager
def open_rig(program: str, target: str, priority_queues: int = 1,
             specs: dict[str, ProgramSpec] | None = None) -> Iterator[Rig]:
    """A started rig for ``program`` on ``target`` with its setup (from ``specs``, by
    default this file's ``SPECS``) done; stopped on exit."""
    missing = [p.name for p in (BUILD / f"{program}.json", BUILD / f"{program}.p4info.txt") if not p.exists()]
    if missing:
        pytest.skip(f"p4c output missing: {missing} (run `make p4`)")
    rig = Rig(program, target, priority_queues).start()
    try:
        (SPECS if specs is None else specs)[program].setup(rig)
        yield rig
    finally:
        rig.close()


class TestParserFeatures:
    """parser_features.p4: selects, masks, stacks, lookahead, verify, errors, push/pop."""

    @pytest.fixture(scope="class")
    @classmethod
    def rig(cls, target: str) -> Iterator[Rig]:
        with open_rig("parser_features", target) as rig:
            yield rig

    @pytest.mark.parametrize("case", SPECS["parser_features"].cases, ids=_ids)
    def test_frame(self, rig: Rig, case: Case) -> None:
        run_case(rig, SPECS["parser_features"], case)


class TestTableFeatures:
    """table_features.p4: match kinds, priorities, defaults, const entries, hit/miss/
    action_run control flow, exit, direct counter and direct meter."""

    @pytest.fixture(scope="class")
    @classmethod
    def rig(cls, target: str) -> Iterator[Rig]:
        with open_rig("table_features", target) as rig:
            yield rig

    @pytest.mark.parametrize("case", SPECS["table_features"].cases, ids=_ids)
    def test_frame(self, rig: Rig, case: Case) -> None:
        run_case(rig, SPECS["table_features"], case)

    def test_direct_meter_colors(self, rig: Rig) -> None:
        assert table_meter_colors(rig) == [(0x0216, 0), (0x0216, 1), (0x0216, 2), (0x0216, 2)]

    def test_direct_meter_config_read_back(self, rig: Rig) -> None:
        cfg = METER_CONFIG
        assert table_direct_meter_config(rig) == [(cfg.cir, cfg.cburst, cfg.pir, cfg.pburst), None]

    def test_direct_counter(self, rig: Rig) -> None:
        packets, nbytes, sent = table_direct_counter(rig)
        assert (packets, nbytes) == (3, sent)

    def test_mutable_default_action(self, rig: Rig) -> None:
        assert table_default_action(rig) == [0xD00D, T_EXACT_DEFAULT]

    def test_const_default_and_const_entries_are_read_only(self, rig: Rig) -> None:
        assert table_const_writes(rig) == [True, True, True]

    def test_const_entries_read_back_with_bmv2_priorities(self, rig: Rig) -> None:
        assert table_const_entries(rig) == table_const_entries_expected()

    def test_write_error_codes(self, rig: Rig) -> None:
        expect = [bmv2 if rig.target == "bmv2" else ours for _, _, bmv2, ours in TABLE_WRITE_ERRORS]
        assert table_write_codes(rig) == expect


class TestActionFeatures:
    """action_features.p4: arithmetic, shifts, slices, casts, saturation, logic,
    validity, random, counters and meters, mark_to_drop."""

    @pytest.fixture(scope="class")
    @classmethod
    def rig(cls, target: str) -> Iterator[Rig]:
        with open_rig("action_features", target) as rig:
            yield rig

    @pytest.mark.parametrize("case", SPECS["action_features"].cases, ids=_ids)
    def test_frame(self, rig: Rig, case: Case) -> None:
        run_case(rig, SPECS["action_features"], case)

    def test_random_covers_range(self, rig: Rig) -> None:
        frame = _arith_frame(a=1, b=1)
        values = {_field(f, Arith, ARITH_AT, "rand") for _, f in rig.burst(3, [frame] * 40, 40)}
        assert values <= set(range(100, 200)) and len(values) > 10, sorted(values)

    def test_indirect_meter_colors(self, rig: Rig) -> None:
        assert arith_meter_colors(rig) == [0, 1, 2, 2]

    def test_indirect_meter_config_read_back(self, rig: Rig) -> None:
        cfg = METER_CONFIG
        assert arith_meter_config(rig) == [(cfg.cir, cfg.cburst, cfg.pir, cfg.pburst), None]

    def test_indirect_counter(self, rig: Rig) -> None:
        packets, nbytes, sent = arith_counter(rig)
        assert (packets, nbytes) == (3, sent)

    def test_index_error_codes(self, rig: Rig) -> None:
        expect = [bmv2 if rig.target == "bmv2" else ours for _, _, bmv2, ours in ARITH_INDEX_ERRORS]
        assert arith_index_codes(rig) == expect


class TestHashChecksum:
    """hash_checksum.p4: crc16, crc32, identity, csum16 hashes; IPv4 checksum verify/update."""

    @pytest.fixture(scope="class")
    @classmethod
    def rig(cls, target: str) -> Iterator[Rig]:
        with open_rig("hash_checksum", target) as rig:
            yield rig

    @pytest.mark.parametrize("case", SPECS["hash_checksum"].cases, ids=_ids)
    def test_frame(self, rig: Rig, case: Case) -> None:
        run_case(rig, SPECS["hash_checksum"], case)

    def test_reference_vectors(self) -> None:
        assert crc16_arc(b"123456789") == 0xBB3D
        assert zlib.crc32(b"123456789") == 0xCBF43926
        assert ones_complement_csum(bytes.fromhex("450000730000400040110000c0a80001c0a800c7")) == 0xB861


class TestReplication:
    """replication.p4: multicast, clone I2E/E2E, resubmit, recirculate, instance_type."""

    @pytest.fixture(scope="class")
    @classmethod
    def rig(cls, target: str) -> Iterator[Rig]:
        with open_rig("replication", target) as rig:
            yield rig

    @pytest.mark.parametrize("case", SPECS["replication"].cases, ids=_ids)
    def test_frame(self, rig: Rig, case: Case) -> None:
        run_case(rig, SPECS["replication"], case)

    def test_pre_changes_over_p4runtime(self, rig: Rig) -> None:
        assert replication_pre_changes(rig) == replication_pre_expected()


class TestMetadataEcho:
    """metadata_echo.p4: every standard_metadata field and the queueing_metadata.qid alias."""

    @pytest.fixture(scope="class")
    @classmethod
    def rig(cls, target: str) -> Iterator[Rig]:
        with open_rig("metadata_echo", target) as rig:
            yield rig

    @pytest.mark.parametrize("case", SPECS["metadata_echo"].cases, ids=_ids)
    def test_frame(self, rig: Rig, case: Case) -> None:
        run_case(rig, SPECS["metadata_echo"], case)

    def test_timestamps_follow_the_clock(self, rig: Rig) -> None:
        """Microseconds since the switch started: within the rig's lifetime, increasing."""
        seen = []
        for _ in range(3):
            before = (time.monotonic() - rig.t_start) * 1e6
            (_, f), = rig.exchange(1, _echo(), 1)
            after = (time.monotonic() - rig.t_start) * 1e6
            e = Echo(f[ECHO_AT:])
            assert 0 < e.ingress_global_timestamp <= after + 1000, (e.ingress_global_timestamp, before, after)
            assert e.egress_global_timestamp - e.ingress_global_timestamp < 100_000
            seen.append(e.ingress_global_timestamp)
            time.sleep(0.01)
        assert seen[0] + 10_000 <= seen[1] + 1 and seen[1] + 10_000 <= seen[2] + 1, seen

    def test_queue_burst(self, rig: Rig) -> None:
        """A burst to one port: order kept, queue depths within the burst, FIFO timestamps."""
        echoes = echo_queue_burst(rig)
        n = len(echoes)
        assert [e._pad0 for e in echoes] == list(range(n))
        for e in echoes:
            assert 0 <= e.enq_qdepth < n and 0 <= e.deq_qdepth < n, (e.enq_qdepth, e.deq_qdepth)
            assert e.qid == 0 and e.egress_port == 2 and e.egress_instance_type == 0
        enq = [e.enq_timestamp for e in echoes]
        deq = [e.egress_global_timestamp for e in echoes]
        assert enq == sorted(enq) and deq == sorted(deq)


class TestPriorityQueues:
    """metadata_echo.p4 with 4 strict-priority queues per port (``--priority-queues 4``):
    ``qid`` (through the ``queueing_metadata.qid`` alias) is the priority, and a priority
    beyond the last queue is dropped ("Priority out of range" in simple_switch). Both
    targets take ``--priority-queues`` (simple_switch_grpc 1.15: after ``--``)."""

    @pytest.fixture(scope="class")
    @classmethod
    def rig(cls, target: str) -> Iterator[Rig]:
        with open_rig("metadata_echo", target, priority_queues=4) as rig:
            yield rig

    @pytest.mark.parametrize("priority", [0, 1, 3])
    def test_qid_is_priority(self, rig: Rig, priority: int) -> None:
        (port, f), = rig.exchange(1, _echo(out_port=2, set_priority=priority), 1)
        e = Echo(f[ECHO_AT:])
        assert (port, e.priority, e.qid, e.egress_port) == (2, priority, priority, 2)

    def test_priority_out_of_range_dropped(self, rig: Rig) -> None:
        assert rig.exchange(1, _echo(out_port=2, set_priority=5), 0) == []


class TestCpuIo:
    """cpu_io.p4: packet-in, packet-out and a digest over P4Runtime."""

    @pytest.fixture(scope="class")
    @classmethod
    def rig(cls, target: str) -> Iterator[Rig]:
        with open_rig("cpu_io", target) as rig:
            yield rig

    def test_learning_switch_flow(self, rig: Rig) -> None:
        got = cpu_flow(rig)
        expect = cpu_expected()
        for (name, g), (_, e) in zip(got, expect, strict=True):
            assert g == e, f"[{rig.target}] {name}: expected {e!r}, got {g!r}"


class TestRegisters:
    """registers.p4: 32 register read-add-writes per packet, reset, index masking."""

    @pytest.fixture(scope="class")
    @classmethod
    def rig(cls, target: str) -> Iterator[Rig]:
        with open_rig("registers", target) as rig:
            yield rig

    def test_sequence(self, rig: Rig) -> None:
        for case in REG_CASES:
            run_case(rig, SPECS["registers"], case)

    def test_register_read_over_p4runtime(self, rig: Rig) -> None:
        try:
            got = register_readback(rig)
        except P4RuntimeError as e:
            if rig.target == "bmv2" and e.code == "UNIMPLEMENTED":
                pytest.skip("BMv2's P4Runtime server (PI, 2023) answers UNIMPLEMENTED to register reads")
            raise
        assert got == [2 * V[5] & M32, 2 * V[31] & M32, 2 * V[0] & M32]


class TestL2Path:
    """l2_path.p4: non-IPv4, unknown-EtherType and short frames (down to the 14-byte
    Ethernet header, IPv4 with a parser error) bridged by destination MAC, then an
    egress table keyed on egress_port rewriting a slice of the source MAC."""

    @pytest.fixture(scope="class")
    @classmethod
    def rig(cls, target: str) -> Iterator[Rig]:
        with open_rig("l2_path", target) as rig:
            yield rig

    @pytest.mark.parametrize("case", SPECS["l2_path"].cases, ids=_ids)
    def test_frame(self, rig: Rig, case: Case) -> None:
        run_case(rig, SPECS["l2_path"], case)

    def test_default_action_drop_then_forward(self, rig: Rig) -> None:
        assert l2_default_drop(rig) == l2_default_drop_expected()


class TestInstanceMetadata:
    """instance_meta.p4: every standard_metadata field per instance type (normal, I2E and
    E2E clone, resubmit, recirculate, replication, PacketOut, to the CPU port) and
    simple_switch's packet-length register through setValid/setInvalid."""

    @pytest.fixture(scope="class")
    @classmethod
    def rig(cls, target: str) -> Iterator[Rig]:
        with open_rig("instance_meta", target) as rig:
            yield rig

    @pytest.mark.parametrize("case", SPECS["instance_meta"].cases, ids=_ids)
    def test_frame(self, rig: Rig, case: Case) -> None:
        run_case(rig, SPECS["instance_meta"], case)

    def test_packet_out_and_packet_in(self, rig: Rig) -> None:
        got, expect = im_cpu_paths(rig), im_cpu_expected()
        for (name, g), (_, e) in zip(got, expect, strict=True):
            assert g == e, f"[{rig.target}] {name}: expected {e!r}, got {g!r}"


# -- differential: the same frames through both targets ----------------------------------
def observe(program: str, target: str, specs: dict[str, ProgramSpec] | None = None) -> list[tuple[str, Any]]:
    """Every case's output frames (masked) and every extra's result, on ``target``."""
    specs = SPECS if specs is None else specs
    spec = specs[program]
    obs: list[tuple[str, Any]] = []
    with open_rig(program, target, specs=specs) as rig:
        for case in spec.cases:
            got = rig.exchange(case.port, case.frame, len(case.expect))
            obs.append((case.name, sorted((p, spec.mask(f)) for p, f in got)))
        for extra in spec.extras:
            obs.append((extra.__name__, extra(rig)))
    return obs


@pytest.mark.bmv2
@pytest.mark.parametrize("program", sorted(SPECS))
def test_differential(program: str) -> None:
    """Fresh embedded and BMv2 switches, same setup and frames: identical outputs
    (``ProgramSpec.masked`` fields zeroed, after their plausibility checks)."""
    assert_same_as_bmv2(program)


def assert_same_as_bmv2(program: str, specs: dict[str, ProgramSpec] | None = None) -> None:
    """Run ``program``'s cases and extras on fresh embedded and BMv2 switches; fail with
    every difference (skip where BMv2 is not installed)."""
    if not bmv2_available():
        pytest.skip("real BMv2 not installed: simple_switch_grpc is not on PATH")
    ours, theirs = observe(program, "embedded", specs), observe(program, "bmv2", specs)
    assert [n for n, _ in ours] == [n for n, _ in theirs]
    diffs = []
    for (name, a), (_, b) in zip(ours, theirs, strict=True):
        if a != b:
            if isinstance(a, list) and isinstance(b, list) and all(isinstance(x, tuple) for x in a + b):
                detail = "; ".join(_first_diff(fa, fb) for (_, fa), (_, fb) in zip(a, b, strict=False)
                                   if isinstance(fa, bytes) and isinstance(fb, bytes) and fa != fb)
                diffs.append(f"{name}: embedded {len(a)} frame(s) {[x[0] for x in a]}, bmv2 {len(b)} "
                             f"{[x[0] for x in b]} {detail}")
            else:
                diffs.append(f"{name}: embedded {a!r} != bmv2 {b!r}")
    assert not diffs, f"{program}: embedded target differs from BMv2:\n" + "\n".join(diffs)
