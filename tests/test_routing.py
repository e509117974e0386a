"""Unit tests of controller.routing (route tables, ECMP groups, port MACs) and of the
``gradctl`` commands that need no running network."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

from controller.cli import main
from controller.routing import (
    RoutingError,
    SwitchRoutes,
    compute_routes,
    port_mac,
    port_macs,
    switch_routes,
)
from topologies import Topology, bcube, fat_tree, leaf_spine, linear, star
from topologies.spec import SpecError as UsageError
from topologies.spec import parse_topology

REPO = Path(__file__).resolve().parent.parent


def nics(topo: Topology) -> list[tuple[str, int, dict]]:
    return [(h, n, i) for h in topo.hosts() for n, i in enumerate(topo.node(h)["ifaces"])]


def check_shortest_paths(topo: Topology, routes: dict[str, SwitchRoutes]) -> None:
    """Every route's next hops are exactly the neighbours on shortest switch paths."""
    sgraph = topo.graph.subgraph(topo.switches())
    dist = {t: nx.single_source_shortest_path_length(sgraph, t) for t in topo.switches()}
    for s, sr in routes.items():
        reached = {r.ip for r in sr.routes}
        assert reached.isdisjoint(sr.unreachable)
        for host, nic, iface in nics(topo):
            t = iface["switch"]
            if s not in dist[t]:
                assert iface["ip"] in sr.unreachable
                continue
            hops = sr.next_hops(iface["ip"])
            r = sr.route(iface["ip"])
            assert r.host == host and r.nic == nic and r.distance == dist[t][s]
            if s == t:
                assert r.direct
                assert [(h.port, h.dmac, h.peer) for h in hops] == [
                    (topo.port(s, host), iface["mac"], host)
                ]
                continue
            expected = sorted(
                topo.port(s, n) for n in topo.graph[s] if topo.is_switch(n)
                and dist[t].get(n) == dist[t][s] - 1
            )
            assert [h.port for h in hops] == expected  # all of them, ordered by port
            for h in hops:
                peer, peer_port = topo.peer(s, h.port)
                assert (h.peer, h.peer_port) == (peer, peer_port)
                assert h.dmac == port_mac(topo.device_id(peer), peer_port)
            assert r.is_ecmp == (len(hops) > 1)


# ----------------------------------------------------------------------------- routes


def test_star_routes_are_direct() -> None:
    topo = star(4)
    sr = switch_routes(topo, "s1")
    assert [(r.ip, r.next_hop.port, r.next_hop.dmac) for r in sr.routes] == [
        (f"10.0.0.{i}", i, f"00:00:0a:00:00:{i:02x}") for i in range(1, 5)
    ]
    assert all(r.direct and r.distance == 0 for r in sr.routes)
    assert sr.groups == [] and sr.unreachable == []
    assert sr.port_macs == {p: port_mac(1, p) for p in range(1, 5)}


def test_linear_routes_follow_the_chain() -> None:
    topo = linear(3)
    routes = compute_routes(topo)
    assert list(routes) == ["s1", "s2", "s3"]
    s1 = routes["s1"]
    to_h3 = s1.route("10.0.0.3")
    # s1 reaches s2 on its port 2; s2's port towards s1 is 2 (host on 1, s1 first).
    assert to_h3.next_hop.port == topo.port("s1", "s2")
    assert to_h3.next_hop.peer == "s2"
    assert to_h3.next_hop.dmac == port_mac(2, topo.port("s2", "s1"))
    assert to_h3.distance == 2
    assert routes["s2"].route("10.0.0.1").next_hop.peer == "s1"
    assert routes["s2"].route("10.0.0.3").next_hop.peer == "s3"
    check_shortest_paths(topo, routes)


