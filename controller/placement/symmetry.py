"""Placement of K programmable switches for in-network aggregation (seed 002).

Given a topology (``networkx.Graph``: nodes ``kind`` = ``"host"``/``"switch"``, edges
``capacity`` in Mbit/s), one parameter server (PS) ``d``, its workers ``W``, a budget
``K`` of programmable switches and a per-switch processing capacity ``C``, choose the
switches ``S`` that maximise the aggregation throughput ``gamma`` and the per-worker
split of the gradient stream over them (the gradient routing policy).

* :class:`PlacementProblem` validates the input and precomputes shortest paths.
* :func:`solve_lp` solves the seed's LP ("P2") for a fixed ``S``.
* :func:`greedy_placement` is the seed's greedy (S = {}; add the switch whose LP has
  the largest gamma; stop at |S| = K).
* :func:`optimal_placement` is the exact optimum as a MILP (small topologies).
* :func:`random_placement`, :func:`tor_first_placement`, :func:`degree_first_placement`
  are baselines, each evaluated by the same LP.
* :func:`routing_policy` turns the LP's rates into per-fragment switch tags.

The LP, the treatment of the PS's ToR switch ``s_d`` and the tag rule are written down
in ``docs/placement.md``. In short: ``s_d`` always aggregates and is outside the budget
(``tor_in_budget=True`` makes it an ordinary candidate that needs a budget slot); flows
follow one shortest path each (``multipath=True``: split evenly over equal-cost next
hops, the expected load of ECMP routing).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np
from ortools.linear_solver import pywraplp

__all__ = [
    "LPResult",
    "Placement",
    "PlacementError",
    "PlacementProblem",
    "RoundTrace",
    "RoutingPolicy",
    "degree_first_placement",
    "greedy_placement",
    "optimal_placement",
    "random_placement",
    "routing_policy",
    "solve_lp",
    "tor_first_placement",
]

Arc = tuple[str, str]
# A route as the LP sees it: (arc index, share of the flow on that arc) pairs.
_Route = tuple[tuple[int, float], ...]

# Relative tolerance for "strictly better" in the greedy (ties keep the earlier switch)
# and for the traffic-minimising second LP phase.
_REL_TOL = 1e-7
# Rates below this fraction of gamma are solver noise and reported as 0.
_ZERO = 1e-9


class PlacementError(ValueError):
    """The placement input is invalid, or a solver failed on it."""


# --------------------------------------------------------------------------- problem


@dataclass(frozen=True)
class _Group:
    """Workers the LP may treat as one: same single access link type to the same switch.

    Such workers are interchangeable (swapping two of them maps every LP solution to
    another one with the same gamma), so averaging an optimal solution over them is
    optimal too: one set of per-worker variables per group is exact, and it shrinks
    fat-tree LPs by the number of hosts per edge switch.
    """

    members: tuple[str, ...]
    rep: str
    # Arc index of rep's own access link (it carries only rep's flows: coefficient 1
    # instead of len(members)); None for a multi-homed worker.
    private_arc: int | None
    # Total capacity of rep's links: no worker can push more than this (MILP big-M).
    access_cap: float

    @property
    def size(self) -> int:
        return len(self.members)


class PlacementProblem:
    """A validated placement instance with precomputed shortest paths.

    Args:
        graph: the topology (a ``networkx.Graph``, or anything with a ``.graph``
            attribute such as ``topologies.Topology``). Every edge needs ``capacity``
            (Mbit/s, > 0).
        ps: the parameter server ``d`` (a host).
        workers: the worker hosts ``W`` (non-empty, distinct, not the PS).
        budget: ``K``, the number of programmable switches to place
            (0 <= K <= number of candidate switches).
        switch_capacity: ``C``, the processing capacity of a programmable switch:
            the sum of its input rates, in the same unit as link capacities (> 0;
            ``math.inf`` for unlimited).
        ps_tor: ``s_d``, the PS's ToR switch. Default: the PS's neighbouring switch
            (if it has several: the one on the widest link, then the first in graph
            order).
        tor_in_budget: if False (default, the seed's model) ``s_d`` always aggregates
            and is not a candidate; if True it aggregates only when chosen, like any
            other switch, and takes one of the K slots.
        full_duplex: if True (default) every link has capacity ``c_e`` in each
            direction; if False both directions share ``c_e``.
        multipath: if False (default, the seed's model) a flow follows one shortest
            path (:meth:`path`); if True it is split evenly over the equal-cost next
            hops at every switch, the expected load of hash-based ECMP (which
            ``controller/routing.py`` installs).

    Raises:
        PlacementError: on any invalid input (message names the offending item).
    """

    def __init__(
        self,
        graph: nx.Graph | Any,
        ps: str,
        workers: Iterable[str],
        budget: int,
        switch_capacity: float,
        *,
        ps_tor: str | None = None,
        tor_in_budget: bool = False,
        full_duplex: bool = True,
        multipath: bool = False,
    ) -> None:
        # nx.Graph itself has a .graph (its attribute dict): unwrap only non-graphs
        g = graph if isinstance(graph, nx.Graph) else getattr(graph, "graph", graph)
        if not isinstance(g, nx.Graph) or g.is_directed() or g.is_multigraph():
            raise PlacementError(
                f"graph must be an undirected networkx.Graph (or a Topology), got {type(graph).__name__}"
            )
        self.graph: nx.Graph = g
        self.full_duplex = bool(full_duplex)
        self.multipath = bool(multipath)
        self.tor_in_budget = bool(tor_in_budget)

        # -- PS and workers
        self.ps = self._check_host(ps, "parameter server")
        if isinstance(workers, str):
            raise PlacementError("workers must be a collection of host names, not one string")
        ws = list(workers)
        if not ws:
            raise PlacementError("no workers given")
        seen: set[str] = set()
        for w in ws:
            self._check_host(w, "worker")
            if w == self.ps:
                raise PlacementError(f"worker {w!r} is the parameter server itself")
            if w in seen:
                raise PlacementError(f"worker {w!r} is listed twice")
            seen.add(w)
        self.workers: tuple[str, ...] = tuple(ws)

        # -- numbers
        if isinstance(budget, bool) or not isinstance(budget, int | np.integer):
            raise PlacementError(f"budget K must be an integer, got {budget!r}")
        if budget < 0:
            raise PlacementError(f"budget K must be >= 0, got {budget}")
        try:
            cap = float(switch_capacity)
        except (TypeError, ValueError):
            raise PlacementError(
                f"switch capacity C must be a number, got {switch_capacity!r}"
            ) from None
        if not cap > 0:  # also rejects NaN
            raise PlacementError(f"switch capacity C must be > 0, got {switch_capacity!r}")
        self.switch_capacity = cap

        # -- links: arc index <-> (u, v), capacity per arc
        self._arc_index: dict[Arc, int] = {}
        self._arcs: list[Arc] = []
        self._arc_cap: list[float] = []
        for u, v, data in g.edges(data=True):
            c = data.get("capacity")
            try:
                c = float(c)  # type: ignore[arg-type]
            except (TypeError, ValueError):
                raise PlacementError(
                    f"link {u}-{v} has no numeric 'capacity' (got {data.get('capacity')!r})"
                ) from None
            if not c > 0:
                raise PlacementError(f"link {u}-{v} has capacity {c}, must be > 0")
            self._arc_index[(u, v)] = len(self._arcs)
            self._arcs.append((u, v))
            self._arc_cap.append(c)
            if self.full_duplex:
                self._arc_index[(v, u)] = len(self._arcs)
                self._arcs.append((v, u))
                self._arc_cap.append(c)
            else:
                self._arc_index[(v, u)] = self._arc_index[(u, v)]

        # -- reachability from the PS (one BFS; also the paths toward d)
        self._parents: dict[str, dict[str, str | None]] = {}
        self._dists: dict[str, dict[str, int]] = {}
        self._adj: dict[str, list[str]] | None = None
        reach = self._tree(self.ps)
        lost = [w for w in self.workers if w not in reach]
        if lost:
            more = f" (and {len(lost) - 5} more)" if len(lost) > 5 else ""
            raise PlacementError(
                f"no path between the parameter server {self.ps!r} and worker(s) "
                f"{', '.join(map(repr, lost[:5]))}{more}: the graph is disconnected"
            )

        # -- s_d, the PS's ToR switch
        tors = [n for n in g[self.ps] if g.nodes[n].get("kind") == "switch"]
        if ps_tor is None:
            if not tors:
                raise PlacementError(f"parameter server {self.ps!r} has no neighbouring switch")
            ps_tor = max(tors, key=lambda n: g[self.ps][n]["capacity"])  # first max wins
        elif ps_tor not in tors:
            raise PlacementError(
                f"ps_tor {ps_tor!r} is not a switch adjacent to the parameter server {self.ps!r}"
            )
        self.tor: str = ps_tor

        # -- candidates: reachable switches in graph order (s_d only if in the budget)
        self.switches: tuple[str, ...] = tuple(
            n for n, k in g.nodes(data="kind") if k == "switch" and n in reach
        )
        self.candidates: tuple[str, ...] = tuple(
            s for s in self.switches if self.tor_in_budget or s != self.tor
        )
        if budget > len(self.candidates):
            why = (
                ""
                if self.tor_in_budget
                else f", not counting the PS's ToR {self.tor!r} which always aggregates"
            )
            raise PlacementError(
                f"budget K={budget} exceeds the {len(self.candidates)} candidate switches{why}"
            )
        self.budget = int(budget)

        # -- worker groups
        by_key: dict[tuple[Any, ...], list[str]] = {}
        for w in self.workers:
            nbrs = list(g[w])
            key: tuple[Any, ...] = (
                ("leaf", nbrs[0], float(g[w][nbrs[0]]["capacity"]))
                if len(nbrs) == 1
                else ("solo", w)
            )
            by_key.setdefault(key, []).append(w)
        self._groups: list[_Group] = []
        for key, members in by_key.items():
            rep = members[0]
            private = self._arc_index[(rep, key[1])] if key[0] == "leaf" else None
            access = sum(float(d["capacity"]) for d in g[rep].values())
            self._groups.append(_Group(tuple(members), rep, private, access))

        # Cache of arc paths: (src, dst) -> tuple of arc indices.
        self._path_cache: dict[tuple[str, str], tuple[int, ...]] = {}
        self._terms_cache: dict[str, dict[tuple[int, int], float]] = {}

    # ---------------------------------------------------------------- validation
    def _check_host(self, name: Any, what: str) -> str:
        if not isinstance(name, str) or name not in self.graph:
            raise PlacementError(f"{what} {name!r} is not a node of the graph")
        kind = self.graph.nodes[name].get("kind")
        if kind != "host":
            raise PlacementError(f"{what} {name!r} is not a host (kind={kind!r})")
        return name

    # ---------------------------------------------------------------- paths
    def _tree(self, root: str) -> dict[str, str | None]:
        """BFS parent pointers toward ``root`` (cached); deterministic in graph order."""
        tree = self._parents.get(root)
        if tree is None:
            if self._adj is None:  # plain lists: much faster to walk than nx's views
                self._adj = {n: list(nbrs) for n, nbrs in self.graph.adj.items()}
            adj = self._adj
            tree = {root: None}
            dist = {root: 0}
            frontier = [root]
            while frontier:
                nxt = []
                for u in frontier:
                    for v in adj[u]:
                        if v not in tree:
                            tree[v] = u
                            dist[v] = dist[u] + 1
                            nxt.append(v)
                frontier = nxt
            self._parents[root] = tree
            self._dists[root] = dist
        return tree

    def path(self, src: str, dst: str) -> list[str]:
        """The shortest path ``src -> dst`` the LP routes on (deterministic).

        It follows the BFS tree rooted at ``dst`` (neighbours in graph order), so all
        paths toward one destination form a tree; the routing layer should use the same
        paths for the LP's link loads to hold.
        """
        for n in (src, dst):
            if n not in self.graph:
                raise PlacementError(f"{n!r} is not a node of the graph")
        tree = self._tree(dst)
        if src not in tree:
            raise PlacementError(f"no path from {src!r} to {dst!r}")
        out = [src]
        while out[-1] != dst:
            out.append(tree[out[-1]])  # type: ignore[arg-type]
        return out

    def next_hops_toward(self, dst: str) -> dict[str, str]:
        """``{switch: neighbour}``: where each switch forwards toward ``dst`` on the
        paths the LP routes on (:meth:`path`). Empty with ``multipath`` (the LP then
        models ECMP, which the routing layer's groups implement). Switches whose next
        node is a host are left out (hosts do not forward)."""
        if self.multipath:
            return {}
        tree = self._tree(dst)
        kinds = self.graph.nodes
        return {u: v for u, v in tree.items()
                if v is not None and kinds[u].get("kind") == "switch"
                and kinds[v].get("kind") == "switch"}

    def _apath(self, src: str, dst: str) -> _Route:
        """The arcs a flow ``src -> dst`` loads, with the share of the flow on each
        (all 1.0 on a single path; ECMP splits with ``multipath``). Cached."""
        key = (src, dst)
        p = self._path_cache.get(key)
        if p is None:
            p = self._ecmp(src, dst) if self.multipath else self._single(src, dst)
            self._path_cache[key] = p
        return p

    def _single(self, src: str, dst: str) -> _Route:
        nodes = self.path(src, dst)
        return tuple((self._arc_index[(a, b)], 1.0) for a, b in zip(nodes, nodes[1:], strict=False))

    def _ecmp(self, src: str, dst: str) -> _Route:
        """Even split over the equal-cost next hops at every node, hop by hop."""
        self._tree(dst)
        dist, adj = self._dists[dst], self._adj
        assert adj is not None
        if src not in dist:
            raise PlacementError(f"no path from {src!r} to {dst!r}")
        share: dict[str, float] = {src: 1.0}
        out: dict[int, float] = {}
        while share and dst not in share:
            nxt: dict[str, float] = {}
            for u, f in share.items():
                d = dist[u] - 1
                hops = [v for v in adj[u] if dist.get(v) == d]
                part = f / len(hops)
                for v in hops:
                    arc = self._arc_index[(u, v)]
                    out[arc] = out.get(arc, 0.0) + part
                    nxt[v] = nxt.get(v, 0.0) + part
            share = nxt
        return tuple(out.items())

    def _hops(self, src: str, dst: str) -> float:
        """Hop count of ``src -> dst`` (any shortest path: all have this length)."""
        return sum(f for _, f in self._apath(src, dst))

    def _slot_terms(self, switch: str) -> dict[tuple[int, int], float]:
        """Link-row coefficients of a slot pointed at ``switch`` (cached):
        ``(arc, j) -> coefficient`` for the column x[., j] of group j, ``j = -1`` for
        a (switch -> PS) and ``j = -2`` for b (switch -> s_d)."""
        terms = self._terms_cache.get(switch)
        if terms is None:
            terms = {}
            for j, grp in enumerate(self._groups):
                for arc, f in self._apath(grp.rep, switch):
                    terms[(arc, j)] = f if arc == grp.private_arc else f * grp.size
            for arc, f in self._apath(switch, self.ps):
                terms[(arc, -1)] = f
            for arc, f in self._apath(switch, self.tor):
                terms[(arc, -2)] = f
            self._terms_cache[switch] = terms
        return terms

    def switch_ids(self) -> dict[str, int]:
        """Tag value of every switch: its ``device_id`` when all switches have distinct
        positive ones, else 1..N in graph order (0 is reserved for "no aggregation")."""
        sws = [n for n, k in self.graph.nodes(data="kind") if k == "switch"]
        ids = [self.graph.nodes[s].get("device_id") for s in sws]
        if all(isinstance(i, int) and i > 0 for i in ids) and len(set(ids)) == len(ids):
            return dict(zip(sws, ids, strict=True))
        return {s: i + 1 for i, s in enumerate(sws)}

    def __repr__(self) -> str:
        return (
            f"PlacementProblem(ps={self.ps!r}, workers={len(self.workers)}, K={self.budget}, "
            f"C={self.switch_capacity}, tor={self.tor!r}, candidates={len(self.candidates)})"
        )


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class LPResult:
    """Optimal solution of the LP for one set of programmable switches.

    Attributes:
        gamma: the aggregation throughput: the rate every worker pushes (Mbit/s).
        switches: the programmable switches ``S`` (excluding ``s_d``).
        tor: ``s_d``, the PS's ToR switch (aggregates if ``tor_active``).
        tor_active: whether ``s_d`` aggregates in this solution.
        rates: ``rates[w][t]`` = rate worker ``w`` sends to be aggregated at ``t``:
            ``t`` in ``switches``, ``t == tor`` (aggregated at ``s_d``) or ``t == ps``
            (sent straight to the PS, not aggregated). ``sum(rates[w].values()) == gamma``.
        switch_out: aggregated output rate of each switch in ``switches`` (and of
            ``s_d`` when active).
        via_tor: part of ``switch_out[s]`` sent to ``s_d`` to be merged again there
            (the rest goes straight to the PS).
        link_loads: load of every loaded link: key ``(u, v)`` is the direction u->v when
            full duplex, else the edge as ``graph.edges`` lists it.
    """

    gamma: float
    switches: tuple[str, ...]
    tor: str
    tor_active: bool
    ps: str
    rates: dict[str, dict[str, float]]
    switch_out: dict[str, float]
    via_tor: dict[str, float]
    link_loads: dict[Arc, float]


@dataclass(frozen=True)
class RoundTrace:
    """One greedy round: the switch kept, its gamma, the gamma of every candidate, and how
    many LPs were solved for them (fewer than candidates where symmetric candidates
    share one LP, see :func:`greedy_placement`)."""

    round: int
    chosen: str
    gamma: float
    scores: dict[str, float]
    lp_solves: int = 0


@dataclass(frozen=True)
class Placement:
    """A placement ``S`` with its LP solution.

    ``switches`` is in selection order for the greedy. ``gamma``/``rates`` are those of
    ``result``. ``optimal``/``upper_bound`` are set by :func:`optimal_placement`
    (whether the MILP proved optimality, and the solver's bound on gamma).
    """

    method: str
    switches: tuple[str, ...]
    gamma: float
    result: LPResult
    problem: PlacementProblem = field(repr=False)
    trace: list[RoundTrace] = field(default_factory=list, repr=False)
    solve_time_s: float = 0.0
    optimal: bool | None = None
    upper_bound: float | None = None

    @property
    def rates(self) -> dict[str, dict[str, float]]:
        """Per-worker split rates (see :class:`LPResult`)."""
        return self.result.rates


# --------------------------------------------------------------------------- the LP


class _Model:
    """The seed's LP in OR-Tools' pywraplp with ``n_slots`` re-assignable switch slots.

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

    def minimize_traffic(self, gamma: float) -> None:
        """Phase 2: among the solutions with (almost) this gamma, minimise total link
        traffic, so that the reported rates have no gratuitous detours or idle flows."""
        prob = self.prob
        self.phase2 = gamma
        self.gamma.SetLb(gamma * (1 - _REL_TOL))
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
        obj = self.solver.Objective()
        obj.Clear()
        for var, w in weight.items():
            obj.SetCoefficient(var, w)
        obj.SetMinimization()

    # -------------------------------------------------------------- extraction
    def result(self) -> LPResult:
        prob = self.prob
        gamma = self.gamma.solution_value()
        eps = _ZERO * max(gamma, 1.0)

        def val(v: pywraplp.Variable) -> float:
            x = v.solution_value()
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


def solve_lp(problem: PlacementProblem, switches: Iterable[str]) -> LPResult:
    """Solve the seed's LP for the programmable switches ``switches`` (any number).

    Two phases: maximise gamma; then, keeping gamma (to a relative 1e-7), minimise the
    total link traffic so that the rates are a tidy optimal solution. ``s_d`` in
    ``switches`` is a no-op unless ``tor_in_budget``.
    """
    others, tor_on = _split(problem, switches)
    m = _Model(problem, len(others))
    for i, s in enumerate(others):
        m.assign(i, s)
    m.set_tor(tor_on)
    gamma = m.solve()
    m.minimize_traffic(gamma)
    m.solve()
    return m.result()


def _placement(
    problem: PlacementProblem, method: str, switches: Sequence[str], t0: float, **kw: Any
) -> Placement:
    res = solve_lp(problem, switches)
    return Placement(
        method=method,
        switches=tuple(switches),
        gamma=res.gamma,
        result=res,
        problem=problem,
        solve_time_s=time.perf_counter() - t0,
        **kw,
    )


# --------------------------------------------------------------------------- symmetry


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: a well-spread 64-bit hash of each element (wraps mod 2^64)."""
    x = x.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


def _refine(colors: np.ndarray, src: np.ndarray, dst: np.ndarray, lab: np.ndarray) -> np.ndarray:
    """Colour refinement (1-WL): a node's new colour is its old one plus the multiset of
    (label, colour) over its in-arcs, until the number of colours stops growing. Colours
    are ranks of hashes of that history, so they do not depend on node numbering and two
    copies refined together get comparable colours."""
    lab_h = _mix(lab.astype(np.uint64) + np.uint64(0x51ED27))
    n_col = len(np.unique(colors))
    for _ in range(len(colors)):
        acc = np.zeros(len(colors), dtype=np.uint64)
        np.add.at(acc, dst, _mix(lab_h ^ colors[src].astype(np.uint64)))
        key = _mix(colors.astype(np.uint64)) ^ (acc * np.uint64(0xD6E8FEB86659FD93))
        _, new = np.unique(key, return_inverse=True)
        new = new.astype(np.int64).ravel()
        m = int(new.max()) + 1 if len(new) else 0
        colors = new
        if m <= n_col:
            break
        n_col = m
    return colors


class _Symmetry:
    """Classes of greedy candidates whose LPs are the same LP up to renaming.

    A class is built from explicit automorphisms ``g`` of the instance: a permutation of
    the nodes that maps links to links of the same capacity, fixes the PS, ``s_d`` and
    every switch already chosen, maps worker groups to worker groups of the same size
    and access capacity, and maps every routed path onto the routed path between the
    images (single path: the BFS tree toward ``d`` onto the tree toward ``g(d)``; ECMP
    splits depend on distances only, which ``g`` keeps). Such a ``g`` turns the LP of
    ``S + {s}`` into the LP of ``S + {g(s)}`` by renaming links and worker groups, so both
    have the same gamma. Candidates are only merged through a ``g`` that passed that
    exact check; ``g`` itself is a guess from colour refinement (1-WL) of two copies of
    the instance with ``s`` and ``s'`` singled out, so a failed guess only costs an LP.
    Only the parent pointers on paths the LP routes must be kept (worker -> switch,
    switch -> PS and -> s_d, s_d -> PS): how a BFS tree reaches a node that no such path
    passes does not matter.

    The graph it works on drops leaf hosts that are not workers (no path passes through
    them) and stands one node for each group of interchangeable leaf workers.
    """

    def __init__(self, prob: PlacementProblem) -> None:
        self.prob = prob
        g = prob.graph
        reach = prob._tree(prob.ps)
        workers = set(prob.workers)
        base_ids: dict[tuple[Any, ...], int] = {}
        names: list[str] = []  # original node (a group's representative)
        base: list[int] = []
        self.index: dict[str, int] = {}
        for n, kind in g.nodes(data="kind"):
            if n not in reach or (kind != "switch" and n != prob.ps and g.degree(n) == 1):
                continue  # leaf workers come back as groups; other leaves carry nothing
            if kind == "switch":
                key: tuple[Any, ...] = ("tor",) if n == prob.tor else ("switch",)
            else:
                key = ("ps",) if n == prob.ps else (str(kind), n in workers)
            self.index[n] = len(names)
            names.append(n)
            base.append(base_ids.setdefault(key, len(base_ids)))
        cap_ids: dict[float, int] = {}
        src: list[int] = []
        dst: list[int] = []
        lab: list[int] = []

        def link(u: int, v: int, c: float) -> None:
            li = cap_ids.setdefault(float(c), len(cap_ids))
            src.extend((u, v))
            dst.extend((v, u))
            lab.extend((li, li))

        for u, v, c in g.edges(data="capacity"):
            if u in self.index and v in self.index:
                link(self.index[u], self.index[v], c)
        for grp in prob._groups:
            if grp.private_arc is None:
                continue  # a multi-homed worker is a node of its own
            nb = prob._arcs[grp.private_arc][1]
            i = len(names)
            self.index[grp.rep] = i
            names.append(grp.rep)
            base.append(base_ids.setdefault(("group", grp.size, grp.access_cap), len(base_ids)))
            link(i, self.index[nb], grp.access_cap)
        self.names = names
        self.n = len(names)
        self.base = np.array(base, dtype=np.int64)
        self.n_base = len(base_ids)
        self.src, self.dst = np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)
        self.lab = np.array(lab, dtype=np.int64)
        self.n_lab = len(cap_ids)
        n = self.n
        keys = (self.src * n + self.dst) * max(self.n_lab, 1) + self.lab
        self.edge_keys = np.sort(keys)
        # Parent of every node in the routing tree toward each destination (rows: PS,
        # then every reachable switch); only single-path routes need them.
        self.trees: np.ndarray | None = None
        if not prob.multipath:
            dests = [prob.ps, *prob.switches]
            self.dest_idx = np.array([self.index[d] for d in dests], dtype=np.int64)
            self.row_of = np.full(n, -1, dtype=np.int64)
            self.row_of[self.dest_idx] = np.arange(len(dests))
            # BFS on this smaller graph, neighbours in graph order: a leaf never discovers
            # a node, so dropping leaves changes no other node's parent (a test compares
            # with PlacementProblem.path)
            adj: list[list[int]] = [[] for _ in range(n)]
            for u, nbrs in g.adj.items():
                if u in self.index:  # kept nodes and the groups' representatives
                    adj[self.index[u]] = [self.index[v] for v in nbrs if v in self.index]
            trees = np.full((len(dests), n), -1, dtype=np.int64)
            for r, d in enumerate(self.dest_idx.tolist()):
                par = trees[r].tolist()
                seen = [False] * n
                seen[d] = True
                frontier = [d]
                while frontier:
                    nxt = []
                    for u in frontier:
                        for v in adj[u]:
                            if not seen[v]:
                                seen[v] = True
                                par[v] = u
                                nxt.append(v)
                    frontier = nxt
                trees[r] = par
            self.trees = trees
            # relevant[r, u]: u lies on a routed path toward destination r that the LP
            # uses (from a worker; toward the PS and s_d also from every switch); only
            # those parent pointers must be kept by g
            rel = np.zeros(trees.shape, dtype=bool)
            rel[:, [self.index[w] for w in prob.workers if w in self.index]] = True
            sw_idx = [self.index[sw] for sw in prob.switches]
            for d in (prob.ps, prob.tor):
                rel[self.row_of[self.index[d]], sw_idx] = True
            front = rel.copy()
            while True:
                r, u = np.nonzero(front)
                par = trees[r, u]
                r, par = r[par >= 0], par[par >= 0]
                new = ~rel[r, par]
                if not new.any():
                    break
                front[:] = False
                front[r[new], par[new]] = rel[r[new], par[new]] = True
            self.relevant = rel

    # -------------------------------------------------------------- per round
    def classes(self, chosen: Sequence[str], remaining: Sequence[str]) -> list[list[str]]:
        """Partition ``remaining`` (in candidate order) into classes of equal LP value
        given the chosen switches; every class lists its members in the given order."""
        prob = self.prob
        colors = self.base.copy()
        fixed = [prob.ps, prob.tor, *chosen]
        for i, s in enumerate(chosen):
            colors[self.index[s]] = self.n_base + i
        src, dst, lab = [self.src], [self.dst], [self.lab]
        if self.trees is not None:  # the fixed nodes' routing trees are kept by any g
            for f, d in enumerate(dict.fromkeys(fixed)):
                row = self.row_of[self.index[d]]
                par = self.trees[row]
                kids = np.nonzero((par >= 0) & self.relevant[row])[0]
                src += [kids, par[kids]]
                dst += [par[kids], kids]
                lab += [
                    np.full(len(kids), self.n_lab + 2 * f),
                    np.full(len(kids), self.n_lab + 2 * f + 1),
                ]
        rel = np.concatenate(src), np.concatenate(dst), np.concatenate(lab)
        chi = _refine(colors, *rel)
        self._round = (colors, rel)

        idx = [self.index[s] for s in remaining]
        pos = {i: k for k, i in enumerate(idx)}  # a class is named by its first member
        parent = {i: i for i in idx}

        def find(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        by_color: dict[int, list[int]] = {}
        for i in idx:
            by_color.setdefault(int(chi[i]), []).append(i)
        cand = np.array(idx, dtype=np.int64)
        for members in by_color.values():
            rep = members[0]
            # the last member first: its automorphism tends to be one long cycle that
            # merges the whole class at once
            for s in reversed(members[1:]):
                if find(s) == find(rep):
                    continue
                g = self._automorphism(chi, rep, s)
                if g is None:
                    continue
                for a, b in zip(cand.tolist(), g[cand].tolist(), strict=True):
                    ra, rb = find(a), find(b)
                    if ra != rb:
                        parent[max(ra, rb, key=pos.get)] = min(ra, rb, key=pos.get)
        out: dict[int, list[str]] = {}
        for s, i in zip(remaining, idx, strict=True):
            out.setdefault(find(i), []).append(s)
        return list(out.values())

    def _automorphism(self, chi: np.ndarray, a: int, b: int) -> np.ndarray | None:
        """A verified automorphism of this round's instance mapping node a to node b, or
        None (no luck guessing one: not a proof that there is none)."""
        n = self.n
        colors, (src, dst, lab) = self._round
        both = np.concatenate([chi, chi])
        both[a] = both[n + b] = int(chi.max()) + 1
        both = _refine(
            both,
            np.concatenate([src, src + n]),
            np.concatenate([dst, dst + n]),
            np.concatenate([lab, lab]),
        )
        ca, cb = both[:n], both[n:]
        if not np.array_equal(
            np.bincount(ca, minlength=len(both)), np.bincount(cb, minlength=len(both))
        ):
            return None
        order = np.arange(n)
        for fix_common in (False, True):
            g = np.empty(n, dtype=np.int64)
            if fix_common:  # nodes whose colour is the same in both copies map to themselves
                same = ca == cb
                g[same] = order[same]
                ra, rb = order[~same], order[~same]
                g[ra[np.lexsort((ra, ca[ra]))]] = rb[np.lexsort((rb, cb[rb]))]
            else:  # equal colours matched in node order
                g[np.lexsort((order, ca))] = np.lexsort((order, cb))
            if self._check(g, colors):
                return g
        return None

    def _check(self, g: np.ndarray, colors: np.ndarray) -> bool:
        """Whether g is an automorphism that maps every routed path onto the routed path
        between the images (see the class docstring)."""
        n = self.n
        if not np.array_equal(np.sort(g), np.arange(n)) or not np.array_equal(colors[g], colors):
            return False
        keys = (g[self.src] * n + g[self.dst]) * max(self.n_lab, 1) + self.lab
        if not np.array_equal(np.sort(keys), self.edge_keys):
            return False
        if self.trees is None:
            return True
        image = self.row_of[g[self.dest_idx]]  # row of g(d) for every row d
        if (image < 0).any():
            return False
        gx = np.append(g, -1)
        moved = np.nonzero(image != np.arange(len(image)))[0]
        for rows in (moved, np.arange(len(image))):  # a wrong guess tends to fail early
            rel = self.relevant[rows]
            if not np.array_equal(self.relevant[image[rows]][:, g], rel):
                return False
            r, u = np.nonzero(rel)
            if not np.array_equal(self.trees[image[rows][r], g[u]], gx[self.trees[rows[r], u]]):
                return False
        return True


class _Reduced:
    """The LP of a switch set solved through its quotient by colour refinement.

    Colour refinement of the LP's rows and columns (initial colours: bounds and
    objective; arcs labelled by coefficient) ends in an *equitable* partition: every row
    of a row class has the same coefficient sum over each column class and vice versa.
    Averaging any feasible solution over the column classes then stays feasible with the
    same objective, so the LP has the optimum of its quotient (one variable per column
    class, one row per row class; Grohe et al., "Dimension reduction via colour
    refinement", 2014). Symmetric networks give tiny quotients (fat-tree k=16 with 16
    switches: 56 x 32 instead of 5301 x 4386). The partition is checked to be equitable
    before it is used; if it is not (a hash collision) the caller solves the full LP.

    The matrix is built here from the same data as :class:`_Model` (same rows and
    columns, see its docstring; the tests compare both).
    """

    def __init__(self, prob: PlacementProblem) -> None:
        self.prob = prob
        groups = prob._groups
        self.n_g = n_g = len(groups)
        self.sizes = np.array([grp.size for grp in groups], dtype=float)
        self.n_arcs = len(prob._arcs)
        self.arc_cap = np.array(prob._arc_cap, dtype=float)
        # link entries of the fixed columns: (arc, column, coefficient); xd[j] is column
        # 1 + j, xt[j] is 1 + n_g + j, o is 1 + 2 n_g
        fixed: list[tuple[int, int, float]] = []
        for j, grp in enumerate(groups):
            for col, dest in ((1 + j, prob.ps), (1 + n_g + j, prob.tor)):
                for arc, f in prob._apath(grp.rep, dest):
                    fixed.append((arc, col, f if arc == grp.private_arc else f * grp.size))
        for arc, f in prob._apath(prob.tor, prob.ps):
            fixed.append((arc, 1 + 2 * n_g, f))
        self.fixed = np.array(fixed, dtype=float).reshape(-1, 3)
        self._slot: dict[str, np.ndarray] = {}

    def _slot_links(self, switch: str) -> np.ndarray:
        """Link entries of a slot pointed at ``switch``: (arc, column offset in the slot,
        coefficient); offsets: x[j] = j, a = 2 n_g, b = 2 n_g + 1."""
        out = self._slot.get(switch)
        if out is None:
            n_g = self.n_g
            out = np.array(
                [
                    (arc, j if j >= 0 else (2 * n_g if j == -1 else 2 * n_g + 1), c)
                    for (arc, j), c in self.prob._slot_terms(switch).items()
                ],
                dtype=float,
            ).reshape(-1, 3)
            self._slot[switch] = out
        return out

    def matrix(
        self, switches: Sequence[str], tor_on: bool
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The LP of ``switches`` (plus s_d if ``tor_on``) in coordinate form: (rows, cols,
        values, row lb, row ub, column ub, objective). Every column has lower bound 0;
        columns fixed at 0 (s_d's while it is off) have ub 0. Rows and columns are those
        of :class:`_Model`, numbered differently, plus one (empty) row per unused arc."""
        n_g, n_s = self.n_g, len(switches)
        inf = math.inf
        g_idx = np.arange(n_g)
        col_slot = 2 + 2 * n_g  # first column of slot 0; a slot has 2 n_g + 2 columns
        row_slot = 2 * n_g  # conservation rows, s_d-output rows, then per slot 2 n_g + 1
        n_fixed = row_slot + n_s * (2 * n_g + 1) + 1  # ... and s_d's capacity row
        n_cols = col_slot + n_s * (2 * n_g + 2)
        r: list[np.ndarray] = []
        c: list[np.ndarray] = []
        v: list[np.ndarray] = []

        def add(rows: Any, cols: Any, vals: Any) -> None:
            rows, cols, vals = np.broadcast_arrays(
                np.asarray(rows), np.asarray(cols), np.asarray(vals, dtype=float)
            )
            r.append(rows.ravel())
            c.append(cols.ravel())
            v.append(vals.ravel())

        # conservation: sum_i x[i,j] + xt[j] + xd[j] - gamma = 0
        add(g_idx, 0, -1.0)
        add(g_idx, 1 + g_idx, 1.0)
        add(g_idx, 1 + n_g + g_idx, 1.0)
        # s_d output: o - xt[j] - sum_i z[i,j] >= 0
        add(n_g + g_idx, 1 + 2 * n_g, 1.0)
        add(n_g + g_idx, 1 + n_g + g_idx, -1.0)
        cap_tor = n_fixed - 1
        add(cap_tor, 1 + n_g + g_idx, self.sizes)
        links = [self.fixed]
        for i, sw in enumerate(switches):
            c0, r0 = col_slot + i * (2 * n_g + 2), row_slot + i * (2 * n_g + 1)
            x, z, a, b = c0 + g_idx, c0 + n_g + g_idx, c0 + 2 * n_g, c0 + 2 * n_g + 1
            add(g_idx, x, 1.0)
            add(n_g + g_idx, z, -1.0)
            add(r0 + g_idx, a, 1.0)  # output: a + b - x[j] >= 0
            add(r0 + g_idx, b, 1.0)
            add(r0 + g_idx, x, -1.0)
            add(r0 + n_g + g_idx, z, 1.0)  # carry: z[j] + a - x[j] >= 0
            add(r0 + n_g + g_idx, a, 1.0)
            add(r0 + n_g + g_idx, x, -1.0)
            add(r0 + 2 * n_g, x, self.sizes)  # capacity
            add(cap_tor, b, 1.0)
            sl = self._slot_links(sw).copy()
            sl[:, 1] += c0
            links.append(sl)
        lk = np.concatenate(links)
        add(n_fixed + lk[:, 0].astype(np.int64), lk[:, 1].astype(np.int64), lk[:, 2])
        n_rows = n_fixed + self.n_arcs
        cap = self.prob.switch_capacity
        row_lb = np.zeros(n_rows)
        row_ub = np.full(n_rows, inf)
        row_ub[:n_g] = 0.0  # conservation is an equality
        caps = np.append(row_slot + 2 * n_g + np.arange(n_s) * (2 * n_g + 1), cap_tor)
        row_lb[caps] = -inf
        row_ub[caps] = cap
        row_lb[n_fixed:] = -inf
        row_ub[n_fixed:] = self.arc_cap
        col_ub = np.full(n_cols, inf)
        if not tor_on:
            col_ub[1 + n_g : 2 + 2 * n_g] = 0.0  # xt, o
            col_ub[col_slot + 2 * n_g + 1 :: 2 * n_g + 2] = 0.0  # b
        obj = np.zeros(n_cols)
        obj[0] = 1.0
        rows, cols, vals = np.concatenate(r), np.concatenate(c), np.concatenate(v)
        return rows, cols, vals, row_lb, row_ub, col_ub, obj

    def gamma(self, switches: Sequence[str], tor_on: bool, *, always: bool = False) -> float | None:
        """The LP's gamma from its quotient, or None where that does not pay off (little
        symmetry; ``always`` tries anyway) or cannot be trusted (not equitable)."""
        rows, cols, vals, row_lb, row_ub, col_ub, obj = self.matrix(switches, tor_on)
        # drop what cannot matter: columns fixed at 0, zero entries, and rows that 0
        # satisfies and that have no entries (links no path uses) or no bounds
        keep_c = col_ub > 0
        vals = np.where(keep_c[cols], vals, 0.0)
        used = np.bincount(rows[vals != 0], minlength=len(row_lb)) > 0
        trivial = (row_lb <= 0) & (row_ub >= 0) & ~used
        keep_r = ~trivial & (np.isfinite(row_lb) | np.isfinite(row_ub))
        cmap = np.cumsum(keep_c) - 1
        rmap = np.cumsum(keep_r) - 1
        ok = keep_c[cols] & keep_r[rows] & (vals != 0)
        rows, cols, vals = rmap[rows[ok]], cmap[cols[ok]], vals[ok]
        row_lb, row_ub, col_ub, obj = row_lb[keep_r], row_ub[keep_r], col_ub[keep_c], obj[keep_c]
        n_r, n_c = len(row_lb), len(col_ub)

        # initial colours: rows by their bounds, columns by bound and objective (hashed:
        # a collision only coarsens the partition, which the check below catches)
        def h(*parts: np.ndarray) -> np.ndarray:
            out = np.zeros(len(parts[0]), dtype=np.uint64)
            for p in parts:
                out = _mix(out ^ np.ascontiguousarray(p, dtype=float).view(np.uint64))
            return out

        init = np.concatenate([h(row_lb, row_ub), h(col_ub, obj) ^ np.uint64(1)])
        _, init = np.unique(init, return_inverse=True)
        scale = float(np.abs(vals).max())
        # coefficients equal to 12 significant digits share a label
        _, lab = np.unique(np.round(vals / scale, 12), return_inverse=True)
        lab = lab.ravel()
        col = _refine(
            init.ravel().astype(np.int64),
            np.concatenate([rows, cols + n_r]),
            np.concatenate([cols + n_r, rows]),
            np.concatenate([lab, lab]),
        )
        _, rc = np.unique(col[:n_r], return_inverse=True)
        _, cc = np.unique(col[n_r:], return_inverse=True)
        rc, cc = rc.ravel(), cc.ravel()
        n_rc, n_cc = int(rc.max()) + 1, int(cc.max()) + 1
        if n_r * n_cc > 4_000_000 or n_c * n_rc > 4_000_000 or (4 * n_cc > n_c and not always):
            return None  # too little symmetry for the quotient to pay off
        # block sums: each row's sum over each column class, each column's over each row class
        by_col = np.bincount(rows * n_cc + cc[cols], vals, n_r * n_cc).reshape(n_r, n_cc)
        by_row = np.bincount(cols * n_rc + rc[rows], vals, n_c * n_rc).reshape(n_c, n_rc)
        rep_r = np.zeros(n_rc, dtype=np.int64)
        rep_r[rc[::-1]] = np.arange(n_r)[::-1]  # first row of each class
        rep_c = np.zeros(n_cc, dtype=np.int64)
        rep_c[cc[::-1]] = np.arange(n_c)[::-1]
        quot = by_col[rep_r]
        tol = 1e-9 * scale
        if (
            np.abs(by_col - quot[rc]).max() > tol
            or np.abs(by_row - by_row[rep_c][cc]).max() > tol
            or not np.array_equal(row_lb[rep_r][rc], row_lb)
            or not np.array_equal(row_ub[rep_r][rc], row_ub)
            or not np.array_equal(col_ub[rep_c][cc], col_ub)
            or not np.array_equal(obj[rep_c][cc], obj)
        ):
            return None  # not equitable (a hash collision): do not trust the quotient
        s = pywraplp.Solver.CreateSolver("GLOP")
        inf = s.infinity()
        y = [s.NumVar(0.0, min(float(col_ub[k]), inf), "") for k in rep_c.tolist()]
        cons = [
            s.Constraint(max(float(row_lb[k]), -inf), min(float(row_ub[k]), inf))
            for k in rep_r.tolist()
        ]
        for i, j in zip(*np.nonzero(quot), strict=True):
            cons[i].SetCoefficient(y[j], float(quot[i, j]))
        size = np.bincount(cc, minlength=n_cc)
        for j, k in enumerate(rep_c.tolist()):
            if obj[k]:
                s.Objective().SetCoefficient(y[j], float(obj[k] * size[j]))
        s.Objective().SetMaximization()
        if s.Solve() != pywraplp.Solver.OPTIMAL:
            return None
        return s.Objective().Value()


# --------------------------------------------------------------------------- greedy


def greedy_placement(
    problem: PlacementProblem,
    *,
    symmetry: bool | None = None,
    progress: Callable[[RoundTrace], None] | None = None,
) -> Placement:
    """The seed's greedy (steps S11-S16).

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
    return _placement(prob, "greedy", chosen, t0, trace=trace)


# --------------------------------------------------------------------------- MILP


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


# --------------------------------------------------------------------------- baselines


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


# --------------------------------------------------------------------------- routing policy


@dataclass(frozen=True)
class RoutingPolicy:
    """Per-fragment gradient routing: which switch aggregates each worker's fragment.

    Attributes:
        num_fragments: fragments per gradient (``F``).
        switch_ids: tag value of every switch (device_id; 0 means "no aggregation").
        tor: ``s_d``.
        tags: ``tags[w][f]``: the id of the switch that must aggregate worker ``w``'s
            fragment ``f`` (a switch of ``S`` or ``s_d``), or 0: straight to the PS.
            The packet is routed via that switch (shortest path to it, then on to the
            PS), whether or not it lies on ``w``'s own shortest path to the PS.
        partial_tags: ``partial_tags[s][f]`` for ``s`` in ``S``: the tag the partial
            aggregate of fragment ``f`` leaves ``s`` with: ``s_d``'s id (merged again at
            ``s_d``) or 0 (straight to the PS); 0 also where ``s`` aggregates nothing.
        fan_in: ``fan_in[s][f]``: how many workers' values of fragment ``f`` switch ``s``
            (``S`` and ``s_d``) must sum before it sends the (partial) aggregate on; for
            ``s_d`` it counts the workers inside merged partials too. 0: ``s`` does not
            aggregate ``f``.
    """

    num_fragments: int
    switch_ids: dict[str, int]
    tor: str
    tags: dict[str, tuple[int, ...]]
    partial_tags: dict[str, tuple[int, ...]]
    fan_in: dict[str, tuple[int, ...]]

    def counts(self, worker: str) -> dict[int, int]:
        """How many of ``worker``'s fragments carry each tag."""
        out: dict[int, int] = {}
        for t in self.tags[worker]:
            out[t] = out.get(t, 0) + 1
        return out


def _largest_remainder(weights: Sequence[float], total: int) -> list[int]:
    """Integers summing to ``total`` in proportion to ``weights``; each within 1 of
    its exact share (ties: the earlier weight gets the extra unit)."""
    s = float(sum(weights))
    if s <= 0:
        out = [0] * len(weights)
        if out:
            out[-1] = total
        return out
    exact = [total * w / s for w in weights]
    base = [math.floor(e + 1e-9) for e in exact]
    rest = total - sum(base)
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - base[i]), i))
    for i in order[: max(rest, 0)]:
        base[i] += 1
    return base


