"""NDN parameter server (technique 2, seed 000): the controller twins of ``p4src/include/ndn_*.p4``, the persistent-PIT manager, the deployment and the ``gradctl ndn`` group.

* :mod:`controller.ndn.deployment` -- the twins and the deployment;
* :mod:`controller.ndn.cli` -- ``gradctl ndn ...``.
"""

from controller.ndn.deployment import (
    MAX_COMPONENT,
    MAX_DEPTH,
    MAX_NAME_BYTES,
    NDN_DROP_REASONS,
    NDN_EVENTS,
    NDN_PROGRAM,
    PERSISTENT_GROUP_BASE,
    PIT_PORTS,
    NameBoundsError,
    NdnDeployment,
    NdnDrops,
    NdnFib,
    PersistentEntry,
    PersistentPit,
    PersistentPitManager,
    TransientPit,
    check_name,
    components,
    fib_routes,
    prefix_hash,
    read_persistent_pit,
    read_switch_state,
    subset_groups_count,
)

__all__ = [
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
    "PERSISTENT_GROUP_BASE",
    "PersistentEntry",
    "PersistentPit",
    "PersistentPitManager",
    "PIT_PORTS",
    "prefix_hash",
    "read_persistent_pit",
    "read_switch_state",
    "subset_groups_count",
    "TransientPit",
]
