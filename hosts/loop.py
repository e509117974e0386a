"""The one data-parallel training loop every harness scheme's rank runs.

Every step: the gradient of the rank's next batch (compute; ``slow`` times slower, or a
fixed ``compute_time``, the rest slept through :meth:`Sync.idle`), then one call of the
scheme's :class:`Sync`, which answers with either the **sum** of every rank's gradient
(the loop applies ``w <- w - lr * sum / world``) or the new **parameters** (a parameter
server applied the update and sent them). The loop evaluates at step 0, every
``eval_every`` steps and at each epoch's end (rank 0 adds the test and held-out
accuracy; every rank its weights hash), leaves the evaluation time out of the training
clock ``t``, and ends with one summary line. What only one technique needs is a hook of
its Sync (:meth:`Sync.start`, :meth:`Sync.compute`, :meth:`Sync.idle`,
:meth:`Sync.should_stop`, :meth:`Sync.record`, :meth:`Sync.finish`,
:meth:`Sync.summary_line`), not another loop.

The JSON lines (stdout) are what ``experiments/train.py`` and its plugins read:
evaluation records ``{rank, epoch, step, t, weights, compute_s, sync_s[, accuracy,
heldout]}``, then ``{rank, done, steps, steps_per_epoch, t, eval_s, compute_s, sync_s,
cpu_s, weights, parameters, **sync.stats()}``; on a failed synchronization an ``error``
line and a summary with ``done`` false.
"""

from __future__ import annotations

import hashlib
import json
import resource
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["SYNCS", "LoopConfig", "ModelWork", "Sync", "SyncResult", "TrainLoop",
           "cpu_seconds", "emit", "sync_class", "weights_hash"]

#: Every harness scheme -> the Sync its ranks give this loop (``module:Class``, imported
#: only when asked: :func:`sync_class`).
SYNCS: dict[str, str] = {
    **dict.fromkeys(("gloo",), "hosts.trainer:GlooSum"),
    **dict.fromkeys(("ina", "ps"), "hosts.trainer:InaSum"),
    **dict.fromkeys(("ring", "bml", "rail_ring", "rail_sharded_ps"), "hosts.trainer:CollectiveSum"),
    # the GPUs; the PS (hosts.ndn.ps) applies the update and distributes the parameters
    **dict.fromkeys(("ndn", "ndn-ipmc", "ndn-tcp"), "hosts.ndn.gpu:NdnSync"),
    **dict.fromkeys(("differentiated", "differentiated-reliable", "differentiated-ef",
                     "differentiated-random-ef", "differentiated-topk-ef"),
                    "hosts.differentiated.worker:DiffWorker"),
    # the token protocol in its network thread; the Sync computes the batch the protocol
    # is on (partial gradients under a cutoff) and blocks while its node stands by
    "token": "hosts.token.sync:TokenSync",
}


def sync_class(scheme: str) -> type[Sync]:
    """The Sync class of harness scheme ``scheme`` (KeyError if none)."""
    import importlib

    module, _, name = SYNCS[scheme].partition(":")
    return getattr(importlib.import_module(module), name)


def emit(d: dict[str, Any]) -> None:
    """One JSON line on stdout, flushed (the harness reads them as they come)."""
    print(json.dumps(d), flush=True)


def cpu_seconds() -> float:
    """User + system CPU seconds of this process."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def weights_hash(model: Any) -> str:
    """A short hash of the model's parameters (equal models, equal hashes)."""
    return hashlib.sha256(np.concatenate(
        [p.detach().numpy().ravel() for p in model.parameters()]).tobytes()).hexdigest()[:16]


@dataclass
class SyncResult:
    """One synchronization's answer: ``sum`` (every rank's gradient summed; the loop
    applies the SGD step) or ``params`` (the new parameters, the update already applied
    by a PS); ``stop`` ends the training after this step (the PS said so)."""

    sum: np.ndarray | None = None
    params: np.ndarray | None = None
    stop: bool = False


