"""ns-3 at data-centre scale (docs/simulation.md): sync time vs workers, and the simulator
against the emulator.

1. Scale table (default): PS, ring all-reduce and INA with 16 -> 1,023 workers on the
   smallest fat-tree holding them (up to k=16, all links ``--gbps``), one gradient of
   ``--values`` values; each row with its line-rate bound.
2. ``--placement``: INA's sync time vs its budget K on fat-trees ``--placement-k`` (every
   host but the PS a worker), K switches placed by the greedy + LP, at random and
   ToR-first (``--methods``), each with its line-rate bound and the LP's prediction.
3. ``--bcube``: BML on BCube(n, k) (``--bcube-sizes``) against the sharded PS and ring
   all-reduce on the fat-tree of the same servers (experiments/bcube.py's baselines), all
   over ns-3 TCP, each with its line-rate bound.
4. ``--validate``: ``make compare-sync``'s PS, INA and ring on the emulator (needs root)
   at each of ``--validate-bw`` Mbit/s, then the same inputs in ns-3; one table with both
   sync times and the error. ``--validate-summary FILE`` compares an existing
   ``summary.json`` instead of running the emulator.

    python -m bench.sim_bench [--workers 16,64,256,1023] [--gbps 100] [--values 32768]
                              [--budget 4] [--schemes ps,ring,ina]
                              [--placement [--placement-k 8,16] [--budgets 0,1,2,4,8,16]
                                           [--methods greedy,random,tor-first]]
                              [--bcube [--bcube-sizes 8x2,4x3,16x2] [--bcube-values V]]
                              [--validate [--validate-bw 2,5,10] | --validate-summary FILE]
                              [--check-ideal [--check-cases all|tight] [--json FILE]]

5. ``--check-ideal``: the harness's ideal model (experiments/ideal.py) against ns-3 for PS,
   INA, ring, the sharded PS and BML on small topologies, at a latency-bound and a
   bandwidth-bound gradient (sim/check_ideal.py).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.table import Table

from controller.output import TableConsole
from sim.plan import METHODS
from wire.argtypes import (
    MAX_VALUES,
    Parser,
    count,
    described,
    integer,
    listed,
    names,
    natural,
    positive,
    values,
)

console = TableConsole()
ROOT = Path(__file__).resolve().parents[1]


def _us(s: float | None) -> str:
    return "unfinished" if s is None else f"{s * 1e3:,.3f}"


def _sync(s: float | None, max_time: float) -> str:
    return f"unfinished at {max_time:g} s" if s is None else f"{s * 1e3:,.3f}"


def scale(args: argparse.Namespace) -> int:
    """The scale table."""
    from sim.scale import scale_rows

    t = Table(title=f"ns-3: one gradient of {args.values:,} values ({4 * args.values // 1024} "
                    f"KiB), fat-tree links at {args.gbps:g} Gbit/s, INA K={args.budget}, "
                    f"window {args.window}, RTO {args.timeout:g} s, at most {args.max_time:g} "
                    f"simulated s")
    for c in ("k", "workers", "scheme", "sync ms", "bound ms", "sync/bound", "retx",
              "wall s", "notes"):
        t.add_column(c, justify="right" if c not in ("scheme", "notes") else "left")
    schemes = tuple(args.schemes)
    for n in args.workers:
        for r in scale_rows(n, schemes, args.gbps, args.values, args.budget, args.window,
                            args.timeout, max_time=args.max_time):
            ratio = "-" if r.seconds is None else f"{r.seconds / r.bound_s:.2f}"
            t.add_row(str(r.k), str(r.workers), r.scheme, _sync(r.seconds, args.max_time),
                      _us(r.bound_s),
                      ratio, str(r.retransmissions), f"{r.wall_s:.1f}", r.note)
            console.print(f"[dim]{r.scheme} {r.workers} workers k={r.k}: {_us(r.seconds)} ms "
                          f"(bound {_us(r.bound_s)} ms), wall {r.wall_s:.1f} s[/dim]")
    console.print(t)
    return 0


def placement(args: argparse.Namespace) -> int:
    """INA's time vs budget K: greedy + LP vs random vs ToR-first placement."""
    from sim.scale import budget_rows

    methods = tuple(args.methods)
    budgets = tuple(args.budgets)
    t = Table(title=f"ns-3: INA vs budget K, one gradient of {args.values:,} values "
                    f"({4 * args.values // 1024} KiB), fat-tree links and switch capacity "
                    f"{args.gbps:g} Gbit/s, window {args.window}, RTO {args.timeout:g} s, at "
                    f"most {args.max_time:g} simulated s; LP ms = the gradient at the LP's "
                    f"per-worker rate")
    for c in ("k", "workers", "K", "placement", "sync ms", "bound ms", "sync/bound", "LP ms",
              "retx", "wall s", "aggregating (s_d last)"):
        t.add_column(c, justify="left" if c in ("placement", "aggregating (s_d last)") else "right")
    for k in args.placement_k:
        values = args.values if k < 16 or not args.values_k16 else args.values_k16
        for r in budget_rows(k, budgets, methods, args.gbps, values, window=args.window,
                             timeout=args.timeout, max_time=args.max_time, seed=args.seed):
            ratio = "-" if r.seconds is None else f"{r.seconds / r.bound_s:.2f}"
            agg = r.aggregating if len(r.aggregating) <= 5 else [*r.aggregating[:4], "...",
                                                                  r.aggregating[-1]]
            t.add_row(str(r.k), str(r.workers), str(r.budget), r.method,
                      _sync(r.seconds, args.max_time), _us(r.bound_s), ratio, _us(r.lp_s),
                      str(r.retransmissions), f"{r.wall_s:.1f}", " ".join(agg))
            console.print(f"[dim]k={k} K={r.budget} {r.method}: {_us(r.seconds)} ms (bound "
                          f"{_us(r.bound_s)}, LP {_us(r.lp_s)}), wall {r.wall_s:.1f} s[/dim]")
    console.print(t)
    return 0


