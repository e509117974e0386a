"""Tests of the deploy layer (controller.p4runtime, controller.deploy).

The first part needs only the compiled program: entries are built and encoded against
the real P4Info. The ``net`` part starts emulated networks (root, Mininet's ``mnexec``),
deploys forward.p4 with the deploy layer and sends real packets: all-pairs reachability
on linear(2) and fat-tree k=4, ECMP path choice per flow, emulated loss and its counter.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from finsy import P4MulticastGroupEntry, P4TableEntry
from finsy.p4entity import encode_updates

from controller.deploy import (
    DEFAULT_PROGRAM,
    Deployment,
    Forwarding,
    LinkEmulation,
    PortMacs,
    PriorityClassifier,
    addresses_from_run_dir,
    check_loss,
    deploy,
    load_addresses,
    loss_threshold,
    parse_loss,
    read_counters,
)
from controller.p4runtime import DeployError, Program, multicast_group
from controller.routing import EcmpGroup, NextHop, Route, SwitchRoutes, compute_routes
from experiments.accounting import memlink_counters
from tests.netenv import net_skip_reason
from topologies import fat_tree, linear, star

REPO = Path(__file__).resolve().parent.parent

needs_program = pytest.mark.skipif(
    not DEFAULT_PROGRAM.is_file(), reason="p4src/build/forward.json missing (make p4)"
)


@pytest.fixture(scope="module")
def program() -> Program:
    if not DEFAULT_PROGRAM.is_file():
        pytest.skip("p4src/build/forward.json missing (make p4)")
    return Program.load(DEFAULT_PROGRAM)


# ----------------------------------------------------------------------------- offline


def test_program_load_errors(tmp_path: Path) -> None:
    with pytest.raises(DeployError, match="expected a BMv2 JSON file"):
        Program.load(tmp_path / "forward.p4")
    with pytest.raises(DeployError, match="BMv2 JSON .* not found"):
        Program.load(tmp_path / "nope.json")
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(DeployError, match=r"P4Info .*x\.p4info\.txt' not found"):
        Program.load(tmp_path / "x.json")
    (tmp_path / "x.p4info.txt").write_text("this is not { text format")
    with pytest.raises(DeployError, match="cannot parse P4Info"):
        Program.load(tmp_path / "x.json")


def test_blocks_bind_to_forward_p4(program: Program) -> None:
    fwd = program.block(Forwarding)
    assert fwd is program.block(Forwarding)  # cached per program
    assert fwd.name("ipv4_routes") == "MyIngress.forwarding.ipv4_routes"
    assert fwd.table_size("ipv4_routes") == 4096
    assert program.block(LinkEmulation).name("link_emulation_drops") == (
        "MyEgress.link_emulation.link_emulation_drops"
    )
    for cls in (PortMacs, PriorityClassifier):
        program.block(cls)
    with pytest.raises(DeployError, match=r"no Forwarding control at 'MyIngress.fwd': missing "
                                          r"tables MyIngress.fwd.ipv4_routes"):
        Forwarding(program, "MyIngress.fwd")


def test_route_entries_encode(program: Program) -> None:
    topo = fat_tree(4)
    routes = compute_routes(topo)
    fwd, macs = program.block(Forwarding), program.block(PortMacs)
    sr = routes["s7"]
    updates = fwd.route_entries(sr)
    # the ECMP salt (a default-action MODIFY), then ECMP members, then routes
    assert len(updates) == 1 + len(sr.routes) + sum(g.size for g in sr.groups) == 1 + 16 + 2
    msgs = encode_updates(updates + macs.mac_entries(sr.port_macs), program.schema)
    assert len(msgs) == 19 + 4
    assert msgs[0].type == msgs[0].MODIFY and msgs[0].entity.table_entry.is_default_action
    assert all(m.type == m.INSERT for m in msgs[1:])
    text = str(msgs[1])
    assert "table_entry" in text
    # A route to an ECMP group carries its id and size.
    ecmp = [u for u in updates if u.action.name.endswith("set_ecmp_group")]
    assert {tuple(sorted(u.action.args.items())) for u in ecmp} == {
        (("group_id", 1), ("group_size", 2))
    }


def test_route_entries_must_fit(program: Program) -> None:
    hop = NextHop(1, "00:00:0a:00:00:01", "h1", 0)
    many = SwitchRoutes("s1", 1, routes=[
        Route(str(ipaddress.IPv4Address(0x0A000001 + i)), "h1", 0, 0, next_hop=hop)
        for i in range(4097)
    ])
    with pytest.raises(DeployError, match=r"s1: 4097 entries do not fit "
                                          r"MyIngress.forwarding.ipv4_routes \(size 4096\)"):
        program.block(Forwarding).route_entries(many)
    big = SwitchRoutes("s1", 1, groups=[EcmpGroup(1, (hop,) * 8193)])
    with pytest.raises(DeployError, match="ecmp_members"):
        program.block(Forwarding).route_entries(big)


def test_loss_and_priority_entries(program: Program) -> None:
    assert loss_threshold(0) == 0
    assert loss_threshold(0.5) == 1 << 31
    assert loss_threshold(1.0) == (1 << 32) - 1
    assert loss_threshold(0.05) == round(0.05 * 2**32)
    for bad in (-0.1, 1.5, float("nan"), "0.1", True):
        with pytest.raises(DeployError, match="loss rate must be"):
            loss_threshold(bad)  # type: ignore[arg-type]
    le = program.block(LinkEmulation)
    assert le.loss_entry(2, 0).action.name.endswith("no_loss")
    entry = le.loss_entry(2, 0.25)
    assert entry.action.args == {"drop_threshold": 1 << 30}
    pc = program.block(PriorityClassifier)
    msgs = encode_updates(pc.dscp_entries({46: 7, 0: 1}), program.schema)
    assert [m.entity.table_entry.priority for m in msgs] == [1, 1]
    with pytest.raises(DeployError, match="DSCP must be"):
        pc.dscp_entries({64: 1})
    with pytest.raises(DeployError, match="priority must be"):
        pc.dscp_entries({1: 8})


def test_parse_and_check_loss() -> None:
    assert parse_loss("s1:2=0.05") == (("s1", 2), 0.05)
    for bad in ("s1:2", "s1=0.5", "s1:x=0.1", "s1:2=high"):
        with pytest.raises(DeployError, match="bad loss spec"):
            parse_loss(bad)
    with pytest.raises(DeployError, match=r"must be in \[0, 1\]"):
        parse_loss("s1:2=2")
    topo = star(2)
    assert check_loss(topo, {("s1", 2): 0.1}) == {("s1", 2): 0.1}
    with pytest.raises(DeployError, match="unknown switch 'h1'"):
        check_loss(topo, {("h1", 0): 0.1})
    with pytest.raises(DeployError, match=r"s1 has no port 3 \(ports 1, 2\)"):
        check_loss(topo, {("s1", 3): 0.1})


def test_multicast_group_entry() -> None:
    e = multicast_group(3, [1, 2, (4, 1)])
    assert isinstance(e, P4MulticastGroupEntry) and e.multicast_group_id == 3
    with pytest.raises(DeployError, match="no ports"):
        multicast_group(1, [])
    with pytest.raises(DeployError, match="1..65535"):
        multicast_group(0, [1])


def test_addresses(tmp_path: Path) -> None:
    topo = linear(2)
    with pytest.raises(DeployError, match="has no P4Runtime socket for s1, s2"):
        addresses_from_run_dir(topo, tmp_path)
    for s in ("s1", "s2"):
        (tmp_path / f"{s}.grpc").touch()
    assert addresses_from_run_dir(topo, tmp_path) == {
        s: f"unix:{tmp_path}/{s}.grpc" for s in ("s1", "s2")
    }
    f = tmp_path / "addr.yaml"
    f.write_text("s1: unix:/tmp/a.grpc\ns2: 127.0.0.1:50052\n")
    assert load_addresses(f) == {"s1": "unix:/tmp/a.grpc", "s2": "127.0.0.1:50052"}
    f.write_text("[1, 2]")
    with pytest.raises(DeployError, match="expected a mapping"):
        load_addresses(f)


@needs_program
def test_deployment_checks_addresses() -> None:
    topo = linear(2)
    with pytest.raises(DeployError, match="no P4Runtime address for switch\\(es\\): s2"):
        Deployment(topo, {"s1": "unix:/x"})
    with pytest.raises(DeployError, match="unknown switch\\(es\\): s9"):
        Deployment(topo, {"s1": "unix:/x", "s2": "unix:/y", "s9": "unix:/z"})


@needs_program
def test_deployment_per_switch_programs(program: Program, tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    other.write_bytes(program.json_path.read_bytes())
    (tmp_path / "other.p4info.txt").write_bytes(program.p4info_path.read_bytes())
    custom = Program.load(other)
    dep = Deployment(linear(2), {"s1": "unix:/x", "s2": "unix:/y"}, {"s2": custom})
    assert dep.programs == {"s1": program, "s2": custom}
    assert dep.block("s2", Forwarding).program is custom


@needs_program
def test_deploy_unreachable_switch_fails_fast(tmp_path: Path) -> None:
    addrs = {"s1": f"unix:{tmp_path}/s1.grpc"}
    t0 = time.monotonic()
    with pytest.raises(DeployError, match=r"s1: cannot connect to unix:.*s1\.grpc"):
        deploy(star(1), addrs, timeout=2)
    assert time.monotonic() - t0 < 12   # the timeout, not gRPC's own minutes of back-off


# ----------------------------------------------------------------------------- network


def _net_skip_reason() -> str | None:
    return net_skip_reason("forward")


net = pytest.mark.skipif(_net_skip_reason() is not None, reason=_net_skip_reason() or "")
TARGET = os.environ.get("TARGET") or "embedded"


def start_network(topo, run_dir: Path):  # noqa: ANN001, ANN201 (Topology -> Network)
    from topologies.network import Network

    return Network(topo, target=TARGET, run_dir=str(run_dir), limit_bw=False).start()


def unreachable_pairs(network, topo) -> list[tuple[str, str]]:  # noqa: ANN001
    """Every (src, dst) host pair whose one ping got no answer (pings per host in parallel)."""
    failed = []
    for h in topo.hosts():
        ips = [topo.host_ip(o) for o in topo.hosts() if o != h]
        script = ("for ip in " + " ".join(ips) + "; do "
                  "(ping -n -q -c1 -W2 $ip >/dev/null 2>&1 || echo FAIL $ip) & done; wait")
        out = network.host(h).cmd(script)
        failed += [(h, ip) for ip in re.findall(r"FAIL (\S+)", out)]
    return failed


def tx_packets(network, switch: str) -> dict[int, int]:  # noqa: ANN001
    """Frames sent per port of ``switch`` (kernel counters in the switch's namespace, plus
    what its in-memory links to switches of the same process carried)."""
    node = network.switch(switch)
    text = node.cmd("cat /proc/net/dev")
    out = {}
    for m in re.finditer(rf"^\s*{switch}-eth(\d+):(.*)$", text, re.M):
        out[int(m.group(1))] = int(m.group(2).split()[9])  # tx packets
    for iface, c in memlink_counters(node).items():
        port = int(iface.rsplit("-eth", 1)[1])
        out[port] = out.get(port, 0) + c["tx_packets"]
    return out


def crc16_arc(data: bytes) -> int:
    """CRC-16/ARC, BMv2's ``crc16`` (reference: b"123456789" -> 0xBB3D)."""
    crc = 0
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc


