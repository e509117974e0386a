"""Flat stand-in models for ``make compare``: ``hosts.compare_model:flat_<N>`` is a factory
of a model with exactly ``N`` float32 parameters, so a token node (``--model``) carries
a gradient of any size; the compare gives each node its gradient with ``--gradient``.

Its forward pass returns zero logits for 10 classes (the token node evaluates the model
at an epoch's end; the compare stops after one batch, before that).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn


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
