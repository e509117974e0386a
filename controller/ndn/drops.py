"""Controller twin of ``p4src/include/ndn_drops.p4`` (``MyIngress.drops``): every NDN packet the
switch drops, by reason, and the forwarding events."""

from __future__ import annotations

from collections.abc import Mapping

from controller.p4runtime import ControlBlock

# The name bounds live with the agents that must respect them (and stay light to import).

#: Index of ``ndn_drops`` -> reason (``NDN_DROP_*``).
NDN_DROP_REASONS = {1: "not_ndn", 2: "length_form", 3: "malformed", 4: "name_too_long",
                    5: "name_too_deep", 6: "component_too_long", 7: "no_route",
                    8: "unsolicited_data", 9: "no_subscribers", 10: "port_range",
                    11: "parser_error", 12: "bad_marker", 13: "not_upstream",
                    14: "duplicate_nonce", 15: "pit_expired", 16: "subscription_collision",
                    17: "subscription_not_member", 18: "subscription_unknown_job",
                    19: "pit_budget", 20: "data_not_upstream"}


#: Index of ``ndn_events`` -> what the switch did (``NDN_EV_*``).
NDN_EVENTS = {1: "forwarded", 2: "aggregated", 3: "pit_hit", 4: "punted", 5: "distributed",
              6: "packet_out", 7: "subscribed", 8: "unsubscribed"}


class NdnDrops(ControlBlock):
    """``NdnDrops`` (ingress): drops by reason and forwarding events by kind."""

    CONTROL = "MyIngress.drops"
    COUNTERS = ("ndn_drops", "ndn_events")

    @staticmethod
    def decode(cells: Mapping[int, tuple[int, int]], names: Mapping[int, str]) -> dict[str, int]:
        """``{name: packets}`` of the nonzero cells."""
        return {names.get(i, f"reason{i}"): p for i, (p, _) in sorted(cells.items()) if p}
