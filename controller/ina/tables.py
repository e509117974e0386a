"""The tables and JSON objects ``gradctl place`` and ``gradctl ina`` print.

Placement (:func:`placement_header`, :func:`switches_table`, :func:`rates_table`,
:func:`trace_table`, :func:`comparison_table`, :func:`policy_table`,
:func:`placement_json`), a deployed job (:func:`installed_table`, :func:`deploy_json`) and
its counters (:func:`events_table`, :func:`admission_table`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rich import box
from rich.table import Table

from controller.ina.admission import ADMISSION_DROPS, REFUSED_DROPS
from controller.ina.aggregator import DROP_NAMES, EVENT_NAMES, switch_ip
from topologies import Topology

__all__ = ["admission_table", "comparison_table", "deploy_json", "events_table",
           "installed_table", "placement_header", "placement_json", "policy_table",
           "rates_table", "switches_table", "trace_table"]

#: The columns of the aggregators' counters: ``ina_events`` then ``ina_drops``.
COUNTER_NAMES = (*EVENT_NAMES, *DROP_NAMES)


def _gap(gamma: float, optimum: float | None) -> float | None:
    if optimum is None or optimum <= 0:
        return None
    return max(0.0, (optimum - gamma) / optimum)


def _fmt_rate(v: float) -> str:
    return f"{v:.2f}" if v > 1e-9 else "-"


def _switch_rows(topo: Topology, pl: Any) -> list[dict[str, Any]]:
    """One dict per aggregating switch: S in selection order, then s_d."""
    res = pl.result
    inputs: dict[str, float] = {}
    for rates in res.rates.values():
        for t, r in rates.items():
            inputs[t] = inputs.get(t, 0.0) + r
    rows = []
    for i, s in enumerate(res.switches, start=1):
        rows.append({"order": i, "switch": s, "device_id": topo.device_id(s),
                     "role": topo.node(s)["role"], "kind": "S",
                     "input": inputs.get(s, 0.0), "output": res.switch_out.get(s, 0.0),
                     "to_sd": res.via_tor.get(s, 0.0)})
    if res.tor_active and res.tor not in res.switches:
        merged = sum(res.via_tor.values())
        rows.append({"order": None, "switch": res.tor, "device_id": topo.device_id(res.tor),
                     "role": topo.node(res.tor)["role"], "kind": "s_d",
                     "input": inputs.get(res.tor, 0.0) + merged,
                     "output": res.switch_out.get(res.tor, 0.0), "to_sd": 0.0})
    return rows


def placement_header(topo: Topology, pl: Any) -> str:
    """Two lines: the instance and the result."""
    prob, res = pl.problem, pl.result
    return (f"placement on {topo.name}: PS {prob.ps} (its ToR s_d = {res.tor}), "
            f"{len(prob.workers)} worker{'s' if len(prob.workers) != 1 else ''}, "
            f"K = {prob.budget}, C = {prob.switch_capacity:g} Mbit/s\n"
            f"{pl.method}: switches {', '.join(pl.switches) or '(none)'}; "
            f"γ = {pl.gamma:.2f} Mbit/s per worker (solved in {pl.solve_time_s:.2f} s)")


def switches_table(topo: Topology, pl: Any) -> Table:
    """The chosen switches (selection order) and s_d: ids, roles and LP rates."""
    t = Table(title="aggregating switches", box=box.SIMPLE_HEAD, title_justify="left")
    for col, just in (("#", "right"), ("switch", "left"), ("device id", "right"),
                      ("role", "left"), ("aggregates as", "left"), ("in Mbit/s", "right"),
                      ("out Mbit/s", "right"), ("of which to s_d", "right")):
        t.add_column(col, justify=just)
    for r in _switch_rows(topo, pl):
        what = "programmable (budget)" if r["kind"] == "S" else "s_d, PS's ToR (outside K)"
        t.add_row("s_d" if r["order"] is None else str(r["order"]), r["switch"],
                  str(r["device_id"]), r["role"], what, _fmt_rate(r["input"]),
                  _fmt_rate(r["output"]), _fmt_rate(r["to_sd"]) if r["kind"] == "S" else "")
    t.caption = ("in: workers' streams (at s_d also the partial aggregates merged there); "
                 "out: aggregated stream")
    t.caption_justify = "left"
    return t


def rates_table(pl: Any) -> Table:
    """Per-worker split of the gradient stream (Mbit/s) over the aggregation points."""
    res = pl.result
    targets = [*res.switches, res.tor, res.ps]
    heads = [*(f"{s} (#{i})" for i, s in enumerate(res.switches, start=1)),
             f"s_d {res.tor}", "PS direct"]
    t = Table(title="per-worker split rates, Mbit/s (each row sums to γ)", box=box.SIMPLE_HEAD,
              title_justify="left")
    t.add_column("rank", justify="right")
    t.add_column("worker")
    for h in heads:
        t.add_column(h, justify="right")
    t.add_column("total", justify="right")
    for rank, w in enumerate(pl.problem.workers):
        rates = res.rates[w]
        vals = [rates.get(x, 0.0) for x in targets]
        t.add_row(str(rank), w, *(_fmt_rate(v) for v in vals), f"{sum(vals):.2f}")
    return t


def trace_table(topo: Topology, pl: Any, gamma0: float | None) -> Table:
    """The greedy's rounds: the best candidate, its gamma, the gain, the runner-up."""
    t = Table(title="greedy trace (each round: the LP for S + {s} for every candidate s)",
              box=box.SIMPLE_HEAD, title_justify="left")
    for col, just in (("round", "right"), ("best", "left"), ("device id", "right"),
                      ("γ", "right"), ("gain", "right"), ("runner-up (γ)", "left"),
                      ("candidates", "right")):
        t.add_column(col, justify=just)
    prev = gamma0
    for r in pl.trace:
        others = sorted(((g, s) for s, g in r.scores.items() if s != r.chosen),
                        key=lambda x: -x[0])
        runner = f"{others[0][1]} ({others[0][0]:.2f})" if others else "-"
        gain = f"+{r.gamma - prev:.2f}" if prev is not None else ""
        t.add_row(str(r.round + 1), r.chosen, str(topo.device_id(r.chosen)), f"{r.gamma:.2f}",
                  gain, runner, str(len(r.scores)))
        prev = r.gamma
    if gamma0 is not None:
        t.caption = f"γ with no programmable switch (s_d only): {gamma0:.2f}"
        t.caption_justify = "left"
    return t


