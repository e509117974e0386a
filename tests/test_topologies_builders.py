"""Tests of the topology builders: invariants, fat-tree, leaf-spine, rail, star, linear
and BCube structure, the address plan and bad arguments.
"""

from __future__ import annotations

import ipaddress
from collections import Counter

import networkx as nx
import pytest

from tests.topology_checks import all_builders, check_addresses, check_ports
from topologies import (
    Topology,
    TopologyError,
    bcube,
    fat_tree,
    host_address,
    leaf_spine,
    linear,
    mac_for_ip,
    rail_fat_tree,
    rail_leaf_spine,
    star,
)


@pytest.mark.parametrize("topo", all_builders(), ids=lambda t: t.name)
def test_builder_invariants(topo: Topology) -> None:
    topo.validate()
    check_ports(topo)
    check_addresses(topo)
    ids = [topo.device_id(s) for s in topo.switches()]
    assert ids == list(range(1, len(ids) + 1))
    assert [topo.switch_by_id(i) for i in ids] == topo.switches()
    assert topo.switches() == [f"s{i}" for i in ids]
    assert topo.hosts() == [f"h{i}" for i in range(1, len(topo.hosts()) + 1)]
    assert all(topo.node(s)["grpc_port"] == 50050 + topo.device_id(s) for s in topo.switches())
    assert nx.is_connected(topo.graph)


# ----------------------------------------------------------------------------- fat-tree


@pytest.mark.parametrize("k", [4, 8])
def test_fat_tree_structure(k: int) -> None:
    topo = fat_tree(k, bw=40)
    half = k // 2
    assert len(topo.hosts()) == k**3 // 4
    assert len(topo.switches()) == 5 * k**2 // 4
    assert Counter(topo.node(s)["role"] for s in topo.switches()) == {
        "core": half * half,
        "agg": k * half,
        "edge": k * half,
    }
    assert topo.graph.number_of_edges() == 3 * k**3 // 4
    assert all(c == 40.0 for *_, c in topo.links())
    assert all(topo.graph.degree(s) == k for s in topo.switches())
    assert all(topo.graph.degree(h) == 1 for h in topo.hosts())
    assert nx.is_bipartite(topo.graph)

    allowed = {"core": {"agg"}, "agg": {"edge", "core"}, "edge": {"host", "agg"}}
    for s in topo.switches():
        data = topo.node(s)
        neighbours = Counter(topo.node(n)["role"] for n in topo.graph[s])
        assert set(neighbours) == allowed[data["role"]], s
        if data["role"] == "core":
            assert data["pod"] is None
            # one uplink from every pod, on port pod + 1
            for port in range(1, k + 1):
                agg, _ = topo.peer(s, port)
                assert topo.node(agg)["pod"] == port - 1
        elif data["role"] == "agg":
            assert neighbours == {"edge": half, "core": half}
            for port in range(1, half + 1):
                edge, _ = topo.peer(s, port)
                assert topo.node(edge)["role"] == "edge"
                assert topo.node(edge)["pod"] == data["pod"]
            cores = [topo.peer(s, p)[0] for p in range(half + 1, k + 1)]
            pos = data["pos"]
            assert [topo.node(c)["pos"] for c in cores] == list(range(pos * half, (pos + 1) * half))
        else:
            assert neighbours == {"host": half, "agg": half}
            for port in range(1, half + 1):
                host, nic = topo.peer(s, port)
                assert topo.is_host(host) and nic == 0
                assert topo.node(host)["pod"] == data["pod"]
            for port in range(half + 1, k + 1):
                agg, _ = topo.peer(s, port)
                assert topo.node(agg)["role"] == "agg"
                assert topo.node(agg)["pod"] == data["pod"]
    # every pod holds k/2 agg, k/2 edge and (k/2)^2 hosts
    pods = Counter((topo.node(n)["role"], topo.node(n)["pod"]) for n in topo.graph)
    for pod in range(k):
        assert pods["agg", pod] == pods["edge", pod] == half
        assert pods["host", pod] == half * half


def test_fat_tree_addresses() -> None:
    topo = fat_tree(4)
    assert topo.host_ip("h1") == "10.0.0.1"
    assert topo.host_mac("h1") == "00:00:0a:00:00:01"
    assert topo.host_ip("h16") == "10.0.0.16"
    assert topo.iface("h1")["prefix"] == 8
    assert topo.port("s7", "h1") == 1 and topo.port("h1", "s7") == 0
    big = fat_tree(16)
    assert len(big.hosts()) == 1024
    assert big.host_ip("h254") == "10.0.0.254"
    assert big.host_ip("h255") == "10.0.1.1"
    assert big.host_ip("h1024") == "10.0.4.8"
    check_addresses(big)


