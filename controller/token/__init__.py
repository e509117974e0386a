"""Token-passing gradient broadcast (technique 5, seed 004): the controller twins of ``p4src/include/token_*.p4`` (NIC and LAN), the deployment and the ``gradctl token`` group.

* :mod:`controller.token.deployment` -- the twins and the deployment;
* :mod:`controller.token.cli` -- ``gradctl token ...``.
"""

from controller.token.deployment import (
    ACC_DROPS,
    ACC_EVENTS,
    LAN_PROGRAM,
    MAX_NODES,
    MEMBER_DROPS,
    MEMBER_EVENTS,
    NIC_BOTH_PORTS_GROUP,
    NIC_HOST_PORT,
    NIC_LAN_PORT,
    NIC_PROGRAM,
    LanSwitch,
    TokenAccumulator,
    TokenCounters,
    TokenDeployment,
    TokenMembership,
    token_lan,
)

__all__ = [
    "ACC_DROPS",
    "ACC_EVENTS",
    "LAN_PROGRAM",
    "LanSwitch",
    "MAX_NODES",
    "MEMBER_DROPS",
    "MEMBER_EVENTS",
    "NIC_BOTH_PORTS_GROUP",
    "NIC_HOST_PORT",
    "NIC_LAN_PORT",
    "NIC_PROGRAM",
    "token_lan",
    "TokenAccumulator",
    "TokenCounters",
    "TokenDeployment",
    "TokenMembership",
]
