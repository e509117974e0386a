"""What the NDN agents train: a synthetic model (deterministic gradients, plain SGD), the
digits CNN (:class:`DigitsTrainer`), or the time-to-accuracy harness's work
(:class:`HarnessWork`, ``experiments/train.py``: the PS's side of the agents'
``--train-model`` option; the GPUs run the one loop of :mod:`hosts.loop`); and the CPU
time they report."""

from __future__ import annotations

import resource
from collections.abc import Sequence
from typing import Any

import numpy as np

from wire import argtypes

__all__ = [
    "DigitsTrainer",
    "HarnessWork",
    "add_harness_args",
    "cpu_seconds",
    "initial_params",
    "sgd_step",
    "synthetic_gradient",
]


def synthetic_gradient(params: np.ndarray, gpu: int, step: int, seed: int) -> np.ndarray:
    """A deterministic gradient-like float32 array that depends on the parameters it was
    computed on (so a GPU that missed an update would send a different gradient)."""
    rng = np.random.default_rng([seed, gpu, step])
    noise = (rng.standard_normal(params.size) * 0.01).astype(np.float32)
    return (noise + np.float32(0.01) * params).astype(np.float32)


def initial_params(n_values: int, seed: int) -> np.ndarray:
    """The PS's model initialisation (synthetic model)."""
    rng = np.random.default_rng([seed, 999])
    return (rng.standard_normal(n_values) * 0.1).astype(np.float32)


def sgd_step(params: np.ndarray, grads: list[np.ndarray], lr: float) -> np.ndarray:
    """``params - lr * mean(grads)`` in float32, summing in the given order."""
    total = np.zeros_like(params, dtype=np.float32)
    for g in grads:
        total = (total + g).astype(np.float32)
    return (params - np.float32(lr) * (total / np.float32(len(grads)))).astype(np.float32)


