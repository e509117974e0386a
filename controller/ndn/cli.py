"""``gradctl ndn``: the NDN parameter server's data plane on a running network.

* ``gradctl ndn deploy TOPO --run-dir DIR``: load ``ndn.p4`` on every switch, install the
  FIB (a prefix ``/<host>`` per host), the PIT lifetime and port-subset groups, the
  subscription mode (``--subscriptions switch``: the data plane keeps them, the default;
  ``controller``: insert Interests are punted) and loss rates; with ``--manage S`` then run
  the persistent-PIT manager for S seconds (0: until Ctrl-C), answering the switches'
  packet-ins; prints the commands that start the agents.
* ``gradctl ndn show TOPO --run-dir DIR``: every switch's controller-written persistent
  PIT (name, group, subscriber ports and the hosts behind them), drop and event counters
  (``subscribed``: subscriptions the data plane took), read as a P4Runtime backup so it
  works while the manager runs. Data-plane subscriptions live in registers, which BMv2's
  P4Runtime cannot read: their counters show them.

``--json`` prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from typing import Any

from rich.table import Table

from controller import argtypes
from controller.cli import (
    UsageError,
    _addresses,
    _console,
    held_loss,
    held_state,
    network_args,
    network_topology,
    save_held_loss,
)
from controller.deploy import DeployError, parse_loss


def _where(sp: argparse.ArgumentParser, topo_help: str) -> None:
    network_args(sp, topo_help)
    sp.add_argument("--json", action="store_true", help="machine-readable output")


def register(sub: Any, topo_help: str) -> None:
    """Add ``gradctl ndn deploy|show`` to gradctl's subcommands."""
    ndn = sub.add_parser("ndn", help="NDN parameter server: ndn.p4, FIB, persistent PIT",
                         description="Deploy ndn.p4 and run its persistent-PIT manager, or show "
                                     "the persistent PIT and counters of running switches.")
    nsub = ndn.add_subparsers(dest="ndn_command", metavar="ACTION", required=True)
    dep = nsub.add_parser("deploy", help="load ndn.p4 with its FIB everywhere (fresh pipelines)",
                          description="Load ndn.p4 on every switch, install the FIB, the PIT "
                                      "lifetime and port-subset multicast groups, loss rates and the "
                                      "subscription admission of the job (--ps, --gpus); "
                                      "optionally run the persistent-PIT manager.")
    _where(dep, topo_help)
    dep.add_argument("--ps", default="h1", help="the parameter server host (the job: admission, printed commands)")
    dep.add_argument("--gpus", default="all", help="GPU hosts, comma-separated, or all (default)")
    dep.add_argument("--loss", action="append", default=[], metavar="SWITCH:PORT=RATE",
                     help="emulated loss on a switch port (repeatable)")
    dep.add_argument("--pit-lifetime", type=argtypes.positive, default=4.0, metavar="S",
                     help="transient PIT entry lifetime (default 4 s)")
    dep.add_argument("--manage", type=argtypes.nonnegative, metavar="S",
                     help="then run the persistent-PIT manager for S seconds (0: until Ctrl-C); "
                          "implies --subscriptions controller")
    dep.add_argument("--subscriptions", choices=["switch", "controller"], default=None,
                     help="who keeps the persistent PIT: the switches' data plane (default) or the "
                          "controller (insert Interests punted; the default with --manage)")
    dep.add_argument("--open", action="store_true",
                     help="let any host subscribe under any prefix (hashed slots); by default only "
                          "--gpus may subscribe under /<ps>/train, in a slot of its own")
    dep.add_argument("--subscription-lifetime", type=argtypes.positive, default=6.0, metavar="S",
                     help="data-plane subscriptions expire S seconds after their last refresh (default 6)")
    dep.add_argument("--persistent", action="store_true",
                     help="data-plane subscriptions live until unsubscribed (start the GPUs with "
                          "--refresh 0; a dead GPU's port: gradctl ndn unsubscribe)")
    dep.set_defaults(func=cmd_ndn_deploy)
    uns = nsub.add_parser("unsubscribe", help="unsubscribe a GPU on its behalf (it died subscribed)",
                          description="Send GPU's unsubscribe Interest through its leaf switch's "
                                      "pipeline as if from its port: its port stops getting "
                                      "updates, and switches above drop the branch once empty.")
    network_args(uns, topo_help)
    uns.add_argument("--ps", default="h1", help="the parameter server host (default h1)")
    uns.add_argument("--gpu", required=True, help="the GPU host to unsubscribe")
    uns.set_defaults(func=cmd_ndn_unsubscribe)
    show = nsub.add_parser("show", help="persistent PIT, subscribers and counters of every switch",
                           description="Read every switch's persistent PIT and NDN counters "
                                       "(as a P4Runtime backup), leaving the pipeline as it is.")
    _where(show, topo_help)
    show.add_argument("--switch", action="append", metavar="SWITCH", help="only these switches")
    show.set_defaults(func=cmd_ndn_show)


