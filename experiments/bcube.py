"""``python -m experiments --mode bcube``: BML on a live BCube vs baselines with the same
NIC count (k-rail) and with one NIC (fat-tree), over several gradient seeds.

1. build BCube(N, k) (default BCube(3, 2), the BML testbed's size) of P4 switches running
   ``forward.p4``, one NIC per level on every server, ``--bw`` Mbit/s links; run BML
   (k threads per server, thread j starting at level j);
2. build a k-rail network with as many servers: every server k NICs at the same rate,
   NIC j into rail j's own leaf-spine (``--rail-fabric fat-tree``: fat-tree), and run k
   concurrent ring all-reduces (``rail_ring``) or sharded PSs (``rail_sharded_ps``),
   one per rail on 1/k of the gradient: BML's NIC count without BCube;
3. build the smallest fat-tree with as many servers (one NIC each, same host link rate)
   and run the sharded PS, ring all-reduce and the single PS;
4. on each network, first tune every scheme's knob (BML: pieces per parameter set;
   ring: pieces per chunk; sharded PS: pieces per shard) on a gradient of its own seed,
   record the sweep, and keep the fastest setting; then run every seed
   (``--seed``..``--seed + --seeds - 1``) with it on the same gradients for every scheme;
5. check every element of every server's result against the exact fixed-point sum;
   print per scheme the mean sync time with its 95 % CI, the line-rate bound, and BML's
   time over each scheme's paired by seed, then the verdict; save ``summary.json`` and a
   plot (sync time per scheme, NIC utilisation per level).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.table import Table

from controller import argtypes
from controller.bcube import (
    RAIL_FABRICS,
    baseline_fat_tree,
    baseline_rails,
    bcube_network_topology,
    bcube_plan,
    choose_scale_bits,
    fat_tree_plan,
    gradients,
    rail_plan,
)
from controller.deploy import deploy, read_counters
from controller.output import TableConsole
from experiments import options as opts
from experiments.runner import log as _log
from experiments.runner import prepare_hosts
from experiments.schemes import SchemeResult, run_scheme
from experiments.stats import Interval, format_interval, mean_ci, paired_ratios
from wire.bcube_schedule import ScheduleError

# wide tables even when stdout is a file or pipe (Rich would fold them at 80 columns)
console = TableConsole()

LABELS = {"bml": "BML (BCube)", "rail_ring": "k-rail ring all-reduce",
          "rail_sharded_ps": "k-rail sharded PS", "sharded_ps": "sharded PS (fat-tree)",
          "ring": "ring all-reduce (fat-tree)", "ps": "single PS (fat-tree)"}
#: Which network each scheme runs on, in run order.
NETWORKS = {"bcube": ("bml",), "rails": ("rail_ring", "rail_sharded_ps"),
            "fat-tree": ("sharded_ps", "ring", "ps")}
#: Each scheme's tuning knob (the plan field the sweep sets); the single PS has none.
KNOBS = {"bml": "pipeline", "rail_ring": "pieces", "rail_sharded_ps": "pieces",
         "sharded_ps": "pieces", "ring": "pieces"}
#: What the knob means, per scheme (tables).
KNOB_TEXT = {"bml": "pieces per parameter set", "rail_ring": "pieces per chunk",
             "ring": "pieces per chunk", "rail_sharded_ps": "pieces per shard",
             "sharded_ps": "pieces per shard"}
#: Gradient seed of the tuning sweep: its own, so no setting is picked on the very
#: gradients it is then measured with.
TUNE_SEED = 10_000


# ----------------------------------------------------------------------------- comparison
@dataclass
class Comparison:
    """One ``--mode bcube`` comparison: every scheme's runs per seed, the sweep, the
    chosen settings, the BCube switches' counters."""

    n: int
    k: int
    bw: float
    values: int
    seeds: list[int]
    #: scheme -> one result per seed (in ``seeds`` order)
    runs: dict[str, list[SchemeResult]] = field(default_factory=dict)
    #: one row per tuning run: scheme, knob, value, seconds, model_s, exact
    sweep: list[dict[str, Any]] = field(default_factory=list)
    #: scheme -> the knob value its seed runs used
    best: dict[str, int] = field(default_factory=dict)
    #: scheme -> network name and NICs per server
    network: dict[str, str] = field(default_factory=dict)
    nics: dict[str, int] = field(default_factory=dict)
    counters: dict[str, Any] = field(default_factory=dict)

    @property
    def exact(self) -> bool:
        """Every run of every scheme (sweep included) ended with the exact sum."""
        return (all(r.exact for rs in self.runs.values() for r in rs)
                and all(row["exact"] for row in self.sweep))

    def seconds(self, scheme: str) -> dict[int, float]:
        """``{seed: sync seconds}`` of ``scheme``."""
        return {sd: r.seconds for sd, r in zip(self.seeds, self.runs[scheme], strict=True)}

    def interval(self, scheme: str) -> Interval:
        """Mean sync time over the seeds with its 95 % CI."""
        return mean_ci(r.seconds for r in self.runs[scheme])

    def bml_over(self, scheme: str) -> Interval:
        """BML's time over ``scheme``'s, paired by seed (mean of the ratios, 95 % CI)."""
        return paired_ratios(self.seconds("bml"), self.seconds(scheme))


