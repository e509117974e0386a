"""Shared checks of the topology tests (``test_topologies_*.py``): every builder, and the
port and address invariants each topology must keep.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

import topologies
from topologies import (
    Topology,
    bcube,
    fat_tree,
    leaf_spine,
    linear,
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
