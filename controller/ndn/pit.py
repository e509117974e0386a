"""Controller twin of ``p4src/include/ndn_pit.p4`` (``MyIngress.pit``): the transient PIT's
configuration and the multicast groups of its per-port subsets."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

from controller.p4runtime import ControlBlock, DeployError, multicast_group

# The name bounds live with the agents that must respect them (and stay light to import).
from topologies.base import Topology

#: In-ports a transient PIT entry records (bitmap of ports 1..8).
PIT_PORTS = 8


class TransientPit(ControlBlock):
    """``TransientPit`` (ingress): the longest PIT entry lifetime (an Interest's own
    InterestLifetime is used up to it), one multicast group per subset of the switch's
    ports (group id = the PIT entry's port bitmap; the data-plane persistent PIT uses the
    same groups), and ``pit_expired``, the entries found expired when a packet touched
    them."""

    CONTROL = "MyIngress.pit"
    TABLES = ("pit_config", "pit_port_budget")
    ACTIONS = ("set_lifetime", "limit")
    COUNTERS = ("pit_expired",)

    def lifetime_entry(self, seconds: float) -> Any:
        """MODIFY of ``pit_config``'s default: the longest entry lifetime, in microseconds."""
        if not 0 < seconds < 3600:
            raise DeployError(f"PIT lifetime must be in (0, 3600) s, got {seconds!r}")
        return ~self.default_entry("pit_config", "set_lifetime", microseconds=int(seconds * 1e6))

    def budget_entry(self, port: int, per_second: int) -> Any:
        """INSERT ``port -> limit(per_second)``: Interests from ``port`` may start at most
        ``per_second`` PIT entries a second (docs/trust.md, "Per-switch state ...")."""
        if not 1 <= port <= PIT_PORTS:
            raise DeployError(f"a PIT budget needs a port in 1..{PIT_PORTS}, got {port}")
        if not 0 <= per_second < 2**32:
            raise DeployError(f"PIT budget must be in 0..2^32-1 entries a second, got {per_second}")
        return +self.entry("pit_port_budget", {"meta.in_port": port}, "limit", per_second=per_second)

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


def subset_groups_count(topo: Topology, switch: str) -> int:
    """How many PIT port-subset groups ``switch`` gets."""
    n = sum(1 for p in topo.ports(switch) if 1 <= p <= PIT_PORTS)
    return 2**n - 1
