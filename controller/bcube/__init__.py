"""BCube hierarchical synchronization, BML (technique 4, seed 003): BCube and fat-tree plans, the line-rate model, running a scheme's agents, and the ``gradctl bcube`` group.

* :mod:`controller.bcube.deployment` -- the twins and the deployment;
* :mod:`controller.bcube.cli` -- ``gradctl bcube ...``.
"""

from controller.bcube.deployment import (
    AGENTS,
    MAX_SCALE_BITS,
    SCHEMES,
    WIRE_PER_PAYLOAD,
    SchemeResult,
    baseline_fat_tree,
    bcube_network_topology,
    bcube_plan,
    choose_scale_bits,
    exact_sum,
    fat_tree_plan,
    gradients,
    host_sent_bytes,
    line_rate_model,
    nic_payload_bytes,
    run_scheme,
    switch_port_bytes,
)

__all__ = [
    "AGENTS",
    "baseline_fat_tree",
    "bcube_network_topology",
    "bcube_plan",
    "choose_scale_bits",
    "exact_sum",
    "fat_tree_plan",
    "gradients",
    "host_sent_bytes",
    "line_rate_model",
    "MAX_SCALE_BITS",
    "nic_payload_bytes",
    "run_scheme",
    "SchemeResult",
    "SCHEMES",
    "switch_port_bytes",
    "WIRE_PER_PAYLOAD",
]
