"""Controller twin of ``p4src/include/token_membership.p4`` (the NIC's roster, token and
lost-node detection): its drop and event counters by name."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from controller.p4runtime import (
    ControlBlock,
    SwitchSession,
)

MEMBER_DROPS = {1: "malformed", 2: "non_member", 3: "formation_closed", 4: "local_on_lan",
                5: "unknown_type", 6: "formation_source", 7: "host_token", 8: "lost_tie",
                9: "tagged"}


MEMBER_EVENTS = {0: "config", 1: "roster", 2: "token", 3: "tick", 4: "resend_due",
                 5: "lost_sent", 6: "lost_seen", 7: "rejoin", 8: "forwarded"}


def _named(cells: Mapping[int, tuple[int, int]], names: Mapping[int, str]) -> dict[str, int]:
    return {name: cells.get(i, (0, 0))[0] for i, name in names.items()}


class TokenMembership(ControlBlock):
    """``TokenMembership`` (NIC ingress): formation, member list, watchdog; counters."""

    CONTROL = "NicIngress.membership"
    TABLES = ("formation_openers",)
    ACTIONS = ("opener", "any_opener", "not_opener")
    COUNTERS = ("member_drops", "member_events")

    def opener_entries(self, macs: Iterable[str]) -> list[Any]:
        """Who may open formation (the job's initiator): INSERTs ``source MAC -> opener``
        and the default turned to ``not_opener``, so a FORM_START or ROSTER from any other
        source is dropped as ``formation_source`` (without them: trust on first use)."""
        return [+self.entry("formation_openers", {"hdr.ethernet.src_addr": mac}, "opener")
                for mac in sorted(set(macs))] + [
            ~self.default_entry("formation_openers", "not_opener")]

    async def read(self, session: SwitchSession) -> dict[str, dict[str, int]]:
        """``{"drops": {reason: n}, "events": {event: n}}``."""
        drops = await session.read_counter(self.name("member_drops"))
        events = await session.read_counter(self.name("member_events"))
        return {"drops": _named(drops, MEMBER_DROPS), "events": _named(events, MEMBER_EVENTS)}
