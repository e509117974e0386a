"""Deploy gradnet's forwarding data plane (``p4src/forward.p4``) onto a running network.

The program's control blocks have their controller twins in :mod:`controller.forward`
(``Forwarding``, ``PriorityClassifier``, ``LinkEmulation``, ``PortMacs``: one module
per block, each owning that block's tables; re-exported here). This module is the
orchestration: :class:`Deployment` ties them together for a whole network: it connects
to every switch in parallel (loading the program), installs routes, ECMP groups, port
MACs, loss rates, DSCP priorities and multicast groups in batched WriteRequests, and
reads counters back. Programs of later techniques include the same controls, so a
per-switch program (e.g. an aggregating switch next to plain forwarders) reuses these
classes unchanged::

    async with Deployment(topo, net.grpc_addresses()) as dep:
        await dep.install(loss={("s1", 2): 0.05})
        drops = await dep.link_drops()

:func:`deploy` and :func:`read_counters` are synchronous one-shot wrappers.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from finsy import P4MulticastGroupEntry, P4TableEntry

from controller.forward import (
    DROP_REASONS,
    Forwarding,
    LinkEmulation,
    PortMacs,
    PriorityClassifier,
    SourceGuard,
    loss_threshold,
)
from controller.p4runtime import (
    REPO_ROOT,
    DeployError,
    Program,
    SwitchSession,
    close_sessions,
    multicast_group,
    open_sessions,
)
from controller.routing import RoutingError, SwitchRoutes, compute_routes
from topologies.base import Topology, TopologyError
from topologies.spec import SpecError
from topologies.spec import parse_loss as parse_loss_spec

__all__ = [
    "DEFAULT_PROGRAM",
    "DROP_REASONS",
    "DeployError",
    "DeployReport",
    "Deployment",
    "Forwarding",
    "LinkEmulation",
    "PortMacs",
    "PriorityClassifier",
    "SourceGuard",
    "addresses_from_run_dir",
    "deploy",
    "load_addresses",
    "loss_threshold",
    "parse_loss",
    "read_counters",
]

#: The forwarding program, as ``make p4`` writes it.
DEFAULT_PROGRAM = REPO_ROOT / "p4src" / "build" / "forward.json"

LossSpec = Mapping[tuple[str, int], float]


# ----------------------------------------------------------------------------- inputs


def parse_loss(spec: str) -> tuple[tuple[str, int], float]:
    """Parse ``SWITCH:PORT=RATE`` (e.g. ``s1:2=0.05``) into ``(("s1", 2), 0.05)``
    (:func:`topologies.spec.parse_loss`; :class:`DeployError` with its message)."""
    try:
        return parse_loss_spec(spec)
    except SpecError as e:
        raise DeployError(str(e)) from None


def check_loss(topo: Topology, loss: LossSpec) -> dict[tuple[str, int], float]:
    """Validate loss rates against the topology: existing switch ports, rates in [0, 1]."""
    out = {}
    for (switch, port), rate in loss.items():
        if switch not in topo or not topo.is_switch(switch):
            raise DeployError(f"loss on {switch}:{port}: unknown switch {switch!r}")
        if port not in topo.ports(switch):
            raise DeployError(
                f"loss on {switch}:{port}: {switch} has no port {port} "
                f"(ports {', '.join(map(str, topo.ports(switch)))})"
            )
        loss_threshold(rate)
        out[switch, port] = rate
    return out


def addresses_from_run_dir(topo: Topology, run_dir: str | Path) -> dict[str, str]:
    """``{switch: "unix:<run_dir>/<switch>.grpc"}`` for every switch; each socket must exist."""
    d = Path(run_dir)
    if not d.is_dir():
        raise DeployError(f"run directory {str(d)!r} does not exist")
    out, missing = {}, []
    for sw in topo.switches():
        sock = d / f"{sw}.grpc"
        if not sock.exists():
            missing.append(sw)
        out[sw] = f"unix:{sock}"
    if missing:
        raise DeployError(
            f"run directory {str(d)!r} has no P4Runtime socket for {', '.join(missing)} "
            "(is the network running, and is it this topology?)"
        )
    return out


def load_addresses(path: str | Path) -> dict[str, str]:
    """Read ``{switch: address}`` from a JSON or YAML mapping (``unix:/path`` or ``host:port``)."""
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))  # YAML is a superset of JSON
    except OSError as e:
        raise DeployError(f"cannot read address file: {e}") from None
    except yaml.YAMLError as e:
        raise DeployError(f"{p}: not JSON/YAML: {e}") from None
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in data.items()
    ):
        raise DeployError(f"{p}: expected a mapping of switch names to addresses")
    return data


# ----------------------------------------------------------------------------- deployment


@dataclass
class DeployReport:
    """What :meth:`Deployment.install` wrote: updates per switch and the time it took."""

    updates: dict[str, int] = field(default_factory=dict)
    connect_s: float = 0.0
    install_s: float = 0.0

    @property
    def total(self) -> int:
        """Updates written to all switches."""
        return sum(self.updates.values())

    def __str__(self) -> str:
        return (f"{len(self.updates)} switches, {self.total} table entries; connect "
                f"{self.connect_s:.2f} s, install {self.install_s:.2f} s")


class Deployment:
    """The forwarding program (or a per-switch one) on every switch of a network.

    ``addresses`` maps switch names to P4Runtime addresses (``Network.grpc_addresses()``);
    ``program`` is a :class:`Program`, a BMv2 JSON path, or ``{switch: Program}`` for
    per-switch programs (switches not in the mapping get :data:`DEFAULT_PROGRAM`).
    ``set_pipeline=False`` attaches to running pipelines instead of loading the program
    (e.g. to read counters after a deploy). Use as an async context manager.
    """

    def __init__(
        self,
        topology: Topology,
        addresses: Mapping[str, str],
        program: Program | str | Path | Mapping[str, Program] | None = None,
        *,
        set_pipeline: bool = True,
        timeout: float = 30.0,
    ) -> None:
        self.topology = topology
        self.set_pipeline = set_pipeline
        self.timeout = timeout
        switches = topology.switches()
        unknown = [s for s in addresses if s not in switches]
        if unknown:
            raise DeployError(f"addresses given for unknown switch(es): {', '.join(unknown)}")
        missing = [s for s in switches if s not in addresses]
        if missing:
            raise DeployError(f"no P4Runtime address for switch(es): {', '.join(missing)}")
        self.addresses = {s: addresses[s] for s in switches}
        if isinstance(program, Mapping):
            default = None
            self.programs: dict[str, Program] = {}
            for s in switches:
                if s in program:
                    self.programs[s] = program[s]
                else:
                    default = default or Program.load(DEFAULT_PROGRAM)
                    self.programs[s] = default
        else:
            prog = program if isinstance(program, Program) else Program.load(
                program or DEFAULT_PROGRAM)
            self.programs = dict.fromkeys(switches, prog)
        self.sessions: dict[str, SwitchSession] = {}
        self.report = DeployReport()
        # (switch, port) whose link_loss entry exists: later changes must MODIFY it.
        self._loss_installed: set[tuple[str, int]] = set()

    # -- lifecycle -------------------------------------------------------------------

    async def open(self) -> Deployment:
        """Connect to every switch in parallel (loading the program unless attaching)."""
        t0 = time.monotonic()
        specs = {s: (self.addresses[s], self.topology.device_id(s), self.programs[s])
                 for s in self.addresses}
        if self.set_pipeline:
            await _delete_multicast_groups(specs, self.timeout)
        self.sessions = await open_sessions(specs, set_pipeline=self.set_pipeline,
                                            timeout=self.timeout)
        self.report.connect_s = time.monotonic() - t0
        return self

    async def close(self) -> None:
        """Close every connection; the switches keep their state."""
        await close_sessions(self.sessions.values())
        self.sessions = {}

    async def __aenter__(self) -> Deployment:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def session(self, switch: str) -> SwitchSession:
        """The open session of ``switch``."""
        try:
            return self.sessions[switch]
        except KeyError:
            raise DeployError(f"no open session for switch {switch!r}") from None

    def block(self, switch: str, cls: type[Any], path: str | None = None) -> Any:
        """Control block ``cls`` bound to ``switch``'s program."""
        return self.programs[switch].block(cls, path)

    # -- install ---------------------------------------------------------------------

    async def install(
        self,
        routes: Mapping[str, SwitchRoutes] | None = None,
        *,
        loss: LossSpec | None = None,
        priorities: Mapping[int, int] | None = None,
        multicast: Mapping[str, Mapping[int, Iterable[int]]] | None = None,
        bind_sources: bool = True,
    ) -> DeployReport:
        """Install routes + ECMP groups (default: :func:`compute_routes`), port MACs,
        loss rates ``{(switch, port): p}``, DSCP priorities ``{dscp: prio}`` (every switch)
        and multicast groups ``{switch: {group_id: ports}}``, each switch in as few
        WriteRequests as possible, all switches in parallel.

        With ``bind_sources`` (the default), every switch that gets routes and whose
        program has the ``SourceGuard`` block binds its host ports to their hosts'
        addresses (``source_guard.p4``; docs/trust.md); ``False`` leaves it open."""
        if not self.sessions:
            raise DeployError("Deployment is not open (use 'async with Deployment(...)')")
        try:
            if routes is None:
                routes = compute_routes(self.topology)
        except (RoutingError, TopologyError) as e:
            raise DeployError(str(e)) from None
        loss = check_loss(self.topology, loss or {})
        multicast = multicast or {}
        for s in multicast:
            if s not in self.sessions:
                raise DeployError(f"multicast groups for unknown switch {s!r}")

        t0 = time.monotonic()
        plans = {}
        for s in self.sessions:
            updates: list[Any] = []
            if s in routes:
                updates += self.block(s, Forwarding).route_entries(routes[s])
                updates += self.block(s, PortMacs).mac_entries(routes[s].port_macs)
                if bind_sources and _has_block(self.programs[s], SourceGuard):
                    updates += self.block(s, SourceGuard).plan(self.topology, s)
            le = self.block(s, LinkEmulation)
            updates += [+le.loss_entry(port, p) for (sw, port), p in loss.items() if sw == s]
            if priorities:
                updates += self.block(s, PriorityClassifier).dscp_entries(priorities)
            updates += [+multicast_group(g, ports) for g, ports in multicast.get(s, {}).items()]
            plans[s] = updates

        async def one(s: str) -> None:
            n = await self.sessions[s].write(plans[s])
            self.report.updates[s] = self.report.updates.get(s, 0) + n

        await _gather_all(one(s) for s in plans)
        self._loss_installed.update(loss)
        self.report.install_s += time.monotonic() - t0
        return self.report

    async def set_loss(self, switch: str, port: int, p: float) -> None:
        """Change the emulated loss rate of one switch port at run time."""
        check_loss(self.topology, {(switch, port): p})
        le = self.block(switch, LinkEmulation)
        session = self.session(switch)
        entry = le.loss_entry(port, p)
        if (switch, port) not in self._loss_installed:
            # Attached to a running pipeline: the entry may exist from an earlier deploy.
            query = P4TableEntry(le.name("link_loss"), match=entry.match)
            if await session.read(query):
                self._loss_installed.add((switch, port))
        modify = (switch, port) in self._loss_installed
        await session.write([~entry if modify else +entry])
        self._loss_installed.add((switch, port))

    async def add_multicast_group(self, switch: str, group_id: int, ports: Iterable[int]) -> None:
        """Install multicast group ``group_id`` replicating to ``ports`` on ``switch``."""
        ports = list(ports)
        bad = [p for p in ports if p not in self.topology.ports(switch)]
        if bad:
            raise DeployError(f"{switch} has no port(s) {bad} for multicast group {group_id}")
        await self.session(switch).add_multicast_group(group_id, ports)

    # -- read back -------------------------------------------------------------------

    async def link_drops(self, switches: Iterable[str] | None = None) -> dict[str, dict[int, int]]:
        """``{switch: {port: packets dropped by emulated loss}}`` (data ports of the topology)."""
        names = list(switches) if switches is not None else list(self.sessions)

        async def one(s: str) -> dict[int, int]:
            ports = list(self.topology.ports(s))
            return await self.block(s, LinkEmulation).read_drops(self.session(s), ports)

        return dict(zip(names, await _gather_all(one(s) for s in names), strict=True))

    async def ingress_drops(self, switches: Iterable[str] | None = None) -> dict[str, dict[str, int]]:
        """``{switch: {reason: packets}}`` of the forwarding block's drop counter."""
        names = list(switches) if switches is not None else list(self.sessions)
        results = await _gather_all(
            self.block(s, Forwarding).read_drops(self.session(s)) for s in names
        )
        return dict(zip(names, results, strict=True))


