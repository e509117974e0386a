"""Sync time vs workers at data-centre scale: PS, ring and INA on fat-trees (all links at
one rate, 100 Gbit/s by default), each with its line-rate bound (``python -m bench
simulate``, ``make simulate``)."""

from __future__ import annotations

import time
from dataclasses import dataclass

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
                             time.monotonic() - t0, note))
    return rows
