"""NDN PS against its strongest baselines: IP multicast, IP unicast UDP, TCP.

On one leaf-spine network (2 spines, 2 leaves, 3 hosts each, every link ``--bw``
Mbit/s; PS h1, GPUs h2..h6: two on the PS's leaf, three across a spine), the same PS and
GPU agents train the synthetic model synchronously over each scheme:

* **NDN**: ``ndn.p4``, the PS sends each update once, the persistent PIT replicates it;
* **IP unicast UDP**: ``forward.p4``, the PS sends each update once per GPU;
* **IP multicast UDP**: ``forward.p4`` with the controller's multicast tree (PRE groups
  + ``set_multicast_group`` routes, ``controller/ip_multicast.py``), the PS sends each
  update once to the group; lost updates fetched by unicast after the probe timer;
* **TCP PS**: ``forward.p4``, one kernel TCP connection per GPU, each update once per GPU.

For each model size (``--sizes``) and seed, every scheme runs (in an order rotated per
seed) and is checked bit for bit (every GPU's parameters equal the PS's, the PS's equal a
replay). Per scheme: round time INCLUDING distribution (first round's start to the last
GPU holding the final version, per round), its line-rate bound (compute + every gradient
in + one update out (NDN, multicast) or one per GPU (unicast, TCP) over the PS's link,
payload only), and the bytes every link carried during the training from the switches'
port counters (sum over all directed links, and the busiest link), per round; mean ±
95 % CI over the seeds, byte and time ratios to NDN paired by seed.

    python -m bench ndn-baselines
    python -m bench.ndn_baselines [--bw 20] [--sizes 3818,100000,1000000] [--seeds 3]
                                  [--rounds 3] [--loss RATE] [--out-dir results]
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
from experiments.ndn import (
    SCHEMES,
    interest_timeout,
    loss_on_fabric_link,
    probe_for,
    run_scheme,
    scheme_bound,
)
from experiments.stats import format_interval, mean_ci, paired_ratios
from topologies import leaf_spine
from wire.argtypes import (
    Parser,
    count,
    described,
    listed,
    names,
    natural,
    nonnegative,
    number,
    positive,
    values,
)

console = TableConsole()


def build_parser() -> argparse.ArgumentParser:
    """Command-line options."""
    p = Parser(prog="python -m bench.ndn_baselines", description=described(__doc__))
    p.add_argument("--bw", type=positive, default=20.0, help="every link's rate, Mbit/s (default 20)")
    p.add_argument("--sizes", type=listed(values), default=[3818, 100000, 1000000], help="model sizes in float32 values")
    p.add_argument("--seeds", type=count, default=3, help="seeds per size (default 3)")
    p.add_argument("--seed", type=natural, default=0, help="first seed")
    p.add_argument("--rounds", type=count, default=3, help="synchronous rounds per run (default 3)")
    p.add_argument("--rounds-large", type=count, default=2,
                   help="rounds for models of 500,000 values or more (default 2)")
    p.add_argument("--compute-time", type=nonnegative, default=0.2, help="seconds per gradient")
    p.add_argument("--schemes", type=names(*SCHEMES), default=list(SCHEMES), help=f"default {','.join(SCHEMES)}")
    p.add_argument("--loss", type=number(0.0, below=1.0), default=0.0, metavar="RATE",
                   help="loss rate in [0, 1) on both directions of the fabric link from h6's leaf toward the "
                        "PS (default 0)")
    p.add_argument("--interest-timeout", type=positive, default=2.0,
                   help="Interest retransmission timeout of the UDP schemes' agents (s; default 2: "
                        "the emulated switches move about 1,000 packets/s on a busy 2-core machine, so "
                        "5 GPUs' windows of 64 segments take up to a second to come back, and the "
                        "agents' 0.5 s made the 1M-value model's set-up a retransmission storm)")
    p.add_argument("--probe-gap", type=nonnegative, default=0.3, metavar="S",
                   help="every UDP scheme's GPUs: a probe timer that fires while the update is "
                        "still arriving waits until no segment came for S s (default 0.3; 0: the "
                        "agents' default, fetch at once)")
    p.add_argument("--max-time", type=positive, default=300.0, help="bound on each run (s)")
    p.add_argument("--target", choices=("auto", "embedded", "bmv2"), default=None)
    p.add_argument("--out-dir", default="results", help="results go to DIR/ndn-baselines-<time>/")
    p.add_argument("--from-rows", default="", metavar="FILE,FILE,...",
                   help="run nothing: print the tables of earlier runs' rows.json files (a later "
                        "file's row replaces an earlier one of the same size, seed and scheme)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run every scheme for every size and seed; print one table per size."""
    p = build_parser()
    args = p.parse_args(argv)
    schemes = args.schemes
    missing = [f for f in args.from_rows.split(",") if f and not Path(f).is_file()]
    if missing:
        p.error(f"argument --from-rows: no such file {missing[0]}")
    if args.from_rows:
        return print_tables(args, schemes)
    if os.geteuid() != 0:
        print("ndn-baselines needs root (network namespaces)", file=sys.stderr)
        return 2
    from topologies.network import Network

    sizes = args.sizes
    topo = leaf_spine(2, 2, 3, bw=args.bw)
    hosts = topo.hosts()
    ps, gpus = hosts[0], hosts[1:]
    n = len(gpus)
    loss = loss_on_fabric_link(topo, ps, gpus[-1], args.loss) if args.loss else {}
    out = Path(args.out_dir).resolve() / time.strftime("ndn-baselines-%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    console.save_to(out)
    seeds = list(range(args.seed, args.seed + args.seeds))
    rows: list[dict[str, Any]] = []
    with Network(topo, target=args.target) as net:
        for values in sizes:
            rounds = args.rounds_large if values >= 500_000 else args.rounds
            for i, seed in enumerate(seeds):
                order = schemes[i % len(schemes):] + schemes[:i % len(schemes)]
                for sc in order:
                    console.print(f"[dim]{time.strftime('%H:%M:%S')} {values:,} values, seed {seed}, "
                                  f"{SCHEMES[sc]} ...[/dim]")
                    t0 = time.monotonic()
                    res = run_scheme(net, topo, out / f"{values}-{seed}-{sc}", sc, loss, ps=ps, gpus=gpus,
                                     rounds=rounds, values=values, seed=seed,
                                     compute_time=args.compute_time, max_time=args.max_time,
                                     timeout=max(args.interest_timeout, interest_timeout(n, args.bw)),
                                     probe=probe_for(n, values, args.bw), probe_gap=args.probe_gap)
                    final = res.ps.get("version", 0) or rounds
                    link, busiest = res.busiest_link
                    row = {"values": values, "seed": seed, "scheme": sc, "rounds": rounds,
                           "exact": res.exact, "problems": res.problems[:3],
                           "round_s": res.round_seconds_incl, "ps_round_s": res.round_seconds,
                           "bound_s": scheme_bound(sc, n, values, args.bw, args.compute_time),
                           "fabric_bytes_per_round": res.fabric_bytes / final,
                           "busiest_link": link, "busiest_bytes_per_round": busiest / final,
                           "ps_distribute_bytes_per_round": res.distribute_bytes_per_round,
                           "probe_recoveries": res.probe_recoveries,
                           "ps_retransmissions": res.ps.get("retransmissions", 0),
                           "wall_s": round(time.monotonic() - t0, 1), "link_bytes": res.link_bytes}
                    rows.append(row)
                    console.print(f"[dim]  round {row['round_s'] or float('nan'):.2f} s (bound "
                                  f"{row['bound_s']:.2f}), {row['fabric_bytes_per_round'] / 1e6:.2f} MB/round "
                                  f"over all links, busiest {link} {busiest / final / 1e6:.2f} MB/round, "
                                  f"exact {res.exact}[/dim]")
                    (out / "rows.json").write_text(json.dumps(rows, indent=1, default=str))
    for values in sizes:
        console.print(size_table(rows, values, schemes, n, args))
    bad_rows = [r for r in rows if not r["exact"]]
    for r in bad_rows:
        console.print(f"[red]{r['values']} seed {r['seed']} {r['scheme']}: not exact: {r['problems']}[/red]")
    console.print(f"results: {out}/rows.json, tables.txt")
    return 1 if bad_rows else 0


def print_tables(args: argparse.Namespace, schemes: list[str]) -> int:
    """``--from-rows``: the tables of saved rows (replaced by later files' rows)."""
    merged: dict[tuple[int, int, str], dict[str, Any]] = {}
    for f in (f for f in args.from_rows.split(",") if f):
        for r in json.loads(Path(f).read_text()):
            merged[r["values"], r["seed"], r["scheme"]] = r
    rows = list(merged.values())
    n = len(leaf_spine(2, 2, 3).hosts()) - 1
    for size in sorted({r["values"] for r in rows}):
        console.print(size_table(rows, size, schemes, n, args))
    return 0 if all(r["exact"] for r in rows) else 1


def size_table(rows: list[dict[str, Any]], values: int, schemes: list[str], n: int,
               args: argparse.Namespace) -> Table:
    """One model size: every scheme's round time with its bound, bytes over all links and
    on the busiest link per round, ratios to NDN paired by seed, and exactness."""
    mine = [r for r in rows if r["values"] == values]
    rounds = mine[0]["rounds"] if mine else 0
    t = Table(title=f"{values:,} float32 values ({values * 4 / 1e6:.2f} MB), {n} GPUs, leaf-spine 2x2, "
                    f"{args.bw:g} Mbit/s links, {rounds} sync rounds, {len({r['seed'] for r in mine})} seeds"
                    + (f", {args.loss:.0%} loss on a fabric link" if args.loss else "")
                    + ": mean ± 95 % CI over the exact runs")
    for col in ("scheme", "round s (incl. distribution)", "bound s", "time / NDN", "all links MB/round",
                "bytes / NDN", "busiest link MB/round", "busiest link", "exact"):
        t.add_column(col, justify="left" if col in ("scheme", "busiest link") else "right")

    def by_seed(sc: str, key: str) -> dict[int, float | None]:
        return {r["seed"]: r[key] for r in mine if r["scheme"] == sc and r["exact"]}

    for sc in schemes:
        runs = [r for r in mine if r["scheme"] == sc]
        rs = [r for r in runs if r["exact"]]     # a failed run's time and bytes mean nothing
        if not rs:
            if runs:
                t.add_row(SCHEMES[sc], *["-"] * 7, f"0/{len(runs)}")
            continue
        links = sorted({r["busiest_link"] for r in rs})
        same = "ndn" in schemes and sc != "ndn"
        t.add_row(SCHEMES[sc], format_interval(mean_ci(r["round_s"] for r in rs)),
                  f"{rs[0]['bound_s']:.2f}",
                  format_interval(paired_ratios(by_seed(sc, "round_s"), by_seed("ndn", "round_s")))
                  if same else "1",
                  format_interval(mean_ci(r["fabric_bytes_per_round"] / 1e6 for r in rs), ".3f"),
                  format_interval(paired_ratios(by_seed(sc, "fabric_bytes_per_round"),
                                                by_seed("ndn", "fabric_bytes_per_round")))
                  if same else "1",
                  format_interval(mean_ci(r["busiest_bytes_per_round"] / 1e6 for r in rs), ".3f"),
                  ", ".join(links), f"{len(rs)}/{len(runs)}")
    return t


if __name__ == "__main__":
    sys.exit(main())
