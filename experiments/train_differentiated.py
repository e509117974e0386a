"""Differentiated transmission (differentiated) in the time-to-accuracy harness.

``gradctl train --scheme gloo,differentiated`` trains the harness's model with
``hosts.differentiated``'s agents: every worker splits its gradient into blocks by model
structure, ranks them by SANE contribution and sends the important ones over TCP on the
switch's top priority queue and the others over UDP on lower queues, one per level; the
PS rebuilds each worker's gradient with zeros where blocks are missing, sums, takes the
SGD step and sends the parameters back to every worker (so the models stay identical
even when blocks are lost).

The same work as every other scheme (see :mod:`experiments.train`): the workers build
``hosts.training.build_model(--model, seed)``, load ``load_data(--data, seed)``, train
on ``worker_shard(data, rank, world)`` with the per-rank ``--batch`` in the order of
``batches(x, y, batch, epoch, seed)`` (``--batch-seed seed``: the trainer's order, not
the agents' own ``seed * 1000 + rank``), the plan's first ``steps_per_epoch`` full
batches, and the PS applies ``w <- w - lr * sum / n`` with the plan's learning rate, for
``--epochs`` epochs; ``--slow`` (per training host) and ``--compute-time`` act per rank
as in ``hosts.trainer``. Rank 0 prints the evaluation records (``t`` without evaluation
time, test and held-out accuracy, weights hash) every ``eval_every`` steps and at each
epoch's end; every rank prints its weights hash at the same points.

Where it runs: the shared topology when it is a star with the PS (the harness's default
``star:<workers+1>``: PS ``shared.ps``, training hosts ``shared.workers``, one switch),
since the technique needs one congested switch port to the PS with strict-priority
queues. The harness starts its networks with one queue per port, so this plugin hands
back the same topology (same hosts, addresses, ports, link rates) under its own name,
``<name>+pq8``, whose switches start with eight priority queues: the harness then runs
differentiated on a network of its own, and the other schemes' network is untouched.
On BMv2 (``simple_switch_grpc --priority-queues 8``), whose priority queues have only
independent per-queue rates and no rate shared by a port's queues, the PS port's rate is
cut into a static partition among the queues instead (as ``experiments/differentiated.py``
does there), and the run's report says so.

Queue set-up (:func:`qos_setup`), ``experiments.differentiated.configure``'s:
forward.p4 with the DSCP -> priority map of ``--levels`` 3 (EF on priority 7; levels on
6, 3, 0), and on the switch port to the PS a line rate shared by its queues in strict
priority (BMv2: a static partition of it, half to the top queue) of ``--bw`` in
full-size frames (``bw * 1e6 / 8 / 1514`` packets/s: 1,651 at 20
Mbit/s; the embedded target's rates count packets, not bytes, so a smaller packet costs a
full one's share and the switch queue, not tc, is the bottleneck whenever the mix has
small packets), 64 packets per queue. The agents' settings are those of the experiment:
quantile 0.5 (half the blocks important), alpha 0.5, 3 levels, blocks of 64 values,
a 10 ms grace for unreliable blocks.

Variants, on request (``gradctl train --scheme differentiated,differentiated-ef,...``),
the same agents, network and queues with other options (:data:`VARIANTS`):
``differentiated-reliable`` (every block over TCP on the top queue: the all-reliable
baseline), ``differentiated-ef`` (SANE with error feedback: a worker's blocks that did
not go into the PS's update join their next gradient), ``differentiated-random-ef`` and
``differentiated-topk-ef`` (the same share of blocks chosen at random, or by the largest
L2 norm of what is pending, both with error feedback).

Per run, besides the :class:`~experiments.train.RunRecord`, ``<agents>/differentiated-
seed<S>/differentiated.json`` holds what the record has no field for: the blocks the PS
zero-filled (missing at reconstruction) per level and in all, the late and stale blocks,
datagrams sent and received per level, and the bottleneck's per-queue counters.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from experiments.differentiated import QosSetup
from experiments.runner import finish, json_lines, last_line, prepare_hosts, spawn
from experiments.runner import log as _log
from experiments.train import HarnessError, Plan, RunRecord, Setting
from wire.differentiated import NB_QUEUES, dscp_priority_map

P4 = "forward.p4 + priority queues"
KILL_SUPPORTED = False

FRAME_BYTES = 1514  # a full-size Ethernet frame (1,500-byte MTU), as tc counts it
LEVELS = 3
QUANTILE = 0.5
ALPHA = 0.5
BLOCK_SIZE = 64
GRACE_S = 0.01
DEPTH = 64
#: harness scheme -> (options of the worker and the PS, options of the worker only)
VARIANTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "differentiated": ((), ()),
    "differentiated-reliable": (("--mode", "reliable"), ()),
    "differentiated-ef": (("--error-feedback",), ()),
    "differentiated-random-ef": (("--error-feedback",), ("--importance", "random")),
    "differentiated-topk-ef": (("--error-feedback",), ("--importance", "topk")),
}


def qos_setup(args: argparse.Namespace) -> QosSetup:
    """The bottleneck of the PS port: the link rate ``--bw`` in full-size frames per
    second, shared by the port's queues in strict priority, 64 packets per queue."""
    return QosSetup(port_rate=round(args.bw * 1e6 / 8 / FRAME_BYTES, 1), depth=DEPTH, top_depth=DEPTH,
                    levels=LEVELS)