@contextlib.contextmanager
def live_network(topo: Any, target: str | None, log: Any,
                 loss: Mapping[tuple[str, int], float] | None = None) -> Iterator[Any]:
    """``topo`` up (its own namespaces and run directory), ``forward.p4`` deployed with
    ``loss``, hosts prepared; torn down on exit, failure included."""
    from topologies.network import Network

    with Network(topo, target=target, log=log) as net:
        rep = deploy(topo, net.grpc_addresses(), loss=dict(loss or {}))
        log(f"{topo.name}: forward.p4 deployed ({rep}); loss {dict(loss or {}) or 'none'}")
        prepare_hosts(net, topo.hosts())
        yield net


def _bcube_loss(topo: Any, k: int, link_loss: float,
                loss: Mapping[tuple[str, int], float] | None) -> dict[tuple[str, int], float]:
    spec: dict[tuple[str, int], float] = {}
    if link_loss:
        for lvl in range(k):
            sw = next(s for s in topo.switches() if topo.node(s)["level"] == lvl)
            spec[sw, 1] = link_loss
    spec.update(loss or {})
    return spec


def compare(n: int, k: int, bw: float, values: int, seeds: list[int], schemes: list[str],
            run_dir: Path, target: str | None, *, fabric_x: float = 4.0,
            rail_fabric: str = "leaf-spine", grid: Mapping[str, list[int]] | None = None,
            fixed: Mapping[str, int] | None = None, link_loss: float = 0.0,
            loss: Mapping[tuple[str, int], float] | None = None, max_time: float = 300.0,
            log: Any = _log) -> Comparison:
    """BML on BCube(n, k), the k-rail baselines and the fat-tree baselines, every
    network up once: tune each scheme over ``grid[scheme]`` (knob values; none or one
    value: no sweep, ``fixed[scheme]`` or the default) on the gradients of
    :data:`TUNE_SEED`, then run every seed with the fastest exact setting.
    ``link_loss``/``loss`` apply to the BCube only."""
    servers = n**k
    grid = grid or {}
    fixed = fixed or {}
    cmp = Comparison(n, k, bw, values, list(seeds))
    grads = {sd: gradients(servers, values, sd) for sd in [TUNE_SEED, *seeds]}
    bits = {sd: choose_scale_bits(g) for sd, g in grads.items()}

    def topology(net_name: str) -> Any:
        if net_name == "bcube":
            return bcube_network_topology(n, k, bw)
        if net_name == "rails":
            return baseline_rails(servers, k, bw, fabric_x, rail_fabric)
        return baseline_fat_tree(servers, bw, fabric_x)

    def plan_for(topo: Any, scheme: str, sd: int, knob: int | None) -> dict[str, Any]:
        if scheme == "bml":
            return bcube_plan(topo, n, k, values, bits[sd], pipeline=knob or 4)
        if scheme in ("rail_ring", "rail_sharded_ps"):
            return rail_plan(topo, scheme, servers, values, bits[sd], pieces=knob)
        return fat_tree_plan(topo, scheme, servers, values, bits[sd], pieces=knob)

    for net_name, members in NETWORKS.items():
        todo = [sc for sc in members if sc in schemes]
        if not todo:
            continue
        topo = topology(net_name)
        spec = _bcube_loss(topo, k, link_loss, loss) if net_name == "bcube" else {}
        with live_network(topo, target, log, spec) as net:
            for scheme in todo:
                cmp.network[scheme] = topo.name
                cmp.nics[scheme] = len(topo.node(topo.hosts()[0])["ifaces"])
                values_grid = list(grid.get(scheme, [])) if scheme in KNOBS else []
                choice = fixed.get(scheme)
                if len(values_grid) > 1:
                    tried = []
                    for v in values_grid:
                        res = run_scheme(net, topo, plan_for(topo, scheme, TUNE_SEED, v),
                                         grads[TUNE_SEED], run_dir / net_name / f"tune-{v}",
                                         bw, max_time, log)
                        cmp.sweep.append({"scheme": scheme, "knob": KNOBS[scheme], "value": v,
                                          "seconds": res.seconds, "model_s": res.model_s,
                                          "exact": res.exact})
                        if res.exact:
                            tried.append((res.seconds, v))
                    if tried:
                        choice = min(tried)[1]
                elif values_grid:
                    choice = values_grid[0]
                runs = []
                for sd in seeds:
                    plan = plan_for(topo, scheme, sd, choice)
                    cmp.best[scheme] = int(plan.get(KNOBS.get(scheme, ""), 0) or 0)
                    runs.append(run_scheme(net, topo, plan, grads[sd],
                                           run_dir / net_name / f"seed{sd}", bw, max_time, log))
                cmp.runs[scheme] = runs
            if net_name == "bcube":
                cmp.counters = read_counters(topo, net.grpc_addresses())
    return cmp


