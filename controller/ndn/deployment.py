"""Technique 2: NDN forwarding with a persistent PIT (seed 000), from topology to switches.

Mirrors ``p4src/ndn.p4`` one class per P4 control block (as ``controller/deploy.py`` does
for ``forward.p4`` and ``controller/ina/deployment.py`` for ``ina.p4``):

==================== ============================== ===================================
class                P4 control instance            tables / counters
==================== ============================== ===================================
NdnFib               ``MyIngress.fib``              ``fib`` (ternary on h_1..h_6)
TransientPit         ``MyIngress.pit``              ``pit_config``; registers; the
                                                    per-port-subset multicast groups
PersistentPit        ``MyIngress.persistent_pit``   ``persistent_pit`` + one multicast
                                                    group per entry
NdnDrops             ``MyIngress.drops``            ``ndn_drops``, ``ndn_events``
LinkEmulation        ``MyEgress.link_emulation``    (``controller/deploy.py``)
==================== ============================== ===================================

:class:`NdnDeployment` ties them together: it loads ``ndn.p4`` on every switch, installs
the FIB (one prefix ``/<host>`` per host, next hops along a shortest-path tree toward the
host, so the paths of all GPUs to one PS form a tree), the transient PIT's groups and
lifetime, and loss rates; then :class:`PersistentPitManager` runs one thread per switch
that reads the punted ``/*insert*/PS/train`` Interests (packet-in), adds their in-port to
the persistent PIT entry of ``/PS/train`` and its multicast group (creating both when
absent), and sends the Interest on toward the PS (packet-out).

Names and their hashes follow ``docs/ndn.md``: :func:`prefix_hash` computes exactly what
``p4src/include/ndn_name_hash.p4`` computes.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
from ndn.encoding import Component, Name, parse_interest

from controller.deploy import Deployment, DeployReport, LinkEmulation, check_loss
from controller.p4runtime import REPO_ROOT, ControlBlock, DeployError, Program, multicast_group

# The name bounds live with the agents that must respect them (and stay light to import).
from hosts.ndn.common import (
    INSERT_MARKER,
    MAX_COMPONENT,
    MAX_DEPTH,
    MAX_NAME_BYTES,
    NameBoundsError,
    check_name,
    components,
    ndn_payload,
    prefix_hash,
)
from topologies.base import Topology

__all__ = [
    "MAX_COMPONENT",
    "MAX_DEPTH",
    "MAX_NAME_BYTES",
    "NDN_DROP_REASONS",
    "NDN_EVENTS",
    "NDN_PROGRAM",
    "NameBoundsError",
    "NdnDeployment",
    "NdnDrops",
    "NdnFib",
    "PersistentPit",
    "PersistentPitManager",
    "TransientPit",
    "check_name",
    "components",
    "prefix_hash",
]

NDN_PROGRAM = REPO_ROOT / "p4src" / "build" / "ndn.json"
#: In-ports a transient PIT entry records (bitmap of ports 1..8).
PIT_PORTS = 8
#: First multicast group id of persistent PIT entries (1..255 are the PIT's port subsets).
PERSISTENT_GROUP_BASE = 0x1000
#: Index of ``ndn_drops`` -> reason (``NDN_DROP_*``).
NDN_DROP_REASONS = {1: "not_ndn", 2: "length_form", 3: "malformed", 4: "name_too_long",
                    5: "name_too_deep", 6: "component_too_long", 7: "no_route",
                    8: "unsolicited_data", 9: "no_subscribers", 10: "port_range",
                    11: "parser_error", 12: "bad_marker"}
#: Index of ``ndn_events`` -> what the switch did (``NDN_EV_*``).
NDN_EVENTS = {1: "forwarded", 2: "aggregated", 3: "pit_hit", 4: "punted", 5: "distributed",
              6: "packet_out"}


# ----------------------------------------------------------------------------- blocks


def _value_int(v: bytes) -> int:
    return int.from_bytes(v, "big") if v else 0


class NdnFib(ControlBlock):
    """``NdnFib`` (ingress): longest-prefix match on name components."""

    CONTROL = "MyIngress.fib"
    TABLES = ("fib",)
    ACTIONS = ("set_next_hop", "no_route")

    def route_entry(self, prefix: str | Sequence[bytes], port: int) -> Any:
        """INSERT ``prefix -> set_next_hop(port)``: ``h_k`` exact, the other hashes wild,
        priority ``k`` (longer prefixes win)."""
        comps = check_name(prefix)
        k = len(comps)
        match = {f"meta.h{k}": f"{prefix_hash(comps):#x}/&0xffffffff"}
        return +self.entry("fib", match, "set_next_hop", priority=k, port=port)


class TransientPit(ControlBlock):
    """``TransientPit`` (ingress): the PIT lifetime, and one multicast group per subset of
    the switch's ports (group id = the PIT entry's port bitmap)."""

    CONTROL = "MyIngress.pit"
    TABLES = ("pit_config",)
    ACTIONS = ("set_lifetime",)

    def lifetime_entry(self, seconds: float) -> Any:
        """MODIFY of ``pit_config``'s default: entry lifetime in microseconds."""
        if not 0 < seconds < 3600:
            raise DeployError(f"PIT lifetime must be in (0, 3600) s, got {seconds!r}")
        return ~self.default_entry("pit_config", "set_lifetime", microseconds=int(seconds * 1e6))

    @staticmethod
    def port_groups(ports: Iterable[int]) -> list[Any]:
        """INSERTs of a group per nonempty subset of ``ports`` (those in 1..8)."""
        usable = sorted(p for p in ports if 1 <= p <= PIT_PORTS)
        out = []
        for r in range(1, len(usable) + 1):
            for subset in itertools.combinations(usable, r):
                gid = sum(1 << (p - 1) for p in subset)
                out.append(+multicast_group(gid, list(subset)))
        return out


