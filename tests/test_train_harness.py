"""The time-to-accuracy harness (experiments/train.py, ``gradctl train``).

Option handling needs no network; the end-to-end test trains the digits CNN with two
schemes x two seeds on a real emulated network and checks the statistics against the
runs they come from.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from experiments import train as harness
from tests.netenv import TARGET, net_skip_reason


def _args(*extra: str):
    # plans only, no switch started: the embedded target, whatever $TARGET says
    return harness.build_parser().parse_args(["--target", "embedded", *extra])


@pytest.mark.parametrize(("argv", "message"), [
    (["--scheme", "gloo,nope"], "unknown nope"),
    (["--scheme", "ina,ps", "--reference", "gloo"], "--reference gloo: not among"),
    (["--scheme", "gloo,gloo"], "named twice"),
    (["--kill", "h2@3"], "--kill: not supported"),
    (["--slow", "h9=2"], "h9 is not a training host"),
    (["--slow", "h2=0.5"], "must be >= 1"),
    (["--slow", "h2"], "expected KEY=VALUE"),
    (["--model", "resnet"], "resnet"),
    (["--workers", "9", "--topo", "star:4"], "needs 10"),
    (["--loss", "s9:1=0.1"], "s9"),
    (["--batch", "5000"], "has no full batch"),
    (["--scheme", "gloo,bml", "--workers", "3"], "is not one"),
    (["--scheme", "gloo,bml", "--loss", "s1:1=0.1"], "run bml without --loss"),
])
def test_bad_options_get_one_clear_error(argv, message):
    with pytest.raises(harness.HarnessError, match=message.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[")):
        harness.make_plan(_args(*argv))


@pytest.mark.parametrize("argv", [["--seeds", "0"], ["--workers", "0"], ["--loss", "s1:x=0.1"],
                                  ["--loss", "s1:1=2"], ["--target-accuracy", "1.5"],
                                  ["--lr", "-1"]])
def test_bad_values_are_argument_errors(argv, capsys):
    with pytest.raises(SystemExit) as e:
        _args(*argv)
    assert e.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_a_pending_scheme_gets_one_clear_error(monkeypatch):
    # a plugin scheme whose module is missing (as each was before it landed)
    monkeypatch.setattr(harness, "HARNESS_SCHEMES", tuple(s for s in harness.HARNESS_SCHEMES if s != "ndn"))
    with pytest.raises(harness.HarnessError, match="ndn: not in the harness yet"):
        harness.make_plan(_args("--scheme", "gloo,ndn"))


def test_bml_runs_on_a_bcube_with_the_same_training_hosts():
    plan = harness.make_plan(_args("--scheme", "gloo,bml", "--workers", "4", "--bw", "10"))
    bml, gloo = plan.settings["bml"], plan.settings["gloo"]
    assert len(bml.workers) == len(gloo.workers) == 4
    assert bml.topo.name != gloo.topo.name and bml.ps is None
    assert bml.nic_mbit == 20.0 and gloo.nic_mbit == 10.0  # BCube(2, 2): two NICs a host
    ring = harness.collective_plan(plan.settings["gloo"], "ring", 100)
    assert ring["hosts"] == gloo.workers and ring["values"] == 100


def test_rail_ring_has_bmls_nic_count_on_its_own_rails():
    plan = harness.make_plan(_args("--scheme", "bml,rail_ring,rail_sharded_ps", "--workers", "4",
                                   "--bw", "10", "--reference", "rail_ring"))
    bml, rail = plan.settings["bml"], plan.settings["rail_ring"]
    assert len(rail.workers) == 4 and rail.ps is None and rail.topo.name != bml.topo.name
    assert rail.nic_mbit == bml.nic_mbit == 20.0  # 2 NICs a host on both
    assert plan.settings["rail_sharded_ps"] is rail  # both k-rail schemes: one network
    for scheme, pieces in (("rail_ring", 4), ("rail_sharded_ps", 8)):
        p = harness.collective_plan(rail, scheme, 100)
        assert p["scheme"] == scheme and p["pieces"] == pieces
        assert p["rails"] == 2 and p["hosts"] == rail.workers
        assert all(len(ips) == 2 for ips in p["ips"])
        assert scheme not in harness.DEFAULT_SCHEMES  # on request only
        assert harness.p4_of(scheme) == "forward.p4"


@pytest.mark.long  # their sums per rail, exact: test_bcube_network.test_rail_baselines_...
@pytest.mark.net
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_rail_ring_and_rail_sharded_ps_train_the_same_weights(tmp_path):
    """Both k-rail baselines train the same work on one 2-rail leaf-spine. Both sum in
    int32 fixed point (``hosts.bml.collective``: integer addition is exact whatever the
    order, the float32 result a fixed function of the integer sum), so they must end with
    bit-identical weights, and those must be the weights of the same SGD computed here in
    process with each step's sum taken element by element from the ranks' quantized
    gradients."""
    reason = net_skip_reason("forward")
    if reason:
        pytest.skip(reason)
    import numpy as np
    import torch

    from hosts import training as tr
    from hosts.trainer import weights_hash
    from wire.fixedpoint import dequantize, quantize

    seed, world, batch, steps, epochs = 0, 4, 16, 6, 2
    argv = ["--scheme", "rail_ring,rail_sharded_ps", "--reference", "rail_ring", "--seeds", "1",
            "--seed", str(seed), "--workers", str(world), "--epochs", str(epochs), "--batch", str(batch),
            "--max-steps", str(steps), "--eval-every", "3", "--target-accuracy", "0.15", "--bw", "20",
            "--max-time", "120", "--target", TARGET, "--out-dir", str(tmp_path)]
    assert harness.main(argv) == 0
    (run_dir,) = [p for p in tmp_path.iterdir() if p.name.startswith("train-")]
    summary = json.loads((run_dir / "summary.json").read_text())
    runs = {r["scheme"]: r for r in summary["runs"]}
    assert set(runs) == {"rail_ring", "rail_sharded_ps"}
    for scheme, r in runs.items():
        assert r["ok"], r["error"]
        assert r["models_identical"] and r["iterations"] == steps * epochs
        assert [p["step"] for p in r["curve"]] == [0, 3, 6, 9, 12]
        agents = run_dir / "agents" / f"{scheme}-seed{seed}"
        plan = json.loads((agents / "plan.json").read_text())
        assert plan["scheme"] == scheme and plan["rails"] == 2 and plan["scale_bits"] == 16
        for rank in range(world):  # every rank synchronized every step through its plan
            last = json.loads((agents / f"rank{rank}.out").read_text().strip().splitlines()[-1])
            assert last["done"] and last["rounds"] == steps * epochs and last["bytes_sent"] > 0
    ring, sps = runs["rail_ring"], runs["rail_sharded_ps"]
    assert ring["final_weights"] and ring["final_weights"] == sps["final_weights"]
    assert [p["accuracy"] for p in ring["curve"]] == [p["accuracy"] for p in sps["curve"]]
    assert [p["heldout"] for p in ring["curve"]] == [p["heldout"] for p in sps["curve"]]
    assert {row["scheme"]: row["topology"] for row in summary["schemes"]} == {
        "rail_ring": "rail2-leaf_spine-2x2x2", "rail_sharded_ps": "rail2-leaf_spine-2x2x2"}

    # the reference: the trainer's SGD in process, each sum the exact integer sum
    torch.set_num_threads(1)
    data, model = tr.load_data("digits", seed), tr.build_model("digits", seed)
    like = tr.parameter_arrays(model)
    lr = summary["manifest"]["lr"]
    shards = [tr.worker_shard(data, r, world) for r in range(world)]
    for epoch in range(epochs):
        order = [tr.batches(*shards[r], batch, epoch, seed)[:steps] for r in range(world)]
        for step in range(steps):
            qs = [quantize(tr.flatten(tr.compute_gradients(model, *order[r][step])), 16, world)
                  for r in range(world)]
            total = np.zeros(qs[0].shape, dtype=np.int64)
            for q in qs:
                total += q
            assert np.abs(total).max() <= np.iinfo(np.int32).max
            summed = dequantize(total.astype(np.int32), 16)
            tr.apply_gradients(model, tr.unflatten(summed, like), lr, scale=1.0 / world)
    assert weights_hash(model) == ring["final_weights"]


def test_dry_run_prints_the_plan_and_starts_nothing(capsys, tmp_path):
    rc = harness.main(["--dry-run", "--scheme", "gloo,ina", "--seeds", "2", "--out-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0
    assert "gloo" in out and "ina" in out and "3,818 parameters" in out
    assert list(tmp_path.iterdir()) == []  # nothing written, nothing started


def test_plan_defaults_are_the_models_fixed_target():
    from hosts import training as tr

    plan = harness.make_plan(_args())
    assert plan.schemes == list(harness.DEFAULT_SCHEMES)
    assert plan.target_accuracy == tr.TARGET_ACCURACY[("digits", "digits")]
    assert plan.workers == ["h2", "h3", "h4", "h5"] and plan.ps == "h1"
    assert plan.seeds == [0, 1, 2]


@pytest.mark.net
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_two_schemes_two_seeds_end_to_end(tmp_path):
    reason = net_skip_reason("forward")
    if reason:
        pytest.skip(reason)
    from scipy import stats

    argv = ["--scheme", "gloo,ina", "--seeds", "2", "--workers", "2", "--epochs", "2",
            "--max-steps", "12", "--eval-every", "6", "--target-accuracy", "0.3",
            "--bw", "50", "--max-time", "240", "--target", TARGET, "--out-dir", str(tmp_path)]
    assert harness.main(argv) == 0
    (run_dir,) = [p for p in tmp_path.iterdir() if p.name.startswith("train-")]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (run_dir / "accuracy_vs_time.png").stat().st_size > 0
    assert (run_dir / "time_to_accuracy.png").stat().st_size > 0
    man = json.loads((run_dir / "manifest.json").read_text())
    assert man["seeds"] == [0, 1] and man["commit"] and "load_at_start" in man
    runs = summary["runs"]
    assert {(r["scheme"], r["seed"]) for r in runs} == {(s, k) for s in ("gloo", "ina") for k in (0, 1)}
    for r in runs:
        assert r["ok"], r["error"]
        assert r["models_identical"]
        assert r["final_accuracy"] > 0.2  # chance is 0.1 on ten classes
        assert r["iterations"] == 24
        assert r["busiest_link_bytes"] > 0
        # the ideal bound of one synchronization (experiments/ideal.py), re-sends apart
        assert r["ideal_bound_s"] > 0 and r["ideal_busiest_link"] != "-"
        assert r["x_bound"] == pytest.approx(r["sync_s_per_iter"] / r["ideal_bound_s"], rel=1e-2)
        # INA: GRADs re-sent on a NACK (350-byte frames) and header-only requests for a
        # RESULT (94: fast, tail-loss probe, timer), which may come without loss
        asked = sum(r["resends"].get(k, 0) for k in ("request_fast", "request_probe",
                                                      "request_timer"))
        assert r["resent_bytes"] == (r["resends"]["resend_nack"] * 350 + asked * 94
                                     if r["scheme"] == "ina" else r["retransmissions"] * 1514)
        # 24 synchronizations moved at least about 24 ideal ones over the busiest link
        assert r["busiest_link_bytes"] >= 0.8 * 24 * r["ideal_busiest_link_bytes"]
        # the verdict, from the training window's CPU only
        assert r["fidelity"] in ("link-bound", "emulator-bound")
        assert 0 < r["window_s"] < r["wall_s"] and r["cores"] >= 1
        assert 0 <= r["window_switch_cpu_s"] <= r["switch_cpu_s"] + 0.05
    # the same seed gives the same initial model and batches: the first evaluation agrees
    for k in (0, 1):
        firsts = {r["curve"][0]["accuracy"] for r in runs if r["seed"] == k}
        assert len(firsts) == 1
    for row in summary["schemes"]:
        accs = [r["final_accuracy"] for r in runs if r["scheme"] == row["scheme"]]
        iv = row["final_accuracy"]
        assert iv["n"] == 2
        assert math.isclose(iv["mean"], sum(accs) / 2, rel_tol=1e-9)
        sd = abs(accs[0] - accs[1]) / math.sqrt(2)
        assert math.isclose(iv["half_width"], stats.t.ppf(0.975, 1) * sd / math.sqrt(2), rel_tol=1e-6,
                            abs_tol=1e-12)
    ina = next(r for r in summary["schemes"] if r["scheme"] == "ina")
    assert ina["ratio_to_reference"] is not None or ina["reached"] < 2
    assert ina["ideal_bound_s_per_iter"]["n"] == 2 and sum(ina["fidelity"].values()) == 2
    # the verdict: no emulator-bound run among the seeds that enter the paired ratio
    reached = {(r["scheme"], r["seed"]) for r in runs if r["time_to_target_s"]}
    paired = [k for k in (0, 1) if ("ina", k) in reached and ("gloo", k) in reached]
    assert ina["verdict"] == (not any(r["cpu_bound"] for r in runs if r["seed"] in paired))


def test_gradctl_train_is_registered():
    import subprocess

    out = subprocess.run([sys.executable, "-m", "controller.cli", "train", "--help"],
                         capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
    assert out.returncode == 0 and "--target-accuracy" in out.stdout and "--seeds" in out.stdout


def test_plot_when_no_scheme_reaches_the_target(tmp_path: Path) -> None:
    """Every run missed the target, so no bound is finite: both plots are still drawn
    (an all-NaN bound scatter used to break matplotlib's tight_layout)."""
    import argparse
    from types import SimpleNamespace

    from experiments.train import plot

    none = {"mean": 0.0, "n": 0, "half_width": 0.0}
    rows = [{"scheme": "ring", "time_to_target_s": none, "missed": [1], "bound_to_target_s": none}]
    plan = SimpleNamespace(schemes=["ring"], target_accuracy=0.99, workers=["h2", "h3"])
    plot(tmp_path, [], rows, plan, argparse.Namespace(compute_time=None, model="cnn", data="digits", bw=20.0))
    assert (tmp_path / "time_to_accuracy.png").stat().st_size > 0
    assert (tmp_path / "accuracy_vs_time.png").stat().st_size > 0
