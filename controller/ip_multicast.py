"""IP multicast over ``forward.p4``: one group's distribution tree, installed by the
controller (the IP-multicast PS baseline of the NDN experiment).

``forward.p4`` already has what a source-rooted multicast tree needs, so nothing in P4
changes: an ``ipv4_routes`` entry ``group/32 -> set_multicast_group(id)`` on every switch
of the tree, and a P4Runtime PRE multicast group ``id`` on each of them whose replicas
(replication id 0, so ``ina_result_fanout.p4`` leaves them alone) go to the switch's children
in the tree and to its member hosts. The packets keep the group address and MAC down to
the hosts, which join the group (``hosts.ndn.faces.UdpFace(group=...)``).

The tree is the shortest-path tree (over switches) from the source's edge switch to each
member's edge switch, deterministic by device id. Membership is static: the controller
installs the tree for the members it is given before the agents start (no IGMP
snooping: ``forward.p4`` has no table that would punt IGMP reports to it, and routing
them to the CPU port would be a new control-plane path, not a change here). Every switch
replicates by destination only, so the tree must not be entered at any other switch than
the source's: only the source sends to the group.
"""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Iterable, Mapping
from typing import Any

import networkx as nx

from controller.deploy import Deployment, DeployReport, Forwarding, LossSpec
from controller.p4runtime import DeployError
from topologies.base import Topology

__all__ = ["DEFAULT_GROUP", "DEFAULT_GROUP_ID", "deploy_multicast", "multicast_tree"]

#: the group address of the PS's updates and its PRE group id
DEFAULT_GROUP = "239.1.0.1"
DEFAULT_GROUP_ID = 0x239


def multicast_tree(topo: Topology, source: str, members: Iterable[str]) -> dict[str, list[int]]:
    """``{switch: [egress ports]}`` of the shortest-path tree from ``source``'s edge switch
    to every member host: each switch replicates to its child switches and its own
    members, so every link of the tree carries one copy."""
    members = list(members)
    if source in members:
        raise DeployError(f"the source {source} cannot be a member of its own group")
    root = topo.iface(source)["switch"]
    sgraph = topo.graph.subgraph(topo.switches())
    paths = nx.single_source_shortest_path(sgraph, root)
    children: dict[str, set[str]] = {}
    local: dict[str, set[str]] = {}
    for m in members:
        leaf = topo.iface(m)["switch"]
        path = paths.get(leaf)
        if path is None:
            raise DeployError(f"member {m} is unreachable from {source}'s switch {root}")
        for a, b in zip(path, path[1:], strict=False):
            children.setdefault(a, set()).add(b)
        local.setdefault(leaf, set()).add(m)
    out: dict[str, list[int]] = {}
    for s in sorted(set(children) | set(local) | {root}, key=topo.device_id):
        ports = [topo.port(s, c) for c in sorted(children.get(s, ()), key=topo.device_id)]
        ports += [topo.port(s, m) for m in sorted(local.get(s, ()), key=lambda h: topo.port(s, h))]
        if ports:
            out[s] = ports
    return out


def deploy_multicast(topo: Topology, addresses: Mapping[str, str], source: str,
                     members: Iterable[str], *, group: str = DEFAULT_GROUP,
                     group_id: int = DEFAULT_GROUP_ID, loss: LossSpec | None = None,
                     timeout: float = 30.0) -> tuple[DeployReport, dict[str, list[int]]]:
    """Load ``forward.p4`` everywhere with its unicast routes (as ``controller.deploy.deploy``)
    and the group's tree: PRE groups and ``group/32`` multicast routes. Returns the report
    and the tree ``{switch: ports}``."""
    if not ipaddress.IPv4Address(group).is_multicast:
        raise DeployError(f"{group} is not an IPv4 multicast address")
    tree = multicast_tree(topo, source, members)

    async def run() -> DeployReport:
        async with Deployment(topo, addresses, timeout=timeout) as dep:
            await dep.install(loss=loss, multicast={s: {group_id: ports} for s, ports in tree.items()})

            async def one(s: str) -> None:
                fwd = dep.block(s, Forwarding)
                entry: Any = +fwd.entry("ipv4_routes", {"hdr.ipv4.dst_addr": f"{group}/32"},
                                        "set_multicast_group", group=group_id)
                n = await dep.session(s).write([entry])
                dep.report.updates[s] = dep.report.updates.get(s, 0) + n

            await asyncio.gather(*(one(s) for s in tree))
            return dep.report

    return asyncio.run(run()), tree