def _has_block(program: Program, cls: type[Any]) -> bool:
    """True when ``program`` has every table of ``cls`` at its default path."""
    return not program.missing("tables", (f"{cls.CONTROL}.{t}" for t in cls.TABLES))


async def _delete_multicast_groups(specs: Mapping[str, tuple[str, int, Program]],
                                   timeout: float) -> None:
    """Delete every multicast group of switches that already run a pipeline.

    Loading a new pipeline should drop them, but BMv2's P4Runtime server (PI) forgets its
    groups while the PRE keeps their replicas, so a group written again after a reload
    replicates twice (four times after the next reload...). Deleting the groups first,
    through the running pipeline, leaves both sides empty. A switch with no pipeline yet
    has none, so failures to attach are ignored.
    """
    try:
        sessions = await open_sessions(specs, set_pipeline=False, timeout=timeout)
    except DeployError:
        return

    async def one(session: SwitchSession) -> None:
        try:
            groups = await session.read([P4MulticastGroupEntry()])
            if groups:
                await session.write([-P4MulticastGroupEntry(g.multicast_group_id) for g in groups])
        except DeployError:
            pass

    try:
        await asyncio.gather(*(one(sess) for sess in sessions.values()))
    finally:
        await close_sessions(sessions.values())


async def _gather_all(coros: Iterable[Any]) -> list[Any]:
    """``asyncio.gather`` that lets every task finish, then raises the first error."""
    results = await asyncio.gather(*coros, return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results


# ----------------------------------------------------------------------------- sync API


def deploy(
    topology: Topology,
    addresses: Mapping[str, str],
    program: Program | str | Path | Mapping[str, Program] | None = None,
    *,
    routes: Mapping[str, SwitchRoutes] | None = None,
    loss: LossSpec | None = None,
    priorities: Mapping[int, int] | None = None,
    timeout: float = 30.0,
    bind_sources: bool = True,
) -> DeployReport:
    """Load the program on every switch and install everything (synchronous;
    ``bind_sources``: :meth:`Deployment.install`)."""

    async def run() -> DeployReport:
        async with Deployment(topology, addresses, program, timeout=timeout) as dep:
            return await dep.install(routes, loss=loss, priorities=priorities,
                                     bind_sources=bind_sources)

    return asyncio.run(run())


def read_counters(
    topology: Topology,
    addresses: Mapping[str, str],
    program: Program | str | Path | Mapping[str, Program] | None = None,
    *,
    timeout: float = 30.0,
) -> dict[str, dict[str, Any]]:
    """``{switch: {"link_drops": {port: n}, "ingress_drops": {reason: n}}}`` from running
    switches, without touching their pipelines (synchronous)."""

    async def run() -> dict[str, dict[str, Any]]:
        async with Deployment(topology, addresses, program, set_pipeline=False,
                              timeout=timeout) as dep:
            links = await dep.link_drops()
            ingress = await dep.ingress_drops()
        return {s: {"link_drops": links[s], "ingress_drops": ingress[s]} for s in links}

    return asyncio.run(run())

