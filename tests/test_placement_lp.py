"""Tests for controller.placement: the LP, greedy, MILP and baselines on hand-computed,
fat-tree and random graphs, and bad input.
"""

from __future__ import annotations

import itertools
import math

import networkx as nx
import pytest

from controller.placement import (
    PlacementError,
    PlacementProblem,
    degree_first_placement,
    greedy_placement,
    optimal_placement,
    random_placement,
    solve_lp,
    tor_first_placement,
)
from tests.placement_graphs import (
    assert_feasible,
    ft_problem,
    graph,
    random_graph,
    two_tor,
    workers_of,
)

# ----------------------------------------------------------------------------- the LP


def test_two_tor_hand_computed() -> None:
    """t1 has 3 workers, t2 one; links 100; C = 200.

    No switch but s_d = r: t1's uplink carries 3 gamma <= 100 -> gamma = 100/3.
    With t1: each t1 worker aggregates x <= 200/3 at t1 (C), the rest crosses the
    uplink unaggregated: x + 3 (gamma - x) <= 100 -> gamma = (100 + 2*200/3) / 3 = 700/9.
    r's inputs 100 + 700/9 <= 200 = C, PS link o = gamma <= 100: both slack.
    """
    g = two_tor()
    p0 = PlacementProblem(g, "d", workers_of(g), 0, 200.0)
    assert solve_lp(p0, []).gamma == pytest.approx(100 / 3, rel=1e-6)
    p = PlacementProblem(g, "d", workers_of(g), 1, 200.0)
    res = solve_lp(p, ["t1"])
    assert res.gamma == pytest.approx(700 / 9, rel=1e-6)
    assert_feasible(p, res)
    assert res.link_loads[("t1", "r")] == pytest.approx(100, rel=1e-6)
    assert solve_lp(p, ["t2"]).gamma == pytest.approx(100 / 3, rel=1e-6)  # 1 worker: no gain

    gr = greedy_placement(p)
    assert gr.switches == ("t1",)
    assert gr.gamma == pytest.approx(700 / 9, rel=1e-6)
    assert gr.trace[0].scores == pytest.approx({"t1": 700 / 9, "t2": 100 / 3}, rel=1e-6)
    assert optimal_placement(p).gamma == pytest.approx(700 / 9, rel=1e-6)


def test_hierarchical_merge_at_tor() -> None:
    """Two ToRs with 2 workers each, links 100, C large. K=0 or 1: the uplink of a
    non-aggregating ToR carries 2 gamma -> 50. K=2: each uplink carries one partial
    aggregate and r merges them, so the PS link carries gamma too -> 100."""
    g = two_tor(2, 2)
    ws = workers_of(g)
    for k, want in [(0, 50.0), (1, 50.0), (2, 100.0)]:
        p = PlacementProblem(g, "d", ws, k, 1e4)
        gr = greedy_placement(p)
        assert gr.gamma == pytest.approx(want, rel=1e-6), k
        assert_feasible(p, gr.result)
    res = gr.result
    assert set(res.switches) == {"t1", "t2"}
    # the partials are merged at s_d = r (sent via r, not straight to the PS)
    assert res.via_tor == pytest.approx({"t1": 100.0, "t2": 100.0}, rel=1e-6)
    assert res.switch_out["r"] == pytest.approx(100.0, rel=1e-6)
    assert res.link_loads[("r", "d")] == pytest.approx(100.0, rel=1e-6)


def test_greedy_is_myopic() -> None:
    """Two ToRs with 2 workers each need *both* to aggregate; either alone gains
    nothing, so round 1 is a tie that the greedy breaks toward the first candidate, a
    useless dead-end switch u: greedy 50, optimum {t1, t2} = 100."""
    g = two_tor(2, 2)
    g2 = graph([], ["u"], [])
    g2.update(g)
    g2.add_edge("u", "r", capacity=100.0)
    p = PlacementProblem(g2, "d", workers_of(g2), 2, 1e4)
    assert p.candidates[0] == "u"
    gr, opt = greedy_placement(p), optimal_placement(p)
    assert gr.switches == ("u", "t1") and gr.gamma == pytest.approx(50.0, rel=1e-6)
    assert set(opt.switches) == {"t1", "t2"} and opt.gamma == pytest.approx(100.0, rel=1e-6)


