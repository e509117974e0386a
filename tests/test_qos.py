"""Run-time queue control: the embedded target's runtime CLI and controller.qos.

Offline: the runtime-CLI commands against a live ``Switch`` object, the Unix-socket
server with :class:`controller.qos.EgressQueues` on top, strict priority under a port
rate with real frames through a compiled program, and BMv2's path (simple_switch_CLI),
which skips when BMv2 is not installed. ``gradctl qos`` on a running network is in
tests/test_differentiated_network.py.
"""

from __future__ import annotations

import json
import shutil
import time
import types
from pathlib import Path

import pytest

from controller.qos import Bmv2Runtime, EgressQueues, QosError, static_partition
from targets.embedded.runtime_cli import RuntimeServer, execute
from targets.embedded.switch import Switch

ROOT = Path(__file__).resolve().parent.parent
ECHO = ROOT / "tests" / "p4" / "build" / "metadata_echo.json"


def test_runtime_commands_like_simple_switch_cli() -> None:
    sw = Switch(priority_queues=4, queue_depth=10)
    assert execute(sw, "set_queue_rate 100 2 0") == "ok"  # queue index 0 = priority 3
    assert execute(sw, "set_queue_depth 5 2") == "ok"
    stats = {q["priority"]: q for q in json.loads(execute(sw, "get_queue_stats 2"))}
    assert stats[3]["rate_pps"] == 100 and stats[3]["queue"] == 0
    assert all(stats[p]["rate_pps"] is None for p in (0, 1, 2))
    assert all(stats[p]["depth"] == 5 for p in range(4))
    # a wider setting replaces narrower ones (the latest call wins, as in BMv2)
    assert execute(sw, "set_queue_rate 0") == "ok"
    assert all(q["rate_pps"] is None for q in json.loads(execute(sw, "get_queue_stats 2")))
    assert execute(sw, "set_port_rate 50 2") == "ok"
    assert {q["port_rate_pps"] for q in json.loads(execute(sw, "get_queue_stats 2"))} == {50.0}
    for bad, why in (("set_queue_rate", "usage"), ("set_queue_rate x", "number"),
                     ("set_queue_rate 1 2 7", "out of range"), ("set_queue_depth 0", "whole number"),
                     ("set_queue_depth 1 a", "integer"), ("frobnicate", "unknown command")):
        assert execute(sw, bad).startswith("error:") and why in execute(sw, bad), bad


def test_egress_queues_over_the_socket(tmp_path: Path) -> None:
    sw = Switch(priority_queues=8)
    server = RuntimeServer(sw, str(tmp_path / "s1.cli"))
    server.start()
    try:
        eq = EgressQueues(tmp_path / "s1.cli", nb_queues=8, name="s1")
        eq.set_rate(200, port=1, priority=7)
        eq.set_depth(16, port=1)
        eq.set_depth(64, port=1, priority=7)
        eq.set_port_rate(300, port=1)
        by = {q.priority: q for q in eq.stats(1)}
        assert by[7].rate_pps == 200 and by[7].depth == 64 and by[0].depth == 16
        assert by[0].rate_pps is None and by[0].port_rate_pps == 300
        assert eq.counters(1)[7] == {"enqueued": 0, "dropped": 0}
        with pytest.raises(QosError, match="out of range"):
            eq.set_rate(1, port=1, priority=8)
        with pytest.raises(QosError, match="needs a port"):
            eq.set_rate(1, priority=1)
        with pytest.raises(QosError, match="depth"):
            eq.set_depth(0, port=1)
    finally:
        server.stop()
    with pytest.raises(QosError, match="runtime CLI"):
        EgressQueues(tmp_path / "s1.cli", 8).stats()


