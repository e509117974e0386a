"""``python -m bench token-grid``: token broadcast against ring all-reduce and a PS on the
same LAN, real compute, heterogeneous nodes (the technique's claim).

One grid, one table: for every cell (nodes N, node speed spread S, compute/communication
ratio R) one time-to-accuracy harness run (``experiments/train.py``: the digits CNN, the
same seeds, shards, batches and learning rate for every scheme) of

* ``token``: token-passing broadcast through the P4 smart NICs (``nic.p4``) on the LAN
  switch (``lan.p4``), N training hosts (``controller.token.token_lan``);
* ``ring``: ring all-reduce over TCP, the same N training hosts behind the same kind of
  NIC switch on the same LAN (``nic-lan:N+1``, every switch running ``forward.p4``: the
  NICs forward), the reference of the paired ratios;
* ``ps``: the INA agents with no aggregating switch (every gradient to a PS host, the
  one extra host of ``nic-lan:N+1`` behind its own NIC).

Compute is real (each rank's forward/backward pass, one BLAS thread); the spread S slows
the ranks linearly from 1x (rank 0) to Sx (the last rank), the harness's ``--slow`` (a
slowed rank sleeps (F-1) times its measured compute after it). The ratio R sets the link
rate: R = compute / communication, with compute the measured per-step compute of the
fastest rank (measured here first, in-process, the same model and batch) and
communication one gradient (4 bytes a parameter) over one link at the link rate, so the
rate is ``R x gradient bits / compute``. High rates are beyond what the 2-core emulator
moves at line rate: the harness flags such runs ``cpu-bound`` and the table counts them.

Each cell shows mean ± 95 % CI over the seeds (Student t) of the time to the target
accuracy, its bound (steps to target x (compute + line-rate sync per step)), and the
winner: the lowest mean, marked ``tie`` when its interval overlaps the runner-up's.
``--resume DIR`` skips cells already done there (each cell is one harness directory).

    python -m bench.token_grid [--nodes 4,8] [--spread 1,2,4] [--ratio 0.1,1,10] [--seeds 3]
                               [--epochs 4] [--schemes token,ring,ps] [--out-dir DIR]

``--epochs`` counts epochs at 4 nodes; other node counts train the same number of steps
(8 nodes: twice the epochs, each rank's shard being half as large).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from controller.output import TableConsole
from controller.token import MAX_NODES
from wire.argtypes import (
    Parser,
    count,
    described,
    integer,
    listed,
    names,
    nonnegative,
    number,
    positive,
)

console = TableConsole()
SCHEMES = ("token", "ring", "ps")
BATCH = 16  # the harness's default per-rank batch


def measure_compute(model: str = "digits", batch: int = BATCH, steps: int = 40) -> tuple[float, int]:
    """Median seconds of one training step (forward, backward, gradients out) of ``model``
    at ``batch``, one thread, and its parameter count."""
    import statistics

    import torch

    from hosts import training as tr

    torch.set_num_threads(1)
    data = tr.load_data("digits", 0)
    net = tr.build_model(model, 0)
    x, y = tr.worker_shard(data, 0, 1)
    times = []
    for i in range(steps):
        xb, yb = x[(i * batch) % (len(y) - batch):][:batch], y[(i * batch) % (len(y) - batch):][:batch]
        t0 = time.perf_counter()
        tr.compute_gradients(net, xb, yb)
        times.append(time.perf_counter() - t0)
    return statistics.median(times[5:]), int(sum(p.numel() for p in net.parameters()))


def spread_factors(nodes: int, spread: float) -> list[float]:
    """Slow-down of each rank: 1x for rank 0 up to ``spread``x for the last, linearly."""
    if nodes < 2:
        return [1.0] * nodes
    return [1.0 + (spread - 1.0) * r / (nodes - 1) for r in range(nodes)]


def link_rate(ratio: float, compute_s: float, parameters: int) -> float:
    """Mbit/s at which one gradient over one link takes ``compute_s / ratio``."""
    return ratio * parameters * 32 / compute_s / 1e6


def epochs_for(epochs: int, nodes: int) -> int:
    """Epochs for ``nodes`` ranks that give as many steps as ``epochs`` at 4 ranks: each
    rank's shard, and so its steps per epoch, shrinks as 1/nodes (8 nodes at 4 epochs
    would take 44 steps and often stop short of the target)."""
    return max(1, -(-epochs * nodes // 4))


def winner(rows: dict[str, dict[str, Any]]) -> str:
    """The scheme with the lowest mean time to target; ``tie`` with the runner-up when
    their 95 % intervals overlap; ``-`` when no scheme reached the target."""
    done = sorted(((r["time_to_target_s"]["mean"], s) for s, r in rows.items()
                   if r.get("time_to_target_s", {}).get("n")), key=lambda m: m[0])
    if not done:
        return "-"
    best = done[0][1]
    if len(done) > 1:
        a, b = rows[best]["time_to_target_s"], rows[done[1][1]]["time_to_target_s"]
        if a["n"] > 1 and b["n"] > 1 and a["high"] >= b["low"]:
            return f"{best} (tie with {done[1][1]})"
    return best


def _f(iv: dict[str, Any] | None, spec: str = ".1f") -> str:
    from experiments.train import fmt_interval

    return fmt_interval(iv, spec)


def run_cell(d: Path, nodes: int, spread: float, bw: float, args: argparse.Namespace) -> dict[str, Any]:
    """One harness run of the schemes on one cell; its summary (resumed when present)."""
    from experiments import train as harness

    done = [x for x in d.glob("train-*") if (x / "summary.json").exists()] if d.exists() else []
    if done:
        return json.loads((done[0] / "summary.json").read_text())
    d.mkdir(parents=True, exist_ok=True)
    workers = [f"h{i + 2}" for i in range(nodes)]  # h1 is nic-lan's PS host
    argv = ["--scheme", args.schemes, "--reference", "ring" if "ring" in args.schemes else args.schemes.split(",")[0],
            "--topo", f"nic-lan:{nodes + 1}", "--workers", str(nodes), "--bw", f"{bw:.4g}", "--seeds", str(args.seeds),
            "--epochs", str(epochs_for(args.epochs, nodes)), "--out-dir", str(d),
            # the grid's recorded cells: per-rank batch 16 and the digits CNN's lr unscaled
            # at every node count (the harness's default now splits a global batch of 64)
            "--batch", "16", "--lr", "0.5"]
    for h, f in zip(workers, spread_factors(nodes, spread), strict=True):
        if f > 1.0:
            argv += ["--slow", f"{h}={f:.4g}"]
    if args.target:
        argv += ["--target", args.target]
    harness.main(argv)
    # an interrupted earlier attempt may have left a directory without a summary beside it
    finished = sorted(x for x in d.glob("train-*") if (x / "summary.json").exists())
    if not finished:
        raise RuntimeError(f"the harness wrote no summary under {d}")
    return json.loads((finished[-1] / "summary.json").read_text())


def _over(r: dict[str, Any] | None) -> str:
    """How far a scheme's sync ran above its ideal bound (>> 1 with the CPU busy: the
    emulator set the pace, the harness's emulator-bound verdict); cells saved before the
    ideal bound existed: over the measured bytes' bound."""
    if not r or not (r.get("sync_s_per_iter") or {}).get("n"):
        return "-"
    if (r.get("x_bound") or {}).get("n"):
        return f"{r['x_bound']['mean']:.1f}"
    bound = (r.get("line_rate_bound_s_per_iter") or {}).get("mean")
    return f"{r['sync_s_per_iter']['mean'] / bound:.1f}" if bound else "-"


