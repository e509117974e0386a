"""The simulation cases of tests/test_sim.py, run in a child process (``python -m
tests.sim_cases CASE [SUMMARY]``, one JSON line out) so the test process never loads cppyy
and cling next to the rest of the suite."""

from __future__ import annotations

import json
import sys
from typing import Any


def small_cases() -> dict[str, Any]:
    """crc32 indices, K=0 vs PS, one aggregator slot vs enough (docs/simulation.md)."""
    from controller.bcube import baseline_fat_tree
    from sim.core import run_ina
    from sim.ns3env import load
    from sim.plan import policy_dict

    _, g = load()
    keys = [(1, 0, 0), (1, 5, 0), (7, 123456, 17), (255, 2**32 - 1, 65535)]
    out: dict[str, Any] = {"crc": [[*k, int(g.AggIndex(*k, 1024))] for k in keys]}
    topo = baseline_fat_tree(5, 2.0, 4.0)
    h = topo.hosts()
    out["k0"] = [run_ina(topo, policy_dict(topo, h[0], h[1:5], 0, 1000.0, 4096, aggregate=a),
                         4096).as_dict() for a in (False, True)]
    topo = baseline_fat_tree(9, 2.0, 4.0)
    h = topo.hosts()
    pol = policy_dict(topo, h[0], h[1:9], 2, 1000.0, 4096)
    out["exhaustion"] = [run_ina(topo, pol, 4096, aggregators=a).as_dict() for a in (1024, 1)]
    return out


def validation(summary_path: str) -> list[dict[str, Any]]:
    """sim.validate rows for an emulator summary.json."""
    from sim.validate import validate_summary

    with open(summary_path) as f:
        rows = validate_summary(json.load(f))
    return [{"scheme": r.scheme, "emulator_s": r.emulator_s, "sim_s": r.sim_s,
             "error": r.error, "emulator_bound_s": r.emulator_bound_s} for r in rows]


if __name__ == "__main__":
    case = sys.argv[1]
    res = small_cases() if case == "small" else validation(sys.argv[2])
    print(json.dumps(res))
