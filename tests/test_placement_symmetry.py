"""Tests for controller.placement's symmetry reduction: the fast greedy matches the plain
one, the reduced LP matches the model, the quotient's phase 2 is optimal and tidy.
"""

from __future__ import annotations

import collections
import math

import numpy as np
import pytest

import topologies
from controller.placement import (
    PlacementProblem,
    greedy_placement,
    solve_lp,
)
from tests.placement_graphs import ft_problem, random_graph, two_tor, workers_of

# ----------------------------------------------------------------------------- fast greedy


def _symmetric_cases() -> dict[str, PlacementProblem]:
    """Instances on which the symmetry path must reproduce the plain greedy."""
    ls = topologies.leaf_spine(3, 4, 3, bw=100.0).graph
    ls_hosts = [n for n, kd in ls.nodes(data="kind") if kd == "host"]
    # an asymmetric twist: one leaf-spine link is thinner
    ls2 = ls.copy()
    u, v = next((u, v) for u, v in ls2.edges if {u, v} <= {"s1", "s4"})
    ls2[u][v]["capacity"] = 40.0
    rg = random_graph(3)
    # t1 and t2 are mirror images, m is a worker on both: with one shortest path m's
    # flows take t1, which breaks the mirror (ECMP keeps it)
    mh = two_tor(2, 2)
    mh.add_node("m", kind="host", role="host")
    mh.add_edge("m", "t1", capacity=100.0)
    mh.add_edge("m", "t2", capacity=100.0)
    return {
        "ft4-tight": ft_problem(4, 4, 700.0),
        "ft4-unbounded": ft_problem(4, 4, math.inf),
        "ft4-ecmp": ft_problem(4, 3, 2000.0, multipath=True),
        "ft4-tor-in-budget": ft_problem(4, 3, 1500.0, tor_in_budget=True),
        "ft4-half-duplex": ft_problem(4, 3, 2000.0, full_duplex=False),
        "ft6": ft_problem(6, 5, 3000.0),
        "leaf-spine": PlacementProblem(ls, ls_hosts[0], ls_hosts[1:], 4, 250.0),
        "leaf-spine-twisted": PlacementProblem(ls2, ls_hosts[0], ls_hosts[1:], 4, math.inf),
        "random": PlacementProblem(rg.graph, rg.ps, rg.workers, len(rg.candidates) - 1, 150.0),
        "multi-homed": PlacementProblem(mh, "d", workers_of(mh), 2, 150.0),
        "multi-homed-ecmp": PlacementProblem(mh, "d", workers_of(mh), 2, 150.0, multipath=True),
    }


@pytest.mark.parametrize("case", list(_symmetric_cases()))
def test_symmetry_greedy_matches_plain(case: str) -> None:
    """Same switches, same gamma and the same score for every candidate in every round
    as the greedy that solves one full LP per candidate."""
    p = _symmetric_cases()[case]
    seen: list[int] = []
    fast = greedy_placement(p, symmetry=True, progress=lambda t: seen.append(t.round))
    plain = greedy_placement(p, symmetry=False)
    assert seen == list(range(p.budget))
    assert fast.switches == plain.switches
    assert fast.gamma == pytest.approx(plain.gamma, rel=1e-7)
    for a, b in zip(fast.trace, plain.trace, strict=True):
        assert a.scores.keys() == b.scores.keys()
        for s, v in b.scores.items():
            assert a.scores[s] == pytest.approx(v, rel=1e-7, abs=1e-9), (a.round, s)
        assert b.lp_solves == len(b.scores)
        assert 1 <= a.lp_solves <= len(a.scores)
    if case.startswith("ft"):  # the fat-tree's symmetry is found
        assert sum(t.lp_solves for t in fast.trace) < 0.8 * sum(len(t.scores) for t in fast.trace)


def test_symmetry_rejects_automorphism_that_breaks_routes() -> None:
    """Swapping two cores of one group is a graph automorphism of a fat-tree, but the
    single-path routes toward the PS all use the first core: the check must refuse it
    (with ECMP the same swap is fine)."""
    from controller.placement import _Symmetry

    for multipath in (False, True):
        p = ft_problem(4, 2, multipath=multipath)
        sym = _Symmetry(p)
        sym.classes([], list(p.candidates))  # sets up the round
        g = np.arange(sym.n)
        i, j = sym.index["s1"], sym.index["s2"]
        assert p.graph.nodes["s1"]["role"] == p.graph.nodes["s2"]["role"] == "core"
        g[i], g[j] = j, i
        assert sym._check(g, sym._round[0]) is multipath
        # and the identity always passes, a non-automorphism never
        assert sym._check(np.arange(sym.n), sym._round[0])
        k = sym.index["s5"]  # an aggregation switch
        g2 = np.arange(sym.n)
        g2[i], g2[k] = k, i
        assert not sym._check(g2, sym._round[0])
    # a worker on two mirror-image ToRs: one shortest path breaks the mirror, ECMP not
    cases = _symmetric_cases()
    assert _Symmetry(cases["multi-homed"]).classes([], ["t1", "t2"]) == [["t1"], ["t2"]]
    assert _Symmetry(cases["multi-homed-ecmp"]).classes([], ["t1", "t2"]) == [["t1", "t2"]]


def _rows_of(cons, name_of) -> collections.Counter:
    """An LP's rows as a multiset of (lb, ub, {column name: coefficient})."""
    out: collections.Counter = collections.Counter()
    for lo, hi, terms in cons:
        row = frozenset((name_of(c), v) for c, v in terms if v != 0)
        if row:
            out[(lo, hi, row)] += 1
    return out


