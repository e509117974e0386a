"""The topology model shared by the controller, the Mininet builder and the host agents.

A :class:`Topology` wraps one :class:`networkx.Graph` (``Topology.graph``) and keeps the
attributes documented in ``docs/ARCHITECTURE.md`` consistent:

* node ``kind`` is ``"host"`` or ``"switch"``; ``role`` says what the node is in its
  family (``core``/``agg``/``edge``, ``spine``/``leaf``, ``bcube``, ``switch``; hosts are
  ``"host"``).
* switches carry ``device_id`` (P4Runtime device id, from 1 in creation order) and
  ``grpc_port`` (``grpc_base + device_id - 1``, the port its P4Runtime server listens on).
* hosts carry ``index`` (1-based creation order, the basis of their addresses) and
  ``ifaces``: one dict per NIC, ``{"name", "ip", "prefix", "mac", "switch"}``; NIC ``n`` is
  Linux interface ``<host>-eth<n>`` and is the host's port ``n`` on its link.
* edges carry ``capacity`` (Mbit/s, float), ``ports`` (``{node_a: port_a, node_b: port_b}``)
  and ``index`` (creation order, which fixes the order of :meth:`Topology.links`).

Switch ports are numbered from 1 in the order links are added to that switch (the
smallest free port is taken, skipping the CPU port 255); host ports are NIC indices
from 0. Builders add links in a documented order so that port numbers are predictable.

The constants, :class:`TopologyError`, :class:`Link`, the name checks and the address
plan live in :mod:`topologies.plan` and are re-exported here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import networkx as nx

from .plan import (  # re-exported: the model's public names live here too
    CPU_PORT,
    DEFAULT_BW,
    DROP_PORT,
    GRPC_BASE_PORT,
    HOST_KIND,
    MAX_HOSTS,
    MAX_IFNAME,
    MAX_PORT,
    RESERVED_NODE_ATTRS,
    SWITCH_KIND,
    Link,
    TopologyError,
    _check_ip,
    _nic_prefix,
    check_bw,
    check_name,
    host_address,
    iface_name,
    mac_for_ip,
)

__all__ = [
    "CPU_PORT",
    "DEFAULT_BW",
    "DROP_PORT",
    "GRPC_BASE_PORT",
    "HOST_KIND",
    "MAX_HOSTS",
    "MAX_IFNAME",
    "MAX_PORT",
    "RESERVED_NODE_ATTRS",
    "SWITCH_KIND",
    "FileFormat",
    "Link",
    "Topology",
    "TopologyError",
    "check_bw",
    "check_name",
    "host_address",
    "iface_name",
    "mac_for_ip",
    "register_file_format",
]

# ----------------------------------------------------------------------------- model


class Topology:
    """A network of hosts and switches; see the module docstring for the attributes."""

    def __init__(
        self,
        name: str = "topology",
        *,
        bw: float = DEFAULT_BW,
        grpc_base: int = GRPC_BASE_PORT,
    ) -> None:
        """Create an empty topology whose links default to ``bw`` Mbit/s."""
        if not isinstance(name, str) or not name:
            raise TopologyError(f"topology name must be a non-empty string, got {name!r}")
        if (
            isinstance(grpc_base, bool)
            or not isinstance(grpc_base, int)
            or not (1 <= grpc_base <= 65535)
        ):
            raise TopologyError(f"grpc_base must be a TCP port number, got {grpc_base!r}")
        self.name = name
        self.default_bw = check_bw(bw)
        self.grpc_base = grpc_base
        self.graph = nx.Graph(name=name)
        # node -> {port -> neighbour}: makes peer() O(1) and port clashes easy to see.
        self._ports: dict[str, dict[int, str]] = {}
        self._fixed_ips: dict[str, list[str]] = {}
        self._ips: dict[str, str] = {}  # address -> interface name, for uniqueness
        self._device_ids: dict[int, str] = {}
        self._reserved: dict[str, set[int]] = {}
        self._n_hosts = 0
        self._n_links = 0

    # -- construction --------------------------------------------------------------

    def _new_node(self, name: str, attrs: Mapping[str, Any]) -> None:
        check_name(name)
        if name in self.graph:
            raise TopologyError(f"duplicate node name {name!r}")
        bad = RESERVED_NODE_ATTRS.intersection(attrs)
        if bad:
            raise TopologyError(f"node {name!r}: attribute(s) {sorted(bad)} are reserved")
        self._ports[name] = {}

    def add_host(self, name: str, *, ips: Sequence[str] | None = None, **attrs: Any) -> str:
        """Add a host. ``ips`` fixes the addresses of its first NICs (default: address plan).

        Extra keyword arguments become node attributes (e.g. ``pod``, ``digits``).
        """
        self._new_node(name, attrs)
        fixed = [_check_ip(ip, f"host {name} ip[{i}]") for i, ip in enumerate(ips or ())]
        self._n_hosts += 1
        if self._n_hosts > MAX_HOSTS:
            raise TopologyError(f"more than {MAX_HOSTS} hosts do not fit the address plan")
        self._fixed_ips[name] = fixed
        self.graph.add_node(
            name, kind=HOST_KIND, role="host", index=self._n_hosts, ifaces=[], **attrs
        )
        return name

    def add_switch(
        self, name: str, *, role: str = "switch", device_id: int | None = None, **attrs: Any
    ) -> str:
        """Add a switch; ``device_id`` defaults to one more than the largest so far."""
        self._new_node(name, attrs)
        if device_id is None:
            device_id = max(self._device_ids, default=0) + 1
        elif isinstance(device_id, bool) or not isinstance(device_id, int) or device_id < 1:
            raise TopologyError(f"switch {name!r}: device_id must be an int >= 1")
        if device_id in self._device_ids:
            raise TopologyError(
                f"switch {name!r}: device_id {device_id} already used by "
                f"{self._device_ids[device_id]!r}"
            )
        if not isinstance(role, str) or not role:
            raise TopologyError(f"switch {name!r}: role must be a non-empty string")
        self._device_ids[device_id] = name
        self.graph.add_node(
            name,
            kind=SWITCH_KIND,
            role=role,
            device_id=device_id,
            grpc_port=self.grpc_base + device_id - 1,
            **attrs,
        )
        return name

    def reserve_ports(self, node: str, ports: Sequence[int]) -> None:
        """Keep automatic numbering off ``ports`` of ``node`` (taken by later explicit links)."""
        self.node(node)
        self._reserved.setdefault(node, set()).update(ports)

    def _free_port(self, node: str) -> int:
        used = self._ports[node]
        reserved = self._reserved.get(node, ())
        port = 0 if self.is_host(node) else 1
        while port in used or port in reserved or port == CPU_PORT:
            port += 1
        return self._check_port(node, port)  # raises when the node has run out of ports

    def _check_port(self, node: str, port: Any) -> int:
        if isinstance(port, bool) or not isinstance(port, int):
            raise TopologyError(f"port of {node!r} must be an int, got {port!r}")
        if self.is_host(node):
            if not 0 <= port <= 255:
                raise TopologyError(f"host {node!r}: port (NIC index) {port} outside 0..255")
        elif not 1 <= port <= MAX_PORT or port == CPU_PORT:
            raise TopologyError(
                f"switch {node!r}: port {port} outside 1..{MAX_PORT} or is the CPU port {CPU_PORT}"
            )
        if port in self._ports[node]:
            raise TopologyError(
                f"{node!r} port {port} already connects to {self._ports[node][port]!r}"
            )
        return port

    def add_link(
        self,
        a: str,
        b: str,
        *,
        bw: float | None = None,
        port_a: int | None = None,
        port_b: int | None = None,
    ) -> Link:
        """Connect ``a`` and ``b``; ports default to the smallest free one on each side."""
        for node in (a, b):
            if node not in self.graph:
                raise TopologyError(f"unknown node {node!r}")
        if a == b:
            raise TopologyError(f"link from {a!r} to itself")
        if self.is_host(a) and self.is_host(b):
            raise TopologyError(f"link {a!r}-{b!r} joins two hosts; hosts attach to switches")
        if self.graph.has_edge(a, b):
            raise TopologyError(f"duplicate link {a!r}-{b!r}")
        capacity = self.default_bw if bw is None else check_bw(bw)
        pa = self._free_port(a) if port_a is None else self._check_port(a, port_a)
        pb = self._free_port(b) if port_b is None else self._check_port(b, port_b)
        for node, port, other in ((a, pa, b), (b, pb, a)):
            if self.is_host(node):
                self._add_nic(node, port, other)
        self._ports[a][pa] = b
        self._ports[b][pb] = a
        self._n_links += 1
        self.graph.add_edge(a, b, capacity=capacity, ports={a: pa, b: pb}, index=self._n_links)
        return Link(a, pa, b, pb, capacity)

    def _add_nic(self, host: str, nic: int, switch: str) -> None:
        data = self.graph.nodes[host]
        fixed = self._fixed_ips[host]
        ip = fixed[nic] if nic < len(fixed) else host_address(data["index"], nic)
        name = iface_name(host, nic)
        if ip in self._ips:
            raise TopologyError(f"address {ip} of {name} is already used by {self._ips[ip]}")
        ifaces: list[dict[str, Any] | None] = data["ifaces"]
        # Explicit NIC numbers may arrive out of order; holes are caught by validate().
        while len(ifaces) <= nic:
            ifaces.append(None)
        ifaces[nic] = {
            "name": name,
            "ip": ip,
            "prefix": _nic_prefix(nic),
            "mac": mac_for_ip(ip),
            "switch": switch,
        }
        self._ips[ip] = name

    # -- queries -------------------------------------------------------------------

    def __contains__(self, name: object) -> bool:
        return name in self.graph

    def __repr__(self) -> str:
        return (
            f"<Topology {self.name!r}: {len(self.hosts())} hosts, "
            f"{len(self.switches())} switches, {self._n_links} links>"
        )

    def node(self, name: str) -> dict[str, Any]:
        """The attribute dict of ``name`` (the live networkx dict)."""
        try:
            return self.graph.nodes[name]
        except KeyError:
            raise TopologyError(f"unknown node {name!r}") from None

    def is_host(self, name: str) -> bool:
        """True when ``name`` is a host."""
        return self.node(name)["kind"] == HOST_KIND

    def is_switch(self, name: str) -> bool:
        """True when ``name`` is a switch."""
        return self.node(name)["kind"] == SWITCH_KIND

    def hosts(self) -> list[str]:
        """Host names in creation order."""
        return [n for n, k in self.graph.nodes(data="kind") if k == HOST_KIND]

    def switches(self, role: str | None = None) -> list[str]:
        """Switch names in creation order, optionally only those with ``role``."""
        return [
            n
            for n, d in self.graph.nodes(data=True)
            if d["kind"] == SWITCH_KIND and (role is None or d["role"] == role)
        ]

    def device_id(self, switch: str) -> int:
        """P4Runtime device id of ``switch``."""
        if not self.is_switch(switch):
            raise TopologyError(f"{switch!r} is not a switch")
        return self.graph.nodes[switch]["device_id"]

    def switch_by_id(self, device_id: int) -> str:
        """The switch whose device id is ``device_id``."""
        try:
            return self._device_ids[device_id]
        except KeyError:
            raise TopologyError(f"no switch has device_id {device_id!r}") from None

    def port(self, u: str, v: str) -> int:
        """The port on ``u`` of the link ``u``-``v`` (NIC index when ``u`` is a host)."""
        self.node(u)
        self.node(v)
        try:
            return self.graph.edges[u, v]["ports"][u]
        except KeyError:
            raise TopologyError(f"no link between {u!r} and {v!r}") from None

    def peer(self, node: str, port: int) -> tuple[str, int]:
        """``(neighbour, neighbour_port)`` at the far end of ``node``'s ``port``."""
        self.node(node)
        try:
            other = self._ports[node][port]
        except KeyError:
            raise TopologyError(f"{node!r} has no port {port!r}") from None
        return other, self.graph.edges[node, other]["ports"][other]

    def ports(self, node: str) -> dict[int, str]:
        """``{port: neighbour}`` of ``node``, sorted by port."""
        self.node(node)
        return dict(sorted(self._ports[node].items()))

    def capacity(self, u: str, v: str) -> float:
        """Capacity of the link ``u``-``v`` in Mbit/s."""
        self.port(u, v)
        return self.graph.edges[u, v]["capacity"]

    def iface(self, host: str, nic: int = 0) -> dict[str, Any]:
        """The interface dict of NIC ``nic`` of ``host``."""
        if not self.is_host(host):
            raise TopologyError(f"{host!r} is not a host")
        ifaces = self.graph.nodes[host]["ifaces"]
        if not 0 <= nic < len(ifaces) or ifaces[nic] is None:
            raise TopologyError(f"host {host!r} has no NIC {nic!r}")
        return ifaces[nic]

    def host_ip(self, host: str, nic: int = 0) -> str:
        """IPv4 address of NIC ``nic`` of ``host``."""
        return self.iface(host, nic)["ip"]

    def host_mac(self, host: str, nic: int = 0) -> str:
        """MAC address of NIC ``nic`` of ``host``."""
        return self.iface(host, nic)["mac"]

    def host_by_ip(self, ip: str) -> tuple[str, int]:
        """``(host, nic)`` owning address ``ip``."""
        try:
            name = self._ips[ip]
        except KeyError:
            raise TopologyError(f"no host interface has address {ip!r}") from None
        host, _, nic = name.rpartition("-eth")
        return host, int(nic)

    def links(self) -> Iterator[Link]:
        """All links in creation order, with the port on each side and the capacity."""
        edges = sorted(self.graph.edges(data=True), key=lambda e: e[2]["index"])
        for _u, _v, data in edges:
            (a, pa), (b, pb) = data["ports"].items()
            yield Link(a, pa, b, pb, data["capacity"])

    # -- checks --------------------------------------------------------------------

    def validate(self) -> None:
        """Check the invariants every consumer relies on; raise :class:`TopologyError`."""
        if not self.hosts():
            raise TopologyError("topology has no hosts")
        for name in self.graph.nodes:
            self.validate_node(name)

    def validate_node(self, name: str) -> None:
        """Check one node: interface name lengths and, for hosts, a gap-free NIC list."""
        data = self.node(name)
        for port in self._ports[name]:
            ifname = iface_name(name, port)
            if len(ifname) > MAX_IFNAME:
                raise TopologyError(
                    f"interface name {ifname!r} is longer than {MAX_IFNAME} characters; "
                    "use shorter node names"
                )
        if data["kind"] != HOST_KIND:
            return
        ifaces = data["ifaces"]
        if not ifaces:
            raise TopologyError(f"host {name!r} has no link")
        for nic, iface in enumerate(ifaces):
            if iface is None:
                raise TopologyError(
                    f"host {name!r} has no NIC {nic} but a higher one: host ports are "
                    f"NIC indices and must run 0..{len(ifaces) - 1} without gaps"
                )
        fixed = self._fixed_ips[name]
        if len(fixed) > len(ifaces):
            raise TopologyError(
                f"host {name!r} has {len(fixed)} addresses but only {len(ifaces)} NIC(s)"
            )

    # -- conversion ----------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict in the file format (see ``topologies/README.md``)."""
        hosts: list[dict[str, Any]] = []
        switches: list[dict[str, Any]] = []
        for name, data in self.graph.nodes(data=True):
            entry: dict[str, Any] = {"name": name}
            if data["kind"] == HOST_KIND:
                entry["ip"] = [i["ip"] for i in data["ifaces"] if i is not None]
                hosts.append(entry)
            else:
                entry.update(role=data["role"], device_id=data["device_id"])
                switches.append(entry)
            extra = {k: _plain(v) for k, v in data.items() if k not in RESERVED_NODE_ATTRS}
            if extra:
                entry["attrs"] = extra
        links = [
            {"nodes": [ln.a, ln.b], "ports": {ln.a: ln.port_a, ln.b: ln.port_b}, "bw": ln.capacity}
            for ln in self.links()
        ]
        return {
            "name": self.name,
            "bw": self.default_bw,
            "grpc_base": self.grpc_base,
            "hosts": hosts,
            "switches": switches,
            "links": links,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str | None = None) -> Topology:
        """Build a topology from a dict in the file format (inverse of :meth:`to_dict`).

        The same as ``topologies.fileformat.from_data`` (see :func:`register_file_format`).
        """
        return _file_format().from_data(data, source=source)

    @classmethod
    def from_file(cls, path: str) -> Topology:
        """Load a JSON or YAML topology file (see ``topologies/README.md``).

        The same as :func:`topologies.load` (see :func:`register_file_format`).
        """
        return _file_format().load(path)

    def to_mininet(
        self,
        *,
        switch_cls: type | None = None,
        host_cls: type | None = None,
        link_cls: type | None = None,
        limit_bw: bool = True,
    ) -> Any:
        """A ``mininet.topo.Topo`` with the same nodes, addresses and port numbers.

        Every ``addLink`` passes ``port1``/``port2`` as numbered here and ``bw`` (Mbit/s,
        when ``limit_bw``; Mininet's TCLink only shapes 0 < bw <= 1000). ``link_cls``
        defaults to ``TCLink`` when ``limit_bw`` is set. Hosts get their NIC 0 address as
        ``ip``/``mac``; every host interface gets its address via ``params1``/``params2``
        (``{"ip": "a.b.c.d/prefix"}``) and its MAC via ``addr1``/``addr2``.
        Switches get ``dpid`` (device id in hex), ``device_id`` and ``grpc_port``.
        """
        if link_cls is None and limit_bw:
            from mininet.link import TCLink

            link_cls = TCLink
        return _mininet_topo_class()(
            topology=self,
            switch_cls=switch_cls,
            host_cls=host_cls,
            link_cls=link_cls,
            limit_bw=limit_bw,
        )

    def summary(self) -> str:
        """A readable table of the nodes and links."""
        lines = [
            f"topology {self.name}: {len(self.hosts())} hosts, {len(self.switches())} "
            f"switches, {self._n_links} links",
            "",
            f"{'node':<8} {'kind':<7} {'role':<7} {'id':>4}  {'ports / addresses'}",
        ]
        for name, data in self.graph.nodes(data=True):
            if data["kind"] == HOST_KIND:
                addrs = ", ".join(
                    f"eth{n}={i['ip']}/{i['prefix']}@{i['switch']}"
                    for n, i in enumerate(data["ifaces"])
                    if i
                )
                lines.append(f"{name:<8} {'host':<7} {data['role']:<7} {data['index']:>4}  {addrs}")
            else:
                lines.append(
                    f"{name:<8} {'switch':<7} {data['role']:<7} {data['device_id']:>4}  "
                    f"{len(self._ports[name])} ports, grpc {data['grpc_port']}"
                )
        lines += ["", f"{'link':<24} {'Mbit/s':>10}"]
        for ln in self.links():
            ends = f"{ln.a}:{ln.port_a} <-> {ln.b}:{ln.port_b}"
            lines.append(f"{ends:<24} {ln.capacity:>10g}")
        return "\n".join(lines)


