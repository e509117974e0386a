"""Shortest-path IPv4 routes for every switch of a :class:`~topologies.Topology`.

Every host NIC address gets a /32 route on every switch that can reach it through
switches. The next hops of switch ``s`` towards a NIC attached to switch ``t`` are the
neighbours of ``s`` on *all* shortest switch paths from ``s`` to ``t`` (hop count):

* ``s == t``: the NIC itself, ``set_next_hop(NIC MAC, port)``;
* one neighbour: ``set_next_hop(MAC of the neighbour's ingress port, port)``;
* several: an ECMP group (``set_ecmp_group``), its members ordered by port.

Hosts never forward (BCube servers relay at the application level, not in the kernel),
so paths run through switches only. A NIC that no switch path reaches from ``s`` (in
BCube: a NIC on another level, or under another switch of the same level) gets no route
on ``s``; it is listed in :attr:`SwitchRoutes.unreachable`, and packets to it are dropped
(and counted) by the data plane's default action.

Switch port MACs follow :func:`port_mac`; the same plan fills the egress ``port_macs``
table and the destination MAC of switch-to-switch next hops, so every frame on a link
carries the MACs of the two ports it joins.

Everything is returned as plain dataclasses (:class:`Route`, :class:`EcmpGroup`,
:class:`SwitchRoutes`); :mod:`controller.deploy` turns them into table entries.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import networkx as nx

from topologies.base import Topology, TopologyError

__all__ = [
    "EcmpGroup",
    "NextHop",
    "Route",
    "RoutingError",
    "SwitchRoutes",
    "compute_routes",
    "port_mac",
    "port_macs",
    "switch_routes",
]

#: First ECMP group id on every switch (0 is what unset metadata reads as).
FIRST_GROUP_ID = 1


class RoutingError(ValueError):
    """Routes cannot be computed: unknown names, a disconnected topology, a bad plan."""


# ----------------------------------------------------------------------------- MACs


def port_mac(device_id: int, port: int) -> str:
    """The MAC of ``port`` on the switch with ``device_id``: ``02:00:DD:DD:PP:PP``.

    Locally administered unicast (first byte 0x02), so it never collides with host MACs
    (``00:00:...`` in the address plan) or vendor MACs. Device ids and ports must fit
    16 bits each.
    """
    for value, what in ((device_id, "device_id"), (port, "port")):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 0xFFFF:
            raise RoutingError(f"{what} must be an int in 0..65535 for the port MAC plan, got {value!r}")
    return f"02:00:{device_id >> 8:02x}:{device_id & 0xFF:02x}:{port >> 8:02x}:{port & 0xFF:02x}"


def port_macs(topo: Topology, switch: str) -> dict[int, str]:
    """``{port: MAC}`` for every data port of ``switch`` (see :func:`port_mac`)."""
    _check_switch(topo, switch)
    dev = topo.device_id(switch)
    return {port: port_mac(dev, port) for port in topo.ports(switch)}


# ----------------------------------------------------------------------------- model


@dataclass(frozen=True, order=True)
class NextHop:
    """Where a packet leaves: egress ``port``, new destination MAC ``dmac``, and the
    node (``peer``) and its port (``peer_port``, NIC index for hosts) at the far end."""

    port: int
    dmac: str
    peer: str
    peer_port: int

    def __str__(self) -> str:
        return f"port {self.port} -> {self.peer}:{self.peer_port} ({self.dmac})"


@dataclass(frozen=True)
class EcmpGroup:
    """An ECMP group of one switch; ``members[i]`` is ``ecmp_members`` index ``i``."""

    group_id: int
    members: tuple[NextHop, ...]

    @property
    def size(self) -> int:
        """Number of members (the ``group_size`` action argument)."""
        return len(self.members)

    def __str__(self) -> str:
        ports = ",".join(str(m.port) for m in self.members)
        return f"group {self.group_id} [{ports}]"


@dataclass(frozen=True)
class Route:
    """A /32 route to one host NIC: exactly one of ``next_hop`` and ``group_id`` is set.

    ``direct`` is true when the NIC hangs off this switch (``next_hop`` is the NIC).
    ``distance`` is the number of switch-to-switch hops left (0 when direct).
    """

    ip: str
    host: str
    nic: int
    distance: int
    next_hop: NextHop | None = None
    group_id: int | None = None
    direct: bool = False

    @property
    def prefix(self) -> str:
        """The LPM key, ``"a.b.c.d/32"``."""
        return f"{self.ip}/32"

    @property
    def is_ecmp(self) -> bool:
        """True when the route points at an ECMP group."""
        return self.group_id is not None


@dataclass
class SwitchRoutes:
    """Everything forwarding needs on one switch."""

    switch: str
    device_id: int
    routes: list[Route] = field(default_factory=list)
    groups: list[EcmpGroup] = field(default_factory=list)
    #: ``{port: MAC}`` of every data port (egress ``port_macs`` table).
    port_macs: dict[int, str] = field(default_factory=dict)
    #: Host NIC addresses no switch path reaches from here (no route installed).
    unreachable: list[str] = field(default_factory=list)

    def route(self, ip: str) -> Route:
        """The route to ``ip``; :class:`RoutingError` when there is none."""
        for r in self.routes:
            if r.ip == ip:
                return r
        raise RoutingError(f"switch {self.switch!r} has no route to {ip!r}")

    def group(self, group_id: int) -> EcmpGroup:
        """The ECMP group ``group_id``."""
        for g in self.groups:
            if g.group_id == group_id:
                return g
        raise RoutingError(f"switch {self.switch!r} has no ECMP group {group_id!r}")

    def next_hops(self, ip: str) -> tuple[NextHop, ...]:
        """All next hops towards ``ip`` (the group's members for an ECMP route)."""
        r = self.route(ip)
        if r.group_id is not None:
            return self.group(r.group_id).members
        assert r.next_hop is not None
        return (r.next_hop,)

    def summary(self) -> str:
        """A plain-text table of the routes and groups (the CLI prints a rich one)."""
        lines = [f"{self.switch} (device {self.device_id}): {len(self.routes)} routes, "
                 f"{len(self.groups)} ECMP groups"]
        for r in self.routes:
            how = str(self.group(r.group_id)) if r.group_id is not None else str(r.next_hop)
            lines.append(f"  {r.prefix:<18} {r.host}-eth{r.nic:<3} {how}")
        if self.unreachable:
            lines.append(f"  unreachable: {', '.join(self.unreachable)}")
        return "\n".join(lines)


# ----------------------------------------------------------------------------- routing


def _check_switch(topo: Topology, name: object) -> str:
    if not isinstance(name, str) or name not in topo:
        known = topo.switches()
        hint = f" (switches: {_names_hint(known)})" if known else ""
        raise RoutingError(f"unknown switch {name!r}{hint}")
    if not topo.is_switch(name):
        raise RoutingError(f"{name!r} is a host, not a switch")
    return name


def _names_hint(names: list[str], limit: int = 8) -> str:
    if len(names) <= limit:
        return ", ".join(names)
    return ", ".join(names[: limit - 1]) + f", ..., {names[-1]}"


def _check_topology(topo: Topology) -> None:
    if not isinstance(topo, Topology):
        raise RoutingError(f"expected a topologies.Topology, got {type(topo).__name__}")
    if not topo.switches():
        raise RoutingError(f"topology {topo.name!r} has no switches")
    try:
        topo.validate()
    except TopologyError as e:
        raise RoutingError(f"invalid topology {topo.name!r}: {e}") from None
    if not nx.is_connected(topo.graph):
        parts = sorted(
            (sorted(c, key=_node_order(topo)) for c in nx.connected_components(topo.graph)),
            key=lambda c: _node_order(topo)(c[0]),
        )
        shown = "; ".join("{" + _names_hint(c, 4) + "}" for c in parts[:4])
        raise RoutingError(
            f"topology {topo.name!r} is disconnected: {len(parts)} components: {shown}"
        )


def _node_order(topo: Topology) -> Callable[[str], int]:
    """Sort key: a node's position in creation order."""
    order = {n: i for i, n in enumerate(topo.graph.nodes)}
    return order.__getitem__


def _switch_graph(topo: Topology) -> nx.Graph:
    # Hosts never forward: paths run over switch-to-switch links only.
    return topo.graph.subgraph(topo.switches())


def _destination_nics(topo: Topology, loopbacks: Mapping[str, str] | None) -> list[tuple[str, int, dict]]:
    """Destination NICs in host/NIC order (the order of every route table), then the
    switches' loopback addresses."""
    nics: list[tuple[str, int, dict]] = []
    for host in topo.hosts():
        for nic, iface in enumerate(topo.node(host)["ifaces"]):
            nics.append((host, nic, iface))
    for sw, ip in (loopbacks or {}).items():
        _check_switch(topo, sw)
        nics.append((sw, 0, {"ip": ip, "switch": sw, "mac": None}))
    return nics


def _switch_routes(
    topo: Topology,
    s: str,
    nics: list[tuple[str, int, dict]],
    dist: dict[str, dict[str, int]],
    loopback_paths: Mapping[str, Mapping[str, str]] | None,
) -> SwitchRoutes:
    """Switch ``s``'s route to every NIC: direct, pinned, one next hop or an ECMP group."""
    dev = topo.device_id(s)
    sr = SwitchRoutes(switch=s, device_id=dev, port_macs=port_macs(topo, s))
    group_ids: dict[tuple[NextHop, ...], int] = {}
    # (neighbour, next hop via it), in port order: that order is the members' order.
    neighbours = [
        (n, _switch_hop(topo, s, p, n)) for p, n in topo.ports(s).items() if topo.is_switch(n)
    ]
    # Per attachment switch t: (distance, single next hop or None, group id or None).
    via: dict[str, tuple[int, NextHop | None, int | None]] = {}
    for host, nic, iface in nics:
        t = iface["switch"]
        d_t = dist[t]
        if s not in d_t:
            sr.unreachable.append(iface["ip"])
            continue
        if s == t and host == t:  # a switch's own loopback address
            continue
        if s == t:
            hop = NextHop(topo.port(s, host), iface["mac"], host, nic)
            sr.routes.append(Route(iface["ip"], host, nic, 0, next_hop=hop, direct=True))
            continue
        pin = (loopback_paths or {}).get(host, {}).get(s) if host == t else None
        if pin is not None:
            here = d_t[s]
            hop = next((h for n, h in neighbours if n == pin and d_t.get(n) == here - 1), None)
            if hop is None:
                raise RoutingError(f"pinned next hop {pin!r} of {s!r} toward {t!r} is not a "
                                   "neighbour on a shortest path")
            sr.routes.append(Route(iface["ip"], host, nic, here, next_hop=hop))
            continue
        if t not in via:
            here = d_t[s]
            hops = tuple(h for n, h in neighbours if d_t.get(n) == here - 1)
            if len(hops) == 1:
                via[t] = (here, hops[0], None)
            else:
                gid = group_ids.get(hops)
                if gid is None:
                    # Identical member sets share one group: ids in first-use order.
                    gid = group_ids[hops] = FIRST_GROUP_ID + len(group_ids)
                    sr.groups.append(EcmpGroup(gid, hops))
                via[t] = (here, None, gid)
        here, hop, gid = via[t]
        sr.routes.append(Route(iface["ip"], host, nic, here, next_hop=hop, group_id=gid))
    return sr


def compute_routes(
    topo: Topology,
    switches: Iterable[str] | None = None,
    loopbacks: Mapping[str, str] | None = None,
    loopback_paths: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, SwitchRoutes]:
    """Routes of every switch (or of ``switches``), keyed by switch name in topology order.

    ``loopbacks`` ``{switch: ip}`` adds a /32 route on every other switch to an address
    that a switch itself answers (an aggregating switch's address in ina); the
    owner has no route to it (its program consumes such packets first).
    ``loopback_paths`` ``{switch: {other switch: neighbour}}`` pins the route to a
    loopback address to one of the equal-cost next hops (the paths a placement's LP
    counted its link loads on); switches it does not name keep the ECMP route.

    Raises :class:`RoutingError` for unknown or non-switch names and for a topology whose
    graph is disconnected (some host could reach no one).
    """
    _check_topology(topo)
    if switches is None:
        wanted = topo.switches()
    else:
        if isinstance(switches, str):
            switches = [switches]
        wanted = [_check_switch(topo, s) for s in switches]
    sgraph = _switch_graph(topo)

    nics = _destination_nics(topo, loopbacks)
    # One BFS per attachment switch: distances from it to every switch it reaches.
    dist: dict[str, dict[str, int]] = {}
    for _, _, iface in nics:
        t = iface["switch"]
        if t not in dist:
            dist[t] = nx.single_source_shortest_path_length(sgraph, t)

    return {s: _switch_routes(topo, s, nics, dist, loopback_paths) for s in wanted}


def _switch_hop(topo: Topology, switch: str, port: int, peer: str) -> NextHop:
    peer_port = topo.port(peer, switch)
    return NextHop(port, port_mac(topo.device_id(peer), peer_port), peer, peer_port)


def switch_routes(topo: Topology, switch: str) -> SwitchRoutes:
    """Routes of one switch (see :func:`compute_routes`)."""
    return compute_routes(topo, [switch])[switch]

