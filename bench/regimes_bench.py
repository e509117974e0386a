"""``make regimes`` / ``python -m bench regimes``: the regime map (sim/regimes.py).

Which of PS, INA, ring all-reduce and the sharded PS reaches the target accuracy first,
per (model, workers, network, link rate): time to target = steps to target x (compute per
step + sync per step). Sync per step from ns-3 where the run fits ``--ns3-budget``
(worker-fragments of one synchronization), with the ideal bound beside it, else from the
ideal bound alone; every cell says which. One table (rich, CSV, JSON) and one figure in
``results/regimes-<time>/``; ``--resume DIR`` reuses every synchronization and input
already computed there.

    python -m bench regimes [--quick] [--models digits,mlp,mlp-1m] [--workers 4,8,15,31]
                            [--networks fat-tree,leaf-spine-2:1,leaf-spine-4:1] [--gbps 1,10]
                            [--seeds 0,1,2] [--ns3-budget 8000] [--compute-time S]
                            [--out-dir results] [--resume DIR]
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from rich.table import Table

from controller.output import TableConsole
from sim.regimes import MODELS, NETWORKS
from wire.argtypes import Parser, described, integer, listed, names, natural, nonnegative, positive

console = TableConsole()

DEFAULTS = {"models": "digits,mlp,mlp-1m", "workers": "4,8,15,31",
            "networks": "fat-tree,leaf-spine-2:1,leaf-spine-4:1", "gbps": "1,10",
            "seeds": "0,1,2", "ns3_budget": 8000}
#: the test's preset: one model, one worker count, two networks, one link rate, one seed
QUICK = {"models": "digits", "workers": "4", "networks": "fat-tree,leaf-spine-4:1", "gbps": "1",
         "seeds": "0", "ns3_budget": 8000}
#: wall seconds per simulated worker-fragment and per run, measured on the loaded 2-core
#: machine this map was made on (for the estimate printed before the run)
SIM_S_PER_COST, SIM_S_PER_RUN, SIM_IMPORT_S = 1.2e-3, 1.5, 90.0


class Store:
    """Everything computed, one JSON file a thing, under the results directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "sync").mkdir(parents=True, exist_ok=True)
        self.inputs_path = root / "inputs.json"
        self.inputs: dict[str, Any] = (json.loads(self.inputs_path.read_text())
                                       if self.inputs_path.exists() else {})

    def sync(self, spec: str, scheme: str, workers: int, values: int, simulate: bool,
             budget: int = 2) -> dict:
        """One synchronization's figures, computed once."""
        from sim.regimes import sync_figures

        key = f"{spec}_{scheme}_{workers}_{values}_{'ns3' if simulate else 'ideal'}"
        if scheme == "ina":
            key += f"_K{budget}_line-rate"
        path = self.root / "sync" / (key.replace(":", "-").replace(",", "_") + ".json")
        if path.exists():
            return json.loads(path.read_text())
        fig = sync_figures(spec, scheme, workers, values, simulate, budget=budget)
        path.write_text(json.dumps(fig))
        return fig

    def value(self, key: str, compute: Any) -> Any:
        """An input (steps, compute time, parameter count), computed once."""
        if key not in self.inputs:
            self.inputs[key] = compute()
            self.inputs_path.write_text(json.dumps(self.inputs, indent=1))
        return self.inputs[key]


#: the grid's options' types (their defaults above are strings, parsed by the same types)
GRID = {"models": names(*MODELS), "workers": listed(integer(2)), "networks": names(*NETWORKS),
        "gbps": listed(positive), "seeds": listed(natural)}


def plan(args: argparse.Namespace) -> list[tuple[str, int, str, float]]:
    """The cells: (model, workers, network, Mbit/s) (checked where they are parsed)."""
    return [(m, w, n, g * 1000.0) for m in args.models for w in args.workers for n in args.networks
            for g in args.gbps]


def estimate(cells: list[tuple[str, int, str, float]], params: dict[str, int], budget: int) -> str:
    """One line: cells, ns-3 runs, ideal-only runs, the expected wall time here."""
    from sim.regimes import SCHEMES, sim_cost

    sims = [sim_cost(w, params[m]) for m, w, _, _ in cells if sim_cost(w, params[m]) <= budget]
    runs = len(sims) * len(SCHEMES)
    secs = (SIM_IMPORT_S if runs else 0) + runs * SIM_S_PER_RUN + len(SCHEMES) * sum(sims) * SIM_S_PER_COST
    return (f"{len(cells)} cells x {len(SCHEMES)} schemes: {runs} ns-3 runs (worker-fragments <= "
            f"{budget:,}), {(len(cells) - len(sims)) * len(SCHEMES)} from the ideal bound only; "
            f"about {secs / 60:.0f} min on the loaded 2-core machine it was made on (cached runs "
            f"are not run again)")


