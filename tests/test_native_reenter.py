"""Resubmit, recirculate, truncate and egress clones (E2E) on the native backend against
the Python one: the
passes run in C (no ``Switch._reenter`` on the native switch), the field lists survive
them, and the frames out, their ports, the instance types and standard metadata each
pass records (instance_meta.p4 writes them into the packet), the per-queue counts and
the switch's counters are the Python backend's -- per frame (``process``) and through
the loop in C (recvmmsg/sendmmsg over datagram socket pairs standing in for ports).
The Python backend is itself held to BMv2 by tests/test_conformance_replication.py."""

from __future__ import annotations

from typing import Any

import pytest

from targets.embedded.native.build import compiler
from tests.conformance_models_replication import _im
from tests.native_pair import PROGRAMS, pair, python_out, run_both, snapshot, through_c_loop

pytestmark = pytest.mark.skipif(compiler() is None, reason="no C compiler")
INSTANCE_META = next(p for p in PROGRAMS if p.stem == "instance_meta")
REENTER_LOOP = next(p for p in PROGRAMS if p.stem == "reenter_loop")


def _count_reenter(sw: Any) -> list[int]:
    """Calls of the switch's Python ``_reenter`` (a pass the Python path made)."""
    calls: list[int] = []
    real = sw._reenter

    def counting(*a: Any) -> None:
        calls.append(1)
        real(*a)

    sw._reenter = counting
    return calls


def _frames() -> list[tuple[int, bytes]]:
    """Resubmits (op 4) and recirculations (op 5), with headers made valid or invalid in
    ingress or egress on the way (hdr_ops), with and without the extra header and a
    payload, to ports 2 and 3; egress clones (op 3) and unicasts between them."""
    out = []
    for op in (4, 5, 3, 0):
        for hdr_ops in range(16):
            extra = 0x11223344 if hdr_ops & 1 else None
            out.append((1, _im(bytes(range(hdr_ops * 3)), extra, op=op, hdr_ops=hdr_ops, out_port=2 + hdr_ops % 2)))
    return out


def test_resubmit_and_recirculate_run_in_c_like_python() -> None:
    py, sw = pair(INSTANCE_META, priority_queues=2)
    py_calls, nat_calls = _count_reenter(py), _count_reenter(sw)
    frames = _frames()
    diffs = run_both((py, sw), frames)
    assert not diffs, diffs[0]
    assert snapshot(py) == snapshot(sw)
    assert len(py_calls) == 32 and not nat_calls  # 16 resubmits and 16 recirculations, all in C
    it = [f[14 + 8] for p, f in sw.process(*frames[0])] + [f[14 + 8] for p, f in sw.process(*frames[16])]
    assert it == [6, 4]  # ingress saw instance_type RESUBMITTED, then RECIRCULATED


def test_c_loop_resubmits_and_recirculates_like_python() -> None:
    from targets.embedded.state import CloneSession, Replica

    py, sw = pair(INSTANCE_META, priority_queues=2)
    for s in (py, sw):
        s.pre.clone_sessions[6] = CloneSession([Replica(3, 9), Replica(2, 1)], packet_length_bytes=30)
    nat_calls = _count_reenter(sw)
    frames = _frames() * 3
    assert through_c_loop(sw, frames, range(1, 4), 40) == python_out(py, frames)
    assert snapshot(py) == snapshot(sw)
    assert {p: s.tx for p, s in py.stats.ports.items() if s.tx} == {p: s.tx for p, s in sw.stats.ports.items() if s.tx}
    assert not nat_calls


def _loop(mode: int, limit: int, payload: bytes = b"") -> tuple[int, bytes]:
    from scapy.all import Ether

    return 1, bytes(Ether(dst="00:00:00:00:00:02", src="00:00:00:00:00:01", type=0x88B7)) + bytes(
        [mode, limit, 0, 0]) + payload


