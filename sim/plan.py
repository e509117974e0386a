"""The inputs of a simulated run as the emulator's control plane computes them: the
placement and routing policy (``gradctl place``, ``InaJob.plan``) as the policy dict the
agents read (docs/ina_policy.md), without the wire's 32-worker bitmap limit."""

from __future__ import annotations

import math
from typing import Any

from controller.placement import (
    PlacementProblem,
    greedy_placement,
    random_placement,
    routing_policy,
    tor_first_placement,
)
from topologies import Topology
from wire.ina import INA_VALUES
from wire.ina_policy import policy_json

#: Placement methods ``policy_dict`` takes (controller/placement): the greedy + LP
#: and two baselines, each evaluated by the same LP and turned into tags the same way.
METHODS = ("greedy", "random", "tor-first")


def policy_dict(topo: Topology, ps: str, workers: list[str], budget: int, capacity: float,
                values: int, aggregate: bool = True, job_id: int = 1,
                sd_only: bool = False, method: str = "greedy", seed: int = 0,
                values_per_packet: int = INA_VALUES) -> dict[str, Any]:
    """``InaJob.plan(...).policy_dict()`` for any worker count: placement of ``budget``
    switches (``method``: the greedy + LP, or the ``random`` (``seed``) / ``tor-first``
    baselines, each with the LP's rates), the per-fragment routing policy;
    ``aggregate=False``: the PS baseline (every tag 0, no ``s_d``), and so does
    ``budget=0`` here: "INA with K=0" is the PS (the emulator's ``InaJob.plan`` with budget
    0 still aggregates at ``s_d``, which the placement keeps outside the budget: ask for
    that with ``budget=0, sd_only=True``).

    ``values_per_packet``: 64, 128 or 256 values a fragment (the policy key of the same name).

    Besides the agents' fields the dict carries ``aggregating`` (switch names), ``gamma``
    (the LP's per-worker rate, Mbit/s) and ``method``."""
    if method not in METHODS:
        raise ValueError(f"placement method must be one of {', '.join(METHODS)}, got {method!r}")
    nf = math.ceil(values / values_per_packet)
    ps_ip, worker_ips = topo.host_ip(ps), [topo.host_ip(w) for w in workers]
    if not aggregate or (budget == 0 and not sd_only):
        return policy_json(job_id, ps_ip, worker_ips, nf, values_per_packet=values_per_packet)
    prob = PlacementProblem(topo, ps, workers, budget, capacity)
    if method == "greedy":
        placement = greedy_placement(prob)
    elif method == "random":
        placement = random_placement(prob, seed=seed)
    else:
        placement = tor_first_placement(prob)
    pol = routing_policy(placement, nf)
    ids = pol.switch_ids
    d = policy_json(
        job_id, ps_ip, worker_ips, nf, values_per_packet=values_per_packet,
        tags=[pol.tags[w] for w in workers],
        fanin={ids[s]: v for s, v in pol.fan_in.items() if any(v)},
        sd=ids[pol.tor],
        partial_tags={ids[s]: v for s, v in pol.partial_tags.items() if any(v)})
    d["aggregating"] = [*placement.result.switches, pol.tor]
    d["gamma"] = float(placement.gamma)
    d["method"] = placement.method
    return d
