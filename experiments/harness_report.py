"""The time-to-accuracy harness's summary (``experiments/train.py``): per scheme the mean
and confidence interval of every figure over the seeds, the table and the plots."""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
from rich.table import Table

from controller.p4runtime import REPO_ROOT
from experiments.harness_records import Plan, RunRecord


def summarize(records: list[RunRecord], plan: Plan, reference: str) -> list[dict[str, Any]]:
    """Per scheme: mean and CI of every figure over the seeds, and the paired ratio of
    its time to target to the reference's."""
    from experiments.stats import mean_ci, paired_ratios

    rows = []
    by = {s: [r for r in records if r.scheme == s] for s in plan.schemes}
    ref_tt = {r.seed: r.time_to_target_s for r in by.get(reference, []) if r.time_to_target_s}
    ref_emulated = {r.seed for r in by.get(reference, []) if r.cpu_bound}
    for s in plan.schemes:
        rs = by[s]
        tt = {r.seed: r.time_to_target_s for r in rs if r.time_to_target_s}

        def iv(vals: list[float | None]) -> dict[str, Any]:
            return asdict(mean_ci([v for v in vals if v is not None]))

        rows.append({
            "scheme": s, "topology": plan.settings[s].topo.name, "nic_mbit": plan.settings[s].nic_mbit,
            "runs": len(rs), "ok": sum(r.ok for r in rs),
            "reached": len(tt), "missed": [r.seed for r in rs if not r.time_to_target_s],
            "time_to_target_s": iv(list(tt.values())),
            "bound_to_target_s": iv([r.bound_to_target_s for r in rs]),
            "final_accuracy": iv([r.final_accuracy for r in rs]),
            "final_heldout": iv([r.final_heldout for r in rs]),
            "sync_s_per_iter": iv([r.sync_s_per_iter for r in rs]),
            "compute_s_per_iter": iv([r.compute_s_per_iter for r in rs]),
            # actual: the bytes that crossed the busiest link (re-sends included) at its rate
            "line_rate_bound_s_per_iter": iv([r.line_rate_bound_s / r.iterations if r.iterations else None
                                              for r in rs]),
            "ideal_bound_s_per_iter": iv([r.ideal_bound_s for r in rs]),
            "x_bound": iv([r.x_bound for r in rs]),
            "resent_bytes": iv([float(r.resent_bytes) for r in rs]),
            "cpu_share": iv([r.cpu_share for r in rs]),
            # the pace's evidence (experiments/fidelity.py): CPU wanted over the cores,
            # run-queue wait per second, the machine's CPU, agents' receive drops
            "demand_share": iv([r.demand_share for r in rs]),
            "wait_share": iv([r.wait_share for r in rs]),
            "machine_busy": iv([r.machine_busy for r in rs]),
            "rx_drops": sum(r.rx_drops or 0 for r in rs),
            "pace": sorted({p for r in rs for p in r.pace.split(", ") if p}),
            "ratio_to_reference": asdict(paired_ratios(tt, ref_tt)) if s != reference else None,
            "cpu_bound_runs": sum(r.cpu_bound for r in rs),  # the emulator-bound runs
            "fidelity": {v: sum(r.fidelity == v for r in rs) for v in sorted({r.fidelity for r in rs})},
            "models_identical": all(r.models_identical for r in rs),
        })
        # a ratio between runs the emulator paced says nothing about the schemes; only the
        # seeds that enter the paired ratio (both reached the target) count: a run that
        # missed the target is in no ratio, whatever paced it
        paired = set(tt) & set(ref_tt)
        emulated = {r.seed for r in rs if r.cpu_bound} | ref_emulated
        rows[-1]["verdict"] = not (paired & emulated)
    return rows