def bcube(args: argparse.Namespace) -> int:
    """BML on BCube vs the sharded PS and ring on the same servers' fat-tree."""
    from sim.bml import bcube_rows

    v = args.bcube_values
    t = Table(title=f"ns-3: BML on BCube(n,k) vs sharded PS and ring on the fat-tree of the same "
                    f"servers (fabric x4), one gradient of {v:,} values ({4 * v // 1024} KiB), "
                    f"links {args.gbps:g} Gbit/s, TCP")
    for c in ("BCube", "servers", "scheme", "sync ms", "bound ms", "sync/bound", "busiest link",
              "BML / scheme", "wall s"):
        t.add_column(c, justify="left" if c in ("scheme", "busiest link", "BCube") else "right")
    for n, k in args.bcube_sizes:
        rows = bcube_rows(n, k, v, args.gbps, max_time=args.max_time)
        bml = next((r.seconds for r in rows if r.scheme == "bml"), None)
        for r in rows:
            ratio = "-" if r.seconds is None else f"{r.seconds / r.bound_s:.2f}"
            rel = "-" if bml is None or r.seconds is None else f"{bml / r.seconds:.2f}"
            t.add_row(f"({n},{k})", str(r.servers), r.scheme, _sync(r.seconds, args.max_time),
                      _us(r.bound_s), ratio, r.bound_link, rel, f"{r.wall_s:.1f}")
            console.print(f"[dim]BCube({n},{k}) {r.scheme}: {_us(r.seconds)} ms (bound "
                          f"{_us(r.bound_s)}), wall {r.wall_s:.1f} s[/dim]")
    console.print(t)
    return 0


