"""Controller twins of ``p4src/forward.p4``'s control blocks, one module per block (named
after its ``p4src/include`` file), each class owning that block's tables and counters:

==================== ================================== ====================================
class                P4 control instance                tables / counters
==================== ================================== ====================================
Forwarding           ``MyIngress.forwarding``           ``ipv4_routes``, ``ecmp_members``,
                                                        ``ecmp_salt``; ``ingress_drops``
PriorityClassifier   ``MyIngress.priority_classifier``  ``dscp_priority``
LinkEmulation        ``MyEgress.link_emulation``        ``link_loss``; ``link_emulation_drops``
PortMacs             ``MyEgress.mac_rewrite``           ``port_macs``
SourceGuard          ``MyIngress.source_guard``         ``source_bindings`` (drops counted
                                                        in ``ingress_drops``)
==================== ================================== ====================================

Programs of later techniques include the same controls, so their deployments reuse these
classes unchanged; :mod:`controller.deploy` ties them together for a whole network.
"""

from .forwarding import DROP_REASONS, Forwarding
from .link_emulation import LinkEmulation, loss_threshold
from .port_macs import PortMacs
from .priority import PriorityClassifier
from .source_guard import SourceGuard

__all__ = ["DROP_REASONS", "Forwarding", "LinkEmulation", "PortMacs", "PriorityClassifier",
           "SourceGuard", "loss_threshold"]