def print_comparison(cmp: Comparison, title: str) -> dict[str, Any]:
    """The sweep table, the comparison table and the verdict; returns them as data."""
    if cmp.sweep:
        st = Table(title="tuning sweep (gradient seed "
                         f"{TUNE_SEED}; the fastest exact setting is used below)")
        for col in ("scheme", "knob", "value", "sync s", "line-rate bound s", "x bound",
                    "exact", "chosen"):
            st.add_column(col, justify="left" if col in ("scheme", "knob") else "right")
        for row in cmp.sweep:
            sc = row["scheme"]
            st.add_row(LABELS[sc], KNOB_TEXT[sc], str(row["value"]), f"{row['seconds']:.2f}",
                       f"{row['model_s']:.2f}", f"{row['seconds'] / row['model_s']:.2f}",
                       "yes" if row["exact"] else "NO",
                       "*" if cmp.best.get(sc) == row["value"] else "")
        console.print(st)
    t = Table(title=title)
    for col in ("scheme", "network", "NICs x Mbit/s", "setting", "sync s (mean ± 95% CI)",
                "line-rate bound s", "x bound", "BML ÷ scheme (paired)", "exact"):
        t.add_column(col, justify="left" if col in ("scheme", "network", "setting") else "right")
    rows: dict[str, Any] = {}
    for sc, runs in cmp.runs.items():
        iv = cmp.interval(sc)
        bound = sum(r.model_s for r in runs) / len(runs)
        ratio = cmp.bml_over(sc) if "bml" in cmp.runs and sc != "bml" else None
        setting = f"{cmp.best[sc]} {KNOB_TEXT[sc]}" if sc in KNOBS else "-"
        exact = sum(r.exact for r in runs)
        t.add_row(LABELS[sc], cmp.network[sc], f"{cmp.nics[sc]} x {cmp.bw:g}", setting,
                  format_interval(iv), f"{bound:.2f}", f"{iv.mean / bound:.2f}",
                  format_interval(ratio, ".3f") if ratio else "-",
                  f"{exact}/{len(runs)}")
        rows[sc] = {"seconds": asdict(iv), "bound_s": bound, "setting": cmp.best.get(sc),
                    "bml_over": asdict(ratio) if ratio else None, "exact": exact,
                    "runs": len(runs), "network": cmp.network[sc], "nics": cmp.nics[sc]}
    console.print(t)
    verdict = verdict_lines(cmp)
    for line in verdict:
        console.print(line)
    return {"table": rows, "verdict": verdict, "sweep": cmp.sweep, "best": cmp.best}