@pytest.mark.parametrize(
    "case", ["ft4-tight", "ft4-tor-in-budget", "ft4-half-duplex", "ft4-ecmp", "ft6", "random"]
)
def test_reduced_lp_matches_model(case: str) -> None:
    """The matrix the quotient is built from is _Model's LP, and the quotient's gamma
    (where it is used) is the full LP's."""
    from ortools.linear_solver import linear_solver_pb2

    from controller.placement import _Model, _Reduced

    p = _symmetric_cases()[case]
    red = _Reduced(p)
    sws = [s for s in p.candidates if s != p.tor][:3]
    for tor_on in (True, False):
        m = _Model(p, len(sws))
        for i, s in enumerate(sws):
            m.assign(i, s)
        m.set_tor(tor_on)
        proto = linear_solver_pb2.MPModelProto()
        m.solver.ExportModelToProto(proto)
        names = [v.name for v in proto.variable]

        model_rows = _rows_of(
            (
                (c.lower_bound, c.upper_bound, zip(c.var_index, c.coefficient, strict=True))
                for c in proto.constraint
            ),
            names.__getitem__,
        )
        rows, cols, vals, lo, hi, col_ub, obj = red.matrix(sws, tor_on)
        n_g = len(p._groups)
        col_names = ["gamma", *(f"xd{j}" for j in range(n_g)), *(f"xt{j}" for j in range(n_g)), "o"]
        for i in range(len(sws)):
            col_names += [f"x{i}_{j}" for j in range(n_g)] + [f"z{i}_{j}" for j in range(n_g)]
            col_names += [f"a{i}", f"b{i}"]
        terms: dict[int, list] = collections.defaultdict(list)
        for r, c, v in zip(rows.tolist(), cols.tolist(), vals.tolist(), strict=True):
            terms[r].append((c, v))
        inf = m.solver.infinity()
        ours = _rows_of(
            ((max(lo[r], -inf), min(hi[r], inf), t) for r, t in terms.items()),
            col_names.__getitem__,
        )
        assert ours == model_rows
        ubs = {v.name: v.upper_bound for v in proto.variable}
        assert {n: min(u, inf) for n, u in zip(col_names, col_ub, strict=True)} == ubs
        assert obj[0] == 1 and not obj[1:].any()
        full = m.solve()
        val = red.gamma(sws, tor_on, always=True)
        assert val is not None  # fat-trees and these small graphs give an equitable partition
        assert val == pytest.approx(full, rel=1e-7, abs=1e-9)
        if case == "ft6":
            assert red.gamma(sws, tor_on) == pytest.approx(full, rel=1e-7)


@pytest.mark.parametrize("case", ["ft4-tight", "ft6", "leaf-spine", "random", "multi-homed"])
def test_symmetry_trees_are_the_routed_paths(case: str) -> None:
    """The symmetry check's routing trees (BFS on the graph without leaf hosts) give
    exactly the paths the LP routes on."""
    from controller.placement import _Symmetry

    p = _symmetric_cases()[case]
    sym = _Symmetry(p)
    assert sym.trees is not None
    sources = [grp.rep for grp in p._groups] + list(p.switches)
    for r, d in enumerate(sym.dest_idx.tolist()):
        dest = sym.names[d]
        for src in sources:
            if src == dest:
                continue
            path, u = [src], sym.index[src]
            while u != d:
                u = int(sym.trees[r, u])
                path.append(sym.names[u])
            assert path == p.path(src, dest)


@pytest.mark.parametrize("case", ["ft4-tight", "ft4-tor-in-budget", "ft4-ecmp", "ft6"])
def test_quotient_phase2_is_an_optimal_tidy_solution(case: str) -> None:
    """Phase 2 solved through the quotient (what the greedy's final solve uses on large
    instances) gives a feasible solution of the full LP with the same gamma and the same
    total link traffic as the full LP's phase 2."""
    from controller.placement import _Model, _Reduced
    from controller.placement.lp import _split

    p = _symmetric_cases()[case]
    red = _Reduced(p)
    chosen = greedy_placement(p, symmetry=False).switches
    full = solve_lp(p, chosen)
    others, tor_on = _split(p, chosen)
    m = _Model(p, len(others))
    for i, s in enumerate(others):
        m.assign(i, s)
    m.set_tor(tor_on)
    cols = m.reduced_columns()
    weights = m.reduced_traffic_weights(cols)
    gamma = red.gamma(others, tor_on, always=True)  # phase 1, as the greedy's last round
    assert gamma is not None
    x = red.tidy(others, tor_on, gamma, weights, always=True)
    assert x is not None  # these fat-trees give an equitable partition
    res = m.result(lambda v: float(x[cols[v.index()]]))
    assert res.gamma == pytest.approx(full.gamma, rel=1e-6)
    assert sum(res.link_loads.values()) == pytest.approx(sum(full.link_loads.values()), rel=1e-6)
    for arc, load in res.link_loads.items():
        assert load <= p.graph.edges[arc]["capacity"] * (1 + 1e-6) + 1e-9, arc
    for w in p.workers:
        assert sum(res.rates[w].values()) == pytest.approx(res.gamma, rel=1e-6), w
    for sw in res.switches:
        assert sum(r.get(sw, 0.0) for r in res.rates.values()) <= p.switch_capacity * (1 + 1e-6)
