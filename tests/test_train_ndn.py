"""The NDN parameter server in the time-to-accuracy harness (experiments/train_ndn.py).

In process: the plugin's setting on the default star and its refusals, and the agents'
``--train-model`` work against hosts/trainer.py's. On the network: gloo and ndn train the
same digits CNN for 8 steps; ndn's run is ok with identical models, starts from gloo's
first evaluation and ends above chance.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from experiments import train as harness
from experiments import train_ndn
from tests.netenv import TARGET, net_skip_reason


def _args(*extra: str):
    return harness.build_parser().parse_args(list(extra))


def test_setting_is_the_shared_star():
    plan = harness.make_plan(_args("--scheme", "gloo,ndn", "--workers", "3"))
    ndn, gloo = plan.settings["ndn"], plan.settings["gloo"]
    assert ndn is gloo
    assert ndn.ps == "h1" and ndn.workers == ["h2", "h3", "h4"]
    assert train_ndn.P4 == "ndn.p4" and harness.p4_of("ndn") == "ndn.p4"
    assert train_ndn.KILL_SUPPORTED is False


def test_setting_refuses_pit_ports_above_8_and_kill():
    with pytest.raises(harness.HarnessError, match=r"in-ports 1\.\.8"):
        harness.make_plan(_args("--scheme", "gloo,ndn", "--workers", "8"))   # star:9, port 9
    with pytest.raises(harness.HarnessError, match="--kill: not supported by .*ndn"):
        harness.make_plan(_args("--scheme", "gloo,ndn", "--kill", "h2@3"))


def test_harness_work_is_the_trainers():
    """The agents' --train-model work: the trainer's initial weights, batches and SGD step."""
    from hosts import training as tr
    from hosts.ndn.harness import HarnessWork
    from hosts.trainer import weights_hash

    seed, world, batch, steps = 3, 2, 16, 4
    ps = HarnessWork("digits", "digits", seed, batch, steps, eval_every=3)
    gpus = [HarnessWork("digits", "digits", seed, batch, steps, 3, rank, world) for rank in range(world)]
    ref = tr.build_model("digits", seed)
    like = tr.parameter_arrays(ref)
    data = tr.load_data("digits", seed)
    assert ps.weights() == weights_hash(ref) and ps.values == 3818
    params = ps.params()
    for step in range(steps + 2):   # into the second epoch
        epoch, i = divmod(step, steps)
        grads = [g.gradient(params, step) for g in gpus]
        want = []
        for rank in range(world):
            x, y = tr.worker_shard(data, rank, world)
            xb, yb = tr.batches(x, y, batch, epoch, seed)[:steps][i]
            want.append(tr.flatten(tr.compute_gradients(ref, xb, yb)))
        assert all(np.array_equal(a, b) for a, b in zip(grads, want, strict=True))
        params = ps.apply(grads, 0.5)
        tr.apply_gradients(ref, tr.unflatten(want[0] + want[1], like), 0.5, scale=1.0 / world)
        assert np.array_equal(params, tr.flatten(tr.parameter_arrays(ref)))
    assert ps.weights() == weights_hash(ref)
    assert [v for v in range(9) if ps.is_eval_point(v)] == [0, 3, 4, 6, 8]
    assert [ps.epoch_of(v) for v in (0, 3, 4, 6, 8)] == [0, 1, 1, 2, 2]


_reason = net_skip_reason("ndn", "forward")


@pytest.mark.long  # NDN training over the fabric: test_ndn_network.test_digits_cnn_real_training
@pytest.mark.net
@pytest.mark.slow
@pytest.mark.skipif(_reason is not None, reason=_reason or "")
@pytest.mark.timeout(300)
def test_ndn_trains_the_same_model_as_gloo(tmp_path):
    rc = harness.main(["--scheme", "gloo,ndn", "--seeds", "1", "--workers", "3", "--epochs", "1",
                       "--max-steps", "8", "--eval-every", "4", "--target-accuracy", "0.2",
                       "--target", TARGET, "--out-dir", str(tmp_path)])
    (run_dir,) = tmp_path.iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    runs = {r["scheme"]: r for r in summary["runs"]}
    ndn, gloo = runs["ndn"], runs["gloo"]
    assert rc == 0, (ndn["error"], gloo["error"])
    assert ndn["ok"] and ndn["models_identical"], ndn["error"]
    assert ndn["iterations"] == 8
    assert [p["step"] for p in ndn["curve"]] == [0, 4, 8]
    assert ndn["curve"][0]["accuracy"] == gloo["curve"][0]["accuracy"]   # the same initial model
    assert ndn["curve"][0]["heldout"] == gloo["curve"][0]["heldout"]
    assert ndn["final_accuracy"] > 0.1                                    # above chance (10 classes)
    assert ndn["compute_s_per_iter"] > 0 and ndn["sync_s_per_iter"] > 0
    assert ndn["ps_rx_bytes"] > 8 * 3 * 3818 * 4                          # every gradient reached the PS


@pytest.mark.long  # the suite checks the baselines bit-exact in test_ndn_baselines_network
@pytest.mark.net
@pytest.mark.slow
@pytest.mark.skipif(_reason is not None, reason=_reason or "")
@pytest.mark.timeout(300)
def test_ndn_ip_baselines_train_the_same_model(tmp_path):
    """NDN's IP-multicast and TCP baselines in the harness: the same digits CNN
    from the same initial weights, every GPU's weights identical with the PS's at every
    evaluation, the same final model (the same gradients summed in the same order)."""
    rc = harness.main(["--scheme", "ndn-ipmc,ndn-tcp", "--reference", "ndn-tcp", "--seeds", "1",
                       "--workers", "2", "--epochs", "1", "--max-steps", "4", "--eval-every", "2",
                       "--target-accuracy", "0.15", "--target", TARGET, "--out-dir", str(tmp_path)])
    (run_dir,) = tmp_path.iterdir()
    runs = {r["scheme"]: r for r in json.loads((run_dir / "summary.json").read_text())["runs"]}
    assert rc == 0, {s: r["error"] for s, r in runs.items()}
    for r in runs.values():
        assert r["ok"] and r["models_identical"] and r["iterations"] == 4, r["error"]
        assert [p["step"] for p in r["curve"]] == [0, 2, 4]
    assert runs["ndn-ipmc"]["final_weights"] == runs["ndn-tcp"]["final_weights"]
    assert runs["ndn-ipmc"]["curve"] == [dict(p, t=q["t"]) for p, q in
                                         zip(runs["ndn-tcp"]["curve"], runs["ndn-ipmc"]["curve"], strict=True)]