def _spread(n: int) -> np.ndarray:
    """A fixed permutation slot -> fragment that spreads contiguous slot blocks over the
    whole gradient (stride ~ n/golden ratio, coprime with n), so each switch sees its
    fragments evenly over an iteration instead of in one burst."""
    if n <= 2:
        return np.arange(n)
    step = max(1, round(n * 0.6180339887))
    while math.gcd(step, n) != 1:
        step += 1
    return (np.arange(n) * step) % n


def routing_policy(placement: Placement | LPResult, num_fragments: int) -> RoutingPolicy:
    """Turn the LP's per-worker rates into per-fragment tags (see docs/placement.md).

    1. Quotas: worker ``w`` tags ``n[w,t]`` of its ``F`` fragments with target ``t``,
       ``n`` = largest-remainder rounding of ``F * rates[w][t] / gamma`` (each count is
       within one fragment of the LP's share).
    2. Alignment: a switch aggregates fragment ``f`` only across the workers that tag
       ``f`` with it, and its output rate is the number of distinct fragments tagged with
       it; so for every target the workers' fragment sets are made to nest. Targets are
       laid out in slot space in order (S in selection order, ``s_d``, then direct):
       each gets the smallest offset at which every worker class using it has a free
       contiguous block of its quota; workers with equal rates get identical tags.
       Direct sending (0) takes what is left.
    3. Slots map to fragments through one fixed spreading permutation for all workers.

    Tag values are the switches' ``device_id`` (see :meth:`PlacementProblem.switch_ids`);
    given a bare :class:`LPResult` (no graph at hand) they are 1, 2, ... in the order
    ``S``, ``s_d``.
    """
    if isinstance(num_fragments, bool) or not isinstance(num_fragments, int | np.integer):
        raise PlacementError(f"num_fragments must be an integer, got {num_fragments!r}")
    if num_fragments < 1:
        raise PlacementError(f"num_fragments must be >= 1, got {num_fragments}")
    res = placement.result if isinstance(placement, Placement) else placement
    prob_ids = placement.problem.switch_ids() if isinstance(placement, Placement) else None
    f_n = int(num_fragments)
    targets = [*res.switches, res.tor, res.ps]
    ids = prob_ids if prob_ids is not None else {s: i + 1 for i, s in enumerate(targets[:-1])}
    tag_of = {t: ids[t] for t in targets[:-1]}
    tag_of[res.ps] = 0

    # classes of workers with identical rate vectors get identical tag sequences
    classes: dict[tuple[int, ...], list[str]] = {}
    for w, r in res.rates.items():
        quota = tuple(_largest_remainder([r.get(t, 0.0) for t in targets], f_n))
        classes.setdefault(quota, []).append(w)
    quotas = list(classes)
    qarr = np.array(quotas, dtype=np.int64).reshape(len(quotas), len(targets))
    used = np.zeros((len(quotas), f_n), dtype=bool)
    slot_target = np.full((len(quotas), f_n), len(targets) - 1, dtype=np.int64)

    for ti in range(len(targets) - 1):  # direct (last) takes the leftovers
        need = qarr[:, ti]
        users = np.nonzero(need)[0]
        if users.size == 0:
            continue
        # fits[c, o]: class c has slots o..o+need-1 (cyclic) free
        occ = np.concatenate([used[users], used[users]], axis=1).astype(np.int64)
        cs = np.concatenate([np.zeros((users.size, 1), np.int64), occ.cumsum(axis=1)], axis=1)
        off = np.arange(f_n)
        ends = off[None, :] + need[users][:, None]
        fits = (cs[np.arange(users.size)[:, None], ends] - cs[:, off]) == 0
        weight = np.array([len(classes[quotas[c]]) for c in users])
        score = (fits * weight[:, None]).sum(axis=0)
        o = int(np.argmax(score))  # first offset that suits the most workers
        for row, c in enumerate(users):
            if fits[row, o]:
                sl = (o + np.arange(need[c])) % f_n
            else:  # no common block: the first free slots from o on, cyclically
                order = (o + np.arange(f_n)) % f_n
                sl = order[~used[c, order]][: need[c]]
            used[c, sl] = True
            slot_target[c, sl] = ti

    perm = _spread(f_n)  # slot -> fragment
    target_tags = np.array([tag_of[t] for t in targets], dtype=np.int64)
    tags: dict[str, tuple[int, ...]] = {}
    fan = {t: np.zeros(f_n, dtype=np.int64) for t in targets[:-1]}
    for c, quota in enumerate(quotas):
        per_frag = np.empty(f_n, dtype=np.int64)
        per_frag[perm] = slot_target[c]
        seq = tuple(int(t) for t in target_tags[per_frag])
        k = len(classes[quota])
        for w in classes[quota]:
            tags[w] = seq
        for ti, t in enumerate(targets[:-1]):
            fan[t] += k * (per_frag == ti)

    # partial aggregates: share via_tor/switch_out of s's fragments is merged at s_d
    tor_id = tag_of[res.tor]
    partial_tags: dict[str, tuple[int, ...]] = {}
    inv = np.argsort(perm)  # fragment -> slot, to pick fragments in slot order
    for s in res.switches:
        frags = np.nonzero(fan[s])[0]
        out = res.switch_out.get(s, 0.0)
        share = res.via_tor.get(s, 0.0) / out if out > 0 and res.tor_active else 0.0
        n_tor = _largest_remainder([share, 1 - share], len(frags))[0] if frags.size else 0
        pt = np.zeros(f_n, dtype=np.int64)
        pick = frags[np.argsort(inv[frags], kind="stable")][:n_tor]
        pt[pick] = tor_id
        partial_tags[s] = tuple(int(v) for v in pt)
        if res.tor_active:
            fan[res.tor][pick] += fan[s][pick]
    fan_in = {
        t: tuple(int(v) for v in fan[t]) for t in targets[:-1] if t != res.tor or res.tor_active
    }
    return RoutingPolicy(
        num_fragments=f_n,
        switch_ids={t: ids[t] for t in targets[:-1]},
        tor=res.tor,
        tags=tags,
        partial_tags=partial_tags,
        fan_in=fan_in,
    )