def limits(args: argparse.Namespace) -> int:
    """Where simulation stops: event rates, memory per node, what fits in an hour."""
    from sim.limits import hour_budget, memory_rows
    from sim.scale import scale_rows

    # memory first: after the runs, freed memory is reused and the growth reads near zero
    m = Table(title="ns-3 resident memory of a built fat-tree (nodes, links, static routes; "
                    "VmRSS growth, one process, ascending k, before any run)")
    for c in ("k", "hosts", "nodes", "links", "RSS growth MiB", "KiB / node"):
        m.add_column(c, justify="right")
    for r in memory_rows(list(args.limits_k), args.gbps):
        m.add_row(str(r.k), f"{r.hosts:,}", f"{r.nodes:,}", f"{r.links:,}",
                  f"{r.rss_kib / 1024:,.1f}", f"{r.per_node_kib:,.0f}")
    console.print(m)
    schemes = tuple(args.schemes)
    t = Table(title=f"ns-3 cost measured here: one gradient of {args.values:,} values "
                    f"({4 * args.values // 1024} KiB), fat-tree links {args.gbps:g} Gbit/s; "
                    f"rates over the CPU time of Simulator.Run (wall time beside it)")
    for c in ("k", "workers", "scheme", "sync ms", "events", "link frames", "CPU s", "wall s",
              "events/CPU s", "frames/CPU s", "events / (worker x KiB)"):
        t.add_column(c, justify="left" if c == "scheme" else "right")
    last: dict[str, tuple[float, float]] = {}
    kib = 4 * args.values / 1024
    for n in args.limits_workers:
        for r in scale_rows(n, schemes, args.gbps, args.values, args.budget, args.window,
                            args.timeout, max_time=args.max_time):
            w = r.work
            ev, fr, run = w.get("events", 0), w.get("link_packets", 0), w.get("cpu_s", 0.0)
            rate = ev / run if run else 0.0
            per = ev / (r.workers * kib)
            last[r.scheme] = (rate, per)
            t.add_row(str(r.k), str(r.workers), r.scheme, _sync(r.seconds, args.max_time),
                      f"{ev:,.0f}", f"{fr:,.0f}", f"{run:.2f}", f"{w.get('run_s', 0.0):.2f}",
                      f"{rate:,.0f}",
                      f"{fr / run if run else 0:,.0f}", f"{per:,.1f}")
            console.print(f"[dim]{r.scheme} k={r.k}: {ev:,.0f} events in {run:.2f} CPU s[/dim]")
    console.print(t)
    h = Table(title="EXTRAPOLATION: what one CPU hour of Simulator.Run holds at the rates of "
                    "the largest run above (events proportional to workers x gradient bytes)")
    for c in ("scheme", "events/CPU s", "events / (worker x KiB)", "worker x MiB in 1 h",
              "1,023 workers: gradient MiB", "ResNet-50 (97.7 MiB): workers"):
        h.add_column(c, justify="left" if c == "scheme" else "right")
    for s, (rate, per) in last.items():
        units = hour_budget(rate, per) / 1024  # worker x MiB
        h.add_row(s, f"{rate:,.0f}", f"{per:,.1f}", f"{units:,.0f}", f"{units / 1023:,.1f}",
                  f"{units / (25_600_000 * 4 / 2**20):,.0f}")
    console.print(h)
    return 0


