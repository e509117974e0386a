"""``--mode ddp``: an unchanged PyTorch DDP script, with gradients averaged by gradnet INA.

The digits CNN (``hosts/training.py``) trains with DDP on N workers, one process per
Mininet host, three times on the same seeds and network:

- ``gloo``: plain DDP, gradients all-reduced by gloo over TCP through the P4 switches;
- ``ina-ps``: the INA hook (``hosts/ina/ddp_hook.py``) with no aggregating switch: every
  worker's gradients go to the PS (the baseline for the PS's bytes);
- ``ina``: the INA hook with the job's aggregating switches (greedy + LP placement).

It prints accuracy per epoch, time, the bytes that reached the PS and the first batch's
largest gradient difference from gloo's average, and a timing table: the median step
time, the backward pass's compute alone, the communication per step and the fraction of
it overlapped with the backward pass (``hosts/ina/ddp_train.py``), with the INA hook's
fragments and bytes per step. Wall-clock time on the emulated network (no dilation; the
switches and all ranks share the machine's cores). ``--bucket-cap-mb`` (default 0.004:
three buckets after DDP's rebuild) gives DDP several buckets to overlap. It writes
``summary.json`` and a plot.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from rich.table import Table

from controller import argtypes
from controller.ina import InaDeployment, InaJob
from controller.output import TableConsole
from experiments import options as opts
from experiments.ina import switch_neighbors
from experiments.runner import finish, spawn
from experiments.runner import log as _log
from topologies.base import Topology
from wire.argtypes import described
from wire.fixedpoint import bfp_error_bound
from wire.ina import INA_MAX_WORKERS, INA_VALUE_SIZES, INA_VALUES

console = TableConsole()
RUNS = ("gloo", "ina-ps", "ina")


def _model_size(seed: int) -> int:
    from hosts.training import make_model

    return sum(p.numel() for p in make_model(seed).parameters())


def run_ddp(net: Any, topo: Topology, ps: str, workers: list[str], run: str, job: InaJob | None,
            out: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One training run (``run`` in RUNS) on a live network; returns its record."""
    out.mkdir(parents=True, exist_ok=True)
    ps_proc = policy = None
    if job is not None:
        policy = job.write_policy(out / "policy.json")
        ps_proc = spawn(net.host(ps), out / "ps",
                         [sys.executable, "-m", "hosts.ina.ps", "--policy", str(policy), "--json",
                          "--rounds", "0", "--idle-exit", "20", "--linger", "3",
                          "--round-cycle", str(args.round_cycle),
                          "--iface", topo.iface(ps)["name"], "--max-time", str(args.max_time)])
        time.sleep(0.5)
    master = topo.host_ip(workers[0])
    procs = []
    t0 = time.monotonic()
    for rank, w in enumerate(workers):
        argv = [sys.executable, "-m", "hosts.ina.ddp_train", "--rank", str(rank), "--world",
                str(len(workers)), "--master-addr", master, "--master-port", str(args.port),
                "--epochs", str(args.epochs), "--lr", str(args.lr), "--batch", str(args.batch),
                "--seed", str(args.seed), "--max-steps", str(args.max_steps), "--check-grad",
                "--bucket-cap-mb", str(args.bucket_cap_mb)]
        if job is not None:
            argv += ["--hook", "ina", "--policy", str(policy), "--round-cycle",
                     str(args.round_cycle)]
        # gloo binds to the host's emulated interface, not to its hostname's address
        procs.append(spawn(net.host(w), out / f"rank{rank}",
                            ["env", f"GLOO_SOCKET_IFNAME={topo.iface(w)['name']}", *argv]))
    ranks = []
    for rank, p in enumerate(procs):
        _, so, se = finish(p, out / f"rank{rank}", args.max_time)
        if p.returncode != 0:
            raise RuntimeError(f"{run}: rank {rank} failed ({p.returncode}): {se[-800:]}")
        lines = [json.loads(x) for x in so.splitlines() if x.startswith("{")]
        ranks.append({"epochs": [x for x in lines if "epoch" in x], "summary": lines[-1]})
    seconds = time.monotonic() - t0
    ps_rep: dict[str, Any] = {}
    if ps_proc is not None:
        _, so, se = finish(ps_proc, out / "ps", args.max_time)
        if ps_proc.returncode != 0:
            raise RuntimeError(f"{run}: PS failed ({ps_proc.returncode}): {se[-800:]}")
        ps_rep = json.loads(so.strip().splitlines()[-1])
    s0 = ranks[0]["summary"]
    return {
        "run": run, "seconds": seconds,
        "accuracy_per_epoch": [e["accuracy"] for e in ranks[0]["epochs"]],
        "accuracy": s0["accuracy"],
        "ranks_agree": len({r["summary"]["weights_sha256_16"] for r in ranks}) == 1,
        "grad_max_abs_diff_vs_gloo": max(r["summary"].get("grad_max_abs_diff_vs_gloo", 0.0)
                                         for r in ranks),
        "ps_rx_bytes": ps_rep.get("nic_rx_bytes"),
        "ps_rounds": (ps_rep.get("jobs", {}).get(str(job.job_id), {}).get("rounds")
                      if job is not None and ps_rep else None),
        "ps_fragments": (ps_rep.get("jobs", {}).get(str(job.job_id), {}).get("completed")
                         if job is not None and ps_rep else None),
        "retransmissions": sum(r["summary"].get("ina_retransmissions", 0) for r in ranks),
        "timing": [r["summary"]["timing"] for r in ranks],
        "ina_rounds": s0.get("ina_rounds"),
        "ina_buckets": s0.get("ina_buckets"),
        "ina_max_fragment": s0.get("ina_max_fragment"),
        "ina_fragment_space": s0.get("ina_fragment_space"),
    }


