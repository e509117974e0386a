"""Token-passing broadcast (token) in the time-to-accuracy harness.

The harness (:mod:`experiments.train`, "Plugins") runs the scheme ``token`` through this
module: its own network, :func:`controller.token.token_lan` with one training host per
training host of the shared topology, each behind its own smart NIC (``nic.p4``) on one
LAN switch (``lan.p4``), every link at ``--bw``; no PS. Each host runs one
``hosts.token.node``; ``h1`` holds model and data (the initiator, node 1 = rank 0).

The same work as the built-in schemes (``hosts/trainer.py``), through the node's options:

* model and initial weights ``build_model(--model, seed)`` (``--model NAME``), data
  ``load_data(--data, seed)`` (``--data``: examples travel as exact float32); the
  initiator still distributes both by broadcast, and node I's shard is
  ``worker_shard(data, I - 1, n)``, i.e. rank I - 1's;
* per-rank batch ``--batch``, batch order ``batches(x, y, batch, epoch, seed)`` on every
  node (``--batch-seed``), the first ``plan.steps_per_epoch`` full batches of each epoch
  (``--max-steps``), ``--epochs`` epochs;
* ``w <- w - lr * sum / n`` with ``plan.lr``; the specified 90 % cutoff is off (``--cutoff
  1.0``: every batch sums every active node's gradient; the harness has no option that
  asks for it);
* ``--slow H=F`` slows rank ``plan.workers.index(H)``: the roster, not the host name,
  decides a node's number, so every node gets the whole list (``--slowdowns``) and takes
  its own entry; ``--compute-time S`` fixes compute per batch (``--compute-fixed``) and,
  as in ``hosts/trainer.py``, then overrides ``--slow``;
* evaluation records (``--evals``, ``--eval-every``): at the start, every
  ``plan.eval_every`` batches and at each epoch's end, every node logs the hash of its
  weights and node 1 (the smallest active number once node 1 is gone) the test and
  held-out accuracy, with ``t`` its training time without evaluation time.

``--kill H@T`` kills the node of rank ``plan.workers.index(H)`` (the host whose roster
number is rank + 1) T seconds after training started; the others declare it lost
(NIC timeouts, NODE_LOST) and go on with one gradient fewer per batch. ``--loss`` names ports of the
shared topology, which this LAN does not have: refused.

What the record holds: rank 0's curve, iterations (batches), compute seconds per batch of
node 1's compute steps and the rest of its training time per batch as sync, whether
every node's weights agreed at every evaluation, the nodes' CPU seconds and their token
re-sends as retransmissions. The link bytes and switch CPU that
:func:`experiments.train.run_one` measures around :func:`run` include formation and the
distribution of model and data (the built-in schemes load their data locally).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from experiments.runner import json_lines
from experiments.train import HarnessError, Plan, RunRecord, Setting

P4 = "nic.p4 + lan.p4"
KILL_SUPPORTED = True
WAIT_UNIT = 1.0  # t of the staggered timeouts (s), the node's default
MIN_NODES = 2  # the node's --min-nodes: fewer active nodes stop training (abnormal)


def parse_kills(args: argparse.Namespace, workers: list[str]) -> dict[int, float]:
    """``--kill HOST@T`` -> ``{rank: T}``: ``workers`` are the shared topology's training
    hosts in rank order (``rank = workers.index(HOST)``)."""
    kills: dict[int, float] = {}
    for spec in args.kill:
        host, sep, t = spec.partition("@")
        host, t = host.strip(), t.strip()
        if not sep or not host or not t:
            raise HarnessError(f"--kill {spec!r}: expected HOST@T")
        if host not in workers:
            raise HarnessError(f"--kill {spec}: {host} is not a training host ({', '.join(workers)})")
        try:
            at = float(t)
        except ValueError:
            raise HarnessError(f"--kill {spec}: {t!r} is not a number of seconds") from None
        if at < 0:
            raise HarnessError(f"--kill {spec}: the time must be >= 0")
        rank = workers.index(host)
        if rank in kills:
            raise HarnessError(f"--kill {spec}: {host} is killed twice")
        kills[rank] = at
    if kills and len(workers) - len(kills) < MIN_NODES:
        raise HarnessError(f"--kill: token training stops below {MIN_NODES} active nodes; "
                           f"{len(workers)} workers, {len(kills)} killed")
    return kills


def setting(args: argparse.Namespace, shared: Setting) -> Setting:
    """The token LAN of ``len(shared.workers)`` training hosts, one NIC each at ``--bw``;
    :class:`HarnessError` for ``--loss``, a model the MODEL broadcast cannot carry, a bad
    ``--kill``. A gradient longer than a NIC holds (32,768 values) is summed in chunks,
    one token round each (docs/token.md, "Chunks")."""
    from controller.token import MAX_NODES, token_lan
    from hosts import training as tr
    from hosts.token.data import BLOB_CHUNK

    if args.loss:
        raise HarnessError("--loss names ports of the shared topology, and token runs on its own "
                           "LAN of smart NICs: run token without --loss (or the others without token)")
    n = len(shared.workers)
    if not 1 <= n <= MAX_NODES:
        raise HarnessError(f"--scheme token: a token LAN holds 1..{MAX_NODES} nodes, not {n}")
    try:
        values = sum(p.numel() for p in tr.build_model(args.model, args.seed).parameters())
    except ValueError as e:
        raise HarnessError(str(e)) from None
    limit = 0xFFFF * BLOB_CHUNK // 4  # the 16-bit frag field of the MODEL frames
    if values > limit:
        raise HarnessError(f"--scheme token: --model {args.model} has {values:,} parameters; the "
                           f"initiator's MODEL broadcast carries at most {limit:,} (65,535 frames "
                           f"of {BLOB_CHUNK} bytes)")
    parse_kills(args, shared.workers)
    topo = token_lan(n, bw=float(args.bw))
    return Setting(topo, None, topo.hosts(), float(args.bw))


# networks whose NICs hold fresh registers (deployed, no run yet): a run closes formation
# in every NIC, so the next run on the same network loads the programs again
_FRESH: set[int] = set()


def deploy(net: Any, setting: Setting, args: argparse.Namespace, plan: Plan) -> None:
    """What ``experiments/token.py`` does: ``nic.p4`` on every NIC (with its multicast
    group), ``lan.p4`` on the LAN switch (flood groups, MAC table)."""
    from controller.token import TokenDeployment

    # plan.loss: ports of the token LAN (the loss sweep sets it; the harness refuses --loss)
    TokenDeployment(setting.topo, net.grpc_addresses(), loss=plan.loss or None).deploy()
    _FRESH.add(id(net))


def node_options(args: argparse.Namespace, plan: Plan, seed: int) -> list[str]:
    """The ``hosts.token.node`` options every node of a run gets (the harness's work)."""
    opts = ["--model", args.model, "--data", args.data, "--seed", str(seed),
            "--epochs", str(args.epochs), "--batch-size", str(plan.batch),
            "--max-steps", str(plan.steps_per_epoch), "--batch-seed", str(seed),
            "--lr", repr(plan.lr), "--cutoff", "1.0", "--evals", "--eval-every", str(plan.eval_every),
            "--wait-unit", repr(WAIT_UNIT), "--min-nodes", str(MIN_NODES),
            "--max-time", repr(float(args.max_time)), "--form-max", "60", "--join-timeout", "120"]
    if args.compute_time > 0:  # as hosts/trainer.py: a fixed compute time overrides --slow
        opts += ["--compute-fixed", repr(float(args.compute_time))]
    else:
        factors = [plan.slow.get(h, 1.0) for h in plan.workers]
        if any(f != 1.0 for f in factors):
            opts += ["--slowdowns", ",".join(repr(float(f)) for f in factors)]
    return opts


def _events(base: Path) -> list[dict[str, Any]]:
    path = base.with_suffix(".out")
    return json_lines(path.read_text(errors="replace")) if path.exists() else []


def _identical(hashes: dict[str, dict[int, str]], finals: dict[str, str | None],
               survivors: list[str]) -> bool:
    """Every node's weights agree at every evaluation it made, and every survivor made
    the last one and ends with the same weights."""
    steps: dict[int, set[str]] = {}
    for per in hashes.values():
        for step, h in per.items():
            steps.setdefault(step, set()).add(h)
    if not steps or any(len(v) != 1 for v in steps.values()):
        return False
    last = max(steps)
    if not survivors or any(last not in hashes.get(h, {}) for h in survivors):
        return False
    return len({finals.get(h) for h in survivors}) == 1 and finals.get(survivors[0]) is not None


def _kill_when_due(procs: dict[str, Any], bases: dict[str, Path], hosts: list[str],
                   pending: dict[int, float], deadline: float,
                   seq_of: dict[str, int]) -> tuple[dict[str, dict[str, Any]], float, dict[int, float]]:
    """``--kill``: each rank's node killed T s after training started (node 1's first
    evaluation), the host whose roster number is rank + 1 (``seq_of`` learns them).
    Returns the killed hosts, their CPU seconds since training started, the kills not done."""
    from experiments.accounting import process_cpu_seconds

    n = len(hosts)
    killed: dict[str, dict[str, Any]] = {}
    killed_cpu = 0.0
    started: float | None = None
    while pending and time.monotonic() < deadline and any(p.poll() is None for p in procs.values()):
        if started is None and any(e.get("event") == "eval" for e in _events(bases[hosts[0]])):
            started = time.monotonic()
        if len(seq_of) < n:
            for h in hosts:
                if h not in seq_of:
                    formed = [e for e in _events(bases[h]) if e.get("event") == "formed"]
                    if formed:
                        seq_of[h] = int(formed[0]["node"])
        if started is not None:
            host_of = {s: h for h, s in seq_of.items()}
            for rank, at in sorted(pending.items()):
                if time.monotonic() - started >= at and rank + 1 in host_of:
                    h = host_of[rank + 1]
                    p = procs[h]
                    if p.poll() is None:
                        cpu = process_cpu_seconds(p.pid)
                        p.kill()
                        start = [e for e in _events(bases[h]) if e.get("event") == "train_start"]
                        if cpu is not None:  # its CPU since training started
                            killed_cpu += cpu - (float(start[0]["cpu_s"]) if start else 0.0)
                        killed[h] = {"rank": rank, "at_s": round(time.monotonic() - started, 3)}
                    del pending[rank]
        time.sleep(0.05)
    return killed, killed_cpu, pending


def _fill_record(rec: RunRecord, args: argparse.Namespace, plan: Plan, hosts: list[str],
                 results: dict[str, tuple[int, list[dict[str, Any]], str]],
                 summaries: dict[str, dict[str, Any]], seq_of: dict[str, int],
                 killed: dict[str, dict[str, Any]], killed_cpu: float) -> None:
    """The harness's record from the nodes' events: errors, rank 0's curve (the evaluating
    node's), the step counts and times, identical models, CPU and re-sends."""
    n = len(hosts)
    survivors = [h for h in hosts if h not in killed]
    for h in hosts:
        rc, _ev, err = results[h]
        if h in killed or rc == 0:
            continue
        if not rec.error:
            last = (err.strip().splitlines() or [""])[-1][-300:]
            rec.error = f"{h} (node {seq_of.get(h, '?')}) exited {rc}: {last}"
    members = next((e.get("members") for e in results[hosts[0]][1] if e.get("event") == "formed"), None)
    if members is not None and members != n and not rec.error:
        rec.error = f"formation admitted {members} of {n} nodes"
    # rank 0's curve: the evaluating node's records (node 1, or the smallest number left)
    curve: dict[int, dict[str, Any]] = {}
    for h in sorted(hosts, key=lambda x: seq_of.get(x, 99)):
        for e in results[h][1]:
            if e.get("event") == "eval" and "accuracy" in e and e["step"] not in curve:
                curve[e["step"]] = {"t": e["t"], "accuracy": e["accuracy"], "heldout": e.get("heldout"),
                                    "epoch": e["epoch"], "step": e["step"]}
    rec.curve = [curve[k] for k in sorted(curve)]
    evaluator = next((h for h in sorted(survivors, key=lambda x: seq_of.get(x, 99))
                      if summaries[h]), None)
    s0 = summaries.get(evaluator, {}) if evaluator else {}
    rec.iterations = int(s0.get("stats", {}).get("batches", 0))
    rec.train_s = float(s0.get("train_s", rec.curve[-1]["t"] if rec.curve else 0.0))
    if rec.iterations:
        compute = float(s0.get("timing", {}).get("compute", 0.0))
        rec.compute_s_per_iter = compute / rec.iterations
        rec.sync_s_per_iter = max(0.0, rec.train_s - compute) / rec.iterations
    hashes = {h: {e["step"]: e["weights"] for e in results[h][1] if e.get("event") == "eval"}
              for h in hosts}
    rec.models_identical = _identical(hashes, {h: summaries[h].get("weights") for h in hosts}, survivors)
    rec.final_weights = str(s0.get("weights") or "")
    rec.agent_cpu_s = round(sum(float(s.get("cpu_s", 0.0)) for s in summaries.values()) + killed_cpu, 3)
    # token re-sends and re-sent gradient fragments (loss recovery, NACKs)
    rec.retransmissions = sum(int(s.get("stats", {}).get("resends", 0))
                              + int(s.get("stats", {}).get("repair_frames", 0)) for s in summaries.values())
    rec.ps_rx_bytes = None
    want = args.epochs * plan.steps_per_epoch
    if not rec.error and rec.iterations != want:
        rec.error = f"{rec.iterations} of {want} batches trained"
    rec.ok = not rec.error and all(summaries[h] for h in survivors)


def run(net: Any, args: argparse.Namespace, plan: Plan, setting: Setting, seed: int,
        d: Path) -> RunRecord:
    """Train once on the token LAN: one ``hosts.token.node`` per host, ``h1`` the
    initiator; ``--kill`` by rank; every process killed past ``--max-time`` + 60 s."""
    from controller.token import TokenDeployment
    from experiments.runner import finish, spawn
    from experiments.token import await_listening, deepen_bmv2_queues, node_argv

    rec = RunRecord("token", seed, parameters=plan.parameters)
    if id(net) not in _FRESH:
        TokenDeployment(setting.topo, net.grpc_addresses(), loss=plan.loss or None).deploy()
    _FRESH.discard(id(net))
    topo, hosts = setting.topo, list(setting.workers)
    deepen_bmv2_queues(net, topo)
    n = len(hosts)
    kills = parse_kills(args, plan.workers)
    opts = node_options(args, plan, seed)
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    bases = {h: d / h for h in hosts}
    procs: dict[str, Any] = {}
    t0 = time.monotonic()
    deadline = t0 + args.max_time + 60
    for h in hosts[1:]:
        procs[h] = spawn(net.host(h), bases[h], node_argv(topo, h, opts, net.target), env=env)
    await_listening({h: procs[h] for h in hosts[1:]}, bases)
    procs[hosts[0]] = spawn(net.host(hosts[0]), bases[hosts[0]], node_argv(
        topo, hosts[0], ["--initiator", "--expect", str(n), *opts], net.target), env=env)
    # --kill: T s after training started (node 1's first evaluation), the host whose
    # roster number is rank + 1
    seq_of: dict[str, int] = {}
    killed, killed_cpu, pending = _kill_when_due(procs, bases, hosts, dict(kills), deadline, seq_of)
    results: dict[str, tuple[int, list[dict[str, Any]], str]] = {}
    for h in hosts:
        rc, _out, err = finish(procs[h], bases[h], max(1.0, deadline - time.monotonic()))
        results[h] = (rc, _events(bases[h]), err)
    summaries = {h: next((e for e in reversed(ev) if e.get("event") == "summary"), {})
                 for h, (_rc, ev, _err) in results.items()}
    for h, (_rc, ev, _err) in results.items():
        formed = [e for e in ev if e.get("event") == "formed"]
        if formed:
            seq_of[h] = int(formed[0]["node"])
    _fill_record(rec, args, plan, hosts, results, summaries, seq_of, killed, killed_cpu)
    (d / "token.json").write_text(json.dumps({
        "seq": seq_of, "killed": killed, "kills_not_done": pending,
        "exit": {h: r[0] for h, r in results.items()},
        "summaries": summaries}, indent=1, default=str))
    return rec
