"""A network held by ``gradctl net up``, as its run directory records it.

:func:`held_state` reads its ``net.json`` (topology, spec), :func:`held_loss` and
:func:`save_held_loss` its link emulation (``loss.json``): every deploy against the run
directory installs that again with its pipeline. Errors are :class:`DeployError` with a
one-line message.
"""

from __future__ import annotations

import json
import os
from typing import Any

from controller.p4runtime import DeployError
from topologies.spec import parse_loss

__all__ = ["HELD_LOSS_FILE", "held_loss", "held_state", "save_held_loss"]

HELD_LOSS_FILE = "loss.json"


def held_state(run_dir: str | None) -> dict[str, Any] | None:
    """``net.json`` of a network held by ``gradctl net up`` in ``run_dir`` (None when
    ``run_dir`` is none or holds no such network, e.g. a test's bare run directory)."""
    if not run_dir:
        return None
    path = os.path.join(run_dir, "net.json")
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            state = json.load(f)
    except (OSError, ValueError) as e:
        raise DeployError(f"{path}: unreadable network state ({e})") from None
    return state if isinstance(state, dict) and state.get("topology") else None


def held_loss(run_dir: str | None) -> dict[tuple[str, int], float]:
    """The link emulation (``{(switch, port): rate}``) a held network runs with: its
    ``net up --loss`` and later ``gradctl deploy --loss`` changes (``DIR/loss.json``);
    every deploy against the run directory installs it again with its pipeline."""
    if not run_dir or held_state(run_dir) is None:
        return {}
    path = os.path.join(run_dir, HELD_LOSS_FILE)
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            specs = json.load(f)
        return dict(parse_loss(f"{k}={v}") for k, v in specs.items())
    except (OSError, ValueError, AttributeError) as e:
        raise DeployError(f"{path}: unreadable loss settings ({e})") from None


def save_held_loss(run_dir: str, loss: dict[tuple[str, int], float]) -> None:
    """Record a held network's link emulation (see :func:`held_loss`)."""
    path = os.path.join(run_dir, HELD_LOSS_FILE)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({f"{s}:{p}": r for (s, p), r in sorted(loss.items())}, f, indent=1)
    os.replace(tmp, path)