def test_endless_chains_stop_at_the_bound_and_truncate_cuts_like_python() -> None:
    """reenter_loop.p4: a packet resubmitted or recirculated forever is dropped after the
    switch's bound of passes (counted in loop_limit; every pass counted in a register
    and, for recirculations, in the queue it went through); a chain of resubmits then
    recirculations that ends in time leaves with its pass count; a unicast truncated in
    egress leaves cut. All in C; the same frames, state and counters as Python."""
    py, sw = pair(REENTER_LOOP, priority_queues=1)
    nat_calls = _count_reenter(sw)
    frames = [_loop(1, 0), _loop(2, 0), _loop(3, 5, b"x" * 30), _loop(3, 16), _loop(3, 17), _loop(4, 16, bytes(60)),
              _loop(4, 200, bytes(10)), _loop(0, 0, bytes(5))]
    diffs = run_both((py, sw), frames)
    assert not diffs, diffs[0]
    assert snapshot(py) == snapshot(sw)
    assert sw.stats.loop_limit == 3 and not nat_calls  # modes 1, 2 and the 17 + 17 chain
    out = sw.process(*_loop(3, 5))
    assert [(p, f[16], f[17]) for p, f in out] == [(2, 10, 4)]  # 10 passes, the last one recirculated
    assert [len(f) for _, f in sw.process(*_loop(4, 16, bytes(60)))] == [16]


def test_egress_clones_are_made_in_c_like_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """instance_meta.p4's E2E clone (op 3, session 6) of unicasts with headers added and
    removed on the way, for sessions of one port, of two, cut to 20 bytes, with an
    egress_rid, none, and one through the CPU port (a packet-in, in C too): the original leaves
    first, then each copy with instance_type EGRESS_CLONE, as on the Python backend."""
    from targets.embedded.native import mcast
    from targets.embedded.state import CloneSession, Replica

    made: list[int] = []  # native calls whose copies C made (all of them, the original first)
    send = mcast.send_replicas
    monkeypatch.setattr(mcast, "send_replicas", lambda *a: (made.append(1), send(*a)))
    py, sw = pair(INSTANCE_META, priority_queues=2, cpu_port=64)
    frames = [(1, _im(bytes(range(h * 5)), 0x11223344 if h & 1 else None, op=3, hdr_ops=h, out_port=2 + h % 2))
              for h in range(16)]
    sessions = [CloneSession([Replica(4, 9)]), CloneSession([Replica(4, 9), Replica(5, 3)]),
                CloneSession([Replica(4, 9)], packet_length_bytes=20), None, CloneSession([Replica(4, 1), Replica(64, 0)])]
    for i, session in enumerate(sessions):
        for s in (py, sw):
            s.pre.clone_sessions.pop(6, None)
            if session is not None:
                s.pre.clone_sessions[6] = session
        made.clear()
        diffs = run_both((py, sw), frames)
        assert not diffs, (i, diffs[0])
        assert len(made) == len(frames)
    assert snapshot(py) == snapshot(sw)
    sw.pre.clone_sessions[6] = sessions[1]
    out = sw.process(*frames[0])
    assert [(p, f[14 + 16]) for p, f in out] == [(2, 0), (4, 2), (5, 2)]  # e_instance_type: normal, then E2E


def test_a_chain_the_python_path_finishes_keeps_its_pass_count() -> None:
    """reenter_loop.p4 with port 2 shaped: the resubmits run in C, then the pass that goes
    to the shaped port is finished by the Python path, which carries on the count (the
    bound of 32 passes holds across both) -- as on the Python backend."""
    import time

    py, sw = pair(REENTER_LOOP, priority_queues=1)
    for s in (py, sw):
        s.set_port_rate(1e9, port=2)
    outs: dict[str, list] = {}
    for s in (py, sw):
        for f in (_loop(3, 5), _loop(3, 16), _loop(3, 17), _loop(1, 0), _loop(4, 16, bytes(60))):
            out = s.process(*f)
            while s._redrain:  # what a recirculation queued while the queues drained
                s._redrain = False
                s._drain(time.monotonic())
                out += s._txq
                s._txq = []
            outs.setdefault(s.backend, []).append(out)
    assert outs["python"] == outs["native"]
    passes = [[(p, f[16] if len(f) > 16 else -len(f)) for p, f in o] for o in outs["native"]]
    assert passes == [[(2, 10)], [(2, 32)], [], [], [(2, -16)]]  # passes made; mode 4: cut to 16 bytes
    assert snapshot(py) == snapshot(sw)
    assert sw.stats.loop_limit == 2  # the 17 + 17 chain, resubmitting forever