class PersistentPit(ControlBlock):
    """``PersistentPit`` (ingress): ``/PS/train -> multicast group`` entries."""

    CONTROL = "MyIngress.persistent_pit"
    TABLES = ("persistent_pit",)
    ACTIONS = ("set_subscribers", "no_subscribers")

    @staticmethod
    def match(key: Sequence[tuple[int, bytes]]) -> dict[str, Any]:
        """The table key of ``/PS/train`` (its two components)."""
        (t1, v1), (t2, v2) = key
        return {"meta.t1": t1, "meta.l1": len(v1), "meta.c1": _value_int(v1),
                "meta.t2": t2, "meta.l2": len(v2), "meta.c2": _value_int(v2)}

    def subscribers_entry(self, key: Sequence[tuple[int, bytes]], group: int) -> Any:
        """The entry ``key -> set_subscribers(group)`` (INSERT with ``+``)."""
        return self.entry("persistent_pit", self.match(key), "set_subscribers", group=group)


class NdnDrops(ControlBlock):
    """``NdnDrops`` (ingress): drops by reason and forwarding events by kind."""

    CONTROL = "MyIngress.drops"
    COUNTERS = ("ndn_drops", "ndn_events")

    @staticmethod
    def decode(cells: Mapping[int, tuple[int, int]], names: Mapping[int, str]) -> dict[str, int]:
        """``{name: packets}`` of the nonzero cells."""
        return {names.get(i, f"reason{i}"): p for i, (p, _) in sorted(cells.items()) if p}


# ----------------------------------------------------------------------------- FIB plan


def fib_routes(topo: Topology) -> dict[str, dict[str, int]]:
    """``{switch: {host: port}}``: each switch's next hop toward every host, along one
    shortest-path tree per host (so the routes of many GPUs to one PS form a tree, and
    a persistent PIT built from them replicates each Data once per link)."""
    sgraph = topo.graph.subgraph(topo.switches())
    out: dict[str, dict[str, int]] = {s: {} for s in topo.switches()}
    for h in topo.hosts():
        edge = topo.iface(h)["switch"]
        out[edge][h] = topo.port(edge, h)
        for s, path in nx.single_source_shortest_path(sgraph, edge).items():
            if s != edge:
                out[s][h] = topo.port(s, path[-2])
    return out


