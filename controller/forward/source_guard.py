"""Controller twin of ``p4src/include/source_guard.p4`` (``MyIngress.source_guard``): every
host-facing port bound to the MAC and IPv4 address of the host interface behind it
(docs/trust.md, "IP: source addresses bound to ports").

The plan comes from the topology alone (it names every host interface and the switch
port it is attached to), so every deployment that installs routes installs it too
(:meth:`controller.deploy.Deployment.install`). A frame from a host port with another
source MAC or IPv4 address is dropped and counted in ``ingress_drops`` as ``src_spoof``;
switch-facing ports are exempt; with the guard on (``unknown_port`` as the default) a
port the topology does not know accepts nothing.
"""

from __future__ import annotations

from typing import Any

from controller.p4runtime import ControlBlock, DeployError
from topologies.base import Topology


class SourceGuard(ControlBlock):
    """``SourceGuard`` (ingress, before forwarding): ``source_bindings``."""

    CONTROL = "MyIngress.source_guard"
    TABLES = ("source_bindings",)
    ACTIONS = ("host_port", "fabric_port", "unknown_port")

    def host_entry(self, port: int, mac: str, ip: str) -> Any:
        """INSERT ``port -> host_port(mac, ip)``: only this source on ``port``."""
        return +self.entry("source_bindings", {"standard_metadata.ingress_port": port},
                           "host_port", mac=mac, ip=ip)

    def fabric(self, port: int) -> Any:
        """The entry ``port -> fabric_port`` (a switch-facing port, not checked), to
        INSERT (``+``) or MODIFY (``~``)."""
        return self.entry("source_bindings", {"standard_metadata.ingress_port": port}, "fabric_port")

    def fabric_entry(self, port: int) -> Any:
        """INSERT ``port -> fabric_port``."""
        return +self.fabric(port)

    def guard_entry(self, on: bool = True) -> Any:
        """MODIFY of the default: ``unknown_port`` (guarded) or ``fabric_port`` (open)."""
        return ~self.default_entry("source_bindings", "unknown_port" if on else "fabric_port")

    def bindings(self, topo: Topology, switch: str) -> dict[int, tuple[str, str] | None]:
        """``{port: (mac, ip)}`` of ``switch``'s host ports, ``None`` for switch-facing ones."""
        out: dict[int, tuple[str, str] | None] = {}
        for port, peer in topo.ports(switch).items():
            if topo.is_switch(peer):
                out[port] = None
                continue
            iface = topo.iface(peer, topo.port(peer, switch))
            out[port] = (iface["mac"], iface["ip"])
        size = self.table_size("source_bindings")
        if size and len(out) > size:
            raise DeployError(f"{switch}: {len(out)} ports do not fit "
                              f"{self.name('source_bindings')} (size {size})")
        return out

    def plan(self, topo: Topology, switch: str) -> list[Any]:
        """The guard on ``switch``: every port bound or exempt, the default refusing."""
        updates = [self.fabric_entry(p) if b is None else self.host_entry(p, *b)
                   for p, b in self.bindings(topo, switch).items()]
        return [*updates, self.guard_entry(True)]