def extrapolate_models(args: argparse.Namespace) -> int:
    """Real model sizes: fit time = a + b x size on the sizes that run, extrapolate."""
    from sim.limits import MODELS, extrapolate, fit_line
    from sim.scale import scale_rows

    schemes = tuple(args.schemes)
    sizes = list(args.extrapolate_values)
    runs: dict[str, list] = {s: [] for s in schemes}
    t = Table(title=f"ns-3 runs for the fit: {args.extrapolate_workers} workers, fat-tree "
                    f"links {args.gbps:g} Gbit/s, INA K={args.budget}, window {args.window}")
    for c in ("values", "KiB", "scheme", "sync ms", "bound ms", "fit ms (3 sizes)",
              "error", "wall s"):
        t.add_column(c, justify="left" if c == "scheme" else "right")
    for v in sizes:
        for r in scale_rows(args.extrapolate_workers, schemes, args.gbps, v, args.budget,
                            args.window, args.timeout, max_time=args.max_time):
            runs[r.scheme].append(r)
            console.print(f"[dim]{r.scheme} {v} values: {_us(r.seconds)} ms, wall "
                          f"{r.wall_s:.1f} s[/dim]")
    fits = {}
    for s, rows in runs.items():
        ok = [r for r in rows if r.seconds is not None]
        if len(ok) < 2:
            console.print(f"{s}: fewer than two finished sizes, no fit")
            continue
        xs, ys = [4 * r.values for r in ok], [r.seconds for r in ok]
        fits[s] = extrapolate(s, xs, ys, [r.bound_s for r in ok])
        a, b = fit_line([float(x) for x in xs], ys)
        for r in ok:
            pred = a + b * 4 * r.values
            t.add_row(f"{r.values:,}", f"{r.values // 256}", s, _us(r.seconds), _us(r.bound_s),
                      _us(pred), f"{100 * (pred / r.seconds - 1):+.1f} %", f"{r.wall_s:.1f}")
    console.print(t)
    e = Table(title="EXTRAPOLATED (not simulated): sync time = a + b x gradient bytes, "
                    "4 bytes a parameter, same topology, workers, window and link rate")
    for c in ("scheme", "a ms", "b ns/KiB", "fit max |error|",
              *(f"{m} ({n / 2**20:.0f} MiB) ms" for m, n in MODELS.items()),
              *(f"{m} bound ms" for m in MODELS), *(f"{m} / bound" for m in MODELS), "note"):
        e.add_column(c, justify="left" if c == "scheme" else "right")
    for s, f in fits.items():
        e.add_row(s, f"{f.a * 1e3:.3f}", f"{f.b * 1024 * 1e9:,.1f}",
                  f"{100 * f.worst_error:.1f} %",
                  *(f"{f.predicted[m] * 1e3:,.1f}" for m in MODELS),
                  *(f"{f.bound[m] * 1e3:,.1f}" for m in MODELS),
                  *(f"{f.predicted[m] / f.bound[m]:.2f}" for m in MODELS),
                  "below its bound: the fit is not valid there"
                  if any(f.predicted[m] < f.bound[m] * 0.97 for m in MODELS) else "")
    console.print(e)
    return 0


def validate(args: argparse.Namespace) -> int:
    """The validation table: emulator vs ns-3."""
    from sim.validate import validate_summary

    summaries = []
    if args.validate_summary:
        summaries.append(json.loads(Path(args.validate_summary).read_text()))
    else:
        if os.geteuid() != 0:
            print("--validate runs the emulator: needs root", file=sys.stderr)
            return 2
        for bw in args.validate_bw:
            out = Path(tempfile.mkdtemp(prefix="gradnet-sim-validate-"))
            subprocess.run([sys.executable, "-m", "experiments", "--mode", "compare",
                            "--schemes", "ps,ina,ring", "--workers", str(args.validate_workers),
                            "--values", str(args.validate_values), "--bw", f"{bw:g}",
                            "--out-dir", str(out)], cwd=ROOT, check=True, capture_output=True)
            summaries.append(json.loads(next(out.glob("compare-*/summary.json")).read_text()))
    t = Table(title="ns-3 vs the emulator (make compare-sync's fat-tree k=4, fabric x4)")
    for c in ("Mbit/s", "workers", "values", "scheme", "emulator s", "ns-3 s", "error",
              "emulator bound s", "ns-3 bound s", "emulator / bound"):
        t.add_column(c, justify="left" if c == "scheme" else "right")
    worst = 0.0  # over the rows where the emulator is link-bound (within 10 % of its bound)
    for s in summaries:
        for r in validate_summary(s):
            err = r.error
            if r.emulator_s and r.emulator_bound_s and r.emulator_s <= 1.1 * r.emulator_bound_s:
                worst = max(worst, abs(err) if err is not None else 1.0)
            t.add_row(f"{s['bw_mbit']:g}", str(s["workers"]), f"{s['values']:,}", r.scheme,
                      f"{r.emulator_s:.3f}" if r.emulator_s else "-",
                      f"{r.sim_s:.3f}" if r.sim_s is not None else "-",
                      f"{100 * err:+.1f} %" if err is not None else "-",
                      f"{r.emulator_bound_s:.3f}" if r.emulator_bound_s else "-",
                      f"{r.sim_bound_s:.3f}",
                      f"{r.emulator_s / r.emulator_bound_s:.2f}"
                      if r.emulator_s and r.emulator_bound_s else "-")
    console.print(t)
    console.print(f"largest |error| where the emulator is link-bound (emulator / bound <= 1.1): "
                  f"{100 * worst:.1f} %")
    return 0