def test_static_partition() -> None:
    """BMv2's stand-in for a shared port rate: whole packets/s per queue, adding up to at
    most the port rate, unused queues 1 pkt/s (0 would mean unlimited)."""
    from experiments.differentiated import partition_weights
    from wire.differentiated import dscp_priority_map

    w = partition_weights(dscp_priority_map(3, 8), top_share=0.5)
    assert w == {7: 0.5, 6: 0.5 * 4 / 7, 3: 0.5 * 2 / 7, 0: 0.5 / 7}
    rates = static_partition(300, w, 8)
    assert list(rates) == [7, 6, 5, 4, 3, 2, 1, 0]
    assert rates == {7: 148, 6: 84, 5: 1, 4: 1, 3: 42, 2: 1, 1: 1, 0: 21}
    assert sum(rates.values()) <= 300
    assert all(isinstance(r, int) for r in rates.values())
    assert partition_weights(dict.fromkeys(dscp_priority_map(3, 8), 0)) == {0: 1.0}
    assert static_partition(1651.4, {0: 1.0}, 8)[0] == 1651 - 7
    for args, why in (((0, {7: 1}, 8), "port rate"), ((100, {}, 8), "at least one"),
                      ((100, {8: 1}, 8), "out of range"), ((100, {7: 0}, 8), "> 0"),
                      ((5, {7: 1}, 8), "cannot leave")):
        with pytest.raises(QosError, match=why):
            static_partition(*args)
    with pytest.raises(ValueError, match="top_share"):
        partition_weights({46: 7}, top_share=1.0)


def test_static_partition_over_the_socket(tmp_path: Path) -> None:
    """EgressQueues.set_static_partition sets every queue of the port (embedded target;
    on BMv2 the same commands go through simple_switch_CLI, tests/test_differentiated_network.py)."""
    sw = Switch(priority_queues=8)
    server = RuntimeServer(sw, str(tmp_path / "s1.cli"))
    server.start()
    try:
        eq = EgressQueues(tmp_path / "s1.cli", nb_queues=8, name="s1")
        assert eq.target == "embedded" and eq.has_counters
        rates = eq.set_static_partition(100, 1, {7: 3, 0: 1})
        assert rates == {7: 70, 6: 1, 5: 1, 4: 1, 3: 1, 2: 1, 1: 1, 0: 23}
        assert {q.priority: q.rate_pps for q in eq.stats(1)} == rates
        assert all(q.rate_pps is None for q in eq.stats(2))  # other ports untouched
    finally:
        server.stop()


def _echo(prio: int, tag: int) -> bytes:
    from scapy.layers.l2 import Ether

    from tests.p4.packets import Echo

    return bytes(Ether(dst="00:00:00:00:00:02", src="00:00:00:00:00:01") / Echo(out_port=2, set_priority=prio,
                                                                                  _pad0=tag))


@pytest.mark.skipif(not ECHO.exists(), reason="tests/p4/build/metadata_echo.json missing (make p4)")
def test_port_rate_serves_strict_priority() -> None:
    """Frames of two priorities queued behind a port rate leave highest priority first,
    and the per-queue counters count what was queued and what was dropped."""
    from tests.p4.packets import Echo

    sw = Switch(priority_queues=4, queue_depth=4)
    sw.install_program(sw.load_program(ECHO.read_bytes()))
    sw.set_port_rate(500, 2)
    frames = [_echo(0, i) for i in range(6)] + [_echo(3, 100 + i) for i in range(6)]
    for f in frames:  # 6 low then 6 high, back to back
        sw._receive(1, f)
    out: list[bytes] = []
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and len(out) < 9:
        sw._drain(time.monotonic())
        out += [f for _, f in sw._txq]
        sw._txq = []
        time.sleep(0.0005)
    c = {q["priority"]: q for q in sw.queue_stats(2)}
    # the first low frame found the port idle and left at once (its token), so 5 of the
    # low ones were queued (4 fit) and 6 of the high ones (4 fit)
    assert (c[0]["enqueued"], c[0]["dropped"], c[3]["enqueued"], c[3]["dropped"]) == (5, 1, 4, 2)
    tags = [Echo(f[14:])._pad0 for f in out]
    assert tags == [0, 100, 101, 102, 103, 1, 2, 3, 4], tags


