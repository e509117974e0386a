"""How the harness's training work scales with the worker count, and whether a plan can
reach its target (``experiments/train.py``'s plan and ``--dry-run``).

The rule: **a fixed global batch**. ``--global-batch G`` (default
:data:`REFERENCE_GLOBAL_BATCH`, 64) is split over the W ranks: each rank's batch is
``b = G // W`` (the remainder ``G mod W`` is dropped, so the effective global batch is
``b * W <= G``, the same on every scheme and seed), and an epoch is one pass over the
training set whatever W: ``(n_train // W) // b`` steps (every rank's full batches; the
same count on every rank). The learning rate follows the linear-scaling rule from the
model's :data:`hosts.training.DEFAULT_LR`, calibrated at the reference global batch:
``lr = DEFAULT_LR * b * W / G_ref``, so a global batch rounded down by the remainder gets a
proportionally smaller step. ``--batch b`` fixes the per-rank batch instead (the global
batch is then ``b * W`` and the same linear rule scales the learning rate; the loop has no
warm-up, so a scaled-up rate is what ``--dry-run`` checks); ``--lr`` overrides the rule.

Why it is exact to check in one process: every rank's loop applies ``w <- w - lr * S / W``
with ``S`` the sum of the ranks' mean gradients of their batches (``hosts/loop.py``), so
:func:`simulate`, which sums the ranks' gradients of the same batches each step with the
same ``hosts.training`` functions, follows the curve of a real run (up to the summation
order, and the fixed-point rounding of ina/ps).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

REFERENCE_GLOBAL_BATCH = 64
"""The global batch :data:`hosts.training.DEFAULT_LR` and the targets were measured at
(4 ranks of 16)."""

#: Above this many (parameters x samples) of training, ``--dry-run`` uses the cheap rule
#: only (the digits models' default plans, mlp-1m's included, are under it: seconds in process).
SIMULATION_BUDGET = 2e10

#: Epochs (passes over the training set, at the reference global batch) the median seed
#: needed to reach the default target (``hosts.training.TARGET_ACCURACY``'s table); a plan
#: that trains on fewer samples than this cannot be expected to reach it.
MEDIAN_EPOCHS_TO_TARGET: dict[tuple[str, str], float] = {
    ("digits", "digits"): 2.67, ("digits-wide", "digits"): 1.82, ("mlp", "digits"): 2.47,
    ("mlp-1m", "digits"): 1.7,
    ("digits", "synthetic"): 2.38, ("digits-wide", "synthetic"): 2.40, ("mlp", "synthetic"): 2.59,
    ("mlp-1m", "synthetic"): 2.0,
}


class ScalingError(ValueError):
    """A batch that cannot be split over the workers."""


@dataclass
class Work:
    """The training work every rank of every scheme gets (the same numbers for all)."""

    batch: int          # per rank
    global_batch: int   # batch * world: what one SGD step averages over
    lr: float
    steps_per_epoch: int
    rule: str           # one line for the plan: how these were derived
    notes: list[str] = field(default_factory=list)


def resolve(n_train: int, world: int, *, global_batch: int, batch: int | None, lr: float | None,
            base_lr: float, max_steps: int = 0) -> Work:
    """The per-rank batch, effective global batch, learning rate and steps per epoch of
    ``world`` ranks on ``n_train`` examples (see the module doc); raises
    :class:`ScalingError` when a rank would have no full batch."""
    shard = n_train // world
    if batch is None:
        b = global_batch // world
        if b < 1:
            raise ScalingError(f"--global-batch {global_batch} split over --workers {world}: a rank "
                               f"has no full batch (give --global-batch >= {world} or --batch)")
        how = f"--global-batch {global_batch} over {world} ranks"
        if b * world != global_batch:
            how += f", remainder {global_batch - b * world} dropped"
    else:
        b, how = batch, f"--batch {batch} per rank"
    if shard // b < 1:
        raise ScalingError(f"--batch {b}: a shard of {shard} examples has no full batch")
    g = b * world
    if lr is None:
        lr = base_lr * g / REFERENCE_GLOBAL_BATCH
        lr_how = f"lr {lr:.4g} = {base_lr:g} x {g}/{REFERENCE_GLOBAL_BATCH} (linear scaling)"
    else:
        lr_how = f"lr {lr:g} (--lr)"
    steps = shard // b
    if max_steps > 0:
        steps = min(steps, max_steps)
    rule = f"global batch {g} = {b} per rank x {world} ({how}); {lr_how}"
    return Work(b, g, float(lr), steps, rule)


# ----------------------------------------------------------------------------- the check


def simulate(model: str, data: str, seed: int, world: int, batch: int, lr: float, epochs: int,
             steps: int, eval_every: int = 0, target: float | None = None) -> dict[str, Any]:
    """Train ``world`` simulated ranks in this process as the harness's loop does: each
    step, every rank's gradient of its batch (``worker_shard``, ``batches(..., seed)``:
    ``hosts.trainer``'s order) summed and applied with ``lr / world``. Evaluates the test
    accuracy at ``eval_every`` steps (default 4 per epoch) and each epoch's end; stops
    early once ``target`` is reached. Returns ``{"curve": [(step, acc)], "reached_step",
    "final", "best", "weights"}`` (the final weights' ``hosts.loop.weights_hash``)."""
    import numpy as np
    import torch

    from hosts import training as tr

    every = eval_every or max(1, steps // 4)
    with torch.random.fork_rng(devices=[]):
        d = tr.load_data(data, seed)
        net = tr.build_model(model, seed)
        shards = [tr.worker_shard(d, r, world) for r in range(world)]
        curve, reached, done = [(0, tr.evaluate(net, d))], None, 0
        for epoch in range(epochs):
            order = [tr.batches(*shards[r], batch, epoch, seed)[:steps] for r in range(world)]
            for i in range(steps):
                total = [np.zeros_like(a) for a in tr.parameter_arrays(net)]
                for r in range(world):
                    for t, g in zip(total, tr.compute_gradients(net, *order[r][i]), strict=True):
                        t += g
                tr.apply_gradients(net, total, lr, scale=1.0 / world)
                done += 1
                if done % every == 0 or i == steps - 1:
                    curve.append((done, tr.evaluate(net, d)))
                    if reached is None and target is not None and curve[-1][1] >= target:
                        reached = done
                        break
            if reached is not None:
                break
    from hosts.loop import weights_hash

    accs = [a for _, a in curve]
    return {"curve": curve, "reached_step": reached, "final": accs[-1], "best": max(accs),
            "weights": weights_hash(net)}


def check(model: str, data: str, seed: int, world: int, work: Work, epochs: int, n_train: int,
          parameters: int, target: float, simulate_ok: bool = True) -> list[str]:
    """Warnings (one line each, with the numbers) when the plan is unlikely to reach
    ``target`` in ``epochs`` epochs: the cheap rule (fewer samples than the median seed
    needed for the default target, when ``target`` is at least that; an epoch under half
    the training set) always, then the in-process :func:`simulate` of seed ``seed`` when its cost is
    under :data:`SIMULATION_BUDGET`. Empty: nothing against the plan."""
    from hosts import training as tr

    warns = []
    samples = epochs * work.steps_per_epoch * work.global_batch
    need = MEDIAN_EPOCHS_TO_TARGET.get((model, data))
    default = tr.TARGET_ACCURACY.get((model, data))  # the median was measured for it
    if need is not None and default is not None and target >= default and samples < need * n_train:
        warns.append(f"{epochs} epochs x {work.steps_per_epoch} steps x global batch {work.global_batch} "
                     f"= {samples:,} samples: the median seed needs about {need:g} epochs "
                     f"({need * n_train:,.0f} samples) to reach {target:.0%}")
    if work.steps_per_epoch * work.global_batch < n_train // 2:
        warns.append(f"an epoch is {work.steps_per_epoch} steps of {work.global_batch}: under half "
                     f"of the {n_train:,} training examples (--max-steps?)")
    if simulate_ok and parameters * samples <= SIMULATION_BUDGET:
        sim = simulate(model, data, seed, world, work.batch, work.lr, epochs, work.steps_per_epoch,
                       target=target)
        if sim["reached_step"] is None:
            warns.append(f"in-process simulation of {world} ranks (seed {seed}, batch {work.batch} per "
                         f"rank, lr {work.lr:.4g}, {epochs * work.steps_per_epoch} steps): "
                         f"{target:.0%} not reached (best {sim['best']:.2f}, final {sim['final']:.2f})")
    return warns


# ----------------------------------------------------------------------------- the harness


def plan_work(args: Any, n_train: int) -> tuple[Work, float]:
    """``gradctl train``'s options -> the :class:`Work` of every rank and the target
    accuracy; raises ``HarnessError`` (one line) for what cannot run."""
    from experiments.harness_records import HarnessError
    from hosts import training as tr

    try:
        work = resolve(n_train, args.workers, global_batch=args.global_batch, batch=args.batch,
                       lr=args.lr, base_lr=tr.DEFAULT_LR.get(args.model, 0.1),
                       max_steps=args.max_steps)
    except ScalingError as e:
        raise HarnessError(str(e)) from None
    target = args.target_accuracy
    if target is None:
        target = tr.TARGET_ACCURACY.get((args.model, args.data))
        if target is None:
            raise HarnessError(f"no default target for --model {args.model} --data {args.data}: "
                               "give --target-accuracy")
    if not 0 < target <= 1:
        raise HarnessError("--target-accuracy must be in (0, 1]")
    return work, target


def plan_warnings(plan: Any, args: Any) -> list[str]:
    """:func:`check` of a harness plan (its first seed), for ``--dry-run`` and the run's start."""
    work = Work(plan.batch, plan.global_batch, plan.lr, plan.steps_per_epoch, plan.rule)
    return check(args.model, args.data, plan.seeds[0], len(plan.workers), work, args.epochs,
                 plan.n_train, plan.parameters, plan.target_accuracy)
