"""Multicast on the native backend against the Python one: the PRE's groups live in
native memory and the replicas (egress, checksums, deparse) are made in C; the frames
out, their order, the counters and the switch counters are the same as the Python
backend's (itself checked against BMv2 by tests/test_conformance_replication.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scapy.all import IP, UDP, Ether

from targets.embedded.native import mcast
from targets.embedded.native.build import compiler
from targets.embedded.state import Replica, TableEntry
from tests.native_pair import PROGRAMS, pair, python_out, run_both, snapshot, through_c_loop

pytestmark = pytest.mark.skipif(compiler() is None, reason="no C compiler")

ROUTES = "MyIngress.forwarding.ipv4_routes"
CPU = 64


def _program(stem: str) -> Path:
    return next(p for p in PROGRAMS if p.stem == stem)


class _Calls:
    """Counts the calls of ``mcast.send_replicas`` (replicas made in C) and
    ``mcast.resume`` (a replication the Python path finished)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sent = self.resumed = 0
        send, resume = mcast.send_replicas, mcast.resume

        def counting_send(*a: Any) -> None:
            self.sent += 1
            send(*a)

        def counting_resume(*a: Any) -> None:
            self.resumed += 1
            resume(*a)

        monkeypatch.setattr(mcast, "send_replicas", counting_send)
        monkeypatch.setattr(mcast, "resume", counting_resume)


def _router(sws: tuple[Any, Any], groups: dict[int, list[Replica]]) -> None:
    """forward.p4: 10.<g>.0.0/16 to multicast group g; the replica with rid 5 is rewritten
    into a unicast to a worker (result fanout, which reads egress_rid); port 5 loses
    every packet (its egress drops); TOS 0x80 asks for priority 7 (beyond 4 queues)."""
    for sw in sws:
        p = sw.program

        def add(table: str, key: tuple, action: str, *params: int, prio: int = 0, p: Any = p) -> None:
            p.tables[table].insert(TableEntry(key, p.action_call(table, action, params), prio))

        for g in groups:
            add(ROUTES, ((0x0A000000 | g << 16, 16),), "MyIngress.forwarding.set_multicast_group", g)
        add("MyEgress.result_fanout.ina_result_fanout", (5,), "MyEgress.result_fanout.set_worker_destination",
            0x0A090009, 0x020000000909)
        add("MyEgress.link_emulation.link_loss", (5,), "MyEgress.link_emulation.set_loss_rate", 0xFFFFFFFF)
        for port in range(1, 7):
            add("MyEgress.mac_rewrite.port_macs", (port,), "MyEgress.mac_rewrite.set_source_mac", 0x020000000100 + port)
        add("MyIngress.priority_classifier.dscp_priority", ((0x80, 0xFC),),
            "MyIngress.priority_classifier.set_priority", 7, prio=10)
        for g, reps in groups.items():
            sw.pre.set_group(g, reps, create=True)


def _udp(dst: str, rng: np.random.Generator, tos: int = 0) -> bytes:
    return bytes(Ether(src="00:00:0a:00:00:01", dst="02:00:00:01:00:01")
                 / IP(src="10.0.0.1", dst=dst, ttl=int(rng.integers(2, 64)), tos=tos)
                 / UDP(sport=int(rng.integers(1, 65535)), dport=5000) / rng.bytes(int(rng.integers(0, 300))))


GROUPS = {
    1: [Replica(2, 0)],                                        # a group of one
    2: [Replica(2, 0), Replica(3, 5), Replica(4, 0), Replica(6, 9)],  # several; rid 5: fanout
    3: [Replica(1, 0), Replica(5, 0), Replica(2, 5)],          # the ingress port; port 5's egress drops
    4: [Replica(2, 0), Replica(CPU, 0), Replica(3, 5)],        # the CPU port: a packet-in queued in C
    5: [],                                                     # an empty group
}


def test_groups_replicated_in_c_identical(monkeypatch: pytest.MonkeyPatch) -> None:
    """Groups of one, of several ports (egress_rid read in egress), one holding the
    ingress port and a port whose egress drops, one through the CPU port, an empty
    one, a missing one, and priorities beyond the last queue: the same frames in the
    same order, counters and switch counters as the Python backend."""
    calls = _Calls(monkeypatch)
    sws = pair(_program("forward"), cpu_port=CPU, priority_queues=4)
    _router(sws, GROUPS)
    rng = np.random.default_rng(3)
    frames = []
    for _ in range(240):
        g = int(rng.choice([1, 2, 3, 4, 5, 7]))
        frames.append((1, _udp(f"10.{g}.0.{int(rng.integers(1, 255))}", rng, tos=int(rng.choice([0, 0, 0x80])))))
    diffs = run_both(sws, frames)
    assert not diffs, f"{len(diffs)} frames differ, first: {diffs[0]}"
    a, b = snapshot(sws[0]), snapshot(sws[1])
    assert a == b
    tx = {p: s.tx for p, s in sws[1].stats.ports.items() if s.tx}
    assert set(tx) == {1, 2, 3, 4, 6, CPU}, tx  # every replica port but the lossy one
    assert a["stats"][0] > 0 and a["stats"][2] > 0  # egress drops, priorities out of range
    assert any(f[0] == "in" for f in a["seen"])  # group 4's CPU replica
    assert calls.sent > 150 and calls.resumed == 0  # the CPU port's replicas made in C too