def comparison_table(pls: list[Any]) -> Table:
    """γ of every method and its gap to the MILP optimum."""
    opt = next((p for p in pls if p.method == "milp"), None)
    t = Table(title="methods compared (same LP for every switch set)", box=box.SIMPLE_HEAD,
              title_justify="left")
    for col, just in (("method", "left"), ("switches", "left"), ("γ", "right"),
                      ("gap to MILP", "right"), ("time s", "right")):
        t.add_column(col, justify=just)
    for p in pls:
        gap = _gap(p.gamma, opt.gamma if opt else None)
        note = ""
        if p.method == "milp":
            note = " (optimal)" if p.optimal else (
                f" (not proven; bound {p.upper_bound:.2f})" if p.upper_bound else " (not proven)")
        t.add_row(p.method, ", ".join(p.switches) or "-", f"{p.gamma:.2f}",
                  ("-" if gap is None else f"{100 * gap:.2f}%") + note, f"{p.solve_time_s:.2f}")
    return t


def policy_table(job: Any) -> Table:
    """Fragments per target of every worker in a routing policy."""
    pol, res = job.policy, job.placement.result
    ids = pol.switch_ids
    targets = [*res.switches, res.tor]
    t = Table(title=f"routing policy: how each worker tags its {pol.num_fragments} fragments",
              box=box.SIMPLE_HEAD, title_justify="left")
    t.add_column("rank", justify="right")
    t.add_column("worker")
    for s in targets:
        t.add_column(f"{s} (id {ids[s]})", justify="right")
    t.add_column("PS direct (0)", justify="right")
    for rank, w in enumerate(job.workers):
        c = pol.counts(w)
        t.add_row(str(rank), w, *(str(c.get(ids[s], 0)) for s in targets), str(c.get(0, 0)))
    via = {s: sum(1 for v in pol.partial_tags.get(s, ()) if v) for s in res.switches}
    if any(via.values()):
        t.caption = "aggregates merged again at s_d: " + ", ".join(
            f"{s}: {n} fragments" for s, n in via.items() if n)
        t.caption_justify = "left"
    return t


