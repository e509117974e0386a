"""Tests for controller.placement: the seed-002 LP, greedy, MILP, baselines, tags."""

from __future__ import annotations

import collections
import itertools
import math
import random

import networkx as nx
import numpy as np
import pytest

import topologies
from controller.placement import (
    LPResult,
    PlacementError,
    PlacementProblem,
    degree_first_placement,
    greedy_placement,
    optimal_placement,
    random_placement,
    routing_policy,
    solve_lp,
    tor_first_placement,
)

# ----------------------------------------------------------------------------- graphs


def graph(hosts, switches, edges, cap=100.0) -> nx.Graph:
    """Hand-built topology; an edge is (u, v) or (u, v, capacity)."""
    g = nx.Graph()
    for h in hosts:
        g.add_node(h, kind="host", role="host")
    for s in switches:
        g.add_node(s, kind="switch", role="switch")
    for u, v, *c in edges:
        g.add_edge(u, v, capacity=float(c[0]) if c else cap)
    return g


def two_tor(left: int = 3, right: int = 1, cap: float = 100.0) -> nx.Graph:
    """Root r (the PS's ToR) with the PS d and two ToRs: t1 with `left` workers, t2
    with `right` workers; every link `cap`."""
    ws1 = [f"a{i}" for i in range(left)]
    ws2 = [f"b{i}" for i in range(right)]
    edges = [("d", "r"), ("t1", "r"), ("t2", "r")]
    edges += [(w, "t1") for w in ws1] + [(w, "t2") for w in ws2]
    return graph(["d", *ws1, *ws2], ["r", "t1", "t2"], edges, cap)


def workers_of(g: nx.Graph, ps: str = "d") -> list[str]:
    return [n for n, k in g.nodes(data="kind") if k == "host" and n != ps]


def fat_tree(k: int, cap: float = 1000.0) -> nx.Graph:
    """k-ary fat-tree graph (topologies.fat_tree): cores s1.., per pod aggs and edges."""
    return topologies.fat_tree(k, bw=cap).graph


def ft_problem(k: int = 4, budget: int = 2, c: float = 2000.0, **kw) -> PlacementProblem:
    g = fat_tree(k)
    hosts = [n for n, kd in g.nodes(data="kind") if kd == "host"]
    return PlacementProblem(g, hosts[0], hosts[1:], budget, c, **kw)


def random_graph(seed: int) -> PlacementProblem:
    """Small random connected switch graph with hosts hanging off, random capacities."""
    rng = random.Random(seed)
    n_sw = rng.randint(4, 6)
    sws = [f"s{i}" for i in range(n_sw)]
    tree = nx.random_labeled_tree(n_sw, seed=seed)
    edges = [(sws[u], sws[v], rng.choice([50, 100, 200])) for u, v in tree.edges]
    for _ in range(rng.randint(0, 3)):
        u, v = rng.sample(sws, 2)
        edges.append((u, v, rng.choice([50, 100, 200])))
    hosts = [f"h{i}" for i in range(rng.randint(4, 8))]
    for h in hosts:
        edges.append((h, rng.choice(sws), rng.choice([100, 200])))
    g = graph(hosts, sws, [])
    for u, v, c in edges:
        g.add_edge(u, v, capacity=float(c))
    budget = rng.randint(1, 2)
    return PlacementProblem(g, hosts[0], hosts[1:], budget, rng.choice([150.0, 300.0, 1e4]))


def assert_feasible(prob: PlacementProblem, res: LPResult) -> None:
    """Every link within capacity; every worker pushes gamma; switch inputs <= C."""
    g = prob.graph
    for (u, v), load in res.link_loads.items():
        assert load <= g[u][v]["capacity"] * (1 + 1e-6), (u, v, load)
    for w in prob.workers:
        assert sum(res.rates[w].values()) == pytest.approx(res.gamma, rel=1e-6)
    for s in res.switches:
        assert sum(r[s] for r in res.rates.values()) <= prob.switch_capacity * (1 + 1e-6)
        # output >= every per-worker input
        assert res.switch_out[s] >= max(r[s] for r in res.rates.values()) * (1 - 1e-6)


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


