"""Controller twin of ``p4src/include/forwarding.p4`` (``MyIngress.forwarding``): /32 routes
and ECMP groups (``ipv4_routes``, ``ecmp_members``, ``ecmp_salt``), and the ``ingress_drops``
counter."""

from __future__ import annotations

from typing import Any

from controller.p4runtime import ControlBlock, DeployError, SwitchSession
from controller.routing import SwitchRoutes

#: Index of ``ingress_drops`` -> reason (``DROP_REASON_*`` in p4src/include/config.p4).
#: ``ip_options`` and ``ip_fragment``: IPv4 the parser did not read whole (docs/trust.md,
#: "IP: only what the switch parsed"), dropped on every port. ``src_spoof``: a source
#: MAC or IPv4 address not its host port's (``source_guard.p4``, decided before routing).
DROP_REASONS = {1: "parser_error", 2: "checksum_error", 3: "not_ipv4", 4: "ttl_expired",
                5: "no_route", 6: "ip_options", 7: "ip_fragment", 8: "src_spoof"}


class Forwarding(ControlBlock):
    """``Forwarding`` (ingress): /32 routes, ECMP groups, drop counters."""

    CONTROL = "MyIngress.forwarding"
    TABLES = ("ipv4_routes", "ecmp_members", "ecmp_salt")
    ACTIONS = ("set_next_hop", "set_ecmp_group", "drop", "set_ecmp_salt")
    COUNTERS = ("ingress_drops",)

    def route_entries(self, routes: SwitchRoutes) -> list[Any]:
        """INSERT updates for every route and every ECMP group member of one switch.

        Raises :class:`DeployError` when they do not fit the P4Info table sizes.
        """
        n_members = sum(g.size for g in routes.groups)
        for table, need in (("ipv4_routes", len(routes.routes)), ("ecmp_members", n_members)):
            size = self.table_size(table)
            if size and need > size:
                raise DeployError(
                    f"{routes.switch}: {need} entries do not fit {self.name(table)} "
                    f"(size {size})"
                )
        # A per-switch hash salt, so consecutive ECMP stages do not make the same
        # choice for a flow (which would leave half the fat-tree core idle).
        updates: list[Any] = [~self.default_entry("ecmp_salt", "set_ecmp_salt", salt=routes.device_id & 0xFFFF)]
        for g in routes.groups:
            for i, hop in enumerate(g.members):
                updates.append(+self.entry(
                    "ecmp_members",
                    {"meta.ecmp_group_id": g.group_id, "meta.ecmp_member_index": i},
                    "set_next_hop", dmac=hop.dmac, port=hop.port,
                ))
        for r in routes.routes:
            match = {"hdr.ipv4.dst_addr": r.prefix}
            if r.group_id is not None:
                size = routes.group(r.group_id).size
                updates.append(+self.entry("ipv4_routes", match, "set_ecmp_group",
                                           group_id=r.group_id, group_size=size))
            else:
                assert r.next_hop is not None
                updates.append(+self.entry("ipv4_routes", match, "set_next_hop",
                                           dmac=r.next_hop.dmac, port=r.next_hop.port))
        return updates

    async def read_drops(self, session: SwitchSession) -> dict[str, int]:
        """``{reason: packets}`` of ``ingress_drops`` (reasons without a name: ``reason<N>``)."""
        cells = await session.read_counter(self.name("ingress_drops"))
        return {DROP_REASONS.get(i, f"reason{i}"): p for i, (p, _) in sorted(cells.items()) if p}
