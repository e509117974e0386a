"""Token-passing broadcast in the time-to-accuracy harness (experiments/train_token.py).

The setting needs no network; the end-to-end tests train the digits CNN, and the mlp
(126,090 parameters: more than a NIC holds, so summed in 4 chunks), with gloo and token
on three workers and check that token trained the same work: the same first evaluation
as gloo (same initial model and test set), the same number of steps, and the same
weights on every node at every evaluation.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments import train as harness
from experiments import train_token
from tests.netenv import TARGET, net_skip_reason


def _args(*extra: str):
    return harness.build_parser().parse_args(["--scheme", "gloo,token", *extra])


def test_setting_is_a_token_lan_of_the_training_hosts_and_refuses_loss():
    plan = harness.make_plan(_args("--workers", "4", "--bw", "10"))
    token, gloo = plan.settings["token"], plan.settings["gloo"]
    assert token.topo.name == "token_lan-4" and token.ps is None
    assert token.workers == ["h1", "h2", "h3", "h4"] and len(gloo.workers) == 4
    assert token.topo.switches("nic") == ["nic1", "nic2", "nic3", "nic4"]
    assert token.nic_mbit == 10.0
    assert all(d["capacity"] == 10.0 for _a, _b, d in token.topo.graph.edges(data=True))
    assert harness.p4_of("token") == train_token.P4 and train_token.KILL_SUPPORTED
    with pytest.raises(harness.HarnessError, match="run token without --loss"):
        harness.make_plan(_args("--loss", "s1:1=0.1"))
    # a model longer than a NIC holds is summed in chunks: the mlp is fine
    assert harness.make_plan(_args("--model", "mlp")).settings["token"].workers == ["h1", "h2", "h3", "h4"]


def test_a_model_the_model_broadcast_cannot_carry_is_refused(monkeypatch):
    from hosts import training as tr

    big = 0xFFFF * 1024 // 4 + 1  # one value past 65,535 MODEL frames of 1,024 bytes
    monkeypatch.setattr(tr, "build_model", lambda name, seed: tr.FlatModel(big))
    with pytest.raises(harness.HarnessError, match="MODEL broadcast carries at most"):
        harness.make_plan(_args("--model", "mlp"))


def test_kill_maps_a_shared_host_to_its_rank():
    workers = harness.make_plan(_args("--workers", "4")).settings["gloo"].workers
    assert workers == ["h2", "h3", "h4", "h5"]  # the shared star: h1 is the PS
    assert train_token.parse_kills(_args("--kill", "h4@1.5"), workers) == {2: 1.5}
    for bad, msg in ((["--kill", "h9@1"], "not a training host"), (["--kill", "h2@x"], "not a number"),
                     (["--kill", "h2@1", "--kill", "h3@1", "--kill", "h4@1"], "below 2 active")):
        with pytest.raises(harness.HarnessError, match=msg):
            train_token.parse_kills(_args(*bad), workers)


def test_node_options_carry_the_harness_work():
    args = _args("--workers", "3", "--slow", "h3=4", "--batch", "8", "--epochs", "2")
    plan = harness.make_plan(args)
    opts = train_token.node_options(args, plan, seed=7)
    get = {k: v for k, v in zip(opts, [*opts[1:], ""], strict=True) if k.startswith("--")}
    assert get["--model"] == "digits" and get["--data"] == "digits" and get["--seed"] == "7"
    assert get["--batch-seed"] == "7" and get["--batch-size"] == "8" and get["--epochs"] == "2"
    assert get["--max-steps"] == str(plan.steps_per_epoch) and float(get["--lr"]) == plan.lr
    assert get["--cutoff"] == "1.0" and "--evals" in opts
    assert get["--slowdowns"] == "1.0,4.0,1.0"  # h3 is rank 1 of the shared star (h1 is the PS)
    dil = train_token.node_options(_args("--workers", "3", "--slow", "h3=4", "--compute-time", "0.5"),
                                   plan, seed=0)
    assert "--slowdowns" not in dil and dil[dil.index("--compute-fixed") + 1] == "0.5"


@pytest.mark.long  # token's sums: test_token_network; ring and PS are harness schemes of test_train_harness
@pytest.mark.net
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_gloo_ring_ps_and_token_train_the_same_work_on_one_lan(tmp_path: Path):
    """token against its baselines on the same LAN: gloo, ring and the PS run
    on ``nic-lan:4`` (three training hosts and a PS host, each behind a NIC switch that
    forwards), token on the LAN of three P4 NICs; every scheme trains the same work."""
    reason = net_skip_reason("forward", "ina", "nic", "lan")
    if reason:
        pytest.skip(reason)
    argv = ["--scheme", "gloo,ring,ps,token", "--topo", "nic-lan:4", "--workers", "3", "--seeds", "1", "--epochs", "1",
            "--max-steps", "8", "--eval-every", "4", "--target-accuracy", "0.2",
            "--target", TARGET, "--out-dir", str(tmp_path)]
    assert harness.main(argv) == 0
    (run_dir,) = [p for p in tmp_path.iterdir() if p.name.startswith("train-")]
    summary = json.loads((run_dir / "summary.json").read_text())
    runs = {r["scheme"]: r for r in summary["runs"]}
    topo = {r["scheme"]: r["topology"] for r in summary["schemes"]}
    assert topo == {"gloo": "nic_lan-4", "ring": "nic_lan-4", "ps": "nic_lan-4", "token": "token_lan-3"}
    token, gloo = runs["token"], runs["gloo"]
    for r in runs.values():
        assert r["ok"], (r["scheme"], r["error"])
        assert r["models_identical"], r["scheme"]
        assert r["iterations"] == 8
        assert [p["step"] for p in r["curve"]] == [0, 4, 8]
        # the same initial model and test set: the first evaluation agrees exactly
        assert r["curve"][0]["accuracy"] == gloo["curve"][0]["accuracy"]
        assert r["curve"][0]["heldout"] == gloo["curve"][0]["heldout"]
        assert r["final_accuracy"] > 0.2  # chance is 0.1 on ten classes
    # ring and the PS sum the same fixed-point gradients exactly: the same final weights
    assert runs["ring"]["final_weights"] == runs["ps"]["final_weights"]
    assert token["sync_s_per_iter"] is not None and token["agent_cpu_s"] > 0
    assert token["ps_rx_bytes"] is None and token["busiest_link_bytes"] > 0
    assert runs["ps"]["ps_rx_bytes"] > 0


@pytest.mark.long  # the suite checks chunked exact sums in test_token_chunks
@pytest.mark.net
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_gloo_and_token_train_the_mlp_in_chunks(tmp_path: Path):
    reason = net_skip_reason("forward", "nic", "lan")
    if reason:
        pytest.skip(reason)
    argv = ["--scheme", "gloo,token", "--model", "mlp", "--seeds", "1", "--workers", "3",
            "--epochs", "1", "--max-steps", "4", "--eval-every", "2", "--target-accuracy", "0.15",
            "--target", TARGET, "--out-dir", str(tmp_path)]
    assert harness.main(argv) == 0
    (run_dir,) = [p for p in tmp_path.iterdir() if p.name.startswith("train-")]
    runs = {r["scheme"]: r for r in json.loads((run_dir / "summary.json").read_text())["runs"]}
    token, gloo = runs["token"], runs["gloo"]
    assert token["ok"], token["error"]
    assert token["models_identical"]
    assert token["iterations"] == gloo["iterations"] == 4
    assert [p["step"] for p in token["curve"]] == [p["step"] for p in gloo["curve"]] == [0, 2, 4]
    assert token["curve"][0]["accuracy"] == gloo["curve"][0]["accuracy"]
    assert token["curve"][0]["heldout"] == gloo["curve"][0]["heldout"]
    # 4 chunks per batch: one token round each
    (tdir,) = [p for p in run_dir.rglob("token.json")]
    summaries = json.loads(tdir.read_text())["summaries"]
    assert all(s["stats"]["batches"] == 4 and s["stats"]["grad_frames"] == 4 * 986
               for s in summaries.values())


def test_token_grid_cells_rates_spreads_and_winner():
    from bench import token_grid as g
    from controller.token import token_lan
    from topologies.spec import parse_topology

    assert g.spread_factors(4, 4) == [1.0, 2.0, 3.0, 4.0] and g.spread_factors(8, 1) == [1.0] * 8
    # one 3,818-value gradient (122,176 bits) takes compute / ratio on one link
    assert g.link_rate(1.0, 0.004, 3818) == pytest.approx(3818 * 32 / 0.004 / 1e6)
    assert g.link_rate(10.0, 0.004, 3818) == pytest.approx(10 * g.link_rate(1.0, 0.004, 3818))

    def iv(mean: float, hw: float, n: int = 3) -> dict:
        return {"time_to_target_s": {"mean": mean, "low": mean - hw, "high": mean + hw, "n": n}}

    assert g.winner({"token": iv(5, 1), "ring": iv(9, 1)}) == "token"
    assert g.winner({"token": iv(5, 3), "ring": iv(9, 2)}) == "token (tie with ring)"
    assert g.winner({"token": {"time_to_target_s": {"n": 0}}}) == "-"
    # the baselines' LAN is the token LAN's shape with one more host (the PS)
    lan, tok = parse_topology("nic-lan:5"), token_lan(4)
    assert [len(lan.hosts()), len(lan.switches())] == [5, 6]
    assert tok.name == "token_lan-4" and [len(tok.hosts()), len(tok.switches())] == [4, 5]
    assert tok.port("nic1", "h1") == lan.port("nic1", "h1") and tok.port("lan", "nic4") == lan.port("lan", "nic4")
    assert g.epochs_for(4, 4) == 4 and g.epochs_for(4, 8) == 8 and g.epochs_for(1, 2) == 1


def test_token_grid_markdown_rows_from_the_saved_cells():
    import argparse

    from bench import token_grid as g

    def row(scheme: str, mean: float, ratio: float | None) -> dict:
        iv = {"mean": mean, "low": mean - 1, "high": mean + 1, "n": 3, "half_width": 1.0}
        r = {"scheme": scheme, "runs": 3, "reached": 3, "time_to_target_s": iv, "bound_to_target_s": iv,
             "sync_s_per_iter": {"mean": 0.2, "n": 3}, "line_rate_bound_s_per_iter": {"mean": 0.1, "n": 3},
             "compute_s_per_iter": {"mean": 0.002, "n": 3}}
        if ratio is not None:
            r["ratio_to_reference"] = {"mean": ratio, "low": ratio - 0.1, "high": ratio + 0.1, "n": 3,
                                       "half_width": 0.1}
        return r

    cells = [{"nodes": 4, "spread": 2.0, "ratio": 0.1, "bw": 6.14,
              "schemes": [row("token", 9.0, 2.0), row("ring", 4.5, None)]}]
    header, rows = g.table_rows(cells, ["token", "ring"])
    assert header[:5] == ["nodes", "spread", "comp/comm", "link Mbit/s", "compute ms/step in runs"]
    (r,) = rows
    assert r[:5] == ["4", "2x", "0.1", "6.14", "2.0-2.0"]
    assert r[5].startswith("9.0 ± 1.0 [9.0 ± 1.0] (3/3, ÷ring 2.00 ± 0.10")
    assert r[-2] == "ring" and r[-1] == "2.0/2.0"
    md = g.markdown(cells, ["token", "ring"], argparse.Namespace(epochs=4, seeds=3), 0.002, 3818, 0.9)
    lines = md.splitlines()
    assert lines[2].startswith("| nodes | spread |") and lines[3].count("|") == len(header) + 1
    assert lines[4].startswith("| 4 | 2x | 0.1 | 6.14 |")
