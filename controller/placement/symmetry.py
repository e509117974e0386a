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
from ortools.linear_solver import pywraplp

from .lp import _REL_TOL
from .problem import PlacementProblem


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


def _solve_quotient(
    rows: np.ndarray,
    cols: np.ndarray,
    vals: np.ndarray,
    row_lb: np.ndarray,
    row_ub: np.ndarray,
    col_lb: np.ndarray,
    col_ub: np.ndarray,
    obj: np.ndarray,
    *,
    maximize: bool,
    always: bool,
) -> tuple[float, np.ndarray] | None:
    """Solve an LP in coordinate form (``col_lb <= x <= col_ub``, ``row_lb <= A x <=
    row_ub``, optimise ``obj . x``) through its quotient by colour refinement. Returns the
    optimum and every column's value (its class's value; columns fixed at 0 are 0), or
    None where the quotient would not be much smaller (unless ``always``), is not
    equitable (a hash collision) or the solver fails."""
    n_all = len(col_ub)
    # drop what cannot matter: columns fixed at 0, zero entries, and rows that 0
    # satisfies and that have no entries (links no path uses) or no bounds
    keep_c = (col_ub > 0) | (col_lb > 0)
    vals = np.where(keep_c[cols], vals, 0.0)
    used = np.bincount(rows[vals != 0], minlength=len(row_lb)) > 0
    trivial = (row_lb <= 0) & (row_ub >= 0) & ~used
    keep_r = ~trivial & (np.isfinite(row_lb) | np.isfinite(row_ub))
    cmap = np.cumsum(keep_c) - 1
    rmap = np.cumsum(keep_r) - 1
    ok = keep_c[cols] & keep_r[rows] & (vals != 0)
    rows, cols, vals = rmap[rows[ok]], cmap[cols[ok]], vals[ok]
    row_lb, row_ub = row_lb[keep_r], row_ub[keep_r]
    col_lb, col_ub, obj = col_lb[keep_c], col_ub[keep_c], obj[keep_c]
    n_r, n_c = len(row_lb), len(col_ub)

    # initial colours: rows by their bounds, columns by bounds and objective (hashed: a
    # collision only coarsens the partition, which the check below catches)
    def h(*parts: np.ndarray) -> np.ndarray:
        out = np.zeros(len(parts[0]), dtype=np.uint64)
        for p in parts:
            out = _mix(out ^ np.ascontiguousarray(p, dtype=float).view(np.uint64))
        return out

    init = np.concatenate([h(row_lb, row_ub), h(col_lb, col_ub, obj) ^ np.uint64(1)])
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
        or not np.array_equal(col_lb[rep_c][cc], col_lb)
        or not np.array_equal(col_ub[rep_c][cc], col_ub)
        or not np.array_equal(obj[rep_c][cc], obj)
    ):
        return None  # not equitable (a hash collision): do not trust the quotient
    s = pywraplp.Solver.CreateSolver("GLOP")
    inf = s.infinity()
    y = [
        s.NumVar(float(col_lb[k]), min(float(col_ub[k]), inf), "") for k in rep_c.tolist()
    ]
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
    if maximize:
        s.Objective().SetMaximization()
    else:
        s.Objective().SetMinimization()
    if s.Solve() != pywraplp.Solver.OPTIMAL:
        return None
    y_val = np.array([v.solution_value() for v in y])
    x = np.zeros(n_all)
    x[np.flatnonzero(keep_c)] = y_val[cc]
    return s.Objective().Value(), x