def check_ideal(args: argparse.Namespace) -> int:
    """The harness's ideal model against ns-3 (sim/check_ideal.py)."""
    from sim.check_ideal import cases, compare

    t = Table(title="the ideal model (experiments/ideal.py) vs ns-3, one synchronization; ideal "
                    "bound = busiest link's bytes at its rate + steps x one ns-3 switch traversal "
                    "(1 us + a 98-byte frame); ns-3 is deterministic (one run each)")
    for c in ("topology", "workers", "values", "scheme", "ideal busiest", "ideal bytes",
              "ns-3 busiest", "ns-3 bytes", "ideal bound ms", "ns-3 ms", "ns-3 / ideal",
              "retx", "wall s"):
        t.add_column(c, justify="left" if c in ("topology", "scheme", "ideal busiest",
                                                 "ns-3 busiest") else "right")
    rows = []
    for spec, scheme, workers, n_values in cases(args.check_cases):
        r = compare(spec, scheme, workers, n_values, max_time=args.max_time)
        rows.append(r.as_dict())
        ratio = "-" if r.ratio is None else f"{r.ratio:.3f}"
        console.print(f"[dim]{spec} {scheme} {workers} workers {n_values:,} values: ideal "
                      f"{r.ideal_bound_s * 1e3:.3f} ms, ns-3 {_us(r.sim_s)} ms ({ratio}), wall "
                      f"{r.wall_s:.1f} s[/dim]")
        t.add_row(spec, str(r.workers), f"{n_values:,}", scheme, r.ideal_busiest,
                  f"{r.ideal_bytes:,}", r.sim_busiest, f"{r.sim_bytes:,}",
                  f"{r.ideal_bound_s * 1e3:,.3f}", _sync(r.sim_s, args.max_time), ratio,
                  str(r.retransmissions), f"{r.wall_s:.1f}")
    console.print(t)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


