"""``python -m experiments --mode bcube``: BML on a live BCube vs fat-tree baselines.

1. build BCube(N, k) (default BCube(3, 2), the BML testbed's size) of P4 switches running
   ``forward.p4``, one NIC per level on every server, ``--bw`` Mbit/s links;
2. run BML (k threads per server, thread j starting at level j) with every server a
   worker; check every element of every server's result against the exact fixed-point
   sum; check that every byte crossed exactly one switch (switch port counters);
3. build the smallest fat-tree with as many servers (one NIC each, same host link rate)
   and run the sharded PS, ring all-reduce and the single PS on the same gradients;
4. print sync time, bytes per NIC, the line-rate model of each scheme and the ratios;
   save ``summary.json`` and a plot (sync time per scheme, NIC utilisation per level).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
from rich.table import Table

from controller.bcube import (
    baseline_fat_tree,
    bcube_network_topology,
    bcube_plan,
    choose_scale_bits,
    fat_tree_plan,
    gradients,
)
from controller.deploy import deploy, read_counters
from controller.output import TableConsole
from experiments import options as opts
from experiments.runner import log as _log
from experiments.runner import prepare_hosts
from experiments.schemes import SchemeResult, run_scheme
from hosts.bml.schedule import ScheduleError

# wide tables even when stdout is a file or pipe (Rich would fold them at 80 columns)
console = TableConsole()

LABELS = {"bml": "BML (BCube)", "sharded_ps": "sharded PS (fat-tree)",
          "ring": "ring all-reduce (fat-tree)", "ps": "single PS (fat-tree)"}


def run_bml(n: int, k: int, bw: float, values: int, grads: list[np.ndarray], scale_bits: int,
            run_dir: Path, target: str | None, link_loss: float = 0.0, max_time: float = 300.0,
            pipeline: int = 1, log: Any = _log,
            loss: Mapping[tuple[str, int], float] | None = None) -> tuple[SchemeResult, dict[str, Any]]:
    """BML on a fresh BCube(n, k); returns the result and the switches' drop counters.

    ``link_loss`` > 0 puts that loss rate on one link of every level (the first switch of
    the level, towards its first server); ``loss``: ``{(switch, port): rate}`` besides
    (``--loss``; it wins on the same port)."""
    from topologies.network import Network

    topo = bcube_network_topology(n, k, bw)
    loss_spec = {}
    if link_loss:
        for lvl in range(k):
            sw = next(s for s in topo.switches() if topo.node(s)["level"] == lvl)
            loss_spec[sw, 1] = link_loss
    loss_spec.update(loss or {})
    with Network(topo, target=target, log=log) as net:
        rep = deploy(topo, net.grpc_addresses(), loss=loss_spec)
        log(f"BCube({n}, {k}): forward.p4 deployed ({rep}); loss {loss_spec or 'none'}")
        prepare_hosts(net, topo.hosts())
        plan = bcube_plan(topo, n, k, values, scale_bits, pipeline=pipeline)
        res = run_scheme(net, topo, plan, grads, run_dir, bw, max_time, log)
        counters = read_counters(topo, net.grpc_addresses())
    return res, counters


def run_baselines(servers: int | list[int], bw: float, values: int,
                  grads: list[np.ndarray] | dict[int, list[np.ndarray]], scale_bits: int | dict[int, int],
                  schemes: list[str], run_dir: Path, target: str | None, fabric_x: float,
                  max_time: float = 300.0, log: Any = _log) -> list[SchemeResult]:
    """The baselines on one fat-tree. ``servers`` may be a list of server counts (one
    network for all; ``grads`` and ``scale_bits`` then map each count to its own)."""
    from topologies.network import Network

    counts = [servers] if isinstance(servers, int) else list(servers)
    gmap = grads if isinstance(grads, dict) else {counts[0]: grads}
    bmap = scale_bits if isinstance(scale_bits, dict) else {counts[0]: scale_bits}
    topo = baseline_fat_tree(max(counts), bw, fabric_x)
    out = []
    with Network(topo, target=target, log=log) as net:
        deploy(topo, net.grpc_addresses())
        prepare_hosts(net, topo.hosts()[:max(counts)])
        for count in counts:
            for scheme in schemes:
                plan = fat_tree_plan(topo, scheme, count, values, bmap[count])
                out.append(run_scheme(net, topo, plan, gmap[count], run_dir / f"s{count}",
                                      bw, max_time, log))
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
    names = [LABELS.get(r.scheme, r.scheme).replace(" (", "\n(") for r in results]
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
            label = f"BML level {lvl} NICs" if r.scheme == "bml" else f"{r.scheme} NIC"
            axes[1].plot(grid, u, label=label, linestyle="-" if r.scheme == "bml" else "--")
    axes[1].set_xlabel("time since start (s)")
    axes[1].set_ylabel("mean NIC send utilisation")
    axes[1].set_ylim(0, 1.2)
    axes[1].legend(fontsize=7)
    fig.suptitle(f"gradnet: BML on BCube vs fat-tree baselines ({bw:g} Mbit/s links)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def build_parser() -> argparse.ArgumentParser:
    """Options of ``--mode bcube``."""
    p = argparse.ArgumentParser(prog="python -m experiments --mode bcube",
                                description=__doc__.splitlines()[0],
                                epilog="--bw: BCube and fat-tree host links (default 1: links, not "
                                       "the 2-core CPU, limit); --loss names ports of the BCube "
                                       "(s1, s2, ...); the fat-tree baselines run without loss.")
    p.add_argument("--n", type=int, default=3, help="switch ports N (default 3)")
    p.add_argument("--k", type=int, default=2, help="levels k (default 2: BCube(3,2), 9 servers)")
    p.add_argument("--values", type=int, default=65536,
                   help="gradient length in float32 values (default 65536 = 256 kB)")
    p.add_argument("--schemes", default="bml,sharded_ps,ring,ps",
                   help="comma-separated subset of bml,sharded_ps,ring,ps")
    p.add_argument("--fabric-x", type=float, default=4.0,
                   help="fat-tree switch-to-switch links at this multiple of --bw (default 4)")
    p.add_argument("--link-loss", type=float, default=0.0, metavar="RATE",
                   help="loss rate on one BCube link per level: the level's first switch toward "
                        "its first server (default 0)")
    p.add_argument("--pipeline", type=int, default=4,
                   help="BML: pieces per parameter set, pipelined through the levels "
                        "(default 4; 1 = exactly one thread per set)")
    opts.add_common(p, "bcube", takes={
        "--seed": {"default": 1}, "--bw": {"default": 1.0},
        "--loss": {"legacy": ("--link-loss", "link_loss")}, "--max-time": {"default": 300.0},
        "--target": {}, "--out-dir": {}},
        rejects={"--seeds": "it runs one gradient seed (--seed N); run it once per seed",
                 "--target-accuracy": "it synchronises one gradient and trains no model "
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
                "point with an exact sum, hosts.fixedpoint; and 2 CPU cores)")
    if not 0.0 <= args.link_loss < 1.0:
        p.error("--link-loss must be in [0, 1)")
    try:
        port_loss = check_loss(topo, opts.loss_dict(args.loss))
    except DeployError as e:
        p.error(f"--loss: {e}")
    if os.geteuid() != 0:
        console.print("[red]the experiment needs root (network namespaces)[/red]")
        return 2
    servers = args.n**args.k
    run_dir = Path(args.out_dir).resolve() / time.strftime("bcube-%Y%m%d-%H%M%S")
    run_dir.mkdir(parents=True, exist_ok=True)
    console.save_to(run_dir)  # every table in full: tables.txt, tables.json, CSV
    grads = gradients(servers, args.values, args.seed)
    scale_bits = choose_scale_bits(grads)
    _log(f"BCube({args.n}, {args.k}): {servers} servers, {args.values} values "
         f"({args.values * 4:,} bytes of int32 fixed point, scale 2^{scale_bits}), "
         f"links {args.bw:g} Mbit/s")
    results: list[SchemeResult] = []
    counters: dict[str, Any] = {}
    if "bml" in schemes:
        res, counters = run_bml(args.n, args.k, args.bw, args.values, grads, scale_bits, run_dir,
                                args.target, args.link_loss, args.max_time, args.pipeline, loss=port_loss)
        results.append(res)
        drops = {s: c["link_drops"] for s, c in counters.items() if any(c["link_drops"].values())}
        no_route = sum(c["ingress_drops"].get("no_route", 0) for c in counters.values())
        _log(f"BCube switches: emulated-loss drops {drops or 'none'}; no-route drops {no_route}")
    base = [s for s in ("sharded_ps", "ring", "ps") if s in schemes]
    if base:
        results += run_baselines(servers, args.bw, args.values, grads, scale_bits, base, run_dir,
                                 args.target, args.fabric_x, args.max_time)
    ratios = print_results(results, args.k, f"BML on BCube({args.n}, {args.k}) vs fat-tree "
                           f"baselines: {servers} servers, {args.values * 4:,} bytes, "
                           f"{args.bw:g} Mbit/s links")
    summary = {
        "n": args.n, "k": args.k, "servers": servers, "values": args.values, "bw_mbit": args.bw,
        "scale_bits": scale_bits, "fabric_x": args.fabric_x, "link_loss": args.link_loss,
        "loss": {f"{sw}:{pt}": r for (sw, pt), r in port_loss.items()}, "ratios": ratios,
        "bcube_counters": counters,
        "runs": [{k: v for k, v in asdict(r).items() if k != "reports"} | {"ratio": r.ratio}
                 for r in results],
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    plot(run_dir / "bcube.png", results, args.bw)
    console.print(f"results: {run_dir}/summary.json, {run_dir}/bcube.png")
    return 0 if all(r.exact for r in results) else 1
