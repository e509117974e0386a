"""Placement benchmark: greedy+LP vs the MILP optimum vs baselines, and greedy solve time.

Run: ``python -m bench.placement_bench`` (``--quick``: smaller, ``--full``: also the slow
MILPs of the oversubscribed k=8 fat-tree; ``--max-seconds``: budget per greedy timing).
The scale table runs the greedy on fat-tree k=8, k=16 and k=32 with K = k for switch
capacities from one link to unbounded, with the MILP's gap where it finishes
(``--scale-milp-limit``; none at k=32); ``--no-k32`` leaves k=32 out (about a minute of
CPU), ``--plain`` times the greedy that solves every candidate's LP next to it (minutes
per row; hours at k=32).

Setup: fat-tree(k), every link 1000 Mbit/s (``2:1``: agg-core links 500), the PS is
the first host ``h1``, every other host is a worker, a programmable switch processes
``C = k/2 * 1000`` Mbit/s (as much as its uplinks carry). gamma is the rate each worker
pushes (Mbit/s). ``paths``: ``single`` = one shortest path per flow (the specified model),
``ECMP`` = flows split evenly over equal-cost next hops (``multipath=True``).
``PS only``: no switch aggregates; ``s_d only``: K = 0 (only the PS's ToR aggregates);
``random`` is the mean over 5 seeds.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import networkx as nx
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from controller.output import TableConsole
from controller.placement import (
    Placement,
    PlacementError,
    PlacementProblem,
    RoundTrace,
    degree_first_placement,
    greedy_placement,
    optimal_placement,
    random_placement,
    solve_lp,
    tor_first_placement,
)
from topologies import fat_tree
from wire.argtypes import Parser, described, nonnegative, positive

LINK_BW = 1000.0


def fat_tree_graph(k: int, core_bw: float = LINK_BW) -> nx.Graph:
    """fat-tree(k) graph with LINK_BW links, agg-core links at ``core_bw``."""
    g = fat_tree(k, bw=LINK_BW).graph.copy()
    for u, v, d in g.edges(data=True):
        if {g.nodes[u].get("role"), g.nodes[v].get("role")} == {"agg", "core"}:
            d["capacity"] = core_bw
    return g


def fat_tree_problem(
    k: int,
    budget: int,
    core_bw: float = LINK_BW,
    multipath: bool = False,
    switch_capacity: float | None = None,
    **kw: Any,
) -> PlacementProblem:
    """PS h1, every other host a worker; C = k/2 links unless ``switch_capacity``."""
    g = fat_tree_graph(k, core_bw)
    hosts = [n for n, kind in g.nodes(data="kind") if kind == "host"]
    cap = k / 2 * LINK_BW if switch_capacity is None else switch_capacity
    return PlacementProblem(g, hosts[0], hosts[1:], budget, cap, multipath=multipath, **kw)


def random_problem(seed: int) -> PlacementProblem:
    """Small random switch graph (5-7 switches, 5-9 hosts, mixed capacities), K = 2."""
    rng = random.Random(seed)
    n_sw = rng.randint(5, 7)
    sws = [f"s{i}" for i in range(n_sw)]
    g = nx.Graph()
    g.add_nodes_from(sws, kind="switch", role="switch")
    for u, v in nx.random_labeled_tree(n_sw, seed=seed).edges:
        g.add_edge(sws[u], sws[v], capacity=float(rng.choice([50, 100, 200])))
    for _ in range(rng.randint(0, 3)):
        u, v = rng.sample(sws, 2)
        g.add_edge(u, v, capacity=float(rng.choice([50, 100, 200])))
    hosts = [f"h{i}" for i in range(rng.randint(5, 9))]
    for h in hosts:
        g.add_node(h, kind="host", role="host")
        g.add_edge(h, rng.choice(sws), capacity=float(rng.choice([100, 200])))
    return PlacementProblem(g, hosts[0], hosts[1:], 2, rng.choice([150.0, 300.0, 1e4]))


def _timed(fn: Callable[[], object]) -> tuple[object, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


Case = tuple[str, int, int, float, bool]  # name, k, K, agg-core capacity, multipath


def quality_table(cases: list[Case], milp_limit: float) -> Table:
    tab = Table(title="gamma (Mbit/s per worker): greedy+LP vs MILP optimum vs baselines")
    cols = ("fat-tree", "paths", "K", "PS only", "s_d only", "greedy", "MILP opt", "random",
            "ToR-first", "degree-first", "greedy gap", "greedy s", "MILP s")  # fmt: skip
    for col in cols:
        tab.add_column(col, justify="left" if col in ("fat-tree", "paths") else "right")
    for name, k, budget, core_bw, multipath in cases:
        prob = fat_tree_problem(k, budget, core_bw, multipath)
        # references: no aggregation at all; only the PS's ToR aggregates (K = 0)
        ps_only = solve_lp(fat_tree_problem(k, 0, core_bw, multipath, tor_in_budget=True), [])
        sd_only = solve_lp(prob, [])
        gr, t_gr = _timed(lambda p=prob: greedy_placement(p))
        try:
            opt, t_opt = _timed(
                lambda p=prob, g=gr: optimal_placement(
                    p, time_limit_s=milp_limit, lower_bound=g.gamma
                )
            )
        except PlacementError:
            opt, t_opt = None, milp_limit
        rnd = statistics.mean(random_placement(prob, s).gamma for s in range(5))
        tor = tor_first_placement(prob).gamma
        deg = degree_first_placement(prob).gamma
        if opt is not None:
            mark = "" if opt.optimal else f" (<= {opt.upper_bound:.1f})"
            opt_s = f"{opt.gamma:.1f}{mark}"
            gap = f"{100 * (1 - gr.gamma / max(opt.gamma, gr.gamma)):.2f}%"
        else:
            opt_s, gap = "timeout", "?"
        tab.add_row(
            name, "ECMP" if multipath else "single", str(budget), f"{ps_only.gamma:.1f}",
            f"{sd_only.gamma:.1f}", f"{gr.gamma:.1f}", opt_s, f"{rnd:.1f}", f"{tor:.1f}",
            f"{deg:.1f}", gap, f"{t_gr:.2f}", f"{t_opt:.2f}",
        )  # fmt: skip
    return tab


def random_graphs_table(n: int) -> Table:
    gaps, t_gr, t_opt = [], 0.0, 0.0
    for seed in range(n):
        prob = random_problem(seed)
        gr, dt = _timed(lambda p=prob: greedy_placement(p))
        t_gr += dt
        opt, dt = _timed(lambda p=prob: optimal_placement(p, time_limit_s=30))
        t_opt += dt
        gaps.append(1 - gr.gamma / max(opt.gamma, gr.gamma))
    tab = Table(title=f"greedy vs MILP on {n} small random graphs (K=2)")
    for col in ("greedy optimal", "mean gap", "worst gap", "greedy ms/inst", "MILP ms/inst"):
        tab.add_column(col, justify="right")
    hit = sum(g < 1e-5 for g in gaps)
    tab.add_row(
        f"{hit}/{n}", f"{100 * statistics.mean(gaps):.2f}%", f"{100 * max(gaps):.2f}%",
        f"{1000 * t_gr / n:.1f}", f"{1000 * t_opt / n:.1f}",
    )  # fmt: skip
    return tab


def _greedy_with_progress(
    prob: PlacementProblem, console: Console, label: str, **kw: Any
) -> tuple[Placement, float, float]:
    """greedy_placement with a progress bar over its rounds (piped: a log line every
    10 s); returns (placement, wall s, CPU s)."""
    live = console.is_terminal
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), console=console, transient=True, disable=not live,
    ) as bar:  # fmt: skip
        task = bar.add_task(label, total=prob.budget)
        last = [time.perf_counter()]

        def tick(t: RoundTrace) -> None:
            bar.update(task, advance=1, description=f"{label}: gamma {t.gamma:.1f}")
            if not live and time.perf_counter() - last[0] > 10:
                last[0] = time.perf_counter()
                console.log(f"{label}: round {t.round + 1}/{prob.budget}, gamma {t.gamma:.1f}")

        c0, t0 = time.process_time(), time.perf_counter()
        pl = greedy_placement(prob, progress=tick, **kw)
        return pl, time.perf_counter() - t0, time.process_time() - c0


def _lp_counts(pl: Placement) -> tuple[int, int]:
    """(LPs solved, LPs the plain greedy solves: one per candidate per round)."""
    return sum(t.lp_solves for t in pl.trace), sum(len(t.scores) for t in pl.trace)


def timing_table(ks: Iterable[int], max_seconds: float, console: Console) -> Table:
    """Greedy time for K = 4 and K = k/2 (single path) and K = 4 (ECMP), growing k while
    the estimated time stays within ``max_seconds``."""
    tab = Table(title="greedy solve time on fat-tree(k) (symmetric candidates share one LP)")
    for col in ("k", "hosts", "switches", "paths", "K", "candidates x rounds", "LPs solved",
                "greedy s", "CPU s", "gamma"):  # fmt: skip
        tab.add_column(col, justify="left" if col == "paths" else "right")
    last: dict[tuple[int, bool], tuple[int, float]] = {}  # (K rule, paths) -> (k, seconds)
    for k in ks:
        ran = False
        configs = dict.fromkeys([(min(4, k // 2), False), (k // 2, False), (min(4, k // 2), True)])
        for budget, multipath in configs:
            prob = fat_tree_problem(k, budget, multipath=multipath)
            row = [str(k), str(len(prob.workers) + 1), str(len(prob.switches)),
                   "ECMP" if multipath else "single", str(budget)]  # fmt: skip
            rule = (budget if budget == 4 else -1, multipath)
            if rule in last:  # the time grows about as k^4 (LP size x rounds)
                k0, t0 = last[rule]
                est = t0 * (k / k0) ** 4
                if est > max_seconds:
                    tab.add_row(*row, "", f"skipped (~{est:.0f} s)", "", "", "")
                    continue
            gr, dt, cpu = _greedy_with_progress(prob, console, f"fat-tree k={k} K={budget}")
            solved, plain = _lp_counts(gr)
            last[rule], ran = (k, dt), True
            tab.add_row(*row, str(plain), str(solved), f"{dt:.2f}", f"{cpu:.2f}", f"{gr.gamma:.1f}")
        if not ran:
            break
    return tab


# (k, K, switch capacities from one link to unbounded, MILP time limit or None: the
# default limit); the MILP finishes at k=8, not at k=16 (the gap column says so).
ScaleCase = tuple[int, int, Sequence[float], float | None]


def scale_table(
    cases: Sequence[ScaleCase], milp_limit: float, console: Console, *, plain: bool = False
) -> Table:
    """Greedy on fat-tree(k) with K switches for switch capacities from tight to
    unbounded: wall and CPU time, LPs solved (vs one per candidate per round), gamma, and
    the gap to the MILP optimum where the MILP finishes within its limit (0: no MILP).
    ``plain``: also time the greedy that solves every candidate's LP (minutes at k=16)."""
    tab = Table(
        title="greedy at scale: fat-tree(k), K switches, single path, C from 1 link to unbounded"
    )
    cols = ["k", "K", "C (Mbit/s)", "LPs solved", "plain LPs", "greedy s", "CPU s", "gamma",
            "MILP opt", "greedy gap", "MILP s"]  # fmt: skip
    if plain:
        cols += ["plain s", "same placement"]
    for col in cols:
        tab.add_column(col, justify="right")
    for k, budget, caps, limit in cases:
        limit = milp_limit if limit is None else limit
        for cap in caps:
            prob = fat_tree_problem(k, budget, switch_capacity=cap)
            name = "unbounded" if math.isinf(cap) else f"{cap:.0f}"
            gr, dt, cpu = _greedy_with_progress(prob, console, f"k={k} K={budget} C={name}")
            solved, n_plain = _lp_counts(gr)
            opt_s, gap, t_opt = "-", "-", "-"
            if limit > 0:
                console.log(f"MILP k={k} K={budget} C={name} (limit {limit:g} s)...")
                t0 = time.perf_counter()
                try:
                    opt = optimal_placement(prob, time_limit_s=limit, lower_bound=gr.gamma)
                except PlacementError:
                    opt = None
                t_opt = f"{time.perf_counter() - t0:.1f}"
                if opt is not None and opt.optimal:
                    opt_s = f"{opt.gamma:.2f}"
                    gap = f"{100 * (1 - gr.gamma / max(opt.gamma, gr.gamma)):.2f}%"
                elif opt is not None and opt.upper_bound is not None:
                    opt_s = f"timed out (<= {opt.upper_bound:.1f})"
                    gap = f"<= {100 * (1 - gr.gamma / max(opt.upper_bound, gr.gamma)):.2f}%"
                else:
                    opt_s = "timed out"
            row = [str(k), str(budget), name, str(solved), str(n_plain), f"{dt:.1f}",
                   f"{cpu:.1f}", f"{gr.gamma:.2f}", opt_s, gap, t_opt]  # fmt: skip
            if plain:
                ref, dt_p, _ = _greedy_with_progress(
                    prob, console, f"plain k={k} K={budget} C={name}", symmetry=False
                )
                same = ref.switches == gr.switches and math.isclose(
                    ref.gamma, gr.gamma, rel_tol=1e-7
                )
                row += [f"{dt_p:.1f}", "yes" if same else "NO"]
            tab.add_row(*row)
    return tab


