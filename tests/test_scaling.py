"""How the harness's work scales with the workers (experiments/scaling.py), the dry-run's
warning, and the 4.5 MB model. No network: the simulation sums the ranks' gradients in
process, which is the loop's arithmetic (hosts/loop.py)."""

from __future__ import annotations

import pytest

from experiments import scaling
from experiments import train as harness
from hosts import training as tr

N_TRAIN = 1348  # digits' training split (1,797 - 449 test)


def test_the_reference_plan_is_unchanged():
    """4 workers: per-rank batch 16, lr 0.5, 21 steps an epoch, as the targets were measured."""
    w = scaling.resolve(N_TRAIN, 4, global_batch=64, batch=None, lr=None, base_lr=0.5)
    assert (w.batch, w.global_batch, w.lr, w.steps_per_epoch) == (16, 64, 0.5, 21)


@pytest.mark.parametrize("world,batch,global_batch,steps", [
    (8, 8, 64, 21), (15, 4, 60, 22), (31, 2, 62, 21)])
def test_the_global_batch_is_split_and_an_epoch_stays_one_pass(world, batch, global_batch, steps):
    w = scaling.resolve(N_TRAIN, world, global_batch=64, batch=None, lr=None, base_lr=0.5)
    assert (w.batch, w.global_batch, w.steps_per_epoch) == (batch, global_batch, steps)
    assert w.lr == pytest.approx(0.5 * global_batch / 64)  # linear scaling of the remainder
    assert N_TRAIN - global_batch < w.steps_per_epoch * w.global_batch <= N_TRAIN
    assert "remainder" in w.rule or global_batch == 64


def test_per_rank_batch_and_explicit_lr():
    w = scaling.resolve(N_TRAIN, 15, global_batch=64, batch=16, lr=None, base_lr=0.5)
    assert (w.batch, w.global_batch, w.lr, w.steps_per_epoch) == (16, 240, 1.875, 5)
    w = scaling.resolve(N_TRAIN, 15, global_batch=64, batch=16, lr=0.5, base_lr=0.5, max_steps=3)
    assert (w.lr, w.steps_per_epoch) == (0.5, 3)
    with pytest.raises(scaling.ScalingError, match="has no full batch"):
        scaling.resolve(N_TRAIN, 300, global_batch=64, batch=None, lr=None, base_lr=0.5)


@pytest.mark.parametrize("world", [4, 8, 15, 31])
def test_the_rule_reaches_the_default_target_at_every_worker_count(world):
    """The digits CNN, default plan (4 epochs, global batch 64), seed 0: reaches 0.90."""
    w = scaling.resolve(N_TRAIN, world, global_batch=64, batch=None, lr=None,
                        base_lr=tr.DEFAULT_LR["digits"])
    target = tr.TARGET_ACCURACY[("digits", "digits")]
    sim = scaling.simulate("digits", "digits", 0, world, w.batch, w.lr, 4, w.steps_per_epoch)
    reached = [s for s, a in sim["curve"] if a >= target]
    assert reached, sim["curve"]
    assert sim["final"] >= target - 0.05, sim["curve"]


def _dry_run(capsys, tmp_path, *extra: str) -> str:
    rc = harness.main(["--dry-run", "--scheme", "gloo", "--topo", "fat-tree:4", "--workers", "15",
                       "--seeds", "1", "--out-dir", str(tmp_path), *extra])
    assert rc == 0
    return capsys.readouterr().out


def test_dry_run_warns_when_the_plan_cannot_reach_the_target(capsys, tmp_path):
    out = _dry_run(capsys, tmp_path, "--batch", "16")  # 20 steps of 240 at lr 1.875
    assert "warning:" in out and "not reached" in out and "lr 1.875" in out
    out = _dry_run(capsys, tmp_path, "--max-steps", "2")  # the cheap rule: too few samples
    assert "warning:" in out and "samples" in out


def test_dry_run_of_a_reachable_plan_does_not_warn(capsys, tmp_path):
    out = _dry_run(capsys, tmp_path)
    assert "warning" not in out
    assert "global batch 60 = 4 per rank x 15" in out and "22 steps" in out


def test_the_big_model_is_worth_moving():
    """mlp-1m: over a million parameters, over 4 MB of float32 gradient, accepted by the
    ina/ps fixed point at their scale 2^16 for up to 31 workers."""
    import numpy as np

    from wire.fixedpoint import dequantize, max_scale_bits, quantize

    model = tr.build_model("mlp-1m", 0)
    n = sum(p.numel() for p in model.parameters())
    assert n == 1_126_410 and 4 * n >= 4_000_000
    assert ("mlp-1m", "digits") in tr.TARGET_ACCURACY and "mlp-1m" in tr.DEFAULT_LR
    data = tr.load_data("digits", 0)
    g = tr.flatten(tr.compute_gradients(model, data.x_train[:2], data.y_train[:2]))
    assert g.size == n and max_scale_bits(g, 31) >= 16
    assert np.abs(dequantize(quantize(g, 16, 31), 16) - g).max() <= 2.0 ** -16


def test_the_simulation_is_the_loops_arithmetic():
    """W ranks of hosts/loop.py in threads, summing through a barrier in rank order, end
    with exactly the weights of :func:`scaling.simulate` (same batches, same sums)."""
    import threading

    import numpy as np

    from hosts.loop import LoopConfig, ModelWork, Sync, SyncResult, TrainLoop, weights_hash

    world, batch, steps, epochs, lr, seed = 3, 4, 5, 2, 0.4, 1
    data = tr.load_data("digits", seed)
    grads: list[np.ndarray | None] = [None] * world
    total: list[np.ndarray] = []

    def add_in_rank_order() -> None:
        acc = np.zeros_like(grads[0])
        for g in grads:
            acc += g
        total[:] = [acc]

    barrier = threading.Barrier(world, action=add_in_rank_order)

    class BarrierSum(Sync):
        def __init__(self, rank: int) -> None:
            self.rank = rank

        def sync(self, grad: np.ndarray) -> SyncResult:
            grads[self.rank] = grad
            barrier.wait()  # the last to arrive sums every rank's gradient
            out = total[0].copy()
            barrier.wait()  # everyone has it before the next step overwrites it
            return SyncResult(sum=out)

    works = [ModelWork(tr.build_model("digits", seed), data, tr.worker_shard(data, r, world),
                       batch, seed) for r in range(world)]
    loops = [TrainLoop(LoopConfig(r, world, epochs, steps, lr, eval_every=None), works[r], BarrierSum(r))
             for r in range(world)]
    threads = [threading.Thread(target=lp.train) for lp in loops]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len({weights_hash(w.model) for w in works}) == 1
    sim = scaling.simulate("digits", "digits", seed, world, batch, lr, epochs, steps)
    assert sim["weights"] == weights_hash(works[0].model)