def _gpus(topo: Any, ps: str, spec: str) -> list[str]:
    hosts = topo.hosts()
    if ps not in hosts:
        raise UsageError(f"unknown PS host {ps!r} (hosts: {', '.join(hosts[:8])}...)")
    if spec == "all":
        return [h for h in hosts if h != ps]
    gpus = [g for g in spec.split(",") if g]
    bad = [g for g in gpus if g not in hosts or g == ps]
    if bad or not gpus:
        raise UsageError(f"--gpus: {', '.join(bad) or 'none given'} is not a GPU host")
    return gpus


def agent_commands(topo: Any, ps: str, gpus: list[str], persistent: bool = False) -> dict[str, str]:
    """The command that starts each agent in its host (NDN transport, sync, defaults;
    ``persistent``: the GPUs do not refresh their subscriptions)."""
    py = shlex.quote(sys.executable)
    out = {ps: f"{py} -m hosts.ndn.ps --me {ps} --gpus {','.join(gpus)} --iface {topo.iface(ps)['name']}"}
    for i, g in enumerate(gpus):
        out[g] = (f"{py} -m hosts.ndn.gpu --me {g} --gpu-index {i} --ps {ps} "
                  f"--iface {topo.iface(g)['name']}" + (" --refresh 0" if persistent else ""))
    return out


def cmd_ndn_deploy(args: argparse.Namespace) -> int:
    """``gradctl ndn deploy``."""
    from controller.ndn import PERSISTENT, NameBoundsError, NdnDeployment, NdnJob

    topo = network_topology(args)  # a held network's own (--bw), from --run-dir
    gpus = _gpus(topo, args.ps, args.gpus)
    # a held network keeps its link emulation (net up --loss, earlier deploys); --loss adds
    loss = {**held_loss(args.run_dir), **dict(parse_loss(s) for s in args.loss)}
    if not 0 < args.pit_lifetime < 3600:
        raise UsageError(f"--pit-lifetime must be in (0, 3600) s, got {args.pit_lifetime}")
    if not 0 < args.subscription_lifetime < 3600:
        raise UsageError(f"--subscription-lifetime must be in (0, 3600) s, got {args.subscription_lifetime}")
    addresses = _addresses(args, topo)
    try:
        mode = args.subscriptions or ("controller" if args.manage is not None else "switch")
        dep = NdnDeployment(topo, addresses, loss=loss, pit_lifetime=args.pit_lifetime, subscriptions=mode,
                            subscription_lifetime=PERSISTENT if args.persistent else args.subscription_lifetime,
                            jobs=None if args.open else [NdnJob(args.ps, tuple(gpus))])
        report = dep.deploy(timeout=args.timeout)
    except NameBoundsError as e:
        raise UsageError(f"a host name does not fit ndn.p4's name bounds: {e}") from None
    if held_state(args.run_dir) is not None:
        save_held_loss(args.run_dir, loss)
    commands = agent_commands(topo, args.ps, gpus, persistent=args.persistent)
    if args.json:
        print(json.dumps({"entries": report.updates, "fib": dep.routes, "commands": commands,
                          "managing": args.manage is not None}, indent=2))
    else:
        con = _console()
        con.print(f"ndn.p4 on {len(report.updates)} switches: {report}", markup=False)
        con.print("start the agents (in their hosts):", markup=False)
        for h, c in commands.items():
            con.print(f"  {h}: {c}", markup=False, soft_wrap=True)
    if args.manage is None:
        return 0
    state = None
    if args.run_dir:
        from pathlib import Path

        state = Path(args.run_dir) / "ndn-persistent-pit.json"
    manager = dep.start_manager(state)
    try:
        end = time.monotonic() + args.manage if args.manage > 0 else float("inf")
        while time.monotonic() < end:
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        dep.stop_manager()
    if not args.json:
        _console().print(f"persistent-PIT manager: {manager.handled} insert Interests handled, "
                         f"{len(manager.errors)} errors", markup=False)
    return 1 if manager.errors else 0


