"""The NDN PS's baselines end to end: IP multicast and TCP through forward.p4.

One leaf-spine network (2 spines, 2 leaves, 3 hosts each; embedded target unless TARGET
says otherwise). PS h1 shares its leaf with h2 and h3; h4..h6 are on the other leaf, so
an update crosses one spine and the controller's multicast tree replicates it at both
leaves. Every test checks every GPU's parameters bit for bit against the PS's and the
PS's against an independent replay of the training, as the NDN tests do.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from experiments.ndn import loss_on_gpu_link, run_scheme
from tests.netenv import started_network
from topologies import leaf_spine

pytestmark = [pytest.mark.net, pytest.mark.slow]


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[object, object, Path]]:
    with started_network(tmp_path_factory, "ndn_base_net",
                         leaf_spine(2, 2, 3, bw=20), "forward") as n:
        yield n


def test_ip_multicast_sends_each_update_once_and_repairs_loss(net) -> None:  # noqa: ANN001
    """IP multicast: the PS sends every update segment once (to the group), the switches
    replicate it to both leaves, a busy GPU declines and gets nothing, the GPU behind a
    20 % lossy link fetches the segments it lost by unicast after its probe timer, and
    every GPU ends bit-exact."""
    network, topo, out = net
    gpus = ["h2", "h4", "h5", "h6"]
    res = run_scheme(network, topo, out / "ipmc", "ipmc", loss_on_gpu_link(topo, "h4", 0.20), ps="h1",
                     gpus=gpus, busy=("h6",), rounds=4, compute_time=0.1, max_time=60)
    assert res.exact, res.problems
    nseg = res.ps["segments"]
    assert res.ps["tx_packets_by_kind"]["distribute"] == 4 * nseg          # once per update
    lossy = res.gpus["h4"]
    assert lossy["updates_recovered_by_probe"] >= 1       # P(no loss in 44 segments) ~ 1e-4
    assert lossy["updates_recovered_by_probe"] + lossy["updates_via_distribute"] == 4
    for g in ("h2", "h5"):
        assert res.gpus[g]["updates_via_distribute"] == 4, res.gpus[g]
    assert res.gpus["h6"]["gradients_sent"] == 0
    # the tree reaches the members only: h5 got every update from its leaf, the busy h6
    # (no member) got no copy (only its assignment and nothing else)
    leaf2 = topo.iface("h5")["switch"]
    assert res.link_bytes[f"{leaf2}->h5"] > 4 * nseg * 1000, res.link_bytes
    assert res.link_bytes.get(f"{leaf2}->h6", 0) < nseg * 1000, res.link_bytes
    assert res.round_seconds_incl is not None


def test_tcp_ps_sends_each_update_once_per_gpu_under_loss(net) -> None:  # noqa: ANN001
    """TCP: one connection per GPU, every update once per GPU; 5 % loss toward one GPU is
    repaired by TCP alone (no application retransmission or probe), bit-exact."""
    network, topo, out = net
    gpus = ["h2", "h4", "h5"]
    res = run_scheme(network, topo, out / "tcp", "tcp", loss_on_gpu_link(topo, "h4", 0.05), ps="h1",
                     gpus=gpus, rounds=3, compute_time=0.1, max_time=60)
    assert res.exact, res.problems
    assert res.ps["tx_packets_by_kind"]["distribute"] == 3 * 3 * res.ps["segments"]
    assert res.ps["retransmissions"] == 0 and res.probe_recoveries == 0
    assert all(g["updates_via_distribute"] == 3 for g in res.gpus.values())
    assert res.fabric_bytes > 0 and res.round_seconds_incl is not None
