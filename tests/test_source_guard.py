"""Source addresses bound to host ports (docs/trust.md, "IP: source addresses bound to
ports"), in process on the embedded target: ``source_guard.p4`` in ``forward.p4`` and
``ina.p4``, with the entries the controller twin (``controller/forward/source_guard.py``)
plans for a real topology."""

from __future__ import annotations

from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from controller.forward import DROP_REASONS, SourceGuard
from controller.p4runtime import Program
from targets.embedded.state import TableEntry
from targets.embedded.switch import Switch
from topologies import leaf_spine, star
from wire.differentiated import DIFF_UDP_PORT

BUILD = Path(__file__).resolve().parent.parent / "p4src" / "build"
ROUTES = "MyIngress.forwarding.ipv4_routes"
DROPS = "MyIngress.forwarding.ingress_drops"
BINDINGS = "MyIngress.source_guard.source_bindings"
SPOOF = {name: i for i, name in DROP_REASONS.items()}["src_spoof"]
TOPO = star(4)
PS, MEMBER, OTHER = "h1", "h2", "h4"


def _mac(s: str) -> int:
    return int(s.replace(":", ""), 16)


def _ip(s: str) -> int:
    a, b, c, d = (int(x) for x in s.split("."))
    return (a << 24) | (b << 16) | (c << 8) | d


def _switch(program: str, guarded: bool) -> Switch:
    """``s1`` of a star, a route to the PS; with ``guarded`` the source bindings of the
    controller's plan (host ports bound, the default refusing)."""
    sw = Switch(seed=1)
    sw.install_program(sw.load_program((BUILD / f"{program}.json").read_bytes()))
    p = sw.program
    out = TOPO.port("s1", PS)
    p.tables[ROUTES].insert(TableEntry(((_ip(TOPO.host_ip(PS)), 32),), p.action_call(
        ROUTES, "MyIngress.forwarding.set_next_hop", (_mac(TOPO.host_mac(PS)), out))))
    if guarded:
        guard = Program.load(BUILD / f"{program}.json").block(SourceGuard)
        for port, b in guard.bindings(TOPO, "s1").items():
            act = ("fabric_port", ()) if b is None else ("host_port", (_mac(b[0]), _ip(b[1])))
            p.tables[BINDINGS].insert(TableEntry((port,), p.action_call(
                BINDINGS, f"MyIngress.source_guard.{act[0]}", act[1])))
        p.tables[BINDINGS].set_default(p.action_call(BINDINGS, "MyIngress.source_guard.unknown_port", ()))
    return sw


def _block(as_host: str, mac: str | None = None) -> bytes:
    """A differentiated datagram to the PS with ``as_host``'s source IP (and MAC)."""
    return bytes(Ether(src=mac or TOPO.host_mac(as_host), dst="02:00:00:01:00:01")
                 / IP(src=TOPO.host_ip(as_host), dst=TOPO.host_ip(PS), ttl=64)
                 / UDP(sport=DIFF_UDP_PORT, dport=DIFF_UDP_PORT) / (b"\x00" * 64))


def _spoofed(sw: Switch) -> int:
    return sw.program.counters[DROPS].read(SPOOF)[0]


@pytest.mark.parametrize("program", ["forward", "ina"])
def test_a_host_sends_only_under_its_own_addresses(program: str) -> None:
    """From h4's port: its own datagram is forwarded; one with h2's IP and MAC, h2's IP
    with its own MAC, or its own IP with h2's MAC is dropped, each counted `src_spoof`;
    from h2's port, h2's datagram passes."""
    sw = _switch(program, guarded=True)
    port = TOPO.port("s1", OTHER)
    assert [p for p, _ in sw.process(port, _block(OTHER))] == [TOPO.port("s1", PS)]
    spoofs = [_block(MEMBER), _block(MEMBER, TOPO.host_mac(OTHER)), _block(OTHER, TOPO.host_mac(MEMBER))]
    for n, frame in enumerate(spoofs, 1):
        assert sw.process(port, frame) == []
        assert _spoofed(sw) == n
    assert [p for p, _ in sw.process(TOPO.port("s1", MEMBER), _block(MEMBER))] == [TOPO.port("s1", PS)]
    assert _spoofed(sw) == 3 and sw.stats.errors == 0


@pytest.mark.parametrize("program", ["forward", "ina"])
def test_unbound_ports_refuse_and_the_open_program_does_not_check(program: str) -> None:
    """A port the plan does not know accepts nothing while guarded; without the
    controller's entries (the P4 default) the same spoof is forwarded: the check is the
    bindings'."""
    sw = _switch(program, guarded=True)
    assert sw.process(9, _block(OTHER)) == []
    assert _spoofed(sw) == 1
    sw = _switch(program, guarded=False)
    assert [p for p, _ in sw.process(TOPO.port("s1", OTHER), _block(MEMBER))] == [TOPO.port("s1", PS)]
    assert _spoofed(sw) == 0


def test_the_plan_binds_host_ports_and_exempts_switch_facing_ones() -> None:
    """leaf-spine: a leaf binds each host port to that host's MAC and IP, and exempts
    its uplinks; a spine (no hosts) exempts every port; the default refuses."""
    topo = leaf_spine(2, 2, 2)
    guard = Program.load(BUILD / "forward.json").block(SourceGuard)
    leaf = next(s for s in topo.switches() if any(topo.is_host(n) for n in topo.ports(s).values()))
    spine = next(s for s in topo.switches() if all(topo.is_switch(n) for n in topo.ports(s).values()))
    b = guard.bindings(topo, leaf)
    for port, peer in topo.ports(leaf).items():
        want = None if topo.is_switch(peer) else (topo.host_mac(peer), topo.host_ip(peer))
        assert b[port] == want
    assert set(guard.bindings(topo, spine).values()) == {None}
    plan = guard.plan(topo, leaf)
    assert len(plan) == len(topo.ports(leaf)) + 1
