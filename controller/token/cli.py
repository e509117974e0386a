"""``gradctl token``: the token-passing LAN (token, docs/token.md).

    gradctl token topo --nodes N [--json]             # hosts, NICs, LAN switch, ports
    gradctl token deploy [--nodes N] --run-dir DIR    # nic.p4 + lan.p4 on a running LAN
    gradctl token counters [--nodes N] --run-dir DIR [--json]

``deploy`` loads the programs (fresh NIC registers), the NICs' multicast group and the
LAN switch's flood groups and MAC table, and prints the command that starts a node in
each host. ``python -m experiments --mode token`` does all of it end to end.

A LAN kept by ``gradctl net up`` (``token topo --json`` writes its topology file) names
itself: with its ``--run-dir``, ``--nodes`` may be left out, the held links' rate is
used and its link emulation (``net up --loss``, ``DIR/loss.json``) is installed again
with the programs.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.table import Table

from controller import argtypes
from controller.cli import UsageError, held_loss, held_state, network_topology
from controller.output import TableConsole
from controller.token import MAX_NODES, TokenDeployment, token_lan
from topologies.base import TopologyError

console = TableConsole()
LAN_BW = 1000.0  # Mbit/s, when --bw is not given


def _topo(args: argparse.Namespace) -> Any:
    run_dir = getattr(args, "run_dir", None)
    if held_state(run_dir) is not None:  # a LAN kept by gradctl net up: its own topology
        topo = network_topology(argparse.Namespace(run_dir=run_dir, topo=None))
        nics = topo.switches("nic")
        if not nics or len(topo.switches("lan")) != 1:
            raise UsageError(f"{run_dir} holds {topo.name}, not a token LAN (start one with "
                             "'gradctl token topo --nodes N --json > lan.json; "
                             "gradctl net up lan.json --no-deploy')")
        if args.nodes is not None and args.nodes != len(nics):
            raise UsageError(f"--nodes {args.nodes}: the LAN held in {run_dir} has "
                             f"{len(nics)} nodes")
        if args.bw is not None:
            raise UsageError(f"--bw: the LAN held in {run_dir} keeps the rate it was started with")
        return topo
    if args.nodes is None:
        raise UsageError("give --nodes N (only the run directory of 'gradctl net up' names its LAN)")
    try:
        return token_lan(args.nodes, bw=args.bw or LAN_BW)
    except TopologyError as e:
        raise UsageError(f"--nodes: {e.reason}") from None


def _deployment(args: argparse.Namespace) -> TokenDeployment:
    from controller.deploy import addresses_from_run_dir

    topo = _topo(args)
    # a held LAN keeps its link emulation across deploys
    return TokenDeployment(topo, addresses_from_run_dir(topo, args.run_dir),
                           loss=held_loss(args.run_dir))


def cmd_token_topo(args: argparse.Namespace) -> int:
    """``gradctl token topo``."""
    if args.json:
        print(json.dumps(_topo(args).to_dict(), indent=1))
        return 0
    console.print(_topo(args).summary(), highlight=False)
    return 0


def cmd_token_deploy(args: argparse.Namespace) -> int:
    """``gradctl token deploy``."""
    dep = _deployment(args)
    report = dep.deploy()
    console.print(f"nic.p4 on {', '.join(dep.nics)}; lan.p4 on {dep.lan}: {report}")
    topo = dep.topology
    for i, h in enumerate(topo.hosts()):
        role = f"--initiator --expect {len(topo.hosts())} " if i == 0 else ""
        console.print(f"  {h}: python -m hosts.token.node --iface {topo.iface(h)['name']} {role}"
                      "--epochs 2 (start the initiator last)", highlight=False)
    return 0


def cmd_token_counters(args: argparse.Namespace) -> int:
    """``gradctl token counters``."""
    c = _deployment(args).read_counters()
    if args.json:
        print(json.dumps({"nics": c.nics, "lan_frames": c.lan_frames}))
        return 0
    t = Table(title="token NIC counters")
    t.add_column("NIC")
    for col in ("added", "read", "tokens", "non_member", "closed", "duplicate", "stale", "lost_sent"):
        t.add_column(col, justify="right")
    for nic, v in c.nics.items():
        t.add_row(nic, *(str(x) for x in (
            v["acc_events"]["added"], v["acc_events"]["read"], v["member_events"]["token"],
            v["member_drops"]["non_member"], v["member_drops"]["formation_closed"],
            v["acc_drops"]["duplicate"], v["acc_drops"]["stale"], v["member_events"]["lost_sent"])))
    console.print(t)
    console.print("LAN switch frames per port: " + ", ".join(f"{p}: {n}" for p, n in c.lan_frames.items()))
    return 0


def register(sub: Any, topo_help: str) -> None:
    """Add ``gradctl token ...`` to gradctl's subcommands."""
    del topo_help  # the LAN is always token_lan(--nodes)
    p = sub.add_parser("token", help="token-passing broadcast LAN",
                       description=__doc__.split("\n\n")[0])
    tsub = p.add_subparsers(dest="token_cmd", required=True)

    def nodes(q: argparse.ArgumentParser, required: bool = False) -> None:
        q.add_argument("--nodes", type=argtypes.integer(1, MAX_NODES), required=required,
                       help=f"training nodes (1..{MAX_NODES})"
                            + ("" if required else "; may be left out with the --run-dir of "
                                                   "'gradctl net up', whose LAN is used"))
        q.add_argument("--bw", type=argtypes.positive, default=None,
                       help=f"link capacity in Mbit/s (default {LAN_BW:g})")

    t = tsub.add_parser("topo", help="show the LAN: hosts, NICs, LAN switch")
    nodes(t, required=True)
    t.add_argument("--json", action="store_true",
                   help="print the topology file (for 'gradctl net up FILE --no-deploy')")
    t.set_defaults(func=cmd_token_topo)
    d = tsub.add_parser("deploy", help="load nic.p4 and lan.p4 on a running LAN")
    nodes(d)
    d.add_argument("--run-dir", required=True, help="run directory of the running network")
    d.set_defaults(func=cmd_token_deploy)
    c = tsub.add_parser("counters", help="read the NICs' and the LAN switch's counters")
    nodes(c)
    c.add_argument("--run-dir", required=True, help="run directory of the running network")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_token_counters)
