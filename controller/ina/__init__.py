"""In-network aggregation (ina): the controller twins of
``p4src/include/ina_admission.p4``, ``ina_aggregator.p4`` and ``ina_result_fanout.p4``, the job and its deployment,
and the ``gradctl ina`` group.

* one module per P4 control block, named after its ``p4src/include`` file:
  :mod:`.admission`, :mod:`.aggregator`, :mod:`.result_fanout`;
* :mod:`controller.ina.deployment` -- the job/deployment that ties the twins together;
* :mod:`controller.ina.cli` -- ``gradctl ina ...``.
"""

from controller.ina.admission import (
    ADMISSION_DROPS,
    REFUSED_DROPS,
    UNPARSED_DROPS,
    InaAdmission,
)
from controller.ina.aggregator import (
    Aggregator,
    switch_ip,
)
from controller.ina.deployment import (
    INA_PROGRAM,
    MAX_WORKERS,
    InaDeployment,
    InaJob,
    ina_program_path,
)
from controller.ina.result_fanout import (
    ResultFanout,
    result_address,
    result_rid,
)

__all__ = [
    "ADMISSION_DROPS",
    "InaAdmission",
    "Aggregator",
    "INA_PROGRAM",
    "InaDeployment",
    "InaJob",
    "ina_program_path",
    "MAX_WORKERS",
    "result_address",
    "result_rid",
    "REFUSED_DROPS",
    "ResultFanout",
    "switch_ip",
    "UNPARSED_DROPS",
]
