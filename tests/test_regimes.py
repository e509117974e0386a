"""The regime map (sim/regimes.py, bench/regimes_bench.py) and the ideal model against
ns-3 (sim/check_ideal.py): the cell arithmetic on hand-computed values, the networks the
map builds, and, with ns-3 installed, the ideal model held to ns-3 on one small
bandwidth-bound case per scheme and a run of the map's --quick preset."""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys

import pytest

from sim import ns3env
from sim import regimes as rg
from tests.netenv import ROOT

needs_ns3 = pytest.mark.skipif(not ns3env.available(),
                               reason="ns-3 not installed (pip install -e '.[sim]')")


# ----------------------------------------------------------------------------- arithmetic


def test_time_to_target_is_steps_times_compute_plus_sync() -> None:
    """Seeds needing 40, 50 and 60 steps at 2 ms compute + 3 ms sync: 0.20, 0.25, 0.30 s;
    mean 0.25 s, half width t(0.975, 2) x 0.05 / sqrt(3) = 4.303 x 0.02887 = 0.1242 s."""
    iv = rg.time_to_target([40, 50, 60], 0.002, 0.003)
    assert iv.n == 3 and iv.mean == pytest.approx(0.25)
    assert iv.half_width == pytest.approx(0.12421, abs=1e-4)
    # a seed that missed the target is dropped and counted; an unfinished sync has no time
    iv = rg.time_to_target([40, None], 0.002, 0.003)
    assert (iv.n, iv.dropped, iv.mean) == (1, 1, pytest.approx(0.2))
    assert rg.time_to_target([40, 50], 0.002, None).n == 0
    assert rg.step_time(0.002, None) == math.inf and rg.step_time(0.002, 0.003) == 0.005


def test_winner_and_margin_per_step() -> None:
    """ring 5 ms, ina 4 ms, ps 10 ms a step: ina wins by 5/4 = 1.25 over ring; ties go by
    name, so the result does not depend on the dict's order."""
    assert rg.winner({"ring": 0.005, "ina": 0.004, "ps": 0.010}) == ("ina", "ring", pytest.approx(1.25))
    assert rg.winner({"ring": 0.004, "ina": 0.004})[:2] == ("ina", "ring")
    assert rg.winner({"ps": 0.01}) == ("ps", "-", math.inf)


def test_cell_decides_from_sync_sources_and_keeps_them() -> None:
    """A cell with steps 63 and 55, compute 2 ms: ns-3's ps 10 ms (ideal 8 ms), ring 1 ms
    (ns-3), ina unfinished in ns-3, the sharded PS from the ideal bound (0.5 ms): the
    sharded PS wins at 2.5 ms a step, ring second at 3 ms (margin 1.2), ina is out."""
    cell = rg.Cell("digits", 3818, 4, "fat-tree", 1000.0, "fat-tree:4,bw=1000", [63, 55], 0.002)
    cell.schemes = {
        "ps": rg.scheme_cell("ps", {"simulated": True, "sim_s": 0.010, "ideal_s": 0.008}),
        "ina": rg.scheme_cell("ina", {"simulated": True, "sim_s": None, "ideal_s": 0.0009}),
        "ring": rg.scheme_cell("ring", {"simulated": True, "sim_s": 0.001, "ideal_s": 0.0008}),
        "sharded_ps": rg.scheme_cell("sharded_ps", {"simulated": False, "ideal_s": 0.0005}),
    }
    cell.decide()
    assert (cell.winner, cell.runner_up) == ("sharded_ps", "ring")
    assert cell.margin == pytest.approx(0.003 / 0.0025)
    d = cell.as_dict()
    sp, ps = d["schemes"]["sharded_ps"], d["schemes"]["ps"]
    assert (sp["source"], sp["fidelity"]) == ("ideal", "bound")
    assert (ps["source"], ps["fidelity"], ps["x_ideal"]) == ("ns-3", "simulated", pytest.approx(1.25))
    assert ps["time_to_target_s"]["mean"] == pytest.approx((63 + 55) / 2 * 0.012)
    assert d["schemes"]["ina"]["per_step_s"] is None  # unfinished: no time, not the winner
    # no seed reached the target: no winner at all
    missed = rg.Cell("mlp", 1, 4, "fat-tree", 1000.0, "x", [None], 0.002, dict(cell.schemes))
    missed.decide()
    assert missed.winner == "-"