def build_cell(store: Store, args: argparse.Namespace, model: str, workers: int, network: str,
               mbit: float) -> Any:
    """One cell: its inputs and every scheme's synchronization."""
    from sim import regimes as rg

    params = store.value(f"parameters/{model}", lambda: rg.parameters_of(model))
    seeds = args.seeds
    steps = [store.value(f"steps/{model}/{workers}/{s}",
                         lambda s=s: rg.known_steps(model, workers, s)) for s in seeds]
    compute = args.compute_time if args.compute_time is not None else store.value(
        f"compute/{model}/{workers}", lambda: rg.compute_per_step(model, workers))
    spec = rg.network_spec(network, workers + 1, mbit)
    cell = rg.Cell(model, params, workers, network, mbit, spec, steps, compute)
    simulate = rg.sim_cost(workers, params) <= args.ns3_budget
    for s in rg.SCHEMES:
        t0 = time.monotonic()
        fig = store.sync(spec, s, workers, params, simulate, args.budget)
        cell.schemes[s] = rg.scheme_cell(s, fig)
        sc = cell.schemes[s]
        console.print(f"[dim]  {s}: {_ms(sc.sync_s)} ms ({sc.source}; ideal {_ms(sc.ideal_s)} ms)"
                      f" {time.monotonic() - t0:.1f} s[/dim]")
    cell.decide()
    return cell


def _ms(s: float | None) -> str:
    return "unfinished" if s is None else f"{s * 1e3:,.3f}"


def _ttt(iv: Any) -> str:
    if iv is None or iv.n == 0 or not math.isfinite(iv.mean):
        return "missed"
    return f"{iv.mean:.3f}" if iv.n == 1 else f"{iv.mean:.3f} ± {iv.half_width:.3f}"


def table(cells: list[Any], title: str) -> Table:
    """One row per cell: every scheme's time per step, the winner and its margin."""
    from sim.regimes import SCHEMES, TIE

    t = Table(title=title)
    for c in ("model", "workers", "network", "Gbit/s", "steps", "compute ms",
              *(f"{s} ms/step" for s in SCHEMES), "winner", "margin", "winner's time to target s"):
        t.add_column(c, justify="left" if c in ("model", "network", "winner") else "right")
    for c in cells:
        steps = [s for s in c.steps if s is not None]
        per = []
        for s in SCHEMES:
            sc = c.schemes[s]
            mark = "" if sc.source == "ns-3" else " (ideal)"
            per.append("unfinished" if not math.isfinite(sc.per_step_s) else
                       f"{sc.per_step_s * 1e3:,.2f}{mark}")
        margin = "-" if not math.isfinite(c.margin) else (
            f"x{c.margin:.2f}" + (" (tie)" if c.margin < TIE else ""))
        win = c.schemes.get(c.winner)
        t.add_row(c.model, str(c.workers), c.network, f"{c.mbit / 1000:g}",
                  "/".join(map(str, steps)) or "missed", f"{c.compute_s * 1e3:.2f}", *per,
                  c.winner, margin, _ttt(win.ttt) if win else "missed")
    return t


def write_csv(cells: list[Any], path: Path) -> None:
    """One row per (cell, scheme)."""
    cols = ["model", "parameters", "workers", "network", "oversub", "link_gbps", "topology",
            "scheme", "source", "fidelity", "sync_ms", "ideal_ms", "x_ideal", "compute_ms",
            "per_step_ms", "steps", "time_to_target_s", "ttt_low_s", "ttt_high_s", "seeds",
            "winner", "margin"]
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for c in cells:
            d = c.as_dict()
            for s, sc in d["schemes"].items():
                iv = sc["time_to_target_s"]
                w.writerow([d["model"], d["parameters"], d["workers"], d["network"], d["oversub"],
                            d["link_gbps"], d["topology"], s, sc["source"], sc["fidelity"],
                            _r(sc["sync_s"], 1e3), _r(sc["ideal_s"], 1e3), _r(sc["x_ideal"]),
                            _r(d["compute_s"], 1e3), _r(sc["per_step_s"], 1e3),
                            "/".join(str(x) for x in d["steps"]), _r(iv["mean"]), _r(iv["low"]),
                            _r(iv["high"]), iv["n"], int(s == d["winner"]), _r(d["margin"])])


def _r(x: float | None, scale: float = 1.0) -> str:
    return "" if x is None or not math.isfinite(x) else f"{x * scale:.6g}"


