"""Controller twin of ``p4src/include/port_macs.p4`` (``MyEgress.mac_rewrite``): each egress
port's source MAC (``port_macs``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.p4runtime import ControlBlock


class PortMacs(ControlBlock):
    """``PortMacs`` (egress): each port's source MAC."""

    CONTROL = "MyEgress.mac_rewrite"
    TABLES = ("port_macs",)
    ACTIONS = ("set_source_mac",)

    def mac_entries(self, macs: Mapping[int, str]) -> list[Any]:
        """INSERT updates ``port -> set_source_mac(mac)``."""
        return [
            +self.entry("port_macs", {"standard_metadata.egress_port": port},
                        "set_source_mac", smac=mac)
            for port, mac in sorted(macs.items())
        ]
