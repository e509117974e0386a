"""``gradctl place`` and ``gradctl ina``: switch placement and in-network aggregation jobs.

The command line of ``controller/placement/`` and ``controller/ina/``: one register/run
pair per group (:func:`register_place`/:func:`run_place`, :func:`register_ina`/
:func:`run_ina`), which parse, check and call the library: the job's command lines
(:mod:`controller.ina.commands`), a held network's jobs (:mod:`controller.ina.jobstate`)
and what is printed (:mod:`controller.ina.tables`). :func:`register` adds both groups to
gradctl (listed in ``controller/registry.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import time
from pathlib import Path
from typing import Any

from controller import argtypes
from controller.cli import (
    PROG,
    UsageError,
    _addresses,
    _console,
    held_loss,
    held_state,
    network_args,
    network_topology,
)
from controller.ina import jobstate
from controller.ina.commands import host_setup, ina_commands, job_script
from controller.ina.tables import (
    admission_table,
    comparison_table,
    deploy_json,
    events_table,
    installed_table,
    placement_header,
    placement_json,
    policy_table,
    rates_table,
    switches_table,
    trace_table,
)
from controller.p4runtime import DeployError
from topologies import Topology
from topologies.spec import parse_topology
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
                       capacity: float, tor_in_budget: bool = False) -> Any:
    from controller.placement import PlacementError, PlacementProblem

    n = len(topo.switches())
    if budget > n:
        raise UsageError(f"budget K={budget} is larger than the {n} switches of {topo.name}")
    try:
        return PlacementProblem(topo, ps, workers, budget, capacity, tor_in_budget=tor_in_budget)
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


def run_place(args: argparse.Namespace) -> int:
    """``gradctl place``."""
    topo = parse_topology(args.topo)
    ps, workers = parse_hosts(topo, args.ps, args.workers)
    if args.fragments is not None and args.fragments < 1:
        raise UsageError(f"--fragments must be >= 1, got {args.fragments}")
    if args.plot:
        _check_output_path(args.plot, "--plot")
    problem = _placement_problem(topo, ps, workers, args.budget, args.capacity,
                                 args.tor_in_budget)
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


def _policy_path(args: argparse.Namespace) -> Path:
    """Where ``ina deploy`` writes the job's policy file (``--policy-out`` or its default)."""
    if args.policy_out:
        policy_path = Path(args.policy_out)
    elif args.run_dir:
        policy_path = Path(args.run_dir) / f"ina-job{args.job_id}.policy.json"
    else:
        policy_path = Path(f"ina-job{args.job_id}.policy.json")
    policy_path = policy_path.resolve()
    _check_output_path(str(policy_path), "--policy-out")
    return policy_path


def _timeout_us(args: argparse.Namespace) -> int | None:
    if args.aggregator_timeout_ms is None:
        return None
    if not 0 <= args.aggregator_timeout_ms <= 1e9:
        raise UsageError(f"--aggregator-timeout-ms must be within 0..1e9, got "
                         f"{args.aggregator_timeout_ms:g}")
    return round(args.aggregator_timeout_ms * 1000)


