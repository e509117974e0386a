"""The native backend's switch-level behaviour: a program whose C is not cached yet runs
on the Python backend while it compiles in the background, then the data plane swaps it
in with its state (registers, counters, tables) carried over; the data-plane loop in C
over real veths forwards what the Python backend would, byte for byte, and counts it."""

from __future__ import annotations

import os
import select
import socket
import time
from pathlib import Path

import pytest

from targets.embedded.native.build import compiler
from targets.embedded.state import TableEntry
from targets.embedded.switch import Switch
from tests.native_pair import ROOT

pytestmark = pytest.mark.skipif(compiler() is None, reason="no C compiler")
REGISTERS = ROOT / "tests" / "p4" / "build" / "registers.json"
FORWARD = ROOT / "p4src" / "build" / "forward.json"


def _registers_switch(backend: str) -> Switch:
    sw = Switch(seed=1, backend=backend)
    prog = sw.load_program(REGISTERS.read_bytes())
    sw.install_program(prog)
    t = "GIngress.port_forward"
    prog.tables[t].insert(TableEntry((1,), prog.action_call(t, "GIngress.set_egress_port", (2,))))
    return sw


def _register_frames(n: int) -> list[bytes]:
    from scapy.all import IP, UDP, Ether

    from tests.p4.packets import RegisterHeavy

    return [bytes(Ether(dst="00:00:00:00:00:02", src="00:00:00:00:00:01") / IP(src="10.0.0.1", dst="10.0.0.2")
                  / UDP(sport=5000) / RegisterHeavy(index=i % 5, values=[(i * 7 + k) % 1000 for k in range(32)]))
            for i in range(n)]


def _state(sw: Switch) -> dict[str, list[int]]:
    prog = sw.program
    assert prog is not None
    return {name: list(reg.cells) for name, reg in prog.registers.items()}


def test_background_compile_swaps_in_with_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRADNET_NATIVE_CACHE", str(tmp_path))  # nothing cached: auto must not wait for cc
    sw, ref = _registers_switch("auto"), _registers_switch("python")
    prog = sw.program
    assert prog is not None and prog.native is None  # the Python backend serves while cc runs
    frames = _register_frames(60)
    outs, ref_outs = [], []
    for f in frames[:30]:
        outs += sw.process(1, f)
        ref_outs += ref.process(1, f)
    deadline = time.monotonic() + 120
    while prog.native_built is None and prog.native is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert prog.native_built is not None or prog.native is not None, "the background compile did not finish"
    for f in frames[30:]:
        outs += sw.process(1, f)  # the first call swaps the native backend in, between packets
        ref_outs += ref.process(1, f)
    assert prog.native is not None
    assert outs == ref_outs
    assert _state(sw) == _state(ref)  # what the Python backend accumulated moved into native memory
    assert list(tmp_path.glob("p4_*.so"))