@pytest.mark.parametrize("k", [4, 8])
def test_fat_tree_routes(k: int) -> None:
    topo = fat_tree(k)
    routes = compute_routes(topo)
    hosts = topo.hosts()
    assert len(routes) == 5 * k * k // 4
    for sr in routes.values():
        assert len(sr.routes) == len(hosts)  # a route for every host on every switch
        assert sr.unreachable == []
    check_shortest_paths(topo, routes)

    half = k // 2
    pod = {h: topo.node(h)["pod"] for h in hosts}
    for s in topo.switches("edge"):
        sr = routes[s]
        for h in hosts:
            hops = sr.next_hops(topo.host_ip(h))
            if topo.host_ip(h) in {topo.host_ip(x) for x in topo.graph[s] if topo.is_host(x)}:
                assert len(hops) == 1
            else:  # other edge or other pod: every agg of the pod
                assert len(hops) == half
                assert {x.peer for x in hops} == set(topo.switches("agg")) & set(topo.graph[s])
    for s in topo.switches("agg"):
        sr = routes[s]
        for h in hosts:
            hops = sr.next_hops(topo.host_ip(h))
            assert len(hops) == (1 if pod[h] == topo.node(s)["pod"] else half)
        # All other pods share one group (same member set): k/2 core uplinks.
        assert [g.size for g in sr.groups] == [half]
    for s in topo.switches("core"):
        assert routes[s].groups == []


def test_ecmp_group_ids_are_deterministic_and_dense() -> None:
    topo = leaf_spine(3, 4, 2)
    a, b = compute_routes(topo), compute_routes(leaf_spine(3, 4, 2))
    assert a == b
    for sr in a.values():
        assert [g.group_id for g in sr.groups] == list(range(1, len(sr.groups) + 1))
        for g in sr.groups:
            assert [m.port for m in g.members] == sorted(m.port for m in g.members)
    leaf = a["s4"]
    assert len(leaf.groups) == 1 and leaf.groups[0].size == 3  # every spine
    assert {m.peer for m in leaf.groups[0].members} == {"s1", "s2", "s3"}


def test_bcube_routes_stay_on_one_level() -> None:
    topo = bcube(4, 2)
    routes = compute_routes(topo)
    check_shortest_paths(topo, routes)
    for s, sr in routes.items():
        level = topo.node(s)["level"]
        attached = sorted((x for x in topo.graph[s] if topo.is_host(x)),
                          key=lambda h: topo.node(h)["index"])
        # One hop only: the switch's own servers, on the NIC of its level.
        assert [(r.host, r.nic) for r in sr.routes] == [(h, level) for h in attached]
        assert all(r.direct for r in sr.routes)
        assert len(sr.unreachable) == 2 * 16 - 4
    # h1's level-1 NIC is reached through the level-1 switch it hangs off.
    s = topo.iface("h1", 1)["switch"]
    assert routes[s].route(topo.host_ip("h1", 1)).next_hop.peer_port == 1


def test_select_switches() -> None:
    topo = fat_tree(4)
    sub = compute_routes(topo, ["s7", "s1"])
    assert list(sub) == ["s7", "s1"]
    assert sub["s7"] == compute_routes(topo)["s7"]
    assert list(compute_routes(topo, "s3")) == ["s3"]


def test_route_lookup_errors() -> None:
    sr = switch_routes(star(2), "s1")
    with pytest.raises(RoutingError, match="no route to '10.9.9.9'"):
        sr.route("10.9.9.9")
    with pytest.raises(RoutingError, match="no ECMP group 3"):
        sr.group(3)
    assert "10.0.0.2/32" in sr.summary()


# ----------------------------------------------------------------------------- MACs


def test_port_mac_plan() -> None:
    assert port_mac(1, 1) == "02:00:00:01:00:01"
    assert port_mac(0x1234, 0x1FF) == "02:00:12:34:01:ff"
    topo = fat_tree(8)
    macs = [m for s in topo.switches() for m in port_macs(topo, s).values()]
    assert len(macs) == len(set(macs)) == sum(len(topo.ports(s)) for s in topo.switches())
    host_macs = {i["mac"] for _, _, i in nics(topo)}
    assert host_macs.isdisjoint(macs)
    for m in macs:
        first = int(m.split(":")[0], 16)
        assert first & 0x02 and not first & 0x01  # locally administered, unicast


@pytest.mark.parametrize(("dev", "port"), [(-1, 1), (1 << 16, 1), (1, 1 << 16), ("1", 1), (True, 1)])
def test_port_mac_rejects_bad_values(dev: object, port: object) -> None:
    with pytest.raises(RoutingError, match="must be an int in 0..65535"):
        port_mac(dev, port)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- bad input


