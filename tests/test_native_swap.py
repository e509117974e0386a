"""A program swap loses no frame: the frames that the native code has received but not yet
run (the rest of a receive batch, after a packet it handed to the Python path) go to the
program that follows, before anything newer, when the loop in C stops serving the old
instance; and a numbered stream sent through a switch while its programs change (a cold
native cache: each new program runs on the Python backend while it compiles, then is
swapped in) comes out whole and in order. Real veths in a namespace."""

from __future__ import annotations

import os
import select
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from targets.embedded.native.build import compiler
from targets.embedded.state import TableEntry
from targets.embedded.switch import Switch
from tests.native_pair import ROOT

pytestmark = [pytest.mark.net, pytest.mark.skipif(compiler() is None, reason="no C compiler"),
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, veth pairs)")]
FORWARD = ROOT / "p4src" / "build" / "forward.json"
REGISTERS = ROOT / "tests" / "p4" / "build" / "registers.json"
SEQ = 42  # the frame's number: the first UDP payload bytes


def _sh(cmd: str) -> None:
    assert os.system(cmd) == 0, cmd


@pytest.fixture
def veths() -> Iterator[tuple[str, list[str]]]:
    """A namespace with three veth pairs: switch side gsa<tag><i>, host side gsb<tag><i>."""
    tag = f"{os.getpid() % 100000}"
    ns = f"gsw{tag}"
    names = [(f"gsa{tag}{i}", f"gsb{tag}{i}") for i in range(3)]
    _sh(f"ip netns add {ns}")
    try:
        _sh(f"ip netns exec {ns} sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1")
        for a, b in names:
            _sh(f"ip link add {a} type veth peer name {b} && ip link set {a} netns {ns} && ip link set {b} netns {ns}")
            _sh(f"ip netns exec {ns} sh -c 'ip link set {a} up && ip link set {b} up'")
        yield ns, [n for pair in names for n in pair]
    finally:
        os.system(f"ip netns del {ns} 2>/dev/null")


def _install(sw: Switch, path: Path) -> None:
    """Load ``path``, give it its entries (port 1's traffic to 10.0.0.2 to port 2; to
    10.0.0.3, forward.p4 only, to port 3), then install it: no frame meets it empty."""
    prog = sw.load_program(path.read_bytes())
    if path == REGISTERS:
        t = "GIngress.port_forward"
        prog.tables[t].insert(TableEntry((1,), prog.action_call(t, "GIngress.set_egress_port", (2,))))
    else:
        routes, macs = "MyIngress.forwarding.ipv4_routes", "MyEgress.mac_rewrite.port_macs"
        for port in (2, 3):
            prog.tables[routes].insert(TableEntry(((0x0A000000 + port, 32),), prog.action_call(
                routes, "MyIngress.forwarding.set_next_hop", (port, port))))
            prog.tables[macs].insert(TableEntry((port,), prog.action_call(
                macs, "MyEgress.mac_rewrite.set_source_mac", (0x020000000100 + port,))))
    sw.install_program(prog)


def _frames(n: int, first: int = 0, host: int = 2) -> list[bytes]:
    from scapy.all import IP, UDP, Ether

    base = bytes(Ether(src="00:00:0a:00:00:01", dst="02:00:00:01:00:01") / IP(src="10.0.0.1", dst=f"10.0.0.{host}")
                 / UDP(sport=1000, dport=2000) / (b"\x00" * 18))
    return [base[:SEQ] + i.to_bytes(4, "big") + base[SEQ + 4:] for i in range(first, first + n)]


