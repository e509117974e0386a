"""ndn: NDN forwarding with a persistent PIT, from topology to switches.

Mirrors ``p4src/ndn.p4`` one class per P4 control block (as ``controller/deploy.py`` does
for ``forward.p4`` and ``controller/ina/deployment.py`` for ``ina.p4``); each class lives in the module of this package named
after its ``p4src/include`` file (``fib.py``, ``pit.py``, ``persistent_pit.py``, ``drops.py``), and is imported here:

==================== ============================== ===================================
class                P4 control instance            tables / counters
==================== ============================== ===================================
NdnFib               ``MyIngress.fib``              ``fib`` (ternary on h_1..h_6)
NdnNonce             ``MyIngress.nonce``            registers only (duplicate nonces)
TransientPit         ``MyIngress.pit``              ``pit_config``, ``pit_expired``;
                                                    registers; the per-port-subset
                                                    multicast groups
NdnSubAdmission      ``MyIngress.sub_admission``    ``sub_guard_config``,
                                                    ``ndn_sub_slots``,
                                                    ``ndn_fabric_ports``,
                                                    ``ndn_sub_members`` (with jobs)
PersistentPit        ``MyIngress.persistent_pit``   ``subscription_config``,
                                                    ``subscriptions_expired``; registers;
                                                    ``persistent_pit`` + one multicast
                                                    group per entry (controller mode)
NdnDrops             ``MyIngress.drops``            ``ndn_drops``, ``ndn_events``
LinkEmulation        ``MyEgress.link_emulation``    (``controller/deploy.py``)
==================== ============================== ===================================

:class:`NdnDeployment` ties them together: it loads ``ndn.p4`` on every switch, installs
the FIB (one prefix ``/<host>`` per host, next hops along a shortest-path tree toward the
host, so the paths of all GPUs to one PS form a tree), the transient PIT's groups and
lifetime, the subscription mode and lifetime, loss rates and, given ``jobs``, the
subscription admission (only a job's GPUs subscribe under its prefix, each job in a slot
of its own: :mod:`controller.ndn.sub_admission`). Subscriptions live in the
switches' registers by default (``subscriptions="switch"``); with ``"controller"``
:class:`PersistentPitManager` runs one thread per switch that reads the punted
``/*insert*/PS/train`` Interests (packet-in), adds their in-port to the persistent PIT
entry of ``/PS/train`` and its multicast group (creating both when absent), and sends
the Interest back through the switch's pipeline (its FIB sends it on toward the PS).

Names and their hashes follow ``docs/ndn.md``: :func:`prefix_hash` computes exactly what
``p4src/include/ndn_name_hash.p4`` computes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from controller.deploy import Deployment, DeployReport, LinkEmulation, check_loss
from controller.ndn.drops import NDN_DROP_REASONS, NDN_EVENTS, NdnDrops
from controller.ndn.fib import NdnFib, fib_routes
from controller.ndn.persistent_pit import (
    OUT_VIA_PIPELINE,
    SUBSCRIPTION_LIFETIME,
    PersistentPit,
    PersistentPitManager,
    read_persistent_pit,
)
from controller.ndn.pit import PIT_PORTS, TransientPit
from controller.ndn.sub_admission import NdnJob, NdnSubAdmission
from controller.p4runtime import REPO_ROOT, DeployError, Program
from controller.roles import NDN_PIT, READER, SHELL
from topologies.base import Topology

# The name bounds live with the agents that must respect them (and stay light to import).
from wire.ndn import (
    ETHERTYPE_NDN,
    MAX_COMPONENT,
    MAX_DEPTH,
    MAX_NAME_BYTES,
    NDN_MAC,
    UNSUBSCRIBE_MARKER,
    NameBoundsError,
    check_name,
    components,
    interest_packet,
    name_of,
    prefix_hash,
)

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
#: new transient PIT entries a second a host port in no job may start, when the jobs are
#: known (docs/trust.md, "Per-switch state a host outside a job can fill")
OUTSIDER_PIT_BUDGET = 200


# ----------------------------------------------------------------------------- blocks












# ----------------------------------------------------------------------------- FIB plan






# ----------------------------------------------------------------------------- manager






# ----------------------------------------------------------------------------- deployment


class NdnDeployment:
    """``ndn.p4`` on every switch of a running network, with its FIB and PIT groups."""

    def __init__(self, topology: Topology, addresses: Mapping[str, str],
                 program: str | Path = NDN_PROGRAM,
                 loss: Mapping[tuple[str, int], float] | None = None,
                 pit_lifetime: float = 4.0, subscriptions: str = "switch",
                 subscription_lifetime: float = SUBSCRIPTION_LIFETIME,
                 jobs: Sequence[NdnJob] | None = None,
                 outsider_pit_budget: int = OUTSIDER_PIT_BUDGET) -> None:
        """``outsider_pit_budget``: with ``jobs``, the transient PIT entries a second a
        host port that is no job's PS or GPU may start (docs/trust.md)."""
        self.topology = topology
        self.outsider_pit_budget = outsider_pit_budget
        #: None: open subscriptions (anyone, hashed slots); else guarded for these jobs
        self.jobs = list(jobs) if jobs is not None else None
        self.subscriptions = subscriptions
        self.subscription_lifetime = subscription_lifetime
        self.addresses = dict(addresses)
        self.program = Program.load(program)
        self.loss = check_loss(topology, loss or {})
        self.pit_lifetime = pit_lifetime
        self.routes = fib_routes(topology)
        self.report = DeployReport()
        self.manager: PersistentPitManager | None = None

    def plan(self) -> dict[str, list[Any]]:
        """Every switch's updates: FIB routes, PIT lifetime and port-subset groups, the
        subscription mode and lifetime, the subscription admission (with jobs)."""
        topo, prog = self.topology, self.program
        fib, pit, pp = prog.block(NdnFib), prog.block(TransientPit), prog.block(PersistentPit)
        guard = prog.block(NdnSubAdmission).plan(topo, self.jobs) if self.jobs is not None else {}
        out = {}
        for s in topo.switches():
            ups: list[Any] = [pit.lifetime_entry(self.pit_lifetime),
                              pp.config_entry(self.subscriptions, self.subscription_lifetime)]
            ups += [fib.route_entry(f"/{h}", port) for h, port in sorted(self.routes[s].items())]
            ups += pit.port_groups(topo.ports(s))
            out[s] = ups + guard.get(s, []) + self._budgets(s, pit)
        return out

    def _budgets(self, s: str, pit: TransientPit) -> list[Any]:
        """With jobs: a PIT budget on every port of ``s`` (1..8) whose host is in no job."""
        if self.jobs is None:
            return []
        topo = self.topology
        members = {h for j in self.jobs for h in (j.ps, *j.gpus)}
        return [pit.budget_entry(p, self.outsider_pit_budget) for p, n in sorted(topo.ports(s).items())
                if topo.is_host(n) and n not in members and 1 <= p <= PIT_PORTS]

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

    def unsubscribe(self, gpu: str, ps: str, train: str = "train") -> str:
        """Unsubscribe ``gpu`` from ``/ps/train`` on its behalf (a subscriber that died
        without unsubscribing: with persistent subscriptions its port would get every
        update for good). The controller sends the GPU's own unsubscribe Interest through
        its leaf switch's pipeline as if from the GPU's port (packet-out, ``_pad =
        NDN_OUT_VIA_PIPELINE``): the port is cleared there, and the Interest goes on
        toward the PS only where no subscriber is left, as the GPU's would. Data-plane
        subscriptions only (controller-mode entries have no unsubscribe). Returns the
        leaf switch."""
        from targets.p4rt_client import P4RuntimeClient

        if self.subscriptions != "switch":
            raise DeployError("unsubscribe on a subscriber's behalf needs data-plane "
                              "subscriptions (subscriptions='switch')")
        if self.manager is not None and self.manager.running:
            raise DeployError("the persistent-PIT manager holds the switches' streams")
        iface = self.topology.iface(gpu)
        leaf = iface["switch"]
        frame = (NDN_MAC + bytes.fromhex(iface["mac"].replace(":", ""))
                 + ETHERTYPE_NDN.to_bytes(2, "big")
                 + interest_packet(name_of(UNSUBSCRIBE_MARKER, ps, train, gpu)))
        with P4RuntimeClient(self.addresses[leaf], self.topology.device_id(leaf),
                             election_id=NDN_PIT.election_id, role=NDN_PIT.name) as c:
            if not c.is_primary:
                raise DeployError(f"{leaf}: not primary for role {NDN_PIT.name}")
            c.use_schema(self.program.p4info_path)
            before = self._unsubscribed(c)
            c.packet_out(frame, egress_port=self.topology.port(leaf, gpu), _pad=OUT_VIA_PIPELINE)
            # a packet-out has no answer: wait until the switch counts it (else closing the
            # stream at once may lose it)
            end = time.monotonic() + 5.0
            while self._unsubscribed(c) == before:
                if time.monotonic() > end:
                    raise DeployError(f"{leaf}: the unsubscribe of {gpu} was not taken "
                                      "(see its ndn_drops)")
                time.sleep(0.05)
        return leaf

    def _unsubscribed(self, client: Any) -> int:
        """``ndn_events``' unsubscribed cell of the switch behind ``client``."""
        from finsy import P4CounterEntry

        name = self.program.block(NdnDrops).name("ndn_events")
        return sum(x.packet_count for x in client.read(P4CounterEntry(name))
                   if NDN_EVENTS.get(x.index) == "unsubscribed")

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
                             election_id=SHELL.election_id, role=SHELL.name) as c:
            c.use_schema(self.program.p4info_path)
            write(c)






