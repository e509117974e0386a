"""``gradctl place`` and ``gradctl ina``: switch placement and in-network aggregation jobs.

The twin of ``controller/ina/deployment.py`` and ``controller/placement/`` on the command line;
registered into gradctl by ``controller/cli.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich import box
from rich.table import Table

from controller.cli import (
    PROG,
    UsageError,
    _addresses,
    _console,
    held_loss,
    held_state,
    network_args,
    network_topology,
    parse_topology,
)
from controller.p4runtime import DeployError
from topologies import Topology, TopologyError
from wire.ina import INA_VALUE_SIZES, INA_VALUES

# ----------------------------------------------------------------------------- placement

PLACEMENT_METHODS = ("greedy", "milp", "random", "tor-first", "degree-first")


def _host_list(topo: Topology, limit: int = 8) -> str:
    hosts = topo.hosts()
    if len(hosts) <= limit:
        return ", ".join(hosts)
    return f"{', '.join(hosts[:3])}, ..., {hosts[-1]}"


def _check_host(topo: Topology, name: str, what: str) -> str:
    if name not in topo:
        raise UsageError(f"unknown host {name!r} for {what} (hosts of {topo.name}: "
                         f"{_host_list(topo)})")
    if not topo.is_host(name):
        raise UsageError(f"{what} {name!r} is a switch, not a host")
    return name


def parse_hosts(topo: Topology, ps: str, workers: str | None) -> tuple[str, list[str]]:
    """The PS and the workers (rank order) of ``--ps`` and ``--workers``.

    ``workers`` is a comma-separated host list, or ``all``/None for every host except
    the PS. :class:`UsageError` for unknown hosts, switches, the PS among the workers,
    duplicates and empty lists.
    """
    ps = _check_host(topo, ps, "--ps")
    if workers is None or workers.strip() == "all":
        out = [h for h in topo.hosts() if h != ps]
        if not out:
            raise UsageError(f"no workers: {topo.name} has no host besides the PS {ps}")
        return ps, out
    out = []
    for w in (x.strip() for x in workers.split(",")):
        if not w:
            continue
        _check_host(topo, w, "--workers")
        if w == ps:
            raise UsageError(f"worker {w!r} is the parameter server (--ps {ps}); a worker "
                             "must be another host")
        if w in out:
            raise UsageError(f"worker {w!r} is listed twice in --workers")
        out.append(w)
    if not out:
        raise UsageError("--workers names no host (give h2,h3,... or all)")
    return ps, out


def _placement_problem(topo: Topology, ps: str, workers: list[str], budget: int,
                       capacity: float) -> Any:
    from controller.placement import PlacementError, PlacementProblem

    n = len(topo.switches())
    if budget > n:
        raise UsageError(f"budget K={budget} is larger than the {n} switches of {topo.name}")
    try:
        return PlacementProblem(topo, ps, workers, budget, capacity)
    except PlacementError as e:
        raise UsageError(str(e)) from None


def solve_placements(problem: Any, method: str, *, seed: int = 0,
                     time_limit_s: float = 60.0) -> list[Any]:
    """The placements of ``method`` (one of :data:`PLACEMENT_METHODS` or ``all``: every
    method, greedy first). The MILP gets the greedy's gamma as a lower bound when both
    run. Solver failures become :class:`UsageError`."""
    from controller import placement as P

    methods = PLACEMENT_METHODS if method == "all" else (method,)
    out: list[Any] = []
    try:
        for m in methods:
            if m == "greedy":
                out.append(P.greedy_placement(problem))
            elif m == "milp":
                lb = next((p.gamma for p in out if p.method == "greedy"), None)
                out.append(P.optimal_placement(problem, time_limit_s=time_limit_s,
                                               lower_bound=lb))
            elif m == "random":
                out.append(P.random_placement(problem, seed))
            elif m == "tor-first":
                out.append(P.tor_first_placement(problem))
            elif m == "degree-first":
                out.append(P.degree_first_placement(problem))
            else:  # argparse restricts the choices
                raise UsageError(f"unknown placement method {m!r}")
    except P.PlacementError as e:
        raise UsageError(str(e)) from None
    return out


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


def _policy_job(topo: Topology, pl: Any, fragments: int, job_id: int) -> Any:
    """An :class:`InaJob` for placement ``pl`` with ``fragments`` fragments per worker."""
    from controller.ina import MAX_WORKERS, InaJob
    from controller.placement import PlacementError, routing_policy

    workers = list(pl.problem.workers)
    if len(workers) > MAX_WORKERS:
        raise UsageError(f"--fragments: a routing policy has at most {MAX_WORKERS} workers, "
                         f"got {len(workers)} (give --workers)")
    try:
        pol = routing_policy(pl, fragments)
    except PlacementError as e:
        raise UsageError(str(e)) from None
    return InaJob(job_id, topo, pl.problem.ps, workers, pl, pol, fragments)


def cmd_place(args: argparse.Namespace) -> int:
    """``gradctl place``."""
    topo = parse_topology(args.topo)
    ps, workers = parse_hosts(topo, args.ps, args.workers)
    if args.fragments is not None and args.fragments < 1:
        raise UsageError(f"--fragments must be >= 1, got {args.fragments}")
    if args.plot:
        _check_output_path(args.plot, "--plot")
    problem = _placement_problem(topo, ps, workers, args.budget, args.capacity)
    pls = solve_placements(problem, args.method, seed=args.seed, time_limit_s=args.time_limit)
    pl = pls[0]  # greedy first with --method all
    job = _policy_job(topo, pl, args.fragments, 1) if args.fragments else None
    if args.plot:
        from controller.plot import plot_placement

        try:
            plot_placement(topo, pl, args.plot)
        except (OSError, ValueError) as e:
            raise UsageError(f"--plot: cannot write {args.plot!r}: {e}") from None
    if args.json:
        print(json.dumps(placement_json(topo, pl, comparison=pls if args.method == "all" else None,
                                        job=job), indent=2))
        return 0
    console = _console()
    console.print(placement_header(topo, pl), markup=False)
    console.print(switches_table(topo, pl))
    console.print(rates_table(pl))
    if pl.trace:
        from controller.placement import solve_lp

        console.print(trace_table(topo, pl, solve_lp(problem, []).gamma))
    if args.method == "all":
        console.print(comparison_table(pls))
    if job is not None:
        console.print(policy_table(job))
    if args.plot:
        console.print(f"plot written to {args.plot}", markup=False)
    return 0


def _check_output_path(path: str, what: str) -> None:
    parent = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise UsageError(f"{what}: {path!r} is a directory")
    if not os.path.isdir(parent):
        raise UsageError(f"{what}: directory {parent!r} does not exist")
    if not os.access(parent, os.W_OK):
        raise UsageError(f"{what}: directory {parent!r} is not writable")


# ----------------------------------------------------------------------------- ina


def _ina_host_setup(topo: Topology, hosts: Sequence[str],
                    switches: Sequence[str]) -> dict[str, str]:
    """Per host, the static ARP entries for the aggregating switches' addresses (they lie
    in the hosts' subnet; the MAC is the host's own switch port, which routes by IP)."""
    from controller.ina import switch_ip
    from controller.routing import port_mac

    out = {}
    for h in hosts:
        iface = topo.iface(h)
        sw = iface["switch"]
        mac = port_mac(topo.device_id(sw), topo.port(sw, h))
        out[h] = "; ".join(
            f"ip neigh replace {switch_ip(topo.device_id(s))} lladdr {mac} dev {iface['name']} "
            "nud permanent" for s in switches)
    return out


def ina_commands(job: Any, policy_path: str | Path, values: int,
                 ddp: bool = False) -> dict[str, str]:
    """``{host: command}`` that starts the job's agents: the PS first, then the workers
    in rank order (the dict keeps that order). ``ddp``: the workers are PyTorch DDP ranks
    (``hosts.ina.ddp_train --hook ina``) and the PS serves rounds until they go quiet
    (``--rounds 0``); their gloo rendezvous is rank 0's address (gloo's interface,
    ``GLOO_SOCKET_IFNAME``, is set by ``gradctl net exec``)."""
    py = shlex.quote(sys.executable)
    pol = shlex.quote(str(policy_path))
    topo = job.topology
    ps = f"{py} -m hosts.ina.ps --policy {pol} --iface {topo.iface(job.ps)['name']}"
    out = {job.ps: ps + (" --rounds 0 --idle-exit 20" if ddp else "")}
    master = topo.host_ip(job.workers[0])
    for rank, w in enumerate(job.workers):
        if ddp:
            out[w] = (f"{py} -m hosts.ina.ddp_train --rank {rank} --world {len(job.workers)} "
                      f"--master-addr {master} --hook ina --policy {pol}")
        else:
            out[w] = f"{py} -m hosts.ina.worker --policy {pol} --rank {rank} --size {values}"
    return out


JOBS_FILE = "ina-jobs.json"


def _held_jobs(run_dir: str) -> dict[int, dict[str, Any]]:
    """The INA jobs deployed on a held network (``DIR/ina-jobs.json``), by job id: what
    ``ina deploy`` was given, so that a later deploy or undeploy installs them again."""
    path = Path(run_dir) / JOBS_FILE
    if not path.is_file():
        return {}
    try:
        return {int(j["job_id"]): j for j in json.loads(path.read_text())["jobs"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UsageError(f"{path}: unreadable job list ({e})") from None


def _save_held_jobs(run_dir: str, jobs: dict[int, dict[str, Any]]) -> None:
    path = Path(run_dir) / JOBS_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"jobs": [jobs[k] for k in sorted(jobs)]}, indent=1))
    tmp.replace(path)


def _plan(topo: Topology, spec: dict[str, Any]) -> Any:
    from controller.ina import InaJob
    from controller.placement import PlacementError

    try:
        return InaJob.plan(topo, spec["ps"], spec["workers"], spec["budget"] or 0,
                           spec["capacity"] or 1.0, spec["values"], job_id=spec["job_id"],
                           scale_bits=spec["scale_bits"], aggregate=not spec["baseline"],
                           number_format=spec.get("number_format", "fixed"),
                           values_per_packet=spec.get("values_per_packet", INA_VALUES))
    except (PlacementError, DeployError) as e:
        raise UsageError(f"job {spec['job_id']}: {e}") from None


def cmd_ina_deploy(args: argparse.Namespace) -> int:
    """``gradctl ina deploy``."""
    from controller.ina import InaDeployment, switch_ip

    topo = network_topology(args)
    ps, workers = parse_hosts(topo, args.ps, args.workers)
    if not args.baseline and (args.budget is None or args.capacity is None):
        raise UsageError("--budget and --capacity are required (unless --baseline)")
    if args.values < 1:
        raise UsageError(f"--values must be >= 1, got {args.values}")
    addresses = _addresses(args, topo)
    if args.policy_out:
        policy_path = Path(args.policy_out)
    elif args.run_dir:
        policy_path = Path(args.run_dir) / f"ina-job{args.job_id}.policy.json"
    else:
        policy_path = Path(f"ina-job{args.job_id}.policy.json")
    policy_path = policy_path.resolve()
    _check_output_path(str(policy_path), "--policy-out")
    if not args.baseline:
        # the same checks as `place` (clear messages), before anything is installed
        _placement_problem(topo, ps, workers, args.budget, args.capacity)
    spec = {"job_id": args.job_id, "ps": ps, "workers": workers, "budget": args.budget,
            "capacity": args.capacity, "values": args.values, "scale_bits": args.scale_bits,
            "number_format": args.number_format,
            "values_per_packet": args.values_per_packet, "baseline": args.baseline, "policy": str(policy_path), "ddp": args.ddp}
    job = _plan(topo, spec)
    timeout_us = None
    if args.aggregator_timeout_ms is not None:
        if not 0 <= args.aggregator_timeout_ms <= 1e9:
            raise UsageError(f"--aggregator-timeout-ms must be within 0..1e9, got "
                             f"{args.aggregator_timeout_ms:g}")
        timeout_us = round(args.aggregator_timeout_ms * 1000)
    # On a held network the jobs deployed before stay: all are installed together (one
    # pipeline load), and its link emulation (net up --loss) goes in with them.
    held = held_state(args.run_dir) is not None
    others = {k: v for k, v in _held_jobs(args.run_dir).items() if k != args.job_id} if held else {}
    jobs = [_plan(topo, o) for o in others.values()] + [job]
    if timeout_us is None and held:
        timeout_us = next((o.get("aggregator_timeout_us") for o in others.values()
                           if o.get("aggregator_timeout_us") is not None), None)
    spec["aggregator_timeout_us"] = timeout_us
    try:
        dep = InaDeployment(topo, addresses, jobs, loss=held_loss(args.run_dir),
                            aggregator_timeout_us=timeout_us)
    except DeployError as e:
        raise UsageError(f"job {args.job_id} cannot join the deployed jobs "
                         f"{sorted(others)}: {e}") from None
    t0 = time.monotonic()
    report = dep.deploy(timeout=args.timeout)
    took = time.monotonic() - t0
    try:
        job.write_policy(policy_path)
    except OSError as e:
        raise UsageError(f"--policy-out: cannot write {str(policy_path)!r}: {e}") from None
    if held:
        _save_held_jobs(args.run_dir, {**others, args.job_id: spec})
    aggs = job.aggregating_switches
    admission = set(dep.admission_switches)
    setup = _ina_host_setup(topo, [ps, *workers], aggs) if aggs else {}
    commands = ina_commands(job, policy_path, args.values, ddp=args.ddp)
    order = {s: i for i, s in enumerate(job.placement.switches, start=1)} if job.placement else {}
    if args.json:
        print(json.dumps({
            "job": job.job_id, "ps": ps, "workers": workers,
            "num_fragments": job.num_fragments, "baseline": args.baseline,
            "switches": list(job.placement.switches) if job.placement else [],
            "sd": job.sd, "gamma": job.placement.gamma if job.placement else None,
            "aggregators": [{"switch": s, "device_id": topo.device_id(s),
                             "ip": switch_ip(topo.device_id(s)),
                             "kind": "s_d" if s == job.sd else "S",
                             "entries": report.updates.get(s, 0)} for s in aggs],
            "entries": report.updates, "policy": str(policy_path),
            "host_setup": setup, "commands": commands,
        }, indent=2))
        return 0
    console = _console()
    if job.placement is None:
        console.print(f"job {job.job_id} (PS baseline, no aggregation): PS {ps}, "
                      f"{len(workers)} workers, {args.values} values = {job.num_fragments} "
                      "fragments per worker", markup=False)
    else:
        pl = job.placement
        console.print(f"job {job.job_id}: PS {ps}, {len(workers)} workers, {args.values} values "
                      f"= {job.num_fragments} fragments per worker; greedy placement K = "
                      f"{args.budget}: {', '.join(pl.switches) or '(none)'} + s_d {job.sd}, "
                      f"γ = {pl.gamma:.2f} Mbit/s per worker", markup=False)
    console.print(f"deployed to {topo.name}: {len(report.updates)} switches, {report.total} "
                  f"entries in {took:.2f} s", markup=False)
    if others:
        console.print(f"with the jobs deployed before: {', '.join(map(str, sorted(others)))} "
                      f"(all {len(jobs)} installed together)", markup=False)
    t = Table(title="installed", box=box.SIMPLE_HEAD, title_justify="left")
    for col, just in (("switch", "left"), ("device id", "right"), ("program", "left"),
                      ("aggregates", "left"), ("INA address", "left"), ("entries", "right")):
        t.add_column(col, justify=just)
    for s in sorted(report.updates, key=topo.device_id):
        dev = topo.device_id(s)
        if s in aggs:
            role = "s_d" if s == job.sd else f"#{order.get(s, '?')}"
            t.add_row(s, str(dev), "ina.p4", role, switch_ip(dev), str(report.updates[s]))
        elif s in admission:  # hosts attached: admission only (docs/trust.md)
            t.add_row(s, str(dev), "ina.p4", "admission", "-", str(report.updates[s]))
        else:
            t.add_row(s, str(dev), "forward.p4", "-", "-", str(report.updates[s]))
    console.print(t)
    console.print(f"policy written to {policy_path}", markup=False)
    # A network started by ``gradctl net up`` is entered with ``gradctl net exec``.
    def in_host(h: str, cmd: str, sh: bool = False) -> str:
        if not held:
            return f"  {h}$ {cmd}"
        body = f"sh -c {shlex.quote(cmd)}" if sh else cmd
        return f"  {PROG} net exec {shlex.quote(args.run_dir)} {h} -- {body}"

    if setup:
        console.print("host setup, once per host (static ARP for the aggregating switches' "
                      "addresses):", markup=False)
        for h, cmd in setup.items():
            console.print(in_host(h, cmd, sh=True), markup=False, soft_wrap=True)
    how = "with gradctl net exec" if held else "e.g. '<host> <command>' in a Mininet CLI"
    console.print(f"start the PS, then the workers, each in its host's namespace ({how}):",
                  markup=False)
    for h, cmd in commands.items():
        console.print(in_host(h, cmd) + (" &" if held and h == job.ps else ""), markup=False,
                      soft_wrap=True)
    where = (f"--run-dir {shlex.quote(args.run_dir)}" if args.run_dir
             else f"--addresses {shlex.quote(args.addresses)}")
    topo_arg = "" if held else f" {shlex.quote(args.topo)}"
    console.print(f"then: {PROG} ina counters{topo_arg} {where} --policy "
                  f"{shlex.quote(str(policy_path))}", markup=False, soft_wrap=True)
    if held:
        script = Path(args.run_dir) / f"ina-job{job.job_id}.sh"
        script.write_text(job_script(args.run_dir, job, setup, commands))
        console.print(f"the same commands as a script (waits for every agent): sh {script}",
                      markup=False, soft_wrap=True)
    return 0


def job_script(run_dir: str, job: Any, setup: dict[str, str], commands: dict[str, str]) -> str:
    """A POSIX shell script running a job's printed commands on a held network: the hosts'
    ARP entries, the PS in the background, the workers in parallel; it waits for every
    agent and fails if one did."""
    d = shlex.quote(run_dir)
    lines = ["#!/bin/sh", f"# INA job {job.job_id} on {run_dir} (written by {PROG} ina deploy)",
             "set -e"]
    lines += [f"{PROG} net exec {d} {h} -- sh -c {shlex.quote(cmd)}" for h, cmd in setup.items()]
    lines += [f"{PROG} net exec {d} {job.ps} -- {commands[job.ps]} &", "ps_pid=$!",
              "sleep 1  # the PS binds its socket", "pids="]
    for h, cmd in commands.items():
        if h != job.ps:
            lines += [f"{PROG} net exec {d} {h} -- {cmd} &", 'pids="$pids $!"']
    lines += ["fail=0", "for p in $pids; do wait $p || fail=1; done",
              "wait $ps_pid || fail=1", 'exit "$fail"', ""]
    return "\n".join(lines)


EVENT_NAMES = ("added", "partial", "passed_on", "cleared", "result", "taken_over",
               "absorbed", "duplicate", "unknown_job", "clear", "wrong_size")


def policy_switches(topo: Topology, path: str) -> dict[str, str]:
    """``{switch: "S" | "s_d"}``: the aggregating switches a policy file names, by the
    topology's device ids (s_d last)."""
    from wire.ina_policy import Policy, PolicyError

    try:
        pol = Policy.load(path)
    except PolicyError as e:
        raise UsageError(f"--policy: {e}") from None
    ids = set(pol.switch_ips) | {s for s, row in pol.fanin.items() if row.any()}
    ids |= {int(v) for v in set(pol.tags.ravel().tolist()) if v}
    sd = pol.sd.id if pol.sd is not None else None
    out: dict[str, str] = {}
    for i in sorted(ids - {sd}) + ([sd] if sd is not None else []):
        try:
            name = topo.switch_by_id(i)
        except TopologyError:
            raise UsageError(f"--policy {path}: switch id {i} is no switch of {topo.name} "
                             "(was the policy written for another topology?)") from None
        out[name] = "s_d" if i == sd else "S"
    return out


