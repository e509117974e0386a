"""``gradctl train`` / ``python -m experiments --mode train`` (``make compare``): which
scheme trains my model fastest on my network? Time to accuracy over seeds, with CIs.

Every scheme trains the same work on the same emulated network, one run per (scheme,
seed): the model and initial weights of ``--model`` and the seed, the same data shards,
per-rank batch, batch order and learning rate, the same training hosts and link rates.
Each rank is ``python -m hosts.trainer`` in its Mininet host; only the line that sums the
gradients differs (see :mod:`hosts.trainer`), and every scheme's gradients cross the
emulated network through its own agents and P4 programs:

=============== ============================================================ ==========
scheme          gradients summed by                                          P4
=============== ============================================================ ==========
gloo            torch.distributed's all-reduce (gloo, TCP): the reference    forward.p4
ps              the INA agents with no aggregating switch (all to the PS)    ina.p4
ina             in-network aggregation (greedy + LP placement, ``--budget``) ina.p4
ring            ring all-reduce over TCP (``hosts.bml.collective``)          forward.p4
bml             BCube hierarchical synchronization on BCube(n, k), n^k =     forward.p4
                workers
rail_ring       k concurrent rings, one per rail of a k-rail network (BML's  forward.p4
                NIC count)
rail_sharded_ps k concurrent sharded PSs, one per rail of the same k-rail    forward.p4
                network
=============== ============================================================ ==========

gloo, ps, ina and ring run on one topology (``--topo``, default a star of the workers
and a PS host); bml needs its own BCube with the same number of training hosts and the
same per-NIC link rate, so each of its hosts has k NICs (the table says so); rail_ring
and rail_sharded_ps (not in the default set: ``--scheme bml,rail_ring,rail_sharded_ps``)
give ring all-reduce and the sharded PS the same k NICs per host, NIC j into rail j's own
leaf-spine, k rings or k sharded PSs at once on 1/k each (both on one k-rail network).
``--slow`` names a training host of the shared topology; on the BCube and the rails the
same rank is slowed.

Per scheme it reports, as mean and 95 % confidence interval over the seeds (Student t):
the time to ``--target-accuracy`` (read off rank 0's evaluations, interpolated), the
final test and held-out accuracy, the sync and compute time per iteration, and the paired
per-seed ratio of each scheme's time to the reference's (``--reference``, same seed,
same data; by default gloo if run, else ring, else the first scheme). A run that does
not reach the target within ``--max-time`` is reported as such. Every run also records
the ideal bound of one synchronization (``experiments.ideal``: its own traffic, no
re-sends), the bytes that actually crossed the busiest link (re-sends included), the
re-sent bytes, the bytes that reached the PS and the CPU of switches and agents in the
training window, and gets a verdict, ``link-bound`` or ``emulator-bound``
(``experiments.fidelity``); ratios between emulator-bound runs give no verdict, and
``--fidelity auto`` reruns such a comparison dilated (``experiments.fidelity_auto``).

Plugins: a scheme with its own agents (token broadcast, NDN-PS and its IP baselines,
differentiated transmission) joins through a module ``experiments/train_<scheme>.py``
(:data:`PLUGINS`; a module several schemes name gives each its plugin by
``plugin(scheme)``) that provides ``P4`` (its programs, for the plan), ``KILL_SUPPORTED``,
``setting(args, shared) -> Setting`` (its topology with the same training hosts count and
per-NIC rate as ``shared``; raise :class:`HarnessError` for what it cannot do),
``deploy(net, setting, args, plan)`` and ``run(net, args, plan, setting, seed, dir) ->
RunRecord``, which trains the same model, seed, shards, batch and learning rate
(``plan``) and fills rank 0's ``curve`` (``t`` training seconds without evaluation
time, ``accuracy``, ``heldout``, ``epoch``, ``step``), ``iterations``, the sync and compute
seconds per iteration, ``models_identical``, ``agent_cpu_s``, ``retransmissions``,
``ps_rx_bytes``, ``ok``/``error``; :func:`run_one` measures the links and CPU around it
and :func:`complete` derives the rest the same way for every scheme.

Results: ``<out-dir>/train-<time>/`` with ``manifest.json`` (commit, target, options,
seeds, load), one ``runs/<scheme>-seed<S>.json`` per run (``--resume DIR`` skips the
runs already there), ``summary.json``, ``tables.txt`` (the table in full; also as
``tables.json`` and CSV), ``accuracy_vs_time.png`` and ``time_to_accuracy.png``.
``--dry-run`` prints the plan and exits; it and every run first warn when the plan is
unlikely to reach the target. The work is the same at any worker count: a global batch
(``--global-batch``) split over the ranks, the learning rate scaled with it, epochs as
passes over the training set (:mod:`experiments.scaling`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.table import Table

from controller import argtypes, registry
from controller.output import TableConsole
from experiments import fidelity_auto, scaling
from experiments.harness_records import HarnessError, Plan, RunRecord, Setting
from experiments.harness_report import fmt_interval as fmt_interval  # the tables of bench/
from experiments.harness_report import manifest, pick_reference, plot, print_table, summarize
from experiments.harness_schemes import (  # noqa: F401 (read here by tests and plugins)
    ALL_SCHEMES,
    BUILTIN_SCHEMES,
    COLLECTIVE_SCHEMES,
    DEFAULT_SCHEMES,
    DIFF_VARIANTS,
    P4_PROGRAM,
    RAIL_SCHEMES,
)
from experiments.harness_trainers import run_trainers
from experiments.runner import log as _log
from experiments.runner import prepare_hosts

console = TableConsole()
#: The module doc's first paragraph: the help text of ``gradctl train`` and of the mode.
SUMMARY = __doc__.split("\n\n")[0]

# Schemes with their own agents plug in as a module of this package (see
# "Plugins" in the module doc), registered in controller/registry.py; one that is not
# there yet is reported as pending.
PLUGINS = registry.PLUGINS


def _plugin(scheme: str) -> Any:
    import importlib

    mod = importlib.import_module(PLUGINS[scheme])
    # a module serving several schemes (``train_ndn``: its IP baselines) picks by name
    return mod.plugin(scheme) if hasattr(mod, "plugin") else mod


def _landed(scheme: str) -> bool:
    import importlib.util

    return scheme not in PLUGINS or importlib.util.find_spec(PLUGINS[scheme]) is not None


HARNESS_SCHEMES = tuple(s for s in ALL_SCHEMES if s in BUILTIN_SCHEMES or _landed(s))


# ----------------------------------------------------------------------------- options


def _kv(spec: str, what: str) -> tuple[str, str]:
    key, sep, val = spec.partition("=" if what != "--kill" else "@")
    if not sep or not key or not val:
        raise HarnessError(f"{what} {spec!r}: expected {'HOST@T' if what == '--kill' else 'KEY=VALUE'}")
    return key.strip(), val.strip()


def build_parser(add_help: bool = True, prog: str = "python -m experiments --mode train") -> argparse.ArgumentParser:
    """The harness's options; the common ones are the vocabulary every mode shares
    (``experiments/options.py``)."""
    from experiments import options

    p = argtypes.Parser(prog=prog, add_help=add_help, description=SUMMARY,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scheme", default=",".join(DEFAULT_SCHEMES),
                   help=f"comma-separated subset of {','.join(ALL_SCHEMES)} (default "
                        f"{','.join(DEFAULT_SCHEMES)}; the harness runs {','.join(HARNESS_SCHEMES)} today)")
    p.add_argument("--reference", default=None,
                   help="the scheme the ratios are taken against (default: gloo if run, else ring, else the first)")
    p.add_argument("--model", default="digits", help="model: digits (CNN, 3,818 parameters), digits-wide, mlp (126k) or mlp-1m (1.1M, 4.5 MB)")
    p.add_argument("--data", default="digits", help="data set: digits (bundled with scikit-learn) or synthetic")
    p.add_argument("--epochs", type=argtypes.count, default=4,
                   help="passes over the training set per run, whatever --workers (default 4: the digits CNN reaches its target)")
    p.add_argument("--global-batch", type=argtypes.count, default=64,
                   help="examples per SGD step over all ranks, split evenly (default 64; see experiments/scaling.py)")
    p.add_argument("--batch", type=argtypes.count, default=None,
                   help="per-rank batch size instead (default: --global-batch // --workers)")
    p.add_argument("--lr", type=argtypes.positive, default=None,
                   help="SGD learning rate (default: the model's, scaled linearly with the global batch)")
    p.add_argument("--max-steps", type=argtypes.natural, default=0, help="cap on steps per epoch (0: none)")
    p.add_argument("--eval-every", type=argtypes.natural, default=0,
                   help="evaluate every K steps besides each epoch's end (default: 4 per epoch)")
    p.add_argument("--topo", default=None, help="topology (default star:<workers+1>; the first host is the PS)")
    p.add_argument("--slow", action="append", default=[], metavar="HOST=F",
                   help="HOST computes F times slower (repeatable)")
    p.add_argument("--kill", action="append", default=[], metavar="HOST@T",
                   help="kill HOST's rank T s into training (schemes that tolerate a lost node)")
    p.add_argument("--compute-time", type=argtypes.nonnegative, default=0.0,
                   help="fix compute per batch at S seconds (dilated time, labelled; 0: real)")
    p.add_argument("--budget", type=argtypes.natural, default=0,
                   help="INA: aggregating switches besides s_d (default 0: s_d aggregates)")
    p.add_argument("--tor-in-budget", action="store_true",
                   help="INA: count s_d in --budget (it aggregates only when placed; default: "
                        "s_d aggregates outside the budget)")
    p.add_argument("--resume", default=None, metavar="DIR", help="continue a results directory")
    p.add_argument("--dry-run", action="store_true", help="print the plan and exit")
    fidelity_auto.add_arguments(p)
    options.add_common(p, "train", takes={
        "--seeds": {"default": 3}, "--seed": {"default": 0},
        "--target-accuracy": {"default": None}, "--workers": {"default": 4},
        "--bw": {"default": 20.0}, "--loss": {}, "--max-time": {"default": 300.0},
        "--target": {}, "--out-dir": {}}, rejects={})
    p.set_defaults(prog=prog)  # run() reports a bad combination as this command's error
    return p


def _check_schemes(args: argparse.Namespace) -> list[str]:
    """The schemes of ``--scheme``, checked with the options every scheme shares."""
    schemes = [s.strip() for s in args.scheme.split(",") if s.strip()]
    if not schemes:
        raise HarnessError("--scheme: no scheme given")
    unknown = [s for s in schemes if s not in ALL_SCHEMES]
    if unknown:
        raise HarnessError(f"--scheme: unknown {', '.join(unknown)} (choose from {', '.join(ALL_SCHEMES)})")
    pending = [s for s in schemes if s not in HARNESS_SCHEMES]
    if pending:
        raise HarnessError(f"--scheme {', '.join(pending)}: not in the harness yet (its agents train with "
                           f"their own loop and no {PLUGINS[pending[0]]} plugs them in); it runs "
                           f"{', '.join(HARNESS_SCHEMES)} today")
    if len(set(schemes)) != len(schemes):
        raise HarnessError("--scheme: a scheme is named twice")
    args.reference_picked = args.reference is None
    args.reference = pick_reference(schemes, args.reference)
    if args.seeds < 1:
        raise HarnessError("--seeds must be at least 1")
    if args.epochs < 1 or (args.batch or 1) < 1 or args.global_batch < 1 or args.workers < 1:
        raise HarnessError("--epochs, --batch, --global-batch and --workers must be at least 1")
    if args.compute_time < 0 or args.max_time <= 0 or args.bw <= 0:
        raise HarnessError("--compute-time must be >= 0, --max-time and --bw > 0")
    no_kill = [s for s in schemes if not (s in PLUGINS and getattr(_plugin(s), "KILL_SUPPORTED", False))]
    if args.kill and no_kill:
        raise HarnessError(f"--kill: not supported by {', '.join(no_kill)} (a synchronous all-reduce "
                           "cannot lose a rank; run --kill with the schemes that tolerate it)")
    return schemes


def _topology(args: argparse.Namespace) -> tuple[Any, str, list[str]]:
    """``--topo`` at ``--bw``: (topology, PS host, training hosts)."""
    from controller.cli import UsageError
    from topologies import TopologyError
    from topologies.spec import parse_topology

    try:
        topo = parse_topology(args.topo or f"star:{args.workers + 1}")
    except (UsageError, TopologyError) as e:
        raise HarnessError(str(e)) from None
    for _, _, d in topo.graph.edges(data=True):
        d["capacity"] = float(args.bw)
    hosts = topo.hosts()
    if len(hosts) < args.workers + 1:
        raise HarnessError(f"{topo.name} has {len(hosts)} hosts: --workers {args.workers} needs "
                           f"{args.workers + 1} (one is the PS)")
    return topo, hosts[0], hosts[1:args.workers + 1]


def _slow_hosts(args: argparse.Namespace, workers: list[str]) -> dict[str, float]:
    """``--slow HOST=F``: training host -> factor (>= 1)."""
    slow = {}
    for spec in args.slow:
        h, f = _kv(spec, "--slow")
        if h not in workers:
            raise HarnessError(f"--slow {spec}: {h} is not a training host ({', '.join(workers)})")
        try:
            slow[h] = float(f)
        except ValueError:
            raise HarnessError(f"--slow {spec}: {f!r} is not a number") from None
        if slow[h] < 1.0:
            raise HarnessError(f"--slow {spec}: the factor must be >= 1")
    return slow


def _settings(args: argparse.Namespace, schemes: list[str], shared: Setting,
              loss: dict) -> dict[str, Setting]:
    """Where each scheme runs: the shared topology, BML's BCube and the k-rail network
    (the same training hosts count and per-NIC rate), or the plugin's own."""
    settings = {s: shared for s in schemes if s not in ("bml", *RAIL_SCHEMES)}
    for own in [s for s in ("bml", *RAIL_SCHEMES) if s in schemes]:
        from controller.bcube import baseline_rails, bcube_network_topology, bcube_shape

        shape = bcube_shape(args.workers)
        if shape is None:
            raise HarnessError(f"--scheme {own}: BCube(n, k) has n^k servers (n, k >= 2); --workers "
                               f"{args.workers} is not one (4, 8, 9, 16, 25, 27, ...)")
        if loss:
            raise HarnessError(f"--loss names ports of the shared topology, and {own} runs on its "
                               f"own network: run {own} without --loss (or the others without it)")
        rails = next((settings[r] for r in RAIL_SCHEMES if r in settings), None)
        if own != "bml" and rails is not None:  # the k-rail schemes share one network
            settings[own] = rails
            continue
        if own == "bml":
            btopo = bcube_network_topology(*shape, float(args.bw))
        else:  # the same NIC count as BML's BCube for these workers: k rails
            btopo = baseline_rails(args.workers, shape[1], float(args.bw))
        settings[own] = Setting(btopo, None, btopo.hosts()[:args.workers],
                                shape[1] * float(args.bw))
    for s in schemes:
        if s in PLUGINS:
            settings[s] = _plugin(s).setting(args, shared)
    return settings