# ----------------------------------------------------------------------------- routing


def check_policy(res: LPResult, pol, workers) -> None:
    f_n = pol.num_fragments
    ids = pol.switch_ids
    tag_of = {t: ids[t] for t in (*res.switches, res.tor)} | {res.ps: 0}
    for w in workers:
        assert len(pol.tags[w]) == f_n
        counts = pol.counts(w)
        for t, rate in res.rates[w].items():
            assert abs(counts.get(tag_of[t], 0) - f_n * rate / res.gamma) < 1 + 1e-9
    for s in res.switches:  # fan-in = how many workers tag f with s
        for f in range(f_n):
            assert pol.fan_in[s][f] == sum(pol.tags[w][f] == ids[s] for w in workers)
    # every worker's value of every fragment reaches the PS exactly once
    for f in range(f_n):
        at_ps = sum(pol.tags[w][f] == 0 for w in workers)
        at_ps += sum(pol.fan_in[s][f] for s in res.switches if pol.partial_tags[s][f] == 0)
        if res.tor in pol.fan_in:
            at_ps += pol.fan_in[res.tor][f]
        assert at_ps == len(workers), f


@pytest.mark.parametrize(("f_n", "multipath"), [(1, False), (7, True), (64, False), (1000, True)])
def test_routing_policy_fat_tree(f_n: int, multipath: bool) -> None:
    p = ft_problem(4, 2, multipath=multipath)
    pl = greedy_placement(p)
    pol = routing_policy(pl, f_n)
    check_policy(pl.result, pol, p.workers)
    # workers with equal rates get identical tag sequences
    by_rates: dict[tuple, set] = {}
    for w in p.workers:
        key = tuple(round(v, 6) for v in pl.rates[w].values())
        by_rates.setdefault(key, set()).add(pol.tags[w])
    assert all(len(v) == 1 for v in by_rates.values())
    assert pol.tor == "s7" and set(pol.switch_ids) == {*pl.switches, "s7"}


def test_routing_policy_star_and_merge() -> None:
    hosts = ["d", "w1", "w2", "w3", "w4"]
    g = graph(hosts, ["s"], [(h, "s") for h in hosts])
    pl = greedy_placement(PlacementProblem(g, "d", hosts[1:], 0, 200.0))
    pol = routing_policy(pl, 8)  # 50 of 62.5 aggregated = 6.4 of 8 fragments
    assert pol.counts("w1") == {1: 6, 0: 2}
    assert len({pol.tags[w] for w in hosts[1:]}) == 1  # all workers agree
    check_policy(pl.result, pol, hosts[1:])

    g2 = two_tor(2, 2)
    p2 = PlacementProblem(g2, "d", workers_of(g2), 2, 1e4)
    pl2 = greedy_placement(p2)
    pol2 = routing_policy(pl2, 10)
    ids = pol2.switch_ids
    assert pol2.counts("a0") == {ids["t1"]: 10} and pol2.counts("b0") == {ids["t2"]: 10}
    # both partials merged at r: fan-in there is all 4 workers for every fragment
    assert pol2.partial_tags["t1"] == (ids["r"],) * 10
    assert pol2.fan_in["r"] == (4,) * 10
    check_policy(pl2.result, pol2, p2.workers)


def test_routing_policy_random_graphs() -> None:
    for seed in range(4):
        p = random_graph(seed)
        pl = greedy_placement(p)
        check_policy(pl.result, routing_policy(pl, 50), p.workers)


def test_routing_policy_bad_fragments() -> None:
    pl = greedy_placement(ft_problem(4, 1))
    for bad in (0, -3, 2.5, True):
        with pytest.raises(PlacementError, match="num_fragments"):
            routing_policy(pl, bad)


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
