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
``test_differential`` (``test_conformance_differential.py``) runs the same setup and
frame sequence through a fresh embedded switch and a fresh BMv2 and compares the outputs byte for byte (masked fields named in
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


This module holds the rig, the cases and their comparison; ``conformance_models_*`` the
per-program models, ``conformance_specs`` the program table, ``test_conformance_*`` the tests.
"""

from __future__ import annotations

import os
import select
import shutil
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from scapy.fields import BitField
from scapy.layers.inet import IP
from scapy.layers.l2 import Ether

from targets.embedded.switch import (
    AUXDATA_SPACE,
    PACKET_AUXDATA,
    SOL_PACKET,
    TP_STATUS_VLAN_VALID,
    restore_vlan_tag,
)
from targets.launch import bmv2_available
from targets.p4rt_client import P4RuntimeClient
from targets.testbed import Testbed as SwitchTestbed

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


def _ids(case: Case) -> str:
    return case.name


@pytest.fixture(scope="module", params=TARGETS)
def target(request: pytest.FixtureRequest) -> str:
    """Each target in turn; bmv2 only where simple_switch_grpc is installed."""
    if request.param == "bmv2" and not bmv2_available():
        pytest.skip("real BMv2 not installed: simple_switch_grpc is not on PATH")
    return request.param