def build_parser() -> argparse.ArgumentParser:
    """Options of ``--mode ddp``."""
    ap = argtypes.Parser(prog="python -m experiments --mode ddp",
                                 description=described(__doc__),
                                 epilog="--workers: the DDP ranks (the hosts after the PS, in "
                                        "order); --bw: every link of --topo; --loss: the same "
                                        "ports in every run.")
    ap.add_argument("--topo", default="star:5", help="topology (default star:5)")
    ap.add_argument("--ps", default=None, help="PS host (default: the first host)")
    ap.add_argument("--budget", type=argtypes.natural, default=0,
                    help="aggregating switches K besides the PS's ToR s_d, which always "
                         "aggregates (default 0: on star:5, s_d aggregates all four ranks)")
    ap.add_argument("--epochs", type=argtypes.count, default=4)
    ap.add_argument("--batch", type=argtypes.count, default=16, help="per-rank batch (default 16)")
    ap.add_argument("--lr", type=argtypes.positive, default=0.5, help="SGD learning rate (default 0.5)")
    ap.add_argument("--max-steps", type=argtypes.natural, default=0, help="cap on steps per epoch (0: none)")
    ap.add_argument("--port", type=argtypes.port, default=29500, help="gloo rendezvous port")
    ap.add_argument("--runs", default=",".join(RUNS), help=f"subset of {','.join(RUNS)}")
    ap.add_argument("--bucket-cap-mb", type=argtypes.positive, default=0.004,
                    help="DDP's bucket_cap_mb (default 0.004: the digits CNN in 3 buckets)")
    ap.add_argument("--round-cycle", type=argtypes.count, default=1024,
                    help="INA hook and PS: rounds (buckets) before the fragment numbers repeat")
    ap.add_argument("--number-format", choices=("bfp", "fixed"), default="bfp",
                    help="how the INA hook sends values: bfp, block floating point (a shared "
                         "exponent per packet's values, agreed in the network; default), or "
                         "fixed (one scale 2^-16 for every value)")
    ap.add_argument("--values-per-packet", type=int, choices=INA_VALUE_SIZES, default=INA_VALUES,
                    metavar="V", help="values an INA packet carries: 64 (default), 128 or 256 "
                    "(docs/ina.md)")
    opts.add_common(ap, "ddp", takes={
        "--seed": {"default": 0}, "--workers": {"default": 4}, "--bw": {"default": 20.0},
        "--loss": {}, "--max-time": {"default": 600.0}, "--target": {}, "--out-dir": {}},
        rejects={"--seeds": "it runs one seed (--seed N); run it once per seed",
                 "--target-accuracy": "it trains a fixed number of epochs (--epochs; time to "
                                      "accuracy: --mode train)"})
    return ap


