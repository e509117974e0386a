"""In-memory links between two native switches of one process (native/memlink.c, .py).

The ring alone: the sender's departure clock (rate), delay, queue limit, MTU, loss and
a link marked down, with explicit times. Then two switches served by one data-plane
thread, a host veth on each side and their link in memory: UDP frames with exact
payloads cross it (and not its veth), the per-port and per-ring counters agree, frames
the Python path finishes cross it too, 10 % loss drops about 10 % (counted), a capture
puts the link back on its veth and a stopped peer's rings count what they drop."""

from __future__ import annotations

import ctypes
import os
import select
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from targets.embedded.native.build import compiler
from targets.embedded.state import TableEntry
from targets.embedded.switch import Switch

pytestmark = pytest.mark.skipif(compiler() is None, reason="no C compiler")
ROOT = Path(__file__).resolve().parent.parent
FORWARD = ROOT / "p4src" / "build" / "forward.json"
MS = 1_000_000  # ns


@pytest.fixture(scope="module")
def lib() -> Any:
    from targets.embedded.native import memlink
    from targets.embedded.native.nloop import build_loop

    lib = ctypes.CDLL(str(build_loop()))
    memlink.bind(lib)
    return lib


def _stats(lib: Any, ring: int) -> dict[str, int]:
    from targets.embedded.native.memlink import STATS

    arr = (ctypes.c_uint64 * len(STATS))()
    lib.ml_stats(ring, arr)
    return dict(zip(STATS, arr, strict=True))


def _due(lib: Any, ring: int, now: int) -> int | None:
    buf = ctypes.create_string_buffer(70000)
    n = lib.ml_pop(ring, now, buf, len(buf))
    return n or None


