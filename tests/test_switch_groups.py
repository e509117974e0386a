"""Embedded switches served by shared processes (targets.launch.SwitchGroup) behave like
switches with a process each: every pair of hosts reaches every other across switches of
different groups, each switch answers P4Runtime on its own socket, and the CPU account
counts a shared process once."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.deploy import deploy
from experiments.accounting import Snapshot
from tests.netenv import TARGET, net_skip_reason
from tests.test_deploy import unreachable_pairs
from topologies import leaf_spine

reason = net_skip_reason("forward")
pytestmark = [pytest.mark.net,
              pytest.mark.skipif(reason is not None or TARGET == "bmv2",
                                 reason=reason or "BMv2 runs one process per switch")]


@pytest.mark.parametrize("processes", [0, 2])
def test_groups_forward_and_account_once(tmp_path: Path, processes: int) -> None:
    from topologies.network import Network

    topo = leaf_spine(2, 3, 1)
    with Network(topo, target="embedded", run_dir=str(tmp_path), limit_bw=False,
                 switch_processes=processes) as net:
        pids = {sw.name: sw.proc.pid for sw in net.net.switches}
        assert len(set(pids.values())) == (2 if processes else len(pids))
        deploy(topo, net.grpc_addresses())  # one P4Runtime server per switch
        assert unreachable_pairs(net, topo) == []
        snap = Snapshot.take(net)
        if processes:
            assert sorted(snap.cpu) == ["switches-1", "switches-2"]
            assert (tmp_path / "switches-1.json").exists()
        else:
            assert sorted(snap.cpu) == sorted(pids)
    for pid in pids.values():  # every switch process is gone after the network
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
