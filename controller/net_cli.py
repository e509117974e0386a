"""``gradctl net``: start, list, enter and stop long-lived emulated networks.

    gradctl net up TOPO [--target T] [--bw MBIT] [--loss SW:PORT=RATE ...] [--cli]
    gradctl net ls
    gradctl net exec DIR HOST -- CMD ...
    gradctl net down DIR

The machinery is in ``controller/netctl.py``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from rich import box
from rich.table import Table

from controller import argtypes
from controller.cli import UsageError, _console
from controller.netctl import NetError, NetState, net_down, net_exec, net_ls, net_up


def cmd_net_up(args: argparse.Namespace) -> int:
    """``gradctl net up``."""
    if args.cli:
        # foreground: the network lives as long as the Mininet CLI
        from controller.netctl import _holder_main, check_up

        check_up(args.topo, args.loss)  # before anything starts
        run_dir = tempfile.mkdtemp(prefix="gradnet-", dir="/tmp")
        print(f"run directory: {run_dir}", flush=True)
        argv = ["--run-dir", run_dir, "--spec", args.topo, "--cli"]
        argv += ["--target", args.target] if args.target else []
        argv += ["--bw", str(args.bw)] if args.bw is not None else []
        for s in args.loss:
            argv += ["--loss", s]
        argv += ["--no-deploy"] if args.no_deploy else []
        argv += ["--no-watch"] if args.no_watch else []
        return _holder_main(argv)
    err = _console(sys.stderr)
    try:
        st = net_up(args.topo, target=args.target, bw=args.bw, loss=args.loss,
                    deploy=not args.no_deploy, timeout=args.timeout, watch=not args.no_watch,
                    progress=lambda line: err.print(f"[dim]{line}[/dim]"))
    except NetError as e:
        raise UsageError(str(e)) from None
    if args.json:
        print(json.dumps({"run_dir": st.run_dir, "target": st.target, "topology": st.spec}))
    else:
        print(st.run_dir)
        err.print(f"network {st.spec} is up on the {st.target} target "
                  f"({len(st.hosts)} hosts, {len(st.switches)} switches).\n"
                  f"  gradctl net exec {st.run_dir} {next(iter(st.hosts), 'HOST')} -- ip addr\n"
                  f"  gradctl counters --run-dir {st.run_dir}\n"
                  f"  gradctl net down {st.run_dir}")
    return 0


def _when(t: float | None) -> str | None:
    return datetime.datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S") if t else None


def _health_summary(health: dict[str, dict[str, Any]]) -> str:
    """``ok 20/20``, else the unwell switches (dead, no P4Runtime, data plane dead or
    stalled, no pipeline) and restarts."""
    bad = []
    for s, h in health.items():
        if not h["process"]:
            bad.append(f"{s} dead")
        elif h["p4runtime"] is False:
            bad.append(f"{s} no P4Runtime")
        elif h.get("dataplane") in ("dead", "stalled"):
            bad.append(f"{s} data plane {h['dataplane']}")
        elif h["pipeline"] is False:
            bad.append(f"{s} no pipeline")
    ok = len(health) - len(bad)
    text = f"ok {ok}/{len(health)}" if not bad else f"{ok}/{len(health)} ok; " + ", ".join(bad[:4]) + (
        f" +{len(bad) - 4}" if len(bad) > 4 else "")
    restarted = {s: h for s, h in health.items() if h["restarts"]}
    if restarted:
        last = max(restarted.items(), key=lambda kv: kv[1]["last_restart"] or 0)
        text += f"; restarts {sum(h['restarts'] for h in restarted.values())} (last {last[0]} {_when(last[1]['last_restart'])})"
    return text


def _row(st: NetState) -> dict[str, Any]:
    status = st.live_status()
    # probe only a network that should be up (a stopped one has nothing to answer)
    health = st.switch_health(probe_p4runtime=status in ("up", "dead")) if status != "down" else {}
    summary = _health_summary(health) if health else "-"
    for h in health.values():
        h["last_restart"] = _when(h["last_restart"])
    return {"run_dir": st.run_dir, "topology": st.spec, "target": st.target,
            "status": status, "hosts": len(st.hosts), "switches": len(st.switches),
            "started": _when(st.created),
            "holder_pid": st.holder.pid if st.holder else None,
            "health": summary,
            "switch_health": health}


def cmd_net_ls(args: argparse.Namespace) -> int:
    """``gradctl net ls``."""
    rows = [_row(st) for st in net_ls()]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    t = Table(box=box.SIMPLE_HEAD)
    cols = ("run_dir", "topology", "target", "status", "hosts", "switches", "health", "started")
    for col in cols:
        t.add_column(col)
    for r in rows:
        t.add_row(*(str(r[c]) for c in cols))
    c = _console()
    c.print(t if rows else "no networks (gradctl net up TOPO starts one)")
    return 0


def cmd_net_exec(args: argparse.Namespace) -> int:
    """``gradctl net exec``."""
    cmd = list(args.command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    try:
        return net_exec(args.run_dir, args.host, cmd)
    except NetError as e:
        raise UsageError(str(e)) from None


def cmd_net_down(args: argparse.Namespace) -> int:
    """``gradctl net down``."""
    try:
        st = NetState.load(args.run_dir)
        was = st.live_status()
        killed = net_down(args.run_dir)
    except NetError as e:
        raise UsageError(str(e)) from None
    note = f" (stopped {len(killed)} leftover processes by PID)" if was == "dead" else ""
    print(f"{args.run_dir}: down{note}")
    return 0


def cmd_net_pcap(args: argparse.Namespace) -> int:
    """``gradctl net pcap``."""
    from controller.netctl import net_pcap

    out = args.output or str(Path(args.run_dir) / f"{args.link.replace(':', '-')}.pcap")
    try:
        n = net_pcap(args.run_dir, args.link, out, args.count, args.duration)
    except NetError as e:
        raise UsageError(str(e)) from None
    print(f"{out}: {n} packets")
    return 0


def cmd_net_shell(args: argparse.Namespace) -> int:
    """``gradctl net shell``: p4runtime-shell on one switch (controller/p4rt_shell.py)."""
    import subprocess

    from controller.p4rt_shell import ShellError, shell_argv, shell_python

    try:
        st = NetState.load(args.run_dir)
    except NetError as e:
        raise UsageError(str(e)) from None
    if st.live_status() != "up":
        raise UsageError(f"{args.run_dir}: network is {st.live_status()}, not up")
    if args.switch not in st.grpc:
        raise UsageError(f"unknown switch {args.switch!r} (switches: {', '.join(st.grpc)})")
    if args.script is not None and not Path(args.script).is_file():
        raise UsageError(f"--script: no file {args.script!r}")
    addr, device_id = st.grpc[args.switch]
    try:
        python = shell_python(log=True)
    except ShellError as e:
        raise UsageError(str(e)) from None
    return subprocess.call(shell_argv(python, addr, int(device_id), args.script))


def register_shell(nsub: Any) -> None:
    """``gradctl net shell DIR SWITCH``: p4runtime-shell on a switch of a running network."""
    sh = nsub.add_parser(
        "shell", help="open p4runtime-shell on a switch of a running network",
        description="Open p4runtime-shell (its own venv, .venv-p4rt-shell, built on first "
                    "use) on SWITCH's P4Runtime with the P4Info of its running pipeline, in "
                    "role 'shell' with election id 7 (controller/p4rt_shell.py: it never "
                    "locks out a deploy). --script FILE runs a Python file with the shell's "
                    "names (TableEntry, CounterEntry, ...) instead and exits.")
    sh.add_argument("run_dir", metavar="DIR")
    sh.add_argument("switch", metavar="SWITCH")
    sh.add_argument("--script", metavar="FILE", default=None,
                    help="run this Python file in the shell, non-interactively")
    sh.set_defaults(func=cmd_net_shell)


def register_pcap(nsub: Any) -> None:
    """``gradctl net pcap DIR LINK``: capture a link to a pcap file."""
    pc = nsub.add_parser("pcap", help="capture a link of a running network to a pcap file",
                         description="Capture LINK (A-B such as s1-s2 or h1-s1, seen at A's end, "
                                     "or NODE:PORT such as s1:3) until --count packets or "
                                     "--duration seconds; the file opens in scapy or Wireshark.")
    pc.add_argument("run_dir", metavar="DIR")
    pc.add_argument("link", metavar="LINK")
    pc.add_argument("-o", "--output", default=None, metavar="FILE",
                    help="pcap file (default: DIR/LINK.pcap)")
    pc.add_argument("--count", type=argtypes.count, default=1000, help="stop after N packets (default 1000)")
    pc.add_argument("--duration", type=argtypes.positive, default=10.0, metavar="S",
                    help="stop after S seconds (default 10)")
    pc.set_defaults(func=cmd_net_pcap)


def register(sub: Any, topo_help: str) -> None:
    """Add the ``net`` command group to gradctl's subparsers."""
    net = sub.add_parser("net", help="start, list, enter and stop long-lived networks",
                         description="Long-lived emulated networks: every other gradctl command "
                                     "then works against one with --run-dir DIR.")
    nsub = net.add_subparsers(dest="net_command", metavar="ACTION", required=True)

    up = nsub.add_parser("up", help="start a network and keep it running",
                         description="Start an emulated network of P4 switches (forward.p4 "
                                     "deployed) in the background; print its run directory.")
    up.add_argument("topo", metavar="TOPO", help=topo_help)
    up.add_argument("--target", choices=["auto", "embedded", "bmv2"], default=None,
                    help="switch target (default: $TARGET or auto)")
    up.add_argument("--bw", type=argtypes.positive, default=None, metavar="MBIT",
                    help="bandwidth of every link in Mbit/s (default: the topology's)")
    up.add_argument("--loss", action="append", default=[], metavar="SW:PORT=RATE",
                    help="emulated loss of a switch egress port, e.g. s1:2=0.05 (repeatable)")
    up.add_argument("--no-deploy", action="store_true",
                    help="leave the switches without a program (deploy one yourself)")
    up.add_argument("--no-watch", action="store_true",
                    help="do not watch the switches (a dead switch stays dead; default: "
                         "restart it and replay what was written to it)")
    up.add_argument("--cli", action="store_true",
                    help="stay in the foreground with a Mininet CLI; the network stops with it")
    up.add_argument("--timeout", type=argtypes.positive, default=300.0, metavar="S",
                    help="seconds to wait for the network (default 300)")
    up.add_argument("--json", action="store_true", help="machine-readable output")
    up.set_defaults(func=cmd_net_up)

    ls = nsub.add_parser("ls", help="list networks, whether they are up and their switches' health",
                         description="List the networks under /tmp/gradnet-*, with each "
                                     "switch's health: process alive, P4Runtime answering, "
                                     "data plane running (embedded target), pipeline loaded, "
                                     "restarts (per switch with --json).")
    ls.add_argument("--json", action="store_true", help="machine-readable output")
    ls.set_defaults(func=cmd_net_ls)

    ex = nsub.add_parser("exec", help="run a command inside a host of a running network",
                         description="Run CMD in HOST's network namespace (e.g. an agent); "
                                     "exit with its status.")
    ex.add_argument("run_dir", metavar="DIR", help="run directory printed by net up")
    ex.add_argument("host", metavar="HOST")
    ex.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD ...")
    ex.set_defaults(func=cmd_net_exec)

    down = nsub.add_parser("down", help="stop a network (also one whose holder crashed)",
                           description="Stop a network's processes by PID; its namespaces "
                                       "and links go with them.")
    down.add_argument("run_dir", metavar="DIR")
    down.set_defaults(func=cmd_net_down)
    register_pcap(nsub)
    register_shell(nsub)
