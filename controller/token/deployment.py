"""token: token-passing gradient broadcast on a LAN of smart NICs (docs/token.md).

The topology (:func:`token_lan`) gives every training node ``hI`` its own smart NIC
``nicI`` (a 2-port P4 switch running ``p4src/nic.p4``: port 1 the host, port 2 the LAN)
and joins the NICs with one LAN switch ``lan`` (``p4src/lan.p4``). Mirrors the P4
programs one class per control block; each class lives in the module of this package named
after its ``p4src/include`` file (``membership.py``, ``accumulator.py``, ``lan.py``), and is imported here:

==================== ============================== ===================================
class                P4 control instance            tables / counters
==================== ============================== ===================================
TokenMembership      ``NicIngress.membership``      ``formation_openers``; ``member_drops``,
                                                    ``member_events``
TokenAccumulator     ``NicIngress.accumulator``     ``acc_drops``, ``acc_events``
LanSwitch            ``LanIngress.lan``             ``l2_forward``, ``port_sources``;
                                                    ``lan_frames``, ``lan_hairpin_drops``,
                                                    ``lan_source_drops``
LinkEmulation        ``MyEgress.link_emulation``    ``link_loss``; ``link_emulation_drops``
==================== ============================== ===================================

``LinkEmulation`` (``controller/deploy.py``, P4 ``link_emulation.p4`` in both
programs) is the per-port emulated loss of ``forward.p4``: ``TokenDeployment(loss=...)``
installs it (the loss sweep, ``bench/loss_bench.py``).

The NIC's registers (member list, watchdog, sums) are written and read by the protocol
itself (frames from its host), not by P4Runtime: BMv2's P4Runtime server cannot read
registers. The controller loads the programs, installs the NICs' multicast group (the
NIC's own NODE_LOST goes to its host and to the LAN) and who may open formation (the
initiator's MAC), the LAN switch's flood groups, MAC table and port security (the MAC
behind each port), and reads the counters.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.deploy import Deployment, DeployReport, LinkEmulation, check_loss
from controller.p4runtime import (
    REPO_ROOT,
    DeployError,
    Program,
    multicast_group,
)
from controller.token.accumulator import TokenAccumulator
from controller.token.lan import LanSwitch
from controller.token.membership import TokenMembership
from topologies.base import DEFAULT_BW, Topology, TopologyError
from topologies.builders import nic_lan

NIC_PROGRAM = REPO_ROOT / "p4src" / "build" / "nic.json"
LAN_PROGRAM = REPO_ROOT / "p4src" / "build" / "lan.json"
NIC_HOST_PORT = 1
NIC_LAN_PORT = 2
NIC_BOTH_PORTS_GROUP = 1
MAX_NODES = 31



def token_lan(n: int, bw: float = DEFAULT_BW) -> Topology:
    """``n`` training nodes on one LAN: ``hI -- nicI -- lan``
    (:func:`topologies.builders.nic_lan`, named ``token_lan-N``).

    Switches ``nic1..nicN`` (role ``nic``, device ids 1..N) then ``lan`` (role ``lan``,
    device id N+1). ``nicI`` port 1 is host ``hI``, port 2 the LAN switch, whose port
    ``I`` leads back to ``nicI``.
    """
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_NODES:
        raise TopologyError(f"must be an integer in 1..{MAX_NODES}, got {n!r}", field="nodes")
    topo = nic_lan(n, bw=bw)
    topo.name = f"token_lan-{n}"
    return topo


@dataclass
class TokenCounters:
    """Counters of every NIC and of the LAN switch."""

    nics: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    lan_frames: dict[int, int] = field(default_factory=dict)
    #: frames the LAN switch refused per port: a source MAC not the port's (port security)
    lan_source_drops: dict[int, int] = field(default_factory=dict)

    def total(self, block: str, kind: str, name: str) -> int:
        """Sum of one counter over all NICs, e.g. ``total("acc", "events", "added")``."""
        return sum(c[f"{block}_{kind}"].get(name, 0) for c in self.nics.values())


class TokenDeployment:
    """``nic.p4`` on every NIC, ``lan.p4`` on the LAN switch of a :func:`token_lan`."""

    def __init__(self, topology: Topology, addresses: Mapping[str, str],
                 nic_program: str | Path = NIC_PROGRAM,
                 lan_program: str | Path = LAN_PROGRAM,
                 loss: Mapping[tuple[str, int], float] | None = None,
                 initiator: str | None = None) -> None:
        self.topology = topology
        self.loss = check_loss(topology, dict(loss or {}))  # {(switch, port): rate}
        self.addresses = addresses
        self.nics = topology.switches("nic")
        lans = topology.switches("lan")
        if len(lans) != 1 or not self.nics:
            raise DeployError(f"{topology.name}: expected NICs and one LAN switch (token_lan)")
        self.lan = lans[0]
        # the host that opens formation (the nodes' --initiator; h1 in every experiment)
        hosts = topology.hosts()
        self.initiator = initiator if initiator is not None else (hosts[0] if hosts else "")
        if self.initiator not in hosts:
            raise DeployError(f"{topology.name}: initiator {self.initiator!r} is no host of the LAN")
        nic, lan = Program.load(nic_program), Program.load(lan_program)
        self.programs: dict[str, Program] = {s: nic for s in self.nics}
        self.programs[self.lan] = lan
        self.report = DeployReport()

    def _updates(self, dep: Deployment) -> dict[str, list[Any]]:
        topo = self.topology
        out: dict[str, list[Any]] = {}
        opener = topo.host_mac(self.initiator)
        for nic in self.nics:
            out[nic] = [+multicast_group(NIC_BOTH_PORTS_GROUP, [NIC_HOST_PORT, NIC_LAN_PORT]),
                        *dep.block(nic, TokenMembership).opener_entries([opener])]
        ports = sorted(topo.ports(self.lan))
        lan = dep.block(self.lan, LanSwitch)
        macs = {}
        for host in topo.hosts():
            nic = topo.iface(host)["switch"]
            macs[topo.host_mac(host)] = topo.port(self.lan, nic)
        out[self.lan] = lan.flood_groups(ports) + lan.mac_entries(macs) + lan.source_entries(macs)
        for (s, port), rate in sorted(self.loss.items()):
            out[s].append(+dep.block(s, LinkEmulation).loss_entry(port, rate))
        return out

    def deploy(self, timeout: float = 60.0) -> DeployReport:
        """Load the programs (fresh registers) and install groups and MAC entries."""

        async def run() -> DeployReport:
            async with Deployment(self.topology, self.addresses, self.programs,
                                  timeout=timeout) as dep:
                plans = self._updates(dep)

                async def one(s: str) -> None:
                    self.report.updates[s] = await dep.session(s).write(plans[s])

                await asyncio.gather(*(one(s) for s in plans))
                self.report.connect_s = dep.report.connect_s
            return self.report

        return asyncio.run(run())

    def read_counters(self, timeout: float = 30.0) -> TokenCounters:
        """Counters of every NIC and the LAN switch's frames and refused sources per port."""

        async def run() -> TokenCounters:
            out = TokenCounters()
            async with Deployment(self.topology, self.addresses, self.programs,
                                  set_pipeline=False, timeout=timeout) as dep:
                for nic in self.nics:
                    sess = dep.session(nic)
                    m = await dep.block(nic, TokenMembership).read(sess)
                    a = await dep.block(nic, TokenAccumulator).read(sess)
                    out.nics[nic] = {"member_drops": m["drops"], "member_events": m["events"],
                                     "acc_drops": a["drops"], "acc_events": a["events"]}
                lan, ports = dep.block(self.lan, LanSwitch), sorted(self.topology.ports(self.lan))
                out.lan_frames = await lan.read_frames(dep.session(self.lan), ports)
                out.lan_source_drops = await lan.read_source_drops(dep.session(self.lan), ports)
            return out

        return asyncio.run(run())
