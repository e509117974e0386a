"""Tests of the topology model, the builders, topology files and the Mininet export."""

from __future__ import annotations

import inspect
import ipaddress
import json
import textwrap
from collections import Counter
from pathlib import Path

import networkx as nx
import pytest

import topologies
from topologies import (
    Topology,
    TopologyError,
    bcube,
    fat_tree,
    host_address,
    leaf_spine,
    linear,
    load,
    mac_for_ip,
    rail_fat_tree,
    rail_leaf_spine,
    star,
)
from topologies.base import CPU_PORT, MAX_IFNAME

EXAMPLES = Path(topologies.__file__).parent / "examples"


def all_builders() -> list[Topology]:
    return [
        fat_tree(2),
        fat_tree(4),
        fat_tree(8),
        leaf_spine(2, 4, 3),
        bcube(2, 1),
        bcube(4, 2),
        bcube(3, 3),
        rail_fat_tree(2, 4),
        rail_leaf_spine(3, 2, 3, 3),
        star(5),
        linear(4, 2),
        linear(1),
    ]


def check_ports(topo: Topology) -> None:
    """Ports are unique per node, in range, and port()/peer() are inverse."""
    for node in topo.graph.nodes:
        ports = [topo.graph.edges[node, nbr]["ports"][node] for nbr in topo.graph[node]]
        assert len(ports) == len(set(ports)), node
        if topo.is_switch(node):
            assert all(p >= 1 and p != CPU_PORT for p in ports), node
        else:
            assert sorted(ports) == list(range(len(ports))), node  # NIC indices 0..n-1
        assert topo.ports(node) == {topo.port(node, n): n for n in topo.graph[node]}
    for link in topo.links():
        assert topo.port(link.a, link.b) == link.port_a
        assert topo.port(link.b, link.a) == link.port_b
        assert topo.peer(link.a, link.port_a) == (link.b, link.port_b)
        assert topo.peer(link.b, link.port_b) == (link.a, link.port_a)
        assert link.capacity == topo.capacity(link.a, link.b) > 0


def check_addresses(topo: Topology) -> None:
    ips, macs, names = [], [], []
    for host in topo.hosts():
        for nic, iface in enumerate(topo.node(host)["ifaces"]):
            assert iface["name"] == f"{host}-eth{nic}"
            assert len(iface["name"]) <= MAX_IFNAME
            assert iface["mac"] == mac_for_ip(iface["ip"])
            assert iface["switch"] == topo.peer(host, nic)[0]
            addr = ipaddress.IPv4Address(iface["ip"])
            assert addr in ipaddress.IPv4Network("10.0.0.0/8")
            assert addr.packed[3] not in (0, 255)
            assert topo.host_by_ip(iface["ip"]) == (host, nic)
            ips.append(iface["ip"])
            macs.append(iface["mac"])
            names.append(iface["name"])
    assert len(ips) == len(set(ips))
    assert len(macs) == len(set(macs))
    assert len(names) == len(set(names))


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


# ----------------------------------------------------------------------------- model API


def test_lookup_errors() -> None:
    topo = star(2)
    with pytest.raises(TopologyError, match="unknown node 'x9'"):
        topo.port("x9", "s1")
    with pytest.raises(TopologyError, match="no link between 'h1' and 'h2'"):
        topo.port("h1", "h2")
    with pytest.raises(TopologyError, match="'s1' has no port 7"):
        topo.peer("s1", 7)
    with pytest.raises(TopologyError, match="host 'h1' has no NIC 1"):
        topo.host_ip("h1", 1)
    with pytest.raises(TopologyError, match="not a host"):
        topo.host_ip("s1")
    with pytest.raises(TopologyError, match="no switch has device_id 9"):
        topo.switch_by_id(9)


