"""``make run``: the main experiment, end to end on the emulated network.

In-network aggregation vs a parameter-server-only baseline, on one fat-tree:

1. build fat-tree k=4 (20 P4 switches, 16 hosts) with bandwidth-limited links;
2. PS on ``h1``, the other hosts are workers; place K programmable switches (greedy +
   LP), derive the per-fragment routing policy, deploy ``ina.p4`` on the chosen
   switches and the PS's ToR, ``forward.p4`` elsewhere;
3. every worker sends its gradient; check that every element of every worker's result
   equals the exact integer sum of all workers' fixed-point gradients;
4. the same gradients again with no aggregation anywhere (PS baseline);
5. print placement, times, PS ingress bytes and the ratios; save JSON and a plot.

``--mode reach`` only checks all-pairs reachability through the switches (the
foundation's first ``make run``). ``--cli`` leaves a Mininet CLI open before teardown.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
from rich.table import Table

from controller import argtypes
from controller.deploy import deploy
from controller.ina import InaDeployment, InaJob, switch_ip
from controller.output import TableConsole
from controller.p4runtime import REPO_ROOT
from controller.routing import port_mac
from experiments import options as opts
from experiments.accounting import Snapshot, time_split
from experiments.ina_results import (
    RunResult,
    plot_ina_vs_ps,
    resources,
    resources_table,
    summary_tables,
)
from experiments.runner import await_ready, finish, spawn
from experiments.runner import log as _log
from hosts.ina.congestion import CONGESTION_MODES, MAX_RTO_FACTOR
from topologies import fat_tree
from topologies.base import Topology
from wire.argtypes import described
from wire.fixedpoint import bfp_reference, quantize
from wire.ina import INA_VALUE_SIZES, INA_VALUES

console = TableConsole()


# ----------------------------------------------------------------------------- reach
def run_reach(topo: Topology, target: str | None, cli: bool) -> int:
    """All-pairs ICMP reachability through the P4 switches."""
    from topologies.network import Network

    with Network(topo, target=target, log=_log) as net:
        report = deploy(topo, net.grpc_addresses())
        _log(f"deployed forward.p4: {report}")
        hosts = topo.hosts()
        procs = {}
        for h in hosts:
            targets = ",".join(topo.host_ip(o) for o in hosts if o != h)
            procs[h] = net.host(h).popen([sys.executable, "-m", "hosts.reach", "--targets", targets,
                                          "--count", "3", "--timeout", "5"], cwd=str(REPO_ROOT))
        ok = total = 0
        for p in procs.values():
            out, _ = p.communicate(timeout=60)
            res = json.loads(out)
            total += len(res["received"])
            ok += sum(1 for v in res["received"].values() if v > 0)
        table = Table(title=f"all-pairs reachability on {topo.name}")
        table.add_column("pairs reachable")
        table.add_column("pairs")
        table.add_row(str(ok), str(total))
        console.print(table)
        if cli:
            net.cli()
        return 0 if ok == total else 1


# ----------------------------------------------------------------------------- INA
def _gradients(n_workers: int, n_values: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    # Gradient-like values: mostly small, some larger.
    return [(rng.standard_normal(n_values) * 0.01).astype(np.float32) for _ in range(n_workers)]


def _linger(timeout: float, congestion: str) -> float:
    """The PS's quiet time before it exits: longer than a worker's longest timer, so a
    worker whose RESULT was lost still gets it again (with ``--congestion aimd`` a
    timer may reach ``MAX_RTO_FACTOR`` x ``timeout``)."""
    return max(3.0, (MAX_RTO_FACTOR + 2) * timeout if congestion == "aimd" else 3 * timeout)


#: the workers' re-sends and requests by reason (hosts/ina/transfer.py WorkerStats)
RESEND_REASONS = ("resend_nack", "request_fast", "request_probe", "request_timer")
#: requests whose original RESULT came too: early ones (reorder window), probes
SPURIOUS = ("spurious_requests", "spurious_probes")
#: the PS's recovery counters (hosts/ina/ps_job.py JobStats)
PS_RECOVERY = ("nacks_sent", "flushes_sent", "flush_replies", "delta_partials", "requests_in",
               "result_resends", "clears_sent")


def run_jobs(net: Any, topo: Topology, jobs: list[tuple[InaJob, list[np.ndarray]]], run_dir: Path,
             tag: str, window: int = 32, timeout: float = 1.0, max_time: float = 300.0,
             worker_args: list[str] | None = None, congestion: str = "fixed",
             before_go: Callable[[], None] | None = None,
             rank_args: dict[int, list[str]] | None = None,
             ps_args: list[str] | None = None) -> list[RunResult]:
    """Run INA jobs at once (one PS process per job, one worker process per rank), wait,
    and check every worker's result against the exact integer sum of its job.
    ``rank_args``/``ps_args``: more options for one rank's worker / every PS (tests:
    ``--drop-sent``, ``--drop-received``).
    ``before_go`` runs once every agent is ready, before any worker sends (tests inject
    forged packets there, docs/trust.md). ``congestion``: the workers' window (fixed or aimd,
    ``hosts.ina.worker``); the PS lingers past the longest timer it allows."""
    running = _start_jobs(net, topo, jobs, run_dir, tag, max_time, timeout, congestion,
                          ["--window", str(window), "--timeout", str(timeout),
                           "--max-time", str(max_time), "--json", "--no-progress", "--ready-go",
                           "--congestion", congestion, *(worker_args or [])],
                          rank_args or {}, ps_args or [])
    # Python's start-up (a few hundred ms of CPU per agent) is not part of a
    # synchronization: every PS and worker sets up first, then all workers start at once.
    await_ready([(ps, jdir / "ps") for _, _, jdir, ps, _ in running]
                 + [(p, jdir / f"worker-{r}") for _, _, jdir, _, procs in running for r, p in enumerate(procs)])
    if before_go is not None:
        try:
            before_go()
        except BaseException:
            for *_, ps, procs in running:
                for p in [ps, *procs]:
                    p.kill()
            raise
    t0, t_go = time.monotonic(), time.time()
    for *_, procs in running:
        for p in procs:
            p.stdin.write(b"go\n")
            p.stdin.flush()
    return [_job_result(job, grads, jdir, ps, procs, tag, t0, t_go, max_time)
            for job, grads, jdir, ps, procs in running]


def _start_jobs(net: Any, topo: Topology, jobs: list[tuple[InaJob, list[np.ndarray]]], run_dir: Path,
                tag: str, max_time: float, timeout: float, congestion: str,
                worker_opts: list[str], rank_args: dict[int, list[str]],
                ps_args: list[str]) -> list[tuple[InaJob, list[np.ndarray], Path, Any, list[Any]]]:
    """Every job's PS, then its workers (each with its gradient file): (job, gradients,
    directory, PS process, worker processes) per job."""
    started = []
    for job, grads in jobs:
        jdir = run_dir / f"{tag}-job{job.job_id}"
        jdir.mkdir(parents=True, exist_ok=True)
        policy = job.write_policy(jdir / "policy.json")
        ps = spawn(net.host(job.ps), jdir / "ps",
                    [sys.executable, "-m", "hosts.ina.ps", "--policy", str(policy), "--json",
                     "--iface", topo.iface(job.ps)["name"], "--ready",
                     # quiet time before exiting: longer than a worker's largest backoff,
                     # so a worker whose RESULT was lost still gets it again
                     "--linger", str(_linger(timeout, congestion)),
                     "--max-time", str(max_time), *ps_args])
        started.append((job, grads, jdir, policy, ps))
    running = []
    for job, grads, jdir, policy, ps in started:
        procs = []
        for rank, w in enumerate(job.workers):
            gpath = jdir / f"grad-{rank}.npy"
            np.save(gpath, grads[rank])
            procs.append(spawn(net.host(w), jdir / f"worker-{rank}",
                [sys.executable, "-m", "hosts.ina.worker", "--policy", str(policy), "--rank", str(rank),
                 "--gradient", str(gpath), "--out-int", str(jdir / f"out-{rank}.npy"), *worker_opts,
                 *rank_args.get(rank, [])],
                stdin=True))
        running.append((job, grads, jdir, ps, procs))
    return running


def _expected_sum(job: InaJob, grads: list[np.ndarray]) -> np.ndarray:
    """The exact int32 sum a job's workers must get."""
    if job.number_format == "bfp":
        # the exact int sums at the agreed exponents (never wrap: headroom bits)
        expected, _ = bfp_reference(grads, len(grads), job.values_per_packet)
        return expected[: grads[0].size].astype(np.int32)
    expected = sum(quantize(g, job.scale_bits, len(grads)).astype(np.int64) for g in grads)
    return ((expected + 2**31) % 2**32 - 2**31).astype(np.int32)


