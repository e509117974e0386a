"""Symmetry of a placement instance: colour refinement (1-WL) and automorphisms.

:class:`_Symmetry` groups the greedy's candidates into classes whose LPs are equal up
to renaming; :class:`_Reduced` solves an LP through its quotient by colour refinement.
Both are accelerations of :func:`~controller.placement.greedy.greedy_placement` and do
not change its result (``docs/placement.md``, "Large instances").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .lp import _REL_TOL
from .problem import PlacementProblem
from .quotient import _refine, _solve_quotient


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
        self._build_graph(prob)
        # Parent of every node in the routing tree toward each destination (rows: PS,
        # then every reachable switch); only single-path routes need them.
        self.trees: np.ndarray | None = None
        if not prob.multipath:
            self._build_trees(prob)

    def _build_graph(self, prob: PlacementProblem) -> None:
        """The reduced graph: node colours (``base``), labelled directed edges and their
        sorted keys; leaf workers stand in as one node per group."""
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

    def _build_trees(self, prob: PlacementProblem) -> None:
        """Single-path routing trees toward the PS and every switch on the reduced graph,
        and which of their parent pointers the LP's routed paths use (``relevant``)."""
        g = prob.graph
        n = self.n
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
        out = _solve_quotient(
            rows, cols, vals, row_lb, row_ub, np.zeros(len(col_ub)), col_ub, obj,
            maximize=True, always=always,
        )  # fmt: skip
        return None if out is None else out[0]

    def tidy(
        self,
        switches: Sequence[str],
        tor_on: bool,
        gamma: float,
        weights: np.ndarray,
        *,
        always: bool = False,
    ) -> np.ndarray | None:
        """Phase 2 of :func:`~controller.placement.lp.solve_lp` through the quotient: among
        the solutions with gamma at least ``gamma`` (to ``_REL_TOL``), one of least
        ``weights . x`` (the traffic weights, one per column of :meth:`matrix`). Returns
        every column's value, lifted from the quotient (each column takes its class's
        value: feasible and optimal for the full LP, Grohe et al.), or None where the
        quotient does not pay off (``always`` tries anyway) or is not equitable; the
        caller then solves the full LP.
        """
        rows, cols, vals, row_lb, row_ub, col_ub, _ = self.matrix(switches, tor_on)
        col_lb = np.zeros(len(col_ub))
        col_lb[0] = gamma * (1 - _REL_TOL)
        out = _solve_quotient(
            rows, cols, vals, row_lb, row_ub, col_lb, col_ub, np.asarray(weights, float),
            maximize=False, always=always,
        )  # fmt: skip
        return None if out is None else out[1]
