"""NDN parameter server (ndn): the controller twins of
``p4src/include/ndn_*.p4``, the persistent-PIT manager, the deployment and the ``gradctl
ndn`` group.

* one module per P4 control block, named after its ``p4src/include`` file:
  :mod:`.fib`, :mod:`.nonce`, :mod:`.pit`, :mod:`.persistent_pit`, :mod:`.sub_admission`,
  :mod:`.drops`;
* :mod:`controller.ndn.deployment` -- the job/deployment that ties the twins together;
* :mod:`controller.ndn.cli` -- ``gradctl ndn ...``.
"""

from controller.ndn.deployment import (
    MAX_COMPONENT,
    MAX_DEPTH,
    MAX_NAME_BYTES,
    NDN_PROGRAM,
    NameBoundsError,
    NdnDeployment,
    check_name,
    components,
    prefix_hash,
    read_switch_state,
)
from controller.ndn.drops import (
    NDN_DROP_REASONS,
    NDN_EVENTS,
    NdnDrops,
)
from controller.ndn.fib import (
    NdnFib,
    fib_routes,
)
from controller.ndn.nonce import NdnNonce
from controller.ndn.persistent_pit import (
    OUT_VIA_PIPELINE,
    PERSISTENT,
    PERSISTENT_GROUP_BASE,
    SUBSCRIPTION_LIFETIME,
    SUBSCRIPTION_MODES,
    PersistentEntry,
    PersistentPit,
    PersistentPitManager,
    read_persistent_pit,
)
from controller.ndn.pit import (
    PIT_PORTS,
    TransientPit,
    subset_groups_count,
)
from controller.ndn.sub_admission import NdnJob, NdnSubAdmission

__all__ = [
    "NdnJob",
    "NdnSubAdmission",
    "check_name",
    "components",
    "fib_routes",
    "MAX_COMPONENT",
    "MAX_DEPTH",
    "MAX_NAME_BYTES",
    "NameBoundsError",
    "NDN_DROP_REASONS",
    "NDN_EVENTS",
    "NDN_PROGRAM",
    "NdnDeployment",
    "NdnDrops",
    "NdnFib",
    "NdnNonce",
    "OUT_VIA_PIPELINE",
    "PERSISTENT",
    "PERSISTENT_GROUP_BASE",
    "PersistentEntry",
    "PersistentPit",
    "PersistentPitManager",
    "PIT_PORTS",
    "prefix_hash",
    "read_persistent_pit",
    "read_switch_state",
    "subset_groups_count",
    "SUBSCRIPTION_LIFETIME",
    "SUBSCRIPTION_MODES",
    "TransientPit",
]