def _job_result(job: InaJob, grads: list[np.ndarray], jdir: Path, ps: Any, procs: list[Any],
                tag: str, t0: float, t_go: float, max_time: float) -> RunResult:
    """Wait for one job's workers and PS; their results checked against the exact sum."""
    expected = _expected_sum(job, grads)
    retx = mismatches = decreases = refused_stamp = 0
    worker_cpu = 0.0
    rss: list[float] = []
    failed = []
    t_ends: list[float | None] = []
    rank_resends: list[dict[str, int]] = []
    for rank, p in enumerate(procs):
        _, out, err = finish(p, jdir / f"worker-{rank}", max_time + 30)
        if p.returncode != 0:
            failed.append(f"{job.workers[rank]}: exit {p.returncode}: {err[-300:]}")
            continue
        summary = json.loads(out.strip().splitlines()[-1])
        retx += int(summary.get("retransmissions", 0))
        refused_stamp += int(summary.get("refused_stamp", 0))
        rank_resends.append({k: int(summary.get(k, 0)) for k in RESEND_REASONS + SPURIOUS})
        decreases += int(summary.get("window_decreases", 0))
        rss.append(float(summary.get("max_rss_mib", 0.0)))
        worker_cpu += float(summary.get("sync_cpu_s", summary.get("cpu_s", 0.0)))
        t_ends.append(summary.get("t_end"))
        got = np.load(jdir / f"out-{rank}.npy")
        mismatches += int(np.count_nonzero(got[: expected.size] != expected))
    # until the last worker had its result (its own clock reading), not until the
    # processes had written their files and exited
    ends = [t for t in t_ends if t is not None]
    seconds = (max(ends) - t_go) if ends and len(ends) == len(procs) else time.monotonic() - t0
    _, out, err = finish(ps, jdir / "ps", max_time + 30)
    if failed:
        raise RuntimeError(f"job {job.job_id}: worker(s) failed:\n" + "\n".join(failed))
    if ps.returncode != 0:
        raise RuntimeError(f"job {job.job_id}: PS failed: {err[-500:]}")
    rep = json.loads(out.strip().splitlines()[-1])
    st = rep["jobs"][str(job.job_id)]
    return RunResult(
        mode=tag, seconds=seconds,
        ps_rx_bytes=int(rep.get("nic_rx_bytes") or 0),
        ps_rx_packets=int(rep.get("nic_rx_packets") or 0),
        ps_packets={k: int(st.get(k, 0)) for k in ("grad_in", "partial_in", "retx_in", "forwarded_in",
                                                   "duplicates", "overlaps", "refused_source",
                                                   "refused_stamp")},
        retransmissions=retx, exact=mismatches == 0, mismatches=mismatches,
        worker_refused_stamp=refused_stamp,
        worker_cpu_s=worker_cpu, ps_cpu_s=float(rep.get("sync_cpu_s", rep.get("cpu_s", 0.0))),
        worker_rss_mib=rss, ps_rss_mib=float(rep.get("max_rss_mib", 0.0)),
        window_decreases=decreases, rank_resends=rank_resends,
        resends={k: sum(r[k] for r in rank_resends) for k in RESEND_REASONS},
        spurious={k: sum(r[k] for r in rank_resends) for k in SPURIOUS},
        ps_recovery={k: int(st.get(k, 0)) for k in PS_RECOVERY},
    )


