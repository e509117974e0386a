"""Controller twin of ``p4src/include/token_lan.p4`` (``lan.p4``: the LAN switch that broadcasts
token frames to every NIC)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.p4runtime import (
    ControlBlock,
    SwitchSession,
    multicast_group,
)


class LanSwitch(ControlBlock):
    """``LanSwitch`` (LAN switch ingress): MAC table and flood groups."""

    CONTROL = "LanIngress.lan"
    TABLES = ("l2_forward", "port_sources")
    ACTIONS = ("forward", "flood", "source_ok", "any_source", "wrong_source")
    COUNTERS = ("lan_frames", "lan_hairpin_drops", "lan_source_drops")

    def mac_entries(self, macs: Mapping[str, int]) -> list[Any]:
        """INSERTs ``dst MAC -> forward(port)``."""
        return [+self.entry("l2_forward", {"hdr.ethernet.dst_addr": mac}, "forward", port=port)
                for mac, port in sorted(macs.items())]

    def source_entries(self, macs: Mapping[str, int]) -> list[Any]:
        """Port security: INSERTs ``(port, source MAC) -> source_ok`` for the MAC behind
        each port, then the default turned to ``wrong_source`` (drop and count), so a
        frame from any other source on a port is refused."""
        return [+self.entry("port_sources", {"standard_metadata.ingress_port": port,
                                             "hdr.ethernet.src_addr": mac}, "source_ok")
                for mac, port in sorted(macs.items())] + [
            ~self.default_entry("port_sources", "wrong_source")]

    async def read_source_drops(self, session: SwitchSession, ports: list[int]) -> dict[int, int]:
        """Frames refused per port for a source MAC that is not the port's."""
        cells = await session.read_counter(self.name("lan_source_drops"), ports)
        return {p: cells.get(p, (0, 0))[0] for p in ports}

    @staticmethod
    def flood_groups(ports: list[int]) -> list[Any]:
        """Multicast group ``p`` = every port but ``p``, for each port ``p`` (none for a
        LAN of one port: a group needs a port, and the flood has nowhere to go)."""
        return [+multicast_group(p, [q for q in ports if q != p]) for p in ports if len(ports) > 1]

    async def read_frames(self, session: SwitchSession, ports: list[int]) -> dict[int, int]:
        """Frames received per port."""
        cells = await session.read_counter(self.name("lan_frames"), ports)
        return {p: cells.get(p, (0, 0))[0] for p in ports}