def policy_edges(topo: Topology, path: str) -> list[str]:
    """The first switches of a policy's PS and workers: where admission (docs/trust.md)
    holds the job's members."""
    from wire.ina_policy import Policy, PolicyError

    try:
        pol = Policy.load(path)
    except PolicyError as e:
        raise UsageError(f"--policy: {e}") from None
    out = []
    for ip in [pol.ps, *pol.workers]:
        try:
            host, nic = topo.host_by_ip(ip)
        except TopologyError:
            raise UsageError(f"--policy {path}: {ip} is no host of {topo.name}") from None
        out.append(topo.iface(host, nic)["switch"])
    return out


def cmd_ina_counters(args: argparse.Namespace) -> int:
    """``gradctl ina counters``: the aggregators' events and drops, and the admission
    drops of the switches the job's hosts are attached to (and of ``--switch``)."""
    from controller.ina import ADMISSION_DROPS, InaDeployment

    topo = network_topology(args)
    roles: dict[str, str] = {}
    if not args.policy and not args.switch and held_state(args.run_dir) is not None:
        # a held network's deployed jobs
        args.policy = [j["policy"] for j in _held_jobs(args.run_dir).values()]
    for path in args.policy or []:
        for s, r in policy_switches(topo, path).items():
            roles[s] = "s_d" if "s_d" in (r, roles.get(s)) else r
        for s in policy_edges(topo, path):
            roles.setdefault(s, "edge")
    for s in args.switch or []:
        if s not in topo or not topo.is_switch(s):
            raise UsageError(f"--switch {s!r} is no switch of {topo.name}")
        roles.setdefault(s, "-")
    if not args.policy and not args.switch:
        raise UsageError("give --policy FILE (the job's policy) or --switch S")
    switches = sorted(roles, key=topo.device_id)
    aggregating = [s for s in switches if roles[s] != "edge"]
    addresses = _addresses(args, topo)
    dep = InaDeployment(topo, addresses, [_counter_job(topo, aggregating)])
    counters = dep.read_counters(aggregating, switches, timeout=args.timeout)
    if args.json:
        print(json.dumps(counters, indent=2))
        return 0
    console = _console()
    if aggregating:
        t = Table(box=box.SIMPLE_HEAD)
        for col in ("switch", "device id", "role", *EVENT_NAMES):
            t.add_column(col, justify="left" if col in ("switch", "role") else "right")
        for s in aggregating:
            e = counters.get(s, {})
            t.add_row(s, str(topo.device_id(s)), roles[s], *(str(e.get(n, 0)) for n in EVENT_NAMES))
        console.print(f"ina_events / ina_drops of the aggregating switches of {topo.name}",
                      markup=False)
        console.print(t)
    else:
        console.print("the policy names no aggregating switch (PS baseline)", markup=False)
    a = Table(box=box.SIMPLE_HEAD)
    for col in ("switch", "device id", "role", *ADMISSION_DROPS.values()):
        a.add_column(col, justify="left" if col in ("switch", "role") else "right")
    for s in switches:
        e = counters.get(s, {})
        a.add_row(s, str(topo.device_id(s)), roles[s],
                  *(str(e.get(n, 0)) for n in ADMISSION_DROPS.values()))
    console.print("ina_admission_drops (docs/trust.md): INA packets refused where they "
                  "entered the fabric", markup=False)
    console.print(a)
    return 0


