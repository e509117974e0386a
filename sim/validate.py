"""The simulator against the emulator: ``make compare-sync``'s fat-tree schemes (PS, INA,
ring) simulated with the same inputs as an emulator run's ``summary.json``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .core import SimResult, run_ina, run_ring

#: experiments/compare.py's defaults that its summary.json does not record
COMPARE_DEFAULTS = {"budget": 2, "capacity": 1000.0, "window": 32, "timeout": 1.0}


@dataclass
class ValidationRow:
    """One scheme: emulator and simulator sync time and line-rate bound."""

    scheme: str
    emulator_s: float | None
    emulator_bound_s: float | None
    sim_s: float | None
    sim_bound_s: float

    @property
    def error(self) -> float | None:
        """(sim - emulator) / emulator."""
        if not self.emulator_s or self.sim_s is None:
            return None
        return (self.sim_s - self.emulator_s) / self.emulator_s


def simulate_compare(workers: int, values: int, bw: float, fabric_x: float = 4.0,
                     schemes: tuple[str, ...] = ("ps", "ina", "ring"),
                     budget: int = 2, capacity: float = 1000.0, window: int = 32,
                     timeout: float = 1.0) -> dict[str, SimResult]:
    """Simulate experiments/compare.py's fat-tree runs: its topology
    (``baseline_fat_tree``), PS ``h1`` and workers ``h2..h(N+1)`` (ring: ``h1..hN``), and
    the policy ``InaJob.plan`` gives its agents."""
    from controller.bcube import baseline_fat_tree
    from controller.ina import InaJob

    topo = baseline_fat_tree(workers + 1, bw, fabric_x)
    hosts = topo.hosts()
    ps, ws = hosts[0], hosts[1:workers + 1]
    out: dict[str, SimResult] = {}
    for s in schemes:
        if s == "ring":
            out[s] = run_ring(topo, hosts[:workers], values)
        elif s in ("ps", "ina"):
            job = InaJob.plan(topo, ps, ws, budget if s == "ina" else 0, capacity, values,
                              job_id=1, aggregate=s == "ina")
            out[s] = run_ina(topo, job.policy_dict(), values, window=window, timeout=timeout,
                             scheme=s)
    return out


def validate_summary(summary: dict[str, Any], **overrides: Any) -> list[ValidationRow]:
    """The validation rows for an emulator ``summary.json`` (experiments/compare.py)."""
    params = {**COMPARE_DEFAULTS, **overrides}
    rows = {r["scheme"]: r for r in summary["rows"]
            if r["scheme"] in ("ps", "ina", "ring") and r.get("status") == "ok"}
    sims = simulate_compare(int(summary["workers"]), int(summary["values"]),
                            float(summary["bw_mbit"]), float(summary.get("fabric_x", 4.0)),
                            tuple(rows), **params)
    return [ValidationRow(s, rows[s]["seconds"], rows[s]["bound_s"], r.seconds, r.bound_s)
            for s, r in sims.items()]