# -- file format -------------------------------------------------------------------
# The import graph is base <- builders <- fileformat: fileformat imports this module, so
# this module must not import fileformat (an import cycle). Instead fileformat registers
# its readers here when it is imported; the package's __init__ imports it, so they are
# in place whenever this module is imported through ``topologies``.


class FileFormat(NamedTuple):
    """The readers :meth:`Topology.from_dict` and :meth:`Topology.from_file` delegate to."""

    #: ``from_data(data, source=None) -> Topology``: a dict in the file format.
    from_data: Callable[..., Topology]
    #: ``load(path) -> Topology``: a JSON or YAML file.
    load: Callable[[str], Topology]


_file_format_readers: FileFormat | None = None


def register_file_format(fmt: FileFormat) -> None:
    """Install the readers behind :meth:`Topology.from_dict`/:meth:`Topology.from_file`
    (called by ``topologies.fileformat`` on import; a later call replaces them)."""
    global _file_format_readers
    _file_format_readers = fmt


def _file_format() -> FileFormat:
    if _file_format_readers is None:  # only if this module was loaded outside its package
        raise RuntimeError("no topology file format registered: import topologies.fileformat")
    return _file_format_readers


def _plain(value: Any) -> Any:
    """Tuples (e.g. BCube ``digits``) become lists so ``to_dict`` output is JSON."""
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


