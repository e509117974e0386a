"""The greedy placement: add the switch with the best LP until K are placed."""

from __future__ import annotations

import time
from collections.abc import Callable

from .lp import _REL_TOL, _ZERO, _Model, _placement
from .problem import Placement, PlacementProblem, RoundTrace
from .symmetry import _Reduced, _Symmetry

__all__ = ["greedy_placement"]


def greedy_placement(
    problem: PlacementProblem,
    *,
    symmetry: bool | None = None,
    progress: Callable[[RoundTrace], None] | None = None,
) -> Placement:
    """The greedy placement.

    ``S = {}``; each round solves the LP for ``S + {s}`` for every unselected candidate
    ``s`` and moves the one with the largest gamma into ``S`` (ties: the earlier switch
    in graph order); stops when ``|S| = K``. Shortest paths are computed once; each
    round builds one LP model in which the candidate occupies a slot whose columns are
    re-pointed from candidate to candidate (see :class:`_Model`).

    ``symmetry``: candidates that an automorphism of the instance maps onto each other
    (same LP up to renaming links and workers, see :class:`_Symmetry`) share one LP,
    solved through its quotient (:class:`_Reduced`); the result is the same placement as
    with ``symmetry=False``, which solves every candidate's full LP. Default (None): on
    where the plain greedy would solve at least 200 LPs (below that its set-up costs
    more than it saves). ``progress`` is called after every round with its trace.
    """
    t0 = time.perf_counter()
    prob = problem
    if symmetry is None:
        n = len(prob.candidates)
        symmetry = sum(n - r for r in range(prob.budget)) >= 200
    sym = _Symmetry(prob) if symmetry and prob.budget > 0 else None
    red = _Reduced(prob) if sym is not None else None
    chosen: list[str] = []
    trace: list[RoundTrace] = []
    for rnd in range(prob.budget):
        fixed = [c for c in chosen if c != prob.tor]
        tor_on = not prob.tor_in_budget or prob.tor in chosen
        model: _Model | None = None

        def lp(s: str, fixed: list[str] = fixed, tor_on: bool = tor_on) -> float:
            """gamma of S + {s}: from the LP's quotient where that works, else from the
            round's model with the candidate slot pointed at s."""
            nonlocal model
            switches, on = (fixed, True) if s == prob.tor else ([*fixed, s], tor_on)
            if red is not None:
                val = red.gamma(switches, on)
                if val is not None:
                    return val
            if model is None:
                # A fresh model per round keeps the explicit zeros that re-pointing leaves
                # behind (pywraplp cannot delete a coefficient) from piling up over rounds.
                model = _Model(prob, len(fixed) + 1)
                for i, c in enumerate(fixed):
                    model.assign(i, c)
            model.assign(len(fixed), None if s == prob.tor else s)
            model.set_tor(on)
            return model.solve()

        remaining = [s for s in prob.candidates if s not in chosen]
        classes = sym.classes(chosen, remaining) if sym else [[s] for s in remaining]
        rep = {s: cls[0] for cls in classes for s in cls}
        scores: dict[str, float] = {}
        best: str | None = None
        for s in remaining:
            # a class shares the LP of its first member
            scores[s] = scores[rep[s]] if rep[s] in scores else lp(s)
            if best is None or scores[s] > scores[best] * (1 + _REL_TOL) + _ZERO:
                best = s
        assert best is not None  # budget <= len(candidates)
        chosen.append(best)
        trace.append(RoundTrace(rnd, best, scores[best], scores, len(classes)))
        if progress is not None:
            progress(trace[-1])
    gamma = trace[-1].gamma if trace else None
    return _placement(prob, "greedy", chosen, t0, trace=trace, gamma=gamma, reduced=red)
