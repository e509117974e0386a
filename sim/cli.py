"""``gradctl simulate``: one gradient synchronization of PS, ring, INA, BML or the sharded PS
in ns-3.

    gradctl simulate TOPO --scheme ps|ina|ring|bml|sharded_ps [--ps H] [--workers N | --policy FILE]
                     [--values V] [--budget K] [--capacity C] [--window W] [--timeout S]
                     [--aggregators A] [--loss RATE | --loss SW:PORT=RATE ...] [--json]

The inputs are the emulator's: TOPO (spec or file, link rates in Mbit/s), the placement and
routing policy ``gradctl place``/``gradctl ina deploy`` compute (``--policy FILE``: the JSON
the agents read; else planned here with ``--budget``/``--capacity``), the agents' window and
retransmission timeout. Needs the optional ns-3 dependency (``pip install -e '.[sim]'``).
See docs/simulation.md.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from controller import argtypes
from wire.argtypes import described
from wire.ina import INA_VALUE_SIZES, INA_VALUES


def _loss_arg(specs: list[str]) -> Any:
    """``--loss`` values: one plain RATE (every link) or ``SW:PORT=RATE`` specs."""
    from controller.cli import UsageError
    from topologies.spec import SpecError, parse_loss

    if not specs:
        return 0.0
    if len(specs) == 1 and ":" not in specs[0]:
        try:
            return float(specs[0])
        except ValueError:
            raise UsageError(f"bad --loss {specs[0]!r}: a rate or SW:PORT=RATE") from None
    out: dict[tuple[str, int], float] = {}
    for spec in specs:
        try:
            where, rate = parse_loss(spec)
        except SpecError as e:
            raise UsageError(f"{e} (one plain RATE alone puts it on every link)") from None
        out[where] = rate
    return out


def _run(args: argparse.Namespace) -> int:
    from controller.cli import UsageError
    from controller.placement import PlacementError
    from topologies.spec import parse_topology

    from .core import SimError, run_ina, run_ring
    from .ns3env import Ns3Missing
    from .plan import policy_dict

    topo = parse_topology(args.topology)
    loss = _loss_arg(args.loss)
    if args.values < 1 or args.window < 1 or args.aggregators < 1 or args.timeout <= 0:
        raise UsageError("--values, --window and --aggregators must be >= 1, --timeout > 0")
    if not 0 < args.max_time <= 1e6:
        raise UsageError("--max-time must be in (0, 1e6] simulated seconds")
    hosts = topo.hosts()
    try:
        if args.policy:
            try:
                pol = json.loads(Path(args.policy).read_text())
            except (OSError, ValueError) as e:
                raise UsageError(f"cannot read policy {args.policy!r}: {e}") from None
        ps = args.ps or hosts[0]
        if ps not in hosts:
            raise UsageError(f"--ps {ps!r} is not a host of the topology")
        others = [h for h in hosts if h != ps]
        n = args.workers or len(others)
        if not 2 <= n <= len(others):
            raise UsageError(f"--workers must be in 2..{len(others)} here, got {n}")
        workers = others[:n]
        if args.scheme == "bml":
            from .bml import bcube_size, run_bml

            bn, bk = bcube_size(topo)
            res = run_bml(bn, bk, args.values, topo=topo, loss=loss, max_time=args.max_time)
        elif args.scheme == "sharded_ps":
            from .bml import run_sharded_ps

            res = run_sharded_ps(topo, [ps, *workers][:n], args.values, loss=loss,
                                 max_time=args.max_time)
        elif args.scheme == "ring":
            res = run_ring(topo, [ps, *workers][:n], args.values, loss=loss,
                           max_time=args.max_time)
        else:
            if not args.policy:
                pol = policy_dict(topo, ps, workers, args.budget, args.capacity, args.values,
                                  aggregate=args.scheme == "ina",
                                  values_per_packet=args.values_per_packet)
            res = run_ina(topo, pol, args.values, window=args.window, timeout=args.timeout,
                          aggregators=args.aggregators, loss=loss, max_time=args.max_time,
                          scheme=args.scheme)
    except (SimError, Ns3Missing, PlacementError) as e:
        raise UsageError(str(e)) from None
    if args.json:
        print(json.dumps(res.as_dict()))
    else:
        secs = "unfinished" if res.seconds is None else f"{res.seconds:.4f} s"
        print(f"{res.scheme}: {res.workers} contributors x {res.values:,} values: sync {secs}, "
              f"line-rate bound {res.bound_s:.4f} s ({res.bound_link}), "
              f"retransmissions {res.retransmissions}")
        if res.counters:
            print("  " + ", ".join(f"{k} {v}" for k, v in res.counters.items()))
    return 0


def register(sub: Any, topo_help: str) -> None:
    """Add ``gradctl simulate`` to gradctl's subcommands."""
    p = sub.add_parser("simulate", help="one gradient sync (PS, ring, INA, BML, sharded PS) in ns-3",
                       description=described(__doc__))
    p.add_argument("topology", metavar="TOPO", help=topo_help)
    p.add_argument("--scheme", choices=("ps", "ina", "ring", "bml", "sharded_ps"), default="ina",
                   help="bml: on a bcube:N,K topology, every server; sharded_ps and ring: "
                        "--workers peers starting at --ps")
    p.add_argument("--ps", help="the PS host (default: the first host; ring: the first peer)")
    p.add_argument("--workers", type=argtypes.count, help="workers N (default: every other host)")
    p.add_argument("--policy", help="routing-policy JSON (docs/ina_policy.md) instead of planning")
    p.add_argument("--values", type=argtypes.values, default=32768, help="gradient length (default 32768)")
    p.add_argument("--values-per-packet", type=int, choices=INA_VALUE_SIZES, default=INA_VALUES,
                   metavar="V", help="PS, INA: values a packet carries "
                   f"({', '.join(map(str, INA_VALUE_SIZES))}; default {INA_VALUES}; "
                   "a --policy says its own)")
    p.add_argument("--budget", type=argtypes.natural, default=2, help="INA: aggregating switches K (default 2)")
    p.add_argument("--capacity", type=argtypes.positive, default=1000.0,
                   help="INA: switch capacity for the placement, Mbit/s (default 1000)")
    p.add_argument("--window", type=argtypes.count, default=32, help="outstanding fragments (default 32)")
    p.add_argument("--timeout", type=argtypes.positive, default=1.0, help="first retransmission timeout s")
    p.add_argument("--aggregators", type=argtypes.count, default=1024, help="aggregator slots a switch")
    p.add_argument("--loss", action="append", default=[], metavar="RATE|SW:PORT=RATE",
                   help="packet loss: RATE on every link, or SW:PORT=RATE on one switch egress "
                        "port as the emulator's --loss (repeatable)")
    p.add_argument("--max-time", type=argtypes.positive, default=300.0, help="simulated seconds at most")
    p.add_argument("--json", action="store_true", help="one JSON line")
    p.set_defaults(func=_run)
