"""The exact optimal placement as a MILP (small topologies)."""

from __future__ import annotations

import math
import time

from ortools.linear_solver import pywraplp

from .lp import _Model, _placement
from .problem import Placement, PlacementError, PlacementProblem

__all__ = ["optimal_placement"]


def optimal_placement(
    problem: PlacementProblem,
    *,
    time_limit_s: float = 60.0,
    solver: str = "HIGHS",
    lower_bound: float | None = None,
) -> Placement:
    """The exact optimum: the LP over all candidates plus binaries ``y_s``.

    ``sum_s y_s <= K``; every column of switch ``s`` is ``<= M * y_s`` with ``M`` the
    largest value it can take (a worker's access capacity, ``C / n_g``). Meant for small
    topologies. ``Placement.optimal`` says whether optimality was proven within
    ``time_limit_s``; ``upper_bound`` is the solver's bound on gamma. The reported
    rates come from :func:`solve_lp` on the chosen set. ``lower_bound``: a gamma known
    to be reachable (e.g. the greedy's), which prunes the search. Solvers: ``"HIGHS"``
    (default; much faster here) or ``"SCIP"``.
    """
    t0 = time.perf_counter()
    prob = problem
    cands = [s for s in prob.candidates if s != prob.tor]
    m = _Model(prob, len(cands), solver_id=solver)
    for i, s in enumerate(cands):
        m.assign(i, s)
    m.set_tor(True)
    sv, inf = m.solver, m.inf
    c = prob.switch_capacity
    big_x = [min(grp.access_cap, c / grp.size) for grp in prob._groups]
    big_out = min(max(big_x), c)  # a switch's output never needs to exceed its inputs
    big_o = max(grp.access_cap for grp in prob._groups)  # o <= gamma <= access capacity
    budget = sv.Constraint(-inf, prob.budget)
    y = []
    for i in range(len(cands)):
        yi = sv.BoolVar(f"y{i}")
        y.append(yi)
        budget.SetCoefficient(yi, 1)
        for j, mx in enumerate(big_x):
            sv.Add(m.x[i][j] <= mx * yi)
        if math.isfinite(c):  # sum of inputs <= C * y: tighter than the per-column bounds
            sv.Add(sum(grp.size * m.x[i][j] for j, grp in enumerate(prob._groups)) <= c * yi)
        sv.Add(m.a[i] <= big_out * yi)
        sv.Add(m.b[i] <= big_out * yi)
    y_tor = None
    if prob.tor_in_budget:
        y_tor = sv.BoolVar("y_tor")
        budget.SetCoefficient(y_tor, 1)
        for j, mx in enumerate(big_x):
            sv.Add(m.xt[j] <= mx * y_tor)
        for i in range(len(cands)):
            sv.Add(m.b[i] <= big_out * y_tor)
        sv.Add(m.o <= big_o * y_tor)
    if lower_bound is not None:
        # a gamma known to be reachable (e.g. the greedy's) prunes the search tree
        m.gamma.SetLb(lower_bound * (1 - 1e-6))
    sv.SetTimeLimit(int(time_limit_s * 1000))
    params = pywraplp.MPSolverParameters()
    params.SetDoubleParam(pywraplp.MPSolverParameters.RELATIVE_MIP_GAP, 1e-6)
    status = sv.Solve(params)
    if status not in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE):
        # HiGHS reports a time-out without incumbent as an unmapped status (99)
        raise PlacementError(
            f"MILP ({solver}) found no placement within {time_limit_s:g} s (status {status}); "
            "raise time_limit_s or use greedy_placement"
        )
    chosen = [s for s, yi in zip(cands, y, strict=True) if yi.solution_value() > 0.5]
    if y_tor is not None and y_tor.solution_value() > 0.5:
        chosen.append(prob.tor)
    bound = sv.Objective().BestBound()
    return _placement(
        prob,
        "milp",
        chosen,
        t0,
        optimal=status == pywraplp.Solver.OPTIMAL,
        upper_bound=bound if math.isfinite(bound) else None,
    )