class Sync:
    """What a scheme gives the loop: :meth:`sync` per step, :meth:`stats` for the
    summary, :meth:`close` at the end; the other methods are hooks with defaults."""

    def sync(self, grad: np.ndarray) -> SyncResult:
        """Synchronize this rank's flat float32 gradient of the current step."""
        raise NotImplementedError

    def stats(self) -> dict[str, Any]:
        """Fields the summary line adds (rounds, bytes, retransmissions...)."""
        return {}

    def close(self) -> None:
        """Release sockets and peers."""

    def start(self, loop: TrainLoop) -> None:
        """Before the training clock starts (connect, wait for a go, take parameters)."""

    def compute(self, loop: TrainLoop, epoch: int, i: int) -> np.ndarray | None:
        """The gradient to synchronize next (default: the loop's batch ``i`` of ``epoch``,
        :meth:`TrainLoop.compute`); None: no more work, the training ends."""
        return loop.compute(epoch, i)

    def idle(self, seconds: float) -> None:
        """Spend ``seconds`` of dilated compute (an agent keeps serving its packets)."""
        time.sleep(seconds)

    def should_stop(self, loop: TrainLoop) -> bool:
        """Whether to end before the next step (a deadline)."""
        return False

    def record(self, rec: dict[str, Any]) -> dict[str, Any] | None:
        """The evaluation record as this scheme prints it (None: print none)."""
        return rec

    def finish(self, summary: dict[str, Any]) -> None:
        """The summary is complete (before it is printed): e.g. hand it to a PS."""

    def summary_line(self, summary: dict[str, Any]) -> dict[str, Any] | None:
        """The summary line as this scheme prints it (None: print none)."""
        return summary