def table_rows(cells: list[dict[str, Any]], schemes: list[str]) -> tuple[list[str], list[list[str]]]:
    """The grid's header and one row per cell: each scheme's time to target (and bound),
    the winner, and how far each scheme's sync ran above its line-rate bound."""
    header = ["nodes", "spread", "comp/comm", "link Mbit/s", "compute ms/step in runs", *schemes, "winner",
              "x bound " + "/".join(schemes)]
    out = []
    for c in cells:
        rows = {r["scheme"]: r for r in c["schemes"]}
        cols = []
        for s in schemes:
            r = rows.get(s)
            if not r:
                cols.append("-")
                continue
            reached = f"{r['reached']}/{r['runs']}"
            ratio = "" if r.get("ratio_to_reference") is None else f", ÷ring {_f(r['ratio_to_reference'], '.2f')}"
            cols.append(f"{_f(r['time_to_target_s'])} [{_f(r['bound_to_target_s'])}] ({reached}{ratio})")
        over = "/".join(_over(rows.get(s)) for s in schemes)
        # the compute the runs measured (rank 0, the fastest; all schemes): the grid's ratio
        # is set from the in-process figure, the agents' steps cost more on a loaded machine
        comp = [r["compute_s_per_iter"]["mean"] for r in rows.values() if (r.get("compute_s_per_iter") or {}).get("n")]
        out.append([str(c["nodes"]), f"{c['spread']:g}x", f"{c['ratio']:g}", f"{c['bw']:.3g}",
                    f"{1e3 * min(comp):.1f}-{1e3 * max(comp):.1f}" if comp else "-", *cols,
                    winner(rows), over])
    return header, out


def title(args: argparse.Namespace, compute_s: float, parameters: int, accuracy: float) -> str:
    """What the grid's table shows, in one sentence."""
    return (f"Token broadcast vs ring all-reduce vs PS on one LAN of P4 NICs: digits CNN "
            f"({parameters:,} parameters), real compute ({compute_s * 1e3:.1f} ms a step measured "
            f"here, fastest rank), {args.epochs} epochs at 4 nodes (the same steps at every "
            f"node count), {args.seeds} seeds (mean ± 95 % CI); "
            f"time to {accuracy:.0%} test accuracy in s [bound] (reached, paired ratio to ring); "
            f"x bound: each scheme's sync time per step over its line-rate bound")