def fmt_interval(iv: dict[str, Any] | None, spec: str = ".2f", scale: float = 1.0) -> str:
    """``mean ± half-width`` of a :func:`experiments.stats.mean_ci` dict (``(n=1)`` for one
    value, ``-`` for none), the values times ``scale``; every harness-based table uses it."""
    if not iv or not iv.get("n"):
        return "-"
    m = iv["mean"] * scale
    if iv["n"] < 2:
        return f"{m:{spec}} (n=1)"
    return f"{m:{spec}} ± {iv['half_width'] * scale:{spec}}"


def print_table(rows: list[dict[str, Any]], plan: Plan, args: argparse.Namespace) -> Table:
    """The rich table of the summary (mean ± 95 % CI half-width over seeds)."""
    dil = f", compute fixed at {args.compute_time:g} s/batch (DILATED TIME)" if args.compute_time else ""
    t = Table(title=f"Time to {plan.target_accuracy:.0%} test accuracy: {args.model} on {args.data}, "
                    f"{len(plan.workers)} workers, {args.bw:g} Mbit/s links, {len(plan.seeds)} seeds "
                    f"(mean ± 95 % CI){dil}")
    for col in ("scheme", "topology", "NIC Mbit/s", "reached", "time to target s", "bound s",
                f"÷ {args.reference} (paired)", "final test acc", "held-out acc", "sync s/iter",
                "ideal bound s/iter", "x bound", "actual bound s/iter", "re-sent MB/run",
                "compute s/iter", "CPU wanted", "waited s/s", "machine busy", "rx drops", "fidelity"):
        t.add_column(col, justify="left" if col == "scheme" else "right")
    for r in rows:
        t.add_row(*_cells(r))
    return t


def _cells(r: dict[str, Any]) -> list[str]:
    """One row of the table."""
    reached = f"{r['reached']}/{r['runs']}" + (" [red](missed)[/red]" if r["missed"] else "")
    if r["ratio_to_reference"] is None:
        ratio = "1 (reference)"
    elif not r.get("verdict", True):
        ratio = "no verdict (emulator-bound)"
    else:
        ratio = fmt_interval(r["ratio_to_reference"], ".2f")
    fid = ", ".join(f"{n} {v}" for v, n in r.get("fidelity", {}).items()) or "-"
    if r.get("pace"):
        fid += f" ({', '.join(r['pace'])})"
    return [r["scheme"], r["topology"], f"{r['nic_mbit']:g}", reached,
            fmt_interval(r["time_to_target_s"], ".1f"), fmt_interval(r["bound_to_target_s"], ".1f"),
            ratio, fmt_interval(r["final_accuracy"], ".3f"), fmt_interval(r["final_heldout"], ".3f"),
            fmt_interval(r["sync_s_per_iter"], ".3f"), fmt_interval(r.get("ideal_bound_s_per_iter"), ".3f"),
            fmt_interval(r.get("x_bound"), ".1f"), fmt_interval(r["line_rate_bound_s_per_iter"], ".3f"),
            fmt_interval(r.get("resent_bytes"), ".2f", 1e-6), fmt_interval(r["compute_s_per_iter"], ".3f"),
            fmt_interval(r.get("demand_share"), ".2f"), fmt_interval(r.get("wait_share"), ".2f"),
            fmt_interval(r.get("machine_busy"), ".2f"), str(r.get("rx_drops", "-")), fid]


