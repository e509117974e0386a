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
- a select mask compares ``key & mask == value & mask``: ``0x8847 &&& 0xFFFE`` matches
  0x8846 and 0x8847, not 0x8848;
- a two-rate meter checks the peak rate first (red), then the committed rate (yellow):
  ``Meter::set_rates`` reverses the {CIR, PIR} list;
- an I2E clone re-parses the packet as received and keeps only the preserved field
  list; an E2E clone copies the headers as egress left them; clone sessions are
  multicast groups in PI, so a clone's ``egress_rid`` is its replica's ``instance``;
- without compile-time priority queueing (the default build), ``priority`` is carried
  but ``qid`` is 0.
"""

from __future__ import annotations

import os
import queue
import select
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
from scapy.layers.inet import ICMP, IP, TCP, UDP, IPOption_EOL, IPOption_NOP
from scapy.layers.l2 import Ether

from targets.launch import bmv2_available
from targets.p4rt_client import P4RuntimeClient, P4RuntimeError
from targets.testbed import Testbed
from tests.p4.packets import Arith, Echo, Extra, HashProbe, RegisterHeavy, RepProbe, TableProbe

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

    def __init__(self, program: str, target: str) -> None:
        self.program = program
        self.target = target
        self.json = BUILD / f"{program}.json"
        self.p4info = BUILD / f"{program}.p4info.txt"
        self.tb = Testbed(NPORTS, target=target, json_path=str(self.json))
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

    def write(self, *updates: Any) -> None:
        """P4Runtime Write of finsy entities (``+`` insert, ``~`` modify, ``-`` delete)."""
        self.client.write(*updates)

    def collect(self, n: int, timeout: float = 3.0, settle: float = SETTLE) -> list[Out]:
        """Frames from all ports: wait for ``n`` (then ``settle`` more s), or for
        ``DROP_WAIT`` s of silence when ``n`` is 0."""
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
                        out.append((by_fd[s.fileno()], s.recv(65536)))
                    except BlockingIOError:
                        break
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

