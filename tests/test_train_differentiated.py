"""Differentiated transmission in the time-to-accuracy harness (experiments/train_differentiated.py).

The setting needs no network; the agents' harness options are checked over loopback
against the same SGD computed in process (bit for bit); the end-to-end test runs gloo and
differentiated through ``experiments.train.main`` on the emulated star.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from experiments import train as harness
from tests.netenv import net_skip_reason

ROOT = Path(__file__).resolve().parent.parent


def _plan(*extra: str) -> harness.Plan:
    return harness.make_plan(harness.build_parser().parse_args(["--scheme", "gloo,differentiated", *extra]))


def test_setting_takes_the_shared_star_with_priority_queues() -> None:
    plan = _plan("--workers", "3", "--target", "embedded")
    diff, gloo = plan.settings["differentiated"], plan.settings["gloo"]
    assert (diff.ps, diff.workers, diff.nic_mbit) == (gloo.ps, gloo.workers, gloo.nic_mbit) == ("h1", plan.workers,
                                                                                               20.0)
    # the same graph (hosts, addresses, ports, rates), its own network: eight queues a port
    assert diff.topo.graph is gloo.topo.graph and diff.key != gloo.key
    assert harness.p4_of("differentiated") == "forward.p4 + priority queues"


def test_setting_on_bmv2_is_the_same_star() -> None:
    """BMv2 is no longer refused: the same star with eight priority queues per port (the
    PS port's rate becomes a static partition among them when the run deploys)."""
    plan = _plan("--workers", "3", "--target", "bmv2")
    diff, gloo = plan.settings["differentiated"], plan.settings["gloo"]
    assert diff.topo.name == f"{gloo.topo.name}+pq8-static-partition" and diff.topo.graph is gloo.topo.graph


@pytest.mark.parametrize(("extra", "message"), [
    (["--topo", "leaf-spine:2,2,2", "--workers", "3", "--target", "embedded"], "needs a star"),
    (["--topo", "linear:3", "--workers", "2", "--target", "embedded"], "needs a star"),
])
def test_setting_refuses_what_it_cannot_do(extra: list[str], message: str) -> None:
    with pytest.raises(harness.HarnessError, match=message):
        _plan(*extra)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as t, \
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        t.bind(("127.0.0.1", 0))
        port = t.getsockname()[1]
        u.bind(("127.0.0.1", port))
        return port


def test_agents_train_the_harness_work_on_loopback() -> None:
    """PS and two workers with the harness's options, every block reliable (nothing
    lost): evaluation records as hosts.trainer's, identical models, and the very weights
    of the same SGD in process (model, shards, batch order, w <- w - lr * sum / n)."""
    import torch

    from hosts import training as tr
    from hosts.trainer import weights_hash

    seed, world, batch, steps, epochs, lr = 1, 2, 16, 3, 2, 0.5
    common = ["--world", str(world), "--mode", "reliable", "--epochs", str(epochs), "--port", str(_free_port()),
              "--max-time", "60", "--model", "digits", "--data", "digits", "--seed", str(seed),
              "--batch", str(batch), "--lr", str(lr), "--max-steps", str(steps)]
    ps = subprocess.Popen([sys.executable, "-m", "hosts.differentiated.ps", *common, "--bind", "127.0.0.1",
                           "--linger", "0.1", "--no-eval"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    workers: list[subprocess.Popen] = []
    try:
        for _ in range(50):
            line = ps.stderr.readline()
            if not line or b"listening" in line:
                break
        workers = [subprocess.Popen([sys.executable, "-m", "hosts.differentiated.worker", "--ps", "127.0.0.1",
                                     "--rank", str(r), *common, "--batch-seed", str(seed), "--eval-every", "2"],
                                    cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for r in range(world)]
        outs = [w.communicate(timeout=120)[0].decode() for w in workers]
        ps_out = ps.communicate(timeout=60)[0].decode()
    finally:
        for p in (ps, *workers):
            if p.poll() is None:
                p.kill()
                p.wait()
    assert ps.returncode == 0 and all(w.returncode == 0 for w in workers)
    recs = [[json.loads(ln) for ln in o.splitlines() if ln.startswith("{")] for o in outs]
    evals = [[r for r in rr if "step" in r and "weights" in r and "done" not in r] for rr in recs]
    # every 2 steps and at each epoch's end, as hosts.trainer numbers them
    assert [(r["epoch"], r["step"]) for r in evals[0]] == [(0, 0), (1, 2), (1, 3), (2, 4), (2, 6)]
    assert all("accuracy" in r and "heldout" in r for r in evals[0])
    assert not any("accuracy" in r for r in evals[1])
    assert [r["weights"] for r in evals[0]] == [r["weights"] for r in evals[1]]
    summary = recs[0][-1]
    assert summary["done"] and summary["steps"] == steps * epochs and summary["parameters"] == 3818
    assert json.loads(ps_out.strip().splitlines()[-1])["weights"] == summary["weights"]

    torch.set_num_threads(1)
    data, model = tr.load_data("digits", seed), tr.build_model("digits", seed)
    assert evals[0][0]["accuracy"] == round(tr.evaluate(model, data), 4)
    shards = [tr.worker_shard(data, r, world) for r in range(world)]
    for epoch in range(epochs):
        order = [tr.batches(*shards[r], batch, epoch, seed)[:steps] for r in range(world)]
        for step in range(steps):
            grads = [tr.compute_gradients(model, *order[r][step]) for r in range(world)]
            total = [np.zeros_like(g) for g in grads[0]]
            for g in grads:  # the PS's order: rank 0 first
                for t, x in zip(total, g, strict=True):
                    t += x
            tr.apply_gradients(model, total, lr, 1.0 / world)
    assert weights_hash(model) == summary["weights"]


@pytest.mark.long  # differentiated training over the switch: test_differentiated_network's offline replay
@pytest.mark.net
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_gloo_and_differentiated_end_to_end(tmp_path: Path) -> None:
    reason = net_skip_reason("forward")
    if reason:
        pytest.skip(reason)
    rc = harness.main(["--scheme", "gloo,differentiated", "--seeds", "1", "--workers", "3", "--epochs", "1",
                       "--max-steps", "8", "--eval-every", "4", "--target-accuracy", "0.2",
                       "--out-dir", str(tmp_path)])
    assert rc == 0
    (run_dir,) = tmp_path.glob("train-*")
    runs = {r["scheme"]: r for r in json.loads((run_dir / "summary.json").read_text())["runs"]}
    diff, gloo = runs["differentiated"], runs["gloo"]
    assert diff["ok"], diff["error"]
    assert diff["models_identical"] and diff["iterations"] == 8
    assert [p["step"] for p in diff["curve"]] == [0, 4, 8]
    assert diff["curve"][0]["accuracy"] == gloo["curve"][0]["accuracy"]  # the same initial model
    assert diff["final_accuracy"] > 0.15  # chance is 0.1
    assert diff["ps_rx_bytes"] > 8 * 3 * 3818 * 4  # every worker's gradient, 8 times
    assert diff["sync_s_per_iter"] > 0 and diff["compute_s_per_iter"] > 0 and diff["agent_cpu_s"] > 0
    report = json.loads((run_dir / "agents" / "differentiated-seed0" / "differentiated.json").read_text())
    assert report["iterations"] == 8 and report["blocks_total"] == 8 * 3 * 67
    assert 0 <= report["zero_filled_blocks"] <= report["blocks_total"] // 2  # never an important block
    assert "0" not in report["zero_filled_per_level"]
    if report["qos"]["queueing"] == "partition":  # BMv2: no shared port rate, no counters
        assert report["queueing"].startswith("STATIC PARTITION") and report["qos"]["rates"]["7"] == 823
        assert report["queues"] == {}
    else:
        assert report["queueing"].endswith("shared by the queues in strict priority")
        assert "7" in report["queues"]  # per-queue counters: the embedded target


def test_variants_share_the_network_and_pass_their_options() -> None:
    """differentiated's variants: on request only, one network with differentiated (the
    same key: deployed once, run in turn), each run with its own agents' options."""
    from experiments import train_differentiated as td

    names = ",".join(td.VARIANTS)
    assert set(td.VARIANTS) == {"differentiated", *harness.DIFF_VARIANTS}
    assert not set(harness.DIFF_VARIANTS) & set(harness.DEFAULT_SCHEMES)
    plan = harness.make_plan(harness.build_parser().parse_args(["--scheme", names, "--target", "embedded"]))
    assert len({plan.settings[s].key for s in td.VARIANTS}) == 1
    assert {harness.p4_of(s) for s in td.VARIANTS} == {td.P4}
    assert td.plugin("differentiated") is td and td.plugin("differentiated-ef").scheme == "differentiated-ef"
    assert td.VARIANTS["differentiated-reliable"] == (("--mode", "reliable"), ())
    assert td.VARIANTS["differentiated-topk-ef"] == (("--error-feedback",), ("--importance", "topk"))
    with pytest.raises(KeyError):
        td.plugin("differentiated-nonsense")


@pytest.mark.long  # two short trainings over the switch
@pytest.mark.net
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_reliable_and_error_feedback_variants_end_to_end(tmp_path: Path) -> None:
    """All-reliable zero-fills nothing; error feedback trains (identical models on every
    rank), never folds a late block in, and reports its runs under its own name."""
    reason = net_skip_reason("forward")
    if reason:
        pytest.skip(reason)
    rc = harness.main(["--scheme", "differentiated-reliable,differentiated-ef", "--seeds", "1", "--workers", "3",
                       "--epochs", "1", "--max-steps", "8", "--eval-every", "4", "--target-accuracy", "0.2",
                       "--out-dir", str(tmp_path)])
    assert rc == 0
    (run_dir,) = tmp_path.glob("train-*")
    runs = {r["scheme"]: r for r in json.loads((run_dir / "summary.json").read_text())["runs"]}
    for scheme in ("differentiated-reliable", "differentiated-ef"):
        assert runs[scheme]["ok"] and runs[scheme]["models_identical"], runs[scheme]["error"]
        assert runs[scheme]["iterations"] == 8
    rel = json.loads((run_dir / "agents" / "differentiated-reliable-seed0" / "differentiated.json").read_text())
    ef = json.loads((run_dir / "agents" / "differentiated-ef-seed0" / "differentiated.json").read_text())
    assert rel["zero_filled_blocks"] == 0 and rel["options"] == ["--mode", "reliable"]
    assert ef["options"] == ["--error-feedback"] and ef["late_blocks"] == 0