def test_manual_construction() -> None:
    topo = Topology("t", bw=10)
    topo.add_switch("s1")
    topo.add_switch("s2", device_id=7, role="core")
    topo.add_host("h1")
    topo.add_host("h2", ips=["10.9.9.9"])
    assert topo.add_link("h1", "s1") == topologies.Link("h1", 0, "s1", 1, 10.0)
    topo.reserve_ports("s1", [2])
    assert topo.add_link("s1", "s2", bw=5).port_a == 3
    topo.add_link("h2", "s2", port_b=254)
    assert topo.peer("s2", 254) == ("h2", 0)
    assert topo.host_ip("h2") == "10.9.9.9"
    assert topo.switch_by_id(7) == "s2"
    with pytest.raises(TopologyError, match="duplicate node name 'h1'"):
        topo.add_host("h1")
    with pytest.raises(TopologyError, match="duplicate link 's2'-'s1'"):
        topo.add_link("s2", "s1")
    with pytest.raises(TopologyError, match="device_id 7 already used by 's2'"):
        topo.add_switch("s3", device_id=7)
    with pytest.raises(TopologyError, match="CPU port 255"):
        topo.add_link("s1", topo.add_switch("s4"), port_a=CPU_PORT)
    with pytest.raises(TopologyError, match="invalid node name 'bad-name'"):
        topo.add_host("bad-name")
    with pytest.raises(TopologyError, match="reserved"):
        topo.add_host("h5", kind="switch")
    text = topo.summary()
    assert "h1:0 <-> s1:1" in text and "s1:3 <-> s2:1" in text and "10.9.9.9/8@s2" in text


def test_long_interface_name_rejected() -> None:
    topo = Topology()
    topo.add_switch("s1")
    topo.add_host("host_number_12")
    topo.add_link("host_number_12", "s1")
    with pytest.raises(TopologyError, match="'host_number_12-eth0' is longer than 15"):
        topo.validate()


# ----------------------------------------------------------------------------- round trip


@pytest.mark.parametrize(
    "topo",
    [*all_builders(), load(EXAMPLES / "dumbbell.yaml"), load(EXAMPLES / "triangle.json")],
    ids=lambda t: t.name,
)
def test_dict_round_trip(topo: Topology) -> None:
    data = topo.to_dict()
    text = json.dumps(data)  # must be plain JSON
    for back in (Topology.from_dict(data), Topology.from_dict(json.loads(text))):
        assert back.to_dict() == data
        assert back.name == topo.name and back.default_bw == topo.default_bw
        # hosts and switches keep their own order; the file lists hosts before switches
        assert dict(back.graph.nodes(data=True)) == dict(topo.graph.nodes(data=True))
        assert back.hosts() == topo.hosts() and back.switches() == topo.switches()
        assert list(back.links()) == list(topo.links())
        assert {frozenset((u, v)): d for u, v, d in back.graph.edges(data=True)} == {
            frozenset((u, v)): d for u, v, d in topo.graph.edges(data=True)
        }


def test_to_dict_written_as_file(tmp_path: Path) -> None:
    topo = bcube(3, 2)
    path = tmp_path / "b.json"
    path.write_text(json.dumps(topo.to_dict(), indent=1))
    assert load(path).to_dict() == topo.to_dict()
    assert Topology.from_file(str(path)).node("h5")["digits"] == (1, 1)


# ----------------------------------------------------------------------------- files


def test_examples_load() -> None:
    dumbbell = load(EXAMPLES / "dumbbell.yaml")
    assert dumbbell.name == "dumbbell"
    assert dumbbell.hosts() == ["h1", "h2", "h3", "h4"]
    assert dumbbell.port("s1", "s2") == 10 and dumbbell.capacity("s1", "s2") == 10.0
    assert dumbbell.capacity("h1", "s1") == 100.0
    assert dumbbell.host_ip("h4") == "10.0.0.44"
    assert dumbbell.node("h4")["rack"] == "right"
    assert dumbbell.node("s1")["role"] == "edge"
    check_ports(dumbbell)
    triangle = load(EXAMPLES / "triangle.json")
    assert len(triangle.switches()) == 3 and triangle.capacity("s3", "s1") == 20.0
    assert triangle.peer("s1", 3) == ("s3", 3)
    tree = load(EXAMPLES / "fat_tree_k4.yaml")
    assert tree.to_dict() == fat_tree(4, bw=100).to_dict()