def cmd_ina_undeploy(args: argparse.Namespace) -> int:
    """``gradctl ina undeploy``: remove one job from a held network; the others are
    installed again (one pipeline load); with none left, forward.p4. The link emulation
    stays."""
    from controller.deploy import deploy
    from controller.ina import InaDeployment

    if held_state(args.run_dir) is None:
        raise UsageError(f"{args.run_dir}: no network of 'gradctl net up' here")
    topo = network_topology(args)
    jobs = _held_jobs(args.run_dir)
    if args.job_id not in jobs:
        raise UsageError(f"no job {args.job_id} deployed on {args.run_dir} (deployed: "
                         f"{', '.join(map(str, sorted(jobs))) or 'none'})")
    gone = jobs.pop(args.job_id)
    addresses = _addresses(args, topo)
    loss = held_loss(args.run_dir)
    if jobs:
        timeout_us = next((j.get("aggregator_timeout_us") for j in jobs.values()
                           if j.get("aggregator_timeout_us") is not None), None)
        InaDeployment(topo, addresses, [_plan(topo, j) for j in jobs.values()], loss=loss,
                      aggregator_timeout_us=timeout_us).deploy(timeout=args.timeout)
    else:
        deploy(topo, addresses, loss=loss, timeout=args.timeout)
    _save_held_jobs(args.run_dir, jobs)
    Path(gone["policy"]).unlink(missing_ok=True)
    left = ", ".join(map(str, sorted(jobs))) or "none (forward.p4 everywhere)"
    print(f"job {args.job_id} removed from {args.run_dir}; jobs left: {left}")
    return 0


