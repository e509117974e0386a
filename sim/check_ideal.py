"""The harness's ideal model (``experiments/ideal.py``) against ns-3, where both run.

For one scheme on one topology, :func:`compare` computes the ideal traffic of one
synchronization (its own traffic matrix without re-sends, routed as the harness routes
it) and runs the same synchronization in ns-3 (``sim/``: the same topology, link rates,
PS, workers, INA placement and policy), and returns both side by side: the busiest link
and its bytes in each, the ideal bound and the simulated sync time.

The ideal bound is the harness's: the busiest link's bytes at its rate plus the
protocol's sequential latency, ``steps`` switch traversals. Only the latency of one
traversal differs: the harness uses the emulator's (``HOP_LATENCY_S``, a ping's one-way
time per switch, measured); here it is the same quantity computed for ns-3's links
(:func:`hop_latency_s`: one link's delay and a ping frame's serialization). So a ratio
``ns-3 / ideal`` near 1 means the model explains ns-3's time; above 1, ns-3 shows what the
model leaves out (ns-3's per-destination route hash instead of the model's even ECMP
split, TCP's ACK clocking and slow start, the INA window); below 1, the model put more
bytes on its busiest link than ns-3's routes did (the even split is not the least loaded
routing).

    python -m bench.sim_bench --check-ideal [--check-cases all|tight] [--json FILE]
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from types import SimpleNamespace
from typing import Any

#: ns-3's link propagation delay (``Ns3Network``'s default, sim/core.py)
DELAY_S = 1e-6
#: the frame of the ping that measured the emulator's HOP_LATENCY_S (84-byte ICMP + Ethernet)
PING_FRAME = 98
#: the schemes both the ideal model and ns-3 have (ideal's name for the sharded PS is its
#: one-rail ``rail_sharded_ps``)
SCHEMES = ("ps", "ina", "ring", "sharded_ps", "bml")
#: INA's aggregating switches besides s_d (``make run``'s K), fewer where fewer exist
BUDGET = 2


def hop_latency_s(mbit: float, delay_s: float = DELAY_S) -> float:
    """One switch traversal in ns-3, one way, defined as the emulator's ``HOP_LATENCY_S``
    is measured: one more link's delay plus a ping frame's serialization at ``mbit``."""
    return delay_s + PING_FRAME * 8 / (mbit * 1e6)


@dataclass
class Pair:
    """One scheme on one topology and gradient: the ideal model and ns-3."""

    spec: str
    scheme: str
    workers: int
    values: int
    ideal_busiest: str
    ideal_bytes: int
    ideal_link_s: float  # the busiest link's bytes at its rate
    ideal_steps: int
    hop_s: float
    sim_s: float | None  # None: unfinished in the simulated time allowed
    sim_busiest: str
    sim_bytes: int
    sim_link_s: float
    retransmissions: int
    wall_s: float

    @property
    def ideal_bound_s(self) -> float:
        """The ideal bound with ns-3's switch traversal."""
        return self.ideal_link_s + self.ideal_steps * self.hop_s

    @property
    def ratio(self) -> float | None:
        """ns-3's sync time over the ideal bound."""
        return None if self.sim_s is None or not self.ideal_bound_s else self.sim_s / self.ideal_bound_s

    def as_dict(self) -> dict[str, Any]:
        """A plain dict (JSON), the derived figures included."""
        return {**asdict(self), "ideal_bound_s": self.ideal_bound_s, "ratio": self.ratio}


def placement(topo: Any, scheme: str, workers: int) -> tuple[str | None, list[str]]:
    """``(PS, workers)`` as the harness lays them out: PS ``h1`` and ``workers`` training
    hosts after it (every scheme's workers are the same hosts); BML: every BCube server."""
    hosts = topo.hosts()
    if scheme == "bml":
        return None, hosts
    if workers + 1 > len(hosts):
        from .core import SimError

        raise SimError(f"{topo.name} has {len(hosts)} hosts: too few for a PS and {workers} workers")
    return hosts[0], hosts[1:workers + 1]


def ina_job(topo: Any, ps: str, ws: list[str], values: int, aggregate: bool,
            budget: int = BUDGET, capacity: float = 1000.0) -> Any:
    """``InaJob.plan`` as the harness plans it (switch capacity ``capacity`` Mbit/s of
    input, the harness's 1000 by default), with at most ``budget`` aggregating switches
    besides s_d (fewer where the topology has fewer)."""
    from controller.ina import InaJob
    from controller.placement import PlacementError

    k = budget if aggregate else 0
    while True:
        try:
            return InaJob.plan(topo, ps, ws, k, capacity, values, job_id=1, aggregate=aggregate)
        except PlacementError:
            if k == 0:
                raise
            k -= 1


