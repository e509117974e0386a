"""Differentiated transmission (differentiated): egress priority queues (the
runtime-CLI side of ``p4src/include/priority.p4``'s classes) and the ``gradctl qos``
group.

* :mod:`controller.qos.deployment` -- the twins and the deployment;
* :mod:`controller.qos.cli` -- ``gradctl qos ...``.
"""

from controller.qos.deployment import (
    SIMPLE_SWITCH_CLI,
    Bmv2Runtime,
    EgressQueues,
    EmbeddedRuntime,
    QosError,
    QueueStats,
    read_dscp_map,
    runtime_for,
    set_dscp_map,
    static_partition,
)

__all__ = [
    "Bmv2Runtime",
    "EgressQueues",
    "EmbeddedRuntime",
    "QosError",
    "QueueStats",
    "read_dscp_map",
    "runtime_for",
    "set_dscp_map",
    "SIMPLE_SWITCH_CLI",
    "static_partition",
]