def read_switch_state(topology: Topology, addresses: Mapping[str, str],
                      program: str | Path = NDN_PROGRAM) -> dict[str, dict[str, Any]]:
    """``{switch: {"persistent_pit": [{name, group, ports}], "drops": {...}, "events":
    {...}, "link_drops": {...}, "expired": {"pit", "subscriptions"}, "admission": {"guarded",
    "jobs", "members"}}}`` read from running switches as a P4Runtime backup (so it
    works while the persistent-PIT manager is primary)."""
    from finsy import P4CounterEntry

    from targets.p4rt_client import P4RuntimeClient

    prog = Program.load(program)
    drops, le = prog.block(NdnDrops), prog.block(LinkEmulation)
    tpit, pp = prog.block(TransientPit), prog.block(PersistentPit)
    out: dict[str, dict[str, Any]] = {}
    for s, addr in addresses.items():
        with P4RuntimeClient(addr, topology.device_id(s), election_id=READER.election_id, role=READER.name) as c:
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
                "expired": {"pit": sum(p for p, _ in counter(tpit.name("pit_expired")).values()),
                            "subscriptions": sum(p for p, _ in
                                                 counter(pp.name("subscriptions_expired")).values())},
                "admission": prog.block(NdnSubAdmission).read(c),
            }
    return out