def _with_priority_queues(topo: Any, queues: int, suffix: str = "") -> Any:
    """The same topology (a shallow copy: the same graph) under the name
    ``<name>+pq<queues><suffix>``, whose switches start with ``queues`` priority queues per port
    (the harness's ``Network`` starts them with one)."""
    t = copy.copy(topo)
    t.name = f"{topo.name}+pq{queues}{suffix}"
    base = topo.to_mininet

    def to_mininet(*, switch_cls: Any = None, **kw: Any) -> Any:
        if switch_cls is None:
            return base(switch_cls=None, **kw)

        def queued(name: str, **params: Any) -> Any:
            sw = switch_cls(name, **params)
            sw.priority_queues = queues  # read when the switch process starts
            return sw

        return base(switch_cls=queued, **kw)

    t.to_mininet = to_mininet
    return t


def _switch(setting: Setting) -> str:
    return setting.topo.iface(setting.ps)["switch"]


def setting(args: argparse.Namespace, shared: Setting) -> Setting:
    """The shared star (its PS and training hosts) with eight priority queues per switch
    port; :class:`HarnessError` for another topology."""
    topo = shared.topo
    switches = topo.switches()

    def on_the_switch(h: str) -> bool:  # one NIC, on the star's switch
        return len([i for i in topo.graph.nodes[h]["ifaces"] if i]) == 1 and topo.iface(h)["switch"] == switches[0]

    if len(switches) != 1 or shared.ps is None or not all(map(on_the_switch, [shared.ps, *shared.workers])):
        raise HarnessError(f"--scheme differentiated: needs a star, the PS and every training host on "
                           f"one switch whose port to the PS is the congested bottleneck (the default "
                           f"--topo star:{args.workers + 1}); {topo.name} has {len(switches)} switches")
    from targets.launch import TargetError, resolve_target

    try:
        target = resolve_target(args.target)
    except TargetError:  # bmv2 asked for and not installed: the harness says so when it starts
        target = (args.target or os.environ.get("TARGET") or "").lower()
    # on BMv2 the topology's name says that the PS port is a static partition (the tables)
    suffix = "-static-partition" if target == "bmv2" else ""
    return Setting(_with_priority_queues(topo, NB_QUEUES, suffix), shared.ps, list(shared.workers),
                   shared.nic_mbit)


def _queues(net: Any, setting: Setting) -> Any:
    from controller.qos import EgressQueues

    return EgressQueues.of(net.run_dir, _switch(setting), NB_QUEUES)


def deploy(net: Any, setting: Setting, args: argparse.Namespace, plan: Plan) -> None:
    """forward.p4 with the DSCP -> priority map (and ``--loss``, same ports as the shared
    topology), then the bottleneck port's rate and queue depths (:func:`qos_setup`; on
    BMv2 a static partition of the rate, kept for the run's report)."""
    from controller.deploy import deploy as deploy_p4
    from experiments.differentiated import configure_queues

    setup = qos_setup(args)
    deploy_p4(setting.topo, net.grpc_addresses(), priorities=dscp_priority_map(setup.levels, NB_QUEUES),
              loss=plan.loss or None)
    eq = _queues(net, setting)
    port = setting.topo.port(_switch(setting), setting.ps)
    if eq.has_counters and len(eq.stats(port)) != NB_QUEUES:  # BMv2: the launch passed --priority-queues
        raise HarnessError(f"{_switch(setting)} did not start with {NB_QUEUES} priority queues per port")
    configure_queues(eq, port, setup, dscp_priority_map(setup.levels, NB_QUEUES))
    net._differentiated_qos = setup  # the report's "qos": what was set, partition included
    prepare_hosts(net, [setting.ps])  # the workers are prepared by the harness
    _log(f"differentiated: {_switch(setting)} ({eq.target}) port {port} -> {setting.ps}: {setup.label()} "
         f"(= {args.bw:g} Mbit/s in {FRAME_BYTES}-byte frames), queues of {setup.depth} packets; "
         f"DSCP -> priority {dscp_priority_map(setup.levels, NB_QUEUES)}")


