"""Shared graphs and checks of the placement tests (``test_placement_*.py``): hand-built
and fat-tree graphs, random problems, and the feasibility check of an LP result.
"""

from __future__ import annotations

import random

import networkx as nx
import pytest

import topologies
from controller.placement import (
    LPResult,
    PlacementProblem,
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