def ecmp_member(src: str, dst: str, proto: int, sport: int, dport: int, size: int,
                salt: int = 0) -> int:
    """forward.p4's member choice: crc16(salt, src, dst, proto, sport, dport) mod size."""
    key = (salt.to_bytes(2, "big") + socket.inet_aton(src) + socket.inet_aton(dst) + bytes([proto])
           + sport.to_bytes(2, "big") + dport.to_bytes(2, "big"))
    return crc16_arc(key) % size


def test_crc16_reference() -> None:
    assert crc16_arc(b"123456789") == 0xBB3D


def send_udp(network, host: str, dst: str, sports: range, dport: int) -> None:  # noqa: ANN001
    """One UDP datagram per source port from ``host`` to ``dst``."""
    code = ("import socket\n"
            f"for p in range({sports.start}, {sports.stop}):\n"
            "    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "    s.bind(('', p))\n"
            f"    s.sendto(b'gradnet-ecmp', ('{dst}', {dport}))\n"
            "    s.close()\n")
    out = network.host(host).cmd(f"{sys.executable} -c \"{code}\"; echo rc=$?")
    assert "rc=0" in out, out


def _quiet(network, switch: str, seconds: float) -> bool:  # noqa: ANN001
    """No frame left any port of ``switch`` during ``seconds``."""
    a = tx_packets(network, switch)
    time.sleep(seconds)
    return tx_packets(network, switch) == a


