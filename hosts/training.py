"""Real training shared by the techniques: a small CNN on scikit-learn's digits.

The digits data set (1,797 8×8 grey-scale images, 10 classes) ships inside
scikit-learn, so nothing is downloaded. Every technique that trains (differentiated
transmission, token broadcast, the DDP hook) uses the same model, split and seeds from
here, so their accuracies are comparable.

Typical data-parallel use::

    data = load_digits_split(seed=0)
    model = make_model(seed=0)
    x, y = worker_shard(data, rank, world)
    grads = compute_gradients(model, x_batch, y_batch)   # list of numpy float32 arrays
    ...                                                   # synchronise them over the network
    apply_gradients(model, summed, lr=0.1, scale=1 / world)
    acc = evaluate(model, data)

A user's own model plugs in the same way: any ``torch.nn.Module`` whose parameters
are what ``parameter_arrays`` / ``compute_gradients`` return (ordered as
``model.parameters()``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

try:
    import torch
    from torch import nn
except ImportError as exc:  # pragma: no cover - the train extra is part of make deps
    raise ImportError("training needs PyTorch: pip install -e '.[train]' (make deps does)") from exc


@dataclass
class DigitsData:
    """The digits set split once into train and test (tensors, images 1×8×8 in [0, 1])."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor


def load_digits_split(seed: int = 0, test_fraction: float = 0.25) -> DigitsData:
    """Load scikit-learn's bundled digits and split them reproducibly by ``seed``."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.images.astype(np.float32) / 16.0)[:, None, :, :]
    y = d.target.astype(np.int64)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(y))
    n_test = int(round(len(y) * test_fraction))
    test, train = order[:n_test], order[n_test:]
    return DigitsData(torch.from_numpy(x[train]), torch.from_numpy(y[train]),
                      torch.from_numpy(x[test]), torch.from_numpy(y[test]))


class DigitsCNN(nn.Module):
    """Two small convolutions and a linear classifier (3,818 parameters with the default 8 channels).

    The convolution weights give the structured tensors that differentiated transmission
    splits per kernel; the linear layer and the biases are split by block size.
    """

    def __init__(self, channels: int = 8) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, 2 * channels, 3, padding=1)
        self.fc = nn.Linear(2 * channels * 4 * 4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # noqa: D102
        x = torch.relu(self.conv1(x))
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def make_model(seed: int = 0, channels: int = 8) -> DigitsCNN:
    """The model with reproducible initial weights (same ``seed`` → same weights)."""
    torch.manual_seed(seed)
    return DigitsCNN(channels)


def worker_shard(data: DigitsData, rank: int, world: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The training examples of one worker: every ``world``-th example from ``rank``."""
    if not 0 <= rank < world:
        raise ValueError(f"rank {rank} out of range for {world} workers")
    return data.x_train[rank::world], data.y_train[rank::world]


def batches(x: torch.Tensor, y: torch.Tensor, batch_size: int, epoch: int,
            seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The shard's mini-batches of one epoch, shuffled reproducibly by (seed, epoch)."""
    g = torch.Generator().manual_seed(seed * 100_003 + epoch)
    order = torch.randperm(len(y), generator=g)
    return [(x[order[i:i + batch_size]], y[order[i:i + batch_size]])
            for i in range(0, len(y), batch_size)]


def compute_gradients(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> list[np.ndarray]:
    """Cross-entropy gradients of one batch, one float32 array per parameter."""
    model.zero_grad(set_to_none=True)
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    return [p.grad.detach().numpy().astype(np.float32, copy=True) for p in model.parameters()]


def parameter_arrays(model: nn.Module) -> list[np.ndarray]:
    """The model's parameters as float32 numpy copies (ordered as ``model.parameters()``)."""
    return [p.detach().numpy().astype(np.float32, copy=True) for p in model.parameters()]


def set_parameters(model: nn.Module, arrays: list[np.ndarray]) -> None:
    """Overwrite the model's parameters with ``arrays`` (shapes must match)."""
    params = list(model.parameters())
    if len(params) != len(arrays):
        raise ValueError(f"{len(arrays)} arrays for {len(params)} parameters")
    with torch.no_grad():
        for p, a in zip(params, arrays, strict=True):
            if tuple(a.shape) != tuple(p.shape):
                raise ValueError(f"shape {a.shape} does not match parameter {tuple(p.shape)}")
            p.copy_(torch.from_numpy(np.asarray(a, dtype=np.float32)))


def apply_gradients(model: nn.Module, grads: list[np.ndarray], lr: float, scale: float = 1.0) -> None:
    """Plain SGD step: w ← w − lr·scale·g (``scale`` = 1/n to average a sum of n)."""
    params = list(model.parameters())
    if len(params) != len(grads):
        raise ValueError(f"{len(grads)} gradients for {len(params)} parameters")
    with torch.no_grad():
        for p, g in zip(params, grads, strict=True):
            p.add_(torch.from_numpy(np.asarray(g, dtype=np.float32)).reshape(p.shape),
                   alpha=-lr * scale)


def evaluate(model: nn.Module, data: DigitsData) -> float:
    """Test accuracy in [0, 1]."""
    with torch.no_grad():
        pred = model(data.x_test).argmax(1)
    return float((pred == data.y_test).float().mean())


def flatten(arrays: list[np.ndarray]) -> np.ndarray:
    """Concatenate arrays into one float32 vector (see ``unflatten``)."""
    return np.concatenate([np.asarray(a, dtype=np.float32).ravel() for a in arrays])


def unflatten(vector: np.ndarray, like: list[np.ndarray]) -> list[np.ndarray]:
    """Split a vector back into arrays shaped like ``like``."""
    out, i = [], 0
    for a in like:
        out.append(np.asarray(vector[i:i + a.size], dtype=np.float32).reshape(a.shape))
        i += a.size
    if i != vector.size:
        raise ValueError(f"vector has {vector.size} values, the shapes need {i}")
    return out


# ----------------------------------------------------------------------------- flat models
# ``make compare`` carries a gradient of any size through the token nodes: the factory spec
# ``hosts.training:flat_<N>`` (``--model``) is a model with exactly N float32 parameters; the
# compare gives each node its gradient with ``--gradient``. Its forward pass returns zero
# logits for 10 classes (a token node evaluates at an epoch's end; the compare stops after
# one batch, before that).


class FlatModel(nn.Module):
    """One parameter vector of ``n`` values; not a classifier."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.zeros(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Zero logits (10 classes) that still depend on the parameters."""
        return torch.zeros(x.shape[0], 10) + 0.0 * self.w.sum()


def __getattr__(name: str) -> Callable[[], Any]:
    """``flat_<N>`` -> a factory of :class:`FlatModel` with ``N`` parameters."""
    prefix, _, n = name.partition("_")
    if prefix == "flat" and n.isdigit() and int(n) > 0:
        return lambda: FlatModel(int(n))
    raise AttributeError(name)
