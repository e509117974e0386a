"""Controller twin of ``p4src/include/ina_result_fanout.p4`` (``MyEgress.result_fanout``): the RESULT
multicast tree's per-worker rewrites at its leaves (one replica id per worker)."""

from __future__ import annotations

from typing import Any

from controller.ina.aggregator import _ip_int
from controller.p4runtime import ControlBlock


class ResultFanout(ControlBlock):
    """``ResultFanout`` (egress, ``ina_result_fanout.p4``, in both programs): a multicast
    replica toward a worker becomes a unicast to it."""

    CONTROL = "MyEgress.result_fanout"
    TABLES = ("ina_result_fanout",)
    ACTIONS = ("set_worker_destination",)

    def fanout_entries(self, job_id: int, workers: list[tuple[int, str, str]]) -> list[Any]:
        """INSERTs ``rid (job·256 + rank) -> set_worker_destination(ip, mac)`` for
        ``(rank, ip, mac)`` of the workers attached to this switch."""
        return [
            +self.entry("ina_result_fanout", {"standard_metadata.egress_rid": result_rid(job_id, rank)},
                        "set_worker_destination", worker_ip=_ip_int(ip), worker_mac=mac)
            for rank, ip, mac in workers
        ]


def result_address(job_id: int) -> str:
    """The address a job's RESULTs carry down its multicast tree: ``10.254.0.<job>``."""
    return f"10.254.0.{job_id}"


def result_rid(job_id: int, rank: int) -> int:
    """Replication id of the RESULT replica for ``rank`` of ``job_id``."""
    return job_id * 256 + rank
