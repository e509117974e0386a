"""The hand-coded floors of the target benchmark (bench/bare_forwarder.py) produce exactly
the bytes the embedded target produces for forward.p4 and registers.p4, frame for frame:
they are the same work done by hand, so their rate bounds a Python target's."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from scapy.all import IP, UDP, Ether

from bench.bare_forwarder import (
    BENCH_DST,
    BENCH_EGRESS_PORT,
    BENCH_NEXT_HOP_MAC,
    BENCH_PORT_MAC,
    bench_work,
)
from bench.target_bench import _frame
from targets.embedded.state import TableEntry
from targets.embedded.switch import Switch
from tests.p4.packets import RegisterHeavy

ROOT = Path(__file__).resolve().parent.parent


def _switch(json_path: Path) -> Switch:
    sw = Switch(seed=1)
    sw.install_program(sw.load_program(json_path.read_bytes()))
    return sw


def _out(sw: Switch, frame: bytes) -> bytes | None:
    out = sw.process(1, frame)
    assert len(out) <= 1
    return out[0][1] if out else None


def test_hand_forward_matches_forward_p4() -> None:
    sw = _switch(ROOT / "p4src" / "build" / "forward.json")
    p = sw.program
    routes, macs = "MyIngress.forwarding.ipv4_routes", "MyEgress.mac_rewrite.port_macs"
    p.tables[routes].insert(TableEntry(((int(ipaddress.IPv4Address(BENCH_DST)), 32),), p.action_call(
        routes, "MyIngress.forwarding.set_next_hop", (BENCH_NEXT_HOP_MAC, BENCH_EGRESS_PORT))))
    p.tables[macs].insert(TableEntry((BENCH_EGRESS_PORT,), p.action_call(
        macs, "MyEgress.mac_rewrite.set_source_mac", (BENCH_PORT_MAC,))))
    hand = bench_work("forward")
    good = _frame("forward")
    bad_csum = good[:24] + bytes([good[24] ^ 0xFF]) + good[25:]
    frames = [good,
              bytes(Ether(dst="00:00:00:00:01:00") / IP(src="10.0.0.9", dst="10.0.0.2", ttl=2, tos=0x20)
                    / UDP(sport=7, dport=9) / b"payload"),
              bytes(Ether() / IP(dst="10.0.0.2", ttl=1) / UDP()),  # TTL expires: both drop
              bytes(Ether() / IP(dst="10.0.0.3") / UDP()),  # no route: both drop
              bad_csum]
    outs = [_out(sw, f) for f in frames]
    assert outs[0] is not None and outs[1] is not None and outs[2:] == [None, None, None]
    for f, want in zip(frames, outs, strict=True):
        assert hand(f) == want


def test_hand_registers_matches_registers_p4() -> None:
    sw = _switch(ROOT / "tests" / "p4" / "build" / "registers.json")
    p = sw.program
    pf = "GIngress.port_forward"
    p.tables[pf].insert(TableEntry((1,), p.action_call(pf, "GIngress.set_egress_port", (2,))))
    hand = bench_work("registers")

    def agg(index: int, values: list[int], reset: int = 0) -> bytes:
        return bytes(Ether(dst="00:00:00:00:00:02", src="00:00:00:00:00:01") / IP(src="10.0.0.1", dst="10.0.0.2")
                     / UDP(sport=5000) / RegisterHeavy(index=index, reset=reset, values=values))

    big = [0xFFFFFFF0 + i for i in range(32)]  # sums wrap at 2^32
    frames = [_frame("registers"), agg(3, big), agg(3, list(range(32))), agg(1027, big), agg(3, [0] * 32, reset=1),
              agg(3, [5] * 32), bytes(Ether() / IP(dst="10.0.0.2") / UDP(dport=53) / b"not aggregation")]
    for f in frames:
        want = _out(sw, f)
        assert want is not None
        assert hand(f) == want