def test_egress_rid_and_instance_type_per_replica(monkeypatch: pytest.MonkeyPatch) -> None:
    """replication.p4 writes each replica's instance_type, egress_rid and egress_port
    into the frame: group 1 of (port 1, rid 10), (port 2, rid 20) leaves as on the
    Python backend, every replica made in C."""
    from tests.p4.packets import RepProbe

    calls = _Calls(monkeypatch)
    sws = pair(_program("replication"), priority_queues=1)
    for sw in sws:
        sw.pre.set_group(1, [Replica(1, 10), Replica(2, 20)], create=True)
        sw.pre.set_group(2, [Replica(3, 7)], create=True)
    frames = [(0, bytes(Ether(type=0x88B6) / RepProbe(op=1, mcast_grp=g, out_port=3))) for g in (1, 2, 1, 9)]
    outs = [sws[1].process(p, f) for p, f in frames]
    assert calls.sent == 4 and calls.resumed == 0
    first = outs[0]
    assert [p for p, _ in first] == [1, 2]
    probes = [RepProbe(f[14:]) for _, f in first]
    assert [(x.egress_instance_type, x.egress_rid, x.egress_port) for x in probes] == [(5, 10, 1), (5, 20, 2)]
    assert outs[3] == []  # no such group: no copy
    assert [sws[0].process(p, f) for p, f in frames] == outs


def test_group_writes_reach_native_memory() -> None:
    """Insert, modify, delete and clear of groups (and a program swap) are seen by the
    next packet, as on the Python backend; a background compile (adopt) takes the
    groups written meanwhile."""
    from targets.embedded.native.glue import adopt

    sws = pair(_program("forward"), cpu_port=CPU, priority_queues=4)
    _router(sws, {2: [Replica(2, 0)]})
    rng = np.random.default_rng(5)
    f = _udp("10.2.0.1", rng)

    def both() -> list[int]:
        a, b = sws[0].process(1, f), sws[1].process(1, f)
        assert a == b
        return [p for p, _ in b]

    assert both() == [2]
    for sw in sws:
        sw.pre.set_group(2, [Replica(3, 0), Replica(4, 0), Replica(2, 0)], create=False)
    assert both() == [3, 4, 2]
    for sw in sws:
        sw.pre.groups[2] = [Replica(6, 0)]  # a direct dict write is followed too
    assert both() == [6]
    for sw in sws:
        sw.pre.delete_group(2)
    assert both() == []
    for sw in sws:
        sw.pre.groups.update({2: [Replica(1, 0)]})
    assert both() == [1]
    many = [Replica((1, 2, 3, 4, 6)[p % 5], p) for p in range(300)]  # more than the first record buffer
    for sw in sws:
        sw.pre.set_group(2, many, create=False)
    assert len(both()) == 300
    # a program whose C was built in the background picks up the groups when swapped in
    nat_sw = sws[1]
    prog = nat_sw.program
    gen, prog.native = prog.native.gen, None
    prog.native_built = gen
    nat_sw.pre.set_group(2, [Replica(4, 0)], create=False)
    assert adopt(prog, 1, nat_sw.pre)
    assert [p for p, _ in nat_sw.process(1, f)] == [4]


def test_c_loop_sends_replicas_like_python() -> None:
    """The same groups served by the loop in C (loop.c, io.c: recvmmsg, replicas out by
    sendmmsg) over datagram socket pairs standing in for ports 1-6: what each port
    sends, in order, the packet-ins (group 4's CPU replica, queued in C and handed to
    the packet-in handlers after the batch) and the counters are the Python backend's."""
    sws = pair(_program("forward"), cpu_port=CPU, priority_queues=4)
    _router(sws, GROUPS)
    py, sw = sws
    rng = np.random.default_rng(9)
    frames = [_udp(f"10.{int(rng.choice([1, 2, 3, 4, 5, 7]))}.0.1", rng, tos=int(rng.choice([0, 0, 0x80])))
              for _ in range(200)]
    expect = python_out(py, [(1, f) for f in frames])
    got = through_c_loop(sw, [(1, f) for f in frames], range(1, 7), 20)  # a stopped replication finishes in Python
    assert got == expect
    assert any(s[0] == "in" for s in sw.seen)  # type: ignore[attr-defined]
    assert snapshot(py) == snapshot(sw)
    assert {p: s.tx for p, s in py.stats.ports.items() if s.tx} == {p: s.tx for p, s in sw.stats.ports.items() if s.tx}
    assert sum(len(v) for v in got.values()) > 150


