"""Network topologies for gradnet experiments (see docs/ARCHITECTURE.md, README.md here)."""

from .base import (
    CPU_PORT,
    DEFAULT_BW,
    GRPC_BASE_PORT,
    Link,
    Topology,
    TopologyError,
    host_address,
    mac_for_ip,
)
from .builders import (
    BUILDERS,
    bcube,
    fat_tree,
    leaf_spine,
    linear,
    rail_fat_tree,
    rail_leaf_spine,
    star,
)
from .fileformat import load, loads

__all__ = [
    "BUILDERS",
    "CPU_PORT",
    "DEFAULT_BW",
    "GRPC_BASE_PORT",
    "Link",
    "Topology",
    "TopologyError",
    "bcube",
    "fat_tree",
    "host_address",
    "leaf_spine",
    "linear",
    "load",
    "loads",
    "mac_for_ip",
    "rail_fat_tree",
    "rail_leaf_spine",
    "star",
]
