"""The native traffic manager (targets/embedded/native/tm.c) against the Python one
(traffic.py, the reference): forward.p4 on two switches, one per backend, the same
frames of four priorities (DSCP -> priority) through a shaped port 2, each switch's ports
real datagram sockets. Time is injected (the Python switch's clock, tm.c's np_tm_clock),
so both drain at the same instants: the frames out after every drain, their order, the
per-queue enqueued / dropped / occupancy counters and the port's drops must be equal
element by element. Also: rates written while packets wait, frames of the Python path
(one at a time, replicas) joining the native queues, egresses at dequeue that the Python
path finishes (mc_egress.p4). Then the C loop drains a shaped port on its own timer."""

from __future__ import annotations

import socket
import threading
import time
import types
from pathlib import Path
from typing import Any

import pytest

from targets.embedded import switch as switch_mod
from targets.embedded.native import tmglue
from targets.embedded.native.build import compiler
from targets.embedded.state import TableEntry
from targets.embedded.switch import Switch

ROOT = Path(__file__).resolve().parent.parent
FORWARD = ROOT / "p4src" / "build" / "forward.json"
pytestmark = pytest.mark.skipif(compiler() is None, reason="no C compiler")
T0 = 1000.0  # the injected clock's start (seconds)


def _switch(backend: str, depth: int) -> Switch:
    sw = Switch(seed=1, backend=backend, priority_queues=4, queue_depth=depth)
    prog = sw.load_program(FORWARD.read_bytes())
    sw.install_program(prog)
    routes, macs = "MyIngress.forwarding.ipv4_routes", "MyEgress.mac_rewrite.port_macs"
    prog.tables[routes].insert(TableEntry(((0x0A000002, 32),), prog.action_call(
        routes, "MyIngress.forwarding.set_next_hop", (0x000000000002, 2))))
    prog.tables[macs].insert(TableEntry((2,), prog.action_call(
        macs, "MyEgress.mac_rewrite.set_source_mac", (0x020000000102,))))
    dscp = "MyIngress.priority_classifier.dscp_priority"
    for prio in range(4):
        prog.tables[dscp].insert(TableEntry(((prio << 4 << 2, 0xFC),), prog.action_call(
            dscp, "MyIngress.priority_classifier.set_priority", (prio,)), priority=10))
    sw.peers = {}  # type: ignore[attr-defined]
    for port in (1, 2):
        mine, peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        mine.setblocking(False)
        peer.setblocking(False)
        sw._ports[port], sw._fd_port[mine.fileno()] = mine, port
        sw.peers[port] = peer  # type: ignore[attr-defined]
    return sw


