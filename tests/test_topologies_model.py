"""Tests of the topology model API (lookups, manual construction, names), the dict round
trip and the Mininet export.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

import topologies
from tests.topology_checks import EXAMPLES, all_builders
from topologies import (
    Topology,
    TopologyError,
    bcube,
    fat_tree,
    load,
    star,
)
from topologies.base import CPU_PORT

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
