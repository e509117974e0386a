"""The INA jobs a held network runs, and what a job's policy file names.

A network started by ``gradctl net up`` keeps its deployed jobs in its run directory
(``DIR/ina-jobs.json``: for each job id, what ``gradctl ina deploy`` was given), so that a
later deploy or undeploy installs them all again in one pipeline load:
:func:`load_jobs`, :func:`save_jobs`, :func:`plan_job`. :func:`policy_switches` and
:func:`policy_edges` map a job's policy file back onto the topology (the switches that
aggregate for it, and those its hosts are attached to), for reading its counters.

Errors are :class:`DeployError` with a one-line message.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from controller.p4runtime import DeployError
from topologies import Topology, TopologyError
from wire.ina import INA_VALUES

__all__ = ["JOBS_FILE", "counter_job", "load_jobs", "plan_job", "policy_edges",
           "policy_switches", "save_jobs"]

JOBS_FILE = "ina-jobs.json"


def load_jobs(run_dir: str) -> dict[int, dict[str, Any]]:
    """The INA jobs deployed on a held network (``DIR/ina-jobs.json``), by job id: what
    ``ina deploy`` was given, so that a later deploy or undeploy installs them again."""
    path = Path(run_dir) / JOBS_FILE
    if not path.is_file():
        return {}
    try:
        return {int(j["job_id"]): j for j in json.loads(path.read_text())["jobs"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise DeployError(f"{path}: unreadable job list ({e})") from None


def save_jobs(run_dir: str, jobs: dict[int, dict[str, Any]]) -> None:
    """Record the jobs deployed on a held network (atomically: a reader never sees half)."""
    path = Path(run_dir) / JOBS_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"jobs": [jobs[k] for k in sorted(jobs)]}, indent=1))
    tmp.replace(path)


def plan_job(topo: Topology, spec: dict[str, Any]) -> Any:
    """The :class:`InaJob` of one recorded job ``spec`` (placement and policy planned again)."""
    from controller.ina.deployment import InaJob
    from controller.placement import PlacementError

    try:
        return InaJob.plan(topo, spec["ps"], spec["workers"], spec["budget"] or 0,
                           spec["capacity"] or 1.0, spec["values"], job_id=spec["job_id"],
                           scale_bits=spec["scale_bits"], aggregate=not spec["baseline"],
                           number_format=spec.get("number_format", "fixed"),
                           values_per_packet=spec.get("values_per_packet", INA_VALUES),
                           tor_in_budget=spec.get("tor_in_budget", False),
                           stamp=spec.get("stamp", 0))
    except (PlacementError, DeployError) as e:
        raise DeployError(f"job {spec['job_id']}: {e}") from None


def _load_policy(path: str) -> Any:
    from wire.ina_policy import Policy, PolicyError

    try:
        return Policy.load(path)
    except PolicyError as e:
        raise DeployError(f"--policy: {e}") from None


def policy_switches(topo: Topology, path: str) -> dict[str, str]:
    """``{switch: "S" | "s_d"}``: the aggregating switches a policy file names, by the
    topology's device ids (s_d last)."""
    pol = _load_policy(path)
    ids = set(pol.switch_ips) | {s for s, row in pol.fanin.items() if row.any()}
    ids |= {int(v) for v in set(pol.tags.ravel().tolist()) if v}
    sd = pol.sd.id if pol.sd is not None else None
    out: dict[str, str] = {}
    for i in sorted(ids - {sd}) + ([sd] if sd is not None else []):
        try:
            name = topo.switch_by_id(i)
        except TopologyError:
            raise DeployError(f"--policy {path}: switch id {i} is no switch of {topo.name} "
                              "(was the policy written for another topology?)") from None
        out[name] = "s_d" if i == sd else "S"
    return out


def policy_edges(topo: Topology, path: str) -> list[str]:
    """The first switches of a policy's PS and workers: where admission (docs/trust.md)
    holds the job's members."""
    pol = _load_policy(path)
    out = []
    for ip in [pol.ps, *pol.workers]:
        try:
            host, nic = topo.host_by_ip(ip)
        except TopologyError:
            raise DeployError(f"--policy {path}: {ip} is no host of {topo.name}") from None
        out.append(topo.iface(host, nic)["switch"])
    return out


def counter_job(topology: Topology, switches: list[str]) -> Any:
    """A stand-in :class:`InaJob` for :meth:`InaDeployment.read_counters`: only its
    aggregating switches matter."""
    from controller.ina.deployment import InaJob

    class CounterJob(InaJob):
        def __init__(self) -> None:
            super().__init__(0, topology, "", [], None, None, 1)

        @property
        def aggregating_switches(self) -> list[str]:
            return list(switches)

        @property
        def sd(self) -> str | None:
            return None

    return CounterJob()