def switch_neighbors(net: Any, topo: Topology, switches: list[str]) -> None:
    """Static ARP on every host for the aggregating switches' addresses (10.255.x.y).

    They lie in the hosts' 10.0.0.0/8 subnet, so hosts would ARP for them; the MAC given
    is that of the host's own switch port, which routes the packet on by IP.
    """
    for h in topo.hosts():
        iface = topo.iface(h)
        sw = iface["switch"]
        mac = port_mac(topo.device_id(sw), topo.port(sw, h))
        cmds = [f"ip neigh replace {switch_ip(topo.device_id(s))} lladdr {mac} dev {iface['name']} nud permanent"
                for s in switches]
        for i in range(0, len(cmds), 24):  # a tty line holds 4095 bytes (Network)
            net.host(h).cmd("; ".join(cmds[i:i + 24]))


def _experiment_topology(args: argparse.Namespace) -> Topology:
    """``--topo`` (builder spec or file; ``--bw`` overrides every link) or fat-tree ``--k``."""
    from topologies.spec import parse_topology

    if not args.topo:
        return fat_tree(args.k, bw=args.bw)
    topo = parse_topology(args.topo)
    if getattr(args, "bw_given", False):
        for _, _, data in topo.graph.edges(data=True):
            data["capacity"] = float(args.bw)
    return topo


