"""``python -m bench ina-train``: INA against a PS and against ring all-reduce (the
bandwidth-optimal software baseline) in the time-to-accuracy harness, at 2, 5 and
10 Mbit/s, each with its line-rate bound.

For every link rate, one harness run (``experiments/train.py``: the digits CNN, the same
seeds, shards, batches and learning rate for every scheme, on one star of a PS and 4
training hosts) of ``ps`` (the INA agents with no aggregating switch: every gradient to
the PS), ``ring`` (ring all-reduce over TCP) and ``ina`` (in-network aggregation), with
ring as the reference of the paired ratios. The table puts them side by side per rate:
sync time per iteration against its line-rate bound (the bytes that crossed the busiest
link at its rate, measured from the interfaces' counters) and the ratio of the two, the
time to the target accuracy with its bound (steps to target x (compute + bound per
step)), the paired ratio to ring, final accuracy, the bytes that entered the PS, and the
runs flagged cpu-bound (the 2 cores, not the links, set their pace). Mean ± 95 % CI over
the seeds (Student t); the evidence of the pace (experiments/fidelity.py): CPU the
switches and agents wanted (used + run-queue wait) over the cores, their run-queue
wait per second, the whole machine's CPU share, and the rules that flagged a run.
Every run checks that all ranks end with the same weights; the three schemes' sums are
exact (fixed point), so ps and ina train bit-identical curves.

    python -m bench.ina_train_bench [--bws 2,5,10] [--seeds 3] [--epochs 4] [--target embedded]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from rich.table import Table

from controller.output import TableConsole
from wire.argtypes import Parser, count, described, listed, positive

console = TableConsole()
SCHEMES = ("ps", "ring", "ina")


def _f(iv: dict[str, Any] | None, spec: str = ".3f") -> str:
    from experiments.train import fmt_interval

    return fmt_interval(iv, spec)


def rows_of(summary: dict[str, Any], bw: float) -> list[dict[str, Any]]:
    """The harness summary's per-scheme rows, with the link rate, the sync time over its
    bound (per run, then mean and CI) and the mean bytes into the PS."""
    from dataclasses import asdict

    from experiments.stats import mean_ci

    out = []
    for row in summary["schemes"]:
        runs = [r for r in summary["runs"] if r["scheme"] == row["scheme"]]
        # x bound: against the ideal bound of one synchronization (experiments/ideal.py);
        # runs saved before it existed: against their measured bytes' bound
        over = [r["x_bound"] if r.get("x_bound") else r["sync_s_per_iter"] * r["iterations"] / r["line_rate_bound_s"]
                for r in runs if r.get("x_bound") or (r.get("sync_s_per_iter") and r.get("line_rate_bound_s"))]
        ps_rx = [r["ps_rx_bytes"] for r in runs if r.get("ps_rx_bytes") is not None]
        out.append(dict(row, bw=bw, sync_over_bound=asdict(mean_ci(over)),
                        ps_rx_mb=(sum(ps_rx) / len(ps_rx) / 1e6) if ps_rx else None))
    return out


def print_table(rows: list[dict[str, Any]], args: argparse.Namespace, target: str, accuracy: float) -> Table:
    """PS, ring and INA side by side per link rate."""
    t = Table(title=f"INA vs PS vs ring all-reduce in the time-to-accuracy harness: digits CNN, 4 workers, "
                    f"{args.epochs} epochs, {args.seeds} seeds (mean ± 95 % CI), target {accuracy:.0%} test "
                    f"accuracy, {target} target; bound: the ideal traffic of one sync on the busiest link "
                    f"at its rate plus its latency (experiments/ideal.py)")
    for col in ("link", "scheme", "sync s/iter", "bound s/iter", "x bound", "time to target s", "bound s",
                "÷ ring (paired)", "reached", "final acc", "into PS MB", "CPU wanted", "waited s/s",
                "machine busy", "emulator-bound runs"):
        t.add_column(col, justify="left" if col in ("link", "scheme") else "right")
    for r in rows:
        t.add_row(f"{r['bw']:g} Mbit/s", r["scheme"] + (" (baseline)" if r["scheme"] == "ring" else ""),
                  _f(r["sync_s_per_iter"]), _f(r.get("ideal_bound_s_per_iter", r["line_rate_bound_s_per_iter"])), _f(r["sync_over_bound"], ".1f"),
                  _f(r["time_to_target_s"], ".1f"), _f(r["bound_to_target_s"], ".1f"),
                  "1 (reference)" if r["ratio_to_reference"] is None else _f(r["ratio_to_reference"], ".2f"),
                  f"{r['reached']}/{r['runs']}", _f(r["final_accuracy"]),
                  "-" if r["ps_rx_mb"] is None else f"{r['ps_rx_mb']:.2f}", _f(r.get("demand_share"), ".2f"),
                  _f(r.get("wait_share"), ".2f"), _f(r.get("machine_busy"), ".2f"),
                  str(r["cpu_bound_runs"]) + (f" ({', '.join(r['pace'])})" if r.get("pace") else ""))
    return t


def main(argv: list[str] | None = None) -> int:
    """One harness run per link rate; the combined table."""
    p = Parser(prog="python -m bench.ina_train_bench", description=described(__doc__))
    p.add_argument("--bws", type=listed(positive), default=[2.0, 5.0, 10.0], help="link rates, Mbit/s (default 2,5,10)")
    p.add_argument("--seeds", type=count, default=3, help="seeds per scheme (default 3)")
    p.add_argument("--epochs", type=count, default=4, help="epochs per run (default 4)")
    p.add_argument("--target", choices=("embedded", "bmv2"), default=None, help="embedded or bmv2 (default: the harness's)")
    p.add_argument("--out-dir", default=None, help="where the harness runs go (default: a temporary directory)")
    args = p.parse_args(argv)
    if os.geteuid() != 0:
        print("ina_train_bench needs root (network namespaces)", file=sys.stderr)
        return 0
    from experiments import train as harness
    from targets.launch import resolve_target

    bws = args.bws
    out = Path(args.out_dir or tempfile.mkdtemp(prefix="gradnet-inatrain-"))
    rows: list[dict[str, Any]] = []
    rc = 0
    accuracy = 0.0
    for bw in bws:
        d = out / f"bw{bw:g}"
        d.mkdir(parents=True, exist_ok=True)
        argv_h = ["--scheme", ",".join(SCHEMES), "--reference", "ring", "--seeds", str(args.seeds),
                  "--epochs", str(args.epochs), "--bw", f"{bw:g}", "--out-dir", str(d)]
        if args.target:
            argv_h += ["--target", args.target]
        rc |= harness.main(argv_h)
        (run_dir,) = [x for x in d.iterdir() if x.name.startswith("train-")]
        summary = json.loads((run_dir / "summary.json").read_text())
        accuracy = summary["manifest"]["target_accuracy"]
        rows += rows_of(summary, bw)
    console.print(print_table(rows, args, resolve_target(args.target), accuracy))
    console.print(f"runs: {out}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