def plot(run_dir: Path, records: list[RunRecord], rows: list[dict[str, Any]], plan: Plan,
         args: argparse.Namespace) -> None:
    """``accuracy_vs_time.png`` (mean over seeds, 95 % band) and ``time_to_accuracy.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from experiments.stats import mean_ci

    dil = " (dilated: fixed compute per batch)" if args.compute_time else ""
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for s in plan.schemes:
        curves = [r.curve for r in records if r.scheme == s and r.curve]
        if not curves:
            continue
        end = max(c[-1]["t"] for c in curves)
        grid = np.linspace(0.0, end, 60)
        ys = np.array([np.interp(grid, [p["t"] for p in c], [p["accuracy"] for p in c],
                                 right=np.nan) for c in curves])
        stats = [mean_ci(list(col[~np.isnan(col)])) for col in ys.T]
        mean = np.array([x.mean for x in stats])
        lo = np.clip([x.low if x.n > 1 else x.mean for x in stats], 0.0, 1.0)
        hi = np.clip([x.high if x.n > 1 else x.mean for x in stats], 0.0, 1.0)
        (line,) = ax.plot(grid, mean, label=f"{s} ({len(curves)} seeds)")
        ax.fill_between(grid, lo, hi, alpha=0.12, color=line.get_color(), lw=0)
    ax.axhline(plan.target_accuracy, color="grey", ls=":", lw=1, label="target")
    ax.set_xlabel("training time (s)" + dil)
    ax.set_ylabel("test accuracy")
    ax.set_title(f"{args.model} on {args.data}, {len(plan.workers)} workers, {args.bw:g} Mbit/s")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(run_dir / "accuracy_vs_time.png", dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 3.8))
    names, means, errs, colors = [], [], [], []
    for r in rows:
        iv = r["time_to_target_s"]
        names.append(r["scheme"] + ("" if not r["missed"] else f"\n(missed {len(r['missed'])})"))
        means.append(iv["mean"] if iv["n"] else 0.0)
        errs.append(iv["half_width"] if iv["n"] > 1 else 0.0)
        colors.append("#4c8bd6" if not r["missed"] else "#d62728")
    ax.bar(names, means, yerr=errs, capsize=4, color=colors)
    bounds = [r["bound_to_target_s"]["mean"] if r["bound_to_target_s"]["n"] else np.nan for r in rows]
    if np.isfinite(bounds).any():  # an all-NaN scatter breaks matplotlib's tight_layout
        ax.scatter(names, bounds, marker="_", s=400, color="black", zorder=3,
                   label="bound: compute + line-rate sync of the steps to target")
        ax.legend(fontsize=8)
    ax.tick_params(axis="x", labelrotation=30)
    ax.set_ylabel(f"time to {plan.target_accuracy:.0%} accuracy (s)" + dil)
    ax.set_title("time to accuracy, mean and 95 % CI over seeds")
    fig.tight_layout()
    fig.savefig(run_dir / "time_to_accuracy.png", dpi=120)
    plt.close(fig)


def pick_reference(schemes: list[str], asked: str | None) -> str:
    """The scheme the ratios are taken against: ``asked`` if it is run (else one clear
    error), otherwise gloo if run, else ring, else the first scheme."""
    from experiments.harness_records import HarnessError

    if asked is not None:
        if asked not in schemes:
            raise HarnessError(f"--reference {asked}: not among the schemes run ({', '.join(schemes)})")
        return asked
    return next((s for s in ("gloo", "ring") if s in schemes), schemes[0])


def manifest(args: argparse.Namespace, plan: Plan) -> dict[str, Any]:
    """Where a table came from: commit, target, options, seeds, machine load."""
    from targets.launch import resolve_target

    def git(*a: str) -> str:
        try:
            return subprocess.run(["git", *a], cwd=REPO_ROOT, capture_output=True, text=True,
                                  timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    target = resolve_target(args.target)
    version = ""
    if target == "bmv2":
        try:
            version = subprocess.run(["simple_switch_grpc", "--version"], capture_output=True,
                                     text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            version = "?"
    return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain")),
            "target": target, "target_version": version or "gradnet embedded",
            "options": {k: v for k, v in vars(args).items() if k != "func"},
            "seeds": plan.seeds, "schemes": plan.schemes, "topology": plan.topo.name,
            "ps": plan.ps, "workers": plan.workers, "lr": plan.lr, "batch": plan.batch,
            "global_batch": plan.global_batch, "steps_per_epoch": plan.steps_per_epoch,
            "target_accuracy": plan.target_accuracy, "parameters": plan.parameters,
            "load_at_start": os.getloadavg(), "cpus": os.cpu_count(), "python": platform.python_version(),
            "started": time.strftime("%Y-%m-%d %H:%M:%S")}