def print_table(cells: list[dict[str, Any]], schemes: list[str], args: argparse.Namespace,
                compute_s: float, parameters: int, accuracy: float) -> Table:
    """The grid as a rich table, one row per cell."""
    header, rows = table_rows(cells, schemes)
    t = Table(title=escape(title(args, compute_s, parameters, accuracy)))
    for col in header:
        t.add_column(col, justify="left" if col == "winner" else "right")
    for row in rows:
        t.add_row(*row)
    return t


def markdown(cells: list[dict[str, Any]], schemes: list[str], args: argparse.Namespace,
             compute_s: float, parameters: int, accuracy: float) -> str:
    """The grid as a Markdown table (for a report), its title above it."""
    header, rows = table_rows(cells, schemes)
    lines = [title(args, compute_s, parameters, accuracy), "",
             "| " + " | ".join(header) + " |",
             "|" + "|".join("---" if h == "winner" else "---:" for h in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Measure compute, run every cell, print the grid."""
    p = Parser(prog="python -m bench.token_grid", description=described(__doc__))
    p.add_argument("--nodes", type=listed(integer(2, MAX_NODES)), default=[4, 8],
                   help=f"training nodes per cell, each in 2..{MAX_NODES} (default 4,8)")
    p.add_argument("--spread", type=listed(number(1.0)), default=[1.0, 2.0, 4.0],
                   help="slowest/fastest node speed, each >= 1 (default 1,2,4)")
    p.add_argument("--ratio", type=listed(positive), default=[0.1, 1.0, 10.0],
                   help="compute/communication ratios, each > 0 (default 0.1,1,10)")
    p.add_argument("--seeds", type=count, default=3, help="seeds per scheme and cell (default 3)")
    p.add_argument("--epochs", type=count, default=4,
                   help="epochs per run at 4 nodes, scaled with the node count so every cell trains "
                        "the same number of steps (default 4: 8 epochs at 8 nodes)")
    p.add_argument("--schemes", type=names(*SCHEMES), default=list(SCHEMES), help="schemes (default token,ring,ps)")
    p.add_argument("--compute", type=nonnegative, default=0.0,
                   help="per-step compute (s) that sets the link rates (default: measured here)")
    p.add_argument("--target", choices=("embedded", "bmv2"), default=None,
                   help="embedded or bmv2 (default: the harness's)")
    p.add_argument("--markdown", metavar="FILE", default=None,
                   help="also write the table as Markdown to FILE")
    p.add_argument("--out-dir", "--resume", dest="out_dir", default=None,
                   help="where the cells' harness runs go; cells already there are skipped "
                        "(default: a temporary directory)")
    args = p.parse_args(argv)
    nodes, spreads, ratios, schemes = args.nodes, args.spread, args.ratio, args.schemes
    args.schemes = ",".join(args.schemes)
    if os.geteuid() != 0:
        print("token_grid needs root (network namespaces)", file=sys.stderr)
        return 0
    from targets.launch import resolve_target

    out = Path(args.out_dir or tempfile.mkdtemp(prefix="gradnet-tokengrid-"))
    out.mkdir(parents=True, exist_ok=True)
    # the compute that set the cells' link rates: measured once per grid directory, so a
    # resumed grid keeps its rates (and its cells stay comparable)
    plan_file = out / "token_grid_plan.json"
    if args.compute > 0:
        compute_s, parameters = args.compute, measure_compute(steps=6)[1]
    elif plan_file.exists():
        saved = json.loads(plan_file.read_text())
        compute_s, parameters = float(saved["compute_s"]), int(saved["parameters"])
    else:
        compute_s, parameters = measure_compute()
    plan_file.write_text(json.dumps({"compute_s": compute_s, "parameters": parameters}))
    console.print(f"compute {compute_s * 1e3:.2f} ms a step (digits CNN, batch {BATCH}; sets the link rates); "
                  f"{len(nodes) * len(spreads) * len(ratios)} cells; runs in {out}")
    cells: list[dict[str, Any]] = []
    accuracy = 0.0
    for n in nodes:
        for s in spreads:
            for r in ratios:
                bw = link_rate(r, compute_s, parameters)
                console.print(f"[bold]cell: {n} nodes, spread {s:g}x, compute/comm {r:g} -> {bw:.3g} Mbit/s[/bold]")
                summary = run_cell(out / f"n{n}-s{s:g}-r{r:g}", n, s, bw, args)
                accuracy = summary["manifest"]["target_accuracy"]
                cells.append({"nodes": n, "spread": s, "ratio": r, "bw": bw, "schemes": summary["schemes"]})
    (out / "token_grid.json").write_text(json.dumps(
        {"compute_s": compute_s, "parameters": parameters, "target": resolve_target(args.target),
         "cells": cells}, indent=1))
    console.print(print_table(cells, schemes, args, compute_s, parameters, accuracy))
    if args.markdown:
        Path(args.markdown).write_text(markdown(cells, schemes, args, compute_s, parameters, accuracy))
        console.print(f"Markdown table: {args.markdown}")
    console.print(f"runs: {out}; table data: {out / 'token_grid.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
