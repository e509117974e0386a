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
    TABLES = ("l2_forward",)
    ACTIONS = ("forward", "flood")
    COUNTERS = ("lan_frames", "lan_hairpin_drops")

    def mac_entries(self, macs: Mapping[str, int]) -> list[Any]:
        """INSERTs ``dst MAC -> forward(port)``."""
        return [+self.entry("l2_forward", {"hdr.ethernet.dst_addr": mac}, "forward", port=port)
                for mac, port in sorted(macs.items())]

    @staticmethod
    def flood_groups(ports: list[int]) -> list[Any]:
        """Multicast group ``p`` = every port but ``p``, for each port ``p`` (none for a
        LAN of one port: a group needs a port, and the flood has nowhere to go)."""
        return [+multicast_group(p, [q for q in ports if q != p]) for p in ports if len(ports) > 1]

    async def read_frames(self, session: SwitchSession, ports: list[int]) -> dict[int, int]:
        """Frames received per port."""
        cells = await session.read_counter(self.name("lan_frames"), ports)
        return {p: cells.get(p, (0, 0))[0] for p in ports}