class FnSync(Sync):
    """A Sync from a function ``flat -> sum`` (tests, simple schemes)."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def sync(self, grad: np.ndarray) -> SyncResult:
        return SyncResult(sum=self.fn(grad))


@dataclass
class LoopConfig:
    """The loop's numbers: ``steps`` per epoch (the same on every rank), ``eval_every``
    (0: epoch ends only; None: no evaluation records), ``evaluate_accuracy`` (rank 0
    measures accuracy; False where a PS evaluates)."""

    rank: int
    world: int
    epochs: int
    steps: int
    lr: float
    eval_every: int | None = 0
    slow: float = 1.0
    compute_time: float = 0.0
    evaluate_accuracy: bool = True


class ModelWork:
    """The rank's model, data shard and batch order (``hosts.training``), or fixed
    gradients (``fixed``: no model; every step's gradient is that vector)."""

    def __init__(self, model: Any = None, data: Any = None, shard: Any = None, batch: int = 16,
                 batch_seed: int = 0, heldout: Any = None, fixed: np.ndarray | None = None) -> None:
        from hosts import training as tr

        self.tr, self.model, self.data, self.shard = tr, model, data, shard
        self.batch, self.batch_seed, self.heldout, self.fixed = batch, batch_seed, heldout, fixed
        self.like = tr.parameter_arrays(model) if model is not None else []
        self._epoch = -1
        self._batches: list[Any] = []

    def gradient(self, epoch: int, i: int) -> np.ndarray:
        """The flat gradient of batch ``i`` of ``epoch`` at the model's parameters."""
        if self.model is None:
            assert self.fixed is not None
            return self.fixed
        if epoch != self._epoch:
            self._epoch = epoch
            self._batches = self.tr.batches(*self.shard, self.batch, epoch, self.batch_seed)
        return self.tr.flatten(self.tr.compute_gradients(self.model, *self._batches[i]))

    def apply(self, res: SyncResult, lr: float, world: int) -> None:
        """The step: SGD with the sum, or the PS's parameters bit for bit."""
        if self.model is None:
            return
        if res.params is not None:
            self.tr.set_parameters(self.model, self.tr.unflatten(res.params, self.like))
        elif res.sum is not None:
            self.tr.apply_gradients(self.model, self.tr.unflatten(res.sum, self.like), lr,
                                    scale=1.0 / world)

    def weights(self) -> str | None:
        """The model's hash (None without a model)."""
        return weights_hash(self.model) if self.model is not None else None

    def parameters(self) -> int:
        """The model's size in values."""
        return int(sum(p.numel() for p in self.model.parameters())) if self.model is not None else 0

    def accuracy(self) -> dict[str, float]:
        """``{"test", "heldout"}`` accuracy (``hosts.training.evaluate_sets``)."""
        return self.tr.evaluate_sets(self.model, self.data, self.heldout)


class TrainLoop:
    """One rank's training: ``run()`` returns the exit status (0, or 1 on a failure)."""

    def __init__(self, cfg: LoopConfig, work: ModelWork, sync: Sync) -> None:
        self.cfg, self.work, self.sync = cfg, work, sync
        self.eval_s = self.compute_s = self.sync_s = 0.0
        self.done_steps = 0
        self.t_start = time.monotonic()
        self.cpu0 = 0.0

    def evaluate(self, epoch: int, step: int) -> None:
        """One evaluation record (its time left out of the training clock)."""
        if self.cfg.eval_every is None:
            return
        t0 = time.monotonic()
        rec: dict[str, Any] = {"rank": self.cfg.rank, "epoch": epoch, "step": step,
                               "t": round(t0 - self.t_start - self.eval_s, 4),
                               "weights": self.work.weights(),
                               "compute_s": round(self.compute_s, 4), "sync_s": round(self.sync_s, 4)}
        if self.cfg.rank == 0 and self.cfg.evaluate_accuracy:
            accs = self.work.accuracy()
            rec.update(accuracy=round(accs["test"], 4), heldout=round(accs["heldout"], 4))
        self.eval_s += time.monotonic() - t0
        out = self.sync.record(rec)
        if out is not None:
            emit(out)

    def compute(self, epoch: int, i: int) -> np.ndarray:
        """The gradient of batch ``i`` of ``epoch``, ``slow`` times as long (the rest idle)."""
        cfg = self.cfg
        t0 = time.monotonic()
        flat = self.work.gradient(epoch, i)
        spent = time.monotonic() - t0
        # a slow rank takes F times as long, measured or fixed (dilated) compute alike
        want = (cfg.compute_time or spent) * cfg.slow
        if want > spent:
            self.sync.idle(want - spent)
        return flat

    def step(self, epoch: int, i: int) -> bool:
        """Compute, synchronize, apply; whether the Sync asked to stop."""
        cfg = self.cfg
        t0 = time.monotonic()
        flat = self.sync.compute(self, epoch, i)
        t1 = time.monotonic()
        self.compute_s += t1 - t0
        if flat is None:  # the Sync has no more work for this rank
            return True
        res = self.sync.sync(flat)
        self.sync_s += time.monotonic() - t1
        self.work.apply(res, cfg.lr, cfg.world)
        self.done_steps += 1
        return res.stop

    def train(self) -> None:
        """Every epoch's steps, with the evaluations between them."""
        cfg, every = self.cfg, self.cfg.eval_every
        self.evaluate(0, 0)
        for epoch in range(cfg.epochs):
            for i in range(cfg.steps):
                if self.sync.should_stop(self):
                    return
                before = self.done_steps
                stop = self.step(epoch, i)
                if self.done_steps == before:  # the Sync had no more work
                    return
                # every ``eval_every`` steps, and at the epoch's end (once)
                if (every and self.done_steps % every == 0) or i == cfg.steps - 1:
                    self.evaluate(epoch + 1, self.done_steps)
                if stop:
                    return

    def summary(self, done: bool) -> dict[str, Any]:
        """The summary line's fields."""
        cfg, w = self.cfg, self.work
        out: dict[str, Any] = {
            "rank": cfg.rank, "done": done, "steps": self.done_steps, "steps_per_epoch": cfg.steps,
            "t": round(time.monotonic() - self.t_start - self.eval_s, 4), "eval_s": round(self.eval_s, 4),
            "compute_s": round(self.compute_s, 4), "sync_s": round(self.sync_s, 4),
            "cpu_s": round(cpu_seconds() - self.cpu0, 3)}
        if w.model is not None:
            out.update(weights=w.weights(), parameters=w.parameters())
        return {**out, **self.sync.stats()}

    def run(self) -> int:
        """Start the Sync, train, print the summary, close; 0, or 1 on a failure."""
        self.sync.start(self)
        self.cpu0, self.t_start = cpu_seconds(), time.monotonic()
        rc = 0
        try:
            self.train()
        except Exception as e:  # a lost peer or a timeout: report what we had
            emit({"rank": self.cfg.rank, "error": f"{type(e).__name__}: {e}"})
            rc = 1
        summary = self.summary(rc == 0 and self.done_steps >= self.cfg.epochs * self.cfg.steps)
        self.sync.finish(summary)
        line = self.sync.summary_line(summary)
        if line is not None:
            emit(line)
        self.sync.close()
        return rc
