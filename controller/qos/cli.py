"""``gradctl qos``: show and set the priority queues of running switches.

    gradctl qos show TOPO --run-dir DIR [-s SWITCH] [--port P] [--json]
    gradctl qos set TOPO --run-dir DIR -s SWITCH [--port P [--priority Q]]
                    [--rate PPS] [--depth N] [--port-rate PPS] [--dscp DSCP=PRIO ...]

``show`` prints each switch's DSCP -> priority map (P4Runtime read of ``dscp_priority``)
and its egress queues: rate, depth, occupancy and the enqueued / dropped counters
(embedded target). ``set`` changes them at run time: queue rate and depth through the
runtime CLI (simple_switch_CLI's ``set_queue_rate`` / ``set_queue_depth`` on BMv2),
the port's shared line rate (embedded target), and DSCP entries over P4Runtime.
Priorities are ``standard_metadata.priority`` values (higher is served first).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from rich.table import Table

from controller import argtypes
from controller.cli import UsageError, _console, _parse_dscp, network_topology
from controller.qos import (
    Bmv2Runtime,
    EgressQueues,
    QosError,
    QueueStats,
    read_dscp_map,
    runtime_for,
    set_dscp_map,
)


def _queues(args: argparse.Namespace, switch: str) -> EgressQueues:
    rt = runtime_for(args.run_dir, switch)
    n = args.queues
    if n is None:
        if isinstance(rt, Bmv2Runtime):
            raise UsageError(f"{switch} runs BMv2: give its --priority-queues count with --queues N")
        n = len({q.priority for q in EgressQueues(rt, 1, switch).stats()}) or 1
    return EgressQueues(rt, n, switch)


def _switches(args: argparse.Namespace, topo: Any) -> list[str]:
    names = args.switch or topo.switches()
    bad = [s for s in names if s not in topo.switches()]
    if bad:
        raise UsageError(f"unknown switch(es) {', '.join(bad)} (switches of {topo.name}: "
                         f"{', '.join(topo.switches())})")
    return names


def _dscp_maps(topo: Any, args: argparse.Namespace, switches: list[str]) -> dict[str, dict[int, int] | str]:
    from controller.deploy import Deployment, addresses_from_run_dir

    addresses = addresses_from_run_dir(topo, args.run_dir)

    async def run() -> dict[str, dict[int, int] | str]:
        out: dict[str, dict[int, int] | str] = {}
        async with Deployment(topo, addresses, set_pipeline=False, timeout=args.timeout) as dep:
            for s in switches:
                try:
                    out[s] = await read_dscp_map(dep, s)
                except QosError as e:
                    out[s] = f"unreadable: {e}"
        return out

    return asyncio.run(run())


def cmd_qos_show(args: argparse.Namespace) -> int:
    """``gradctl qos show``."""
    topo = network_topology(args)
    switches = _switches(args, topo)
    data: dict[str, Any] = {}
    maps = _dscp_maps(topo, args, switches) if not args.no_dscp else {}
    for s in switches:
        eq = _queues(args, s)
        try:
            stats = eq.stats(args.port)
        except QosError as e:
            stats = []
            data[s] = {"error": str(e)}
        ports = set(topo.ports(s))
        rows = [q for q in stats if q.port in ports]
        data.setdefault(s, {}).update({"priority_queues": eq.nb_queues, "dscp_priority": maps.get(s),
                                       "queues": [vars(q) for q in rows]})
    if args.json:
        print(json.dumps(data, indent=2, default=str))
        return 0
    console = _console()
    for s, d in data.items():
        m = d.get("dscp_priority")
        mtxt = ", ".join(f"{k}->{v}" for k, v in m.items()) if isinstance(m, dict) else (m or "-")
        console.print(f"{s}: {d['priority_queues']} priority queue(s) per port; DSCP -> priority: {mtxt or 'none'}")
        if "error" in d:
            console.print(f"  {d['error']}")
            continue
        t = Table()
        for col in ("port", "priority", "rate (pkt/s)", "port rate (pkt/s)", "depth", "occupancy",
                    "enqueued", "dropped"):
            t.add_column(col, justify="right")
        for q in (QueueStats(**r) for r in d["queues"]):
            if args.port is None and not (q.enqueued or q.dropped or q.rate_pps or q.port_rate_pps):
                continue  # idle, unconfigured queues of other ports: noise
            t.add_row(str(q.port), str(q.priority), f"{q.rate_pps:g}" if q.rate_pps else "-",
                      f"{q.port_rate_pps:g}" if q.port_rate_pps else "-", str(q.depth), str(q.occupancy),
                      str(q.enqueued), str(q.dropped))
        console.print(t)
    return 0


def _rate(pps: float) -> str:
    return f"{pps:g} pkt/s" if pps > 0 else "unlimited"


def cmd_qos_set(args: argparse.Namespace) -> int:
    """``gradctl qos set``."""
    topo = network_topology(args)
    if not args.switch or len(args.switch) != 1:
        raise UsageError("qos set needs exactly one --switch")
    (switch,) = _switches(args, topo)
    if args.priority is not None and args.port is None:
        raise UsageError("--priority needs --port (as in simple_switch_CLI)")
    if args.port is not None and args.port not in topo.ports(switch):
        raise UsageError(f"{switch} has no port {args.port} (ports {', '.join(map(str, topo.ports(switch)))})")
    if args.rate is None and args.depth is None and args.port_rate is None and not args.dscp:
        raise UsageError("nothing to set: give --rate, --depth, --port-rate or --dscp")
    done = []
    if args.rate is not None or args.depth is not None or args.port_rate is not None:
        eq = _queues(args, switch)
        where = f"port {args.port}" if args.port is not None else "every port"
        if args.priority is not None:
            where += f", priority {args.priority}"
        if args.rate is not None:
            eq.set_rate(args.rate, args.port, args.priority)
            done.append(f"queue rate {_rate(args.rate)} ({where})")
        if args.depth is not None:
            eq.set_depth(args.depth, args.port, args.priority)
            done.append(f"queue depth {args.depth} ({where})")
        if args.port_rate is not None:
            if args.priority is not None:
                raise UsageError("--port-rate applies to a whole port: drop --priority")
            eq.set_port_rate(args.port_rate, args.port)
            done.append(f"port rate {_rate(args.port_rate)} "
                        f"({'port ' + str(args.port) if args.port is not None else 'every port'})")
    if args.dscp:
        from controller.deploy import Deployment, addresses_from_run_dir

        rules = dict(_parse_dscp(s) for s in args.dscp)
        addresses = addresses_from_run_dir(topo, args.run_dir)

        async def run() -> int:
            async with Deployment(topo, addresses, set_pipeline=False, timeout=args.timeout) as dep:
                return await set_dscp_map(dep, switch, rules)

        n = asyncio.run(run())
        done.append(f"{n} DSCP entr{'y' if n == 1 else 'ies'} ({', '.join(f'{d}->{p}' for d, p in rules.items())})")
    print(f"{switch}: " + "; ".join(done))
    return 0


def register(sub: Any, topo_help: str) -> None:
    """Add ``gradctl qos`` to gradctl's subcommands."""
    qos = sub.add_parser("qos", help="priority queues: DSCP map, queue rates and depths, counters",
                         description="Show and set the priority queues of running switches: DSCP -> "
                                     "priority map, queue rate and depth, enqueued/dropped counters.")
    qsub = qos.add_subparsers(dest="qos_command", metavar="ACTION", required=True)

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("topo", metavar="TOPO", nargs="?",
                        help=topo_help + "; may be left out with the --run-dir of 'gradctl net up', "
                                         "whose topology is used")
        sp.add_argument("--run-dir", required=True, metavar="DIR",
                        help="run directory of a running network (holds <switch>.grpc and <switch>.cli)")
        sp.add_argument("-s", "--switch", action="append", metavar="SWITCH", help="switch (repeatable for show)")
        sp.add_argument("--port", type=argtypes.natural, default=None, metavar="P", help="egress port")
        sp.add_argument("--queues", type=argtypes.integer(1, 8), default=None, metavar="N",
                        help="priority queues per port (default: asked from the embedded target)")
        sp.add_argument("--timeout", type=argtypes.positive, default=30.0, metavar="S", help="P4Runtime timeout")

    show = qsub.add_parser("show", help="DSCP map, queue settings and counters",
                           description="Show each switch's DSCP -> priority map and its egress queues "
                                       "(rate, depth, occupancy, enqueued, dropped).")
    common(show)
    show.add_argument("--no-dscp", action="store_true", help="skip the P4Runtime read of the DSCP map")
    show.add_argument("--json", action="store_true", help="machine-readable output")
    show.set_defaults(func=cmd_qos_show)

    st = qsub.add_parser("set", help="set queue rate/depth, port rate, DSCP entries",
                         description="Change one switch's queues at run time (like simple_switch_CLI's "
                                     "set_queue_rate / set_queue_depth) and its DSCP -> priority entries.")
    common(st)
    st.add_argument("--priority", type=argtypes.integer(0, 7), default=None, metavar="Q",
                    help="the queue serving standard_metadata.priority Q (needs --port)")
    st.add_argument("--rate", type=argtypes.nonnegative, default=None, metavar="PPS", help="queue rate, packets/s (0: unlimited)")
    st.add_argument("--depth", type=argtypes.count, default=None, metavar="N", help="queue depth, packets")
    st.add_argument("--port-rate", type=argtypes.nonnegative, default=None, metavar="PPS",
                    help="line rate shared by the port's queues in strict priority (embedded target; 0: unlimited)")
    st.add_argument("--dscp", action="append", default=[], metavar="DSCP=PRIO",
                    help="DSCP -> priority entry (repeatable; replaces an existing entry)")
    st.set_defaults(func=cmd_qos_set)
