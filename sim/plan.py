"""The inputs of a simulated run as the emulator's control plane computes them: the
placement and routing policy (``gradctl place``, ``InaJob.plan``) as the policy dict the
agents read (docs/ina_policy.md), without the wire's 32-worker bitmap limit."""

from __future__ import annotations

import math
from typing import Any

from controller.placement import PlacementProblem, greedy_placement, routing_policy
from topologies import Topology

INA_VALUES = 64


def policy_dict(topo: Topology, ps: str, workers: list[str], budget: int, capacity: float,
                values: int, aggregate: bool = True, job_id: int = 1,
                sd_only: bool = False) -> dict[str, Any]:
    """``InaJob.plan(...).policy_dict()`` for any worker count: greedy + LP placement of
    ``budget`` switches, the per-fragment routing policy; ``aggregate=False``: the PS
    baseline (every tag 0, no ``s_d``), and so does ``budget=0`` here: "INA with K=0" is the
    PS (the emulator's ``InaJob.plan`` with budget 0 still aggregates at ``s_d``, which the
    placement keeps outside the budget: ask for that with ``budget=0, sd_only=True``)."""
    nf = math.ceil(values / INA_VALUES)
    d: dict[str, Any] = {"version": 1, "job": job_id, "ps": topo.host_ip(ps),
                         "workers": [topo.host_ip(w) for w in workers], "num_fragments": nf}
    if not aggregate or (budget == 0 and not sd_only):
        d.update(tags=0, sd=None)
        return d
    placement = greedy_placement(PlacementProblem(topo, ps, workers, budget, capacity))
    pol = routing_policy(placement, nf)
    ids = pol.switch_ids
    d["tags"] = [list(pol.tags[w]) for w in workers]
    d["fanin"] = {str(ids[s]): list(v) for s, v in pol.fan_in.items() if any(v)}
    d["sd"] = {"id": ids[pol.tor]}
    d["partial_tags"] = {str(ids[s]): list(v) for s, v in pol.partial_tags.items() if any(v)}
    d["aggregating"] = [*placement.result.switches, pol.tor]
    return d