def test_star_tor_only() -> None:
    """star: 4 workers and the PS on one switch (= s_d), links 100, C = 200.
    x aggregated + y direct per worker: 4x <= 200 and x + 4y <= 100 (PS link)
    -> x = 50, y = 12.5, gamma = 62.5. With unlimited C: gamma = 100 (host links)."""
    hosts = ["d", "w1", "w2", "w3", "w4"]
    g = graph(hosts, ["s"], [(h, "s") for h in hosts])
    p = PlacementProblem(g, "d", hosts[1:], 0, 200.0)
    assert p.tor == "s" and p.candidates == ()
    res = greedy_placement(p).result
    assert res.gamma == pytest.approx(62.5, rel=1e-6)
    assert res.rates["w1"] == pytest.approx({"s": 50.0, "d": 12.5}, rel=1e-6)
    assert_feasible(p, res)
    assert solve_lp(PlacementProblem(g, "d", hosts[1:], 0, math.inf), []).gamma == pytest.approx(
        100.0, rel=1e-6
    )
    # s_d inside the budget: K=0 means plain PS (100 / 4), K=1 buys s_d back
    p0 = PlacementProblem(g, "d", hosts[1:], 0, 200.0, tor_in_budget=True)
    assert greedy_placement(p0).gamma == pytest.approx(25.0, rel=1e-6)
    p1 = PlacementProblem(g, "d", hosts[1:], 1, 200.0, tor_in_budget=True)
    assert p1.candidates == ("s",)
    gr = greedy_placement(p1)
    assert gr.switches == ("s",) and gr.gamma == pytest.approx(62.5, rel=1e-6)
    opt = optimal_placement(p1)
    assert opt.switches == ("s",) and opt.gamma == pytest.approx(62.5, rel=1e-6)


def test_split_over_switches_does_not_beat_ps_link() -> None:
    """One worker behind two programmable switches in series, fat host link (1000),
    PS link 100. Splitting the worker's stream over s1 and s2 and merging the partials
    at s_d must not fake a gamma above the PS link: they hold disjoint fragments."""
    g = graph(
        ["w", "d"],
        ["s1", "s2", "r"],
        [("w", "s1", 1000), ("s1", "s2", 1000), ("s2", "r", 1000), ("r", "d", 100)],
    )
    p = PlacementProblem(g, "d", ["w"], 2, 1e4)
    assert greedy_placement(p).gamma == pytest.approx(100.0, rel=1e-6)
    assert optimal_placement(p).gamma == pytest.approx(100.0, rel=1e-6)


def test_half_duplex_shares_capacity() -> None:
    """Workers w1, w2 at s1; s2 hangs off s1; links 100, C large. With S = {s2} each
    worker aggregates x at s2 and sends gamma - x unaggregated to r.
    Full duplex: s1->s2 carries 2x <= 100, s1->r carries x + 2 (gamma - x) <= 100
    -> x = 50, gamma = 75. Half duplex: s1-s2 carries 2x + x <= 100 -> x = 100/3,
    gamma = 200/3."""
    g = graph(
        ["d", "w1", "w2"],
        ["r", "s1", "s2"],
        [("d", "r"), ("r", "s1"), ("s1", "s2"), ("w1", "s1"), ("w2", "s1")],
    )
    full = solve_lp(PlacementProblem(g, "d", ["w1", "w2"], 1, 1e4), ["s2"])
    half = solve_lp(PlacementProblem(g, "d", ["w1", "w2"], 1, 1e4, full_duplex=False), ["s2"])
    assert full.gamma == pytest.approx(75.0, rel=1e-6)
    assert half.gamma == pytest.approx(200 / 3, rel=1e-6)
    assert full.link_loads[("s1", "s2")] == pytest.approx(100.0, rel=1e-6)
    assert full.link_loads[("s2", "s1")] == pytest.approx(50.0, rel=1e-6)
    assert all(len(k) == 2 for k in half.link_loads)


