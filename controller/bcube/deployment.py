"""bcube: BML on a live BCube, and its fat-tree baselines (docs/bcube.md).

* :func:`bcube_plan` / :func:`fat_tree_plan` -- the JSON plan every agent of a run reads
  (scheme, size, every server's addresses and interfaces per level, gradient length,
  fixed-point scale);
* :func:`line_rate_model` -- the time each scheme needs when its busiest NIC runs at line
  rate (exact byte counts from the schedule, TCP/IP/Ethernet overhead included);
* :func:`run_scheme` -- run one scheme on a running :class:`topologies.network.Network`:
  start one agent per server, release them together, check every server's result
  element by element against the exact fixed-point sum, read switch port counters;
* :func:`bcube_network_topology` / :func:`baseline_fat_tree` / :func:`baseline_rails` --
  the networks: BCube, the one-NIC fat-tree, and the k-rail network (every server ``k``
  NICs, NIC ``j`` into rail ``j``'s own leaf-spine or fat-tree) whose ``k`` concurrent
  rings or sharded PSs (:func:`rail_plan`) have BML's NIC count.

BCube needs no BCube-specific data plane: ``forward.p4`` with
:func:`controller.routing.compute_routes` gives every switch a /32 route to each NIC on
it and nothing else (no switch-to-switch links exist), so every packet crosses exactly
one switch. Loss is the egress ``LinkEmulation`` stage (``loss={(switch, port): p}``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from controller import registry
from topologies import bcube, fat_tree, rail_fat_tree, rail_leaf_spine
from topologies.base import Topology
from wire.bcube import BCUBE_HEADER_LEN, BCUBE_TCP_PORT
from wire.bcube_schedule import DEFAULT_PIECES, RAIL_SCHEMES, BcubeSchedule, ScheduleError, cut
from wire.fixedpoint import max_scale_bits, quantize

__all__ = [
    "AGENTS",
    "SCHEMES",
    "WIRE_PER_PAYLOAD",
    "RAIL_FABRICS",
    "baseline_fat_tree",
    "baseline_rails",
    "bcube_network_topology",
    "bcube_shape",
    "bcube_plan",
    "choose_scale_bits",
    "exact_sum",
    "fat_tree_plan",
    "gradients",
    "line_rate_model",
    "nic_payload_bytes",
    "rail_plan",
]

#: Agent module per scheme (entries of the one registry, controller/registry.py).
AGENTS = registry.AGENTS
#: Fabrics a k-rail network's rails can be (``baseline_rails``).
RAIL_FABRICS = ("leaf-spine", "fat-tree")
SCHEMES = tuple(AGENTS)
#: Wire bytes per payload byte on a loaded link direction: a full TCP segment carries
#: 1448 payload bytes in a 1514-byte frame (14 Ethernet + 20 IP + 32 TCP with
#: timestamps; htb counts the Ethernet header, not preamble/FCS), and the delayed ACKs
#: of the opposite direction's data (66 bytes per two segments) share the link.
WIRE_PER_PAYLOAD = (1514 + 33) / 1448
#: Highest fixed-point scale used (more precision than float32 has is useless).
MAX_SCALE_BITS = 30


# ----------------------------------------------------------------------------- networks
def bcube_shape(servers: int) -> tuple[int, int] | None:
    """``(n, k)`` with ``n**k == servers``, ``n, k >= 2``, fewest levels; None if none."""
    for k in range(2, servers.bit_length() + 1):
        n = round(servers ** (1 / k))
        for cand in (n - 1, n, n + 1):
            if cand >= 2 and cand**k == servers:
                return cand, k
    return None


def bcube_network_topology(n: int, k: int, bw: float) -> Topology:
    """BCube(``n``, ``k``) with ``bw`` Mbit/s links; bad sizes raise ScheduleError."""
    BcubeSchedule(n, k, 1)  # the specified constraints (N, k >= 2), one clear error
    if n**k > 16 * 16:
        raise ScheduleError(f"BCube({n}, {k}) has {n**k} servers: too many for this machine")
    return bcube(n, k, bw=bw)


def baseline_fat_tree(servers: int, bw: float, fabric_x: float = 4.0) -> Topology:
    """The smallest fat-tree with ``servers`` hosts; host links ``bw`` Mbit/s, switch-to-
    switch links ``fabric_x * bw`` (an ideal non-blocking fabric, the BML paper's
    assumption: ECMP hash collisions would otherwise make the baselines slower than
    any host-link model)."""
    return _fast_fabric(fat_tree(_fat_tree_k(servers), bw=bw), bw, fabric_x)


def _fat_tree_k(servers: int) -> int:
    k = 4
    while k**3 // 4 < servers:
        k += 2
    return k


def _fast_fabric(topo: Topology, bw: float, fabric_x: float) -> Topology:
    for u, v, data in topo.graph.edges(data=True):
        if topo.is_switch(u) and topo.is_switch(v):
            data["capacity"] = float(bw * fabric_x)
    return topo


def baseline_rails(servers: int, rails: int, bw: float, fabric_x: float = 4.0,
                   fabric: str = "leaf-spine") -> Topology:
    """A ``rails``-rail network for ``servers`` servers: every server ``rails`` NICs at
    ``bw`` Mbit/s (BCube's NIC count and rate), NIC ``j`` into rail ``j``'s own fabric,
    switch-to-switch links ``fabric_x * bw`` (non-blocking, as :func:`baseline_fat_tree`).

    ``fabric``: ``leaf-spine`` (default; 2 spines, ``ceil(sqrt(S))`` servers per leaf:
    at most 3 switches on a path, which spares the 2-core machine's Python switches) or
    ``fat-tree`` (the smallest k-ary fat-tree per rail, the one-NIC baseline's)."""
    if fabric == "fat-tree":
        topo = rail_fat_tree(rails, _fat_tree_k(servers), bw=bw)
    elif fabric == "leaf-spine":
        per_leaf = max(2, math.isqrt(servers - 1) + 1)
        topo = rail_leaf_spine(rails, 2, -(-servers // per_leaf), per_leaf, bw=bw)
    else:
        raise ValueError(f"unknown rail fabric {fabric!r} (choose from {', '.join(RAIL_FABRICS)})")
    return _fast_fabric(topo, bw, fabric_x)


# ----------------------------------------------------------------------------- plans
def gradients(servers: int, values: int, seed: int) -> list[np.ndarray]:
    """Gradient-like float32 vectors: mostly small, a few larger."""
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(values) * 0.01).astype(np.float32) for _ in range(servers)]


def choose_scale_bits(grads: list[np.ndarray]) -> int:
    """The largest scale (<= 30) at which every gradient's fixed-point sum fits int32."""
    bits = [max_scale_bits(g, len(grads)) for g in grads]
    if any(b is None for b in bits):
        raise ValueError("a gradient is too large for int32 fixed point even at scale 0")
    return min(MAX_SCALE_BITS, *(b for b in bits if b is not None))


def exact_sum(grads: list[np.ndarray], scale_bits: int) -> np.ndarray:
    """The exact fixed-point sum every server must end with (int64)."""
    return sum(quantize(g, scale_bits, len(grads)).astype(np.int64) for g in grads)


def bcube_plan(topo: Topology, n: int, k: int, values: int, scale_bits: int,
               port: int = BCUBE_TCP_PORT, pipeline: int = 1) -> dict[str, Any]:
    """The BML plan: server ``s`` is host ``h{s+1}``, its level-``l`` NIC is ``eth{l}``;
    ``pipeline`` pieces per parameter set (:func:`hosts.bml.agent.run_bml`)."""
    BcubeSchedule(n, k, values)
    hosts = topo.hosts()
    if len(hosts) != n**k:
        raise ScheduleError(f"topology {topo.name} has {len(hosts)} hosts, BCube({n}, {k}) {n**k}")
    return {
        "scheme": "bml", "n": n, "k": k, "servers": n**k, "values": values, "pipeline": pipeline,
        "scale_bits": scale_bits, "port": port, "hosts": hosts,
        "ips": [[topo.host_ip(h, lvl) for lvl in range(k)] for h in hosts],
        "ifaces": [[topo.iface(h, lvl)["name"] for lvl in range(k)] for h in hosts],
    }


def fat_tree_plan(topo: Topology, scheme: str, servers: int, values: int, scale_bits: int,
                  port: int = BCUBE_TCP_PORT, pieces: int | None = None) -> dict[str, Any]:
    """A baseline plan on the first ``servers`` hosts of a fat-tree (NIC 0 each);
    ``pieces`` per shard (sharded PS, default 8) or per chunk (ring, default 4)."""
    if scheme not in SCHEMES or scheme == "bml":
        raise ValueError(f"unknown baseline {scheme!r} (choose from sharded_ps, ring, ps)")
    hosts = topo.hosts()[:servers]
    if len(hosts) < servers or servers < 2:
        raise ValueError(f"{topo.name} cannot host {servers} servers")
    return {
        "scheme": scheme, "servers": servers, "values": values, "scale_bits": scale_bits,
        "port": port, "hosts": hosts,
        "pieces": pieces or (8 if scheme == "sharded_ps" else 4),
        "ips": [[topo.host_ip(h, 0)] for h in hosts],
        "ifaces": [[topo.iface(h, 0)["name"]] for h in hosts],
    }


def rail_plan(topo: Topology, scheme: str, servers: int, values: int, scale_bits: int,
              port: int = BCUBE_TCP_PORT, pieces: int | None = None) -> dict[str, Any]:
    """A k-rail plan (``rail_ring`` or ``rail_sharded_ps``) on the first ``servers`` hosts
    of a rail network: ``rails`` = the hosts' NIC count, server ``s``'s rail-``j`` address
    and interface are its NIC ``j``'s; ``pieces`` per chunk (ring) or shard (PS) on
    each rail."""
    if scheme not in RAIL_SCHEMES:
        raise ValueError(f"unknown k-rail baseline {scheme!r} (choose from {', '.join(RAIL_SCHEMES)})")
    hosts = topo.hosts()[:servers]
    if len(hosts) < servers or servers < 2:
        raise ValueError(f"{topo.name} cannot host {servers} servers")
    rails = len(topo.node(hosts[0])["ifaces"])
    if rails < 1 or any(len(topo.node(h)["ifaces"]) != rails for h in hosts):
        raise ValueError(f"{topo.name}: servers must all have the same number of NICs")
    return {
        "scheme": scheme, "servers": servers, "values": values, "scale_bits": scale_bits,
        "port": port, "hosts": hosts, "rails": rails,
        "pieces": pieces or DEFAULT_PIECES[scheme],
        "ips": [[topo.host_ip(h, j) for j in range(rails)] for h in hosts],
        "ifaces": [[topo.iface(h, j)["name"] for j in range(rails)] for h in hosts],
    }


# ----------------------------------------------------------------------------- model
def nic_payload_bytes(scheme: str, servers: int, values: int, n: int = 0, k: int = 0) -> int:
    """Bytes (message headers included) the busiest NIC must carry one after the other:
    the larger of its two directions when they overlap, their sum for the single PS.
    The k-rail schemes take ``k`` as the rail count: rail ``j`` carries part ``j`` of
    ``k`` contiguous parts, as a ring or sharded PS of its own."""
    h = BCUBE_HEADER_LEN
    if scheme in RAIL_SCHEMES:
        if k < 1:
            raise ValueError(f"{scheme} needs the rail count k >= 1, got {k}")
        return max(nic_payload_bytes(RAIL_SCHEMES[scheme], servers, b - a)
                   for a, b in cut((0, values), k))
    if scheme == "bml":
        sched = BcubeSchedule(n, k, values)
        # headers: one message per peer per stage per thread on each level's NIC
        msgs = 2 * (n - 1) * k  # 2k stages per thread, k threads spread over k NICs
        return int(sched.nic_bytes().max()) + msgs * h
    shards = [b - a for a, b in cut((0, values), servers)]
    if scheme in ("sharded_ps", "ring"):
        # push (S-1) shards out and pull (S-1) sums in; ring: 2(S-1) chunk steps
        return 2 * (servers - 1) * (4 * max(shards) + h)
    if scheme == "ps":
        return 2 * (servers - 1) * (4 * values + h)
    raise ValueError(f"unknown scheme {scheme!r}")


def line_rate_model(scheme: str, servers: int, values: int, bw_mbit: float,
                    n: int = 0, k: int = 0) -> float:
    """Seconds when the busiest NIC direction runs at ``bw_mbit`` Mbit/s (docs/bcube.md).

    BML: the k threads use the k NICs in parallel, each NIC carries ``2 M (1 - 1/S) / k``;
    k-rail ring and sharded PS (``k`` = rails) the same, one ring or PS per NIC on ``M/k``;
    sharded PS and ring: ``2 M (1 - 1/S)`` on the one NIC; single PS: its NIC receives
    ``(S - 1) M`` then sends ``(S - 1) M`` (the sends wait for the whole sum).
    """
    payload = nic_payload_bytes(scheme, servers, values, n, k)
    return payload * WIRE_PER_PAYLOAD * 8 / (bw_mbit * 1e6)


# ----------------------------------------------------------------------------- running