def ina_deploy(args: argparse.Namespace) -> int:
    """``gradctl ina deploy``."""
    from controller.ina import InaDeployment

    topo = network_topology(args)
    ps, workers = parse_hosts(topo, args.ps, args.workers)
    if not args.baseline and (args.budget is None or args.capacity is None):
        raise UsageError("--budget and --capacity are required (unless --baseline)")
    if args.values < 1:
        raise UsageError(f"--values must be >= 1, got {args.values}")
    addresses = _addresses(args, topo)
    policy_path = _policy_path(args)
    if not args.baseline:
        # the same checks as `place` (clear messages), before anything is installed
        _placement_problem(topo, ps, workers, args.budget, args.capacity, args.tor_in_budget)
    spec = {"job_id": args.job_id, "ps": ps, "workers": workers, "budget": args.budget,
            "capacity": args.capacity, "values": args.values, "scale_bits": args.scale_bits,
            "number_format": args.number_format,
            "values_per_packet": args.values_per_packet, "baseline": args.baseline,
            "policy": str(policy_path), "ddp": args.ddp, "tor_in_budget": args.tor_in_budget}
    job = jobstate.plan_job(topo, spec)
    timeout_us = _timeout_us(args)
    # On a held network the jobs deployed before stay: all are installed together (one
    # pipeline load), and its link emulation (net up --loss) goes in with them.
    held = held_state(args.run_dir) is not None
    others = ({k: v for k, v in jobstate.load_jobs(args.run_dir).items() if k != args.job_id}
              if held else {})
    jobs = [jobstate.plan_job(topo, o) for o in others.values()] + [job]
    if timeout_us is None and held:
        timeout_us = next((o.get("aggregator_timeout_us") for o in others.values()
                           if o.get("aggregator_timeout_us") is not None), None)
    spec["aggregator_timeout_us"] = timeout_us
    try:
        dep = InaDeployment(topo, addresses, jobs, loss=held_loss(args.run_dir),
                            aggregator_timeout_us=timeout_us, aggregator_ring=args.aggregator_ring)
    except DeployError as e:
        raise UsageError(f"job {args.job_id} cannot join the deployed jobs "
                         f"{sorted(others)}: {e}") from None
    spec["stamp"] = job.stamp  # drawn by the deployment; the job keeps it when redeployed
    t0 = time.monotonic()
    report = dep.deploy(timeout=args.timeout)
    took = time.monotonic() - t0
    try:
        job.write_policy(policy_path)
    except OSError as e:
        raise UsageError(f"--policy-out: cannot write {str(policy_path)!r}: {e}") from None
    if held:
        jobstate.save_jobs(args.run_dir, {**others, args.job_id: spec})
    aggs = job.aggregating_switches
    setup = host_setup(topo, [ps, *workers], aggs) if aggs else {}
    commands = ina_commands(job, policy_path, args.values, ddp=args.ddp)
    if args.json:
        print(json.dumps(deploy_json(topo, job, baseline=args.baseline, updates=report.updates,
                                     policy=str(policy_path), setup=setup, commands=commands),
                         indent=2))
        return 0
    console = _console()
    _print_job(console, args, job, topo)
    console.print(f"deployed to {topo.name}: {len(report.updates)} switches, {report.total} "
                  f"entries in {took:.2f} s", markup=False)
    if others:
        console.print(f"with the jobs deployed before: {', '.join(map(str, sorted(others)))} "
                      f"(all {len(jobs)} installed together)", markup=False)
    console.print(installed_table(topo, job, report.updates, dep.admission_switches))
    console.print(f"policy written to {policy_path}", markup=False)
    _print_commands(console, args, job, policy_path, setup, commands, held)
    return 0


def _print_job(console: Any, args: argparse.Namespace, job: Any, topo: Topology) -> None:
    """The job's first line: its hosts, fragments and placement."""
    if job.placement is None:
        console.print(f"job {job.job_id} (PS baseline, no aggregation): PS {job.ps}, "
                      f"{len(job.workers)} workers, {args.values} values = "
                      f"{job.num_fragments} fragments per worker", markup=False)
        return
    pl = job.placement
    console.print(f"job {job.job_id}: PS {job.ps}, {len(job.workers)} workers, {args.values} "
                  f"values = {job.num_fragments} fragments per worker; greedy placement K = "
                  f"{args.budget}: {', '.join(pl.switches) or '(none)'} + s_d {job.sd}, "
                  f"γ = {pl.gamma:.2f} Mbit/s per worker", markup=False)


def _print_commands(console: Any, args: argparse.Namespace, job: Any, policy_path: Path,
                    setup: dict[str, str], commands: dict[str, str], held: bool) -> None:
    """How to start the agents: in a Mininet CLI, or with ``gradctl net exec`` on a held
    network (then also written as a script)."""
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
        script.write_text(job_script(args.run_dir, job, setup, commands, prog=PROG))
        console.print(f"the same commands as a script (waits for every agent): sh {script}",
                      markup=False, soft_wrap=True)


