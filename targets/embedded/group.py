"""Several embedded switches in one process: ``python -m targets.embedded.group SPEC.json``.

An emulated network of 20 switches on a 2-core machine spends most of its time waking
20 processes up, one packet at a time, with cold caches. A group process serves several
switches with one data-plane thread (``switch.run_switches``: one epoll over all their
ports), so a burst crossing them is handled in one pass. Each switch keeps everything
else of its own: its network namespace (its ports are opened inside it), its P4Runtime
server, its runtime-CLI socket, its device id and state. The network builder starts one
group per core (``Network(switch_processes=...)``); the behaviour of every switch is the
same as with one process per switch.

SPEC is JSON::

    {"log_file": "/tmp/run/switches-1.log", "log_level": "info",
     "switches": [{"name": "s1", "device_id": 1, "netns": "/proc/1234/ns/net",
                   "ports": {"1": "s1-eth1"}, "grpc": "unix:/tmp/run/s1.grpc",
                   "runtime_socket": "/tmp/run/s1.cli", "cpu_port": 255,
                   "priority_queues": 1, "json": null,
                   "links": {"2": {"peer": "s2", "peer_port": 1, "bw": 10}}}, ...]}

``links`` names the ports joined to another member of the group (Mininet's TCLink
parameters of that end: ``bw``, ``delay``, ``loss``, ``max_queue_size``): such a link
carries its frames in memory while both ends run natively (native/memlink.py).

It prints ``ready`` once every switch serves P4Runtime and runs until SIGTERM.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from targets.embedded.compiler import CompileError
from targets.embedded.loop import run_switches
from targets.embedded.native import memlink
from targets.embedded.switch import Switch
from targets.netns import in_netns


class GroupError(RuntimeError):
    """A switch of the group could not be set up."""


def _prioritize(nice: int) -> None:
    """Run at ``nice`` in a scheduling group of our own.

    The emulated switches stand for hardware: agents woken by their packets must not
    preempt them. With autogroup scheduling (Debian's default) every session shares the
    CPU equally whatever its members' nice values, and Mininet starts every agent in a
    session of its own, so a group of switches would get one share among 16 agents'.
    A session of its own and the autogroup's nice value fix that."""
    log = logging.getLogger("gradnet.switch")
    try:
        if os.getsid(0) != os.getpid():
            os.setsid()
        os.setpriority(os.PRIO_PROCESS, 0, nice)
        if os.path.exists("/proc/self/autogroup"):
            Path("/proc/self/autogroup").write_text(f"{nice}\n")
    except OSError as e:
        log.warning("cannot raise the switches' priority (nice %d): %s", nice, e)


def _setup(spec: dict[str, Any]) -> tuple[Switch, list[Any]]:
    from targets.embedded.p4runtime.server import P4RuntimeServer
    from targets.embedded.runtime_cli import RuntimeServer

    name = spec["name"]
    sw = Switch(device_id=int(spec["device_id"]), cpu_port=spec.get("cpu_port"),
                priority_queues=int(spec.get("priority_queues", 1)), backend=spec.get("backend"))
    if spec.get("json"):
        try:
            sw.install_program(sw.load_program(Path(spec["json"]).read_bytes()))
        except (OSError, CompileError) as e:
            raise GroupError(f"{name}: cannot load {spec['json']}: {e}") from e
    ports = {int(p): iface for p, iface in spec["ports"].items()}
    try:
        in_netns(spec["netns"], lambda: [sw.add_port(p, i) for p, i in ports.items()])
    except OSError as e:
        raise GroupError(f"{name}: cannot open its interfaces: {e}") from e
    servers: list[Any] = [P4RuntimeServer(sw, spec["grpc"])]
    if spec.get("runtime_socket"):
        servers.append(RuntimeServer(sw, spec["runtime_socket"]))
    for s in servers:
        try:
            s.start()
        except Exception as e:  # grpc raises RuntimeError on a busy address
            raise GroupError(f"{name}: cannot serve {spec['grpc']}: {e}") from e
    return sw, servers


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: ``SPEC.json``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m targets.embedded.group SPEC.json", file=sys.stderr)
        return 2
    try:
        spec = json.loads(Path(args[0]).read_text())
        switches_spec = spec["switches"]
    except (OSError, ValueError, KeyError) as e:
        print(f"group: bad spec {args[0]}: {e}", file=sys.stderr)
        return 2
    level = getattr(logging, str(spec.get("log_level", "info")).upper(), logging.INFO)
    handler: logging.Handler = (logging.FileHandler(spec["log_file"]) if spec.get("log_file")
                                else logging.NullHandler())
    logging.basicConfig(level=level, handlers=[handler],
                        format="[%(asctime)s] [%(threadName)s] %(levelname)s %(message)s")
    if spec.get("nice"):
        _prioritize(int(spec["nice"]))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    switches: list[Switch] = []
    servers: list[Any] = []
    try:
        for s in switches_spec:
            sw, srv = _setup(s)
            switches.append(sw)
            servers += srv
    except GroupError as e:
        print(f"group: {e}", file=sys.stderr, flush=True)
        for srv in servers:
            srv.stop()
        for sw in switches:
            sw.stop()
        return 2
    try:
        _connect(switches, switches_spec)
    except (KeyError, TypeError, ValueError) as e:
        print(f"group: bad link in {args[0]}: {e}", file=sys.stderr, flush=True)
        return 2
    plane = threading.Thread(target=run_switches, args=(switches, stop), name="dataplane",
                             daemon=True)
    plane.start()
    names = ", ".join(s["name"] for s in switches_spec)
    logging.getLogger("gradnet.switch").info("group up: %s (one data-plane thread)", names)
    print("ready", flush=True)
    stop.wait()
    for sw in switches:  # the data plane wakes up and sees ``stop``
        sw.wake()
    plane.join(timeout=5)
    for srv in servers:
        srv.stop()
    for sw in switches:
        memlink.mark_down(sw)
        sw.stop()
    return 0


def _connect(switches: list[Switch], specs: list[dict[str, Any]]) -> None:
    """Record the links between members (both ends must name each other)."""
    by_name = {s["name"]: sw for s, sw in zip(specs, switches, strict=True)}
    for s, sw in zip(specs, switches, strict=True):
        for port, ln in (s.get("links") or {}).items():
            peer, pport = by_name[ln["peer"]], int(ln["peer_port"])
            back = {int(k): v for k, v in specs[switches.index(peer)]["links"].items()}[pport]
            if back["peer"] != s["name"] or int(back["peer_port"]) != int(port):
                raise ValueError(f"{s['name']}:{port} and {ln['peer']}:{pport} do not name each other")
            if id(sw) < id(peer) or sw is peer:
                continue  # each link once, from either end
            memlink.connect(sw, int(port), peer, pport, memlink.from_spec(ln), memlink.from_spec(back))


if __name__ == "__main__":
    sys.exit(main())
