"""The time-to-accuracy harness's built-in schemes (``experiments/train.py``): one
``python -m hosts.trainer`` per rank in its Mininet host, and the INA PS for ina and ps;
the run's record from the ranks' JSON lines."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from experiments.harness_records import Plan, RunRecord, Setting
from experiments.runner import finish, json_lines, last_line, spawn


def _trainer_argv(args: argparse.Namespace, plan: Plan, setting: Setting, scheme: str, seed: int,
                  rank: int, conf: Path | None, port: int) -> list[str]:
    """The command line of ``hosts.trainer`` for one rank."""
    slow = plan.slow.get(plan.workers[rank], 1.0)  # by rank: the same rank on every topology
    argv = [sys.executable, "-m", "hosts.trainer", "--scheme", scheme, "--rank", str(rank),
            "--world", str(len(setting.workers)), "--model", args.model, "--data", args.data,
            "--seed", str(seed), "--epochs", str(args.epochs), "--batch", str(plan.batch),
            "--lr", repr(plan.lr), "--max-steps", str(plan.steps_per_epoch),
            "--eval-every", str(plan.eval_every), "--timeout", str(min(120.0, args.max_time)),
            "--slow", repr(slow), "--compute-time", repr(args.compute_time)]
    if scheme == "gloo":
        argv += ["--master-addr", setting.topo.host_ip(setting.workers[0]), "--master-port", str(port)]
    elif scheme in ("ina", "ps"):
        argv += ["--policy", str(conf)]
    else:
        argv += ["--plan", str(conf)]
    return argv


def run_trainers(net: Any, args: argparse.Namespace, plan: Plan, scheme: str, seed: int, job: Any,
                 d: Path, port: int, collective: dict[str, Any] | None = None) -> RunRecord:
    """The built-in schemes: one ``hosts.trainer`` per rank (and the INA PS for ina/ps);
    ``collective``: the ring, BML or k-rail plan the ranks read (``collective_plan``)."""
    rec = RunRecord(scheme, seed)
    setting = plan.settings[scheme]
    topo = setting.topo
    ps_proc = conf = None
    t0 = time.monotonic()
    if collective is not None:
        conf = d / "plan.json"
        conf.write_text(json.dumps(collective))
    if job is not None:
        conf = policy = job.write_policy(d / "policy.json")
        # the PS serves round after round; it exits once no round came for idle_exit s, so
        # that must outlast the longest gap between two steps (compute, rank 0's evaluation)
        gap = args.compute_time * max(plan.slow.values(), default=1.0)
        idle_exit = max(5.0, 4.0 * gap)
        ps_proc = spawn(net.host(setting.ps), d / "ps",
                        [sys.executable, "-m", "hosts.ina.ps", "--policy", str(policy), "--json",
                         "--rounds", "0", "--idle-exit", repr(idle_exit), "--linger", "1",
                         "--iface", topo.iface(setting.ps)["name"], "--max-time", str(args.max_time + 60)])
        time.sleep(0.5)
    procs = []
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    for rank, h in enumerate(setting.workers):
        env_h = dict(env, GLOO_SOCKET_IFNAME=topo.iface(h)["name"])
        procs.append(spawn(net.host(h), d / f"rank{rank}",
                           _trainer_argv(args, plan, setting, scheme, seed, rank, conf, port), env=env_h))
    outs = []
    deadline = t0 + args.max_time + 60
    for rank, p in enumerate(procs):
        rc, out, err = finish(p, d / f"rank{rank}", max(1.0, deadline - time.monotonic()))
        outs.append(json_lines(out))
        if rc != 0 and not rec.error:
            rec.error = f"rank {rank} exited {rc}: {last_line(err)}"
    ps_rep: dict[str, Any] = {}
    if ps_proc is not None:
        _, out, _ = finish(ps_proc, d / "ps", 30)
        recs = json_lines(out)
        ps_rep = recs[-1] if recs else {}
    summaries = [next((x for x in reversed(o) if "done" in x), {}) for o in outs]
    rec.agent_cpu_s = round(sum(float(s.get("cpu_s", 0.0)) for s in summaries)
                            + float(ps_rep.get("cpu_s", 0.0) or 0.0), 3)
    evals0 = [x for x in outs[0] if "accuracy" in x] if outs else []
    rec.curve = [{"t": x["t"], "accuracy": x["accuracy"], "heldout": x.get("heldout"),
                  "epoch": x["epoch"], "step": x["step"]} for x in evals0]
    s0 = summaries[0] if summaries else {}
    rec.ok = not rec.error and all(s.get("done") for s in summaries)
    rec.iterations = int(s0.get("steps", 0))
    rec.train_s = float(s0.get("t", evals0[-1]["t"] if evals0 else 0.0))
    if rec.iterations:
        rec.sync_s_per_iter = float(s0.get("sync_s", 0.0)) / rec.iterations
        rec.compute_s_per_iter = float(s0.get("compute_s", 0.0)) / rec.iterations
    # the same weights on every rank at every evaluation
    hashes = [[x["weights"] for x in o if "weights" in x and "step" in x] for o in outs]
    rec.models_identical = bool(hashes) and all(h == hashes[0] for h in hashes) and bool(hashes[0])
    rec.final_weights = hashes[0][-1] if hashes and hashes[0] else ""
    rec.parameters = int(s0.get("parameters", plan.parameters))
    rec.retransmissions = sum(int(s.get("retransmissions", 0)) for s in summaries)
    if scheme in ("ina", "ps"):
        rec.resends = {k: sum(int(s.get(k, 0)) for s in summaries)
                       for k in ("resend_nack", "request_fast", "request_probe", "request_timer")}
        jobs = (ps_rep.get("jobs") or {}).values()
        rec.resends.update({k: sum(int(j.get(k, 0)) for j in jobs)
                            for k in ("nacks_sent", "flushes_sent", "result_resends")})
    rec.ps_rx_bytes = ps_rep.get("nic_rx_bytes") if ps_rep else None
    return rec
