"""Sync time vs workers at data-centre scale: PS, ring and INA on fat-trees (all links at
one rate, 100 Gbit/s by default), each with its line-rate bound (``python -m bench
simulate``, ``make simulate``)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from topologies import fat_tree

from .core import run_ina, run_ring
from .plan import policy_dict


def fat_tree_for(hosts: int) -> int:
    """The smallest (even) fat-tree arity ``k`` with at least ``hosts`` hosts."""
    k = 4
    while k**3 // 4 < hosts:
        k += 2
    return k


@dataclass
class ScaleRow:
    """One scheme at one size."""

    k: int
    workers: int
    scheme: str
    seconds: float | None
    bound_s: float
    retransmissions: int
    plan_s: float
    wall_s: float
    note: str = ""
    values: int = 0
    work: dict[str, float] = field(default_factory=dict)  # SimResult.work


def scale_rows(workers: int, schemes: tuple[str, ...] = ("ps", "ring", "ina"),
               gbps: float = 100.0, values: int = 32768, budget: int = 4,
               window: int = 32, timeout: float = 1.0, k: int | None = None,
               max_time: float = 120.0) -> list[ScaleRow]:
    """Simulate ``schemes`` with ``workers`` contributors (PS-based: a PS ``h1`` plus
    ``workers`` workers; ring: ``workers`` peers) on the smallest fat-tree that holds
    them (or arity ``k``); INA's ``budget`` switches placed by the greedy + LP with the
    switch capacity equal to the link rate."""
    k = k or fat_tree_for(workers + 1)
    mbit = gbps * 1000.0
    topo = fat_tree(k, bw=mbit)
    hosts = topo.hosts()
    if workers + 1 > len(hosts):
        raise ValueError(f"fat-tree k={k} has {len(hosts)} hosts, {workers} workers need more")
    ps, ws = hosts[0], hosts[1:workers + 1]
    rows = []
    for s in schemes:
        t0 = time.monotonic()
        note = ""
        if s == "ring":
            plan_s = 0.0
            r = run_ring(topo, hosts[:workers], values, max_time=max_time)
        else:
            pol = policy_dict(topo, ps, ws, budget if s == "ina" else 0, mbit, values,
                              aggregate=s == "ina")
            plan_s = time.monotonic() - t0
            if s == "ina":
                note = "aggregating " + ", ".join(pol["aggregating"])
            r = run_ina(topo, pol, values, window=window, timeout=timeout, max_time=max_time,
                        scheme=s)
        rows.append(ScaleRow(k, workers, s, r.seconds, r.bound_s, r.retransmissions, plan_s,
                             time.monotonic() - t0, note, values, r.work))
    return rows


def ina_wire_bytes(values_per_packet: int = 64) -> int:
    """Bytes an INA packet puts on a simulated link: UDP payload (header, the values, the
    Ethernet bytes PPP lacks) + UDP 8 + IPv4 20 + PPP 2 (sim/core.py)."""
    return 20 + 4 * values_per_packet + 12 + 8 + 20 + 2


#: :func:`ina_wire_bytes` of the default 64 values a packet
INA_WIRE_BYTES = ina_wire_bytes()


@dataclass
class BudgetRow:
    """INA with ``budget`` switches placed by ``method`` on one fat-tree."""

    k: int
    workers: int
    budget: int
    method: str
    seconds: float | None
    bound_s: float
    lp_s: float  # the gradient at the LP's per-worker rate gamma
    retransmissions: int
    plan_s: float
    wall_s: float
    aggregating: list[str]
    counters: dict[str, int]


def budget_rows(k: int, budgets: tuple[int, ...], methods: tuple[str, ...] = ("greedy",),
                gbps: float = 100.0, values: int = 32768, workers: int | None = None,
                window: int = 32, timeout: float = 1.0, max_time: float = 5.0,
                seed: int = 0) -> list[BudgetRow]:
    """INA's sync time vs its budget K on fat-tree ``k`` (PS ``h1``, every other host a
    worker unless ``workers``), all links ``gbps``, the switch capacity the link rate:
    each K placed by each of ``methods`` (sim/plan.py:METHODS). K=0 is ``s_d`` alone (the
    same for every method: one row)."""
    mbit = gbps * 1000.0
    topo = fat_tree(k, bw=mbit)
    hosts = topo.hosts()
    n = workers or len(hosts) - 1
    ps, ws = hosts[0], hosts[1:n + 1]
    rows = []
    for kk in budgets:
        for m in methods if kk else methods[:1]:
            t0 = time.monotonic()
            pol = policy_dict(topo, ps, ws, kk, mbit, values, sd_only=True, method=m, seed=seed)
            plan_s = time.monotonic() - t0
            r = run_ina(topo, pol, values, window=window, timeout=timeout, max_time=max_time)
            lp_s = pol["num_fragments"] * INA_WIRE_BYTES * 8 / (pol["gamma"] * 1e6)
            rows.append(BudgetRow(k, n, kk, m if kk else "-", r.seconds, r.bound_s, lp_s,
                                  r.retransmissions, plan_s, time.monotonic() - t0,
                                  pol["aggregating"], r.counters))
    return rows
