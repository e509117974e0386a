"""BCube hierarchical synchronization, BML (bcube): BCube and fat-tree
plans (which server reduces what at which level), the line-rate model, and the ``gradctl
bcube`` group; :mod:`experiments.schemes` runs a plan's agents.

* :mod:`controller.bcube.deployment` -- the twins and the deployment;
* :mod:`controller.bcube.cli` -- ``gradctl bcube ...``.
"""

from controller.bcube.deployment import (
    AGENTS,
    MAX_SCALE_BITS,
    RAIL_FABRICS,
    SCHEMES,
    WIRE_PER_PAYLOAD,
    baseline_fat_tree,
    baseline_rails,
    bcube_network_topology,
    bcube_plan,
    bcube_shape,
    choose_scale_bits,
    exact_sum,
    fat_tree_plan,
    gradients,
    line_rate_model,
    nic_payload_bytes,
    rail_plan,
)

__all__ = [
    "AGENTS",
    "baseline_fat_tree",
    "baseline_rails",
    "bcube_network_topology",
    "bcube_shape",
    "bcube_plan",
    "choose_scale_bits",
    "exact_sum",
    "fat_tree_plan",
    "gradients",
    "line_rate_model",
    "MAX_SCALE_BITS",
    "nic_payload_bytes",
    "RAIL_FABRICS",
    "rail_plan",
    "SCHEMES",
    "WIRE_PER_PAYLOAD",
]
