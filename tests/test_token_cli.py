"""``gradctl token``: the LAN's topology and clear errors (no network needed)."""

from __future__ import annotations

import pytest

from controller.cli import main
from controller.token import token_lan
from topologies.base import TopologyError


def test_topology_ports_follow_the_documented_rule() -> None:
    topo = token_lan(3)
    assert topo.switches("nic") == ["nic1", "nic2", "nic3"] and topo.switches("lan") == ["lan"]
    assert [topo.device_id(s) for s in ("nic1", "nic3", "lan")] == [1, 3, 4]
    for i in (1, 2, 3):
        assert topo.port(f"nic{i}", f"h{i}") == 1
        assert topo.port(f"nic{i}", "lan") == 2
        assert topo.port("lan", f"nic{i}") == i
    for bad in (0, 32, "4", True):
        with pytest.raises(TopologyError):
            token_lan(bad)  # type: ignore[arg-type]


def test_gradctl_token_topo_and_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["token", "topo", "--nodes", "2"]) == 0
    out = capsys.readouterr().out
    assert "nic2:2 <-> lan:2" in out and "token_lan-2" in out
    assert main(["token", "topo", "--nodes", "40"]) == 2
    assert "gradctl: error: --nodes" in capsys.readouterr().err
    assert main(["token", "counters", "--nodes", "2", "--run-dir", "/nonexistent-run-dir"]) == 2
    assert "does not exist" in capsys.readouterr().err