@dataclass(frozen=True)
class Variant:
    """The plugin of one of :data:`VARIANTS`: this module's network and queues, its run
    with the variant's options."""

    scheme: str
    P4: str = P4
    KILL_SUPPORTED: bool = KILL_SUPPORTED

    def setting(self, args: argparse.Namespace, shared: Setting) -> Setting:
        """The star with priority queues (:func:`setting`)."""
        return setting(args, shared)

    def deploy(self, net: Any, setting: Setting, args: argparse.Namespace, plan: Plan) -> None:
        """Program and queues (:func:`deploy`)."""
        deploy(net, setting, args, plan)

    def run(self, net: Any, args: argparse.Namespace, plan: Plan, setting: Setting, seed: int,
            d: Path) -> RunRecord:
        """One training run with the variant's options."""
        return run(net, args, plan, setting, seed, d, scheme=self.scheme)


def plugin(scheme: str) -> Any:
    """The plugin of harness scheme ``scheme``: this module for ``differentiated``, a
    :class:`Variant` for the other names of :data:`VARIANTS`."""
    if scheme == "differentiated":
        return sys.modules[__name__]
    if scheme not in VARIANTS:
        raise KeyError(scheme)
    return Variant(scheme)


def run(net: Any, args: argparse.Namespace, plan: Plan, setting: Setting, seed: int, d: Path,
        scheme: str = "differentiated") -> RunRecord:
    """Train once with the PS and one worker agent per training host; the run's record
    (and ``d/differentiated.json``, see the module doc)."""
    rec = RunRecord(scheme, seed)
    world = len(setting.workers)
    both, worker_only = VARIANTS[scheme]
    common = ["--world", str(world), "--mode", "differentiated", "--max-time", str(args.max_time),
              "--model", args.model, "--data", args.data, "--seed", str(seed), "--epochs", str(args.epochs),
              "--batch", str(plan.batch), "--lr", repr(plan.lr), "--max-steps", str(plan.steps_per_epoch),
              "--block-size", str(BLOCK_SIZE), *both]  # a variant's --mode comes last: it wins
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    eq = _queues(net, setting)
    port = setting.topo.port(_switch(setting), setting.ps)
    before = eq.counters(port) if eq.has_counters else {}  # BMv2's runtime CLI has no counters
    t0 = time.monotonic()
    deadline = t0 + args.max_time + 60
    ps = spawn(net.host(setting.ps), d / "ps",
               [sys.executable, "-m", "hosts.differentiated.ps", *common, "--grace", repr(GRACE_S),
                "--no-eval", "--members", ",".join(setting.topo.host_ip(h) for h in setting.workers)],
               env=env)
    while "listening" not in (d / "ps.err").read_text(errors="replace"):
        if ps.poll() is not None or time.monotonic() > t0 + 60:
            _, _, err = finish(ps, d / "ps", 1)
            rec.error = f"the PS did not start (exit {ps.returncode}): {last_line(err)}"
            return rec
        time.sleep(0.05)
    ps_ip = setting.topo.host_ip(setting.ps)
    procs = []
    for rank, h in enumerate(setting.workers):
        slow = plan.slow.get(plan.workers[rank], 1.0)  # by rank, as the harness's trainers
        procs.append(spawn(net.host(h), d / f"rank{rank}",
                           [sys.executable, "-m", "hosts.differentiated.worker", "--ps", ps_ip,
                            "--rank", str(rank), *common, "--alpha", repr(ALPHA), "--quantile", repr(QUANTILE),
                            "--levels", str(LEVELS), "--batch-seed", str(seed), "--slow", repr(slow),
                            "--compute-time", repr(args.compute_time), "--eval-every", str(plan.eval_every),
                            *worker_only],
                           env=env))
    outs = []
    for rank, p in enumerate(procs):
        rc, out, err = finish(p, d / f"rank{rank}", max(1.0, deadline - time.monotonic()))
        outs.append(json_lines(out))
        if rc != 0 and not rec.error:
            rec.error = f"rank {rank} exited {rc}: {last_line(err) or last_line(out)}"
    # a failed worker leaves the PS waiting for its blocks: do not wait for it then
    rc, out, err = finish(ps, d / "ps", 5.0 if rec.error else max(1.0, deadline - time.monotonic()))
    ps_rep = next((x for x in reversed(json_lines(out)) if "iterations" in x), {})
    if rc != 0 and not rec.error:
        rec.error = f"the PS exited {rc}: {last_line(err)}"
    after = eq.counters(port) if eq.has_counters else {}

    summaries = _fill_record(rec, outs, ps_rep, plan)
    _write_report(d, net, args, scheme, seed, port, world, ps_rep, summaries,
                  {p: {k: after[p][k] - before.get(p, {}).get(k, 0) for k in after[p]} for p in after})
    return rec