def subset_groups_count(topo: Topology, switch: str) -> int:
    """How many PIT port-subset groups ``switch`` gets."""
    n = sum(1 for p in topo.ports(switch) if 1 <= p <= PIT_PORTS)
    return 2**n - 1


# ----------------------------------------------------------------------------- manager


@dataclass
class PersistentEntry:
    """One persistent PIT entry of one switch."""

    name: str
    group: int
    ports: list[int] = field(default_factory=list)
    installed_at: float = field(default_factory=time.time)


class PersistentPitManager:
    """Packet-in driven persistent PIT management, one thread per switch (seed step 4.2).

    For each punted ``/*insert*/PS/train[/...]`` Interest: add its in-port to the entry
    of ``/PS/train`` and to the entry's multicast group (creating both when absent,
    steps 4.2.1 / 4.2.2), then send the Interest on toward ``PS`` (packet-out on the FIB
    port). Runs while the experiment runs; :meth:`state` is the persistent PIT of every
    switch. The P4Runtime connections use election id 50, above a deploy's.
    """

    ELECTION_ID = 50

    def __init__(self, topology: Topology, addresses: Mapping[str, str],
                 program: Program, routes: Mapping[str, Mapping[str, int]],
                 state_file: str | Path | None = None) -> None:
        self.topology = topology
        self.addresses = dict(addresses)
        self.program = program
        self.routes = routes
        self.state_file = Path(state_file) if state_file else None
        self.entries: dict[str, dict[str, PersistentEntry]] = {s: {} for s in addresses}
        self.errors: list[str] = []
        self.handled = 0
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._clients: dict[str, Any] = {}

    def start(self) -> PersistentPitManager:
        """Connect to every switch as primary and start the packet-in threads."""
        from targets.p4rt_client import P4RuntimeClient

        for s, addr in self.addresses.items():
            c = P4RuntimeClient(addr, device_id=self.topology.device_id(s), election_id=self.ELECTION_ID)
            if not c.is_primary:
                c.close()
                self.stop()
                raise DeployError(f"{s}: the persistent-PIT manager is not primary at {addr}")
            c.use_schema(self.program.p4info_path)
            self._clients[s] = c
            # entries a previous manager made on the running pipeline (restart-safe)
            for e in read_persistent_pit(c, self.program):
                self.entries[s][e["name"]] = PersistentEntry(e["name"], e["group"], list(e["ports"]))
        for s in self.addresses:
            t = threading.Thread(target=self._run, args=(s,), name=f"ppit-{s}", daemon=True)
            t.start()
            self._threads.append(t)
        self._save()
        return self

    def stop(self) -> None:
        """Stop the threads and close the connections (the switches keep their entries)."""
        self._stop.set()
        for t in self._threads:
            t.join(timeout=5)
        for c in self._clients.values():
            c.close()
        self._clients.clear()
        self._threads.clear()

    @property
    def running(self) -> bool:
        """Whether the manager holds its switch connections."""
        return bool(self._clients)

    def with_client(self, switch: str, fn: Any) -> Any:
        """Run ``fn(client)`` on ``switch``'s primary connection, under the manager's lock."""
        with self._lock:
            return fn(self._clients[switch])

    def __enter__(self) -> PersistentPitManager:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def state(self) -> dict[str, list[dict[str, Any]]]:
        """``{switch: [{"name", "group", "ports"}]}`` of every nonempty persistent PIT."""
        with self._lock:
            return {s: [{"name": e.name, "group": e.group, "ports": list(e.ports)}
                        for e in es.values()] for s, es in self.entries.items() if es}

    def _save(self) -> None:
        if self.state_file is not None:
            tmp = self.state_file.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.state(), indent=1))
            tmp.replace(self.state_file)

    def _run(self, switch: str) -> None:
        client = self._clients[switch]
        while not self._stop.is_set():
            got = client.packet_in(timeout=0.2)
            if got is None:
                continue
            payload, meta = got
            try:
                self.handle(switch, payload, int(meta.get("ingress_port", 0)))
            except Exception as e:  # one bad packet must not stop the manager
                with self._lock:
                    self.errors.append(f"{switch}: {type(e).__name__}: {e}")

    def handle(self, switch: str, frame: bytes, in_port: int) -> None:
        """Process one punted insert Interest (an Ethernet frame) from ``in_port``."""
        name, _, _, _ = parse_interest(ndn_payload(frame[14:]))
        comps = [bytes(c) for c in name]
        if len(comps) < 3 or bytes(Component.get_value(comps[0])) != INSERT_MARKER:
            raise ValueError(f"not an insert Interest: {Name.to_str(name)}")
        key_comps = comps[1:3]
        key = Name.to_str(key_comps)
        ps = bytes(Component.get_value(key_comps[0])).decode()
        up = self.routes[switch].get(ps)
        if up is None:
            raise ValueError(f"{switch}: no FIB route toward {ps!r}")
        client = self._clients[switch]
        pp = self.program.block(PersistentPit)
        with self._lock:
            entries = self.entries[switch]
            e = entries.get(key)
            if e is None:                      # step 4.2.2: a new entry
                gid = PERSISTENT_GROUP_BASE + max((x.group - PERSISTENT_GROUP_BASE + 1
                                                   for x in entries.values()), default=0)
                e = PersistentEntry(key, gid, [in_port])
                client.write(+multicast_group(gid, e.ports))
                client.write(+pp.subscribers_entry(components(key_comps), gid))
                entries[key] = e
            elif in_port not in e.ports:       # step 4.2.1: one more in-port
                e.ports.append(in_port)
                client.write(~multicast_group(e.group, e.ports))
            self.handled += 1
            self._save()
        client.packet_out(frame, egress_port=up, _pad=0)