def run(args: argparse.Namespace) -> int:
    """The map: plan, announce, compute cell by cell, write table, CSV, JSON, figure."""
    from sim import regimes as rg

    cells_plan = plan(args)
    root = Path(args.resume) if args.resume else Path(args.out_dir) / time.strftime(
        "regimes-%Y%m%d-%H%M%S")
    store = Store(root)
    params = {m: store.value(f"parameters/{m}", lambda m=m: rg.parameters_of(m))
              for m in {c[0] for c in cells_plan}}
    console.print(f"regime map into {root}: {estimate(cells_plan, params, args.ns3_budget)}")
    cells = []
    for i, (m, w, n, mbit) in enumerate(cells_plan, 1):
        console.print(f"[{i}/{len(cells_plan)}] {m} ({params[m]:,} parameters), {w} workers, "
                      f"{n}, {mbit / 1000:g} Gbit/s")
        cells.append(build_cell(store, args, m, w, n, mbit))
        c = cells[-1]
        console.print(f"  winner {c.winner} (x{c.margin:.2f} over {c.runner_up})")
    seeds = args.seeds
    title = (f"Regime map: time to target = steps x (compute + sync) per step; steps from the "
             f"harness's plan (global batch 64, scaling.simulate, seeds {','.join(map(str, seeds))}), the "
             f"same for every scheme; compute = one CPU thread, "
             f"{'--compute-time' if args.compute_time is not None else 'measured (CPU time)'}; "
             f"sync from ns-3 (deterministic: no interval) or, marked (ideal), the ideal bound; "
             f"interval over {len(seeds)} seed(s); INA with K={args.budget} line-rate switches")
    console.print(table(cells, title))
    (root / "table.txt").write_text(_plain(table(cells, title)))
    (root / "cells.json").write_text(json.dumps({"title": title, "cells": [c.as_dict() for c in cells]},
                                                indent=1))
    write_csv(cells, root / "cells.csv")
    from bench.regimes_figure import figure

    figure(cells, root / "regime_map.png")
    console.print(f"wrote {root}/table.txt, cells.json, cells.csv, regime_map.png")
    return 0


def steps_table(args: argparse.Namespace) -> int:
    """Write sim/regimes_steps.json: the steps to target of every (model, workers, seed)."""
    from sim import regimes as rg

    out: dict[str, Any] = {}
    for m in args.models:
        for w in args.workers:
            for seed in args.seeds:
                out.setdefault(m, {}).setdefault(str(w), {})[str(seed)] = rg.steps_to_target(m, w, seed)
                console.print(f"{m} {w} workers seed {seed}: {out[m][str(w)][str(seed)]} steps")
    rg.STEPS_FILE.write_text(json.dumps({
        "about": "steps to the default target on digits (sim/regimes.py:steps_to_target: the "
                 "harness's plan at global batch 64, experiments/scaling.simulate, evaluated 4 "
                 "times an epoch, 4 epochs; null: not reached); python -m bench regimes "
                 "--steps-table", "steps": out}, indent=1) + "\n")
    console.print(f"wrote {rg.STEPS_FILE}")
    return 0


def _plain(t: Table) -> str:
    import io

    from rich.console import Console

    c = Console(width=250, record=True, file=io.StringIO())
    c.print(t)
    return c.export_text()


def main(argv: list[str] | None = None) -> int:
    """Command-line entry."""
    p = Parser(prog="python -m bench regimes", description=described(__doc__))
    p.add_argument("--quick", action="store_true",
                   help="the test's preset: digits, 4 workers, fat-tree and leaf-spine 4:1, "
                        "1 Gbit/s, seed 0")
    p.add_argument("--models", type=GRID["models"], help=f"models (default {DEFAULTS['models']})")
    p.add_argument("--workers", type=GRID["workers"], help=f"worker counts, each >= 2 (default {DEFAULTS['workers']})")
    p.add_argument("--networks", type=GRID["networks"], help=f"networks (default {DEFAULTS['networks']}: fat-tree 1:1, "
                                      "the smallest k that holds PS and workers; leaf-spine of 2 "
                                      "spines and 4 hosts a leaf at 2:1 and 4:1)")
    p.add_argument("--gbps", type=GRID["gbps"], help=f"link rates, Gbit/s (default {DEFAULTS['gbps']})")
    p.add_argument("--seeds", type=GRID["seeds"], help=f"training seeds for the steps (default {DEFAULTS['seeds']})")
    p.add_argument("--ns3-budget", type=natural,
                   help="simulate a synchronization in ns-3 only up to this many "
                        f"worker-fragments (workers x parameters/64; default "
                        f"{DEFAULTS['ns3_budget']}); larger ones come from the ideal bound")
    p.add_argument("--budget", type=natural, default=2,
                   help="INA: aggregating switches besides the PS's ToR (default 2, make run's; "
                        "fewer where the network has fewer)")
    p.add_argument("--compute-time", type=nonnegative,
                   help="compute per step, seconds (default: measured per model and batch)")
    p.add_argument("--out-dir", default="results", help="where results/regimes-<time>/ goes")
    p.add_argument("--resume", help="an earlier regimes directory: reuse what it computed")
    p.add_argument("--steps-table", action="store_true",
                   help="only compute the steps to target of --models x --workers x --seeds "
                        "into sim/regimes_steps.json (what the map reads; no ns-3 needed)")
    args = p.parse_args(argv)
    for k, v in (QUICK if args.quick else DEFAULTS).items():
        if getattr(args, k) is None:
            setattr(args, k, GRID[k](v) if k in GRID else v)
    if args.resume and not Path(args.resume).is_dir():
        p.error(f"argument --resume: no such directory {args.resume}")
    if args.steps_table:
        return steps_table(args)
    from sim.ns3env import Ns3Missing, available

    if not available():
        print(f"regimes: skipped: {Ns3Missing.__doc__} pip install -e '.[sim]'")
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