def test_replicas_whose_egress_truncates_clones_or_recirculates(monkeypatch: pytest.MonkeyPatch) -> None:
    """mc_egress.p4: a replica whose egress truncates leaves from C, cut; one whose
    egress clones E2E or recirculates stops the replication in C after its egress (the
    replicas before it sent from C); the Python path finishes it and makes the rest.
    Frames, order and counters as on the Python backend, for every position of such a
    replica in the group."""
    from targets.embedded.state import CloneSession

    calls = _Calls(monkeypatch)
    sws = pair(_program("mc_egress"), priority_queues=1)
    groups = {1: [Replica(1, 0), Replica(2, 1), Replica(3, 0)], 2: [Replica(2, 2), Replica(3, 0)],
              3: [Replica(1, 5), Replica(3, 3), Replica(2, 4)], 4: [Replica(1, 4), Replica(2, 0)]}
    for sw in sws:
        for g, reps in groups.items():
            sw.pre.set_group(g, reps, create=True)
        sw.pre.set_clone_session(9, CloneSession([Replica(4, 0)]), create=True)
    probe = bytes.fromhex("0004" "0000" "00" "0000" "0000" "00")  # out_port 4, results zero
    frames = [(0, bytes(Ether(type=0x88B6)) + g.to_bytes(2, "big") + probe[2:] + bytes(range(40)))
              for g in (1, 2, 3, 4, 0, 1, 3)]
    diffs = run_both(sws, frames)
    assert not diffs, diffs[0]
    assert snapshot(sws[0]) == snapshot(sws[1])
    assert calls.resumed == 3 and calls.sent >= calls.resumed  # group 2's clone, group 3's recirculation twice
    out = sws[1].process(*frames[0])  # group 1: its truncated replica made in C
    assert [(p, len(f)) for p, f in out] == [(1, len(frames[0][1])), (2, 20), (3, len(frames[0][1]))]
    assert calls.resumed == 3


def test_clones_leave_in_the_python_backends_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """Clone sessions: replication.p4's I2E clone (made in C: the frame parsed again,
    metadata reset, the tag of its field list kept) leaves before its original, an E2E
    clone (made in C too) after it; a session cut to 20 bytes, one of two ports and one
    through the CPU port (a packet-in, made in C too) -- as on the Python backend."""
    from targets.embedded.state import CloneSession
    from tests.p4.packets import RepProbe

    calls = _Calls(monkeypatch)
    sws = pair(_program("replication"), priority_queues=1, cpu_port=CPU)
    sessions = [CloneSession([Replica(3, 0)]), CloneSession([Replica(3, 4)], packet_length_bytes=20),
                CloneSession([Replica(1, 0), Replica(3, 2)]), CloneSession([Replica(3, 0), Replica(CPU, 0)])]
    frames = [(0, bytes(Ether(type=0x88B6) / RepProbe(op=op, mcast_grp=1, out_port=2) / bytes(30))) for op in (2, 3, 1, 3)]
    for sw in sws:
        sw.pre.set_clone_session(6, CloneSession([Replica(4, 0)]), create=True)
        sw.pre.groups[1] = [Replica(1, 10), Replica(2, 20)]
    for i, session in enumerate(sessions):
        for sw in sws:
            sw.pre.clone_sessions[5] = session
        sent, resumed = calls.sent, calls.resumed
        assert sws[0].process(*frames[0]) == sws[1].process(*frames[0])  # the I2E clone ...
        assert (calls.sent - sent, calls.resumed - resumed) == (1, 0)  # ... made in C
        diffs = run_both(sws, frames)
        assert not diffs, (i, diffs[0])
    assert snapshot(sws[0]) == snapshot(sws[1])
    for sw in sws:
        sw.pre.clone_sessions[5] = sessions[1]
    first = sws[1].process(*frames[0])
    assert [(p, len(f)) for p, f in first] == [(3, 20), (2, len(frames[0][1]))]  # I2E clone first, cut
    assert RepProbe(first[1][1][14:]).tag == 0xA5 and sws[0].process(*frames[0]) == first
    sent, resumed = calls.sent, calls.resumed
    assert [p for p, _ in sws[1].process(*frames[1])] == [2, 4]  # the original, then its E2E clone ...
    assert (calls.sent - sent, calls.resumed - resumed) == (1, 0)  # ... made in C
