"""ina: in-network aggregation jobs, from placement to running switches.

Mirrors ``p4src/ina.p4`` one class per P4 control block (as ``controller/deploy.py``
does for ``forward.p4``); each class lives in the module of this package named
after its ``p4src/include`` file (``admission.py``, ``aggregator.py``, ``result_fanout.py``),
and is imported here:

==================== ============================== ===================================
class                P4 control instance            tables / counters
==================== ============================== ===================================
InaAdmission         ``MyIngress.admission``        ``ina_fabric_ports``,
                                                    ``ina_members``, ``ina_servers``;
                                                    ``ina_admission_drops``
Aggregator           ``MyIngress.aggregator``       ``ina_switch`` (default action),
                                                    ``ina_jobs``; ``ina_drops``,
                                                    ``ina_events``
ResultFanout         ``MyEgress.result_fanout``     ``ina_result_fanout``
==================== ============================== ===================================

:class:`InaJob` ties a job together: the PS, the workers (their order is their rank),
the placement (greedy + LP, ``controller/placement/``) and the routing policy (which
switch aggregates which worker's fragment). :class:`InaDeployment` installs one or more
jobs: the aggregating switches (``S`` and ``s_d``) and every switch with hosts attached
get ``ina.p4``, every other switch ``forward.p4``; the ``ina.p4`` switches get their
switch-facing ports and, on a job member's first switch, the member (admission,
docs/trust.md); all get routes to every host and to every aggregating switch's address;
the switches of each job's RESULT tree (rooted at ``s_d``) get its multicast group, a
route for its result address, and per-worker unicast rewrites at the leaves.

Values per packet (docs/ina.md): a job's packets carry ``values_per_packet`` values (64,
128 or 256), and a switch runs the ``ina.p4`` compiled for one size
(:func:`ina_program_path`), so every job of one deployment has the same size.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx

from controller.deploy import DEFAULT_PROGRAM, Deployment, DeployReport, Forwarding
from controller.ina.admission import REFUSED_DROPS, InaAdmission
from controller.ina.aggregator import Aggregator, ring_owners, switch_ip
from controller.ina.result_fanout import ResultFanout, result_address, result_rid
from controller.p4runtime import REPO_ROOT, DeployError, Program, multicast_group
from controller.placement import (
    Placement,
    PlacementProblem,
    RoutingPolicy,
    greedy_placement,
    routing_policy,
)
from controller.routing import compute_routes
from topologies.base import Topology
from wire.fixedpoint import NUMBER_FORMATS, bfp_fragments
from wire.ina import (
    INA_MAX_WORKERS,
    INA_UDP_PORT,
    INA_VALUE_SIZES,
    INA_VALUES,
    check_values_per_packet,
)
from wire.ina_policy import policy_json

INA_PROGRAM = REPO_ROOT / "p4src" / "build" / "ina.json"
MAX_WORKERS = INA_MAX_WORKERS  # one bit per worker in the INA bitmap (256)


def ina_program_path(values_per_packet: int = INA_VALUES) -> Path:
    """The compiled ``ina.p4`` for ``values_per_packet`` values a packet: ``ina.json`` for
    the default (64), ``ina_v<N>.json`` for the others (``make p4``: ``-DINA_VALUES=N``).
    Raises :class:`DeployError` for a size no program is compiled for."""
    try:
        v = check_values_per_packet(values_per_packet)
    except ValueError as e:
        raise DeployError(str(e)) from None
    return INA_PROGRAM if v == INA_VALUE_SIZES[0] else INA_PROGRAM.with_name(f"ina_v{v}.json")


@dataclass
class InaJob:
    """One aggregation job: PS, workers (rank = position), placement and routing policy."""

    job_id: int
    topology: Topology
    ps: str
    workers: list[str]
    placement: Placement | None
    policy: RoutingPolicy | None
    num_fragments: int
    scale_bits: int = 16
    #: "fixed" or "bfp" (block floating point, docs/ina.md): written into the policy
    number_format: str = "fixed"
    #: values per packet (64, 128 or 256; docs/ina.md): written into the policy, and the
    #: deployment loads the ina.p4 compiled for it
    values_per_packet: int = INA_VALUES
    #: the job's admission stamp (docs/trust.md): every switch that admits one of the
    #: job's INA packets from a host writes it into ``worker_id``, and the agents take
    #: only packets that carry it. 0 until a deployment draws one (:class:`InaDeployment`);
    #: written into the policy, so write the policy after building the deployment.
    stamp: int = 0

    @classmethod
    def plan(
        cls,
        topology: Topology,
        ps: str,
        workers: Iterable[str],
        budget: int,
        switch_capacity: float,
        num_values: int,
        job_id: int = 1,
        scale_bits: int = 16,
        aggregate: bool = True,
        number_format: str = "fixed",
        values_per_packet: int = INA_VALUES,
        tor_in_budget: bool = False,
        stamp: int = 0,
    ) -> InaJob:
        """Place ``budget`` switches (greedy + LP) and derive the per-fragment policy.

        ``aggregate=False`` plans the PS baseline: no switch aggregates anything.
        ``number_format="bfp"`` plans the fragments of a block-floating-point
        allreduce of ``num_values`` values (the blocks plus the exponent fragments ahead
        of them, ``wire.fixedpoint.bfp_fragments``). ``values_per_packet``: 64, 128 or
        256 values a fragment (docs/ina.md, "Values per packet"). ``tor_in_budget``: s_d
        takes one of the K slots and aggregates only when the placement picks it (it
        still merges what busy aggregators pass on); default False, s_d aggregates
        outside the budget (docs/placement.md).
        """
        workers = list(workers)
        if not 1 <= len(workers) <= MAX_WORKERS:
            raise DeployError(f"a job has 1..{MAX_WORKERS} workers, got {len(workers)}")
        if not 0 <= job_id <= 255:
            raise DeployError(f"job id must be within 0..255, got {job_id}")
        if not 0 <= stamp <= 0xFFFF:
            raise DeployError(f"stamp must be within 0..65535, got {stamp}")
        if num_values < 1:
            raise DeployError("a gradient needs at least one value")
        if number_format not in NUMBER_FORMATS:
            raise DeployError(f"number format must be one of {NUMBER_FORMATS}, got {number_format!r}")
        ina_program_path(values_per_packet)  # a size with a compiled program (DeployError)
        v = int(values_per_packet)
        num_fragments = (bfp_fragments(num_values, v) if number_format == "bfp"
                         else -(-num_values // v))
        if not aggregate:
            return cls(job_id, topology, ps, workers, None, None, num_fragments, scale_bits,
                       number_format, v, stamp)
        problem = PlacementProblem(topology, ps, workers, budget, switch_capacity,
                                   tor_in_budget=tor_in_budget)
        placement = greedy_placement(problem)
        policy = routing_policy(placement, num_fragments)
        return cls(job_id, topology, ps, workers, placement, policy, num_fragments, scale_bits,
                   number_format, v, stamp)

    # -- derived ---------------------------------------------------------------------
    @property
    def aggregating_switches(self) -> list[str]:
        """``S`` then ``s_d`` (empty for the PS baseline)."""
        if self.placement is None:
            return []
        res = self.placement.result
        return [*res.switches, res.tor] if res.tor not in res.switches else list(res.switches)

    @property
    def sd(self) -> str | None:
        return None if self.placement is None else self.placement.result.tor

    @property
    def result_group(self) -> int:
        return 1000 + self.job_id

    def policy_dict(self) -> dict[str, Any]:
        """The policy file the agents read (format: docs/ina_policy.md)."""
        topo = self.topology
        common: dict[str, Any] = dict(
            port=INA_UDP_PORT, scale_bits=self.scale_bits, number_format=self.number_format,
            values_per_packet=self.values_per_packet, stamp=self.stamp)
        ps, workers = topo.host_ip(self.ps), [topo.host_ip(w) for w in self.workers]
        if self.policy is None:
            return policy_json(self.job_id, ps, workers, self.num_fragments, **common)
        pol = self.policy
        ids = pol.switch_ids
        sd = ids[pol.tor]
        return policy_json(
            self.job_id, ps, workers, self.num_fragments,
            tags=[pol.tags[w] for w in self.workers],
            fanin={ids[s]: v for s, v in pol.fan_in.items() if any(v)},
            switch_ips={ids[s]: switch_ip(ids[s]) for s in self.aggregating_switches},
            sd=sd, sd_ip=switch_ip(sd),
            partial_tags={ids[s]: v for s, v in pol.partial_tags.items() if any(v)},
            **common)

    def write_policy(self, path: str | Path) -> Path:
        """Write the policy JSON; returns its path."""
        p = Path(path)
        p.write_text(json.dumps(self.policy_dict()))
        return p


class InaDeployment:
    """Install INA jobs (and plain forwarding everywhere else) on a running network."""

    def __init__(self, topology: Topology, addresses: Mapping[str, str], jobs: list[InaJob],
                 ina_program: str | Path | None = None,
                 loss: Mapping[tuple[str, int], float] | None = None,
                 aggregator_timeout_us: int | None = None,
                 aggregator_ring: int | None = None) -> None:
        """``ina_program``: the compiled ina.p4 every ``ina.p4`` switch loads; None: the
        one for the jobs' values per packet (:func:`ina_program_path`), which must be the
        same for every job (``DeployError`` otherwise: a switch parses one size, and
        every job's packets cross the switches that run admission).
        ``aggregator_ring``: None (default) indexes the aggregators by crc32 modulo all
        of them; N fills ``ina_ring`` so that consistent hashing spreads the fragments
        over aggregators 0..N-1 (docs/ina.md, "Aggregator index")."""
        self.topology = topology
        self.ring_owners = None if aggregator_ring is None else ring_owners(aggregator_ring)
        # None: the program's default (INA_AGGREGATOR_TIMEOUT_US)
        self.aggregator_timeout_us = aggregator_timeout_us
        self.addresses = addresses
        self.jobs = jobs
        for j in jobs:  # a secret per job, unguessable by a host outside it (docs/trust.md)
            if not j.stamp:
                j.stamp = 1 + secrets.randbelow(0xFFFF)
        ids = [j.job_id for j in jobs]
        if len(set(ids)) != len(ids):
            raise DeployError(f"job ids must be distinct, got {ids}")
        sds = {j.sd for j in jobs if j.sd is not None}
        if len(sds) > 1:
            raise DeployError("all aggregating jobs must share one PS ToR switch (s_d)")
        sizes = {j.values_per_packet for j in jobs}
        if len(sizes) > 1:
            raise DeployError("all jobs of one deployment must have the same values per packet "
                              "(a switch runs the ina.p4 compiled for one size), got "
                              + ", ".join(f"job {j.job_id}: {j.values_per_packet}" for j in jobs))
        self.values_per_packet = sizes.pop() if sizes else INA_VALUES
        if ina_program is None:
            ina_program = ina_program_path(self.values_per_packet)
        self.aggregators = sorted({s for j in jobs for s in j.aggregating_switches},
                                  key=topology.device_id)
        # Admission (docs/trust.md) runs where hosts enter the fabric: every switch with a
        # host attached, whether or not one of its hosts is in a job (an intruder can sit
        # anywhere), and on the aggregating switches.
        self.admission_switches = sorted(
            set(self.aggregators) | {s for s in topology.switches()
                                     if any(topology.is_host(n) for n in topology.ports(s).values())},
            key=topology.device_id) if jobs else []
        self.loss = dict(loss or {})
        ina = Program.load(ina_program) if self.admission_switches else None
        self.programs: dict[str, Program] = {s: ina for s in self.admission_switches} if ina else {}
        self.report = DeployReport()
        self.counters: dict[str, dict[str, int]] = {}

    def loopback_paths(self) -> dict[str, dict[str, str]]:
        """Per aggregating switch, the next hop of every other switch toward it: the
        paths its job's LP counted the link loads on (``PlacementProblem.path``).
        With ECMP a worker's flow to a switch hashes onto one of the equal-cost paths,
        and two workers of one ToR can land on the same uplink: measured, that doubled
        the busiest link of ``make run`` over the LP's. The BFS trees depend on the
        graph only, so jobs sharing a switch agree on its paths."""
        out: dict[str, dict[str, str]] = {}
        for j in self.jobs:
            if j.placement is None:
                continue
            for s in j.aggregating_switches:
                if s not in out:
                    out[s] = j.placement.problem.next_hops_toward(s)
        return out

    async def _install(self, dep: Deployment) -> None:
        topo = self.topology
        loopbacks = {s: switch_ip(topo.device_id(s)) for s in self.aggregators}
        routes = compute_routes(topo, loopbacks=loopbacks, loopback_paths=self.loopback_paths())
        await dep.install(routes, loss=self.loss)
        per_switch: dict[str, list[Any]] = {s: [] for s in self.admission_switches}
        for s, ups in self._admission_updates(dep).items():
            per_switch[s].extend(ups)
        for s in self.aggregators:
            agg = dep.block(s, Aggregator)
            sd = next(j.sd for j in self.jobs if j.sd is not None)
            per_switch[s].append(agg.identity_entry(topo.device_id(s), topo.device_id(sd)))
            if self.aggregator_timeout_us is not None:
                per_switch[s].append(agg.aging_entry(self.aggregator_timeout_us))
            if self.ring_owners is not None:
                per_switch[s].extend(agg.ring_entries(self.ring_owners))
            for j in self.jobs:
                if j.placement is not None:
                    per_switch[s].append(agg.job_entry(j.job_id, topo.host_ip(j.ps), j.result_group))
        for j in self.jobs:
            if j.sd is None:
                continue
            for s, ups in self._result_tree_updates(dep, j).items():
                per_switch.setdefault(s, []).extend(ups)

        async def one(s: str) -> None:
            n = await dep.session(s).write(per_switch[s])
            self.report.updates[s] = self.report.updates.get(s, 0) + n

        await asyncio.gather(*(one(s) for s in per_switch))

    def _admission_updates(self, dep: Deployment) -> dict[str, list[Any]]:
        """Per ``ina.p4`` switch: its switch-facing ports, and each job's workers and PS
        attached to it (their port, address, job and rank)."""
        topo = self.topology
        out: dict[str, list[Any]] = {}
        for s in self.admission_switches:
            adm = dep.block(s, InaAdmission)
            fabric = [p for p, n in topo.ports(s).items() if topo.is_switch(n)]
            out[s] = adm.fabric_port_entries(fabric)
        for j in self.jobs:
            for rank, w in enumerate(j.workers):
                leaf = topo.iface(w)["switch"]
                out[leaf].append(dep.block(leaf, InaAdmission).member_entry(
                    topo.port(leaf, w), topo.host_ip(w), j.job_id, rank, j.stamp))
            leaf = topo.iface(j.ps)["switch"]
            out[leaf].append(dep.block(leaf, InaAdmission).server_entry(
                topo.port(leaf, j.ps), topo.host_ip(j.ps), j.job_id, j.stamp))
        return out

    def _result_tree_updates(self, dep: Deployment, job: InaJob) -> dict[str, list[Any]]:
        """The job's RESULT multicast tree: a shortest-path tree from ``s_d`` to every
        worker. Each switch on it replicates to its child switches (rid 0, the packet
        keeps the job's result address) and to its own workers (rid = job·256 + rank,
        rewritten into a unicast by ResultFanout), so each link carries one copy."""
        topo = self.topology
        assert job.sd is not None
        sgraph = topo.graph.subgraph(topo.switches())
        paths = nx.single_source_shortest_path(sgraph, job.sd)
        children: dict[str, set[str]] = {}
        local: dict[str, list[tuple[int, str]]] = {}
        for rank, w in enumerate(job.workers):
            leaf = topo.iface(w)["switch"]
            path = paths.get(leaf)
            if path is None:
                raise DeployError(f"worker {w} is unreachable from s_d {job.sd}")
            for a, b in zip(path, path[1:], strict=False):
                children.setdefault(a, set()).add(b)
            local.setdefault(leaf, []).append((rank, w))
        out: dict[str, list[Any]] = {}
        group = job.result_group
        address = result_address(job.job_id)
        for s in sorted(set(children) | set(local), key=topo.device_id):
            replicas = [(topo.port(s, c), 0) for c in sorted(children.get(s, ()), key=topo.device_id)]
            replicas += [(topo.port(s, w), result_rid(job.job_id, r)) for r, w in local.get(s, [])]
            ups: list[Any] = [+multicast_group(group, replicas)]
            if local.get(s):
                ups += dep.block(s, ResultFanout).fanout_entries(
                    job.job_id, [(r, topo.host_ip(w), topo.host_mac(w)) for r, w in local[s]])
            if s != job.sd:
                fwd = dep.block(s, Forwarding)
                ups.append(+fwd.entry("ipv4_routes", {"hdr.ipv4.dst_addr": f"{address}/32"},
                                      "set_multicast_group", group=group))
            out[s] = ups
        return out

    def deploy(self, timeout: float = 60.0) -> DeployReport:
        """Load programs and install everything (synchronous)."""

        async def run() -> DeployReport:
            async with Deployment(self.topology, self.addresses, self.programs or DEFAULT_PROGRAM,
                                  timeout=timeout) as dep:
                await self._install(dep)
                self.report.connect_s = dep.report.connect_s
                for s, n in dep.report.updates.items():
                    self.report.updates[s] = self.report.updates.get(s, 0) + n
            return self.report

        return asyncio.run(run())

    def set_aggregator_timeout(self, timeout_us: int, timeout: float = 30.0) -> None:
        """Write ``ina_aging`` on every aggregating switch of a deployed network
        (``Aggregator.aging_entry``); the pipelines and every other entry stay."""

        async def run() -> None:
            async with Deployment(self.topology, self.addresses, self.programs or DEFAULT_PROGRAM,
                                  set_pipeline=False, timeout=timeout) as dep:
                for s in self.aggregators:
                    await dep.session(s).write([dep.block(s, Aggregator).aging_entry(timeout_us)])

        asyncio.run(run())
        self.aggregator_timeout_us = timeout_us

    def read_events(self, timeout: float = 30.0) -> dict[str, dict[str, int]]:
        """``{switch: ina_events}`` from every aggregating switch."""

        async def run() -> dict[str, dict[str, int]]:
            async with Deployment(self.topology, self.addresses, self.programs or DEFAULT_PROGRAM,
                                  set_pipeline=False, timeout=timeout) as dep:
                out = {}
                for s in self.aggregators:
                    out[s] = await dep.block(s, Aggregator).read_events(dep.session(s))
                return out

        return asyncio.run(run())

    def read_admission(self, timeout: float = 30.0) -> dict[str, dict[str, int]]:
        """``{switch: ina_admission_drops by name, plus the REFUSED_DROPS of ingress_drops}``
        from every switch running admission."""
        return self.read_counters([], self.admission_switches, timeout)

    def read_counters(self, events_of: list[str], admission_of: list[str],
                      timeout: float = 30.0) -> dict[str, dict[str, int]]:
        """``{switch: counters}``: the aggregator's events and drops
        (:meth:`Aggregator.read_events`) of ``events_of`` and the admission drops
        (:meth:`InaAdmission.read_drops`, and ``ingress_drops``' :data:`REFUSED_DROPS`:
        IPv4 with options, IP fragments, spoofed sources) of ``admission_of``, merged per switch."""

        async def run() -> dict[str, dict[str, int]]:
            async with Deployment(self.topology, self.addresses, self.programs or DEFAULT_PROGRAM,
                                  set_pipeline=False, timeout=timeout) as dep:
                out: dict[str, dict[str, int]] = {}
                for s in events_of:
                    out[s] = await dep.block(s, Aggregator).read_events(dep.session(s))
                for s in admission_of:
                    drops = await dep.block(s, InaAdmission).read_drops(dep.session(s))
                    ingress = await dep.block(s, Forwarding).read_drops(dep.session(s))
                    drops.update({n: ingress.get(n, 0) for n in REFUSED_DROPS})
                    out.setdefault(s, {}).update(drops)
                return out

        return asyncio.run(run())