def main(argv: list[str] | None = None) -> None:
    ap = Parser(prog="python -m bench.placement_bench", description=described(__doc__))
    ap.add_argument("--quick", action="store_true", help="k=4 only, fewer random graphs")
    ap.add_argument("--full", action="store_true", help="add oversubscribed k=8 (slow MILP)")
    ap.add_argument("--max-seconds", type=positive, default=60.0, help="greedy timing budget")
    ap.add_argument("--milp-limit", type=positive, default=60.0, help="MILP time limit (s)")
    ap.add_argument(
        "--scale-milp-limit", type=nonnegative, default=10.0,
        help="MILP time limit for k=16 in the scale table (s; 0: skip the MILP there)",
    )  # fmt: skip
    ap.add_argument("--no-scale", action="store_true", help="skip the k=8/k=16 scale table")
    ap.add_argument(
        "--no-k32", action="store_true",
        help="scale table without k=32, K=32 (about 1 min of CPU on 2 cores)",
    )  # fmt: skip
    ap.add_argument(
        "--plain", action="store_true",
        help="scale table: also time the greedy without symmetry (minutes per row at k=16)",
    )  # fmt: skip
    args = ap.parse_args(argv)
    console = TableConsole()  # tables fit the terminal (80 piped) or fold to key/value rows

    half = LINK_BW / 2
    cases: list[Case] = []
    for multipath in (False, True):
        cases += [("k=4", 4, b, LINK_BW, multipath) for b in (1, 2, 4)]
        cases += [("k=4 2:1", 4, b, half, multipath) for b in (1, 2, 4)]
        if not args.quick:
            cases += [("k=8", 8, b, LINK_BW, multipath) for b in (2, 4, 8)]
        if args.full:
            cases += [("k=8 2:1", 8, b, half, multipath) for b in (2, 4)]
    console.log("greedy vs MILP vs baselines...")
    console.print(quality_table(cases, args.milp_limit))
    console.print(random_graphs_table(10 if args.quick else 50))
    # larger k: the scale table below (k=8, k=16 and k=32, K = k)
    ks = [4, 8] if args.quick else [4, 8, 16, 20, 24]
    console.print(timing_table(ks, args.max_seconds, console))
    scale: list[ScaleCase] = []
    if not args.no_scale and not args.quick:
        # C = 1, k/4, k/2 links, unbounded
        scale += [(8, 8, [LINK_BW, 2 * LINK_BW, 4 * LINK_BW, math.inf], args.milp_limit)]
        scale += [(16, 16, [LINK_BW, 4 * LINK_BW, 8 * LINK_BW, math.inf], None)]
        if not args.no_k32:
            scale += [(32, 32, [16 * LINK_BW, math.inf], 0.0)]
    if scale:
        console.print(scale_table(scale, args.scale_milp_limit, console, plain=args.plain))


if __name__ == "__main__":
    main()