def verdict_lines(cmp: Comparison) -> list[str]:
    """Plain sentences: does BML beat each baseline, the same-NIC-count ones first?"""
    if "bml" not in cmp.runs:
        return []
    out = []
    for sc in ("rail_ring", "rail_sharded_ps", "ring", "sharded_ps", "ps"):
        if sc not in cmp.runs:
            continue
        iv = cmp.bml_over(sc)
        same = "same NIC count" if cmp.nics[sc] == cmp.k else f"{cmp.nics[sc]} NIC"
        if iv.n < 2:
            word = "faster than" if iv.mean < 1 else "not faster than"
            how = f"BML is {word} it in one seed (no CI)"
        elif iv.high < 1:
            how = "BML beats it"
        elif iv.low > 1:
            how = "BML loses to it"
        else:
            how = "no significant difference (the CI contains 1)"
        out.append(f"BML vs {LABELS[sc]} ({same}): BML/{sc} = {format_interval(iv, '.3f')} "
                   f"over {iv.n} seeds: {how}.")
    return out


def print_results(results: list[SchemeResult], k: int, title: str) -> dict[str, float]:
    """The main table and the ratio table; returns the ratios."""
    t = Table(title=title)
    for col in ("scheme", "servers", "sync s", "model s", "measured/model", "max NIC tx bytes",
                "tx bytes per NIC by level", "switch hops/byte", "exact"):
        t.add_column(col, justify="left" if col == "scheme" else "right")
    for r in results:
        t.add_row(LABELS.get(r.scheme, r.scheme), str(r.servers), f"{r.seconds:.2f}",
                  f"{r.model_s:.2f}", f"{r.ratio:.2f}", f"{r.max_nic_tx():,}",
                  " / ".join(f"{b:,}" for b in r.level_tx()), f"{r.switch_hops:.3f}",
                  "[green]yes[/green]" if r.exact else f"[red]{r.mismatches} wrong[/red]")
    console.print(t)
    by = {r.scheme: r for r in results}
    ratios: dict[str, float] = {}
    if "bml" in by:
        rt = Table(title="ratios")
        for col in ("ratio", "measured", "model", "goal"):
            rt.add_column(col, justify="left" if col == "ratio" else "right")
        bml = by["bml"]
        for other, goal in (("sharded_ps", f"<= 1.2/k = {1.2 / k:.2f}"), ("ring", f"~ 1/k = {1 / k:.2f}"),
                            ("ps", "")):
            if other in by:
                m = bml.seconds / by[other].seconds
                ratios[f"bml/{other}"] = m
                rt.add_row(f"BML / {LABELS[other]}", f"{m:.3f}",
                           f"{bml.model_s / by[other].model_s:.3f}", goal)
        if ratios:
            console.print(rt)
    return ratios


def utilisation(res: SchemeResult, bw: float, period: float = 0.2) -> tuple[np.ndarray, list[np.ndarray]]:
    """Mean NIC send utilisation per level over time (0..1 of the link rate)."""
    t_end = max(r["end"] for r in res.reports) - res.start
    grid = np.arange(0.0, t_end + period, period)
    levels = max(len(r["samples"]["tx"]) for r in res.reports)
    per_level = []
    for lvl in range(levels):
        curves = []
        for r in res.reports:
            s = r["samples"]
            ifaces = list(s["tx"])
            if lvl >= len(ifaces):
                continue
            ts = np.asarray(s["t"]) - res.start
            tx = np.asarray(s["tx"][ifaces[lvl]], dtype=float)
            curves.append(np.interp(grid, ts, tx))
        cum = np.mean(curves, axis=0)
        rate = np.diff(cum, prepend=cum[0]) * 8 / period / (bw * 1e6)
        per_level.append(rate)
    return grid, per_level


