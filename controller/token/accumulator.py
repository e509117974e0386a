"""Controller twin of ``p4src/include/token_accumulator.p4`` (the NIC's gradient accumulator)."""

from __future__ import annotations

from controller.p4runtime import (
    ControlBlock,
    SwitchSession,
)
from controller.token.membership import _named

ACC_DROPS = {1: "stale", 2: "duplicate", 3: "bad_frag", 4: "not_holder", 5: "unasked"}


ACC_EVENTS = {0: "added", 1: "started", 2: "read", 3: "own", 4: "nack_gap", 5: "nack_tail",
              6: "repaired", 7: "nack_seen"}


class TokenAccumulator(ControlBlock):
    """``TokenAccumulator`` (NIC ingress): gradient sums and read-out; counters."""

    CONTROL = "NicIngress.accumulator"
    COUNTERS = ("acc_drops", "acc_events")

    async def read(self, session: SwitchSession) -> dict[str, dict[str, int]]:
        """``{"drops": {reason: n}, "events": {event: n}}``."""
        drops = await session.read_counter(self.name("acc_drops"))
        events = await session.read_counter(self.name("acc_events"))
        return {"drops": _named(drops, ACC_DROPS), "events": _named(events, ACC_EVENTS)}
