"""``gradctl bcube``: the BML schedule and the line-rate models, without a network.

    gradctl bcube schedule --n N --k K [--values V] [--thread J] [--server S] [--json]
    gradctl bcube model --n N --k K [--values V] [--bw MBIT]

``schedule`` prints, per thread (parameter set), the level of every stage and the slice
each server reduces there (``--server`` instead lists that server's exchanges: peers,
what it sends and receives). ``model`` prints the line-rate time of BML, of the
fat-tree baselines for the same server count, and of the k-rail baselines
(``rail_ring``, ``rail_sharded_ps``: k NICs per server, one ring or sharded PS per rail). ``python -m experiments --mode
bcube`` runs them for real.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.table import Table

from controller import argtypes
from controller.cli import UsageError
from controller.output import TableConsole
from wire.argtypes import described
from wire.bcube_schedule import BcubeSchedule, ScheduleError

console = TableConsole()


def _schedule(args: argparse.Namespace) -> BcubeSchedule:
    try:
        return BcubeSchedule(args.n, args.k, args.values)
    except ScheduleError as e:
        raise UsageError(str(e)) from None


def cmd_bcube_schedule(args: argparse.Namespace) -> int:
    """``gradctl bcube schedule``."""
    sched = _schedule(args)
    threads = range(sched.k) if args.thread is None else [args.thread]
    if args.thread is not None and not 0 <= args.thread < sched.k:
        raise UsageError(f"--thread must be in 0..{sched.k - 1}")
    if args.server is not None and not 0 <= args.server < sched.servers:
        raise UsageError(f"--server must be in 0..{sched.servers - 1}")
    data: dict[str, Any] = {"n": sched.n, "k": sched.k, "servers": sched.servers,
                            "values": sched.values, "threads": []}
    for j in threads:
        entry: dict[str, Any] = {"thread": j, "parameter_set": sched.parameter_set(j),
                                 "levels": sched.level_order(j)}
        if args.server is None:
            entry["reduces"] = [[[s, list(r)] for s, r in row] for row in sched.owner_table(j)]
        else:
            entry["exchanges"] = [
                {"phase": e.phase, "stage": e.stage, "level": e.level,
                 "sends": {p: list(r) for p, r in e.sends().items()},
                 "receives": {p: list(r) for p, r in e.receives().items()}}
                for e in sched.exchanges(args.server, j)]
        data["threads"].append(entry)
    if args.json:
        print(json.dumps(data))
        return 0
    console.print(f"BCube({sched.n}, {sched.k}): {sched.servers} servers, {sched.values} values, "
                  f"{sched.k} parameter sets (threads)")
    for entry in data["threads"]:
        a, b = entry["parameter_set"]
        title = f"thread {entry['thread']}: values [{a}, {b}), levels {entry['levels']}"
        if "reduces" in entry:
            t = Table(title=title + " -- slice each server reduces")
            t.add_column("server", justify="right")
            for i, lvl in enumerate(entry["levels"]):
                t.add_column(f"stage {i} (level {lvl})", justify="right")
            for s in range(sched.servers):
                t.add_row(f"s{s} {sched.digits(s)}",
                          *(f"[{row[s][1][0]}, {row[s][1][1]})" for row in entry["reduces"]))
        else:
            t = Table(title=title + f" -- server {args.server}")
            for col in ("stage", "phase", "level", "sends", "receives"):
                t.add_column(col)
            for e in entry["exchanges"]:
                fmt = lambda m: ", ".join(f"s{p}:[{r[0]},{r[1]})" for p, r in m.items())  # noqa: E731
                t.add_row(str(e["stage"]), e["phase"], str(e["level"]), fmt(e["sends"]),
                          fmt(e["receives"]))
        console.print(t)
    return 0


def cmd_bcube_model(args: argparse.Namespace) -> int:
    """``gradctl bcube model``."""
    from controller.bcube import SCHEMES, line_rate_model, nic_payload_bytes

    sched = _schedule(args)
    if args.bw <= 0:
        raise UsageError("--bw must be > 0")
    t = Table(title=f"line-rate model: {sched.servers} servers, {sched.values * 4:,} bytes, "
                    f"{args.bw:g} Mbit/s")
    for col in ("scheme", "busiest NIC bytes", "seconds", "vs BML"):
        t.add_column(col, justify="right")
    bml = line_rate_model("bml", sched.servers, sched.values, args.bw, sched.n, sched.k)
    for scheme in SCHEMES:
        sec = line_rate_model(scheme, sched.servers, sched.values, args.bw, sched.n, sched.k)
        t.add_row(scheme, f"{nic_payload_bytes(scheme, sched.servers, sched.values, sched.n, sched.k):,}",
                  f"{sec:.3f}", f"{sec / bml:.2f}x")
    console.print(t)
    return 0


def register(sub: Any, topo_help: str) -> None:
    """Add ``gradctl bcube`` to gradctl's subcommands."""
    del topo_help  # no topology argument: the BCube is given by --n/--k
    p = sub.add_parser("bcube", help="BML on BCube: schedule and line-rate models",
                       description=described(__doc__))
    bsub = p.add_subparsers(dest="bcube_cmd", required=True)
    for name, fn, helptext in (("schedule", cmd_bcube_schedule, "print the BML schedule"),
                               ("model", cmd_bcube_model, "line-rate model of every scheme")):
        c = bsub.add_parser(name, help=helptext, description=helptext)
        c.add_argument("--n", type=argtypes.count, required=True, help="switch ports N (>= 2)")
        c.add_argument("--k", type=argtypes.count, required=True, help="levels k (>= 2)")
        c.add_argument("--values", type=argtypes.values, default=65536, help="gradient length (default 65536)")
        if name == "schedule":
            c.add_argument("--thread", type=argtypes.natural, help="only this thread (parameter set)")
            c.add_argument("--server", type=argtypes.natural, help="one server's exchanges instead")
            c.add_argument("--json", action="store_true", help="machine-readable output")
        else:
            c.add_argument("--bw", type=argtypes.positive, default=1.0, help="link rate, Mbit/s (default 1)")
        c.set_defaults(func=fn)
