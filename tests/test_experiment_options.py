"""``python -m experiments`` on any network: --topo, --ps, --workers, --loss, --jobs.

Each run is the real experiment (INA and the PS baseline through P4 switches, element-wise
checks of every worker's sum); the summary JSON it writes is read back.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.main import main
from tests.netenv import TARGET, net_skip_reason

ROOT = Path(__file__).resolve().parent.parent


def _skip_reason() -> str | None:
    return net_skip_reason("ina")


net = pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or "")


def _summary(out: Path) -> dict:
    (path,) = out.glob("ina-*/summary.json")
    return json.loads(path.read_text())


@pytest.mark.parametrize("argv, message", [
    (["--topo", "nosuch:3"], "unknown topology"),
    (["--topo", "star:3", "--ps", "h9"], "not a host"),
    (["--topo", "star:3", "--loss", "s1:9=0.1"], "has no port 9"),
    (["--topo", "star:3", "--jobs", "2", "--ps", "h1"], "needs 2 parameter servers"),
    (["--topo", "star:3", "--workers", "h1"], "not hosts"),
])
def test_bad_options_are_clear_errors(argv: list[str], message: str, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:  # checked before anything starts, root or not
        main([*argv, "--out-dir", str(tmp_path)])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("error:") == 1
    assert not list(tmp_path.iterdir())  # no run directory


@net
def test_leaf_spine_two_concurrent_jobs(tmp_path: Path) -> None:
    rc = main(["--topo", "leaf-spine:2,2,3", "--bw", "50", "--jobs", "2", "--values", "2048",
               "--budget", "1", "--target", TARGET, "--out-dir", str(tmp_path)])
    assert rc == 0
    s = _summary(tmp_path)
    assert len(s["jobs"]) == 2 and len(s["runs"]) == 4
    assert all(r["exact"] and r["mismatches"] == 0 for r in s["runs"])
    # where the time went: a line-rate bound and the switches' CPU, for every run
    assert all(r["split"]["line_rate_bound_s"] > 0 and r["split"]["switch_cpu_s_total"] > 0
               for r in s["runs"])
    # what the emulation cost: bring-up, memory and CPU of every switch process and agent
    res = s["resources"]
    assert res["switches"] == 4 and res["hosts"] == 6 and res["bring_up_s"] > 0
    assert res["switch_rss_mib"] and all(v > 10 for v in res["switch_rss_mib"].values())
    assert [r["workers"] for r in res["runs"]] == [2, 2, 2, 2]
    assert all(0 < r["worker_rss_mib_max"] < 1024 and r["ps_rss_mib"] > 0 for r in res["runs"])
    assert {j["ps"] for j in s["jobs"]} == {"h1", "h2"}
    assert sorted(w for j in s["jobs"] for w in j["workers"]) == sorted(
        f"h{i}" for i in range(3, 7))


@net
@pytest.mark.long  # ~29 s; the suite keeps topology files (test_topologies_files), exact sums under loss
# (test_ina_recovery_network) and the AIMD window under loss (test_ina_hosts_e2e)
def test_topology_file_with_five_percent_loss(tmp_path: Path) -> None:
    # dumbbell: s1 port 10 is the bottleneck link towards s2
    rc = main(["--topo", str(ROOT / "topologies/examples/dumbbell.yaml"), "--values", "2048",
               "--budget", "1", "--loss", "s1:10=0.05", "--loss", "s2:10=0.05",
               "--congestion", "aimd", "--target", TARGET, "--out-dir", str(tmp_path)])
    assert rc == 0
    s = _summary(tmp_path)
    assert s["loss"] == {"s1:10": 0.05, "s2:10": 0.05} and s["congestion"] == "aimd"
    assert all(r["exact"] for r in s["runs"])
    assert sum(r["retransmissions"] for r in s["runs"]) > 0  # the loss really bit
    assert sum(r["window_decreases"] for r in s["runs"]) > 0  # and the AIMD window saw it


def test_preset_k8_is_the_scale_run_and_the_command_line_wins() -> None:
    """``--preset k8`` (make run-scale): a k=8 fat-tree, dilated links, AIMD for the PS
    baseline only; an option given on the command line overrides the preset's."""
    from experiments.ina import _apply_preset, build_parser

    a = build_parser().parse_args(_apply_preset(["--preset", "k8"]))
    assert (a.k, a.values, a.bw, a.budget, a.preset) == (8, 1024, 0.2, 8, "k8")
    assert (a.congestion, a.baseline_congestion) == ("fixed", "aimd")
    b = build_parser().parse_args(_apply_preset(["--bw", "0.1", "--preset=k8", "--budget", "4"]))
    assert (b.k, b.bw, b.budget) == (8, 0.1, 4)  # wherever they stand
