"""What ``--mode ndn`` (``experiments/ndn.py``) reports of its runs: the result of one
run of the PS and its GPUs, and its tables and plot."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.table import Table


@dataclass
class NdnRunResult:
    """One run of the PS and its GPUs."""

    transport: str
    mode: str
    seconds: float
    ps: dict[str, Any]
    gpus: dict[str, dict[str, Any]]
    exact: bool = False
    problems: list[str] = field(default_factory=list)
    switches: dict[str, Any] = field(default_factory=dict)
    #: bytes per directed link ``a->b`` during the training (the first round's start to
    #: the end), from the switches' port counters; empty when not measured
    link_bytes: dict[str, int] = field(default_factory=dict)

    @property
    def accepted(self) -> list[str]:
        return list(self.ps.get("accepted", []))

    @property
    def probe_recoveries(self) -> int:
        return sum(int(g.get("updates_recovered_by_probe", 0)) for g in self.gpus.values())

    @property
    def distribute_bytes_per_round(self) -> float:
        r = self.ps.get("rounds") or []
        return float(np.mean([x["distribute_bytes"] for x in r])) if r else 0.0

    @property
    def tx_bytes_per_round(self) -> float:
        r = self.ps.get("rounds") or []
        return float(np.mean([x["tx_total"] for x in r])) if r else 0.0

    @property
    def round_seconds(self) -> float:
        r = self.ps.get("rounds") or []
        return float(np.mean([x["seconds"] for x in r])) if r else 0.0

    @property
    def train_seconds(self) -> float | None:
        """Synchronous training time INCLUDING the last distribution: from the first
        round's start at the PS to the moment the last GPU held the final version (one
        monotonic clock for every namespace of the machine). None if a GPU never got it."""
        t0, final = self.ps.get("train_start"), self.ps.get("version", 0)
        if t0 is None or not final:
            return None
        got = [g.get("version_at", {}).get(str(final)) for n, g in self.gpus.items() if n in self.accepted]
        if not got or any(t is None for t in got):
            return None
        return max(got) - t0

    @property
    def round_seconds_incl(self) -> float | None:
        """Mean round time including distribution (:attr:`train_seconds` / rounds)."""
        t, final = self.train_seconds, self.ps.get("version", 0)
        return t / final if t is not None and final else None

    @property
    def fabric_bytes(self) -> int:
        """Bytes over every directed link during the training (switch port counters)."""
        return sum(self.link_bytes.values())

    @property
    def busiest_link(self) -> tuple[str, int]:
        """The directed link that carried the most bytes, and those bytes."""
        if not self.link_bytes:
            return "-", 0
        k = max(self.link_bytes, key=lambda x: self.link_bytes[x])
        return k, self.link_bytes[k]


def round_tables(sync_ndn: NdnRunResult, sync_ip: NdnRunResult, n: int) -> list[Table]:
    """Per round, NDN's and IP's time and PS bytes side by side; then their ratios."""
    t = Table(title="NDN PS with a persistent PIT vs IP-unicast PS (same gradients, same network)")
    for col in ("round", "NDN round s", "IP round s", "NDN PS egress B", "IP PS egress B",
                "NDN distribute B", "IP distribute B"):
        t.add_column(col, justify="right")
    for a, b in zip(sync_ndn.ps.get("rounds", []), sync_ip.ps.get("rounds", []), strict=False):
        t.add_row(str(a["version"]), f"{a['seconds']:.2f}", f"{b['seconds']:.2f}", f"{a['tx_total']:,}",
                  f"{b['tx_total']:,}", f"{a['distribute_bytes']:,}", f"{b['distribute_bytes']:,}")
    return [t, ratios_table(sync_ndn, sync_ip, n)]


def ratios_table(ndn: NdnRunResult, ip: NdnRunResult, n: int) -> Table:
    """NDN / IP ratios of one pair of runs: distribution and egress bytes, round time."""
    r = Table(title="ratios (NDN / IP)")
    r.add_column("metric")
    r.add_column("value", justify="right")
    r.add_column("reference", justify="right")
    if ip.distribute_bytes_per_round:
        r.add_row("PS distribution bytes per round",
                  f"{ndn.distribute_bytes_per_round / ip.distribute_bytes_per_round:.3f}",
                  f"goal <= 1.1/N = {1.1 / n:.3f}")
    if ip.tx_bytes_per_round:
        r.add_row("PS egress bytes per round (all)",
                  f"{ndn.tx_bytes_per_round / ip.tx_bytes_per_round:.3f}", "")
    if ip.round_seconds:
        r.add_row("round time", f"{ndn.round_seconds / ip.round_seconds:.2f}", "< 1 is faster")
    return r


def plot_ndn_vs_ip(path: Path, ndn: NdnRunResult, ip: NdnRunResult, bound: float | None = None) -> None:
    """PS egress and round time per round, NDN beside IP (and the line-rate bound)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    rn = ndn.ps.get("rounds", [])
    ri = ip.ps.get("rounds", [])
    x = np.arange(1, max(len(rn), len(ri)) + 1)
    axes[0].bar(x[:len(rn)] - 0.2, [r["tx_total"] / 1e3 for r in rn], 0.4, label="NDN (persistent PIT)")
    axes[0].bar(x[:len(ri)] + 0.2, [r["tx_total"] / 1e3 for r in ri], 0.4, label="IP unicast PS")
    axes[0].set_xlabel("round")
    axes[0].set_ylabel("PS egress (kB)")
    axes[0].legend(fontsize=8)
    axes[1].plot(x[:len(rn)], [r["seconds"] for r in rn], "o-", label="NDN")
    axes[1].plot(x[:len(ri)], [r["seconds"] for r in ri], "s-", label="IP")
    if bound is not None:  # the line-rate bound beside the measured rounds
        axes[1].axhline(bound, color="tab:gray", ls="--", lw=1,
                        label=f"line-rate bound {bound:.2f} s")
        axes[1].set_ylim(bottom=0)
    axes[1].set_xlabel("round")
    axes[1].set_ylabel("round time (s)")
    axes[1].legend(fontsize=8)
    fig.suptitle("gradnet: NDN parameter server vs IP-unicast PS")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def runs_table(runs: dict[str, NdnRunResult]) -> Table:
    """One row per run: time, accepted GPUs, probe recoveries, accuracy, exactness."""
    s = Table(title="runs")
    for col in ("run", "time s", "accepted", "probe recoveries", "PS retx", "accuracy", "exact"):
        s.add_column(col, justify="right" if col != "run" else "left")
    for name, r in runs.items():
        acc = (f"{r.ps['accuracy_initial']:.3f} -> {r.ps['accuracy']:.3f}" if "accuracy" in r.ps else "-")
        s.add_row(name, f"{r.seconds:.1f}", str(len(r.accepted)), str(r.probe_recoveries),
                  str(r.ps.get("retransmissions", 0)), acc,
                  "[green]yes[/green]" if r.exact else f"[red]no: {'; '.join(r.problems)[:200]}[/red]")
    return s


def pit_table(run: NdnRunResult) -> Table:
    """The switches' persistent PIT entries after a run."""
    pp = Table(title="persistent PIT after the NDN sync run (switches with entries)")
    pp.add_column("switch")
    pp.add_column("entry")
    pp.add_column("ports")
    pp.add_column("events")
    for sw, st in run.switches.items():
        for e in st.get("persistent_pit", []):
            pp.add_row(sw, e["name"], ",".join(map(str, e["ports"])),
                       " ".join(f"{k}={v}" for k, v in st.get("events", {}).items()))
    return pp