def _fill_record(rec: RunRecord, outs: list[list[dict[str, Any]]], ps_rep: dict[str, Any],
                 plan: Plan) -> list[dict[str, Any]]:
    """The harness's record from the ranks' and the PS's JSON lines; the ranks' summaries."""
    summaries = [next((x for x in reversed(o) if "done" in x), {}) for o in outs]
    evals0 = [x for x in outs[0] if "accuracy" in x] if outs else []
    rec.curve = [{"t": x["t"], "accuracy": x["accuracy"], "heldout": x.get("heldout"),
                  "epoch": x["epoch"], "step": x["step"]} for x in evals0]
    s0 = summaries[0] if summaries else {}
    rec.ok = not rec.error and bool(summaries) and all(s.get("done") for s in summaries)
    if not rec.ok and not rec.error:
        rec.error = "a worker stopped before its last step (--max-time?)"
    rec.iterations = int(s0.get("steps", 0))
    rec.train_s = float(s0.get("t", evals0[-1]["t"] if evals0 else 0.0))
    if rec.iterations:
        rec.sync_s_per_iter = float(s0.get("sync_s", 0.0)) / rec.iterations
        rec.compute_s_per_iter = float(s0.get("compute_s", 0.0)) / rec.iterations
    # every rank's hash at every evaluation, and the PS's final model the workers' last one
    hashes = [[x["weights"] for x in o if "weights" in x and "step" in x] for o in outs]
    rec.models_identical = (bool(hashes) and bool(hashes[0]) and all(h == hashes[0] for h in hashes)
                            and ps_rep.get("weights") == s0.get("weights"))
    rec.final_weights = str(s0.get("weights") or "")
    rec.parameters = int(s0.get("parameters", plan.parameters))
    rec.retransmissions = (sum(int(s.get("retransmissions", 0)) for s in summaries)
                           + int(ps_rep.get("retransmissions", 0)))
    rec.ps_rx_bytes = ps_rep.get("nic_rx_bytes")
    rec.agent_cpu_s = round(sum(float(s.get("cpu_s", 0.0)) for s in summaries)
                            + float(ps_rep.get("cpu_s", 0.0)), 3)

    return summaries


def _write_report(d: Path, net: Any, args: argparse.Namespace, scheme: str, seed: int, port: int, world: int,
                  ps_rep: dict[str, Any], summaries: list[dict[str, Any]],
                  queues: dict[Any, dict[str, int]]) -> None:
    """``d/differentiated.json``: the blocks lost, late and zero-filled, the queues."""
    missing = {k: int(v) for k, v in ps_rep.get("missing_blocks", {}).items()}
    sent = [sum(x) for x in zip(*(s.get("sent_datagrams", []) for s in summaries), strict=False)]
    report = {
        "scheme": scheme, "options": [*VARIANTS[scheme][0], *VARIANTS[scheme][1]], "seed": seed, "qos": asdict(getattr(net, "_differentiated_qos", None) or qos_setup(args)),
        "queueing": (getattr(net, "_differentiated_qos", None) or qos_setup(args)).label(), "port": port, "quantile": QUANTILE, "alpha": ALPHA,
        "levels": LEVELS, "block_size": BLOCK_SIZE, "grace_s": GRACE_S,
        "iterations": ps_rep.get("iterations"), "blocks_per_worker": ps_rep.get("blocks_per_worker"),
        "blocks_total": (ps_rep.get("blocks_per_worker") or 0) * world * int(ps_rep.get("iterations") or 0),
        "zero_filled_blocks": sum(missing.values()), "zero_filled_per_level": missing,
        "late_blocks": ps_rep.get("late_blocks"), "stale_blocks": ps_rep.get("stale_blocks"),
        "late_after_s": ps_rep.get("late_after_s"),
        "sent_datagrams_per_level": sent, "received_datagrams_per_level": ps_rep.get("received_datagrams"),
        "queues": queues,
        "ps": ps_rep,
    }
    (d / "differentiated.json").write_text(json.dumps(report, indent=1))
    _log(f"{scheme}, seed {seed}: {report['zero_filled_blocks']} of {report['blocks_total']} blocks "
         f"zero-filled ({missing or 'none'}), {report['late_blocks']} late; {d / 'differentiated.json'}")