@functools.cache
def _mininet_topo_class() -> type:
    # Imported lazily: the model (controller, placement) must work without Mininet.
    from mininet.topo import Topo

    class GradnetTopo(Topo):
        """Mininet ``Topo`` mirroring a gradnet :class:`Topology`."""

        def build(
            self,
            topology: Topology,
            switch_cls: type | None,
            host_cls: type | None,
            link_cls: type | None,
            limit_bw: bool,
        ) -> None:
            self.gradnet = topology
            for name in topology.hosts():
                first = topology.iface(name, 0)
                opts: dict[str, Any] = {
                    "ip": f"{first['ip']}/{first['prefix']}",
                    "mac": first["mac"],
                }
                if host_cls is not None:
                    opts["cls"] = host_cls
                self.addHost(name, **opts)
            for name in topology.switches():
                data = topology.node(name)
                opts = {
                    "dpid": f"{data['device_id']:016x}",
                    "device_id": data["device_id"],
                    "grpc_port": data["grpc_port"],
                }
                if switch_cls is not None:
                    opts["cls"] = switch_cls
                self.addSwitch(name, **opts)
            for ln in topology.links():
                opts = {}
                if limit_bw:
                    opts["bw"] = ln.capacity
                if link_cls is not None:
                    opts["cls"] = link_cls
                for side, node, port in ((1, ln.a, ln.port_a), (2, ln.b, ln.port_b)):
                    if topology.is_host(node):
                        iface = topology.iface(node, port)
                        # The MAC must go in addrN: Link passes mac=addrN to the interface
                        # itself, so a "mac" in paramsN would be a duplicate argument.
                        opts[f"addr{side}"] = iface["mac"]
                        opts[f"params{side}"] = {"ip": f"{iface['ip']}/{iface['prefix']}"}
                self.addLink(ln.a, ln.b, port1=ln.port_a, port2=ln.port_b, **opts)

    return GradnetTopo