def ideal(scheme: str, topo: Any, ps: str | None, ws: list[str], values: int,
          job: Any = None) -> Any:
    """The ideal traffic (``experiments.ideal.Ideal``) of one synchronization."""
    from experiments.ideal import ideal_sync

    st = SimpleNamespace(topo=topo, ps=ps, workers=ws)
    return ideal_sync("rail_sharded_ps" if scheme == "sharded_ps" else scheme, st, values, job)


def simulate(scheme: str, topo: Any, ps: str | None, ws: list[str], values: int,
             job: Any = None, max_time: float = 60.0) -> Any:
    """The same synchronization in ns-3 (``sim.core.SimResult``)."""
    from .bml import bcube_size, run_bml, run_sharded_ps
    from .core import run_ina, run_ring

    if scheme in ("ps", "ina"):
        return run_ina(topo, job.policy_dict(), values, scheme=scheme, max_time=max_time)
    if scheme == "ring":
        return run_ring(topo, ws, values, max_time=max_time)
    if scheme == "sharded_ps":
        return run_sharded_ps(topo, ws, values, max_time=max_time)
    if scheme == "bml":
        n, k = bcube_size(topo)
        return run_bml(n, k, values, topo=topo, max_time=max_time)
    raise ValueError(f"no ns-3 model for {scheme!r} (ns-3 has {', '.join(SCHEMES)})")


def link_mbit(topo: Any) -> float:
    """The host links' rate: what the per-hop latency is computed at."""
    return min(topo.graph.edges[h, s]["capacity"] for h in topo.hosts() for s in topo.graph[h])


def compare(spec: str, scheme: str, workers: int, values: int, max_time: float = 60.0,
            budget: int = BUDGET, capacity: float = 1000.0) -> Pair:
    """The ideal model and ns-3 for ``scheme`` on topology ``spec`` (``star:5,bw=1000``);
    ``budget`` and ``capacity``: INA's aggregating switches besides s_d and their
    processing capacity (Mbit/s of input; ``math.inf``: line-rate switches)."""
    from topologies.spec import parse_topology

    topo = parse_topology(spec)
    ps, ws = placement(topo, scheme, workers)
    job = (ina_job(topo, ps, ws, values, scheme == "ina", budget, capacity)
           if scheme in ("ps", "ina") else None)
    idl = ideal(scheme, topo, ps, ws, values, job)
    k, b = idl.busiest()
    link_s = b * 8 / (idl.capacity[k] * 1e6) if b else 0.0
    t0 = time.monotonic()
    r = simulate(scheme, topo, ps, ws, values, job, max_time)
    return Pair(spec, scheme, len(ws), values, k, int(round(b)), link_s, idl.steps,
                hop_latency_s(link_mbit(topo)), r.seconds, r.bound_link, r.bound_bytes,
                r.bound_s, r.retransmissions, time.monotonic() - t0)


#: (topology spec, workers) per scheme family; every link at 1 Gbit/s, leaf-spine 2:1
TOPOLOGIES = (("star:5,bw=1000", 4), ("fat-tree:4,bw=1000", 4), ("fat-tree:4,bw=1000", 15),
              ("leaf-spine:2,4,4,bw=1000,oversub=2", 15))
BCUBES = (("bcube:2,2,bw=1000", 4), ("bcube:3,2,bw=1000", 9))
#: a latency-bound and a bandwidth-bound gradient at 1 Gbit/s (16 KiB and 1 MiB)
SIZES = (4096, 262144)
#: one small, bandwidth-bound case per scheme, where the model should be tight: the test's
TIGHT = tuple((spec, s, w, 65536) for s in ("ps", "ina", "ring", "sharded_ps")
              for spec, w in TOPOLOGIES[:1]) + ((BCUBES[0][0], "bml", 4, 65536),)


def cases(which: str = "all") -> list[tuple[str, str, int, int]]:
    """``(spec, scheme, workers, values)``: ``all`` (every topology and size) or ``tight``."""
    if which == "tight":
        return list(TIGHT)
    out = [(spec, s, w, v) for v in SIZES for spec, w in TOPOLOGIES
           for s in ("ps", "ina", "ring", "sharded_ps")]
    return out + [(spec, "bml", w, v) for v in SIZES for spec, w in BCUBES]