def make_plan(args: argparse.Namespace) -> Plan:
    """Check the options against each other and the topology; raise HarnessError."""
    from controller.deploy import DeployError, check_loss
    from hosts import training as tr

    schemes = _check_schemes(args)
    try:
        model = tr.build_model(args.model, args.seed)
        data = tr.load_data(args.data, args.seed)
    except ValueError as e:
        raise HarnessError(str(e)) from None
    topo, ps, workers = _topology(args)
    slow = _slow_hosts(args, workers)
    try:
        loss = check_loss(topo, dict(args.loss))  # ((switch, port), rate) pairs
    except DeployError as e:
        raise HarnessError(str(e)) from None
    if "ina" in schemes:  # the placement's limits, before anything starts
        from experiments import options

        try:
            options.check_ina_budget(topo, ps, workers, args.budget)
        except argtypes.OptionError as e:
            raise HarnessError(str(e)) from None
    shared = Setting(topo, ps, workers, float(args.bw))
    settings = _settings(args, schemes, shared, loss)
    work, target = scaling.plan_work(args, len(data.y_train))
    eval_every = args.eval_every or max(1, work.steps_per_epoch // 4)
    seeds = list(range(args.seed, args.seed + args.seeds))
    return Plan(schemes, seeds, topo, ps, workers, settings, work.lr, target, eval_every,
                work.steps_per_epoch, int(sum(p.numel() for p in model.parameters())), slow, loss,
                work.batch, work.global_batch, work.rule, len(data.y_train))


# ----------------------------------------------------------------------------- one run


def collective_plan(setting: Setting, scheme: str, values: int) -> dict[str, Any]:
    """The ring, BML or k-rail plan of the training hosts (``controller.bcube``), for
    ``values`` parameters at the INA jobs' fixed-point scale."""
    from controller.bcube import bcube_plan, bcube_shape, fat_tree_plan, rail_plan

    scale_bits = 16
    if scheme == "bml":
        n, k = bcube_shape(len(setting.workers)) or (0, 0)
        return bcube_plan(setting.topo, n, k, values, scale_bits)
    if scheme in RAIL_SCHEMES:
        return rail_plan(setting.topo, scheme, len(setting.workers), values, scale_bits)
    plan = fat_tree_plan(setting.topo, scheme, len(setting.workers), values, scale_bits)
    # the training hosts, not the topology's first hosts (the first one is the PS)
    plan["hosts"] = list(setting.workers)
    plan["ips"] = [[setting.topo.host_ip(h, 0)] for h in setting.workers]
    plan["ifaces"] = [[setting.topo.iface(h, 0)["name"]] for h in setting.workers]
    return plan


def run_one(net: Any, args: argparse.Namespace, plan: Plan, scheme: str, seed: int, job: Any,
            run_dir: Path, port: int) -> RunRecord:
    """Train once (``scheme``, ``seed``) on the live network; the record of the run, with
    what crossed the links and the CPU it took measured around it."""
    from experiments.accounting import Snapshot, TrainingWindow, time_split
    from experiments.fidelity import ideal_for

    d = run_dir / f"{scheme}-seed{seed}"
    d.mkdir(parents=True, exist_ok=True)
    setting = plan.settings[scheme]
    before = Snapshot.take(net)
    t0 = time.monotonic()
    with TrainingWindow(net, d) as window:
        if scheme in PLUGINS:
            rec = _plugin(scheme).run(net, args, plan, setting, seed, d)
        else:
            collective = (collective_plan(setting, scheme, plan.parameters)
                          if scheme in COLLECTIVE_SCHEMES else None)
            rec = run_trainers(net, args, plan, scheme, seed, job, d, port, collective)
    rec.wall_s = time.monotonic() - t0
    split = time_split(setting.topo, before, Snapshot.take(net), {"agents": rec.agent_cpu_s})
    ideal = ideal_for(plan, scheme, getattr(args, "budget", 0), job,
                      tor_in_budget=getattr(args, "tor_in_budget", False))
    if ideal.get("error"):
        _log(f"[yellow]no ideal bound for {scheme}: {ideal['error']}[/yellow]")
    complete(rec, split.to_dict(), plan, args, window.result(), ideal)
    return rec


def complete(rec: RunRecord, split: dict[str, Any], plan: Plan, args: argparse.Namespace,
             window: dict[str, float] | None = None, ideal: dict[str, Any] | None = None) -> None:
    """Fill what every scheme's record gets the same way: the links' bytes, the actual
    bound (measured bytes) and CPU measured around the run, the training window's CPU,
    the ideal bound of one synchronization, then what :func:`derive` computes."""
    rec.busiest_link, rec.busiest_link_bytes = split["busiest_link"], split["busiest_link_bytes"]
    rec.line_rate_bound_s = split["line_rate_bound_s"]
    rec.switch_cpu_s = split["switch_cpu_s_total"]
    rec.cores = os.cpu_count() or 1
    if window is not None:
        rec.window_s, rec.window_switch_cpu_s = window["window_s"], window["switch_cpu_s"]
        rec.window_busiest_switch_cpu_s = window.get("busiest_switch_cpu_s")
        rec.window_switch_wait_s = window.get("switch_wait_s")
        rec.window_busiest_switch_wanted_s = window.get("busiest_switch_wanted_s")
        rec.window_agent_cpu_s = window.get("agent_cpu_window_s")
        rec.window_agent_wait_s = window.get("agent_wait_s")
        rec.machine_busy, rec.rx_drops = window.get("machine_busy"), window.get("rx_drops")
    if ideal and not ideal.get("error"):
        rec.ideal_bound_s = ideal["ideal_bound_s"]
        rec.ideal_busiest_link = ideal["ideal_busiest_link"]
        rec.ideal_busiest_link_bytes = ideal["ideal_busiest_link_bytes"]
    derive(rec, plan, args)


def derive(rec: RunRecord, plan: Plan, args: argparse.Namespace) -> None:
    """From a record's curve and measurements: final accuracy, time and steps to target,
    the bound to target, the fidelity verdict (also for records read back by ``--resume``)."""
    from experiments.fidelity import judge
    from experiments.stats import time_to_target

    rec.time_to_target_s = rec.steps_to_target = rec.bound_to_target_s = None
    if rec.curve:
        rec.final_accuracy, rec.final_heldout = rec.curve[-1]["accuracy"], rec.curve[-1].get("heldout")
        accs = [x["accuracy"] for x in rec.curve]
        tt = time_to_target([x["t"] for x in rec.curve], accs, plan.target_accuracy)
        if tt is not None and tt <= args.max_time:
            rec.time_to_target_s = tt
            rec.steps_to_target = time_to_target([x["step"] for x in rec.curve], accs,
                                                 plan.target_accuracy)
    if rec.ideal_bound_s is None and rec.scheme in plan.settings and rec.iterations:
        from experiments.fidelity import ideal_for  # a record saved before the ideal bound

        rec.ideal_bound_s = ideal_for(plan, rec.scheme, getattr(args, "budget", 0),
                                     tor_in_budget=getattr(args, "tor_in_budget", False)).get("ideal_bound_s")
    if rec.steps_to_target is not None and rec.iterations:
        rec.bound_to_target_s = rec.steps_to_target * ((rec.compute_s_per_iter or 0.0)
                                                       + (rec.ideal_bound_s or 0.0))
    judge(rec)  # re-sent bytes, x bound, the training window's CPU share, the verdict
    if rec.ok and not rec.models_identical:
        rec.ok, rec.error = False, "the ranks' models differ"


# ----------------------------------------------------------------------------- main


def p4_of(scheme: str) -> str:
    """The P4 program(s) a scheme's switches run."""
    return _plugin(scheme).P4 if scheme in PLUGINS else P4_PROGRAM[scheme]


def print_plan(plan: Plan, args: argparse.Namespace) -> None:
    """The plan, for ``--dry-run`` and at the start of a run."""
    t = Table(title="plan")
    for col in ("scheme", "topology", "P4", "training hosts", "NIC capacity per host", "seeds"):
        t.add_column(col)
    for s in plan.schemes:
        st = plan.settings[s]
        nics = round(st.nic_mbit / args.bw)
        t.add_row(s, st.topo.name, p4_of(s), ", ".join(st.workers),
                  f"{st.nic_mbit:g} Mbit/s" + (f" ({nics} NICs)" if nics > 1 else ""),
                  ", ".join(map(str, plan.seeds)))
    console.print(t)
    console.print(f"{args.model}: {plan.parameters:,} parameters; {args.data}; {args.epochs} epochs of "
                  f"{plan.steps_per_epoch} steps, per-rank batch {plan.batch}, lr {plan.lr:.4g}, "
                  f"evaluation every {plan.eval_every} steps; target {plan.target_accuracy:.0%} "
                  f"test accuracy; PS {plan.ps}; max {args.max_time:g} s a run"
                  + (f"; loss {', '.join(f'{s}:{p}={r:g}' for (s, p), r in plan.loss.items())}"
                     if plan.loss else "")
                  + (f"; slow {', '.join(f'{h} x{f:g}' for h, f in plan.slow.items())}" if plan.slow else "")
                  + (f"; DILATED{f' {args.dilation}x' if getattr(args, 'dilation', 1) > 1 else ''}: compute "
                     f"fixed at {args.compute_time:g} s per batch" if args.compute_time else ""))
    console.print(f"work: {plan.rule}; {args.epochs} x {plan.steps_per_epoch} x {plan.global_batch} = "
                  f"{args.epochs * plan.steps_per_epoch * plan.global_batch:,} samples on every scheme")
    console.print(f"reference: {args.reference}" + (" (picked: gloo if run, else ring, else the first scheme; "
                                                      "--reference names another)"
                                                      if getattr(args, "reference_picked", False) else ""))


def run(args: argparse.Namespace) -> int:
    """The harness (see the module doc); 0 when every run trained with identical models."""
    try:
        plan = make_plan(args)
    except HarnessError as e:  # one line, argparse's shape, before anything starts
        print(f"{getattr(args, 'prog', 'python -m experiments --mode train')}: error: {e}",
              file=sys.stderr)
        return 2
    print_plan(plan, args)
    for line in scaling.plan_warnings(plan, args):  # before anything starts
        console.print(f"[yellow]warning: {line}[/yellow]")
    if args.dry_run:
        return 0
    if os.geteuid() != 0:
        console.print("[red]the harness needs root (network namespaces)[/red]")
        return 2
    run_dir = _open_run_dir(args, plan)
    records, todo = _runs_done(run_dir, plan, args)
    records += _run_todo(args, plan, run_dir, todo)
    rc = _report(run_dir, records, plan, args)
    return fidelity_auto.continue_auto(args, records, rc, run, lambda m: console.print(f"[yellow]{m}[/yellow]"))


def _open_run_dir(args: argparse.Namespace, plan: Plan) -> Path:
    """The results directory (new, or ``--resume``'s) with its manifest written."""
    dilated = f"-dilated{args.dilation}x" if getattr(args, "dilation", 1) > 1 else ""
    run_dir = Path(args.resume) if args.resume else Path(args.out_dir).resolve() / (
        time.strftime("train-%Y%m%d-%H%M%S") + dilated)
    (run_dir / "runs").mkdir(parents=True, exist_ok=True)
    mf = run_dir / "manifest.json"
    if mf.exists():  # resumed: keep where the first runs came from, note this continuation
        man = json.loads(mf.read_text())
        man.setdefault("resumed", []).append(manifest(args, plan))
    else:
        man = manifest(args, plan)
    mf.write_text(json.dumps(man, indent=2, default=str))
    return run_dir


def _runs_done(run_dir: Path, plan: Plan,
               args: argparse.Namespace) -> tuple[list[RunRecord], list[tuple[str, int]]]:
    """The records already in ``run_dir/runs`` (re-derived) and the (scheme, seed) to run."""
    records: list[RunRecord] = []
    todo = []
    for s in plan.schemes:
        for seed in plan.seeds:
            f = run_dir / "runs" / f"{s}-seed{seed}.json"
            if f.exists():
                known = {k: v for k, v in json.loads(f.read_text()).items()
                         if k in RunRecord.__dataclass_fields__}
                rec = RunRecord(**known)
                derive(rec, plan, args)  # with this version's derivations
                records.append(rec)
            else:
                todo.append((s, seed))
    if records:
        _log(f"resuming {run_dir}: {len(records)} run(s) done, {len(todo)} to go")
    return records, todo


def _run_todo(args: argparse.Namespace, plan: Plan, run_dir: Path,
              todo: list[tuple[str, int]]) -> list[RunRecord]:
    """Every (scheme, seed) of ``todo``, one network per topology, each record saved."""
    from controller.deploy import deploy
    from controller.ina import InaDeployment, InaJob
    from experiments.ina import switch_neighbors
    from topologies.network import Network

    topo = plan.topo
    jobs = {"ps": InaJob.plan(topo, plan.ps, plan.workers, 0, 1000.0, plan.parameters, aggregate=False),
            "ina": InaJob.plan(topo, plan.ps, plan.workers, args.budget, 1000.0, plan.parameters,
                               tor_in_budget=getattr(args, "tor_in_budget", False))}
    groups: dict[str, list[tuple[str, int]]] = {}
    for s, seed in todo:
        groups.setdefault(plan.settings[s].key, []).append((s, seed))
    records: list[RunRecord] = []
    i = 0
    for key, group in groups.items():
        setting = plan.settings[group[0][0]]
        with Network(setting.topo, target=args.target, log=_log) as net:
            addresses = net.grpc_addresses()
            if setting.ps is not None:
                switch_neighbors(net, setting.topo, jobs["ina"].aggregating_switches)
            prepare_hosts(net, setting.workers)
            deployed = None
            for s, seed in group:
                i += 1
                if deployed != s:
                    if s in PLUGINS:
                        _plugin(s).deploy(net, setting, args, plan)
                    elif s in ("ina", "ps"):
                        InaDeployment(setting.topo, addresses, [jobs[s]], loss=plan.loss).deploy()
                    else:
                        deploy(setting.topo, addresses, loss=plan.loss if key == topo.name else None)
                    deployed = s
                _log(f"[{i}/{len(todo)}] {s}, seed {seed}: training on {key} ...")
                rec = run_one(net, args, plan, s, seed, jobs.get(s), run_dir / "agents",
                              29500 + i % 100)
                tt = f"{rec.time_to_target_s:.1f} s" if rec.time_to_target_s else "not reached"
                _log(f"[{i}/{len(todo)}] {s}, seed {seed}: "
                     + (f"final accuracy {rec.final_accuracy}, target {tt}, "
                        f"sync {rec.sync_s_per_iter or 0:.3f} s/iter, ideal {rec.ideal_bound_s or 0:.3f} "
                        f"(x {rec.x_bound or 0:.1f}), {rec.fidelity}" if rec.ok else f"[red]failed: {rec.error}[/red]"))
                (run_dir / "runs" / f"{s}-seed{seed}.json").write_text(json.dumps(asdict(rec), indent=1))
                records.append(rec)
    return records


def _report(run_dir: Path, records: list[RunRecord], plan: Plan, args: argparse.Namespace) -> int:
    """The table, ``summary.json`` and the plots; 0 when every run is ok."""
    records.sort(key=lambda r: (plan.schemes.index(r.scheme), r.seed))
    rows = summarize(records, plan, args.reference)
    table = print_table(rows, plan, args)
    console.save_to(run_dir)  # the whole table: run_dir/tables.txt, tables.json, CSV
    console.print(table)  # folded into key/value rows where the terminal is narrower
    if any(r["cpu_bound_runs"] for r in rows):
        from experiments.fidelity import CPU_SATURATED, X_LINK

        console.print(f"[yellow]emulator-bound runs: above {X_LINK:g}x their ideal bound while the CPU "
                      f"set the pace in the training window (the rules beside the verdict, "
                      f"{CPU_SATURATED:.0%} of {os.cpu_count()} cores: experiments/fidelity.py): their "
                      "times are the emulator's, and their ratios give no verdict[/yellow]")
    summary = {"manifest": json.loads((run_dir / "manifest.json").read_text()),
               "schemes": rows, "runs": [asdict(r) for r in records]}
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    plot(run_dir, records, rows, plan, args)
    console.print(f"results: {run_dir}/summary.json, tables.txt, accuracy_vs_time.png, time_to_accuracy.png")
    return 0 if all(r.ok for r in records) else 1


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m experiments --mode train``."""
    return run(build_parser().parse_args(argv))


def register(sub: Any, topo_help: str) -> None:
    """``gradctl train``: the same harness and options."""
    p = sub.add_parser("train", parents=[build_parser(add_help=False, prog="gradctl train")],
                       help="time to accuracy of every scheme on the same model and network",
                       description=SUMMARY)
    p.set_defaults(func=run)