# ----------------------------------------------------------------------------- deployment


class NdnDeployment:
    """``ndn.p4`` on every switch of a running network, with its FIB and PIT groups."""

    def __init__(self, topology: Topology, addresses: Mapping[str, str],
                 program: str | Path = NDN_PROGRAM,
                 loss: Mapping[tuple[str, int], float] | None = None,
                 pit_lifetime: float = 4.0) -> None:
        self.topology = topology
        self.addresses = dict(addresses)
        self.program = Program.load(program)
        self.loss = check_loss(topology, loss or {})
        self.pit_lifetime = pit_lifetime
        self.routes = fib_routes(topology)
        self.report = DeployReport()
        self.manager: PersistentPitManager | None = None

    def plan(self) -> dict[str, list[Any]]:
        """Every switch's updates: FIB routes, PIT lifetime and port-subset groups."""
        topo, prog = self.topology, self.program
        fib, pit = prog.block(NdnFib), prog.block(TransientPit)
        out = {}
        for s in topo.switches():
            ups: list[Any] = [pit.lifetime_entry(self.pit_lifetime)]
            ups += [fib.route_entry(f"/{h}", port) for h, port in sorted(self.routes[s].items())]
            ups += pit.port_groups(topo.ports(s))
            out[s] = ups
        return out

    def deploy(self, timeout: float = 60.0) -> DeployReport:
        """Load ndn.p4 everywhere and install the plan and the loss rates (synchronous)."""
        plans = self.plan()

        async def run() -> DeployReport:
            async with Deployment(self.topology, self.addresses, self.program, timeout=timeout) as dep:
                await dep.install({}, loss=self.loss)

                async def one(s: str) -> None:
                    await dep.session(s).write(plans[s])

                await asyncio.gather(*(one(s) for s in plans))
                self.report.connect_s = dep.report.connect_s
                for s in plans:
                    self.report.updates[s] = dep.report.updates.get(s, 0) + len(plans[s])
            return self.report

        return asyncio.run(run())

    def start_manager(self, state_file: str | Path | None = None) -> PersistentPitManager:
        """Start the persistent-PIT manager (stop it with :meth:`stop_manager`)."""
        self.manager = PersistentPitManager(self.topology, self.addresses, self.program,
                                            self.routes, state_file).start()
        return self.manager

    def stop_manager(self) -> None:
        """Stop the persistent-PIT manager, if running."""
        if self.manager is not None:
            self.manager.stop()

    def set_loss(self, switch: str, port: int, p: float) -> None:
        """Change one port's emulated loss at run time (through the manager's primary
        stream when it runs, else a short primary session of its own)."""
        from targets.p4rt_client import P4RuntimeClient, P4RuntimeError

        check_loss(self.topology, {(switch, port): p})
        le = self.program.block(LinkEmulation)

        def write(client: Any) -> None:
            # finsy marks an entry object with its update type: a fresh one per write
            try:
                client.write(~le.loss_entry(port, p))   # exists after a deploy with loss there
            except P4RuntimeError:
                client.write(+le.loss_entry(port, p))

        if self.manager is not None and self.manager.running:
            self.manager.with_client(switch, write)
            return
        with P4RuntimeClient(self.addresses[switch], self.topology.device_id(switch),
                             election_id=PersistentPitManager.ELECTION_ID + 10) as c:
            c.use_schema(self.program.p4info_path)
            write(c)


