"""BML on live BCubes of P4 switches, and the fat-tree baselines: exact sums end to end.

Every test starts its own emulated network (embedded target unless TARGET says
otherwise), deploys ``forward.p4``, runs one agent process per server in the Mininet
hosts over the kernel's TCP, and checks every element of every server's result against
the exact fixed-point sum of all servers' gradients.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from controller.bcube import (
    baseline_fat_tree,
    baseline_rails,
    bcube_network_topology,
    bcube_plan,
    choose_scale_bits,
    fat_tree_plan,
    gradients,
    line_rate_model,
    rail_plan,
)
from controller.deploy import deploy, read_counters
from experiments.runner import prepare_hosts
from experiments.schemes import run_scheme
from tests.netenv import net_skip_reason
from wire.bcube_schedule import BcubeSchedule

ROOT = Path(__file__).resolve().parent.parent
BW = 20.0  # Mbit/s: fast enough for short tests; speed belongs to the bench

pytestmark = [pytest.mark.net, pytest.mark.slow]


@pytest.fixture(autouse=True)
def _needs_network() -> None:
    reason = net_skip_reason("forward")
    if reason:
        pytest.skip(reason)


def _one_hop_pings(net, topo, sched: BcubeSchedule) -> None:  # noqa: ANN001
    """Every server reaches each peer of each level from that level's NIC, through one
    switch (TTL 64 - 1), and does not reach a server on another switch of the level."""
    for s in range(sched.servers):
        host = f"h{s + 1}"
        cmds = []
        for lvl in range(sched.k):
            src = topo.host_ip(host, lvl)
            cmds += [f"ping -c1 -W2 -I {src} {topo.host_ip(f'h{p + 1}', lvl)}"
                     for p in sched.peers(s, lvl) if p != s]
        out = net.host(host).cmd("; ".join(cmds))
        ttls = re.findall(r"ttl=(\d+)", out)
        assert ttls == ["63"] * len(cmds), f"{host}: {out}"
    # server 0 and the last server share no switch: no path on any level
    last = f"h{sched.servers}"
    out = net.host("h1").cmd(f"ping -c1 -W1 -I {topo.host_ip('h1', 0)} {topo.host_ip(last, 0)}")
    assert "100% packet loss" in out


@pytest.mark.parametrize(("n", "k"), [(2, 2), pytest.param(3, 2, marks=pytest.mark.long),
                                       pytest.param(2, 3, marks=pytest.mark.long)])
def test_bml_exact_sums_one_hop_and_loss(n: int, k: int, tmp_path: Path) -> None:
    from topologies.network import Network

    topo = bcube_network_topology(n, k, BW)
    sched = BcubeSchedule(n, k, 1)
    with Network(topo, run_dir=str(tmp_path / "net")) as net:
        deploy(topo, net.grpc_addresses())
        prepare_hosts(net, topo.hosts())
        _one_hop_pings(net, topo, sched)

        def no_route() -> int:
            counters = read_counters(topo, net.grpc_addresses())
            return sum(c["ingress_drops"].get("no_route", 0) for c in counters.values())

        unroutable = no_route()
        assert unroutable >= 1  # the ping to a server on another switch died there

        # the specified k threads exactly (no pipelining), no loss
        grads = gradients(sched.servers, 12_000 + n, seed=n * 10 + k)
        plan = bcube_plan(topo, n, k, grads[0].size, choose_scale_bits(grads))
        res = run_scheme(net, topo, plan, grads, tmp_path / "clean", BW, max_time=120)
        assert res.exact, f"{res.mismatches} elements differ from the exact sum"
        # every byte the servers sent entered exactly one switch port: one hop each
        assert res.switch_hops == pytest.approx(1.0, abs=1e-3)
        for rep in res.reports:  # every level's NIC carried its share
            assert all(v > 0 for v in rep["tx_payload"].values())
            assert len(rep["tx_payload"]) == k
        assert no_route() == unroutable  # no BML packet met a switch without a route

        # 5% loss on one link of every level (towards that switch's first server)
        lossy = {}
        for lvl in range(k):
            sw = next(s for s in topo.switches() if topo.node(s)["level"] == lvl)
            lossy[sw, 1] = 0.05
        deploy(topo, net.grpc_addresses(), loss=lossy)
        grads = gradients(sched.servers, 65_536, seed=n * 10 + k + 1)
        plan = bcube_plan(topo, n, k, grads[0].size, choose_scale_bits(grads), pipeline=2)
        res = run_scheme(net, topo, plan, grads, tmp_path / "loss", BW, max_time=120)
        assert res.exact, f"{res.mismatches} elements differ from the exact sum under loss"
        counters = read_counters(topo, net.grpc_addresses())
        for sw, port in lossy:
            assert counters[sw]["link_drops"][port] > 0, f"no loss happened on {sw}:{port}"
        assert res.switch_hops == pytest.approx(1.0, abs=1e-3)


@pytest.mark.long  # the same ring / sharded-PS code runs per rail in test_rail_baselines_...
def test_baselines_exact_sums_on_fat_tree(tmp_path: Path) -> None:
    from topologies.network import Network

    servers = 8
    topo = baseline_fat_tree(servers, BW)
    grads = gradients(servers, 10_001, seed=7)
    bits = choose_scale_bits(grads)
    with Network(topo, run_dir=str(tmp_path / "net")) as net:
        deploy(topo, net.grpc_addresses())
        prepare_hosts(net, topo.hosts()[:servers])
        for scheme in ("sharded_ps", "ring", "ps"):
            plan = fat_tree_plan(topo, scheme, servers, grads[0].size, bits)
            res = run_scheme(net, topo, plan, grads, tmp_path, BW, max_time=120)
            assert res.exact, f"{scheme}: {res.mismatches} elements differ from the exact sum"
            assert res.switch_hops > 1.5  # fat-tree paths cross several switches


def test_rail_baselines_exact_sums_per_rail(tmp_path: Path) -> None:
    """BML's NIC count without BCube: 4 servers with 2 NICs, NIC j in rail j's own
    leaf-spine; k concurrent rings and sharded PSs, one per rail on half the gradient,
    end with the exact sum on every server, and each rail carried its half."""
    from topologies.network import Network

    servers, rails = 4, 2
    topo = baseline_rails(servers, rails, BW)
    grads = gradients(servers, 10_001, seed=23)
    bits = choose_scale_bits(grads)
    with Network(topo, run_dir=str(tmp_path / "net")) as net:
        deploy(topo, net.grpc_addresses())
        prepare_hosts(net, topo.hosts())
        # each NIC reaches its peers' NIC on its own rail (leaf-spine: 1 or 3 switches)
        out = net.host("h1").cmd("; ".join(
            f"ping -c1 -W2 -I {topo.host_ip('h1', j)} {topo.host_ip(h, j)}"
            for j in range(rails) for h in topo.hosts()[1:]))
        assert out.count(" 0% packet loss") == rails * (servers - 1), out
        for scheme in ("rail_ring", "rail_sharded_ps"):
            before = {sw: c for sw, c in _rail_switch_rx(net, topo).items()}
            plan = rail_plan(topo, scheme, servers, grads[0].size, bits, pieces=2)
            assert plan["rails"] == rails
            res = run_scheme(net, topo, plan, grads, tmp_path, BW, max_time=120)
            assert res.exact, f"{scheme}: {res.mismatches} elements differ from the exact sum"
            assert res.model_s == pytest.approx(
                line_rate_model("ring", servers, grads[0].size, BW) / rails, rel=0.01)
            for rep in res.reports:  # both NICs of every server carried about half
                sent = [rep["tx_payload"][str(j)] for j in range(rails)]
                assert min(sent) > 0.9 * max(sent), (scheme, sent)
            after = _rail_switch_rx(net, topo)
            for j in range(rails):  # and the traffic of rail j crossed rail j's switches
                got = sum(after[sw] - before[sw] for sw in topo.switches()
                          if topo.node(sw)["rail"] == j)
                assert got > 0.9 * sum(r["tx_payload"][str(j)] for r in res.reports), (scheme, j)


def _rail_switch_rx(net, topo) -> dict[str, int]:  # noqa: ANN001
    from experiments.schemes import switch_port_bytes

    return switch_port_bytes(net, topo)