def _bcube_sizes(text: str) -> list[tuple[int, int]]:
    """``--bcube-sizes``: comma-separated ``NxK``, N >= 2, K >= 1, at most MAX_SERVERS servers."""
    from wire.bcube_schedule import MAX_SERVERS

    out = []
    for s in (s.strip() for s in text.split(",") if s.strip()):
        n_k = s.split("x")
        if len(n_k) != 2 or not all(x.strip().isdigit() for x in n_k):
            raise argparse.ArgumentTypeError(f"{s!r} is not NxK (e.g. 8x2)")
        n, k = int(n_k[0]), int(n_k[1])
        if n < 2 or k < 1 or n**k > MAX_SERVERS:
            raise argparse.ArgumentTypeError(f"BCube({n},{k}): N >= 2, K >= 1, at most {MAX_SERVERS} servers")
        out.append((n, k))
    if not out:
        raise argparse.ArgumentTypeError(f"expected comma-separated NxK sizes (got {text!r})")
    return out


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    p = Parser(prog="python -m bench simulate", description=described(__doc__))
    p.add_argument("--workers", type=listed(count), default=[16, 64, 256, 1023], help="worker counts (scale table)")
    p.add_argument("--gbps", type=positive, default=100.0, help="link rate, Gbit/s (default 100)")
    p.add_argument("--values", type=values, default=32768, help="gradient length (default 32768)")
    p.add_argument("--budget", type=natural, default=4, help="INA: aggregating switches K")
    p.add_argument("--window", type=count, default=32, help="agents' window (default 32)")
    p.add_argument("--timeout", type=positive, default=1.0, help="agents' first RTO s (default 1)")
    p.add_argument("--schemes", type=names("ps", "ring", "ina"), default=["ps", "ring", "ina"],
                   help="schemes (default ps,ring,ina)")
    p.add_argument("--max-time", type=positive, default=5.0,
                   help="simulated seconds a run may take (default 5: an incast collapse "
                        "shows as unfinished instead of minutes of retransmissions)")
    p.add_argument("--placement", action="store_true",
                   help="INA's time vs budget K per placement method instead")
    p.add_argument("--placement-k", type=listed(integer(2)), default=[8, 16], help="fat-tree arities (--placement)")
    p.add_argument("--budgets", type=listed(natural), default=[0, 1, 2, 4, 8, 16], help="budgets K (--placement)")
    p.add_argument("--methods", type=names(*METHODS), default=list(METHODS),
                   help="placement methods (--placement; sim/plan.py:METHODS)")
    p.add_argument("--values-k16", type=integer(0, MAX_VALUES), default=0,
                   help="--placement: gradient length at k=16 (default: --values)")
    p.add_argument("--seed", type=natural, default=0, help="--placement: the random placement's seed")
    p.add_argument("--bcube", action="store_true",
                   help="BML on BCube vs sharded PS and ring instead")
    p.add_argument("--bcube-sizes", type=_bcube_sizes, default=[(8, 2), (4, 3), (16, 2)], help="BCube NxK sizes (--bcube)")
    p.add_argument("--bcube-values", type=values, default=262144,
                   help="--bcube: gradient length (default 262144 = 1 MiB)")
    p.add_argument("--limits", action="store_true",
                   help="where simulation stops: event rates, memory per node, an hour's reach")
    p.add_argument("--limits-workers", type=listed(count), default=[15, 63, 255],
                   help="--limits: worker counts to time (smallest fat-tree each)")
    p.add_argument("--limits-k", type=listed(integer(2)), default=[4, 8, 12, 16], help="--limits: fat-trees to build")
    p.add_argument("--extrapolate", action="store_true",
                   help="ResNet-50/BERT-base gradients by a fit over sizes that run")
    p.add_argument("--extrapolate-values", type=listed(values), default=[8192, 32768, 131072],
                   help="--extrapolate: gradient lengths to simulate")
    p.add_argument("--extrapolate-workers", type=count, default=15,
                   help="--extrapolate: workers (default 15: fat-tree k=4)")
    p.add_argument("--check-ideal", action="store_true",
                   help="the harness's ideal model (experiments/ideal.py) vs ns-3 instead")
    p.add_argument("--check-cases", choices=("all", "tight"), default="all",
                   help="--check-ideal: every topology and size (all, ~5 min here), or one "
                        "small bandwidth-bound case per scheme (tight)")
    p.add_argument("--json", help="--check-ideal: also write the rows to this JSON file")
    p.add_argument("--validate", action="store_true", help="the validation table instead")
    p.add_argument("--validate-bw", type=listed(positive), default=[2.0, 5.0, 10.0],
                   help="--validate: the emulator runs' link rates, Mbit/s (default 2,5,10)")
    p.add_argument("--validate-workers", type=integer(2, 15), default=4,
                   help="--validate: workers of make compare's fat-tree k=4 (2..15; default 4)")
    p.add_argument("--validate-values", type=values, default=16384,
                   help="--validate: gradient length (default 16384)")
    p.add_argument("--validate-summary", help="an emulator compare summary.json to compare")
    return p


def main(argv: list[str] | None = None) -> int:
    """Command-line entry."""
    p = build_parser()
    args = p.parse_args(argv)
    odd = [k for k in (*args.placement_k, *args.limits_k) if k % 2]
    if odd:
        p.error(f"argument --{'placement' if odd[0] in args.placement_k else 'limits'}-k: "
                f"a fat-tree's arity is even (got {odd[0]})")
    if args.validate_summary and not Path(args.validate_summary).is_file():
        p.error(f"argument --validate-summary: no such file {args.validate_summary}")
    from sim.ns3env import Ns3Missing, available

    if not available():
        print(f"simulate: skipped: {Ns3Missing.__doc__} pip install -e '.[sim]'")
        return 0
    if args.check_ideal:
        return check_ideal(args)
    if args.validate or args.validate_summary:
        return validate(args)
    if args.limits:
        return limits(args)
    if args.extrapolate:
        return extrapolate_models(args)
    if args.placement:
        return placement(args)
    if args.bcube:
        return bcube(args)
    return scale(args)


if __name__ == "__main__":
    sys.exit(main())
