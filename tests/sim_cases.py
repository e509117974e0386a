"""The simulation cases of tests/test_sim.py, run in a child process (``python -m
tests.sim_cases CASE[,CASE...]`` or ``validate SUMMARY``, one JSON line out) so the test process never loads cppyy
and cling next to the rest of the suite."""

from __future__ import annotations

import contextlib
import io
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
    from sim.limits import memory_rows  # where simulation stops: a built k=4 fat-tree's RSS
    out["memory"] = [vars(r) for r in memory_rows([4])]
    return out


def issue26_cases() -> dict[str, Any]:
    """Placement methods (INA vs budget K), routes pinned to the LP's paths, BML on a
    BCube against the sharded PS (docs/simulation.md)."""
    from controller.bcube import baseline_fat_tree
    from controller.cli import main
    from sim.bml import run_bml, run_sharded_ps
    from sim.core import Ns3Network, loopback_paths, run_ina
    from sim.plan import METHODS, policy_dict
    from topologies import fat_tree

    out: dict[str, Any] = {}
    topo = fat_tree(4, bw=2.0)
    h = topo.hosts()
    ps, ws = h[0], h[1:]
    out["placement"] = {}
    for m in METHODS:
        pol = policy_dict(topo, ps, ws, 2, 2.0, 2048, method=m)
        r = run_ina(topo, pol, 2048)
        out["placement"][m] = {"gamma": pol["gamma"], "seconds": r.seconds,
                               "bound_s": r.bound_s, "aggregating": pol["aggregating"]}
    agg = out["placement"]["greedy"]["aggregating"]
    pins = loopback_paths(topo, ps, ws, agg)
    routes = []
    for pinned in (True, False):
        net = Ns3Network(topo, pins=pins if pinned else None)
        routes.append([[int(net.g.RouteOf(net.index[u], net.first_addr[s])), net.ifc[(u, v)]]
                       for s, hops in pins.items() for u, v in hops.items()])
        net.ns.Simulator.Destroy()
    out["pins"] = {"pinned": routes[0], "hashed": routes[1]}
    # per-port loss (the emulator's --loss SW:PORT=RATE): the PS's ToR port toward the PS,
    # and a port no packet of the run crosses (the last edge switch toward the last host)
    tor = next(iter(topo.graph[ps]))
    idle = next(iter(topo.graph[h[-1]]))
    pol = policy_dict(topo, ps, ws[:4], 0, 2.0, 640, aggregate=False)
    out["loss"] = {name: run_ina(topo, pol, 640, loss=spec).as_dict() for name, spec in (
        ("none", 0.0), ("ps_port", {(tor, topo.port(tor, ps)): 0.2}),
        ("idle_port", {(idle, topo.port(idle, h[-1])): 0.5}))}
    bml = run_bml(3, 2, 4608, 0.002, max_time=30)
    out["bml"] = bml.as_dict()
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        main(["simulate", "bcube:3,2,bw=2", "--scheme", "bml", "--values", "4608", "--json"])
    out["bml_cli"] = json.loads(buf.getvalue())
    ft = baseline_fat_tree(9, 2.0, 4.0)
    out["sharded_ps"] = run_sharded_ps(ft, ft.hosts()[:9], 4608, max_time=30).as_dict()
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
    if case == "validate":
        res: Any = validation(sys.argv[2])
    else:  # several cases in one process: ns-3 is imported and the model compiled once
        runs = {"small": small_cases, "issue26": issue26_cases}
        res = {c: runs[c]() for c in case.split(",")}
    print(json.dumps(res))