def _socket(iface: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.setsockopt(263, 23, 1)  # PACKET_IGNORE_OUTGOING: not what we send ourselves
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind((iface, 3))
    return s


def _numbers(s: socket.socket, want: int, wait_s: float) -> list[int]:
    got: list[int] = []
    end = time.monotonic() + wait_s
    while len(got) < want and time.monotonic() < end:
        if select.select([s], [], [], 0.1)[0]:
            f = s.recv(65536)
            if f[12:14] == b"\x08\x00":  # not what the kernel itself may send
                got.append(int.from_bytes(f[SEQ:SEQ + 4], "big"))
    return got


def test_a_swap_runs_the_rest_of_a_receive_batch_on_the_new_program(veths: tuple[str, list[str]]) -> None:
    """The loop in C stops at a packet for the Python path (a packet-in to a CPU port
    with a rate: its queue is traffic.py's) with 31 frames of its batch still to run;
    the program changes right then: those 31 leave through the new program, before what
    came after them."""
    from targets.embedded.native import nloop
    from targets.netns import in_netns

    ns, (a1, b1, a2, b2, a3, _) = veths
    sw = Switch(seed=1, backend="native", cpu_port=3)
    sw.set_port_rate(100000, 3)  # the CPU port shaped: its packet-ins take the Python path
    packet_ins: list[bytes] = []
    sw.packet_in_handlers.append(packet_ins.append)
    _install(sw, FORWARD)
    in_netns(ns, lambda: [sw.add_port(p, a) for p, a in ((1, a1), (2, a2), (3, a3))])
    tx, rx = in_netns(ns, _socket, b1), in_netns(ns, _socket, b2)
    ep = select.epoll()
    for fd in sw.event_fds():
        ep.register(fd, select.EPOLLIN)
    loop = nloop.NativeLoop(ep)
    try:
        assert loop.refresh([sw])
        for f in _frames(1, host=3) + _frames(39, first=1):
            tx.send(f)
        time.sleep(0.3)
        why, slow = loop.run(0.5)
        old = sw.program
        assert why == nloop.SLOW and slow is sw and old is not None and old.native is not None
        assert old.native.lib.np_rx_pending(old.native.ctx) == 31
        _install(sw, FORWARD)  # a new instance (cached: native at once)
        for f in _frames(10, first=40):
            tx.send(f)
        for _ in range(20):
            loop.refresh([sw])
            why, _ = loop.run(0.05)
            for fd, _ in ep.poll(0):
                sw.on_readable(fd)
            sw.service()
        assert _numbers(rx, 49, 3.0) == list(range(1, 50))
        assert sw.stats.ports[1].rx == 50
        assert [int.from_bytes(f[SEQ:SEQ + 4], "big") for f in packet_ins] == [0]
    finally:
        loop.close()
        ep.close()
        tx.close()
        rx.close()
        sw.stop()


def _mixed(n: int, first: int) -> list[bytes]:
    """Frames first..first+n-1, every 7th to 10.0.0.3 (forward.p4: port 3, the CPU port, a
    packet for the Python path, which leaves the rest of its batch waiting in C)."""
    return [_frames(1, i, host=3 if i % 7 == 3 else 2)[0] for i in range(first, first + n)]


def test_a_stream_crosses_background_swaps_whole_and_in_order(veths: tuple[str, list[str]], tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Numbered bursts through a switch whose data plane runs in its own thread, while
    its program changes eight times: forward.p4 with a cold cache (Python, then native
    when compiled), registers.p4 (cold again), then each of them again and again
    (cached: native at once). Every frame leaves, port 2 or the CPU port 3 (which
    program took it decides), each port's in order."""
    from targets.embedded.loop import run_switches
    from targets.netns import in_netns

    monkeypatch.setenv("GRADNET_NATIVE_CACHE", str(tmp_path))  # nothing cached
    ns, (a1, b1, a2, b2, a3, b3) = veths
    sw = Switch(seed=1, backend="auto", cpu_port=3)
    got: dict[int, list[int]] = {2: [], 3: []}
    sw.packet_in_handlers.append(lambda f: got[3].append(int.from_bytes(f[SEQ:SEQ + 4], "big")))
    _install(sw, FORWARD)
    in_netns(ns, lambda: [sw.add_port(p, a) for p, a in ((1, a1), (2, a2), (3, a3))])
    tx, rx = in_netns(ns, _socket, b1), {2: in_netns(ns, _socket, b2)}
    stop = threading.Event()
    th = threading.Thread(target=run_switches, args=([sw], stop), daemon=True)
    th.start()
    done = threading.Event()

    def read(port: int) -> None:
        while not done.is_set():
            got[port].extend(_numbers(rx[port], 1 << 30, 0.2))

    readers = [threading.Thread(target=read, args=(p,), daemon=True) for p in rx]
    for r in readers:
        r.start()
    sent, native = 0, 0
    try:
        for step in (REGISTERS, FORWARD) * 4 + (None,):
            end = time.monotonic() + 60
            while time.monotonic() < end:  # bursts until this program runs natively, then 500 more
                for f in _mixed(100, sent):
                    tx.send(f)
                sent += 100
                time.sleep(0.01)
                prog = sw.program
                if prog is not None and prog.native is not None:
                    native += 1
                    break
            for f in _mixed(500, sent):
                tx.send(f)
            sent += 500
            if step is not None:
                _install(sw, step)
        end = time.monotonic() + 10
        while len(got[2]) + len(got[3]) < sent and time.monotonic() < end:
            time.sleep(0.1)
        assert native == 9, "a program never ran natively"
        assert sorted(got[2] + got[3]) == list(range(sent))
        assert got[2] == sorted(got[2]) and got[3] == sorted(got[3])
    finally:
        done.set()
        for r in readers:
            r.join(2)
        stop.set()
        sw.wake()
        th.join(5)
        tx.close()
        for s in rx.values():
            s.close()
        sw.stop()