def test_multipath_splits_over_equal_cost_paths() -> None:
    """Workers w1, w2 at switch a; a has two 50 Mbit/s uplinks (via b1, b2) to r = s_d.
    Single path: everything takes b1. K=0: 2 gamma <= 50 -> 25; S={a}: gamma <= 50.
    ECMP (multipath): half on each uplink. K=0: gamma <= 50; S={a}: gamma/2 <= 50, so
    the host links (100) bind -> 100."""
    g = graph(
        ["d", "w1", "w2"],
        ["r", "a", "b1", "b2"],
        [("d", "r"), ("w1", "a"), ("w2", "a"), ("a", "b1", 50), ("a", "b2", 50)]
        + [("b1", "r"), ("b2", "r")],
    )
    for multipath, want0, want_a in [(False, 25.0, 50.0), (True, 50.0, 100.0)]:
        p = PlacementProblem(g, "d", ["w1", "w2"], 1, 1e4, multipath=multipath)
        assert solve_lp(p, []).gamma == pytest.approx(want0, rel=1e-6)
        res = solve_lp(p, ["a"])
        assert res.gamma == pytest.approx(want_a, rel=1e-6)
        assert_feasible(p, res)
        if multipath:
            assert res.link_loads[("a", "b1")] == pytest.approx(50.0, rel=1e-6)
            assert res.link_loads[("a", "b2")] == pytest.approx(50.0, rel=1e-6)
        else:
            assert ("a", "b2") not in res.link_loads
        assert greedy_placement(p).switches == ("a",)


def test_fat_tree_k4_greedy_matches_milp_and_beats_baselines() -> None:
    for k in (1, 2, 3):
        p = ft_problem(4, k)
        gr, opt = greedy_placement(p), optimal_placement(p)
        assert opt.optimal
        assert gr.gamma == pytest.approx(opt.gamma, rel=1e-5)
        assert opt.upper_bound is not None and opt.upper_bound >= opt.gamma * (1 - 1e-6)
        assert len(gr.switches) == k and len(gr.trace) == k
        assert [t.gamma for t in gr.trace] == sorted(t.gamma for t in gr.trace)
        for base in (random_placement(p, 1), tor_first_placement(p), degree_first_placement(p)):
            assert len(base.switches) == k
            assert base.gamma <= opt.gamma * (1 + 1e-6)
            assert_feasible(p, base.result)
        assert_feasible(p, gr.result)
        assert_feasible(p, opt.result)


@pytest.mark.parametrize("seed", range(6))
def test_random_small_graphs(seed: int) -> None:
    p = random_graph(seed)
    if seed % 2:  # same checks with ECMP splitting
        p = PlacementProblem(p.graph, p.ps, p.workers, p.budget, p.switch_capacity, multipath=True)
    gr, opt = greedy_placement(p), optimal_placement(p)
    assert opt.optimal
    assert gr.gamma <= opt.gamma * (1 + 1e-6)
    # every subset of size K: the MILP is the maximum of the LP over them
    best = max(solve_lp(p, s).gamma for s in itertools.combinations(p.candidates, p.budget))
    assert opt.gamma == pytest.approx(best, rel=1e-5)
    if p.budget == 1:
        assert gr.gamma == pytest.approx(best, rel=1e-5)  # one greedy round is exhaustive
    assert_feasible(p, gr.result)


def test_ps_tor_and_candidates() -> None:
    p = ft_problem(4, 2)
    assert p.tor == "s7"  # the edge switch of h1
    assert "s7" not in p.candidates and len(p.candidates) == 19
    assert p.path("h16", "h1")[0] == "h16" and p.path("h16", "h1")[-2:] == ["s7", "h1"]
    assert p.switch_ids()["s7"] == 7  # device_id
    p2 = ft_problem(4, 2, tor_in_budget=True)
    assert "s7" in p2.candidates and len(p2.candidates) == 20
    # with s_d in the budget the greedy can (and here does) spend a slot on it
    assert greedy_placement(p2).gamma <= greedy_placement(p).gamma * (1 + 1e-6)


