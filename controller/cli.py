"""``gradctl``: gradnet's control-plane command line.

    gradctl topo show TOPO                    the topology's nodes and links
    gradctl routes TOPO [--switch S ...]      route tables and ECMP groups
    gradctl deploy TOPO --run-dir DIR         load forward.p4 and install routes
    gradctl counters [TOPO] --run-dir DIR     drop counters of running switches
    gradctl place TOPO --ps H --budget K --capacity C [--method M|all] [--json] [--plot F]
                                              switch placement for in-network aggregation
    gradctl ina deploy TOPO --run-dir DIR --ps H --budget K --capacity C --values N
                                              deploy an aggregation job, print agent commands
    gradctl ina counters TOPO --run-dir DIR --policy FILE
                                              INA event counters of the job's switches

This module holds the commands above and the helpers every group shares (``UsageError``,
``network_args``, ``network_topology``; a held network's state is :mod:`controller.held`).
Each other command group lives in its own module beside its controller twin
(``controller/<technique>/cli.py`` next to ``controller/<technique>/deployment.py``, and
``controller/net_cli.py``, ``sim/cli.py``, ``experiments/train.py``), each with
``register(sub, topo_help)``, listed in the one registry (``controller/registry.py``).

TOPO (parsed by :func:`topologies.spec.parse_topology`) is a builder spec (``fat-tree:4``, ``leaf-spine:2,4,2``, ``bcube:4,2``, ``star:4``,
``linear:3`` or ``linear:3,2``, the k-rail ``rail-leaf-spine:2,2,3,3`` or
``rail-fat-tree:2,4``; keyword arguments too: ``fat-tree:4,bw=10``) or a topology file
(JSON/YAML, see ``topologies/README.md``). Bad input ends with a one-line message
and exit status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from rich import box
from rich.console import Console
from rich.table import Table

from controller import argtypes, registry
from controller.held import held_loss, held_state, save_held_loss
from controller.output import TableConsole
from controller.p4runtime import DeployError
from controller.routing import RoutingError, SwitchRoutes, compute_routes
from topologies import Topology, TopologyError
from topologies.base import HOST_KIND
from topologies.spec import SPEC_EXAMPLES, parse_loss, parse_topology

PROG = "gradctl"


class UsageError(Exception):
    """Bad input from the command line: reported as one line, exit status 2."""


# ----------------------------------------------------------------------------- output


def _console(file: Any = None) -> Console:
    # The terminal's width ($COLUMNS; 80 piped): tables too wide fold into key/value rows.
    return TableConsole(file)


def topology_header(topo: Topology) -> str:
    """One line: name and size of ``topo``."""
    return (f"topology {topo.name}: {len(topo.hosts())} hosts, {len(topo.switches())} "
            f"switches, {len(list(topo.links()))} links")


def topology_tables(topo: Topology) -> list[Table]:
    """Rich tables of the nodes and the links of ``topo`` (what ``topo show`` prints)."""
    nodes = Table(title="nodes", box=box.SIMPLE_HEAD, title_justify="left")
    for col, just in (("node", "left"), ("kind", "left"), ("role", "left"), ("id", "right"),
                      ("ports / addresses", "left")):
        nodes.add_column(col, justify=just)
    for name, data in topo.graph.nodes(data=True):
        if data["kind"] == HOST_KIND:
            addrs = ", ".join(f"eth{n}={i['ip']}/{i['prefix']}@{i['switch']}"
                              for n, i in enumerate(data["ifaces"]) if i)
            nodes.add_row(name, "host", data["role"], str(data["index"]), addrs)
        else:
            nodes.add_row(name, "switch", data["role"], str(data["device_id"]),
                          f"{len(topo.ports(name))} ports")
    links = Table(title="links", box=box.SIMPLE_HEAD, title_justify="left")
    links.add_column("a")
    links.add_column("port", justify="right")
    links.add_column("b")
    links.add_column("port", justify="right")
    links.add_column("Mbit/s", justify="right")
    for ln in topo.links():
        links.add_row(ln.a, str(ln.port_a), ln.b, str(ln.port_b), f"{ln.capacity:g}")
    return [nodes, links]


def routes_table(sr: SwitchRoutes) -> Table:
    """A rich table of one switch's routes (ECMP routes list the group's ports)."""
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False)  # 80 columns for a fat-tree's rows
    t.add_column("destination")
    t.add_column("NIC")
    t.add_column("hops", justify="right")
    t.add_column("action")
    t.add_column("next hop(s)")
    for r in sr.routes:
        if r.group_id is not None:
            g = sr.group(r.group_id)
            action = f"ecmp group {g.group_id} ({g.size})"
            hops = ", ".join(f"{m.port}->{m.peer}" for m in g.members)
        else:
            assert r.next_hop is not None
            action = "direct" if r.direct else "next hop"
            hops = f"{r.next_hop.port}->{r.next_hop.peer} ({r.next_hop.dmac})"
        t.add_row(r.prefix, f"{r.host}-eth{r.nic}", str(r.distance), action, hops)
    if sr.unreachable:
        t.caption = f"no route (no switch path): {', '.join(sr.unreachable)}"
        t.caption_justify = "left"
    return t


# ----------------------------------------------------------------------------- commands


def cmd_topo_show(args: argparse.Namespace) -> int:
    """``gradctl topo show``."""
    topo = parse_topology(args.topo)
    if args.json:
        print(json.dumps(topo.to_dict(), indent=2))
        return 0
    console = _console()
    console.print(topology_header(topo))
    for table in topology_tables(topo):
        console.print(table)
    return 0


def _routes(topo: Topology, switches: Sequence[str] | None) -> dict[str, SwitchRoutes]:
    try:
        return compute_routes(topo, switches or None)
    except RoutingError as e:
        raise UsageError(str(e)) from None


def cmd_routes(args: argparse.Namespace) -> int:
    """``gradctl routes``."""
    topo = parse_topology(args.topo)
    routes = _routes(topo, args.switch)
    if args.json:
        print(json.dumps({s: dataclasses.asdict(r) for s, r in routes.items()}, indent=2))
        return 0
    console = _console()
    for sr in routes.values():
        console.print(f"{sr.switch} (device {sr.device_id}): {len(sr.routes)} routes, "
                      f"{len(sr.groups)} ECMP groups")
        console.print(routes_table(sr))
    return 0


def network_topology(args: argparse.Namespace) -> Topology:
    """The topology of a command that talks to a running network.

    With ``--run-dir`` of a network held by ``gradctl net up`` it is the held network's
    own (with its ``--bw``), read from ``net.json``: TOPO may be left out, and a TOPO
    naming another topology is an error rather than a silent re-plan. Otherwise TOPO."""
    state = held_state(getattr(args, "run_dir", None))
    given = getattr(args, "topo", None)
    if state is None:
        if not given:
            raise UsageError("give TOPO (only a run directory of 'gradctl net up' names its own)")
        return parse_topology(given)
    try:
        held = Topology.from_dict(state["topology"], source=state.get("spec"))
    except (TopologyError, KeyError, TypeError) as e:
        raise UsageError(f"{args.run_dir}/net.json: bad topology ({e})") from None
    if given and given != state.get("spec") and parse_topology(given).name != held.name:
        raise UsageError(f"TOPO {given!r} is not the network held in {args.run_dir} "
                         f"({state.get('spec')}); leave TOPO out or give that one")
    return held


def _addresses(args: argparse.Namespace, topo: Topology) -> dict[str, str]:
    from controller.deploy import addresses_from_run_dir, load_addresses

    if args.run_dir:
        return addresses_from_run_dir(topo, args.run_dir)
    return load_addresses(args.addresses)


def cmd_deploy(args: argparse.Namespace) -> int:
    """``gradctl deploy``."""
    from controller.deploy import Program, deploy

    topo = network_topology(args)
    # a held network keeps its link emulation across deploys; --loss changes it
    loss = {**held_loss(args.run_dir), **dict(parse_loss(s) for s in args.loss)}
    priorities = dict(_parse_dscp(s) for s in args.dscp)
    addresses = _addresses(args, topo)
    program = Program.load(args.program, args.p4info)
    routes = _routes(topo, None)
    report = deploy(topo, addresses, program, routes=routes, loss=loss, priorities=priorities,
                    timeout=args.timeout)
    if held_state(args.run_dir) is not None:
        save_held_loss(args.run_dir, loss)
    console = _console()
    console.print(f"deployed {program.name} to {topo.name}: {report}")
    t = Table(box=box.SIMPLE_HEAD)
    t.add_column("switch")
    t.add_column("address")
    t.add_column("entries", justify="right")
    for s, n in report.updates.items():
        t.add_row(s, addresses[s], str(n))
    console.print(t)
    return 0


def cmd_counters(args: argparse.Namespace) -> int:
    """``gradctl counters``."""
    from controller.deploy import Program, read_counters

    topo = network_topology(args)
    addresses = _addresses(args, topo)
    program = Program.load(args.program, args.p4info)
    data = read_counters(topo, addresses, program, timeout=args.timeout)
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    t = Table(box=box.SIMPLE_HEAD)
    t.add_column("switch")
    t.add_column("emulated loss (port: packets)")
    t.add_column("ingress drops (reason: packets)")
    for s, c in data.items():
        links = ", ".join(f"{p}: {n}" for p, n in c["link_drops"].items() if n) or "-"
        ingress = ", ".join(f"{r}: {n}" for r, n in c["ingress_drops"].items()) or "-"
        t.add_row(s, links, ingress)
    console = _console()
    console.print(f"drop counters of {topo.name}")
    console.print(t)
    return 0


def _parse_dscp(spec: str) -> tuple[int, int]:
    try:
        dscp, prio = (int(x) for x in spec.split("=", 1))
    except ValueError:
        raise UsageError(f"bad --dscp {spec!r}: expected DSCP=PRIORITY, e.g. 46=7") from None
    if not (0 <= dscp <= 63 and 0 <= prio <= 7):
        raise UsageError(f"bad --dscp {spec!r}: DSCP must be in 0..63, PRIORITY in 0..7")
    return dscp, prio


# ----------------------------------------------------------------------------- parser


class CommandParser(argtypes.Parser):
    """gradctl's parsers (every group's too: subparsers take their parent's class). A bad
    argument is one line, ``gradctl: error: --budget: must be >= 0 (got -3) (gradctl place
    --help)``, exit status 2, like every other gradctl error."""

    error_prog = PROG

    def error(self, message: str) -> NoReturn:  # noqa: D102 (argparse's)
        super().error(message.removeprefix("argument "))


def network_args(sp: argparse.ArgumentParser, topo_help: str) -> None:
    """TOPO, where its switches are (``--run-dir`` or ``--addresses``) and ``--timeout``:
    the arguments of every command that talks to a running network."""
    sp.add_argument("topo", metavar="TOPO", nargs="?",
                    help=topo_help + "; may be left out with the --run-dir of 'gradctl net up', "
                                     "whose topology (and --bw, --loss) is used")
    where = sp.add_mutually_exclusive_group(required=True)
    where.add_argument("--run-dir", metavar="DIR",
                       help="run directory of a running network (holds <switch>.grpc)")
    where.add_argument("--addresses", metavar="FILE",
                       help="JSON/YAML mapping switch -> P4Runtime address "
                            "(unix:/path or host:port)")
    sp.add_argument("--timeout", type=argtypes.positive, default=30.0, metavar="S",
                    help="seconds to wait for each switch (default 30)")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for documentation and tests)."""
    topo_help = (f"topology: builder spec ({SPEC_EXAMPLES}; keyword args like bw=10 too) "
                 "or a topology file (JSON/YAML)")
    p = CommandParser(
        prog=PROG,
        description="gradnet control plane: topologies, routes, P4Runtime deployment.",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="log P4Runtime activity")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    topo = sub.add_parser("topo", help="inspect topologies",
                          description="Inspect a topology.")
    topo_sub = topo.add_subparsers(dest="topo_command", metavar="ACTION", required=True)
    show = topo_sub.add_parser("show", help="print nodes, addresses and links",
                               description="Print a topology's nodes, addresses and links.")
    show.add_argument("topo", metavar="TOPO", help=topo_help)
    show.add_argument("--json", action="store_true", help="print the topology file form")
    show.set_defaults(func=cmd_topo_show)

    routes = sub.add_parser(
        "routes", help="print shortest-path route tables",
        description="Print each switch's /32 routes to every host NIC and its ECMP groups.")
    routes.add_argument("topo", metavar="TOPO", help=topo_help)
    routes.add_argument("-s", "--switch", action="append", metavar="SWITCH",
                        help="only this switch (repeatable)")
    routes.add_argument("--json", action="store_true", help="machine-readable output")
    routes.set_defaults(func=cmd_routes)

    def target_args(sp: argparse.ArgumentParser) -> None:
        network_args(sp, topo_help)
        from controller.deploy import DEFAULT_PROGRAM

        rel = os.path.relpath(DEFAULT_PROGRAM)
        sp.add_argument("--program", metavar="JSON", default=str(DEFAULT_PROGRAM),
                        help=f"BMv2 JSON of the program (default {rel})")
        sp.add_argument("--p4info", metavar="FILE",
                        help="P4Info text (default: <program stem>.p4info.txt beside it)")

    dep = sub.add_parser(
        "deploy", help="load the program and install routes on running switches",
        description="Load the forwarding program on every switch of a running network "
                    "(a fresh pipeline: existing entries are dropped) and install routes, "
                    "ECMP groups, port MACs and the given loss rates and DSCP priorities.")
    target_args(dep)
    dep.add_argument("--loss", action="append", default=[], metavar="SW:PORT=RATE",
                     help="emulated loss probability of a switch egress port, e.g. "
                          "s1:2=0.05 (repeatable)")
    dep.add_argument("--dscp", action="append", default=[], metavar="DSCP=PRIO",
                     help="egress queue priority (0-7) of a DSCP value, e.g. 46=7 (repeatable)")
    dep.set_defaults(func=cmd_deploy)

    cnt = sub.add_parser(
        "counters", help="read drop counters of running switches",
        description="Read the emulated-loss and ingress drop counters (the pipeline is "
                    "left as it is).")
    target_args(cnt)
    cnt.add_argument("--json", action="store_true", help="machine-readable output")
    cnt.set_defaults(func=cmd_counters)

    # One command group per technique, each in its own module beside its controller twin
    # (``gradctl ndn ...`` lives in controller/ndn/cli.py next to controller/ndn/deployment.py).
    import importlib
    import importlib.util

    for module in TECHNIQUE_CLIS:
        if importlib.util.find_spec(module) is not None:
            importlib.import_module(module).register(sub, topo_help)
    return p


# Command groups by module name (each has register(sub, topo_help)), from the one
# registry: ``experiments.train`` is ``gradctl train``, named there as a string so the
# control plane never imports it.
TECHNIQUE_CLIS = registry.TECHNIQUE_CLIS


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gradctl`` console script."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # --help (0) or a bad argument (2, its one line printed)
        return e.code if isinstance(e.code, int) else 2
    if not args.verbose:
        logging.getLogger("finsy").setLevel(logging.ERROR)
    else:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        return args.func(args)
    except (UsageError, DeployError, RoutingError, TopologyError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    # Run the importable module, not this ``__main__`` copy: the command groups in other
    # modules raise ``controller.cli.UsageError``, which must be the class caught here.
    from controller.cli import main as _main

    sys.exit(_main())