def wait_for(predicate, timeout: float = 5.0) -> bool:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


@net
@pytest.mark.net
def test_linear_deploy_with_cli(tmp_path: Path) -> None:
    """``gradctl deploy`` onto a running linear(2), then ping; ``gradctl counters`` reads."""
    topo = linear(2)
    network = start_network(topo, tmp_path)
    try:
        assert unreachable_pairs(network, topo) == [("h1", "10.0.0.2"), ("h2", "10.0.0.1")]
        gradctl = [sys.executable, "-m", "controller.cli"]
        r = subprocess.run([*gradctl, "deploy", "linear:2", "--run-dir", str(network.run_dir),
                            "--loss", "s2:1=0"], cwd=REPO, capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        assert "deployed forward to linear-2x1: 2 switches" in r.stdout
        assert unreachable_pairs(network, topo) == []
        r = subprocess.run([*gradctl, "counters", "linear:2", "--run-dir", str(network.run_dir),
                            "--json"], cwd=REPO, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert '"link_drops"' in r.stdout
    finally:
        network.stop()


@pytest.fixture(scope="module")
def fat_tree_net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[object, object]]:
    reason = _net_skip_reason()
    if reason:
        pytest.skip(reason)
    topo = fat_tree(4)
    t0 = time.monotonic()
    network = start_network(topo, tmp_path_factory.mktemp("fat_tree"))
    try:
        report = deploy(topo, network.grpc_addresses())
        assert report.total == sum(  # + 1: each switch's ECMP salt; a source binding per
            # port (source_guard.p4) + 1: its default
            1 + len(sr.routes) + sum(g.size for g in sr.groups) + len(sr.port_macs)
            + len(topo.ports(s)) + 1
            for s, sr in compute_routes(topo).items()
        )
        print(f"fat-tree k=4: started and deployed in {time.monotonic() - t0:.1f} s ({report})")
        yield network, topo
    finally:
        network.stop()


@net
@pytest.mark.net
def test_fat_tree_all_pairs(fat_tree_net) -> None:  # noqa: ANN001
    network, topo = fat_tree_net
    assert unreachable_pairs(network, topo) == []


@net
@pytest.mark.net
def test_fat_tree_ecmp_spreads_flows(fat_tree_net) -> None:  # noqa: ANN001
    """Flows h1 -> h16 differing only in UDP source port leave h1's edge switch on the
    uplink forward.p4's hash picks for them: both uplinks carry traffic, and the count
    per uplink is exactly the prediction; every packet reaches h16's port."""
    network, topo = fat_tree_net
    src, dst, edge, last = "h1", "h16", "s7", "s20"
    src_ip, dst_ip = topo.host_ip(src), topo.host_ip(dst)
    group = compute_routes(topo, [edge])[edge]
    members = group.next_hops(dst_ip)
    assert len(members) == 2
    sports, dport = range(30000, 30048), 5001
    expected = dict.fromkeys((m.port for m in members), 0)
    for p in sports:
        expected[members[ecmp_member(src_ip, dst_ip, 17, p, dport, len(members),
                                     salt=topo.device_id(edge))].port] += 1
    assert all(expected.values())  # the hash does spread these flows

    h16_port = topo.port(last, dst)
    # Counters are per port, not per flow: start from a quiet network, so that a late
    # frame of an earlier test is not counted as one of these flows.
    assert wait_for(lambda: _quiet(network, edge, 0.5), timeout=10)
    before, before_last = tx_packets(network, edge), tx_packets(network, last)
    send_udp(network, src, dst_ip, sports, dport)
    assert wait_for(lambda: tx_packets(network, last)[h16_port] - before_last[h16_port]
                    >= len(sports))
    after = tx_packets(network, edge)
    sent = {p: after[p] - before[p] for p in expected}
    assert sent == expected
    assert tx_packets(network, last)[h16_port] - before_last[h16_port] == len(sports)


def set_link_loss(topo, addrs, switch: str, port: int, p: float) -> None:  # noqa: ANN001
    """Change one port's emulated loss rate on the running network."""

    async def run() -> None:
        async with Deployment(topo, addrs, set_pipeline=False) as dep:
            await dep.set_loss(switch, port, p)

    asyncio.run(run())


@net
@pytest.mark.net
def test_fat_tree_loss_is_counted(fat_tree_net) -> None:  # noqa: ANN001
    """Loss 1.0 on the port towards h2 drops every packet to it and counts each drop;
    other hosts stay reachable; restoring loss 0 restores h2."""
    network, topo = fat_tree_net
    edge = topo.node("h2")["ifaces"][0]["switch"]
    port = topo.port(edge, "h2")
    addrs = network.grpc_addresses()

    def set_loss(p: float) -> None:
        set_link_loss(topo, addrs, edge, port, p)

    before = read_counters(topo, addrs)[edge]["link_drops"][port]
    set_loss(1.0)
    h1 = network.host("h1")
    out = h1.cmd("ping -n -q -c3 -i0.2 -W1 10.0.0.2")
    assert " 0 received" in out, out
    assert "1 received" in h1.cmd("ping -n -q -c1 -W2 10.0.0.3")
    assert read_counters(topo, addrs)[edge]["link_drops"][port] - before == 3
    set_loss(0.0)
    assert "1 received" in h1.cmd("ping -n -q -c1 -W2 10.0.0.2")


@net
@pytest.mark.net
def test_fat_tree_loss_rate_matches_configured(fat_tree_net) -> None:  # noqa: ANN001
    """A 20% emulated loss toward h2: of 600 ICMP echo requests from h1, the share that
    gets no reply is within 5 points of 20% (binomial sd is 1.6 points), and the switch's
    drop counter accounts for every missing one."""
    import json

    network, topo = fat_tree_net
    edge = topo.node("h2")["ifaces"][0]["switch"]
    port = topo.port(edge, "h2")
    addrs = network.grpc_addresses()

    def set_loss(p: float) -> None:
        set_link_loss(topo, addrs, edge, port, p)

    before = read_counters(topo, addrs)[edge]["link_drops"][port]
    set_loss(0.2)
    try:
        out = network.host("h1").cmd(
            f"{sys.executable} -m hosts.reach --targets {topo.host_ip('h2')} --count 600 "
            "--interval 0.002 --timeout 3")
        res = json.loads(out.strip().splitlines()[-1])
    finally:
        set_loss(0.0)
    sent, got = res["sent"][topo.host_ip("h2")], res["received"][topo.host_ip("h2")]
    assert sent == 600
    assert abs((sent - got) / sent - 0.2) < 0.05, (sent, got)
    assert read_counters(topo, addrs)[edge]["link_drops"][port] - before == sent - got


@net
@pytest.mark.net
def test_fat_tree_multicast_group_and_readback(fat_tree_net) -> None:  # noqa: ANN001
    network, topo = fat_tree_net
    addrs = network.grpc_addresses()

    async def run() -> tuple[list, list]:
        async with Deployment(topo, addrs, set_pipeline=False) as dep:
            await dep.add_multicast_group("s7", 5, [1, 2])
            with pytest.raises(DeployError, match="s7 has no port"):
                await dep.add_multicast_group("s7", 6, [9])
            s7 = dep.session("s7")
            groups = await s7.read(P4MulticastGroupEntry())
            routes = await s7.read(P4TableEntry("MyIngress.forwarding.ipv4_routes"))
            return groups, routes

    groups, routes = asyncio.run(run())
    assert [(g.multicast_group_id, list(g.replicas)) for g in groups] == [(5, [1, 2])]
    assert len(routes) == 16


@net
@pytest.mark.net
def test_fat_tree_no_route_is_counted(fat_tree_net) -> None:  # noqa: ANN001
    """A packet to an address no host has is dropped at the first switch, as no_route."""
    network, topo = fat_tree_net
    addrs = network.grpc_addresses()
    edge = topo.node("h1")["ifaces"][0]["switch"]

    def no_route() -> int:
        return read_counters(topo, addrs)[edge]["ingress_drops"].get("no_route", 0)

    before = no_route()
    # Static ARP: the frames are IPv4 (an ARP request would count as not_ipv4).
    out = network.host("h1").cmd("ip neigh replace 10.0.0.99 lladdr 00:00:0a:00:00:63 "
                                 "dev h1-eth0 nud permanent; ping -n -q -c2 -i0.2 -W1 10.0.0.99")
    assert " 0 received" in out, out
    assert no_route() - before == 2


@net
@pytest.mark.net
def test_every_host_of_a_large_network_has_its_static_arp(tmp_path: Path) -> None:
    """A star of 64 hosts: every host knows every other host's MAC and h1 reaches h64.
    (The entries once went through one shell line that the tty cut off after about 50
    of them, so hosts of a larger network could not reach the rest.)"""
    topo = star(64)
    network = start_network(topo, tmp_path)
    try:
        deploy(topo, network.grpc_addresses())
        for h in ("h1", "h64"):
            out = network.host(h).cmd("ip neigh show nud permanent | wc -l")
            assert int(out.strip()) == 63, (h, out)
        out = network.host("h1").cmd(f"ping -n -c1 -W2 {topo.host_ip('h64')}")
        assert " 0% packet loss" in out, out
    finally:
        network.stop()
