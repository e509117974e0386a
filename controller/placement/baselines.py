"""Baseline placements, each evaluated by the same LP as the greedy."""

from __future__ import annotations

import random
import time

from .lp import _placement
from .problem import Placement, PlacementProblem

__all__ = ["degree_first_placement", "random_placement", "tor_first_placement"]


def random_placement(problem: PlacementProblem, seed: int = 0) -> Placement:
    """K candidates drawn uniformly at random (``random.Random(seed)``)."""
    t0 = time.perf_counter()
    chosen = random.Random(seed).sample(list(problem.candidates), problem.budget)
    return _placement(problem, f"random(seed={seed})", chosen, t0)


def tor_first_placement(problem: PlacementProblem) -> Placement:
    """ToR/edge switches first: most workers directly attached, then smallest total hop
    distance to the workers, then graph order."""
    t0 = time.perf_counter()
    prob = problem
    attached = dict.fromkeys(prob.candidates, 0)
    for w in prob.workers:
        for n in prob.graph[w]:
            if n in attached:
                attached[n] += 1
    order = {s: i for i, s in enumerate(prob.candidates)}

    def key(s: str) -> tuple[int, float, int]:
        dist = sum(grp.size * prob._hops(grp.rep, s) for grp in prob._groups)
        return (-attached[s], dist, order[s])

    chosen = sorted(prob.candidates, key=key)[: prob.budget]
    return _placement(prob, "tor-first", chosen, t0)


def degree_first_placement(problem: PlacementProblem) -> Placement:
    """Highest-degree switches first (ties: graph order)."""
    t0 = time.perf_counter()
    deg = problem.graph.degree
    order = {s: i for i, s in enumerate(problem.candidates)}
    chosen = sorted(problem.candidates, key=lambda s: (-deg[s], order[s]))[: problem.budget]
    return _placement(problem, "degree-first", chosen, t0)