def test_unknown_and_wrong_names() -> None:
    topo = fat_tree(4)
    with pytest.raises(RoutingError, match=r"unknown switch 's99' \(switches: s1, .*s20\)"):
        compute_routes(topo, ["s99"])
    with pytest.raises(RoutingError, match="'h1' is a host, not a switch"):
        switch_routes(topo, "h1")
    with pytest.raises(RoutingError, match="unknown switch 3"):
        compute_routes(topo, [3])  # type: ignore[list-item]
    with pytest.raises(RoutingError, match="expected a topologies.Topology"):
        compute_routes(nx.Graph())  # type: ignore[arg-type]


def test_disconnected_topology() -> None:
    topo = Topology("islands")
    for s in ("s1", "s2"):
        topo.add_switch(s)
    for h, s in (("h1", "s1"), ("h2", "s2")):
        topo.add_host(h)
        topo.add_link(h, s)
    with pytest.raises(RoutingError, match=r"'islands' is disconnected: 2 components: \{s1, h1\}; \{s2, h2\}"):
        compute_routes(topo)


def test_topology_without_switches_or_hosts() -> None:
    with pytest.raises(RoutingError, match="has no switches"):
        compute_routes(Topology("empty"))
    topo = Topology("lonely")
    topo.add_switch("s1")
    with pytest.raises(RoutingError, match="invalid topology 'lonely': topology has no hosts"):
        compute_routes(topo)


def test_routes_scale() -> None:
    routes = compute_routes(fat_tree(12))
    assert all(len(sr.routes) == 432 for sr in routes.values())


# ----------------------------------------------------------------------------- TOPO specs