def placement_json(topo: Topology, pl: Any, *, comparison: list[Any] | None = None,
                   job: Any = None) -> dict[str, Any]:
    """The ``gradctl place --json`` object."""
    prob, res = pl.problem, pl.result
    out: dict[str, Any] = {
        "topology": topo.name,
        "ps": prob.ps,
        "workers": list(prob.workers),
        "budget": prob.budget,
        "capacity": prob.switch_capacity,
        "method": pl.method,
        "switches": list(pl.switches),
        "sd": res.tor,
        "gamma": pl.gamma,
        "aggregators": _switch_rows(topo, pl),
        "rates": {w: {t: r for t, r in rates.items()} for w, rates in res.rates.items()},
        "link_loads": [{"from": u, "to": v, "load": x, "capacity": topo.capacity(u, v)}
                       for (u, v), x in res.link_loads.items()],
        "trace": [{"round": r.round + 1, "chosen": r.chosen, "gamma": r.gamma,
                   "scores": dict(r.scores)} for r in pl.trace],
        "solve_time_s": pl.solve_time_s,
    }
    if pl.method == "milp":
        out["optimal"] = pl.optimal
        out["upper_bound"] = pl.upper_bound
    if comparison is not None:
        opt = next((p for p in comparison if p.method == "milp"), None)
        out["comparison"] = [
            {"method": p.method, "switches": list(p.switches), "gamma": p.gamma,
             "gap": _gap(p.gamma, opt.gamma if opt else None), "solve_time_s": p.solve_time_s,
             **({"optimal": p.optimal} if p.method == "milp" else {})}
            for p in comparison
        ]
    if job is not None:
        out["policy"] = job.policy_dict()
    return out


# ----------------------------------------------------------------------------- ina


def installed_table(topo: Topology, job: Any, updates: Mapping[str, int],
                    admission: Iterable[str]) -> Table:
    """What ``ina deploy`` installed, per switch: its program, what it aggregates as
    (selection order, s_d, admission only) and its INA address."""
    aggs = job.aggregating_switches
    admission = set(admission)
    order = {s: i for i, s in enumerate(job.placement.switches, start=1)} if job.placement else {}
    t = Table(title="installed", box=box.SIMPLE_HEAD, title_justify="left")
    for col, just in (("switch", "left"), ("device id", "right"), ("program", "left"),
                      ("aggregates", "left"), ("INA address", "left"), ("entries", "right")):
        t.add_column(col, justify=just)
    for s in sorted(updates, key=topo.device_id):
        dev = topo.device_id(s)
        if s in aggs:
            role = "s_d" if s == job.sd else f"#{order.get(s, '?')}"
            t.add_row(s, str(dev), "ina.p4", role, switch_ip(dev), str(updates[s]))
        elif s in admission:  # hosts attached: admission only (docs/trust.md)
            t.add_row(s, str(dev), "ina.p4", "admission", "-", str(updates[s]))
        else:
            t.add_row(s, str(dev), "forward.p4", "-", "-", str(updates[s]))
    return t


def deploy_json(topo: Topology, job: Any, *, baseline: bool, updates: Mapping[str, int],
                policy: str, setup: dict[str, str], commands: dict[str, str]) -> dict[str, Any]:
    """The ``gradctl ina deploy --json`` object."""
    aggs = job.aggregating_switches
    return {
        "job": job.job_id, "ps": job.ps, "workers": list(job.workers),
        "num_fragments": job.num_fragments, "baseline": baseline,
        "switches": list(job.placement.switches) if job.placement else [],
        "sd": job.sd, "gamma": job.placement.gamma if job.placement else None,
        "aggregators": [{"switch": s, "device_id": topo.device_id(s),
                         "ip": switch_ip(topo.device_id(s)),
                         "kind": "s_d" if s == job.sd else "S",
                         "entries": updates.get(s, 0)} for s in aggs],
        "entries": dict(updates), "policy": policy,
        "host_setup": setup, "commands": commands,
    }


def _counter_table(topo: Topology, switches: list[str], roles: Mapping[str, str],
                   counters: Mapping[str, Mapping[str, int]], names: Iterable[str]) -> Table:
    names = list(names)
    t = Table(box=box.SIMPLE_HEAD)
    for col in ("switch", "device id", "role", *names):
        t.add_column(col, justify="left" if col in ("switch", "role") else "right")
    for s in switches:
        e = counters.get(s, {})
        t.add_row(s, str(topo.device_id(s)), roles[s], *(str(e.get(n, 0)) for n in names))
    return t


def events_table(topo: Topology, switches: list[str], roles: Mapping[str, str],
                 counters: Mapping[str, Mapping[str, int]]) -> Table:
    """``ina_events`` and ``ina_drops`` of the aggregating ``switches``."""
    return _counter_table(topo, switches, roles, counters, COUNTER_NAMES)


def admission_table(topo: Topology, switches: list[str], roles: Mapping[str, str],
                    counters: Mapping[str, Mapping[str, int]]) -> Table:
    """``ina_admission_drops`` of ``switches``, and the IPv4 refused unparsed
    and spoofed sources (``REFUSED_DROPS`` of ``ingress_drops``)."""
    return _counter_table(topo, switches, roles, counters, (*ADMISSION_DROPS.values(), *REFUSED_DROPS))