def cmd_ndn_unsubscribe(args: argparse.Namespace) -> int:
    """``gradctl ndn unsubscribe``."""
    from controller.ndn import NdnDeployment

    topo = network_topology(args)
    gpus = _gpus(topo, args.ps, args.gpu)
    try:
        leaf = NdnDeployment(topo, _addresses(args, topo)).unsubscribe(gpus[0], args.ps)
    except DeployError as e:
        raise UsageError(str(e)) from None
    _console().print(f"{gpus[0]} unsubscribed from /{args.ps}/train at {leaf}", markup=False)
    return 0


def cmd_ndn_show(args: argparse.Namespace) -> int:
    """``gradctl ndn show``."""
    from controller.ndn import read_switch_state
    from targets.p4rt_client import P4RuntimeError

    topo = network_topology(args)
    if args.switch:  # the names first: a typo is not a missing network
        try:
            argtypes.check_switches(topo, "--switch", args.switch)
        except argtypes.OptionError as e:
            raise UsageError(str(e)) from None
    addresses = _addresses(args, topo)
    if args.switch:
        bad = [s for s in args.switch if s not in addresses]
        if bad:
            raise UsageError(f"unknown switch(es) {', '.join(bad)}")
        addresses = {s: addresses[s] for s in args.switch}
    try:
        state = read_switch_state(topo, addresses)
    except P4RuntimeError as e:
        raise DeployError(f"cannot read the switches (is ndn.p4 deployed?): {e}") from None
    for s, st in state.items():
        for e in st["persistent_pit"]:
            e["subscribers"] = {str(p): topo.peer(s, p)[0] for p in e["ports"] if p in topo.ports(s)}
    if args.json:
        print(json.dumps(state, indent=2))
        return 0
    con = _console()
    t = Table(title=f"persistent PIT ({topo.name})")
    for c in ("switch", "name", "group", "subscriber ports (-> neighbour)"):
        t.add_column(c)
    for s, st in state.items():
        for e in st["persistent_pit"]:
            t.add_row(s, e["name"], str(e["group"]),
                      ", ".join(f"{p}->{n}" for p, n in e["subscribers"].items()))
    con.print(t)
    c = Table(title="NDN counters (packets)")
    for col in ("switch", "subscriptions", "events", "drops", "emulated loss"):
        c.add_column(col)
    for s, st in state.items():
        a = st["admission"]
        c.add_row(s, f"guarded: {a['jobs']} jobs, {a['members']} members" if a["guarded"] else "open",
                  " ".join(f"{k}={v}" for k, v in st["events"].items()) or "-",
                  " ".join(f"{k}={v}" for k, v in st["drops"].items()) or "-",
                  " ".join(f"port{k}={v}" for k, v in st["link_drops"].items()) or "-")
    con.print(c)
    return 0