def _frames(n: int) -> list[bytes]:
    from scapy.all import IP, UDP, Ether

    out = []
    for i in range(n):  # priorities 0..3 interleaved, a tag in the source port
        prio = (i * 7 + i // 4) % 4
        out.append(bytes(Ether(src="00:00:0a:00:00:01", dst="02:00:00:01:00:01") /
                         IP(src="10.0.0.1", dst="10.0.0.2", tos=prio << 4 << 2) /
                         UDP(sport=1000 + i, dport=2000) / (b"\x00" * (18 + 40 * (i % 3)))))
    return out


def _received(sock: socket.socket) -> list[bytes]:
    out = []
    while True:
        try:
            out.append(sock.recv(65536))
        except BlockingIOError:
            return out


def _close(sw: Switch) -> None:
    for s in [*sw._ports.values(), *sw.peers.values()]:  # type: ignore[attr-defined]
        s.close()


def _run(sw: Switch, clock: list[float], frames: list[bytes], steps: list[float],
         change: Any = None, mixed: bool = False) -> dict[str, Any]:
    """Feed ``frames`` in chunks at T0 (each chunk received as the loop would; ``mixed``:
    every second chunk one frame at a time, ``Switch._receive``, the Python path's), then
    service the switch at each time of ``steps`` (``change(sw)`` before the tenth: a
    configuration written while packets wait); what left port 2 after each."""
    nat = sw.program.native
    clock[0] = T0
    if nat is not None:
        tmglue.set_clock(nat, T0)
    fd1 = sw._ports[1].fileno()
    for k in range(0, len(frames), 8):
        if mixed and k // 8 % 2:
            for f in frames[k:k + 8]:
                sw._receive(1, f)
            continue
        for f in frames[k:k + 8]:
            sw.peers[1].send(f)  # type: ignore[attr-defined]
        sw.on_readable(fd1)
    sw.service()
    out = [_received(sw.peers[2])]  # type: ignore[attr-defined]
    for k, t in enumerate(steps):
        if k == 10 and change is not None:
            change(sw)
        clock[0] = t
        if nat is not None:
            tmglue.set_clock(nat, t)
        sw.service()
        out.append(_received(sw.peers[2]))  # type: ignore[attr-defined]
    q = [(s["priority"], s["enqueued"], s["dropped"], s["occupancy"]) for s in sw.queue_stats(2)]
    st = sw.stats
    return {"out": out, "queues": q, "port2": (st.ports[2].tx, st.ports[2].queue_drops),
            "rx": st.ports[1].rx, "drops": (st.pipeline_drops, st.priority_out_of_range)}


SHAPES = {
    # per-queue rates on two queues (the others drain at once), depth 6
    "queue_rates": lambda sw: (sw.set_queue_rate(100, 2, 3), sw.set_queue_rate(250, 2, 1)),
    # a port rate shared in strict priority
    "port_rate": lambda sw: sw.set_port_rate(900, 2),
    # a byte rate (a frame costs its length) with a queue rate under it
    "byte_rate_and_queue": lambda sw: (sw.set_port_rate(200, 2, frame_bytes=300), sw.set_queue_rate(150, 2, 2)),
    # every queue of every port limited (the port=None settings)
    "all_queues": lambda sw: sw.set_queue_rate(120),
}


@pytest.mark.parametrize("shape", ["port_rate", "queue_rates"])
def test_frames_of_the_python_path_join_the_native_queues(shape: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Frames received one at a time (packet-outs, a trace) take the Python path after
    ingress; to a port shaped in C they join its native queues (one scheduler for the
    port), so the mix leaves as on the Python backend."""
    clock = [T0]
    monkeypatch.setattr(switch_mod, "time", types.SimpleNamespace(monotonic=lambda: clock[0], sleep=time.sleep))
    frames = _frames(40)
    steps = [T0 + 0.001 * k for k in range(1, 90)]
    got = {}
    for backend in ("python", "native"):
        sw = _switch(backend, depth=6)
        SHAPES[shape](sw)
        try:
            got[backend] = _run(sw, clock, frames, steps, mixed=True)
            if backend == "native":
                assert not any(sw._tm[2].queues)  # nothing waited in traffic.py's queues
        finally:
            _close(sw)
    _same(shape, got["python"], got["native"], 40)


CHANGES = {
    # a faster port rate and a lower queue's own rate, written while packets wait
    "port_rate": lambda sw: (sw.set_port_rate(2000, 2), sw.set_queue_rate(400, 2, 3)),
    # deeper queues, then a second burst that fills them
    "queue_rates": lambda sw: sw.set_queue_depth(12, 2),
}


@pytest.mark.parametrize("step", [0.0007, 0.015])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_shaped_port_same_frames_order_and_counters(shape: str, step: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """``step``: drains finer than any rate's gap, or late ones (a loaded CPU: the
    port rate's catch-up credit, several frames a drain)."""
    clock = [T0]
    monkeypatch.setattr(switch_mod, "time", types.SimpleNamespace(monotonic=lambda: clock[0], sleep=time.sleep))
    frames = _frames(40)
    steps = [T0 + step * k for k in range(1, int(0.084 / step))]  # 84 ms of drains
    got = {}
    for backend in ("python", "native"):
        sw = _switch(backend, depth=6)
        SHAPES[shape](sw)
        try:
            got[backend] = _run(sw, clock, frames, steps)
        finally:
            _close(sw)
    _same(shape, got["python"], got["native"], 40)


def _same(what: str, py: dict[str, Any], nat: dict[str, Any], frames: int) -> None:
    assert sum(map(len, py["out"])) > 8 and any(d for _, _, d, _ in py["queues"])  # shaped, and overflowed
    for k, (a, b) in enumerate(zip(py["out"], nat["out"], strict=True)):
        assert a == b, f"{what}: drain {k} differs"
    assert nat["queues"] == py["queues"]
    assert nat["port2"] == py["port2"] and nat["rx"] == py["rx"] == frames and nat["drops"] == py["drops"]


@pytest.mark.parametrize("shape", sorted(CHANGES))
def test_configuration_written_while_packets_wait(shape: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rates and depths written (the runtime CLI's calls) while packets wait in the queues
    reach them on both backends alike: the same frames out after every drain."""
    clock = [T0]
    monkeypatch.setattr(switch_mod, "time", types.SimpleNamespace(monotonic=lambda: clock[0], sleep=time.sleep))
    frames = _frames(40)
    steps = [T0 + 0.002 * k for k in range(1, 40)]
    got = {}
    for backend in ("python", "native"):
        sw = _switch(backend, depth=6)
        SHAPES[shape](sw)

        def change(sw: Switch, shape: str = shape) -> None:
            CHANGES[shape](sw)
            for f in frames[:20]:  # and a second burst under the new configuration
                sw.peers[1].send(f)  # type: ignore[attr-defined]
            sw.on_readable(sw._ports[1].fileno())

        try:
            got[backend] = _run(sw, clock, frames, steps, change)
        finally:
            _close(sw)
    _same(shape, got["python"], got["native"], 60)


def test_depth_and_priority_with_a_real_clock() -> None:
    """Without an injected clock: a burst into a port limited to 1 pkt/s (one token,
    then nothing for a second) -- what is queued, dropped and sent is decided before any
    drain, so both backends count the same."""
    frames = _frames(40)
    got = {}
    for backend in ("python", "native"):
        sw = _switch(backend, depth=3)
        sw.set_port_rate(1, 2)
        try:
            for k in range(0, 40, 8):
                for f in frames[k:k + 8]:
                    sw.peers[1].send(f)  # type: ignore[attr-defined]
                sw.on_readable(sw._ports[1].fileno())
            sw.service()
            got[backend] = (_received(sw.peers[2]), sw.queue_stats(2), sw.stats.ports[2].queue_drops)  # type: ignore[attr-defined]
        finally:
            _close(sw)
    assert got["native"] == got["python"]
    assert len(got["python"][0]) == 1 and got["python"][2] == 40 - 1 - 4 * 3


def test_c_loop_drains_a_shaped_port_on_its_timer() -> None:
    """The C loop (run_switches) serves a native switch with a port rate: a burst of low
    then high priority frames leaves at that rate, highest priority first after the one
    the idle port sent at once, with nothing left queued."""
    from targets.embedded.loop import run_switches

    sw = _switch("native", depth=64)
    sw.set_port_rate(100, 2)  # 10 ms between departures: the burst is in before the second
    frames = _frames(40)
    low = [f for f in frames if f[15] >> 2 == 0][:10]
    high = [f for f in frames if f[15] >> 2 == 3 << 4][:10]
    stop = threading.Event()
    th = threading.Thread(target=run_switches, args=([sw], stop), daemon=True)
    th.start()
    try:
        time.sleep(0.3)  # the C loop takes the ports
        t0 = time.monotonic()
        for f in low + high:
            sw.peers[1].send(f)  # type: ignore[attr-defined]
        got: list[bytes] = []
        while len(got) < 20 and time.monotonic() < t0 + 5:
            time.sleep(0.01)
            got += _received(sw.peers[2])  # type: ignore[attr-defined]
        took = time.monotonic() - t0
    finally:
        stop.set()
        sw.wake()
        th.join(5)
        _close(sw)
    sport = [int.from_bytes(f[34:36], "big") for f in got]
    want = [int.from_bytes(f[34:36], "big") for f in [low[0], *high, *low[1:]]]
    assert sport == want
    assert took >= 19 / 100 * 0.9  # the rate held (19 frames after the first)
    stats = {s["priority"]: s for s in sw.queue_stats(2)}
    assert stats[0]["enqueued"] == stats[3]["enqueued"] == 10 and stats[0]["occupancy"] == 0
    assert sw.stats.ports[2].tx == 20 and sw.heartbeat is not None and sw.heartbeat.error == ""


def _mc_switch(backend: str) -> Switch:
    """mc_egress.p4 (tests/p4): replicas whose egress truncates (rid 1), clones E2E to
    session 9 (rid 2), recirculates (rid 3) or drops (rid 4); ports 1-5 socket pairs."""
    from targets.embedded.state import CloneSession, Replica

    sw = Switch(seed=1, backend=backend, priority_queues=1, queue_depth=8)
    sw.install_program(sw.load_program((ROOT / "tests" / "p4" / "build" / "mc_egress.json").read_bytes()))
    groups = {1: [Replica(1, 0), Replica(2, 1), Replica(3, 0)], 2: [Replica(2, 2), Replica(3, 0)],
              3: [Replica(2, 3), Replica(2, 4), Replica(2, 0)]}
    for g, reps in groups.items():
        sw.pre.set_group(g, reps, create=True)
    sw.pre.set_clone_session(9, CloneSession([Replica(2, 0)]), create=True)
    sw.peers = {}  # type: ignore[attr-defined]
    for port in range(1, 6):
        mine, peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        mine.setblocking(False)
        peer.setblocking(False)
        sw._ports[port], sw._fd_port[mine.fileno()] = mine, port
        sw.peers[port] = peer  # type: ignore[attr-defined]
    return sw


@pytest.mark.skipif(not (ROOT / "tests" / "p4" / "build" / "mc_egress.json").exists(), reason="make p4")
def test_egress_the_python_path_finishes_after_a_native_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    """Replicas to a port shaped in C join its queues (made by the Python path after
    the replication stopped there); at dequeue their egress runs in C, and one that
    truncates, clones E2E (the clone to the same shaped port) or recirculates is handed
    to the Python path, which finishes it: the frames on every port after every drain,
    the queue's counters and the drops as on the Python backend."""
    clock = [T0]
    monkeypatch.setattr(switch_mod, "time", types.SimpleNamespace(monotonic=lambda: clock[0], sleep=time.sleep))
    probe = bytes.fromhex("0002" "0000" "00" "0000" "0000" "00")  # out_port 2, results zero
    frames = [bytes(6) * 2 + b"\x88\xb6" + g.to_bytes(2, "big") + probe[2:] + bytes(range(40))
              for g in (1, 2, 3, 0, 1, 3, 2, 2, 3, 1)]
    from targets.embedded.native import glue

    handed, finish = [0], glue.finish_slow

    def finish_slow(sw: Switch, prog: Any, port: int) -> None:  # counts egresses handed back, then finishes
        nat = prog.native
        handed[0] += bool(nat.slowlen.value) and nat.slowinfo.value & 0xFF == glue.AFTER_EGRESS
        finish(sw, prog, port)

    monkeypatch.setattr(glue, "finish_slow", finish_slow)
    got = {}
    for backend in ("python", "native"):
        sw = _mc_switch(backend)
        sw.set_port_rate(500, 2)
        nat = sw.program.native
        try:
            clock[0] = T0
            if nat is not None:
                tmglue.set_clock(nat, T0)
            for f in frames:
                sw.peers[5].send(f)  # type: ignore[attr-defined]
            sw.on_readable(sw._ports[5].fileno())
            sw.service()
            out = [{p: _received(s) for p, s in sw.peers.items()}]  # type: ignore[attr-defined]
            for k in range(1, 40):
                clock[0] = T0 + 0.001 * k
                if nat is not None:
                    tmglue.set_clock(nat, clock[0])
                sw.service()
                out.append({p: _received(s) for p, s in sw.peers.items()})  # type: ignore[attr-defined]
            got[backend] = (out, sw.queue_stats(2), sw.stats.ports[2].queue_drops, sw.stats.pipeline_drops)
            if nat is not None:
                assert nat.tm_ports == {2}
        finally:
            _close(sw)
    py, na = got["python"], got["native"]
    for k, (a, b) in enumerate(zip(py[0], na[0], strict=True)):
        assert a == b, f"drain {k} differs"
    assert na[1:] == py[1:]
    assert sum(len(v[2]) for v in py[0]) >= 5 and py[2] > 0  # through the shaped port, and overflowed
    assert handed[0] >= 2  # egresses at dequeue (tm.c) that the Python path finished