def _replica_port(r: Any) -> int:
    # finsy gives a replica as a port, a (port, instance) pair or an object
    if isinstance(r, int):
        return r
    if isinstance(r, tuple):
        return int(r[0])
    return int(getattr(r, "egress_port", getattr(r, "port", 0)))


def read_persistent_pit(client: Any, program: Program) -> list[dict[str, Any]]:
    """``[{"name", "group", "ports"}]``: a switch's persistent PIT entries and their groups,
    read over a :class:`targets.p4rt_client.P4RuntimeClient` (primary or backup)."""
    from finsy import P4MulticastGroupEntry, P4TableEntry

    pp = program.block(PersistentPit)
    groups = {g.multicast_group_id: sorted(_replica_port(r) for r in g.replicas)
              for g in client.read(P4MulticastGroupEntry())}
    pit = []
    for e in client.read(P4TableEntry(pp.name("persistent_pit"))):
        m = dict(e.match)
        key = []
        for i in (1, 2):
            t, ln, v = (int(m.get(f"{f}{i}", m.get(f"meta.{f}{i}", 0))) for f in ("t", "l", "c"))
            key.append(bytes([t, ln]) + v.to_bytes(ln, "big"))
        gid = int(e.action.args["group"])
        pit.append({"name": Name.to_str(key), "group": gid, "ports": groups.get(gid, [])})
    return pit


def read_switch_state(topology: Topology, addresses: Mapping[str, str],
                      program: str | Path = NDN_PROGRAM) -> dict[str, dict[str, Any]]:
    """``{switch: {"persistent_pit": [{name, group, ports}], "drops": {...}, "events":
    {...}, "link_drops": {...}}}`` read from running switches as a P4Runtime backup (so it
    works while the persistent-PIT manager is primary)."""
    from finsy import P4CounterEntry

    from targets.p4rt_client import P4RuntimeClient

    prog = Program.load(program)
    drops, le = prog.block(NdnDrops), prog.block(LinkEmulation)
    out: dict[str, dict[str, Any]] = {}
    for s, addr in addresses.items():
        with P4RuntimeClient(addr, topology.device_id(s), election_id=1) as c:
            c.use_schema(prog.p4info_path)
            pit = read_persistent_pit(c, prog)

            def counter(name: str) -> dict[int, tuple[int, int]]:
                return {x.index: (x.packet_count, x.byte_count)
                        for x in c.read(P4CounterEntry(name))}

            out[s] = {
                "persistent_pit": pit,
                "drops": NdnDrops.decode(counter(drops.name("ndn_drops")), NDN_DROP_REASONS),
                "events": NdnDrops.decode(counter(drops.name("ndn_events")), NDN_EVENTS),
                "link_drops": {i: p for i, (p, _) in counter(le.name("link_emulation_drops")).items() if p},
            }
    return out