def _check(args: argparse.Namespace) -> tuple[Any, ...]:
    """The runs, topology, PS, ranks, loss and jobs the options ask for; raises (the
    caller's one line) when they cannot work together."""
    from controller.deploy import check_loss
    from topologies.spec import parse_topology

    runs = [r.strip() for r in args.runs.split(",") if r.strip()]
    bad = [r for r in runs if r not in RUNS]
    if bad or not runs:
        raise argtypes.OptionError(f"--runs: unknown run(s) {', '.join(bad)} (choose from {', '.join(RUNS)})")
    topo = parse_topology(args.topo)
    for _, _, d in topo.graph.edges(data=True):
        d["capacity"] = float(args.bw)
    hosts = topo.hosts()
    (ps,) = argtypes.check_hosts(topo, "--ps", [args.ps or hosts[0]])
    rest = [h for h in hosts if h != ps]
    if not 1 <= args.workers <= min(len(rest), INA_MAX_WORKERS):
        raise argtypes.OptionError(f"--workers: must be in 1..{min(len(rest), INA_MAX_WORKERS)} on "
                          f"{topo.name} (got {args.workers})")
    loss = check_loss(topo, opts.loss_dict(args.loss))
    opts.check_full_batch(args.workers, args.batch, seed=args.seed)
    workers = rest[:args.workers]
    values = _model_size(args.seed)
    fmt, vpp = args.number_format, args.values_per_packet
    jobs = {"ina-ps": InaJob.plan(topo, ps, workers, 0, 1000.0, values, aggregate=False,
                                  number_format=fmt, values_per_packet=vpp),
            "ina": InaJob.plan(topo, ps, workers, args.budget, 1000.0, values,
                               number_format=fmt, values_per_packet=vpp)}
    return runs, topo, ps, workers, loss, values, jobs


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m experiments --mode ddp``."""
    from controller.deploy import DeployError
    from controller.placement import PlacementError
    from topologies import TopologyError
    from topologies.network import Network

    parser = build_parser()
    args = parser.parse_args(argv)
    try:  # every check before anything starts
        runs, topo, ps, workers, loss, values, jobs = _check(args)
    except (argtypes.OptionError, DeployError, TopologyError, PlacementError) as e:
        argtypes.fail(parser, e)
    if os.geteuid() != 0:
        console.print("[red]the experiment needs root (network namespaces)[/red]")
        return 2
    run_dir = Path(args.out_dir).resolve() / time.strftime("ddp-%Y%m%d-%H%M%S")
    console.save_to(run_dir)  # every table in full: tables.txt, tables.json, CSV
    _log(f"{topo.name}: DDP on {len(workers)} ranks ({', '.join(workers)}), PS {ps}, model of "
         f"{values} parameters ({jobs['ina'].num_fragments} INA fragments per step), "
         f"{args.epochs} epochs, links {args.bw:g} Mbit/s")
    records = []
    with Network(topo, target=args.target, log=_log) as net:
        switch_neighbors(net, topo, jobs["ina"].aggregating_switches)
        addresses = net.grpc_addresses()
        for run in runs:
            job = jobs.get(run)
            dep = InaDeployment(topo, addresses, [job or jobs["ina-ps"]], loss=loss)
            dep.deploy()
            _log(f"{run}: training ...")
            rec = run_ddp(net, topo, ps, workers, run, job, run_dir / run, args)
            _log(f"{run}: accuracy {rec['accuracy']:.3f} in {rec['seconds']:.1f} s")
            records.append(rec)
    _print(records, len(workers), args.number_format)
    _print_timing(records)
    summary = {"topology": topo.name, "ps": ps, "workers": workers, "values": values,
               "epochs": args.epochs, "loss": {f"{sw}:{pt}": r for (sw, pt), r in loss.items()},
               "runs": records, "timing": timing_rows(records),
               "bucket_cap_mb": args.bucket_cap_mb, "round_cycle": args.round_cycle,
               "number_format": args.number_format}
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    _plot(run_dir / "ddp_accuracy.png", records)
    console.print(f"results: {run_dir}/summary.json, {run_dir}/ddp_accuracy.png")
    ok = all(r["ranks_agree"] for r in records)
    return 0 if ok else 1


def _print(records: list[dict[str, Any]], n: int, number_format: str = "bfp") -> None:
    t = Table(title="DDP training of the digits CNN: gloo vs the gradnet INA hook "
                    "(same seeds, same network)")
    for col in ("run", "accuracy per epoch", "final", "time (s)", "PS ingress bytes",
                "grad diff vs gloo", "ranks in sync"):
        t.add_column(col, justify="left" if col in ("run", "accuracy per epoch") else "right")
    base = next((r["ps_rx_bytes"] for r in records if r["run"] == "ina-ps"), None)
    for r in records:
        b = r["ps_rx_bytes"]
        bs = "-" if b is None else f"{b:,}" + (f" ({b / base:.2f}x)" if base and
                                               r["run"] == "ina" else "")
        t.add_row(r["run"], " ".join(f"{a:.3f}" for a in r["accuracy_per_epoch"]),
                  f"{r['accuracy']:.3f}", f"{r['seconds']:.1f}", bs,
                  f"{r['grad_max_abs_diff_vs_gloo']:.1e}",
                  "yes" if r["ranks_agree"] else "[red]no[/red]")
    console.print(t)
    rounding = ("block floating point's rounding (docs/ina.md: at most "
                f"{bfp_error_bound(n):.1e} of each 64-value block's largest magnitude)"
                if number_format == "bfp" else "the fixed-point rounding (scale 2^-16)")
    console.print(f"PS bytes: INA / INA without aggregation should be about 1/N = {1 / n:.2f}; "
                  f"grad diff: {rounding} of the hook.")


def _med(v: list[float | None]) -> float | None:
    v = [x for x in v if x is not None]
    return sorted(v)[len(v) // 2] if v else None


def timing_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per run: medians over the ranks of each rank's per-step medians (seconds), the
    overlap fraction, and the INA hook's fragments and first sends per step."""
    rows = []
    for r in records:
        t = r["timing"]
        b = r.get("ina_buckets") or []
        rows.append({
            "run": r["run"],
            "step_s": _med([x["step_s"] for x in t]),
            "backward_s": _med([x["backward_s"] for x in t]),
            "backward_compute_s": _med([x["backward_compute_s"] for x in t]),
            "comm_s": _med([x["comm_s"] for x in t]),
            "overlap": _med([x["overlap"] for x in t]),
            "buckets": [x["values"] for x in b] if b else None,
            "fragments_per_step": sum(x["fragments"] for x in b) if b else None,
        })
    return rows


