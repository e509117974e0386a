"""The placement instance and its results.

:class:`PlacementProblem` validates a placement input (topology, PS, workers, budget
``K``, switch capacity ``C``, the PS's ToR ``s_d``) and precomputes the shortest paths and
worker groups every solver works on; :class:`LPResult`, :class:`RoundTrace` and
:class:`Placement` are what the solvers return. See ``docs/placement.md``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np

__all__ = ["LPResult", "Placement", "PlacementError", "PlacementProblem", "RoundTrace"]

Arc = tuple[str, str]
# A route as the LP sees it: (arc index, share of the flow on that arc) pairs.
_Route = tuple[tuple[int, float], ...]


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
        tor_in_budget: if False (default, the specified model) ``s_d`` always aggregates
            and is not a candidate; if True it aggregates only when chosen, like any
            other switch, and takes one of the K slots.
        full_duplex: if True (default) every link has capacity ``c_e`` in each
            direction; if False both directions share ``c_e``.
        multipath: if False (default, the specified model) a flow follows one shortest
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

        self._init_hosts(ps, workers)
        self._init_numbers(budget, switch_capacity)
        self._init_arcs()
        reach = self._init_reach()
        self._init_tor(ps_tor)
        self._init_candidates(reach, budget)
        self._init_groups()

        # Cache of arc paths: (src, dst) -> tuple of arc indices.
        self._path_cache: dict[tuple[str, str], tuple[int, ...]] = {}
        self._terms_cache: dict[str, dict[tuple[int, int], float]] = {}

    # ---------------------------------------------------------------- construction steps
    def _init_hosts(self, ps: str, workers: Iterable[str]) -> None:
        """The PS and the workers: hosts of the graph, distinct, the PS not a worker."""
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

    def _init_numbers(self, budget: int, switch_capacity: float) -> None:
        """Check the budget K's type and sign and set the switch capacity C."""
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

    def _init_arcs(self) -> None:
        """Arc index <-> (u, v) and the capacity per arc (one arc per direction when full duplex)."""
        g = self.graph
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

    def _init_reach(self) -> dict[str, str | None]:
        """Reachability from the PS (one BFS; also the paths toward d); every worker must be reached."""
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
        return reach

    def _init_tor(self, ps_tor: str | None) -> None:
        """``s_d``, the PS's ToR switch: the given one, or the neighbour on the widest link."""
        g = self.graph
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

    def _init_candidates(self, reach: dict[str, str | None], budget: int) -> None:
        """Candidates: reachable switches in graph order (s_d only if in the budget); K must fit."""
        g = self.graph
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

    def _init_groups(self) -> None:
        """Worker groups: workers on one leaf link of equal capacity to the same switch share a group."""
        g = self.graph
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
