"""The placement LP ("P2") for a fixed set of programmable switches.

:class:`_Model` is the LP in OR-Tools' pywraplp with re-assignable switch slots (the
greedy and the MILP build on it); :func:`solve_lp` solves it for one switch set.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
from ortools.linear_solver import pywraplp

from .problem import LPResult, Placement, PlacementError, PlacementProblem, _Group, _Route

__all__ = ["solve_lp"]

# Relative tolerance for "strictly better" in the greedy (ties keep the earlier switch)
# and for the traffic-minimising second LP phase.
_REL_TOL = 1e-7
# Rates below this fraction of gamma are solver noise and reported as 0.
_ZERO = 1e-9


class _Model:
    """The placement LP in OR-Tools' pywraplp with ``n_slots`` re-assignable switch slots.

    A slot holds the variables of one programmable switch; :meth:`assign` points a slot at
    a switch by rewriting only the link-row coefficients of its columns (the other rows
    are the same for every switch) or disables it through bounds. So the greedy builds
    one model per round and pays per candidate only for a few hundred coefficient updates
    and a solve that GLOP warm-starts from the previous candidate's basis. Columns/rows
    (names as in docs/placement.md), per worker group g:

      conservation   sum_i x[i,g] + xt[g] + xd[g] - gamma = 0
      output  (s_i)  a[i] + b[i] - x[i,g] >= 0
      carry   (s_i)  z[i,g] + a[i] - x[i,g] >= 0
      output  (s_d)  o - xt[g] - sum_i z[i,g] >= 0
      capacity       sum_g n_g x[i,g] <= C ;  sum_g n_g xt[g] + sum_i b[i] <= C
      link e         sum of (column * multiplicity) over the paths through e <= c_e
    """

    def __init__(self, prob: PlacementProblem, n_slots: int, solver_id: str = "GLOP") -> None:
        self.prob = prob
        self.solver_id = solver_id
        self.phase2: float | None = None
        self._build(n_slots)

    def _build(self, n_slots: int) -> None:
        prob = self.prob
        s = pywraplp.Solver.CreateSolver(self.solver_id)
        if s is None:  # pragma: no cover - OR-Tools build without the solver
            raise PlacementError(f"OR-Tools solver {self.solver_id} is not available")
        s.SuppressOutput()
        if self.solver_id == "HIGHS":
            s.SetSolverSpecificParametersAsString("output_flag=false")  # no banner
        self.solver = s
        inf = self.inf = s.infinity()
        groups = prob._groups
        cap = prob.switch_capacity if math.isfinite(prob.switch_capacity) else inf
        self.gamma = s.NumVar(0, inf, "gamma")
        self.xd = [s.NumVar(0, inf, f"xd{j}") for j in range(len(groups))]
        self.xt = [s.NumVar(0, inf, f"xt{j}") for j in range(len(groups))]
        self.o = s.NumVar(0, inf, "o")
        self.x = [[s.NumVar(0, 0, f"x{i}_{j}") for j in range(len(groups))] for i in range(n_slots)]
        self.z = [[s.NumVar(0, 0, f"z{i}_{j}") for j in range(len(groups))] for i in range(n_slots)]
        self.a = [s.NumVar(0, 0, f"a{i}") for i in range(n_slots)]
        self.b = [s.NumVar(0, 0, f"b{i}") for i in range(n_slots)]
        self._links: dict[int, pywraplp.Constraint] = {}
        self.slot_switch: list[str | None] = [None] * n_slots
        self.tor_on = True

        for j, grp in enumerate(groups):
            row = s.Constraint(0, 0)
            row.SetCoefficient(self.gamma, -1)
            row.SetCoefficient(self.xd[j], 1)
            row.SetCoefficient(self.xt[j], 1)
            for i in range(n_slots):
                row.SetCoefficient(self.x[i][j], 1)
            for i in range(n_slots):
                out = s.Constraint(0, inf)
                out.SetCoefficient(self.a[i], 1)
                out.SetCoefficient(self.b[i], 1)
                out.SetCoefficient(self.x[i][j], -1)
                carry = s.Constraint(0, inf)
                carry.SetCoefficient(self.z[i][j], 1)
                carry.SetCoefficient(self.a[i], 1)
                carry.SetCoefficient(self.x[i][j], -1)
            tor = s.Constraint(0, inf)
            tor.SetCoefficient(self.o, 1)
            tor.SetCoefficient(self.xt[j], -1)
            for i in range(n_slots):
                tor.SetCoefficient(self.z[i][j], -1)
            self._add_path(self.xd[j], prob._apath(grp.rep, prob.ps), grp)
            self._add_path(self.xt[j], prob._apath(grp.rep, prob.tor), grp)
        for i in range(n_slots):
            row = s.Constraint(-inf, cap)
            for j, grp in enumerate(groups):
                row.SetCoefficient(self.x[i][j], grp.size)
        row = s.Constraint(-inf, cap)
        for j, grp in enumerate(groups):
            row.SetCoefficient(self.xt[j], grp.size)
        for i in range(n_slots):
            row.SetCoefficient(self.b[i], 1)
        self._add_path(self.o, prob._apath(prob.tor, prob.ps), None)
        s.Objective().SetCoefficient(self.gamma, 1)
        s.Objective().SetMaximization()

    def _link(self, arc: int) -> pywraplp.Constraint:
        row = self._links.get(arc)
        if row is None:
            row = self._links[arc] = self.solver.Constraint(-self.inf, self.prob._arc_cap[arc])
        return row

    def _add_path(
        self,
        var: pywraplp.Variable,
        path: _Route,
        grp: _Group | None,
    ) -> None:
        n = grp.size if grp is not None else 1
        priv = grp.private_arc if grp is not None else None
        for arc, f in path:
            self._link(arc).SetCoefficient(var, f if arc == priv else f * n)

    def assign(self, i: int, switch: str | None) -> None:
        """Point slot ``i`` at ``switch`` (None: disable the slot)."""
        old_sw = self.slot_switch[i]
        if old_sw == switch:
            return
        prob = self.prob
        old = prob._slot_terms(old_sw) if old_sw is not None else {}
        new = prob._slot_terms(switch) if switch is not None else {}
        x, a, b = self.x[i], self.a[i], self.b[i]

        def col(j: int) -> pywraplp.Variable:
            return x[j] if j >= 0 else (a if j == -1 else b)

        # only touch what differs: paths to different switches share many links
        for key in old.keys() - new.keys():
            self._link(key[0]).SetCoefficient(col(key[1]), 0)
        for key, c in new.items():
            if old.get(key) != c:
                self._link(key[0]).SetCoefficient(col(key[1]), c)
        self.slot_switch[i] = switch
        ub = 0 if switch is None else self.inf
        if (old_sw is None) != (switch is None):
            for var in (*x, *self.z[i], a):
                var.SetUb(ub)
            b.SetUb(ub if self.tor_on else 0)

    def set_tor(self, on: bool) -> None:
        """Let ``s_d`` aggregate or not (only varies with ``tor_in_budget``)."""
        self.tor_on = on
        ub = self.inf if on else 0
        for var in (*self.xt, self.o):
            var.SetUb(ub)
        for i, sw in enumerate(self.slot_switch):
            self.b[i].SetUb(ub if sw is not None else 0)

    def solve(self) -> float:
        """Solve; return gamma."""
        status = self.solver.Solve()
        if status == pywraplp.Solver.ABNORMAL and self.solver_id == "GLOP":
            # GLOP warm-starts from the last basis inside a model that pywraplp edits in
            # place (a cleared coefficient stays as an explicit 0); after many edits that
            # start can fail. A freshly built copy of the same LP solves normally.
            self.rebuild()
            status = self.solver.Solve()
        if status not in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE):
            raise PlacementError(f"LP solver returned status {status} (not optimal)")
        return self.gamma.solution_value()

    def rebuild(self) -> None:
        """Rebuild the solver model from scratch in the current state."""
        slots, tor, phase2 = list(self.slot_switch), self.tor_on, self.phase2
        self._build(len(slots))
        for i, sw in enumerate(slots):
            self.assign(i, sw)
        self.set_tor(tor)
        if phase2 is not None:
            self.minimize_traffic(phase2)

    def traffic_weights(self) -> dict[pywraplp.Variable, float]:
        """Phase 2's objective: each column's traffic per unit (hops times multiplicity)."""
        prob = self.prob
        weight: dict[pywraplp.Variable, float] = {self.o: prob._hops(prob.tor, prob.ps)}
        for j, grp in enumerate(prob._groups):
            weight[self.xd[j]] = grp.size * prob._hops(grp.rep, prob.ps)
            weight[self.xt[j]] = grp.size * prob._hops(grp.rep, prob.tor)
        for i, sw in enumerate(self.slot_switch):
            if sw is None:
                continue
            for j, grp in enumerate(prob._groups):
                weight[self.x[i][j]] = grp.size * prob._hops(grp.rep, sw)
            weight[self.a[i]] = prob._hops(sw, prob.ps)
            weight[self.b[i]] = prob._hops(sw, prob.tor)
        return weight

    def minimize_traffic(self, gamma: float) -> None:
        """Phase 2: among the solutions with (almost) this gamma, minimise total link
        traffic, so that the reported rates have no gratuitous detours or idle flows."""
        self.phase2 = gamma
        self.gamma.SetLb(gamma * (1 - _REL_TOL))
        obj = self.solver.Objective()
        obj.Clear()
        for var, w in self.traffic_weights().items():
            obj.SetCoefficient(var, w)
        obj.SetMinimization()

    def reduced_traffic_weights(self, cols: dict[int, int]) -> np.ndarray:
        """:meth:`traffic_weights` as an array over ``_Reduced.matrix``'s columns
        (``cols``: :meth:`reduced_columns`)."""
        weights = np.zeros(max(cols.values()) + 1)
        for var, w in self.traffic_weights().items():
            weights[cols[var.index()]] = w
        return weights

    def reduced_columns(self) -> dict[int, int]:
        """Each variable's index -> its column in ``_Reduced.matrix`` (slot i there is
        slot i here)."""
        n_g = len(self.prob._groups)
        out = {self.gamma.index(): 0, self.o.index(): 1 + 2 * n_g}
        for j in range(n_g):
            out[self.xd[j].index()] = 1 + j
            out[self.xt[j].index()] = 1 + n_g + j
        for i in range(len(self.slot_switch)):
            c0 = 2 + 2 * n_g + i * (2 * n_g + 2)
            for j in range(n_g):
                out[self.x[i][j].index()] = c0 + j
                out[self.z[i][j].index()] = c0 + n_g + j
            out[self.a[i].index()] = c0 + 2 * n_g
            out[self.b[i].index()] = c0 + 2 * n_g + 1
        return out

    # -------------------------------------------------------------- extraction
    def result(self, values: Callable[[pywraplp.Variable], float] | None = None) -> LPResult:
        """The solution as an :class:`LPResult`; ``values``: each variable's value where
        it comes from elsewhere than this model's solve (the quotient's lifted solution)."""
        prob = self.prob
        value = values if values is not None else pywraplp.Variable.solution_value
        gamma = value(self.gamma)
        eps = _ZERO * max(gamma, 1.0)

        def val(v: pywraplp.Variable) -> float:
            x = value(v)
            return x if x > eps else 0.0

        slots = [(i, sw) for i, sw in enumerate(self.slot_switch) if sw is not None]
        loads = [0.0] * len(prob._arcs)

        def load(path: _Route, grp: _Group | None, x: float) -> None:
            if not x:
                return
            for arc, f in path:
                if grp is not None and arc == grp.private_arc:
                    # every member has its own access link with the same load
                    for w in grp.members:
                        nb = next(iter(prob.graph[w]))
                        loads[prob._arc_index[(w, nb)]] += x * f
                else:
                    loads[arc] += x * f * (grp.size if grp is not None else 1)

        rates: dict[str, dict[str, float]] = {}
        for j, grp in enumerate(prob._groups):
            r: dict[str, float] = {sw: val(self.x[i][j]) for i, sw in slots}
            r[prob.tor] = val(self.xt[j]) if self.tor_on else 0.0
            r[prob.ps] = val(self.xd[j])
            for w in grp.members:
                rates[w] = dict(r)
            for _, sw in slots:
                load(prob._apath(grp.rep, sw), grp, r[sw])
            load(prob._apath(grp.rep, prob.tor), grp, r[prob.tor])
            load(prob._apath(grp.rep, prob.ps), grp, r[prob.ps])
        switch_out: dict[str, float] = {}
        via_tor: dict[str, float] = {}
        for i, sw in slots:
            a, b = val(self.a[i]), val(self.b[i])
            switch_out[sw], via_tor[sw] = a + b, b
            load(prob._apath(sw, prob.ps), None, a)
            load(prob._apath(sw, prob.tor), None, b)
        if self.tor_on:
            switch_out[prob.tor] = val(self.o)
            load(prob._apath(prob.tor, prob.ps), None, switch_out[prob.tor])
        link_loads = {prob._arcs[a]: x for a, x in enumerate(loads) if x > 0}
        return LPResult(
            gamma=gamma,
            switches=tuple(sw for _, sw in slots),
            tor=prob.tor,
            tor_active=self.tor_on,
            ps=prob.ps,
            rates=rates,
            switch_out=switch_out,
            via_tor=via_tor,
            link_loads=link_loads,
        )


def _split(prob: PlacementProblem, switches: Iterable[str]) -> tuple[list[str], bool]:
    """Validate a switch set; return (switches other than s_d, whether s_d aggregates)."""
    others: list[str] = []
    tor_on = not prob.tor_in_budget
    for s in switches:
        if s == prob.tor:
            tor_on = True
            continue
        if s not in prob.graph or prob.graph.nodes[s].get("kind") != "switch":
            raise PlacementError(f"{s!r} is not a switch of the graph")
        if s not in prob.candidates:
            raise PlacementError(f"switch {s!r} cannot reach the parameter server")
        if s in others:
            raise PlacementError(f"switch {s!r} is listed twice")
        others.append(s)
    return others, tor_on


def solve_lp(
    problem: PlacementProblem,
    switches: Iterable[str],
    *,
    gamma: float | None = None,
    reduced: Any = None,
) -> LPResult:
    """Solve the placement LP for the programmable switches ``switches`` (any number).

    Two phases: maximise gamma; then, keeping gamma (to a relative 1e-7), minimise the
    total link traffic so that the reported rates are a tidy optimal solution. ``s_d`` in
    ``switches`` is a no-op unless ``tor_in_budget``.

    ``gamma`` and ``reduced`` (a :class:`~controller.placement.symmetry._Reduced` of this
    problem): the greedy's last round has already solved phase 1 through the quotient;
    phase 2 is then solved through the quotient too (seconds instead of half a minute
    at fat-tree k=32), its solution lifted to every column. Where the quotient does not
    pay off or cannot be trusted, both phases run on the full LP as without them.
    """
    others, tor_on = _split(problem, switches)
    m = _Model(problem, len(others))
    for i, s in enumerate(others):
        m.assign(i, s)
    m.set_tor(tor_on)
    if reduced is not None and gamma is not None and gamma > 0:
        cols = m.reduced_columns()
        x = reduced.tidy(others, tor_on, gamma, m.reduced_traffic_weights(cols))
        if x is not None:
            return m.result(lambda v: float(x[cols[v.index()]]))
    gamma = m.solve()
    m.minimize_traffic(gamma)
    m.solve()
    return m.result()


def _placement(
    problem: PlacementProblem,
    method: str,
    switches: Sequence[str],
    t0: float,
    *,
    gamma: float | None = None,
    reduced: Any = None,
    **kw: Any,
) -> Placement:
    res = solve_lp(problem, switches, gamma=gamma, reduced=reduced)
    return Placement(
        method=method,
        switches=tuple(switches),
        gamma=res.gamma,
        result=res,
        problem=problem,
        solve_time_s=time.perf_counter() - t0,
        **kw,
    )
