"""Tests for controller.placement's routing policy: tags, fragments and paths from an LP
result.
"""

from __future__ import annotations

import pytest

from controller.placement import (
    LPResult,
    PlacementError,
    PlacementProblem,
    greedy_placement,
    routing_policy,
)
from tests.placement_graphs import ft_problem, graph, random_graph, two_tor, workers_of

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