def test_bmv2_runtime_path() -> None:
    """BMv2's queues are set with simple_switch_CLI over Thrift."""
    eq = EgressQueues(Bmv2Runtime(9090), nb_queues=8, name="s1")
    with pytest.raises(QosError, match="no port rate"):
        eq.set_port_rate(100, 1)
    with pytest.raises(QosError, match="no per-queue counters"):
        eq.stats()
    assert eq.target == "bmv2" and not eq.has_counters
    if shutil.which("simple_switch_CLI") is None:
        with pytest.raises(QosError, match="simple_switch_CLI not found"):
            eq.set_rate(100, 1, 7)
        pytest.skip("BMv2 is not installed (simple_switch_CLI, built with Thrift): setting queue rates "
                    "on BMv2 is not exercised here")


@pytest.mark.net
@pytest.mark.bmv2
@pytest.mark.skipif(not ECHO.exists(), reason="tests/p4/build/metadata_echo.json missing (make p4)")
def test_bmv2_priority_queues_over_thrift() -> None:
    """Real BMv2 1.15 with ``--priority-queues 4``: qid is the priority, and with the
    lowest queue of port 2 limited by ``set_queue_rate`` (simple_switch_CLI over Thrift,
    in the switch's namespace) high-priority frames overtake a low-priority burst; a
    ``set_queue_depth`` of 2 drops what does not fit."""
    import os

    from targets.launch import bmv2_available
    from targets.testbed import Testbed
    from tests.p4.packets import Echo

    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    if not bmv2_available() or shutil.which("simple_switch_CLI") is None:
        pytest.skip("BMv2 (simple_switch_grpc and simple_switch_CLI, built with Thrift) is not installed")
    with Testbed(4, target="bmv2", json_path=str(ECHO), priority_queues=4) as tb:
        assert tb.proc is not None
        eq = EgressQueues(Bmv2Runtime(9090, pid=tb.proc.pid), nb_queues=4, name="bmv2")
        eq.set_rate(10, port=2, priority=0)  # 10 pps: one frame per 100 ms
        tb.drain()
        for f in [_echo(0, i) for i in range(4)] + [_echo(3, 100 + i) for i in range(4)]:
            tb.send(1, f)
        out = [Echo(f[14:]) for f in tb.recv_all(timeout=1.0)[2]]
        tags = [e._pad0 for e in out]
        assert sorted(tags) == [0, 1, 2, 3, 100, 101, 102, 103], tags
        assert all(e.qid == e.priority for e in out), [(e.priority, e.qid) for e in out]
        # every high frame leaves before the third low one (the low queue waits for tokens)
        assert max(tags.index(100 + i) for i in range(4)) < tags.index(2), tags
        eq.set_depth(2, port=2, priority=0)
        for f in [_echo(0, 10 + i) for i in range(8)]:
            tb.send(1, f)
        low = [Echo(f[14:])._pad0 for f in tb.recv_all(timeout=1.5)[2]]
        assert 1 <= len(low) < 8 and low == sorted(low), low
        eq.set_rate(None, port=2)


