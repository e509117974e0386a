"""In-network aggregation (technique 1, seed 002): the controller twins of ``p4src/include/aggregator.p4`` and ``result_fanout.p4``, the job and its deployment, and the ``gradctl ina`` group.

* :mod:`controller.ina.deployment` -- the twins and the deployment;
* :mod:`controller.ina.cli` -- ``gradctl ina ...``.
"""

from controller.ina.deployment import (
    INA_PROGRAM,
    MAX_WORKERS,
    Aggregator,
    InaDeployment,
    InaJob,
    ResultFanout,
    result_address,
    result_rid,
    switch_ip,
)

__all__ = [
    "Aggregator",
    "INA_PROGRAM",
    "InaDeployment",
    "InaJob",
    "MAX_WORKERS",
    "result_address",
    "result_rid",
    "ResultFanout",
    "switch_ip",
]
