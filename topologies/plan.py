"""Ports, names and the address plan of the topology model (:mod:`topologies.base`).

Address plan: NIC ``n`` of the host with index ``i`` gets ``10.n.x.y`` with
``x = (i - 1) // 254`` and ``y = (i - 1) % 254 + 1`` (so ``h1`` is ``10.0.0.1``, ``h254``
is ``10.0.0.254``, ``h255`` is ``10.0.1.1``; no address ends in .0 or .255). NIC 0 uses
prefix /8 (every host is on-link for 10.0.0.0/8), NIC n >= 1 uses /16 (the BCube level-n
subnet 10.n.0.0/16). The MAC is ``00:00`` followed by the four address bytes.
"""

from __future__ import annotations

import ipaddress
import math
import re
from typing import Any, NamedTuple

#: P4 switch data ports are 1..MAX_PORT except CPU_PORT (v1model drop port is 511).
CPU_PORT = 255
DROP_PORT = 511
MAX_PORT = 510
#: Linux IFNAMSIZ minus the terminating NUL.
MAX_IFNAME = 15
#: Default link capacity in Mbit/s when neither the builder nor the link gives one.
DEFAULT_BW = 100.0
#: P4Runtime port of the switch with device_id 1 (simple_switch_grpc's default).
GRPC_BASE_PORT = 50051
#: Hosts addressable per NIC subnet: 256 values of x times 254 values of y.
MAX_HOSTS = 256 * 254

HOST_KIND = "host"
SWITCH_KIND = "switch"

_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
# Attributes the model manages itself; free-form attributes may not shadow them.
RESERVED_NODE_ATTRS = frozenset({"kind", "role", "device_id", "grpc_port", "index", "ifaces"})


class TopologyError(ValueError):
    """A topology is invalid, or a name or port does not exist in it.

    ``field`` names the offending part (``"links[3].bw"``), ``line`` is the 1-based line
    in the source file when known, ``source`` the file name; all three are also folded
    into the message as ``source:line: field: reason``.
    """

    def __init__(
        self,
        reason: str,
        *,
        field: str | None = None,
        line: int | None = None,
        source: str | None = None,
    ) -> None:
        self.reason = reason
        self.field = field
        self.line = line
        self.source = source
        prefix = ""
        if source:
            prefix = f"{source}:{line}: " if line else f"{source}: "
        elif line:
            prefix = f"line {line}: "
        if field:
            prefix += f"{field}: "
        super().__init__(prefix + reason)


class Link(NamedTuple):
    """One link as yielded by :meth:`Topology.links`; ``a`` is the node named first."""

    a: str
    port_a: int
    b: str
    port_b: int
    capacity: float


# ----------------------------------------------------------------------------- helpers


def check_name(name: Any, what: str = "node name") -> str:
    """Return ``name`` if it is a usable node name, else raise :class:`TopologyError`."""
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise TopologyError(
            f"invalid {what} {name!r}: use a letter followed by letters, digits or '_'"
        )
    return name


def check_bw(bw: Any, field: str = "bw") -> float:
    """Return ``bw`` as a float capacity in Mbit/s; it must be a finite number > 0."""
    if isinstance(bw, bool) or not isinstance(bw, (int, float)):
        raise TopologyError(f"must be a number of Mbit/s, got {bw!r}", field=field)
    if not math.isfinite(bw) or bw <= 0:
        raise TopologyError(f"must be a positive number of Mbit/s, got {bw!r}", field=field)
    return float(bw)


def host_address(index: int, nic: int = 0) -> str:
    """Default IPv4 address of NIC ``nic`` of the host with 1-based ``index``."""
    if not 1 <= index <= MAX_HOSTS:
        raise TopologyError(f"host index {index} outside 1..{MAX_HOSTS} (address plan)")
    if not 0 <= nic <= 255:
        raise TopologyError(f"NIC index {nic} outside 0..255 (address plan)")
    x, y = divmod(index - 1, 254)
    return f"10.{nic}.{x}.{y + 1}"


def mac_for_ip(ip: str) -> str:
    """MAC derived from an IPv4 address: ``10.0.0.1`` -> ``00:00:0a:00:00:01``."""
    return "00:00:" + ":".join(f"{b:02x}" for b in ipaddress.IPv4Address(ip).packed)


def iface_name(node: str, port: int) -> str:
    """Linux interface name of ``port`` on ``node`` (Mininet's convention)."""
    return f"{node}-eth{port}"


def _nic_prefix(nic: int) -> int:
    return 8 if nic == 0 else 16


def _check_ip(ip: Any, field: str) -> str:
    try:
        addr = ipaddress.IPv4Address(ip)
    except (ipaddress.AddressValueError, ValueError, TypeError):
        raise TopologyError(f"invalid IPv4 address {ip!r}", field=field) from None
    if addr not in ipaddress.IPv4Network("10.0.0.0/8"):
        raise TopologyError(f"address {ip} is outside 10.0.0.0/8", field=field)
    last = addr.packed[3]
    if last in (0, 255):
        raise TopologyError(f"address {ip} ends in .{last}", field=field)
    return str(addr)