def plot(path: Path, results: list[SchemeResult], bw: float) -> None:
    """Sync time per scheme (measured and model) and NIC utilisation per level over time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    names = [LABELS.get(r.scheme, r.scheme).replace(" (", "\n(").replace("k-rail ", "k-rail\n")
             for r in results]
    x = np.arange(len(results))
    axes[0].bar(x - 0.2, [r.seconds for r in results], 0.4, label="measured", color="tab:blue")
    axes[0].bar(x + 0.2, [r.model_s for r in results], 0.4, label="line-rate model", color="tab:gray")
    axes[0].set_xticks(x, names, fontsize=7)
    axes[0].set_ylabel("synchronization time (s)")
    axes[0].set_yscale("log")
    axes[0].legend(fontsize=8)
    for r in results:
        if r.scheme == "ps":
            continue  # tens of seconds at a low rate: it would flatten the others
        grid, per_level = utilisation(r, bw)
        for lvl, u in enumerate(per_level):
            label = (f"BML level {lvl} NICs" if r.scheme == "bml" else
                     f"{r.scheme} rail {lvl} NICs" if len(per_level) > 1 else f"{r.scheme} NIC")
            axes[1].plot(grid, u, label=label, linestyle="-" if r.scheme == "bml" else "--")
    axes[1].set_xlabel("time since start (s)")
    axes[1].set_ylabel("mean NIC send utilisation")
    axes[1].set_ylim(0, 1.2)
    axes[1].legend(fontsize=7)
    fig.suptitle(f"gradnet: BML on BCube vs k-rail and fat-tree baselines ({bw:g} Mbit/s links)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _int_list(text: str) -> list[int]:
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not vals or any(not 1 <= v <= 64 for v in vals):
        raise argparse.ArgumentTypeError(f"values must be in 1..64, got {text!r}")
    return vals


def build_parser() -> argparse.ArgumentParser:
    """Options of ``--mode bcube``."""
    p = argtypes.Parser(prog="python -m experiments --mode bcube",
                                description=" ".join(__doc__.split("\n\n")[0].split()),
                                epilog="--bw: BCube, k-rail and fat-tree host links (default 1: "
                                       "links, not the 2-core CPU, limit); --loss names ports of "
                                       "the BCube (s1, s2, ...); the baselines run without loss.")
    p.add_argument("--n", type=argtypes.integer(2), default=3, help="switch ports N (default 3)")
    p.add_argument("--k", type=argtypes.count, default=2, help="levels k (default 2: BCube(3,2), 9 servers)")
    p.add_argument("--values", type=argtypes.values, default=65536,
                   help="gradient length in float32 values (default 65536 = 256 kB)")
    p.add_argument("--schemes", default="bml,rail_ring,rail_sharded_ps,sharded_ps,ring,ps",
                   help="comma-separated subset of " + ",".join(LABELS) + " (default: all)")
    p.add_argument("--fabric-x", type=argtypes.positive, default=4.0,
                   help="switch-to-switch links (fat-tree, k-rail) at this multiple of --bw "
                        "(default 4: non-blocking)")
    p.add_argument("--rail-fabric", choices=RAIL_FABRICS, default="leaf-spine",
                   help="each rail of the k-rail network (default leaf-spine)")
    p.add_argument("--link-loss", type=argtypes.number(0.0, below=1.0), default=0.0, metavar="RATE",
                   help="loss rate on one BCube link per level: the level's first switch toward "
                        "its first server (default 0)")
    p.add_argument("--pipeline", type=argtypes.integer(1, 64), default=4,
                   help="BML: pieces per parameter set with --no-tune "
                        "(default 4; 1 = exactly one thread per set)")
    p.add_argument("--pieces", type=argtypes.integer(1, 64), default=None,
                   help="ring / sharded PS (k-rail and fat-tree): pieces per chunk or shard "
                        "with --no-tune (default 4 for rings, 8 for sharded PSs)")
    p.add_argument("--tune-pipeline", type=_int_list, default=[1, 2, 4, 8], metavar="P,P,...",
                   help="BML pipeline values the sweep tries (default 1,2,4,8)")
    p.add_argument("--tune-pieces", type=_int_list, default=[1, 2, 4, 8, 16], metavar="C,C,...",
                   help="pieces per chunk / shard the sweep tries for every ring and sharded PS "
                        "(default 1,2,4,8,16)")
    p.add_argument("--no-tune", dest="tune", action="store_false",
                   help="no sweep: --pipeline and --pieces (or the defaults) for every seed")
    opts.add_common(p, "bcube", takes={
        "--seeds": {"default": 3}, "--seed": {"default": 1}, "--bw": {"default": 1.0},
        "--loss": {"legacy": ("--link-loss", "link_loss")}, "--max-time": {"default": 300.0},
        "--target": {}, "--out-dir": {}},
        rejects={"--target-accuracy": "it synchronises one gradient and trains no model "
                                      "(time to accuracy: --mode train --scheme bml)",
                 "--workers": "its servers are every host of BCube(N, k), N**k of them (--n, --k)"})
    return p


def main(argv: list[str]) -> int:
    """Entry point (see the module doc)."""
    from controller.deploy import DeployError, check_loss

    p = build_parser()
    args = p.parse_args(argv)
    schemes = [s.strip() for s in args.schemes.split(",") if s.strip()]
    bad = [s for s in schemes if s not in LABELS]
    if bad or not schemes:
        p.error(f"unknown scheme(s) {bad}: choose from {', '.join(LABELS)}")
    try:
        topo = bcube_network_topology(args.n, args.k, args.bw)
    except (ScheduleError, ValueError) as e:
        p.error(str(e))
    if args.n**args.k > 32:
        p.error(f"BCube({args.n}, {args.k}) has {args.n**args.k} servers: at most 32 (int32 fixed "
                "point with an exact sum, wire.fixedpoint; and 2 CPU cores)")
    if not 0.0 <= args.link_loss < 1.0:
        p.error("--link-loss must be in [0, 1)")
    if args.pieces is not None and not 1 <= args.pieces <= 64:
        p.error("--pieces must be in 1..64")
    try:
        port_loss = check_loss(topo, opts.loss_dict(args.loss))
    except DeployError as e:
        p.error(f"--loss: {e}")
    if os.geteuid() != 0:
        console.print("[red]the experiment needs root (network namespaces)[/red]")
        return 2
    servers = args.n**args.k
    seeds = list(range(args.seed, args.seed + args.seeds))
    run_dir = Path(args.out_dir).resolve() / time.strftime("bcube-%Y%m%d-%H%M%S")
    run_dir.mkdir(parents=True, exist_ok=True)
    console.save_to(run_dir)  # every table in full: tables.txt, tables.json, CSV
    _log(f"BCube({args.n}, {args.k}): {servers} servers, {args.values} values "
         f"({args.values * 4:,} bytes of int32 fixed point), links {args.bw:g} Mbit/s, "
         f"gradient seeds {seeds}, load {os.getloadavg()[0]:.2f}")
    fixed = {"bml": args.pipeline}
    if args.pieces:
        fixed.update({sc: args.pieces for sc in KNOBS if sc != "bml"})
    grid = {}
    if args.tune:
        grid = {sc: (args.tune_pipeline if sc == "bml" else args.tune_pieces) for sc in KNOBS}
    t0 = time.monotonic()
    cmp = compare(args.n, args.k, args.bw, args.values, seeds, schemes, run_dir, args.target,
                  fabric_x=args.fabric_x, rail_fabric=args.rail_fabric, grid=grid, fixed=fixed,
                  link_loss=args.link_loss, loss=port_loss, max_time=args.max_time)
    wall = time.monotonic() - t0
    if cmp.counters:
        drops = {s: c["link_drops"] for s, c in cmp.counters.items() if any(c["link_drops"].values())}
        no_route = sum(c["ingress_drops"].get("no_route", 0) for c in cmp.counters.values())
        _log(f"BCube switches: emulated-loss drops {drops or 'none'}; no-route drops {no_route}")
    first = [rs[0] for rs in cmp.runs.values()]
    print_results(first, args.k, f"seed {seeds[0]} in detail: {servers} servers, "
                  f"{args.values * 4:,} bytes, {args.bw:g} Mbit/s links")
    data = print_comparison(cmp, f"BML on BCube({args.n}, {args.k}) vs baselines with {args.k} "
                            f"NICs (k-rail) and 1 NIC (fat-tree): {servers} servers, "
                            f"{args.values * 4:,} bytes, {args.bw:g} Mbit/s links, seeds "
                            f"{seeds[0]}..{seeds[-1]}")
    console.print(f"wall time {wall:.0f} s; load average at the end {os.getloadavg()[0]:.2f}")
    summary = {
        "n": args.n, "k": args.k, "servers": servers, "values": args.values, "bw_mbit": args.bw,
        "seeds": seeds, "tune_seed": TUNE_SEED, "fabric_x": args.fabric_x,
        "rail_fabric": args.rail_fabric, "link_loss": args.link_loss,
        "loss": {f"{sw}:{pt}": r for (sw, pt), r in port_loss.items()},
        "comparison": data, "bcube_counters": cmp.counters, "wall_s": wall,
        "runs": {sc: [{k: v for k, v in asdict(r).items() if k != "reports"} | {"ratio": r.ratio}
                      for r in rs] for sc, rs in cmp.runs.items()},
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    plot(run_dir / "bcube.png", first, args.bw)
    console.print(f"results: {run_dir}/summary.json, {run_dir}/bcube.png")
    return 0 if cmp.exact else 1