def _job_hosts(topo: Topology, args: argparse.Namespace) -> list[tuple[str, list[str]]]:
    """(PS, workers) of each of ``--jobs`` jobs: PSs from ``--ps`` (or the first hosts),
    workers from ``--workers`` (a count or a list; default every other host) dealt
    round-robin to the jobs."""
    from controller.cli import UsageError

    hosts = topo.hosts()
    n = args.jobs
    if n < 1:
        raise UsageError("--jobs must be at least 1")
    pss = [h.strip() for h in args.ps.split(",")] if args.ps else hosts[:n]
    for h in pss:
        if h not in hosts:
            raise UsageError(f"--ps {h!r} is not a host of {topo.name} (hosts: {', '.join(hosts[:6])}, ...)")
    if len(pss) != n:
        raise UsageError(f"--jobs {n} needs {n} parameter servers, --ps gives {len(pss)}")
    rest = [h for h in hosts if h not in pss]
    spec = str(args.workers or "").strip()
    if spec.isdigit() and int(spec) > 0:
        if int(spec) > len(rest):
            raise UsageError(f"--workers {spec}: only {len(rest)} hosts besides the PS(s)")
        workers = rest[:int(spec)]
    elif spec and not spec.isdigit():
        workers = [h.strip() for h in spec.split(",") if h.strip()]
        bad = [h for h in workers if h not in rest]
        if bad:
            raise UsageError(f"--workers: {', '.join(bad)} not hosts of {topo.name} (or a PS)")
    else:
        workers = rest
    if len(workers) < n:
        raise UsageError(f"{len(workers)} workers for {n} jobs")
    return [(pss[j], workers[j::n]) for j in range(n)]


def prepare_ina(args: argparse.Namespace, topo: Topology) -> tuple[Any, ...]:
    """Everything ``--mode ina`` decides before a network starts: the jobs' hosts, the
    loss, each job's placement and gradients. Bad options raise (the caller's one line)."""
    from controller.deploy import check_loss

    plan = _job_hosts(topo, args)
    loss = check_loss(topo, opts.loss_dict(args.loss))
    argtypes.check_at_most("--budget", args.budget, len(topo.switches()),
                  f"{topo.name} has {len(topo.switches())} switches")
    return plan, loss, *_plan_jobs(args, topo, plan, loss)