def test_address_plan() -> None:
    assert host_address(1) == "10.0.0.1"
    assert host_address(508) == "10.0.1.254"
    assert host_address(509) == "10.0.2.1"
    assert host_address(3, nic=2) == "10.2.0.3"
    assert mac_for_ip("10.1.2.254") == "00:00:0a:01:02:fe"
    seen = {host_address(i) for i in range(1, 3000)}
    assert len(seen) == 2999
    with pytest.raises(TopologyError, match="host index 0"):
        host_address(0)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: fat_tree(3), "k: must be even, got 3"),
        (lambda: fat_tree(0), "k: must be >= 2"),
        (lambda: fat_tree(4.0), "k: must be an integer"),
        (lambda: fat_tree(4, bw=0), "bw: must be a positive number of Mbit/s, got 0"),
        (lambda: fat_tree(4, bw="fast"), "bw: must be a number of Mbit/s"),
        (lambda: leaf_spine(0, 2, 2), "spines: must be >= 1"),
        (lambda: bcube(1, 2), "n: must be >= 2"),
        (lambda: bcube(2, 0), "k: must be >= 1"),
        (lambda: star(True), "n: must be an integer"),
        (lambda: linear(2, hosts_per_switch=0), "hosts_per_switch: must be >= 1"),
        # too big: refused before anything is built
        (lambda: fat_tree(1000), "k: gives 250000000 hosts, more than the address plan's 65024"),
        (lambda: bcube(10**9, 10**9), r"k: gives 1000000000\*\*1000000000 hosts"),
        (lambda: bcube(600, 1), "n: gives a switch 600 ports, more than the 509 available"),
        (lambda: leaf_spine(10**6, 1, 1), "spines: gives a switch 1000001 ports"),
        (lambda: star(600), "n: gives a switch 600 ports"),
    ],
)
def test_builder_bad_arguments(call, message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        call()


# ----------------------------------------------------------------------------- others


def test_leaf_spine_structure() -> None:
    topo = leaf_spine(3, 4, 5)
    spines, leaves = topo.switches("spine"), topo.switches("leaf")
    assert spines == ["s1", "s2", "s3"] and leaves == ["s4", "s5", "s6", "s7"]
    assert len(topo.hosts()) == 20
    assert nx.is_bipartite(topo.graph)
    for i, leaf in enumerate(leaves):
        assert topo.graph.degree(leaf) == 5 + 3
        for port in range(1, 6):
            host, _ = topo.peer(leaf, port)
            assert topo.is_host(host) and topo.node(host)["leaf"] == i
        assert [topo.peer(leaf, 6 + j)[0] for j in range(3)] == spines
    for spine in spines:
        assert [topo.peer(spine, i + 1)[0] for i in range(4)] == leaves


@pytest.mark.parametrize(("oversub", "uplink"), [(1, 2000.0), (2, 1000.0), (4, 500.0), (2.5, 800.0)])
def test_leaf_spine_oversubscription_sets_the_uplink_rate(oversub: float, uplink: float) -> None:
    """A leaf's host capacity over its uplink capacity is ``oversub``: 4 hosts at 1000 Mbit/s
    over 2 spines at 4:1 -> 500 Mbit/s a leaf-spine link; the host links keep ``bw``."""
    from topologies.spec import parse_topology

    topo = parse_topology(f"leaf-spine:2,3,4,bw=1000,oversub={oversub}")
    assert topo.name == f"leaf_spine-2x3x4-oversub{oversub:g}"
    for ln in topo.links():
        host_link = topo.is_host(ln.a) or topo.is_host(ln.b)
        assert ln.capacity == (1000.0 if host_link else uplink), ln
    for leaf in topo.switches("leaf"):
        down = sum(topo.graph.edges[leaf, h]["capacity"] for h in topo.graph[leaf] if topo.is_host(h))
        up = sum(topo.graph.edges[leaf, s]["capacity"] for s in topo.switches("spine"))
        assert down / up == pytest.approx(oversub)
    # the same structure as without the parameter, and 0 keeps every link at bw
    assert sorted(topo.graph.edges) == sorted(leaf_spine(2, 3, 4).graph.edges)
    assert {ln.capacity for ln in leaf_spine(2, 3, 4, bw=1000, oversub=0).links()} == {1000.0}


@pytest.mark.parametrize("bad", ["-1", "inf", "nan"])
def test_leaf_spine_oversubscription_must_be_positive(bad: str) -> None:
    from topologies.spec import SpecError, parse_topology

    with pytest.raises(SpecError, match="oversub: must be a positive number"):
        parse_topology(f"leaf-spine:2,3,4,oversub={bad}")


def test_rail_networks_copy_the_one_rail_topology_per_nic() -> None:
    from controller.routing import compute_routes
    from topologies.spec import parse_topology

    one = leaf_spine(2, 3, 3, bw=7)
    topo = parse_topology("rail-leaf-spine:2,2,3,3,bw=7")
    assert topo.name == "rail2-leaf_spine-2x3x3"
    m = len(one.switches())
    assert len(topo.switches()) == 2 * m and topo.hosts() == one.hosts()
    for j in range(2):
        for i, sw in enumerate(one.switches()):
            copy = f"s{j * m + i + 1}"
            data = topo.node(copy)
            assert data["rail"] == j and data["role"] == one.node(sw)["role"]
            for port, peer in one.ports(sw).items():  # same ports, same peers (renamed)
                got, _ = topo.peer(copy, port)
                want = peer if one.is_host(peer) else f"s{j * m + one.switches().index(peer) + 1}"
                assert got == want
    for h in topo.hosts():
        nics = topo.node(h)["ifaces"]
        assert [n["ip"].split(".")[1] for n in nics] == ["0", "1"]
        assert [topo.node(n["switch"])["rail"] for n in nics] == [0, 1]
    assert all(c == 7.0 for *_, c in topo.links())
    # a switch routes to every NIC of its own rail and to none of the other rail
    routes = compute_routes(topo)
    for sw in topo.switches():
        rail = topo.node(sw)["rail"]
        nics = {topo.host_by_ip(r.ip)[1] for r in routes[sw].routes}
        assert nics == {rail} and len(routes[sw].routes) == 9
        assert len(routes[sw].unreachable) == 9
    assert len(rail_fat_tree(3, 4).switches()) == 60
    with pytest.raises(TopologyError, match="rails: must be >= 1"):
        rail_leaf_spine(0, 1, 1, 1)
    with pytest.raises(TopologyError, match="rails: must be <= 16"):
        rail_leaf_spine(17, 1, 1, 1)


def test_star_and_linear() -> None:
    s = star(4)
    assert s.switches() == ["s1"]
    assert [s.peer("s1", p) for p in range(1, 5)] == [(f"h{i}", 0) for i in range(1, 5)]
    line = linear(3, hosts_per_switch=2)
    assert len(line.hosts()) == 6
    assert line.peer("s1", 1) == ("h1", 0) and line.peer("s3", 2) == ("h6", 0)
    assert line.peer("s1", 3) == ("s2", 3)  # s2: hosts on 1-2, s1 on 3, s3 on 4
    assert line.peer("s2", 4) == ("s3", 3)
    assert nx.shortest_path_length(line.graph, "h1", "h6") == 4


# ----------------------------------------------------------------------------- BCube


@pytest.mark.parametrize(("n", "k"), [(2, 1), (4, 2), (3, 3), (2, 4)])
def test_bcube_structure(n: int, k: int) -> None:
    topo = bcube(n, k)
    hosts = topo.hosts()
    assert len(hosts) == n**k
    assert len(topo.switches()) == k * n ** (k - 1)
    assert {topo.node(h)["digits"] for h in hosts} == {
        tuple((s // n**lvl) % n for lvl in range(k)) for s in range(n**k)
    }
    for level in range(k):
        level_switches = [s for s in topo.switches() if topo.node(s)["level"] == level]
        assert len(level_switches) == n ** (k - 1)
        for sw in level_switches:
            assert topo.node(sw)["role"] == "bcube"
            assert topo.graph.degree(sw) == n
            members = [topo.peer(sw, port) for port in range(1, n + 1)]
            assert all(nic == level for _, nic in members)
            digits = [topo.node(h)["digits"] for h, _ in members]
            # port d+1 leads to the server whose level digit is d
            assert [d[level] for d in digits] == list(range(n))
            # servers under one level-l switch differ only in digit l
            for d in digits:
                assert d[:level] + d[level + 1 :] == digits[0][:level] + digits[0][level + 1 :]
            sw_digits = topo.node(sw)["digits"]
            assert sw_digits[level] is None
            assert all(
                x == y
                for i, (x, y) in enumerate(zip(sw_digits, digits[0], strict=True))
                if i != level
            )
    for h in hosts:
        assert topo.graph.degree(h) == k
        assert nx.is_bipartite(topo.graph)
        for level in range(k):
            iface = topo.iface(h, level)
            assert topo.node(iface["switch"])["level"] == level
            assert ipaddress.IPv4Address(iface["ip"]) in ipaddress.IPv4Network(f"10.{level}.0.0/16")
            assert iface["prefix"] == (8 if level == 0 else 16)
    # two servers share at most one switch, and exactly one iff their digits differ in one
    for a in hosts[:8]:
        for b in hosts:
            if a == b:
                continue
            shared = set(topo.graph[a]) & set(topo.graph[b])
            diff = sum(
                x != y for x, y in zip(topo.node(a)["digits"], topo.node(b)["digits"], strict=True)
            )
            assert len(shared) == (1 if diff == 1 else 0)


def test_bcube_4_2_example() -> None:
    topo = bcube(4, 2)
    assert len(topo.hosts()) == 16 and len(topo.switches()) == 8
    assert topo.node("h6")["digits"] == (1, 1)
    assert topo.host_ip("h6", 1) == "10.1.0.6"
    assert topo.host_mac("h6", 1) == "00:00:0a:01:00:06"
    assert topo.iface("h6", 1)["name"] == "h6-eth1"