def ina_counters(args: argparse.Namespace) -> int:
    """``gradctl ina counters``: the aggregators' events and drops, and the admission
    drops of the switches the job's hosts are attached to (and of ``--switch``)."""
    from controller.ina import InaDeployment

    topo = network_topology(args)
    roles: dict[str, str] = {}
    if not args.policy and not args.switch and held_state(args.run_dir) is not None:
        # a held network's deployed jobs
        args.policy = [j["policy"] for j in jobstate.load_jobs(args.run_dir).values()]
    for path in args.policy or []:
        for s, r in jobstate.policy_switches(topo, path).items():
            roles[s] = "s_d" if "s_d" in (r, roles.get(s)) else r
        for s in jobstate.policy_edges(topo, path):
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
    dep = InaDeployment(topo, addresses, [jobstate.counter_job(topo, aggregating)])
    counters = dep.read_counters(aggregating, switches, timeout=args.timeout)
    if args.json:
        print(json.dumps(counters, indent=2))
        return 0
    console = _console()
    if aggregating:
        console.print(f"ina_events / ina_drops of the aggregating switches of {topo.name}",
                      markup=False)
        console.print(events_table(topo, aggregating, roles, counters))
    else:
        console.print("the policy names no aggregating switch (PS baseline)", markup=False)
    console.print("ina_admission_drops (docs/trust.md): INA packets refused where they "
                  "entered the fabric; ip_options ... checksum_error: refused unparsed, "
                  "src_spoof: a host port's frame with another host's source (ingress_drops)",
                  markup=False)
    console.print(admission_table(topo, switches, roles, counters))
    return 0


def ina_undeploy(args: argparse.Namespace) -> int:
    """``gradctl ina undeploy``: remove one job from a held network; the others are
    installed again (one pipeline load); with none left, forward.p4. The link emulation
    stays."""
    from controller.deploy import deploy
    from controller.ina import InaDeployment

    if held_state(args.run_dir) is None:
        raise UsageError(f"{args.run_dir}: no network of 'gradctl net up' here")
    topo = network_topology(args)
    jobs = jobstate.load_jobs(args.run_dir)
    if args.job_id not in jobs:
        raise UsageError(f"no job {args.job_id} deployed on {args.run_dir} (deployed: "
                         f"{', '.join(map(str, sorted(jobs))) or 'none'})")
    gone = jobs.pop(args.job_id)
    addresses = _addresses(args, topo)
    loss = held_loss(args.run_dir)
    if jobs:
        timeout_us = next((j.get("aggregator_timeout_us") for j in jobs.values()
                           if j.get("aggregator_timeout_us") is not None), None)
        InaDeployment(topo, addresses, [jobstate.plan_job(topo, j) for j in jobs.values()],
                      loss=loss, aggregator_timeout_us=timeout_us).deploy(timeout=args.timeout)
    else:
        deploy(topo, addresses, loss=loss, timeout=args.timeout)
    jobstate.save_jobs(args.run_dir, jobs)
    Path(gone["policy"]).unlink(missing_ok=True)
    left = ", ".join(map(str, sorted(jobs))) or "none (forward.p4 everywhere)"
    print(f"job {args.job_id} removed from {args.run_dir}; jobs left: {left}")
    return 0


#: ``gradctl ina ACTION`` -> what runs it.
INA_ACTIONS = {"deploy": ina_deploy, "undeploy": ina_undeploy, "counters": ina_counters}


def run_ina(args: argparse.Namespace) -> int:
    """``gradctl ina ACTION``."""
    return INA_ACTIONS[args.ina_command](args)


# ----------------------------------------------------------------------------- parsers


def _job_args(sp: argparse.ArgumentParser, required: bool = True) -> None:
    """--ps, --workers, --budget and --capacity of a job (place and ina deploy)."""
    sp.add_argument("--ps", required=True, metavar="HOST", help="the parameter server")
    sp.add_argument("--workers", metavar="H2,H3,...|all", default="all",
                    help="comma-separated worker hosts, in rank order (default: all "
                         "hosts but the PS)")
    sp.add_argument("--budget", type=argtypes.natural, required=required, metavar="K",
                    help="programmable switches to place (s_d, the PS's ToR, aggregates "
                         "too and is not counted)")
    sp.add_argument("--capacity", type=argtypes.positive, required=required, metavar="C",
                    help="processing capacity of a programmable switch, Mbit/s (sum of "
                         "its input rates)")
    sp.add_argument("--tor-in-budget", action="store_true",
                    help="count s_d in the budget K: it aggregates only when placed, like any "
                         "other switch (default: s_d always aggregates, outside K)")


