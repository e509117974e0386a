"""The regime map: which scheme reaches the target accuracy first, as a function of the
worker count, the link rate, the network's oversubscription and the model's size
(``make regimes``, ``python -m bench regimes``; docs/harness.md, "Regime map").

One cell is (model, workers, network, link rate). Its time to target, per scheme, is

    steps to target x (compute per step + sync time per step)

- **Steps to target** are the same for every exact synchronous scheme at the same global
  batch (every rank applies the same sum): they come from the harness's own scaling rule
  and its in-process check (``experiments/scaling.py``: the fixed global batch of 64, the
  linearly scaled learning rate, ``scaling.simulate`` of the plan, which follows a real
  run's curve), one value per seed, on the digits data, the model's default target.
- **Compute per step**: one rank's gradient of its per-rank batch and the update, on one
  CPU thread of this machine (median of repeated measurements), or ``--compute-time``.
- **Sync per step**: ns-3 (``sim/``) where it models the scheme and the run fits the cost
  budget, with the ideal bound (``experiments/ideal.py`` with ns-3's switch traversal,
  ``sim/check_ideal.py``) beside it; the ideal bound alone where ns-3 would cost too much
  here. Emulated cells are not part of the map yet.

Since the steps are common to all schemes, the winner and its margin over the runner-up
(the ratio of their times per step) do not depend on the seed; the seeds give each
time's interval. ns-3 is deterministic: a simulated sync time has no interval.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: the schemes ns-3 models on a single-NIC network (BML needs BCube's k NICs a host)
SCHEMES = ("ps", "ina", "ring", "sharded_ps")
#: network name -> oversubscription (a leaf's host capacity over its uplinks')
NETWORKS = {"fat-tree": 1.0, "leaf-spine-2:1": 2.0, "leaf-spine-4:1": 4.0}
MODELS = ("digits", "mlp", "mlp-1m")
DATA = "digits"
#: leaf-spine shape: 2 spines, 4 hosts a leaf, as many leaves as the hosts need
SPINES, HOSTS_PER_LEAF = 2, 4
#: INA fragment size in values (the cost of a simulation grows with workers x fragments)
FRAGMENT_VALUES = 64
#: margins under this are reported as a tie: the compute measurement's own noise is larger
TIE = 1.05
SOURCES = ("ns-3", "ideal", "emulated")
#: INA's switches aggregate at line rate: the placement's capacity C unlimited (the
#: harness's 1000 Mbit/s would cap a switch at one 1 Gbit/s link's worth of input)
SWITCH_CAPACITY = math.inf


def network_spec(network: str, hosts: int, mbit: float) -> str:
    """The topology spec of ``network`` holding ``hosts`` hosts with links of ``mbit``:
    the smallest fat-tree (1:1), or a leaf-spine of 2 spines and 4 hosts a leaf whose
    leaf-spine links give ``NETWORKS[network]``:1."""
    if network not in NETWORKS:
        raise ValueError(f"unknown network {network!r} (known: {', '.join(NETWORKS)})")
    if network == "fat-tree":
        k = 4
        while k**3 // 4 < hosts:
            k += 2
        return f"fat-tree:{k},bw={mbit:g}"
    leaves = -(-hosts // HOSTS_PER_LEAF)
    return (f"leaf-spine:{SPINES},{leaves},{HOSTS_PER_LEAF},bw={mbit:g},"
            f"oversub={NETWORKS[network]:g}")


def sim_cost(workers: int, parameters: int) -> int:
    """Worker-fragments of one synchronization: what a simulation's events grow with."""
    return workers * -(-parameters // FRAGMENT_VALUES)


# ----------------------------------------------------------------------------- arithmetic


def step_time(compute_s: float, sync_s: float | None) -> float:
    """One training step: compute, then the synchronization (the loop does not overlap
    them); infinite when the synchronization did not finish."""
    return math.inf if sync_s is None else compute_s + sync_s


def time_to_target(steps: list[int | None], compute_s: float, sync_s: float | None) -> Any:
    """Mean and 95 % interval over the seeds of ``steps x (compute + sync)``; a seed
    that never reached the target is dropped (and counted) by ``mean_ci``."""
    from experiments.stats import mean_ci

    per = step_time(compute_s, sync_s)
    return mean_ci([None if s is None or math.isinf(per) else s * per for s in steps])


def winner(per_step: dict[str, float]) -> tuple[str, str, float]:
    """``(winner, runner-up, margin)``: the fastest scheme per step, the second, and the
    runner-up's time over the winner's (the steps cancel: the same for both)."""
    ranked = sorted(per_step, key=lambda s: (per_step[s], s))
    if len(ranked) < 2:
        return (ranked[0] if ranked else "-"), "-", math.inf
    a, b = per_step[ranked[0]], per_step[ranked[1]]
    return ranked[0], ranked[1], (b / a if a > 0 else math.inf)


@dataclass
class SchemeCell:
    """One scheme in one cell."""

    scheme: str
    sync_s: float | None  # per step, from ``source``
    source: str  # ns-3 | ideal | emulated
    ideal_s: float  # the ideal bound, beside it
    fidelity: str  # simulated (ns-3) | bound (ideal) | link-bound / emulator-bound (emulated)
    per_step_s: float = 0.0
    ttt: Any = None  # experiments.stats.Interval over the seeds

    @property
    def x_ideal(self) -> float | None:
        """Sync over its ideal bound."""
        return None if self.sync_s is None or not self.ideal_s else self.sync_s / self.ideal_s


@dataclass
class Cell:
    """One (model, workers, network, link rate) of the map."""

    model: str
    parameters: int
    workers: int
    network: str
    mbit: float
    spec: str
    steps: list[int | None]
    compute_s: float
    schemes: dict[str, SchemeCell] = field(default_factory=dict)
    winner: str = "-"
    runner_up: str = "-"
    margin: float = math.inf

    def decide(self) -> None:
        """Per-step and time-to-target figures of every scheme, then the winner."""
        for sc in self.schemes.values():
            sc.per_step_s = step_time(self.compute_s, sc.sync_s)
            sc.ttt = time_to_target(self.steps, self.compute_s, sc.sync_s)
        reached = any(s is not None for s in self.steps)
        finite = {s: c.per_step_s for s, c in self.schemes.items() if math.isfinite(c.per_step_s)}
        if reached and finite:
            self.winner, self.runner_up, self.margin = winner(finite)

    def as_dict(self) -> dict[str, Any]:
        """A plain dict (JSON)."""
        def iv(i: Any) -> dict[str, Any]:
            return {"mean": _num(i.mean), "low": _num(i.low), "high": _num(i.high), "n": i.n}

        return {"model": self.model, "parameters": self.parameters, "workers": self.workers,
                "network": self.network, "oversub": NETWORKS[self.network],
                "link_gbps": self.mbit / 1000, "topology": self.spec, "steps": self.steps,
                "compute_s": self.compute_s, "winner": self.winner,
                "runner_up": self.runner_up, "margin": _num(self.margin),
                "schemes": {s: {"sync_s": c.sync_s, "source": c.source, "ideal_s": c.ideal_s,
                                "x_ideal": c.x_ideal, "fidelity": c.fidelity,
                                "per_step_s": _num(c.per_step_s),
                                "time_to_target_s": iv(c.ttt)}
                            for s, c in self.schemes.items()}}


def _num(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else x


# ----------------------------------------------------------------------------- inputs


#: steps to target computed by :func:`steps_to_target` (``python -m bench regimes
#: --steps-table``), so the map does not train 36 simulations on every run; a missing entry
#: is computed
STEPS_FILE = Path(__file__).with_name("regimes_steps.json")


def known_steps(model: str, workers: int, seed: int) -> int | None:
    """:func:`steps_to_target`, from :data:`STEPS_FILE` where it has the entry."""
    table = json.loads(STEPS_FILE.read_text()) if STEPS_FILE.exists() else {}
    row = table.get("steps", {}).get(model, {}).get(str(workers), {})
    if str(seed) in row:
        return row[str(seed)]
    return steps_to_target(model, workers, seed)


def steps_to_target(model: str, workers: int, seed: int, epochs: int = 4) -> int | None:
    """Steps the harness's plan of ``model`` on ``workers`` ranks needs to reach its default
    target on digits (``scaling.simulate``, evaluated 4 times an epoch as the harness);
    None if it does not within ``epochs`` epochs."""
    from experiments import scaling
    from hosts import training as tr

    n_train = len(tr.load_data(DATA, seed).x_train)
    work = scaling.resolve(n_train, workers, global_batch=scaling.REFERENCE_GLOBAL_BATCH,
                           batch=None, lr=None, base_lr=tr.DEFAULT_LR[model])
    with _one_thread():  # a shared machine: torch's threads would only fight each other
        sim = scaling.simulate(model, DATA, seed, workers, work.batch, work.lr, epochs,
                               work.steps_per_epoch, target=tr.TARGET_ACCURACY[(model, DATA)])
    return sim["reached_step"]


@contextmanager
def _one_thread() -> Iterator[None]:
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def compute_per_step(model: str, workers: int, reps: int = 15) -> float:
    """One rank's compute per step of ``model`` at the plan's per-rank batch (64 // W):
    its gradient and the update, on one CPU thread, median of ``reps`` after a warm-up.
    CPU time, not wall time: on a shared machine the wall time measures the other jobs."""
    from experiments import scaling
    from hosts import training as tr

    batch = scaling.REFERENCE_GLOBAL_BATCH // workers
    with _one_thread():
        d = tr.load_data(DATA, 0)
        net = tr.build_model(model, 0)
        x, y = d.x_train[:batch], d.y_train[:batch]
        times = []
        for i in range(reps + 2):
            t0 = time.process_time()
            tr.apply_gradients(net, tr.compute_gradients(net, x, y), 0.0)
            if i >= 2:
                times.append(time.process_time() - t0)
    return statistics.median(times)


def parameters_of(model: str) -> int:
    """The model's parameter count (its gradient's values)."""
    from hosts import training as tr

    return sum(a.size for a in tr.parameter_arrays(tr.build_model(model, 0)))


def sync_figures(spec: str, scheme: str, workers: int, values: int, simulate: bool,
                 max_time: float = 60.0, budget: int = 2,
                 capacity: float = SWITCH_CAPACITY) -> dict[str, Any]:
    """One synchronization's figures: the ideal bound always, ns-3's time when
    ``simulate`` (a plain dict, cached by the bench); ``budget``: INA's K, ``capacity``
    its switches' (Mbit/s of input)."""
    from topologies.spec import parse_topology

    from . import check_ideal as ci

    if simulate:
        p = ci.compare(spec, scheme, workers, values, max_time=max_time, budget=budget,
                       capacity=capacity)
        return {"sim_s": p.sim_s, "ideal_s": p.ideal_bound_s, "retx": p.retransmissions,
                "wall_s": p.wall_s, "simulated": True}
    topo = parse_topology(spec)
    ps, ws = ci.placement(topo, scheme, workers)
    job = (ci.ina_job(topo, ps, ws, values, scheme == "ina", budget, capacity)
           if scheme in ("ps", "ina") else None)
    idl = ci.ideal(scheme, topo, ps, ws, values, job)
    k, b = idl.busiest()
    link_s = b * 8 / (idl.capacity[k] * 1e6) if b else 0.0
    return {"sim_s": None, "ideal_s": link_s + idl.steps * ci.hop_latency_s(ci.link_mbit(topo)),
            "simulated": False}


def scheme_cell(scheme: str, fig: dict[str, Any]) -> SchemeCell:
    """A scheme's place in a cell from its :func:`sync_figures`: ns-3's time where it ran
    (unfinished: None), else the ideal bound, marked as such."""
    if fig["simulated"]:
        return SchemeCell(scheme, fig["sim_s"], "ns-3", fig["ideal_s"], "simulated")
    return SchemeCell(scheme, fig["ideal_s"], "ideal", fig["ideal_s"], "bound")
