"""Controller twin of ``p4src/include/ndn_nonce.p4`` (``MyIngress.nonce``): Interest nonces
kept in registers for duplicate and loop suppression. The data plane manages them alone
(BMv2's P4Runtime cannot read registers); what the controller sees is the
``duplicate_nonce`` drop counter of :class:`controller.ndn.drops.NdnDrops`."""

from __future__ import annotations

from controller.p4runtime import ControlBlock


class NdnNonce(ControlBlock):
    """``NdnNonce`` (ingress): no tables; its drops are counted by ``NdnDrops``."""

    CONTROL = "MyIngress.nonce"