@pytest.mark.parametrize(
    ("spec", "hosts", "switches"),
    [
        ("fat-tree:4", 16, 20),
        ("fat_tree:2", 2, 5),
        ("leaf-spine:2,4,2", 8, 6),
        ("bcube:4,2", 16, 8),
        ("star:4", 4, 1),
        ("linear:3", 3, 3),
        ("linear:3,2", 6, 3),
        ("linear:n=2,hosts_per_switch=3,bw=10", 6, 2),
        ("topologies/examples/dumbbell.yaml", 4, 2),
    ],
)
def test_parse_topology(spec: str, hosts: int, switches: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    topo = parse_topology(spec)
    assert (len(topo.hosts()), len(topo.switches())) == (hosts, switches)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("torus:3", "unknown topology 'torus:3'"),
        ("fat-tree", "missing k"),
        ("fat-tree:3", "must be even"),
        ("fat-tree:x", "'x' is not a number"),
        ("star:2,3,4", "too many arguments"),
        ("star:2,colour=3", "star has no argument 'colour'"),
        ("star:2,n=3", "n given twice"),
        ("linear:n=2,3", "positional argument after keyword"),
        ("missing.yaml", "topology file 'missing.yaml' not found"),
    ],
)
def test_parse_topology_errors(spec: str, message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        parse_topology(spec)


# ----------------------------------------------------------------------------- CLI


def gradctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", *args],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )


def test_cli_topo_show() -> None:
    r = gradctl("topo", "show", "fat-tree:4")
    assert r.returncode == 0, r.stderr
    assert "fat_tree-k4: 16 hosts, 20 switches, 48 links" in r.stdout
    assert re.search(r"s20\s+switch\s+edge\s+20\s+4 ports", r.stdout)
    assert re.search(r"h16\s+host\s+host\s+16\s+eth0=10.0.0.16/8@s20", r.stdout)


def test_cli_routes() -> None:
    r = gradctl("routes", "fat-tree:4", "--switch", "s7", "-s", "s1")
    assert r.returncode == 0, r.stderr
    assert "s7 (device 7): 16 routes, 1 ECMP groups" in r.stdout
    assert "s1 (device 1): 16 routes, 0 ECMP groups" in r.stdout
    assert re.search(r"10\.0\.0\.16/32\s+h16-eth0\s+4\s+ecmp group 1 \(2\)\s+3->s5, 4->s6", r.stdout)
    assert re.search(r"10\.0\.0\.1/32\s+h1-eth0\s+0\s+direct\s+1->h1", r.stdout)
    r = gradctl("routes", "star:2", "--json")
    assert r.returncode == 0, r.stderr
    assert '"dmac": "00:00:0a:00:00:02"' in r.stdout


def run_main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``gradctl`` in-process (fast); argparse's exits become return codes."""
    try:
        rc = main(args)
    except SystemExit as e:
        rc = int(e.code or 0)
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_bad_input_subprocess() -> None:
    r = gradctl("topo", "show", "torus:4")
    assert r.returncode == 2
    assert r.stderr.startswith("gradctl: error: unknown topology 'torus:4'")
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["routes", "fat-tree:4", "-s", "s99"], "unknown switch 's99'"),
        (["routes", "fat-tree:5"], "topology 'fat-tree:5': k: must be even"),
        (["deploy", "star:2", "--run-dir", "/nonexistent-gradnet"],
         "run directory '/nonexistent-gradnet' does not exist"),
        (["deploy", "star:2", "--run-dir", "/tmp", "--loss", "s1=0.5"], "bad loss spec 's1=0.5'"),
        (["deploy", "star:2", "--run-dir", "/tmp", "--dscp", "x"], "bad --dscp 'x'"),
        (["deploy", "star:2", "--addresses", "/nonexistent.yaml"], "cannot read address file"),
        (["counters", "star:2", "--run-dir", "/tmp"], "run directory '/tmp' has no P4Runtime socket for s1"),
    ],
)
def test_cli_bad_input(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_main(args, capsys)
    assert rc == 2
    assert f"gradctl: error: {message}" in err


@pytest.mark.parametrize(
    "args", [[], ["topo"], ["topo", "show"], ["routes"], ["deploy"], ["counters"]]
)
def test_cli_help(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_main([*args, "--help"], capsys)
    assert rc == 0 and "usage: gradctl" in out
    rc, _, err = run_main(args, capsys)
    assert rc == 2 and "error:" in err  # missing arguments


def test_loopback_paths_pin_one_equal_cost_hop() -> None:
    """A pinned loopback route takes the named neighbour; everything else keeps ECMP;
    a pin off the shortest paths is refused."""
    topo = fat_tree(4)
    sd = topo.iface("h1")["switch"]
    plain = compute_routes(topo, loopbacks={sd: "10.255.0.7"})
    far = next(s for s, sr in plain.items() if s != sd and sr.route("10.255.0.7").is_ecmp)
    hops = plain[far].next_hops("10.255.0.7")
    pin = hops[-1].peer
    pinned = compute_routes(topo, loopbacks={sd: "10.255.0.7"}, loopback_paths={sd: {far: pin}})
    r = pinned[far].route("10.255.0.7")
    assert not r.is_ecmp and r.next_hop == hops[-1] and r.distance == plain[far].route("10.255.0.7").distance
    assert pinned[far].route("10.0.0.1").is_ecmp  # the PS host behind s_d: still ECMP
    other = next(s for s in plain if s not in (far, sd) and plain[s].route("10.255.0.7").is_ecmp)
    assert pinned[other].route("10.255.0.7").is_ecmp
    u, wrong = next((u, n) for u in plain if u != sd for n in topo.graph[u]
                    if topo.is_switch(n)
                    and n not in {h.peer for h in plain[u].next_hops("10.255.0.7")})
    with pytest.raises(RoutingError, match="not a neighbour on a shortest path"):
        compute_routes(topo, loopbacks={sd: "10.255.0.7"}, loopback_paths={sd: {u: wrong}})


def test_ina_routes_to_aggregators_follow_the_lp_paths() -> None:
    """Every switch's route to an aggregating switch's address walks the path the
    placement LP counted its link loads on (so the measured busiest link is the LP's)."""
    from controller.ina import InaDeployment, InaJob, switch_ip

    topo = fat_tree(4)
    workers = [f"h{i}" for i in range(2, 17)]
    job = InaJob.plan(topo, "h1", workers, 2, 1000.0, 4096)
    dep = InaDeployment(topo, {}, [job])
    loops = {s: switch_ip(topo.device_id(s)) for s in dep.aggregators}
    routes = compute_routes(topo, loopbacks=loops, loopback_paths=dep.loopback_paths())
    prob = job.placement.problem
    for t, ip in loops.items():
        for w in workers:
            path = prob.path(w, t)
            walked = [path[1]]
            while walked[-1] != t:
                r = routes[walked[-1]].route(ip)
                assert not r.is_ecmp
                walked.append(r.next_hop.peer)
            assert walked == path[1:], (w, t)