def register_place(sub: Any, topo_help: str) -> None:
    """Add ``place`` to gradctl's subparsers."""
    place = sub.add_parser(
        "place", help="place programmable switches for in-network aggregation",
        description="Choose K programmable switches for one PS and its workers (greedy + LP "
                    "of docs/placement.md, or a baseline), and print the switches, the "
                    "aggregation throughput γ, the per-worker split rates and the greedy "
                    "trace.")
    place.add_argument("topo", metavar="TOPO", help=topo_help)
    _job_args(place)
    place.add_argument("--method", choices=[*PLACEMENT_METHODS, "all"], default="greedy",
                       help="placement method; all: every method and its gap to the MILP "
                            "optimum (default greedy)")
    place.add_argument("--seed", type=argtypes.natural, default=0, help="seed of --method random (default 0)")
    place.add_argument("--time-limit", type=argtypes.positive, default=60.0, metavar="S",
                       help="time limit of the MILP in seconds (default 60)")
    place.add_argument("--fragments", type=argtypes.count, metavar="F",
                       help="also derive the per-fragment routing policy for F fragments "
                            "per worker (with --json: the policy file of docs/ina_policy.md)")
    place.add_argument("--json", action="store_true", help="print one JSON object")
    place.add_argument("--plot", metavar="FILE.png",
                       help="draw the topology, the placement and the LP's flows (PNG)")
    place.set_defaults(func=run_place)


def register_ina(sub: Any, topo_help: str) -> None:
    """Add ``ina`` (deploy, undeploy, counters) to gradctl's subparsers."""
    ina = sub.add_parser("ina", help="in-network aggregation jobs on a running network",
                         description="Deploy an in-network aggregation job, read its counters.")
    ina_sub = ina.add_subparsers(dest="ina_command", metavar="ACTION", required=True)
    ina.set_defaults(func=run_ina)

    idep = ina_sub.add_parser(
        "deploy", help="plan a job and install it on running switches",
        description="Plan an aggregation job (greedy + LP placement, per-fragment routing "
                    "policy), load ina.p4 on the aggregating switches and on every switch "
                    "with hosts (admission of the job's members, docs/trust.md) and "
                    "forward.p4 elsewhere (fresh pipelines), install routes, the job and "
                    "its RESULT multicast tree, write the policy file for the agents and print the "
                    "commands that start them.")
    network_args(idep, topo_help)
    _job_args(idep, required=False)
    idep.add_argument("--values", type=argtypes.values, required=True, metavar="N",
                      help="gradient size in values (--values-per-packet values a fragment)")
    idep.add_argument("--values-per-packet", type=int, choices=INA_VALUE_SIZES,
                      default=INA_VALUES, metavar="V",
                      help="values a packet carries: 64 (default), 128 or 256; the switches "
                           "load the ina.p4 compiled for it, so every job deployed on a network "
                           "has the same (docs/ina.md)")
    idep.add_argument("--job-id", type=argtypes.integer(0, 255), default=1, metavar="J", help="INA job id (default 1)")
    idep.add_argument("--scale-bits", type=argtypes.integer(0, 62), default=16, metavar="S",
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
    idep.add_argument("--aggregator-timeout-ms", type=argtypes.number(0.0, 1e9), metavar="MS",
                      help="an aggregator idle this long may be taken over by another "
                           "fragment (0: never; default: the program's, 1000)")
    idep.add_argument("--aggregator-ring", type=argtypes.integer(1, 1024), metavar="N",
                      help="consistent hashing of the aggregator index over aggregators "
                           "0..N-1 (changing N moves about 1/N of the fragments; default: "
                           "crc32 modulo all 1024)")
    idep.add_argument("--ddp", action="store_true",
                      help="print commands for PyTorch DDP ranks (hosts.ina.ddp_train --hook "
                           "ina; --values: the model's parameter count) and a PS that serves "
                           "rounds until they stop (--rounds 0)")
    idep.add_argument("--json", action="store_true", help="machine-readable output")

    iund = ina_sub.add_parser(
        "undeploy", help="remove one job from a network of 'gradctl net up'",
        description="Remove job J from the network held in DIR; the jobs deployed besides "
                    "it are installed again (fresh pipelines: do it between their runs) "
                    "and with none left every switch runs forward.p4. Link emulation stays.")
    iund.add_argument("run_dir", metavar="DIR", help="run directory printed by net up")
    iund.add_argument("job_id", metavar="J", type=argtypes.integer(0, 255), help="the job id given to ina deploy")
    iund.add_argument("--timeout", type=argtypes.positive, default=30.0, metavar="S",
                      help="seconds to wait for each switch (default 30)")
    iund.set_defaults(topo=None)

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


def register(sub: Any, topo_help: str) -> None:
    """Add ``place`` and ``ina`` to gradctl's subparsers."""
    register_place(sub, topo_help)
    register_ina(sub, topo_help)