def test_explicit_ports_are_reserved(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            hosts: [h1, h2, h3]
            switches: [s1]
            links:
              - [h1, s1]
              - [h2, s1]
              - {nodes: [h3, s1], ports: {s1: 2}}
            """
        )
    )
    topo = load(path)
    # h2 skips port 2 because a later link asks for it by number
    assert [topo.port("s1", h) for h in ("h1", "h2", "h3")] == [1, 3, 2]
    assert topo.name == "p"


YAML_OK = """\
name: t
hosts: [h1, h2]
switches: [s1, s2]
links:
  - [h1, s1]
  - [h2, s2]
  - [s1, s2]
"""

BAD_FILES = [
    # (file name, content, expected message)
    ("missing.yaml", "hosts: [h1]\nswitches: [s1]\n", "missing.yaml: missing field 'links'"),
    (
        "unknown_node.yaml",
        YAML_OK.replace("  - [s1, s2]", "  - [s1, s9]"),
        "unknown_node.yaml:7: links[2].nodes[1]: unknown node 's9'",
    ),
    (
        "dup_name.yaml",
        "hosts: [h1, h2]\nswitches:\n  - s1\n  - h2\nlinks: []\n",
        "dup_name.yaml:4: switches[1].name: duplicate node name 'h2' (first at hosts[1])",
    ),
    (
        "dup_name_map.yaml",
        "hosts:\n  - name: h1\n  - name: h1\nswitches: []\nlinks: []\n",
        "dup_name_map.yaml:3: hosts[1].name: duplicate node name 'h1' (first at hosts[0])",
    ),
    (
        "bad_bw.yaml",
        YAML_OK.replace("  - [s1, s2]", "  - nodes: [s1, s2]\n    bw: -5"),
        "bad_bw.yaml:8: links[2].bw: must be a positive number of Mbit/s, got -5",
    ),
    (
        "bad_bw_str.yaml",
        YAML_OK.replace("  - [s1, s2]", "  - {nodes: [s1, s2], bw: fast}"),
        "bad_bw_str.yaml:7: links[2].bw: must be a number of Mbit/s, got 'fast'",
    ),
    (
        "bad_default_bw.yaml",
        "bw: 0\n" + YAML_OK,
        "bad_default_bw.yaml:1: bw: must be a positive number of Mbit/s, got 0",
    ),
    (
        "unknown_builder.yaml",
        "# comment\nbuilder: torus\nk: 4\n",
        "unknown_builder.yaml:2: builder: unknown builder 'torus' (known: bcube, fat_tree,",
    ),
    (
        "builder_bad_arg.yaml",
        "builder: fat_tree\nk: 5\n",
        "builder_bad_arg.yaml:2: k: must be even, got 5",
    ),
    (
        "builder_unknown_arg.yaml",
        "builder: star\nn: 3\nradix: 4\n",
        "builder_unknown_arg.yaml:3: radix: unknown argument of builder 'star'",
    ),
    (
        "builder_missing_arg.yaml",
        "builder: bcube\nn: 3\n",
        "builder_missing_arg.yaml:1: builder: builder 'bcube' needs argument 'k'",
    ),
    (
        "syntax.yaml",
        "hosts: [h1, h2\nswitches: [s1]\nlinks: []\n",
        "syntax.yaml:2: YAML syntax error: while parsing a flow sequence",
    ),
    (
        "tab.yaml",
        "hosts:\n\t- h1\n",
        "tab.yaml:2: YAML syntax error:",
    ),
    (
        "dup_key.yaml",
        "hosts: [h1]\nswitches: [s1]\nhosts: [h2]\nlinks: []\n",
        "dup_key.yaml:3: duplicate key 'hosts' (first on line 1)",
    ),
    (
        "unknown_field.yaml",
        YAML_OK + "colour: blue\n",
        "unknown_field.yaml:8: colour: unknown field",
    ),
    (
        "link_field.yaml",
        YAML_OK.replace("  - [s1, s2]", "  - {nodes: [s1, s2], capacity: 5}"),
        "link_field.yaml:7: links[2].capacity: unknown field",
    ),
    (
        "link_missing_nodes.yaml",
        YAML_OK.replace("  - [s1, s2]", "  - {bw: 5}"),
        "link_missing_nodes.yaml:7: links[2]: missing field 'nodes'",
    ),
    (
        "link_three.yaml",
        YAML_OK.replace("  - [s1, s2]", "  - [s1, s2, h1]"),
        "link_three.yaml:7: links[2].nodes: must list exactly two node names",
    ),
    (
        "port_clash.yaml",
        YAML_OK.replace("  - [h2, s2]", "  - {nodes: [h2, s2], ports: {s2: 4}}").replace(
            "  - [s1, s2]", "  - {nodes: [s1, s2], ports: {s2: 4}}"
        ),
        "port_clash.yaml:7: links[2].ports.s2: port 4 of 's2' is already used by links[1]",
    ),
    (
        "port_foreign.yaml",
        YAML_OK.replace("  - [s1, s2]", "  - {nodes: [s1, s2], ports: {h1: 1}}"),
        "port_foreign.yaml:7: links[2].ports.h1: 'h1' is not an end of this link",
    ),
    (
        "cpu_port.yaml",
        YAML_OK.replace("  - [s1, s2]", "  - {nodes: [s1, s2], ports: {s1: 255}}"),
        "cpu_port.yaml:7: links[2]: switch 's1': port 255 outside 1..510 or is the CPU port",
    ),
    (
        "host_gap.yaml",
        YAML_OK.replace("  - [h2, s2]", "  - {nodes: [h2, s2], ports: {h2: 1}}"),
        "host_gap.yaml:2: hosts[1]: host 'h2' has no NIC 0 but a higher one",
    ),
    (
        "host_host.yaml",
        YAML_OK.replace("  - [s1, s2]", "  - [h1, h2]"),
        "host_host.yaml:7: links[2]: link 'h1'-'h2' joins two hosts",
    ),
    (
        "dup_link.yaml",
        YAML_OK + "  - [s2, s1]\n",
        "dup_link.yaml:8: links[3]: duplicate link 's2'-'s1'",
    ),
    (
        "lonely_host.yaml",
        YAML_OK.replace("hosts: [h1, h2]", "hosts: [h1, h2, h3]"),
        "lonely_host.yaml:2: hosts[2]: host 'h3' has no link",
    ),
    (
        "bad_ip.yaml",
        YAML_OK.replace("hosts: [h1, h2]", "hosts: [h1, {name: h2, ip: 10.0.0.300}]"),
        "bad_ip.yaml:2: hosts[1]: host h2 ip[0]: invalid IPv4 address '10.0.0.300'",
    ),
    (
        "dup_ip.yaml",
        YAML_OK.replace("hosts: [h1, h2]", "hosts: [h1, {name: h2, ip: 10.0.0.1}]"),
        "dup_ip.yaml:6: links[1]: address 10.0.0.1 of h2-eth0 is already used by h1-eth0",
    ),
    (
        "too_many_ips.yaml",
        YAML_OK.replace("hosts: [h1, h2]", "hosts: [h1, {name: h2, ip: [10.0.0.7, 10.1.0.7]}]"),
        "too_many_ips.yaml:2: hosts[1].ip: 2 addresses for 1 NIC(s)",
    ),
    (
        "bad_name.yaml",
        YAML_OK.replace("switches: [s1, s2]", "switches: [s1, s2, 7]"),
        "bad_name.yaml:3: switches[2]: must be a name or a mapping with 'name', got 7",
    ),
    (
        "reserved.yaml",
        YAML_OK.replace("switches: [s1, s2]", "switches: [s1, {name: s2, attrs: {kind: x}}]"),
        "reserved.yaml:3: switches[1].attrs.kind: reserved attribute name",
    ),
    (
        "reserved_arg.yaml",
        YAML_OK.replace(
            "hosts: [h1, h2]", "hosts:\n  - h1\n  - name: h2\n    attrs:\n      name: x"
        ),
        "reserved_arg.yaml:6: hosts[1].attrs.name: reserved attribute name",
    ),
    ("empty.yaml", "# nothing\n", "empty.yaml: topology file is empty"),
    ("list.yaml", "- h1\n", "list.yaml: top level must be a mapping, got list"),
    (
        "links_not_list.yaml",
        "hosts: [h1]\nswitches: [s1]\nlinks: {a: b}\n",
        "links_not_list.yaml:3: links: must be a list, got dict",
    ),
    (
        "syntax.json",
        '{"hosts": ["h1"],\n "switches": ["s1"]\n "links": []}\n',
        "syntax.json:3: JSON syntax error: Expecting ',' delimiter",
    ),
    (
        "unknown_node.json",
        '{"hosts": ["h1"],\n "switches": ["s1"],\n "links": [\n  ["h1", "s2"]\n ]}\n',
        "unknown_node.json:4: links[0].nodes[1]: unknown node 's2'",
    ),
    (
        "dup_key.json",
        '{"hosts": ["h1"], "hosts": ["h2"], "switches": [], "links": []}',
        "dup_key.json: duplicate key 'hosts'",
    ),
    (
        "builder.json",
        '{"builder": "fat_tree",\n "k": 4,\n "bw": "x"}',
        "builder.json:3: bw: must be a number of Mbit/s, got 'x'",
    ),
]


@pytest.mark.parametrize(("name", "content", "message"), BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_bad_files(tmp_path: Path, name: str, content: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(TopologyError) as info:
        load(path)
    text = str(info.value)
    assert text.startswith(str(tmp_path) + "/")
    assert message in text, text
    assert info.value.source == str(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TopologyError, match="cannot read topology file"):
        load(tmp_path / "nope.yaml")


def test_error_attributes(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(YAML_OK.replace("  - [s1, s2]", "  - [s1, s9]"))
    with pytest.raises(TopologyError) as info:
        load(path)
    err = info.value
    assert isinstance(err, ValueError)
    assert (err.field, err.line, err.reason) == ("links[2].nodes[1]", 7, "unknown node 's9'")


# ----------------------------------------------------------------------------- Mininet


@pytest.mark.parametrize(
    "topo", [fat_tree(4), bcube(3, 2), load(EXAMPLES / "dumbbell.yaml")], ids=lambda t: t.name
)
def test_to_mininet(topo: Topology) -> None:
    from mininet.link import Link, TCLink

    mn = topo.to_mininet()
    assert set(mn.hosts()) == set(topo.hosts())
    assert set(mn.switches()) == set(topo.switches())
    infos = mn.links(withInfo=True)
    assert len(infos) == topo.graph.number_of_edges()
    link_sig = inspect.signature(Link.__init__)
    for a, b, info in infos:
        # What Mininet.addLink will hand to the link class must bind to Link.__init__
        # without a duplicate interface argument (Link itself passes name/node/link/mac).
        options = {k: v for k, v in info.items() if k not in ("node1", "node2", "cls")}
        link_sig.bind(None, a, b, **options)
        for side in ("params1", "params2"):
            assert not {"mac", "name", "node", "link"} & set(info.get(side, {}))
        assert info["port1"] == topo.port(a, b) and info["port2"] == topo.port(b, a)
        assert mn.port(a, b) == (topo.port(a, b), topo.port(b, a))
        assert info["bw"] == topo.capacity(a, b)
        assert info["cls"] is TCLink
        for side, node, port in ((1, a, info["port1"]), (2, b, info["port2"])):
            if topo.is_host(node):
                iface = topo.iface(node, port)
                assert info[f"params{side}"] == {"ip": f"{iface['ip']}/{iface['prefix']}"}
                assert info[f"addr{side}"] == iface["mac"]
            else:
                assert f"params{side}" not in info and f"addr{side}" not in info
    for host in topo.hosts():
        opts = mn.nodeInfo(host)
        assert opts["ip"] == f"{topo.host_ip(host)}/8"
        assert opts["mac"] == topo.host_mac(host)
        assert not mn.isSwitch(host)
    for sw in topo.switches():
        opts = mn.nodeInfo(sw)
        assert mn.isSwitch(sw)
        assert opts["device_id"] == topo.device_id(sw)
        assert int(opts["dpid"], 16) == topo.device_id(sw)
        assert opts["grpc_port"] == topo.node(sw)["grpc_port"]
    # port numbers per node are unique on the Mininet side as well
    for node in topo.graph.nodes:
        ports = [mn.port(node, nbr)[0] for nbr in topo.graph[node]]
        assert len(ports) == len(set(ports))


def test_to_mininet_classes() -> None:
    class MySwitch:  # stands in for the P4 switch class; never instantiated here
        pass

    mn = star(2).to_mininet(switch_cls=MySwitch, limit_bw=False)
    assert mn.nodeInfo("s1")["cls"] is MySwitch
    _, _, info = mn.links(withInfo=True)[0]
    assert "bw" not in info and "cls" not in info