def test_the_networks_hold_the_workers_with_their_oversubscription() -> None:
    from topologies.spec import parse_topology

    assert rg.network_spec("fat-tree", 16, 1000) == "fat-tree:4,bw=1000"
    assert rg.network_spec("fat-tree", 32, 1000) == "fat-tree:6,bw=1000"
    for net, ratio in (("leaf-spine-2:1", 2), ("leaf-spine-4:1", 4)):
        spec = rg.network_spec(net, 32, 10000)
        topo = parse_topology(spec)
        assert len(topo.hosts()) == 32
        leaf = topo.switches("leaf")[0]
        down = sum(topo.graph.edges[leaf, h]["capacity"] for h in topo.graph[leaf] if topo.is_host(h))
        up = sum(topo.graph.edges[leaf, s]["capacity"] for s in topo.switches("spine"))
        assert down / up == pytest.approx(ratio)
    with pytest.raises(ValueError, match="unknown network"):
        rg.network_spec("torus", 4, 1)
    # the cost a simulation grows with: workers x INA fragments of 64 values
    assert rg.sim_cost(4, 3818) == 4 * 60 and rg.sim_cost(31, 126090) == 31 * 1971


def test_the_committed_steps_table_is_the_harness_plan() -> None:
    """The table the map reads agrees with scaling.simulate on one entry (and with the
    harness's documented digits run: 0.90 first reached at step 63 of 84, 4 workers)."""
    table = json.loads(rg.STEPS_FILE.read_text())["steps"]
    assert table["digits"]["4"]["0"] == 63 == rg.steps_to_target("digits", 4, 0)


def test_bad_grid_is_one_line_exit_2(capsys) -> None:
    """Checked where it is parsed, with or without ns-3 (tests/test_bad_options.py: every option)."""
    from bench.regimes_bench import main

    with pytest.raises(SystemExit) as e:
        main(["--models", "resnet", "--out-dir", "/tmp"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and len(err.strip().splitlines()) == 1
    assert "--models: unknown resnet" in err


# ----------------------------------------------------------------------------- with ns-3


@needs_ns3
@pytest.mark.long
def test_ideal_model_holds_to_ns3_where_bandwidth_bound(tmp_path) -> None:
    """One small bandwidth-bound case per scheme (PS, INA, ring, sharded PS on star:5,
    BML on BCube(2,2); 1 Gbit/s, 65,536 values): ns-3's busiest link carries the ideal
    model's bytes within 2 % and its sync time is within 0.95-1.10x the ideal bound."""
    out = tmp_path / "check.json"
    subprocess.run([sys.executable, "-m", "bench.sim_bench", "--check-ideal", "--check-cases",
                    "tight", "--json", str(out)], cwd=ROOT, check=True, capture_output=True,
                   timeout=900)
    rows = json.loads(out.read_text())
    assert sorted(r["scheme"] for r in rows) == ["bml", "ina", "ps", "ring", "sharded_ps"]
    for r in rows:
        assert r["retransmissions"] == 0, r
        assert r["sim_bytes"] == pytest.approx(r["ideal_bytes"], rel=0.02), r
        assert 0.95 <= r["ratio"] <= 1.10, r


@needs_ns3
@pytest.mark.long
def test_quick_regime_map_writes_its_table_and_figure(tmp_path) -> None:
    subprocess.run([sys.executable, "-m", "bench", "regimes", "--quick", "--compute-time",
                    "0.002", "--out-dir", str(tmp_path)], cwd=ROOT, check=True,
                   capture_output=True, timeout=900)
    (root,) = tmp_path.glob("regimes-*")
    cells = json.loads((root / "cells.json").read_text())["cells"]
    assert [(c["network"], c["workers"]) for c in cells] == [("fat-tree", 4), ("leaf-spine-4:1", 4)]
    for c in cells:
        assert c["winner"] in rg.SCHEMES and c["margin"] >= 1.0
        for s in c["schemes"].values():
            assert s["source"] == "ns-3" and s["sync_s"] >= 0.95 * s["ideal_s"]
            assert s["per_step_s"] == pytest.approx(0.002 + s["sync_s"])
    with (root / "cells.csv").open() as f:
        assert len(list(csv.DictReader(f))) == 2 * len(rg.SCHEMES)
    assert (root / "regime_map.png").stat().st_size > 10_000