def test_solve_lp_input_checks() -> None:
    p = ft_problem(4, 1)
    with pytest.raises(PlacementError, match="not a switch"):
        solve_lp(p, ["h2"])
    with pytest.raises(PlacementError, match="twice"):
        solve_lp(p, ["s1", "s1"])
    assert solve_lp(p, ["s7"]).gamma == pytest.approx(solve_lp(p, []).gamma)  # s_d: no-op


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"budget": 4}, r"budget K=4 exceeds the 2 candidate switches"),
        ({"budget": -1}, r"K must be >= 0"),
        ({"budget": 1.5}, r"K must be an integer"),
        ({"budget": True}, r"K must be an integer"),
        ({"ps": "nope"}, r"parameter server 'nope' is not a node"),
        ({"ps": "r"}, r"parameter server 'r' is not a host"),
        ({"workers": []}, r"no workers"),
        ({"workers": "a0"}, r"not one string"),
        ({"workers": ["a0", "ghost"]}, r"worker 'ghost' is not a node"),
        ({"workers": ["a0", "t1"]}, r"worker 't1' is not a host"),
        ({"workers": ["a0", "d"]}, r"is the parameter server"),
        ({"workers": ["a0", "a0"]}, r"listed twice"),
        ({"switch_capacity": 0}, r"C must be > 0"),
        ({"switch_capacity": -5.0}, r"C must be > 0"),
        ({"switch_capacity": float("nan")}, r"C must be > 0"),
        ({"switch_capacity": "x"}, r"C must be a number"),
        ({"ps_tor": "t1"}, r"ps_tor 't1' is not a switch adjacent"),
        ({"graph": "not a graph"}, r"networkx.Graph"),
        ({"graph": nx.DiGraph()}, r"undirected"),
    ],
)
def test_bad_input(change: dict, match: str) -> None:
    g = two_tor(2, 1)
    args = {
        "graph": g,
        "ps": "d",
        "workers": workers_of(g),
        "budget": 1,
        "switch_capacity": 100.0,
    }
    args.update(change)
    with pytest.raises(PlacementError, match=match):
        PlacementProblem(**args)


def test_bad_graphs() -> None:
    g = two_tor(2, 1)
    g.add_node("x", kind="host")
    g.add_node("sx", kind="switch")
    g.add_edge("x", "sx", capacity=10.0)
    with pytest.raises(PlacementError, match=r"no path .* 'x'.*disconnected"):
        PlacementProblem(g, "d", ["a0", "x"], 1, 100.0)
    # an unreachable switch is no candidate and does not count toward K's limit
    assert "sx" not in PlacementProblem(g, "d", ["a0"], 2, 100.0).candidates
    with pytest.raises(PlacementError, match="exceeds the 2 candidate"):
        PlacementProblem(g, "d", ["a0"], 3, 100.0)

    g2 = two_tor(2, 1)
    del g2["t1"]["r"]["capacity"]
    with pytest.raises(PlacementError, match=r"link (t1-r|r-t1) has no numeric 'capacity'"):
        PlacementProblem(g2, "d", ["a0"], 1, 100.0)
    g2["t1"]["r"]["capacity"] = 0
    with pytest.raises(PlacementError, match=r"capacity 0.0, must be > 0"):
        PlacementProblem(g2, "d", ["a0"], 1, 100.0)

    g3 = graph(["d", "w"], ["s"], [("d", "w"), ("w", "s")])
    with pytest.raises(PlacementError, match="no neighbouring switch"):
        PlacementProblem(g3, "d", ["w"], 0, 100.0)


def test_accepts_topology_object() -> None:
    topologies = pytest.importorskip("topologies")
    topo = topologies.fat_tree(4, bw=1000.0)
    hosts = [n for n, k in topo.graph.nodes(data="kind") if k == "host"]
    p = PlacementProblem(topo, hosts[0], hosts[1:], 1, 2000.0)
    assert p.graph is topo.graph
    assert greedy_placement(p).gamma > solve_lp(p, []).gamma