def test_gradctl_qos_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from controller.cli import main as gradctl

    cases = [
        (["qos", "set", "star:3", "--run-dir", str(tmp_path), "--rate", "5"], "exactly one --switch"),
        (["qos", "set", "star:3", "--run-dir", str(tmp_path), "-s", "s9", "--rate", "5"], "unknown switch"),
        (["qos", "set", "star:3", "--run-dir", str(tmp_path), "-s", "s1"], "nothing to set"),
        (["qos", "set", "star:3", "--run-dir", str(tmp_path), "-s", "s1", "--priority", "3", "--rate", "5"],
         "--priority needs --port"),
        (["qos", "set", "star:3", "--run-dir", str(tmp_path), "-s", "s1", "--rate", "5"], "no runtime CLI for s1"),
        (["qos", "show", "star:3", "--run-dir", str(tmp_path), "--no-dscp"], "no runtime CLI for s1"),
    ]
    for argv, why in cases:
        assert gradctl(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("gradctl: error:") and why in err, (argv, err)


@pytest.mark.skipif(not ECHO.exists(), reason="tests/p4/build/metadata_echo.json missing (make p4)")
def test_port_byte_rate_charges_a_packet_its_length(monkeypatch: pytest.MonkeyPatch) -> None:
    """``set_port_byte_rate``: the port's one-frame burst lets ~1514 / L small frames of
    L bytes through at once, where a packet rate lets one (each costs a whole frame). The
    Python backend (the reference) with its clock stopped: on a busy machine the frames'
    own processing time earned the port more credit."""
    import targets.embedded.switch as switch_mod

    monkeypatch.setattr(switch_mod, "time", types.SimpleNamespace(monotonic=lambda: 1000.0, sleep=time.sleep))
    sent = {}
    for cmd in ("set_port_rate 50 2", f"set_port_byte_rate {50 * 1514} 2"):
        sw = Switch(priority_queues=4, queue_depth=64, backend="python")
        sw.install_program(sw.load_program(ECHO.read_bytes()))
        assert execute(sw, cmd) == "ok"
        frames = [_echo(0, i) for i in range(60)]
        for f in frames:  # back to back: the bucket holds one full frame's worth
            sw._receive(1, f)
        sent[cmd.split()[0]] = len(sw._txq)
        stats = sw.queue_stats(2)[0]
        assert stats["port_rate_pps"] == 50.0
        assert stats["port_frame_bytes"] == (1514 if "byte" in cmd else None)
    per_burst = 1514 // len(frames[0])
    assert sent["set_port_rate"] == 1
    assert per_burst <= sent["set_port_byte_rate"] <= per_burst + 2, (sent, len(frames[0]))
    assert execute(sw, "set_port_byte_rate x").startswith("error:")


@pytest.mark.skipif(not ECHO.exists(), reason="tests/p4/build/metadata_echo.json missing (make p4)")
def test_port_rate_catches_up_after_a_late_drain(monkeypatch: pytest.MonkeyPatch) -> None:
    """A drain that runs late (the switch's loop on a busy CPU) sends what the port's rate
    allowed meanwhile, up to PORT_CATCH_UP_S of it, not one frame; an idle port earns no
    such credit (a burst into an idle port still leaves one frame at once). The Python
    backend (the reference) on a clock the test moves."""
    import targets.embedded.switch as switch_mod
    from targets.embedded.traffic import PORT_CATCH_UP_S

    clock = [1000.0]
    monkeypatch.setattr(switch_mod, "time", types.SimpleNamespace(monotonic=lambda: clock[0], sleep=time.sleep))
    sw = Switch(priority_queues=4, queue_depth=64, backend="python")
    sw.install_program(sw.load_program(ECHO.read_bytes()))
    sw.set_port_rate(1000, 2)
    frames = [_echo(0, i) for i in range(45)]  # built first: scapy is slow
    for f in frames[:40]:
        sw._receive(1, f)
    assert len(sw._txq) == 1  # the idle port's one frame
    sw._txq = []
    clock[0] += 0.008  # the loop wakes 8 ms late: 8 frames' worth at 1000 pkt/s
    sw._drain(clock[0])
    assert len(sw._txq) == 8, len(sw._txq)
    sw._txq = []
    clock[0] += 0.1  # 100 ms late: no more than PORT_CATCH_UP_S of the rate
    sw._drain(clock[0])
    assert len(sw._txq) == round(1000 * PORT_CATCH_UP_S), len(sw._txq)
    for _ in range(40):  # drain the rest
        clock[0] += 0.001
        sw._drain(clock[0])
    assert not any(sw._tm[2].queues)
    sw._txq = []
    clock[0] += 0.03  # idle for 30 ms: no credit
    for f in frames[40:]:
        sw._receive(1, f)
    assert len(sw._txq) == 1
