"""Controller twin of ``p4src/include/link_emulation.p4`` (``MyEgress.link_emulation``):
per-port random loss (``link_loss``) and its ``link_emulation_drops`` counter. Every program
(forward, ina, ndn, nic, lan) has this block under the same name, so this class drives them all."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from controller.p4runtime import ControlBlock, DeployError, SwitchSession
from topologies.spec import SpecError, check_loss_rate


def loss_threshold(p: float) -> int:
    """The ``set_loss_rate`` threshold for loss probability ``p``: ``round(p * 2^32)``,
    capped at ``2^32 - 1`` (so ``p = 1`` drops all but one packet in 2^32)."""
    try:
        check_loss_rate(p)
    except SpecError as e:
        raise DeployError(str(e)) from None
    return min(round(p * 2**32), 2**32 - 1)


class LinkEmulation(ControlBlock):
    """``LinkEmulation`` (egress): per-port random loss, and its drop counter."""

    CONTROL = "MyEgress.link_emulation"
    TABLES = ("link_loss",)
    ACTIONS = ("set_loss_rate", "no_loss")
    COUNTERS = ("link_emulation_drops",)

    def loss_entry(self, port: int, p: float) -> Any:
        """The ``link_loss`` entry of ``port`` (``no_loss`` when ``p`` is 0)."""
        key = {"standard_metadata.egress_port": port}
        t = loss_threshold(p)
        if t == 0:
            return self.entry("link_loss", key, "no_loss")
        return self.entry("link_loss", key, "set_loss_rate", drop_threshold=t)

    async def read_drops(
        self, session: SwitchSession, ports: Iterable[int] | None = None
    ) -> dict[int, int]:
        """``{port: packets dropped by emulated loss}`` (every port with a nonzero count
        when ``ports`` is None)."""
        cells = await session.read_counter(self.name("link_emulation_drops"), ports)
        if ports is None:
            return {i: p for i, (p, _) in sorted(cells.items()) if p}
        return {i: p for i, (p, _) in sorted(cells.items())}
