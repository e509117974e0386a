"""Token-passing gradient broadcast (token): the controller twins of
``p4src/include/token_*.p4`` (NIC and LAN), the deployment and the ``gradctl token``
group.

* one module per P4 control block, named after its ``p4src/include`` file:
  :mod:`.membership`, :mod:`.accumulator`, :mod:`.lan`;
* :mod:`controller.token.deployment` -- the job/deployment that ties the twins together;
* :mod:`controller.token.cli` -- ``gradctl token ...``.
"""

from controller.token.accumulator import (
    ACC_DROPS,
    ACC_EVENTS,
    TokenAccumulator,
)
from controller.token.deployment import (
    LAN_PROGRAM,
    MAX_NODES,
    NIC_BOTH_PORTS_GROUP,
    NIC_HOST_PORT,
    NIC_LAN_PORT,
    NIC_PROGRAM,
    TokenCounters,
    TokenDeployment,
    token_lan,
)
from controller.token.lan import (
    LanSwitch,
)
from controller.token.membership import (
    MEMBER_DROPS,
    MEMBER_EVENTS,
    TokenMembership,
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
