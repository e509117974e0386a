"""Digests on the native backend against the Python one: cpu_io.p4's MAC-learning digest
is queued in native memory by the packet that asks for it (the packet goes on in C, it
never waits for Python) and handed to the digest handlers after the batch, before any
packet the Python path finishes -- so the handlers see the digests and packet-ins in
the Python backend's order, per frame (``process``) and through the loop in C."""

from __future__ import annotations

from typing import Any

import pytest
from scapy.all import Ether

from targets.embedded.native.build import compiler
from targets.embedded.state import TableEntry
from tests.native_pair import PROGRAMS, pair, python_out, run_both, snapshot, through_c_loop

pytestmark = pytest.mark.skipif(compiler() is None, reason="no C compiler")
CPU_IO = next(p for p in PROGRAMS if p.stem == "cpu_io")
CPU = 255


def _switches() -> tuple[Any, Any]:
    """Both backends; MACs 1-3 learned (no digest), dmac 1-6 -> ports 1-3 (7 and up: to
    the CPU port, a packet-in)."""
    sws = pair(CPU_IO, cpu_port=CPU, priority_queues=1)
    for sw in sws:
        p = sw.program
        for m in (1, 2, 3):
            p.tables["CIngress.learned_macs"].insert(TableEntry((m,), p.action_call("CIngress.learned_macs", "NoAction", ())))
        for m in range(1, 7):
            p.tables["CIngress.dmac"].insert(TableEntry((m,), p.action_call("CIngress.dmac", "CIngress.forward",
                                                                            (1 + m % 3,))))
    return sws


def _frames(n: int) -> list[tuple[int, bytes]]:
    """Unknown sources (a digest each) mixed with known ones, most to known
    destinations, every 9th to an unknown one (a packet-in)."""
    out = []
    for i in range(n):
        src = 1 + i % 3 if i % 4 == 0 else 0x100 + i
        dst = 7 + i if i % 9 == 8 else 1 + i % 6
        out.append((1 + i % 3, bytes(Ether(src=_mac(src), dst=_mac(dst), type=0x0800)) + bytes(30)))
    return out


def _mac(v: int) -> str:
    return ":".join(f"{b:02x}" for b in v.to_bytes(6, "big"))


def _count_learn(sw: Any, name: str = "_learn") -> list[int]:
    """Count the calls of the switch's Python method ``name`` (the Python path's)."""
    calls: list[int] = []
    real = getattr(sw, name)
    setattr(sw, name, lambda *a: (calls.append(1), real(*a)))
    return calls


def test_digests_are_queued_in_c_and_delivered_in_order() -> None:
    py, sw = _switches()
    py_learn, nat_learn = _count_learn(py), _count_learn(sw)
    nat_tail = _count_learn(sw, "_ingress_tail")
    frames = _frames(60)
    diffs = run_both((py, sw), frames)
    assert not diffs, diffs[0]
    assert snapshot(py) == snapshot(sw)  # "seen": every digest and packet-in, in order
    digests = [s for s in sw.seen if s[0] == "digest"]  # type: ignore[attr-defined]
    assert len(digests) == 45 and digests[0] == ("digest", "mac_learn_digest_t", [(0x101, 2)])
    assert len(py_learn) == 45 and not nat_learn  # every digest made in C
    pins = [s for s in sw.seen if s[0] == "in"]  # type: ignore[attr-defined]
    assert len(pins) == 6 and not nat_tail  # every packet-in made in C too


def test_c_loop_delivers_digests_after_the_batch_in_order() -> None:
    py, sw = _switches()
    nat_learn, nat_tail = _count_learn(sw), _count_learn(sw, "_ingress_tail")
    frames = [(1, f) for _, f in _frames(300)]  # one port: the order in which they are run is the order sent
    expect = python_out(py, frames)
    assert through_c_loop(sw, frames, range(1, 4), 50) == expect
    assert sw.seen == py.seen  # type: ignore[attr-defined]
    assert snapshot(py) == snapshot(sw)  # the CPU port's tx counted in C as in Python
    assert sum(s[0] == "in" for s in sw.seen) == 33  # type: ignore[attr-defined]
    assert not nat_learn and not nat_tail  # digests and packet-ins queued in C, in order


def test_long_packet_ins_grow_the_queue_in_c() -> None:
    """Eight 20 kB frames to unknown destinations in one receive batch of the loop in C:
    160 kB of packet-ins, past the events queue's first 128 kB (meta.c grows it); each
    reaches the handlers whole, in order, as on the Python backend."""
    py, sw = _switches()
    frames = [(1, bytes(Ether(src=_mac(1), dst=_mac(0x900 + k), type=0x0800)) + bytes([k]) * (20000 + k))
              for k in range(8)]
    assert python_out(py, frames) == {}
    assert through_c_loop(sw, frames, range(1, 2), 8) == {}  # the eight in one batch
    assert len(sw.seen) == 8 and sw.seen == py.seen  # type: ignore[attr-defined]
    assert sw.stats.ports[CPU].tx == 8 and not sw.stats.ports[CPU].queue_drops