def _print_timing(records: list[dict[str, Any]]) -> None:
    t = Table(title="DDP step timing (median over steps after the first, then over ranks; "
                    "wall clock on the emulated network, not dilated)")
    for col in ("run", "step ms", "bwd ms", "compute ms", "comm ms", "overlap", "buckets",
                "frags/step"):
        t.add_column(col, justify="left" if col == "run" else "right")
    ms = lambda v: "-" if v is None else f"{1000 * v:.1f}"  # noqa: E731
    for row in timing_rows(records):
        t.add_row(row["run"], ms(row["step_s"]), ms(row["backward_s"]),
                  ms(row["backward_compute_s"]), ms(row["comm_s"]),
                  "-" if row["overlap"] is None else f"{100 * row['overlap']:.0f}%",
                  "-" if not row["buckets"] else " ".join(map(str, row["buckets"])),
                  "-" if row["fragments_per_step"] is None else str(row["fragments_per_step"]))
    console.print(t)
    console.print("bwd: backward wall time; compute: backward without communication; "
                  "overlap: 1 - (bwd - compute) / comm, the share of the buckets' "
                  "communication hidden behind the backward pass; buckets: values per INA "
                  "bucket; frags/step: ceil(B/64) per bucket (padded to the job it would be "
                  "buckets x F).")


def _plot(path: Path, records: list[dict[str, Any]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.5))
    for r in records:
        acc = r["accuracy_per_epoch"]
        ax.plot(range(1, len(acc) + 1), acc, marker="o", label=r["run"])
    ax.set_xlabel("epoch")
    ax.set_ylabel("test accuracy")
    ax.set_title("DDP digits CNN: gloo vs gradnet INA hook")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
