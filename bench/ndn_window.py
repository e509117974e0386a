"""NDN PS collection: the adaptive window and the streamed update, against IP unicast.

On one star (PS h1, GPUs h2..h(N+1), every link ``--bw`` Mbit/s), the same PS and GPU
agents train the synthetic model synchronously with:

* ``ndn``: ``ndn.p4``, the AIMD window shared round-robin over the GPUs, the update
  sent whole after the last gradient (the defaults);
* ``ndn-stream``: the same, the update streamed segment by segment as every GPU's
  segment comes in (``--distribute stream``);
* ``ndn-fixed``: a fixed window of ``--window-max`` Interests and the fixed Interest
  timeout, the update sent whole (the collection as it was, with the round-robin);
* ``ip``: the same agents over UDP through ``forward.p4``, the update once per GPU
  (defaults as ``ndn``).

Per run: the round time including distribution (first round's start to the last GPU
holding the final version), every round's first and last gradient segment at the PS,
the PS's window (largest, halvings) and each GPU's NIC bytes received during training
against what the PS sent of the update (one copy over NDN, N over IP unicast). Every run is checked bit for bit. Mean ± 95 % CI
over seeds, time ratios to ``ip`` paired by seed; the order of the variants rotates
with the seed.

    python -m bench ndn-window [--gpus 4] [--values 126090] [--rounds 6] [--seeds 3]
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

from controller.output import TableConsole
from experiments.ndn import run_scheme
from experiments.stats import format_interval, mean_ci, paired_ratios
from topologies import star
from topologies.plan import TopologyError
from wire.argtypes import Parser, count, described, names, nonnegative, positive, values

console = TableConsole()

#: variant -> (transport scheme of experiments.ndn, the PS's options)
VARIANTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "ndn": ("ndn", ()),
    "ndn-stream": ("ndn", ("--distribute", "stream")),
    "ndn-fixed": ("ndn", ("--window", "fixed")),
    "ip": ("ip", ()),
}


def build_parser() -> argparse.ArgumentParser:
    """Command-line options."""
    p = Parser(prog="python -m bench.ndn_window", description=described(__doc__))
    p.add_argument("--gpus", type=count, default=4, help="GPUs on the star (default 4)")
    p.add_argument("--bw", type=positive, default=20.0, help="every link's rate, Mbit/s (default 20)")
    p.add_argument("--values", type=values, default=126_090,
                   help="model size in float32 values (default 126,090: the harness's mlp)")
    p.add_argument("--rounds", type=count, default=6, help="synchronous rounds per run (default 6)")
    p.add_argument("--seeds", type=count, default=3, help="seeds (default 3)")
    p.add_argument("--compute-time", type=nonnegative, default=0.005, help="seconds per gradient")
    p.add_argument("--variants", type=names(*VARIANTS), default=list(VARIANTS), help=f"default {','.join(VARIANTS)}")
    p.add_argument("--max-time", type=positive, default=120.0, help="bound on each run (s)")
    p.add_argument("--target", choices=("auto", "embedded", "bmv2"), default=None)
    p.add_argument("--out-dir", default="results", help="results go to DIR/ndn-window-<time>/")
    return p


def row_of(variant: str, seed: int, res: Any) -> dict[str, Any]:
    """One run's figures."""
    rounds = res.ps.get("rounds") or [{}]
    update = res.ps.get("tx_by_kind", {}).get("distribute", 0)
    rx = [g.get("nic_train_rx_bytes") for g in res.gpus.values()]
    return {"variant": variant, "seed": seed, "exact": res.exact, "problems": res.problems[:3],
            "round_s": res.round_seconds_incl,
            "first_s": sum(r.get("first_segment_s", 0) for r in rounds) / len(rounds),
            "collect_s": sum(r.get("last_segment_s", 0) - r.get("first_segment_s", 0)
                             for r in rounds) / len(rounds),
            "window": res.ps.get("window", {}), "retransmissions": res.ps.get("retransmissions", 0),
            "update_mb_per_round": update / 1e6 / max(1, len(rounds)),
            "gpu_rx_per_update": (max(x for x in rx if x is not None) / update
                                  if update and any(x is not None for x in rx) else None)}


