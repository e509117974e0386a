"""Controller twin of ``p4src/include/priority.p4`` (``MyIngress.priority_classifier``): DSCP
-> egress queue priority (``dscp_priority``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.p4runtime import ControlBlock, DeployError


class PriorityClassifier(ControlBlock):
    """``PriorityClassifier`` (ingress): DSCP -> egress queue priority."""

    CONTROL = "MyIngress.priority_classifier"
    TABLES = ("dscp_priority",)
    ACTIONS = ("set_priority",)

    def dscp_entries(self, rules: Mapping[int, int]) -> list[Any]:
        """INSERT updates ``DSCP -> set_priority(prio)`` (ECN bits masked out)."""
        updates = []
        for dscp, prio in sorted(rules.items()):
            if not (isinstance(dscp, int) and 0 <= dscp < 64):
                raise DeployError(f"DSCP must be an int in 0..63, got {dscp!r}")
            if not (isinstance(prio, int) and 0 <= prio < 8):
                raise DeployError(f"priority must be an int in 0..7, got {prio!r}")
            updates.append(+self.entry(
                "dscp_priority", {"hdr.ipv4.diffserv": f"{dscp << 2:#04x}/&0xfc"},
                "set_priority", priority=1, prio=prio,
            ))
        return updates