def run_ina(args: argparse.Namespace, topo: Topology, prepared: tuple[Any, ...]) -> int:
    """The main experiment (see the module doc) on :func:`prepare_ina`'s plan."""
    plan, loss, ina_jobs, base_jobs, grads = prepared
    run_dir = Path(args.out_dir).resolve() / time.strftime("ina-%Y%m%d-%H%M%S")
    run_dir.mkdir(parents=True, exist_ok=True)
    console.save_to(run_dir)  # every table in full: tables.txt, tables.json, CSV
    results, resources = _run_on_network(args, topo, run_dir, ina_jobs, base_jobs, grads, loss)
    n_jobs = len(plan)
    ina_res, base_res = results[:n_jobs], results[n_jobs:]
    for job, ina, base in zip(ina_jobs, ina_res, base_res, strict=True):
        for t in summary_tables(job, ina, base, len(job.workers)):
            console.print(t)
    console.print(resources_table(resources, results))
    first_pl = ina_jobs[0].placement
    assert first_pl is not None
    ina, base = ina_res[0], base_res[0]
    summary = {
        "topology": topo.name, "bw_mbit": _link_rates(topo), "ps": plan[0][0], "workers": plan[0][1],
        "loss": {f"{s}:{p}": r for (s, p), r in loss.items()},
        "values": args.values, "values_per_packet": args.values_per_packet,
        "budget": args.budget, "placement": list(first_pl.switches),
        "sd": first_pl.result.tor, "gamma": first_pl.gamma, "runs": [asdict(r) for r in results],
        "jobs": [{"job_id": job.job_id, "ps": job.ps, "workers": job.workers,
                  "placement": list(job.placement.switches) if job.placement else [],
                  "time_ratio": i.seconds / b.seconds if b.seconds else None,
                  "ps_bytes_ratio": i.ps_rx_bytes / b.ps_rx_bytes if b.ps_rx_bytes else None}
                 for job, i, b in zip(ina_jobs, ina_res, base_res, strict=True)],
        "time_ratio": ina.seconds / base.seconds if base.seconds else None,
        "ps_bytes_ratio": ina.ps_rx_bytes / base.ps_rx_bytes if base.ps_rx_bytes else None,
        "congestion": args.congestion, "window": args.window, "resources": resources,
        "baseline_congestion": args.baseline_congestion or args.congestion,
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    plot_ina_vs_ps(run_dir / "ina_vs_ps.png", ina, base)
    console.print(f"results: {run_dir}/summary.json, tables.txt (+ .json, CSV), ina_vs_ps.png")
    return 0 if all(r.exact for r in results) else 1


def _link_rates(topo: Topology) -> list[float]:
    """The topology's distinct link rates (Mbit/s)."""
    return sorted({round(d["capacity"], 3) for _, _, d in topo.graph.edges(data=True)})


def _plan_jobs(args: argparse.Namespace, topo: Topology, plan: list[tuple[str, list[str]]],
               loss: dict) -> tuple[list[InaJob], list[InaJob], list[list[np.ndarray]]]:
    """Each job's INA plan (placement), its PS-only baseline and its gradients; logged."""
    ina_jobs, base_jobs, grads = [], [], []
    for j, (ps, workers) in enumerate(plan):
        grads.append(_gradients(len(workers), args.values, args.seed + j))
        ina_jobs.append(InaJob.plan(topo, ps, workers, args.budget, args.capacity, args.values,
                                    job_id=j + 1, values_per_packet=args.values_per_packet,
                                    tor_in_budget=args.tor_in_budget))
        base_jobs.append(InaJob.plan(topo, ps, workers, 0, args.capacity, args.values,
                                     job_id=j + 1, aggregate=False,
                                     values_per_packet=args.values_per_packet))
    bws = _link_rates(topo)
    _log(f"{topo.name}: {len(plan)} job(s), {args.values} values "
         f"({ina_jobs[0].num_fragments} fragments/worker of {args.values_per_packet} values), links {', '.join(f'{b:g}' for b in bws)} "
         f"Mbit/s" + (f", loss on {len(loss)} port(s)" if loss else ""))
    for job in ina_jobs:
        pl = job.placement
        assert pl is not None
        _log(f"job {job.job_id}: PS {job.ps}, {len(job.workers)} workers; placement (greedy+LP, "
             f"K={args.budget}): {', '.join(pl.switches) or '-'} (+ s_d {pl.result.tor}), "
             f"gamma = {pl.gamma:.2f} Mbit/s per worker, solved in {pl.solve_time_s * 1000:.0f} ms")
    return ina_jobs, base_jobs, grads


def _run_on_network(args: argparse.Namespace, topo: Topology, run_dir: Path, ina_jobs: list[InaJob],
                    base_jobs: list[InaJob], grads: list[list[np.ndarray]],
                    loss: dict) -> tuple[list[RunResult], dict[str, Any]]:
    """Deploy and run the INA jobs, then their PS-only baselines, on one network: the
    results (INA's first) and what the emulation cost."""
    from topologies.network import Network

    results: list[RunResult] = []
    aggregating = sorted({s for job in ina_jobs for s in job.aggregating_switches})
    t_net = time.monotonic()
    after_runs: list[Snapshot] = []
    with Network(topo, target=args.target, log=_log) as net:
        bring_up_s = time.monotonic() - t_net
        up_snap = Snapshot.take(net)
        addresses = net.grpc_addresses()
        switch_neighbors(net, topo, aggregating)
        congestion = {"ina": args.congestion, "ps": args.baseline_congestion or args.congestion}
        for jobs, tag in ((ina_jobs, "ina"), (base_jobs, "ps")):
            dep = InaDeployment(topo, addresses, jobs, loss=loss,
                                aggregator_ring=args.aggregator_ring if tag == "ina" else None)
            rep = dep.deploy()
            _log(f"{tag}: deployed: {len(dep.aggregators)} aggregating switches; {rep}")
            before = Snapshot.take(net)
            res = run_jobs(net, topo, list(zip(jobs, grads, strict=True)), run_dir, tag,
                           args.window, args.timeout, args.max_time,
                           congestion=congestion[tag])
            after_runs.append(Snapshot.take(net))
            split = time_split(topo, before, after_runs[-1], {
                "workers": sum(r.worker_cpu_s for r in res), "ps": sum(r.ps_cpu_s for r in res)})
            events = dep.read_events() if dep.aggregators else {}
            for job, r in zip(jobs, res, strict=True):
                r.switch_events = events
                r.split = split.to_dict()
                _log(f"{tag} job {job.job_id}: {r.seconds:.1f} s, PS received {r.ps_rx_bytes:,} "
                     f"bytes in {r.ps_rx_packets:,} packets; exact sums: {r.exact}")
            results.extend(res)
        if args.cli:
            net.cli()
    return results, resources(topo, bring_up_s, up_snap, after_runs, results)


def build_parser() -> argparse.ArgumentParser:
    """Command-line options (defaults: the README's `make run`)."""
    p = argtypes.Parser(prog="python -m experiments", description=described(__doc__))
    p.add_argument("--mode", choices=["ina", "reach"], default="ina",
                   help="experiment (default ina); the other modes (ndn, differentiated, bcube, "
                        "token, ddp, compare, train) take their own options "
                        "(python -m experiments --mode MODE --help)")
    p.add_argument("--topo", default=None, metavar="TOPO",
                   help="topology: builder spec (leaf-spine:2,4,2, star:8, ...) or a topology "
                        "file (default: fat-tree --k); --bw given overrides the file's rates")
    p.add_argument("--k", type=argtypes.integer(2), default=4, help="fat-tree arity when no --topo (default 4; every link at --bw)")
    p.add_argument("--ps", default=None, metavar="H[,H...]",
                   help="parameter server host(s), one per job (default: the first hosts)")
    p.add_argument("--jobs", type=argtypes.count, default=1, help="concurrent INA jobs (workers dealt "
                                                        "round-robin; default 1)")
    p.add_argument("--values", type=argtypes.values, default=65536, help="gradient size in float32 values (default 65536)")
    p.add_argument("--values-per-packet", type=int, choices=INA_VALUE_SIZES, default=INA_VALUES,
                   metavar="V", help="values a packet carries: 64 (default), 128 or 256; the "
                   "switches run the ina.p4 compiled for it (docs/ina.md)")
    p.add_argument("--budget", type=argtypes.natural, default=2, help="K programmable switches (default 2)")
    p.add_argument("--tor-in-budget", action="store_true",
                   help="count s_d in K: it aggregates only when placed (default: s_d always "
                        "aggregates, outside K)")
    p.add_argument("--aggregator-ring", type=argtypes.integer(1, 1024), metavar="N",
                   help="consistent hashing of the aggregator index over N aggregators "
                        "(default: crc32 modulo all 1024)")
    p.add_argument("--capacity", type=argtypes.positive, default=1000.0, help="switch capacity C in Mbit/s")
    p.add_argument("--window", type=argtypes.count, default=32, help="outstanding fragments per worker")
    p.add_argument("--timeout", type=argtypes.positive, default=1.0,
                   help="worker retransmission timeout in seconds (default 1; not a bound on the "
                        "run: that is --max-time)")
    p.add_argument("--congestion", choices=CONGESTION_MODES, default="fixed",
                   help="workers' window: fixed (--window outstanding) or aimd (a congestion "
                        "window up to --window, halved on a timeout; for incast at scale)")
    p.add_argument("--baseline-congestion", choices=CONGESTION_MODES, default=None,
                   help="the PS baseline's window, if not --congestion's (INA has no incast: "
                        "its switches send the PS one packet per fragment; the PS baseline "
                        "has N)")
    p.add_argument("--preset", choices=sorted(PRESETS),
                   help="a named set of the options above, which the command line's own "
                        "override: k8 = a k=8 fat-tree (80 switches, 128 hosts), 127 workers, "
                        "1024 values, 0.2 Mbit/s links (dilated), K=8, "
                        "--baseline-congestion aimd (make run-scale)")
    p.add_argument("--cli", action="store_true", help="open a Mininet CLI before teardown")
    opts.add_common(p, "ina", takes={
        "--seed": {"default": 1}, "--workers": {"default": "all", "hosts": True},
        "--bw": {"default": 2.0}, "--loss": {}, "--max-time": {"default": 300.0},
        "--target": {}, "--out-dir": {}},
        rejects={"--seeds": "it runs one gradient seed per job (SEED+j for job j)",
                 "--target-accuracy": "it synchronises one gradient and trains no model "
                                      "(time to accuracy: --mode train)"})
    return p


#: ``--preset NAME``: options put before the command line's own (which still win).
#: k8 (``make run-scale``): a k=8 fat-tree, 80 switches and 128 hosts, one INA job of
#: 127 workers and its PS baseline, links slowed to 0.2 Mbit/s so that the links and not
#: the two emulating cores set the pace (a time dilation: read the times against
#: their line-rate bounds, not as data-centre times), AIMD windows for the PS baseline's
#: incast (INA keeps its fixed window: its switches send the PS one packet per fragment).
PRESETS: dict[str, list[str]] = {
    "k8": ["--k", "8", "--values", "1024", "--bw", "0.2", "--budget", "8",
           "--baseline-congestion", "aimd", "--max-time", "900"],
}


def _apply_preset(argv: list[str]) -> list[str]:
    """Expand ``--preset NAME`` into its options, placed first so later ones override."""
    for i, a in enumerate(argv):
        name = a.split("=", 1)[1] if a.startswith("--preset=") else (
            argv[i + 1] if a == "--preset" and i + 1 < len(argv) else None)
        if name is not None:
            rest = argv[:i] + argv[i + (1 if "=" in a else 2):]
            return [*PRESETS.get(name, []), *rest, "--preset", name]
    return argv


def main(argv: list[str] | None = None) -> int:
    """``--mode ina`` (the default) and ``--mode reach``."""
    from controller.cli import UsageError
    from controller.deploy import DeployError
    from controller.placement import PlacementError
    from topologies import TopologyError

    parser = build_parser()
    args = parser.parse_args(_apply_preset(list(sys.argv[1:] if argv is None else argv)))
    if args.mode == "reach" and args.loss:
        parser.error("--mode reach checks reachability on a loss-free network: it does not take --loss")
    try:  # every check before anything starts
        topo = _experiment_topology(args)
        prepared = prepare_ina(args, topo) if args.mode == "ina" else ()
    except (UsageError, DeployError, TopologyError, argtypes.OptionError, PlacementError) as e:
        argtypes.fail(parser, e)
    if os.geteuid() != 0:
        console.print("[red]the experiment needs root (network namespaces)[/red]")
        return 2
    if args.mode == "reach":
        return run_reach(topo, args.target, args.cli)
    return run_ina(args, topo, prepared)

if __name__ == "__main__":
    sys.exit(main())