class DigitsTrainer:
    """Real gradients: ``hosts/training.py``'s digits CNN (3,818 float32 values) on this
    GPU's shard, one mini-batch per step, as a flat float32 vector."""

    def __init__(self, rank: int, world: int, seed: int, batch_size: int = 32) -> None:
        import torch

        from hosts import training as tr

        torch.set_num_threads(1)   # many agents share few cores
        self.tr = tr
        self.seed = seed
        self.batch_size = batch_size
        self.data = tr.load_digits_split(seed)
        self.model = tr.make_model(seed)
        self.like = tr.parameter_arrays(self.model)
        self.x, self.y = tr.worker_shard(self.data, rank, world) if world else (None, None)

    @staticmethod
    def initial(seed: int) -> np.ndarray:
        """The model's initial parameters (the PS's model initialisation data)."""
        from hosts import training as tr

        return tr.flatten(tr.parameter_arrays(tr.make_model(seed)))

    def gradient(self, params: np.ndarray, step: int) -> np.ndarray:
        """Cross-entropy gradient of mini-batch ``step`` at ``params``."""
        tr = self.tr
        tr.set_parameters(self.model, tr.unflatten(params, self.like))
        n_batches = max(1, -(-len(self.y) // self.batch_size))
        xb, yb = tr.batches(self.x, self.y, self.batch_size, step // n_batches, self.seed)[step % n_batches]
        return tr.flatten(tr.compute_gradients(self.model, xb, yb)).astype(np.float32)

    def accuracy(self, params: np.ndarray) -> float:
        """Test accuracy of ``params``."""
        self.tr.set_parameters(self.model, self.tr.unflatten(params, self.like))
        return float(self.tr.evaluate(self.model, self.data))


def add_harness_args(p: Any, role: str) -> Any:
    """The options of the time-to-accuracy harness's work (``experiments/train_ndn.py``),
    shared by the PS and the GPU (``role``); returns the argument group."""
    h = p.add_argument_group("the time-to-accuracy harness's work (experiments/train_ndn.py)")
    h.add_argument("--train-model", default="", metavar="NAME",
                   help="train hosts.training's model NAME as hosts/trainer.py does (sets --values; "
                        + ("every GPU must accept; evaluation records on stdout)" if role == "ps" else
                           "shard --gpu-index of --world; --compute-time then fixes each batch's "
                           "compute, 0: real)"))
    h.add_argument("--data", default="digits", help="--train-model: data set (hosts.training.load_data)")
    h.add_argument("--batch", type=argtypes.count, default=16, help="--train-model: per-GPU batch size")
    h.add_argument("--steps-per-epoch", type=argtypes.count, default=1,
                   help="--train-model: rounds per epoch (--rounds = epochs x this)")
    h.add_argument("--eval-every", type=argtypes.natural, default=0,
                   help="--train-model: evaluate (PS) or report weights (GPU) every K versions "
                        "besides each epoch's end (0: epochs only)")
    return h


def cpu_seconds() -> float:
    """User + system CPU seconds of this process."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class HarnessWork:
    """The time-to-accuracy harness's work (``experiments/train.py``): exactly what
    ``hosts/trainer.py`` trains, so that the NDN PS trains the same thing as every other
    scheme.

    ``hosts.training.build_model(model, seed)`` (initial weights), ``load_data(data,
    seed)``, rank ``rank``'s shard of ``world`` (``worker_shard``; ``rank`` None at the PS,
    which holds no shard), per-rank batch ``batch``, batch order ``batches(x, y, batch,
    epoch, seed)`` cut to the first ``steps_per_epoch`` full batches, and the SGD step
    ``w <- w - lr * sum / n`` of ``hosts.training.apply_gradients``. Round ``k`` (0-based)
    is batch ``k % steps_per_epoch`` of epoch ``k // steps_per_epoch``. Evaluations happen
    where the trainer's do: at version 0, every ``eval_every`` versions and at each epoch's
    end.
    """

    def __init__(self, model: str, data: str, seed: int, batch: int, steps_per_epoch: int,
                 eval_every: int = 0, rank: int | None = None, world: int = 1) -> None:
        import torch

        from hosts import training as tr

        if batch < 1 or steps_per_epoch < 1 or eval_every < 0:
            raise ValueError("--batch and --steps-per-epoch must be >= 1, --eval-every >= 0")
        torch.set_num_threads(1)   # many agents share few cores
        self.tr = tr
        self.seed, self.batch, self.steps_per_epoch, self.eval_every = seed, batch, steps_per_epoch, eval_every
        self.model = tr.build_model(model, seed)
        self.like = tr.parameter_arrays(self.model)
        self.data = tr.load_data(data, seed)
        self.x = self.y = None
        if rank is not None:
            self.x, self.y = tr.worker_shard(self.data, rank, world)
            if len(self.y) // batch < steps_per_epoch:
                raise ValueError(f"rank {rank}'s shard has {len(self.y) // batch} full batches of "
                                 f"{batch}, fewer than --steps-per-epoch {steps_per_epoch}")
        self._epoch = -1
        self._batches: list[Any] = []
        self._heldout: Any = None

    @property
    def values(self) -> int:
        """The model's size in float32 values."""
        return int(sum(a.size for a in self.like))

    def params(self) -> np.ndarray:
        """The model's parameters as one float32 vector."""
        return self.tr.flatten(self.tr.parameter_arrays(self.model))

    def load(self, params: np.ndarray) -> None:
        """Set the model's parameters to ``params`` (bit for bit)."""
        self.tr.set_parameters(self.model, self.tr.unflatten(params, self.like))

    def gradient(self, params: np.ndarray, step: int) -> np.ndarray:
        """The gradient of round ``step``'s batch at ``params`` (float32 vector)."""
        epoch, i = divmod(step, self.steps_per_epoch)
        if epoch != self._epoch:
            self._epoch = epoch
            self._batches = self.tr.batches(self.x, self.y, self.batch, epoch, self.seed)[:self.steps_per_epoch]
        self.load(params)
        xb, yb = self._batches[i]
        return self.tr.flatten(self.tr.compute_gradients(self.model, xb, yb)).astype(np.float32)

    def apply(self, grads: Sequence[np.ndarray], lr: float) -> np.ndarray:
        """The SGD step on the model's own parameters with the float32 sum of ``grads``
        (summed in the given order); returns the new parameters."""
        total = np.zeros(self.values, dtype=np.float32)
        for g in grads:
            total = (total + np.asarray(g, dtype=np.float32)).astype(np.float32)
        self.tr.apply_gradients(self.model, self.tr.unflatten(total, self.like), lr, scale=1.0 / len(grads))
        return self.params()

    def apply_slice(self, params: np.ndarray, grads: Sequence[np.ndarray], lr: float) -> np.ndarray:
        """:meth:`apply`'s step on a slice of the flat parameters (an update streamed
        segment by segment): the float32 sum of ``grads`` in the given order, then the
        same in-place ``add_(sum, alpha=-lr / n)`` as ``hosts.training.apply_gradients``.
        The caller loads the whole result with :meth:`load` once every slice is done."""
        import torch

        total = np.zeros(len(params), dtype=np.float32)
        for g in grads:
            total = (total + np.asarray(g, dtype=np.float32)).astype(np.float32)
        out = torch.from_numpy(np.array(params, dtype=np.float32))
        with torch.no_grad():
            out.add_(torch.from_numpy(total), alpha=-lr * (1.0 / len(grads)))
        return out.numpy()

    def weights(self) -> str:
        """``hosts.loop.weights_hash`` of the model (equal models, equal hashes)."""
        from hosts.loop import weights_hash

        return weights_hash(self.model)

    def evaluate(self) -> dict[str, float]:
        """``{"test", "heldout"}`` accuracy of the model (``hosts.training.evaluate_sets``)."""
        if self._heldout is None:
            self._heldout = self.tr.heldout_set(self.data, self.seed)
        return self.tr.evaluate_sets(self.model, self.data, self._heldout)

    def is_eval_point(self, version: int) -> bool:
        """Whether the trainer evaluates after ``version`` steps."""
        return (version == 0 or version % self.steps_per_epoch == 0
                or bool(self.eval_every and version % self.eval_every == 0))

    def epoch_of(self, version: int) -> int:
        """The trainer's ``epoch`` field of an evaluation after ``version`` steps."""
        return 0 if version == 0 else (version - 1) // self.steps_per_epoch + 1
