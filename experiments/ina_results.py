"""What ``--mode ina`` (``experiments/ina.py``) reports: one aggregation run's result,
the tables comparing INA with its PS-only baseline, what the emulation cost, the plot."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.table import Table

from controller.ina import InaJob
from experiments.accounting import Snapshot
from topologies.base import Topology


@dataclass
class RunResult:
    """One aggregation run (INA or baseline)."""

    mode: str
    seconds: float
    ps_rx_bytes: int
    ps_rx_packets: int
    ps_packets: dict[str, int] = field(default_factory=dict)
    retransmissions: int = 0
    exact: bool = False
    mismatches: int = 0
    switch_events: dict[str, dict[str, int]] = field(default_factory=dict)
    worker_cpu_s: float = 0.0  # summed over the job's workers, synchronization only (no start-up)
    ps_cpu_s: float = 0.0
    worker_rss_mib: list[float] = field(default_factory=list)  # peak resident memory per worker
    ps_rss_mib: float = 0.0
    window_decreases: int = 0  # workers' congestion window halvings (--congestion aimd)
    worker_refused_stamp: int = 0  # RESULTs the workers refused by the job's stamp (docs/trust.md)
    # loss recovery (docs/ina.md, "Loss recovery"): the workers' re-sends and requests by
    # reason (resend_nack, request_fast, request_probe, request_timer), each rank's, and the PS's side
    # (nacks_sent, flushes_sent, flush_replies, delta_partials, requests_in,
    # result_resends, clears_sent)
    resends: dict[str, int] = field(default_factory=dict)
    spurious: dict[str, int] = field(default_factory=dict)  # spurious_requests, spurious_probes
    rank_resends: list[dict[str, int]] = field(default_factory=list)
    ps_recovery: dict[str, int] = field(default_factory=dict)
    split: dict[str, Any] = field(default_factory=dict)  # experiments.accounting.TimeSplit


def resources(topo: Topology, bring_up_s: float, up: Snapshot, after: list[Snapshot],
                results: list[RunResult]) -> dict[str, Any]:
    """What the emulation cost: bring-up time, peak memory of the switch processes and
    of the agents (each process's own peak, so shared pages count once per process),
    CPU of each switch process per run."""
    peak_rss = {k: max([up.rss_mib.get(k, 0.0), *(a.rss_mib.get(k, 0.0) for a in after)])
                for k in up.rss_mib}
    return {
        "switches": len(topo.switches()), "hosts": len(topo.hosts()),
        "switch_processes": len(up.rss_mib), "bring_up_s": round(bring_up_s, 2),
        "switch_rss_mib": {k: round(v, 1) for k, v in peak_rss.items()},
        "runs": [{"mode": r.mode, "workers": len(r.worker_rss_mib),
                  "worker_rss_mib_max": round(max(r.worker_rss_mib, default=0.0), 1),
                  "worker_rss_mib_total": round(sum(r.worker_rss_mib), 1),
                  "ps_rss_mib": round(r.ps_rss_mib, 1),
                  "switch_cpu_s": r.split.get("switch_cpu_s", {})} for r in results],
    }


def resources_table(res: dict[str, Any], results: list[RunResult]) -> Table:
    """What each run cost the emulation: time against its bound, CPU and memory."""
    t = Table(title=f"what the emulation cost: {res['switches']} switches in "
                    f"{res['switch_processes']} process(es), {res['hosts']} hosts; network up "
                    f"in {res['bring_up_s']:.1f} s; memory: each process's peak resident set")
    for col in ("run", "time (s)", "x bound", "switch CPU s, per process", "switch RSS MiB, per process",
                "agents", "worker RSS MiB max / total", "PS RSS MiB", "window halvings"):
        t.add_column(col, justify="left" if col in ("run",) else "right")
    rss = " / ".join(f"{v:,.0f}" for v in res["switch_rss_mib"].values())
    for r, rr in zip(results, res["runs"], strict=True):
        cpu = " / ".join(f"{v:.1f}" for v in rr["switch_cpu_s"].values())
        bound = r.split.get("line_rate_bound_s") or 0.0
        t.add_row(r.mode, f"{r.seconds:.2f}", f"{r.seconds / bound:.1f}" if bound else "-", cpu, rss,
                  str(rr["workers"] + 1), f"{rr['worker_rss_mib_max']:.0f} / {rr['worker_rss_mib_total']:,.0f}",
                  f"{rr['ps_rss_mib']:.0f}", str(r.window_decreases))
    return t


def summary_tables(job: InaJob, ina: RunResult, base: RunResult, n: int) -> list[Table]:
    """One job's INA run beside its PS-only baseline: times and bytes, where the time
    went, the ratios, the aggregating switches' counters."""
    t = Table(title=f"job {job.job_id}: in-network aggregation vs parameter server "
                    "(same gradients, same network)")
    for col in ("run", "time (s)", "PS ingress bytes", "PS ingress packets",
                "GRADs re-sent / requests (spurious)", "exact sums"):
        t.add_column(col, justify="right" if col != "run" else "left")
    for r in (ina, base):
        nack = r.resends.get("resend_nack", 0)
        t.add_row("INA" if r.mode == "ina" else "PS only", f"{r.seconds:.2f}", f"{r.ps_rx_bytes:,}",
                  f"{r.ps_rx_packets:,}",
                  f"{nack} / {r.retransmissions - nack} ({sum(r.spurious.values())})",
                  "[green]yes[/green]" if r.exact else f"[red]{r.mismatches} wrong[/red]")
    tables = [t]
    if ina.split and base.split:
        b = Table(title="where the time went (seconds): line-rate bound = busiest link's bytes "
                        "at its capacity; CPU of switch processes and agents")
        for col in ("run", "time", "bound", "x bound", "busiest link", "switches",
                    "max switch", "workers", "PS"):
            b.add_column(col, justify="left" if col in ("run", "busiest link") else "right")
        for r in (ina, base):
            sp = r.split
            bound = sp["line_rate_bound_s"]
            b.add_row("INA" if r.mode == "ina" else "PS", f"{r.seconds:.2f}", f"{bound:.2f}",
                      f"{r.seconds / bound:.1f}" if bound else "-",
                      f"{sp['busiest_link']} {sp['busiest_link_bytes'] / 1e3:,.0f} kB",
                      f"{sp['switch_cpu_s_total']:.1f}",
                      f"{sp['busiest_switch']} {sp['busiest_switch_cpu_s']:.1f}",
                      f"{r.worker_cpu_s:.1f}", f"{r.ps_cpu_s:.1f}")
        tables.append(b)
    ratios = Table(title="ratios (INA / PS only)")
    ratios.add_column("metric")
    ratios.add_column("ratio", justify="right")
    ratios.add_column("reference", justify="right")
    if base.seconds:
        ratios.add_row("synchronization time", f"{ina.seconds / base.seconds:.2f}", "< 1 is faster")
    if base.ps_rx_bytes:
        ratios.add_row("PS ingress bytes", f"{ina.ps_rx_bytes / base.ps_rx_bytes:.3f}",
                       f"1/N = {1 / n:.3f}")
    tables.append(ratios)
    if ina.switch_events:
        ev = Table(title="aggregating switches (ina_events counters)")
        ev.add_column("switch")
        keys = ["added", "partial", "passed_on", "duplicate", "cleared", "result"]
        for k in keys:
            ev.add_column(k, justify="right")
        for s, v in ina.switch_events.items():
            ev.add_row(s, *(str(v.get(k, 0)) for k in keys))
        tables.append(ev)
    return tables


def plot_ina_vs_ps(path: Path, ina: RunResult, base: RunResult) -> None:
    """Synchronization time (with the line-rate bound) and PS ingress, INA beside PS only."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
    labels = ["INA", "PS only"]
    x = np.arange(2)
    # measured next to the line-rate bound (busiest link's bytes at its capacity), as in
    # the "where the time went" table
    measured = axes[0].bar(x - 0.2, [ina.seconds, base.seconds], 0.4,
                           color=["tab:green", "tab:blue"], label="measured")
    bounds = [r.split.get("line_rate_bound_s") or 0.0 for r in (ina, base)]
    bound = axes[0].bar(x + 0.2, bounds, 0.4, color="tab:gray", label="line-rate bound (busiest link)")
    for bars in (measured, bound):
        axes[0].bar_label(bars, fmt="%.2f", fontsize=7)
    axes[0].set_xticks(x, labels)
    axes[0].set_ylabel("synchronization time (s)")
    axes[0].legend(fontsize=7)
    axes[1].bar(labels, [ina.ps_rx_bytes / 1e6, base.ps_rx_bytes / 1e6], color=["tab:green", "tab:blue"])
    axes[1].set_ylabel("PS ingress (MB)")
    fig.suptitle("gradnet: in-network aggregation vs parameter server")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