def main(argv: list[str] | None = None) -> int:
    """Run every variant for every seed; print one table."""
    p = build_parser()
    args = p.parse_args(argv)
    variants = args.variants
    try:
        topo = star(args.gpus + 1, bw=args.bw)
    except TopologyError as e:
        p.error(f"argument --gpus: {args.gpus} GPUs and a PS on one switch: {e}")
    if os.geteuid() != 0:
        print("ndn-window needs root (network namespaces)", file=sys.stderr)
        return 2
    from topologies.network import Network

    ps, gpus = topo.hosts()[0], topo.hosts()[1:]
    out = Path(args.out_dir).resolve() / time.strftime("ndn-window-%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    console.save_to(out)
    rows: list[dict[str, Any]] = []
    with Network(topo, target=args.target) as net:
        for seed in range(args.seeds):
            order = variants[seed % len(variants):] + variants[:seed % len(variants)]
            for v in order:
                scheme, ps_args = VARIANTS[v]
                res = run_scheme(net, topo, out / f"{seed}-{v}", scheme, {}, ps=ps, gpus=gpus,
                                 rounds=args.rounds, values=args.values, seed=seed,
                                 compute_time=args.compute_time, max_time=args.max_time,
                                 ps_args=ps_args)
                rows.append(row_of(v, seed, res))
                console.print(f"[dim]{time.strftime('%H:%M:%S')} seed {seed} {v}: round "
                              f"{rows[-1]['round_s'] or float('nan'):.3f} s, exact {res.exact}[/dim]")
                (out / "rows.json").write_text(json.dumps(rows, indent=1, default=str))
    console.print(table(rows, variants, args, len(gpus)))
    console.print(f"results: {out}/rows.json, tables.txt")
    return 0 if all(r["exact"] for r in rows) else 1


def table(rows: list[dict[str, Any]], variants: list[str], args: argparse.Namespace, n: int) -> Table:
    """Every variant: round time, its ratio to ``ip`` (paired), the round's parts, the
    window, and a GPU's received bytes per update copy."""
    t = Table(title=f"{args.values:,} float32 values, {n} GPUs, star, {args.bw:g} Mbit/s, "
                    f"{args.rounds} sync rounds, {args.seeds} seeds: mean ± 95 % CI over the exact runs")
    for col in ("variant", "round s (incl. distribution)", "round / ip", "first segment s",
                "collection s", "largest window", "halvings", "PS update MB/round",
                "GPU rx / PS update", "exact"):
        t.add_column(col, justify="left" if col == "variant" else "right")

    def by_seed(v: str) -> dict[int, float | None]:
        return {r["seed"]: r["round_s"] for r in rows if r["variant"] == v and r["exact"]}

    for v in variants:
        rs = [r for r in rows if r["variant"] == v and r["exact"]]
        runs = [r for r in rows if r["variant"] == v]
        if not rs:
            t.add_row(v, *["-"] * 8, f"0/{len(runs)}")
            continue
        t.add_row(v, format_interval(mean_ci(r["round_s"] for r in rs), ".3f"),
                  format_interval(paired_ratios(by_seed(v), by_seed("ip"))) if v != "ip" else "1",
                  format_interval(mean_ci(r["first_s"] for r in rs), ".3f"),
                  format_interval(mean_ci(r["collect_s"] for r in rs), ".3f"),
                  f"{max(r['window'].get('max_cwnd', 0) for r in rs):g}",
                  str(sum(r["window"].get("decreases", 0) for r in rs)),
                  format_interval(mean_ci(r["update_mb_per_round"] for r in rs), ".3f"),
                  format_interval(mean_ci(r["gpu_rx_per_update"] for r in rs)),
                  f"{len(rs)}/{len(runs)}")
    return t


if __name__ == "__main__":
    sys.exit(main())