def test_ring_rate_delay_queue_and_length(lib: Any) -> None:
    from targets.embedded.native import memlink as ml

    # 8 Mbit/s: a 1,000-byte frame takes 1 ms on the wire; 0.5 ms delay; 3 frames of queue
    ring = lib.ml_new(1 << 16, 8_000_000, 500_000, 3, 1518, 0, 1)
    try:
        t0 = 10**12
        assert [lib.ml_push(ring, bytes([i]) * 1000, 1000, t0) for i in range(4)] == [ml.SENT] * 3 + [ml.QUEUE_FULL]
        assert lib.ml_push(ring, b"x" * 1519, 1519, t0) == ml.BAD_LENGTH
        assert lib.ml_push(ring, b"x" * 13, 13, t0) == ml.BAD_LENGTH  # shorter than an Ethernet header
        # frame k leaves at t0 + (k + 1) ms and is due 0.5 ms later
        assert _due(lib, ring, t0 + 1 * MS + MS // 2 - 1) is None
        assert _due(lib, ring, t0 + 1 * MS + MS // 2) == 1000
        assert _due(lib, ring, t0 + 2 * MS) is None
        # one frame has left the queue by t0 + 1 ms: room for one more, which queues behind
        assert lib.ml_push(ring, b"y" * 1000, 1000, t0 + 1 * MS) == ml.SENT
        assert lib.ml_push(ring, b"z" * 1000, 1000, t0 + 1 * MS) == ml.QUEUE_FULL
        got = [_due(lib, ring, t0 + k * MS + MS // 2) for k in (2, 3, 4)]
        assert got == [1000, 1000, 1000]
        st = _stats(lib, ring)
        assert (st["tx_packets"], st["rx_packets"], st["queue_drops"], st["bad_length"]) == (4, 4, 2, 2)
        assert st["in_flight"] == 0 and st["tx_bytes"] == st["rx_bytes"] == 4000
        lib.ml_set_up(ring, 0)
        assert lib.ml_push(ring, b"a" * 60, 60, t0 + 10 * MS) == ml.DOWN
        assert _stats(lib, ring)["down_drops"] == 1
    finally:
        lib.ml_free(ring)


def test_ring_wraps_fills_and_loses_a_share(lib: Any) -> None:
    from targets.embedded.native import memlink as ml

    ring = lib.ml_new(8192, 0, 0, 4096, 0, 0, 1)  # no rate: due at once; a small ring
    try:
        for i in range(2000):  # records of various lengths, wrapping many times
            f = bytes([i & 0xFF]) * (60 + i % 700)
            assert lib.ml_push(ring, f, len(f), i) == ml.SENT
            buf = ctypes.create_string_buffer(2048)
            n = lib.ml_pop(ring, i, buf, len(buf))
            assert buf.raw[:n] == f
        rc = [lib.ml_push(ring, b"q" * 1000, 1000, 5000) for _ in range(10)]
        assert rc[:7] == [ml.SENT] * 7 and ml.RING_FULL in rc  # 8 KiB holds 7 such records
    finally:
        lib.ml_free(ring)
    loss = lib.ml_new(1 << 20, 0, 0, 4096, 0, int(0.1 * 2**32), 7)
    try:
        rcs = [lib.ml_push(loss, b"l" * 64, 64, 0) for _ in range(4000)]
        lost = rcs.count(ml.LOST)
        assert 280 <= lost <= 520  # 10 % of 4,000, more than 5 sigma either side
        st = _stats(lib, loss)
        assert st["loss_drops"] == lost and st["tx_packets"] == st["in_flight"] == 4000 - lost
    finally:
        lib.ml_free(loss)


# -- two switches in one data-plane thread ---------------------------------------------------
def _sh(cmd: str) -> None:
    assert os.system(cmd) == 0, cmd


def _packet_socket(iface: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.setsockopt(263, 23, 1)  # PACKET_IGNORE_OUTGOING
    s.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)  # SO_RCVBUFFORCE: a burst must not overflow it
    s.bind((iface, 3))
    return s


def _forward_switch(device_id: int) -> Switch:
    sw = Switch(device_id=device_id, seed=device_id, backend="native")
    prog = sw.load_program(FORWARD.read_bytes())
    sw.install_program(prog)
    routes, macs = "MyIngress.forwarding.ipv4_routes", "MyEgress.mac_rewrite.port_macs"
    for dst, port in ((0x0A000002, 2), (0x0A000001, 1)):
        prog.tables[routes].insert(TableEntry(((dst, 32),), prog.action_call(
            routes, "MyIngress.forwarding.set_next_hop", (0x000000000100 + port, port))))
    for port in (1, 2):
        prog.tables[macs].insert(TableEntry((port,), prog.action_call(
            macs, "MyEgress.mac_rewrite.set_source_mac", (0x020000000000 + device_id * 256 + port,))))
    return sw


class Pair:
    """h1 - s1 = s2 - h2 in namespace ``ns``: s1:2 and s2:1 joined by a veth and in memory."""

    def __init__(self, ns: str, tag: str, params: Any) -> None:
        from targets.embedded.loop import run_switches
        from targets.embedded.native import memlink
        from targets.netns import in_netns

        self.ns = ns
        self.ifs = {k: f"gm{k}{tag}" for k in ("h1", "a1", "a2", "b1", "b2", "h2")}
        i = self.ifs
        for a, b in ((i["h1"], i["a1"]), (i["a2"], i["b1"]), (i["b2"], i["h2"])):
            _sh(f"ip link add {a} type veth peer name {b} && ip link set {a} netns {ns} && ip link set {b} netns {ns}")
            _sh(f"ip netns exec {ns} sh -c 'ip link set {a} up && ip link set {b} up'")
        self.s1, self.s2 = _forward_switch(1), _forward_switch(2)
        in_netns(ns, lambda: (self.s1.add_port(1, i["a1"]), self.s1.add_port(2, i["a2"]),
                              self.s2.add_port(1, i["b1"]), self.s2.add_port(2, i["b2"])))
        memlink.connect(self.s1, 2, self.s2, 1, params, memlink.LinkParams())
        self.h1 = in_netns(ns, _packet_socket, i["h1"])
        self.h2 = in_netns(ns, _packet_socket, i["h2"])
        self.stop = threading.Event()
        self.thread = threading.Thread(target=run_switches, args=([self.s1, self.s2], self.stop), daemon=True)
        self.thread.start()

    def veth_tx(self) -> int:
        """Frames the kernel carried over the s1-s2 veth (from s1's end)."""
        out = os.popen(f"ip netns exec {self.ns} cat /sys/class/net/{self.ifs['a2']}/statistics/tx_packets").read()
        return int(out)

    def links(self) -> list[dict[str, Any]]:
        from targets.embedded.native import memlink

        return memlink.stats(self.s1)

    def wait_state(self, in_memory: bool) -> None:
        end = time.monotonic() + 10
        while time.monotonic() < end and self.links()[0]["in_memory"] != in_memory:
            time.sleep(0.02)
        assert self.links()[0]["in_memory"] == in_memory

    def close(self) -> None:
        self.stop.set()
        self.s1.wake()
        self.thread.join(5)
        for s in (self.h1, self.h2):
            s.close()
        self.s1.stop()
        self.s2.stop()


def _frames(n: int, tag: int) -> list[bytes]:
    from scapy.all import IP, UDP, Ether

    return [bytes(Ether(src="00:00:0a:00:00:01", dst="02:00:00:00:01:01") / IP(src="10.0.0.1", dst="10.0.0.2")
                  / UDP(sport=1000 + i % 50, dport=2000) / (tag.to_bytes(2, "big") + i.to_bytes(4, "big")
                                                             + bytes([i & 0xFF]) * (20 + i % 200)))
            for i in range(n)]


def _exchange(p: Pair, frames: list[bytes], expect: int, wait_s: float = 10) -> list[bytes]:
    """Send ``frames`` from h1 (paced a little: the host's veth queue is the kernel's) and
    collect the UDP payloads that reach h2 until ``expect`` came or the time passed."""
    got: list[bytes] = []

    def recv(t: float) -> None:
        while select.select([p.h2], [], [], t)[0]:
            f = p.h2.recv(65536)
            if f[12:14] == b"\x08\x00" and f[23] == 17:
                got.append(f[42:])
            t = 0

    for k, f in enumerate(frames):
        p.h1.send(f)
        if k % 50 == 49:
            recv(0.001)
    end = time.monotonic() + wait_s
    while len(got) < expect and time.monotonic() < end:
        recv(0.1)
    recv(0.2)  # nothing more than expected
    return got


@pytest.fixture
def pair() -> Iterator[Any]:
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces, veth pairs)")
    from targets.embedded.native import memlink

    tag = f"{os.getpid() % 100000}"
    ns = f"gml{tag}"
    _sh(f"ip netns add {ns}")
    _sh(f"ip netns exec {ns} sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1")
    made: list[Pair] = []
    try:
        yield lambda params=None: made.append(Pair(ns, tag, params or memlink.LinkParams())) or made[-1]
    finally:
        for p in made:
            p.close()
        os.system(f"ip netns del {ns} 2>/dev/null")


@pytest.mark.net
def test_frames_cross_in_memory_with_exact_payloads_and_counters(pair: Any) -> None:
    p = pair()
    p.wait_state(True)
    frames = _frames(600, 1)
    veth0 = p.veth_tx()
    got = _exchange(p, frames, 600)
    assert got == [f[42:] for f in frames]  # every payload, in order
    assert p.veth_tx() == veth0  # nothing crossed the kernel between the switches
    (ln,) = p.links()
    assert ln["tx"]["tx_packets"] == ln["tx"]["rx_packets"] == 600
    assert ln["tx"]["tx_bytes"] == sum(len(f) for f in frames)
    s1, s2 = p.s1.stats.ports, p.s2.stats.ports
    assert (s1[1].rx, s1[2].tx, s2[1].rx, s2[2].tx) == (600, 600, 600, 600)
    # a shaped port sends through the Python path's queues: its frames cross the ring too
    p.s1.set_port_rate(1e6, 2)
    got = _exchange(p, _frames(100, 2), 100)
    assert got == [f[42:] for f in _frames(100, 2)]
    assert p.links()[0]["tx"]["rx_packets"] == 700 and p.veth_tx() == veth0


@pytest.mark.net
def test_ten_percent_loss_is_dropped_and_counted(pair: Any) -> None:
    from targets.embedded.native import memlink

    p = pair(memlink.LinkParams(loss=0.1))
    p.wait_state(True)
    n = 2000
    frames = _frames(n, 3)
    got = _exchange(p, frames, n, wait_s=3)
    (ln,) = p.links()
    lost = ln["tx"]["loss_drops"]
    assert 120 <= lost <= 290  # 10 % of 2,000 (sigma 13.4), more than 5 sigma either side
    assert len(got) == n - lost == ln["tx"]["rx_packets"]
    sent = {f[42:] for f in frames}
    assert all(g in sent for g in got) and got == sorted(got, key=lambda g: int.from_bytes(g[2:6], "big"))
    assert p.s1.stats.ports[2].tx == n  # a lost frame was sent, as netem's loss


@pytest.mark.net
def test_capture_moves_the_link_to_its_veth_and_back(pair: Any) -> None:
    from targets.embedded.native import memlink

    p = pair()
    p.wait_state(True)
    assert memlink.command(p.s1, "link_capture", ["2", "on"]) == "ok"
    p.wait_state(False)
    veth0 = p.veth_tx()
    frames = _frames(200, 4)
    assert _exchange(p, frames, 200) == [f[42:] for f in frames]
    assert p.veth_tx() - veth0 >= 200  # on the veth, where a capture sees them
    memlink.command(p.s1, "link_capture", ["2", "off"])
    p.wait_state(True)
    veth1 = p.veth_tx()
    assert _exchange(p, frames, 200) == [f[42:] for f in frames]
    assert p.veth_tx() == veth1
    with pytest.raises(ValueError):
        memlink.command(p.s1, "link_capture", ["x", "on"])


@pytest.mark.net
def test_a_stopped_peer_drops_and_counts(pair: Any) -> None:
    from targets.embedded.native import memlink

    p = pair()
    p.wait_state(True)
    memlink.mark_down(p.s2)  # as group.py does when it stops s2
    frames = _frames(50, 5)
    assert _exchange(p, frames, 1, wait_s=1) == []
    ln = p.links()[0]
    assert ln["tx"]["down_drops"] == 50 and p.s1.stats.ports[2].queue_drops == 50


# -- in an emulated network ------------------------------------------------------------------
@pytest.mark.net
def test_network_group_carries_its_fabric_link_in_memory_and_accounts_it(tmp_path: Path) -> None:
    """linear:2 with both switches in one group process: h1's echo requests and h2's
    replies cross s1-s2 in memory (its veth's kernel counters stay still), and the link
    accounting (experiments/accounting.py) gives the fabric link exactly the bytes of the
    host links on either side."""
    import json

    from controller.deploy import deploy
    from experiments.accounting import Snapshot, memlink_bytes, time_split
    from tests.netenv import TARGET, net_skip_reason
    from topologies import linear
    from topologies.network import Network

    reason = net_skip_reason("forward")
    if reason is not None or TARGET == "bmv2":
        pytest.skip(reason or "BMv2 runs one process per switch")
    topo = linear(2, bw=20)
    with Network(topo, target="embedded", run_dir=str(tmp_path), switch_processes=1) as net:
        deploy(topo, net.grpc_addresses())
        s1 = net.switch("s1")
        port = next(ln.port_a if ln.a == "s1" else ln.port_b for ln in topo.links() if {ln.a, ln.b} == {"s1", "s2"})
        end = time.monotonic() + 60  # the switches compile and swap in their native programs
        while time.monotonic() < end and not any(r["in_memory"] for r in _memlinks(s1)):
            time.sleep(0.2)
        assert [r["in_memory"] for r in _memlinks(s1)] == [True]
        veth = f"s1-eth{port}"

        def kernel() -> int:
            return int(s1.cmd(f"cat /sys/class/net/{veth}/statistics/tx_bytes"))

        kernel0, ring0, before = kernel(), memlink_bytes(s1)[veth], Snapshot.take(net)
        out = net.host("h1").cmd(f"{sys.executable} -m hosts.reach --targets 10.0.0.2 --count 200 --timeout 10")
        assert json.loads(out.strip().splitlines()[-1])["received"]["10.0.0.2"] == 200
        lb = time_split(topo, before, Snapshot.take(net)).link_bytes
        ring = [a - b for a, b in zip(memlink_bytes(s1)[veth], ring0, strict=True)]
        # every request crossed in memory, every reply too; the veth carried at most the
        # kernel's own frames of s1's namespace (an IPv6 MLD report), which the
        # accounting adds as it adds the ring's bytes
        assert ring == [lb["h1->s1"], lb["h2->s2"]] and ring[0] >= 200 * 42
        assert kernel() - kernel0 < 1000 and lb["s1->s2"] == ring[0] + kernel() - kernel0


def _memlinks(node: Any) -> list[dict[str, Any]]:
    import json

    from controller.qos.deployment import EmbeddedRuntime

    return json.loads(EmbeddedRuntime(node.runtime_socket).run(["memlinks"])[0])
