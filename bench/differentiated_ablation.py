"""``python -m bench differentiated-ablation``: which part of differentiated transmission
buys what, over seeds, in one run.

One star (a PS and ``--workers`` workers on one P4 switch, s1, whose port to the PS is
the bottleneck: ``--port-rate`` packets/s shared by 8 strict-priority queues), the digits
CNN of ``experiments/differentiated.py`` (batch 32, lr 0.5, the PS capping the averaged
gradient at ``--clip``, the same in every variant), for each seed:

* ``all-reliable``: every block over TCP (the baseline);
* ``important only``: the important blocks (SANE, quantile) over TCP, the others never
  sent (no unreliable channel; the PS zero-fills them);
* ``differentiated``: the technique (important over TCP on the top queue, the rest over
  UDP in levels, one priority each);
* ``random importance``: as differentiated, the same number of important blocks drawn at
  random (is SANE doing anything?);
* ``adaptive share``: as differentiated, the important blocks being the fewest that carry
  ``--share`` of the total contribution (instead of the fixed quantile);
* ``one queue``: as differentiated, every DSCP on one priority (the switch's priorities
  off, the last runs: the switch is reconfigured for them);
* ``differentiated + EF``, ``random + EF``, ``top-k + EF``: error feedback (worker and
  PS ``--error-feedback``: the blocks not in the PS's sum join their next gradient) with
  SANE's, random or the largest-norm blocks important.

The table: the share of blocks sent reliably, sync time per iteration with the line-rate
bound of the reliable bytes (the TCP bytes of an iteration in full segments at the port's
rate; the PS waits for them), its paired ratio to all-reliable, final accuracy, the lowest
accuracy any seed had after epoch 2 (the stability floor), the paired accuracy gap to
all-reliable, the blocks zero-filled and the bytes per second that entered the PS (the
bottleneck as a byte rate: the embedded target's queues count packets, so the port's
rate in bytes depends on the packet mix; the title gives it in full-size frames). Mean
± 95 % CI (Student t) over the seeds; ratios and gaps paired by seed.

    python -m bench.differentiated_ablation [--seeds 5] [--epochs 5] [--port-rate 300]
        [--quantile 0.5] [--share 0.8] [--clip 1.0] [--variants all-reliable,...]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from rich.table import Table

from controller.output import TableConsole
from experiments.differentiated import QosSetup, TransportRun, configure, run_transport
from experiments.stats import Interval, mean_ci, paired_ratios
from topologies import star
from wire import argtypes
from wire.argtypes import described

console = TableConsole()

MSS = 1448  # TCP payload of a full-size segment (1,500-byte MTU, timestamps on)
FRAME = 1514
FLOOR_AFTER_EPOCH = 2

# name -> (worker mode, worker options beyond the common ones, switch priorities on,
# options of the worker and the PS)
VARIANTS: dict[str, tuple[str, list[str], bool, list[str]]] = {
    "all-reliable": ("reliable", [], True, []),
    "important only": ("important", [], True, []),
    "differentiated": ("differentiated", [], True, []),
    "random importance": ("differentiated", ["--importance", "random"], True, []),
    "adaptive share": ("differentiated", ["--share", "{share}"], True, []),
    "differentiated + EF": ("differentiated", [], True, ["--error-feedback"]),
    "random + EF": ("differentiated", ["--importance", "random"], True, ["--error-feedback"]),
    "top-k + EF": ("differentiated", ["--importance", "topk"], True, ["--error-feedback"]),
    "one queue": ("differentiated", [], False, []),
}


def epochs_after(run: TransportRun, epoch: int) -> list[float]:
    """Test accuracies of the epochs after ``epoch`` (the PS's per-epoch evaluations)."""
    return [e["accuracy"] for e in run.ps.get("epochs", []) if e["epoch"] > epoch]


def reliable_share(run: TransportRun) -> float | None:
    """Blocks sent over TCP / all blocks of the run (every worker)."""
    sent = [sum(w.get("sent_blocks", [])) for w in run.workers]
    imp = [w.get("sent_blocks", [0])[0] for w in run.workers]
    its = int(run.ps.get("iterations") or 0)
    total = its * len(run.workers) * int(run.ps.get("blocks_per_worker") or 0)
    return sum(imp) / total if total else (sum(imp) / sum(sent) if sum(sent) else None)


def bound_per_iteration(run: TransportRun, port_rate: float) -> float | None:
    """The reliable bytes of one iteration (every worker's, in full segments) at the
    port's rate: what the PS must wait for whatever the rest does."""
    its = int(run.ps.get("iterations") or 0)
    if not its or not port_rate:
        return None
    per_worker = run.ps.get("tcp_bytes", 0) / (its * max(1, len(run.workers)))
    return len(run.workers) * math.ceil(per_worker / MSS) / port_rate


def ps_mbit(run: TransportRun) -> float | None:
    """Bytes per second into the PS over the run, in Mbit/s."""
    s = run.ps.get("seconds")
    return run.ps.get("nic_rx_bytes", 0) * 8 / s / 1e6 if s else None


def zero_filled(run: TransportRun) -> float | None:
    """Share of the blocks the PS zero-filled."""
    its = int(run.ps.get("iterations") or 0)
    total = its * len(run.workers) * int(run.ps.get("blocks_per_worker") or 0)
    return sum(run.ps.get("missing_blocks", {}).values()) / total if total else None


def _f(iv: Interval, spec: str = ".3f", scale: float = 1.0) -> str:
    if iv.n == 0:
        return "-"
    if iv.n == 1:
        return f"{iv.mean * scale:{spec}} (n=1)"
    return f"{iv.mean * scale:{spec}} ± {iv.half_width * scale:{spec.lstrip('+')}}"


def summarize(runs: dict[str, dict[int, TransportRun]], port_rate: float) -> list[dict[str, Any]]:
    """One row per variant: means and CIs over seeds, paired ratios/gaps to all-reliable."""
    base = runs.get("all-reliable", {})
    base_sync = {s: r.sync_mean for s, r in base.items() if r.ok}
    base_acc = {s: r.accuracy for s, r in base.items() if r.ok}
    rows = []
    for name, by_seed in runs.items():
        ok = {s: r for s, r in by_seed.items() if r.ok}
        after = [a for r in ok.values() for a in epochs_after(r, FLOOR_AFTER_EPOCH)]
        gaps = [100 * (base_acc[s] - r.accuracy) for s, r in ok.items()
                if s in base_acc and r.accuracy is not None and base_acc[s] is not None]
        rows.append({
            "variant": name, "runs": len(by_seed), "ok": len(ok),
            "reliable_share": mean_ci(reliable_share(r) for r in ok.values()),
            "sync_s": mean_ci(r.sync_mean for r in ok.values()),
            "bound_s": mean_ci(bound_per_iteration(r, port_rate) for r in ok.values()),
            "ratio": paired_ratios({s: r.sync_mean for s, r in ok.items()}, base_sync),
            "final": mean_ci(r.accuracy for r in ok.values()),
            "floor": min(after) if after else None,
            "gap": mean_ci(gaps),
            "zero_filled": mean_ci(zero_filled(r) for r in ok.values()),
            "ps_mbit": mean_ci(ps_mbit(r) for r in ok.values()),
        })
    return rows


def print_table(rows: list[dict[str, Any]], args: argparse.Namespace, seeds: list[int]) -> Table:
    """The ablation table (mean ± 95 % CI over the seeds)."""
    mbit = args.port_rate * FRAME * 8 / 1e6
    bottleneck = (f"a byte rate of {mbit:.2f} Mbit/s shared by 8 strict-priority queues (a packet costs its "
                  "length)" if args.byte_rate else f"{args.port_rate:g} pkt/s shared by 8 strict-priority "
                  f"queues (= {mbit:.2f} Mbit/s in {FRAME}-byte frames)")
    t = Table(title=f"differentiated ablation: {args.workers} workers, digits CNN, {args.epochs} epochs, "
                    f"batch 32, lr 0.5, PS clip {args.clip:g}; seeds {seeds[0]}-{seeds[-1]} (mean ± 95 % CI, "
                    f"ratio and gap paired by seed); bottleneck {bottleneck}; quantile "
                    f"{args.quantile:g}, adaptive share {args.share:g}; floor: lowest test accuracy of "
                    f"any seed after epoch {FLOOR_AFTER_EPOCH}")
    for col in ("variant", "runs ok", "reliable share", "sync s/iter", "bound s/iter", "÷ all-reliable",
                "final acc", f"floor after ep {FLOOR_AFTER_EPOCH}", "gap (pts)", "zero-filled",
                "into PS Mbit/s"):
        t.add_column(col, justify="left" if col == "variant" else "right")
    for r in rows:
        t.add_row(r["variant"], f"{r['ok']}/{r['runs']}", _f(r["reliable_share"], ".2f"), _f(r["sync_s"]),
                  _f(r["bound_s"]), "1 (baseline)" if r["variant"] == "all-reliable" else _f(r["ratio"], ".2f"),
                  _f(r["final"], ".3f"), "-" if r["floor"] is None else f"{r['floor']:.3f}",
                  "0 (baseline)" if r["variant"] == "all-reliable" else _f(r["gap"], "+.2f"),
                  _f(r["zero_filled"], ".0%", 1.0).replace("%", " %") if r["zero_filled"].n else "-",
                  _f(r["ps_mbit"], ".2f"))
    return t


def check_workers(p: argparse.ArgumentParser, workers: int, batch: int = 32) -> None:
    """``--workers``: each worker's shard of the digits training set holds a full batch
    (else a run never steps); ``p.error`` otherwise, before anything starts."""
    from hosts.training import load_data

    n = len(load_data("digits", 0).y_train)
    if workers > n // batch:
        p.error(f"argument --workers: must be <= {n // batch}, a full batch of {batch} of the {n} "
                f"training examples each (got {workers})")


def build_parser() -> argparse.ArgumentParser:
    """The bench's options."""
    p = argtypes.Parser(prog="python -m bench.differentiated_ablation", description=described(__doc__))
    p.add_argument("--seeds", type=argtypes.count, default=5, help="seeds 0..N-1 (default 5)")
    p.add_argument("--seed", type=argtypes.natural, default=0, help="first seed (default 0)")
    p.add_argument("--workers", type=argtypes.count, default=4, help="workers (default 4)")
    p.add_argument("--epochs", type=argtypes.integer(FLOOR_AFTER_EPOCH + 1), default=5,
                   help=f"epochs per run (default 5; more than {FLOOR_AFTER_EPOCH}: the floor is read after it)")
    p.add_argument("--max-steps", type=argtypes.natural, default=0, help="cap on steps per epoch (0: none)")
    p.add_argument("--port-rate", type=argtypes.nonnegative, default=300.0, help="bottleneck, packets/s (default 300)")
    p.add_argument("--byte-rate", type=argtypes.nonnegative, default=0.0, metavar="MBIT",
                   help="bottleneck as a byte rate of MBIT Mbit/s shared by the queues (a packet costs "
                        "its length) instead of --port-rate packets/s (embedded target)")
    p.add_argument("--quantile", type=argtypes.probability, default=0.5, help="importance quantile (default 0.5)")
    p.add_argument("--share", type=argtypes.number(above=0.0, hi=1.0), default=0.8,
                   help="adaptive threshold: share of the total contribution (default 0.8)")
    p.add_argument("--clip", type=argtypes.nonnegative, default=1.0,
                   help="PS cap on the averaged gradient's norm (0: none)")
    p.add_argument("--grace", type=argtypes.nonnegative, default=0.01, help="PS wait for unreliable blocks (s)")
    p.add_argument("--variants", type=argtypes.names(*VARIANTS), default=list(VARIANTS),
                   help=f"subset of {','.join(VARIANTS)}")
    p.add_argument("--target", choices=("embedded", "bmv2"), default="embedded",
                   help="embedded (default; shared port rate) or bmv2")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run every variant for every seed on one network; print the table."""
    p = build_parser()
    args = p.parse_args(argv)
    names = args.variants
    check_workers(p, args.workers)
    if os.geteuid() != 0:
        print("differentiated_ablation needs root (network namespaces)", file=sys.stderr)
        return 0
    from topologies.network import Network
    from wire.differentiated import NB_QUEUES

    if args.byte_rate:  # the same unit of account: frames of FRAME bytes
        args.port_rate = args.byte_rate * 1e6 / 8 / FRAME

    seeds = list(range(args.seed, args.seed + args.seeds))
    topo = star(args.workers + 1, bw=20)
    out = Path(tempfile.mkdtemp(prefix="gradnet-diffablation-"))
    runs: dict[str, dict[int, TransportRun]] = {n: {} for n in names}
    # the priorities-off variant last: it reconfigures the switch once
    order = sorted(names, key=lambda n: not VARIANTS[n][2])
    with Network(topo, target=args.target, priority_queues=NB_QUEUES) as net:
        prio = None
        eq = None
        for name in order:
            mode, extra, priorities, both = VARIANTS[name]
            if priorities != prio:
                eq = configure(net, topo, QosSetup(args.port_rate, 64, 64, 3, priorities=priorities,
                                                   byte_rate=bool(args.byte_rate)))
                prio = priorities
            for seed in seeds:
                common = ["--epochs", str(args.epochs), "--batch", "32", "--lr", "0.5", "--seed", str(seed),
                          "--max-steps", str(args.max_steps), *both]
                wargs = ["--quantile", str(args.quantile), "--levels", "3",
                         *[x.format(share=args.share) for x in extra]]
                r = run_transport(net, topo, eq, out / f"{name.replace(' ', '-')}-seed{seed}", mode, common,
                                  wargs, ["--grace", str(args.grace), "--clip", str(args.clip)], max_time=600)
                runs[name][seed] = r
                ep = [round(e["accuracy"], 3) for e in r.ps.get("epochs", [])]
                console.print(f"{name}, seed {seed}: {'ok' if r.ok else r.error}, sync {r.sync_mean or 0:.3f} s, "
                              f"accuracy per epoch {ep}")
    rows = summarize(runs, args.port_rate)
    console.print(print_table(rows, args, seeds))
    console.print(f"runs: {out}")
    return 0 if all(r.ok for v in runs.values() for r in v.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