def test_no_compiler_falls_back_with_one_reason(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.delenv("GRADNET_BACKEND", raising=False)
    caplog.set_level("INFO", logger="gradnet.switch")
    sw = _registers_switch("auto")
    assert sw.backend == "auto" and sw.program is not None and sw.program.native is None
    assert any("no C compiler" in r.getMessage() for r in caplog.records)


# -- the loop in C over veths ---------------------------------------------------------------
def _sh(cmd: str) -> None:
    assert os.system(cmd) == 0, cmd


@pytest.mark.net
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, veth pairs)")
def test_c_loop_forwards_and_counts_like_python() -> None:
    """forward.p4 natively, served by the loop in C in a switch of this process inside a
    namespace: routed, unrouted and TTL-expired frames in one burst; what leaves port 2
    is what the Python backend makes of the same frames, in order, and the switch's
    counters (folded from native memory) say what happened to each."""
    import threading

    from scapy.all import IP, UDP, Ether

    from targets.netns import in_netns

    ns, tag = f"gnl{os.getpid() % 100000}", f"{os.getpid() % 100000}"
    a1, b1, a2, b2 = f"gla{tag}", f"glb{tag}", f"glc{tag}", f"gld{tag}"
    _sh(f"ip netns add {ns}")
    try:
        _sh(f"ip netns exec {ns} sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1")
        for a, b in ((a1, b1), (a2, b2)):
            _sh(f"ip link add {a} type veth peer name {b} && ip link set {a} netns {ns} && ip link set {b} netns {ns}")
            _sh(f"ip netns exec {ns} sh -c 'ip link set {a} up && ip link set {b} up'")
        sws = {}
        for backend in ("native", "python"):
            sw = Switch(seed=1, backend=backend)
            prog = sw.load_program(FORWARD.read_bytes())
            sw.install_program(prog)
            routes, macs = "MyIngress.forwarding.ipv4_routes", "MyEgress.mac_rewrite.port_macs"
            prog.tables[routes].insert(TableEntry(((0x0A000002, 32),), prog.action_call(
                routes, "MyIngress.forwarding.set_next_hop", (0x000000000002, 2))))
            prog.tables[macs].insert(TableEntry((2,), prog.action_call(
                macs, "MyEgress.mac_rewrite.set_source_mac", (0x020000000102,))))
            sws[backend] = sw
        sw = sws["native"]
        in_netns(ns, lambda: (sw.add_port(1, a1), sw.add_port(2, a2)))
        tx = in_netns(ns, _packet_socket, b1)
        rx = in_netns(ns, _packet_socket, b2)
        stop = threading.Event()
        from targets.embedded.loop import run_switches

        th = threading.Thread(target=run_switches, args=([sw], stop), daemon=True)
        th.start()
        frames = []
        for i in range(300):
            dst, ttl = ("10.0.0.2", 64) if i % 3 else (("10.0.0.9", 64) if i % 2 else ("10.0.0.2", 1))
            frames.append(bytes(Ether(src="00:00:0a:00:00:01", dst="02:00:00:01:00:01") / IP(src="10.0.0.1", dst=dst,
                                ttl=ttl) / UDP(sport=1000 + i, dport=2000) / (b"\x00" * 18)))
        expect = [f for fr in frames for _, f in sws["python"].process(1, fr)]
        for f in frames:
            tx.send(f)
        got = []
        end = time.monotonic() + 10
        while len(got) < len(expect) and time.monotonic() < end:
            if select.select([rx], [], [], 0.2)[0]:
                f = rx.recv(65536)
                if f[12:14] == b"\x08\x00":  # not what the kernel itself may send
                    got.append(f)
        time.sleep(0.2)
        stop.set()
        sw.wake()
        th.join(5)
        assert got == expect
        st, ref = sw.stats, sws["python"].stats
        assert st.ports[1].rx == 300 and st.ports[2].tx == len(expect)
        assert st.pipeline_drops == ref.pipeline_drops == 300 - len(expect)
        assert sw.heartbeat is not None and sw.heartbeat.error == ""
        tx.close()
        rx.close()
        sw.stop()
    finally:
        os.system(f"ip netns del {ns} 2>/dev/null")


def _packet_socket(iface: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.setsockopt(263, 23, 1)  # PACKET_IGNORE_OUTGOING: not what we send ourselves
    s.bind((iface, 3))
    return s


def test_a_write_of_many_updates_reaches_packets_once_at_its_end() -> None:
    """Inside ``deferred_sync`` (a P4Runtime Write) table changes are copied into native
    memory once, when it ends: packets see the table before or after, whole."""
    from scapy.all import IP, UDP, Ether

    sw = Switch(seed=1, backend="native")
    prog = sw.load_program(FORWARD.read_bytes())
    sw.install_program(prog)
    routes = "MyIngress.forwarding.ipv4_routes"
    frame = bytes(Ether(src="00:00:0a:00:00:01", dst="02:00:00:01:00:01") / IP(src="10.0.0.1", dst="10.0.0.2")
                  / UDP(sport=1000, dport=2000) / (b"\x00" * 18))
    with prog.native.deferred_sync():
        for i in range(200):  # the last one routes the frame
            prog.tables[routes].insert(TableEntry(((0x0B000000 + i if i < 199 else 0x0A000002, 32),), prog.action_call(
                routes, "MyIngress.forwarding.set_next_hop", (0x000000000002, 2))))
        assert sw.process(1, frame) == []  # not yet in native memory
    assert [p for p, _ in sw.process(1, frame)] == [2]