def _counter_job(topology: Topology, switches: list[str]) -> Any:
    """A stand-in :class:`InaJob` for :meth:`InaDeployment.read_events`: only its
    aggregating switches matter (``ina`` is imported lazily: it pulls in the solvers)."""
    from controller.ina import InaJob

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


def register(sub: Any, topo_help: str) -> None:
    """Add ``place`` and ``ina`` to gradctl's subparsers."""
    def job_args(sp: argparse.ArgumentParser, required: bool = True) -> None:
        sp.add_argument("--ps", required=True, metavar="HOST", help="the parameter server")
        sp.add_argument("--workers", metavar="H2,H3,...|all", default="all",
                        help="comma-separated worker hosts, in rank order (default: all "
                             "hosts but the PS)")
        sp.add_argument("--budget", type=int, required=required, metavar="K",
                        help="programmable switches to place (s_d, the PS's ToR, aggregates "
                             "too and is not counted)")
        sp.add_argument("--capacity", type=float, required=required, metavar="C",
                        help="processing capacity of a programmable switch, Mbit/s (sum of "
                             "its input rates)")

    place = sub.add_parser(
        "place", help="place programmable switches for in-network aggregation",
        description="Choose K programmable switches for one PS and its workers (greedy + LP "
                    "of docs/placement.md, or a baseline), and print the switches, the "
                    "aggregation throughput γ, the per-worker split rates and the greedy "
                    "trace.")
    place.add_argument("topo", metavar="TOPO", help=topo_help)
    job_args(place)
    place.add_argument("--method", choices=[*PLACEMENT_METHODS, "all"], default="greedy",
                       help="placement method; all: every method and its gap to the MILP "
                            "optimum (default greedy)")
    place.add_argument("--seed", type=int, default=0, help="seed of --method random (default 0)")
    place.add_argument("--time-limit", type=float, default=60.0, metavar="S",
                       help="time limit of the MILP in seconds (default 60)")
    place.add_argument("--fragments", type=int, metavar="F",
                       help="also derive the per-fragment routing policy for F fragments "
                            "per worker (with --json: the policy file of docs/ina_policy.md)")
    place.add_argument("--json", action="store_true", help="print one JSON object")
    place.add_argument("--plot", metavar="FILE.png",
                       help="draw the topology, the placement and the LP's flows (PNG)")
    place.set_defaults(func=cmd_place)

    ina = sub.add_parser("ina", help="in-network aggregation jobs on a running network",
                         description="Deploy an in-network aggregation job, read its counters.")
    ina_sub = ina.add_subparsers(dest="ina_command", metavar="ACTION", required=True)

    idep = ina_sub.add_parser(
        "deploy", help="plan a job and install it on running switches",
        description="Plan an aggregation job (greedy + LP placement, per-fragment routing "
                    "policy), load ina.p4 on the aggregating switches and on every switch "
                    "with hosts (admission of the job's members, docs/trust.md) and "
                    "forward.p4 elsewhere (fresh pipelines), install routes, the job and "
                    "its RESULT multicast tree, write the policy file for the agents and print the "
                    "commands that start them.")
    network_args(idep, topo_help)
    job_args(idep, required=False)
    idep.add_argument("--values", type=int, required=True, metavar="N",
                      help="gradient size in values (--values-per-packet values a fragment)")
    idep.add_argument("--values-per-packet", type=int, choices=INA_VALUE_SIZES,
                      default=INA_VALUES, metavar="V",
                      help="values a packet carries: 64 (default), 128 or 256; the switches "
                           "load the ina.p4 compiled for it, so every job deployed on a network "
                           "has the same (docs/ina.md)")
    idep.add_argument("--job-id", type=int, default=1, metavar="J", help="INA job id (default 1)")
    idep.add_argument("--scale-bits", type=int, default=16, metavar="S",
                      help="fixed-point scale 2^S (default 16)")
    idep.add_argument("--number-format", choices=("fixed", "bfp"), default="fixed",
                      help="how the workers send values: fixed (one scale 2^S) or bfp (block "
                           "floating point: a shared exponent per packet's values, agreed in the "
                           "network; no scale to choose; docs/ina.md)")
    idep.add_argument("--baseline", action="store_true",
                      help="no aggregation: every worker sends to the PS (PS baseline)")
    idep.add_argument("--policy-out", metavar="FILE",
                      help="policy file to write (default: <run-dir>/ina-job<J>.policy.json, "
                           "or ./ina-job<J>.policy.json with --addresses)")
    idep.add_argument("--aggregator-timeout-ms", type=float, metavar="MS",
                      help="an aggregator idle this long may be taken over by another "
                           "fragment (0: never; default: the program's, 1000)")
    idep.add_argument("--ddp", action="store_true",
                      help="print commands for PyTorch DDP ranks (hosts.ina.ddp_train --hook "
                           "ina; --values: the model's parameter count) and a PS that serves "
                           "rounds until they stop (--rounds 0)")
    idep.add_argument("--json", action="store_true", help="machine-readable output")
    idep.set_defaults(func=cmd_ina_deploy)

    iund = ina_sub.add_parser(
        "undeploy", help="remove one job from a network of 'gradctl net up'",
        description="Remove job J from the network held in DIR; the jobs deployed besides "
                    "it are installed again (fresh pipelines: do it between their runs) "
                    "and with none left every switch runs forward.p4. Link emulation stays.")
    iund.add_argument("run_dir", metavar="DIR", help="run directory printed by net up")
    iund.add_argument("job_id", metavar="J", type=int, help="the job id given to ina deploy")
    iund.add_argument("--timeout", type=float, default=30.0, metavar="S",
                      help="seconds to wait for each switch (default 30)")
    iund.set_defaults(func=cmd_ina_undeploy, topo=None)

    icnt = ina_sub.add_parser(
        "counters", help="read the INA event and admission drop counters",
        description="Read ina_events and ina_drops of the aggregating switches a policy "
                    "file names (or of --switch), and ina_admission_drops of those and "
                    "of the switches the job's PS and workers are attached to (packets "
                    "refused as not from the job's members, docs/trust.md), leaving the "
                    "pipeline as it is.")
    network_args(icnt, topo_help)
    icnt.add_argument("--policy", action="append", metavar="FILE",
                      help="policy file of a job (its switches are read; repeatable; default "
                           "with a net up run dir: every deployed job's)")
    icnt.add_argument("--switch", action="append", metavar="SWITCH",
                      help="a switch running ina.p4 (repeatable; e.g. an intruder's)")
    icnt.add_argument("--json", action="store_true", help="machine-readable output")
    icnt.set_defaults(func=cmd_ina_counters)

