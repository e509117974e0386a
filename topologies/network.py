"""Start a ``Topology`` as an emulated network: Mininet hosts and P4 switches.

Every node (hosts and switches) lives in its own network namespace, so nothing of a run
touches the root namespace and concurrent runs cannot collide; each switch serves
P4Runtime on a Unix socket in the run directory (``/tmp/gradnet-<run id>/``) next to its
log and its other sockets, and a network holds a lock on its run directory while it
runs, so two networks never share one. Teardown stops processes by PID and removes the
namespaces' links, also when start-up fails half way.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import shlex
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from targets.launch import P4Switch, SwitchGroup, TargetError, resolve_target
from topologies.base import Topology

#: held (flock) by the network that runs in a run directory
LOCK_FILE = "network.lock"


class NetworkError(RuntimeError):
    """The emulated network could not be started."""


def require_root() -> None:
    """Mininet needs root and the ``mnexec`` helper of Debian's mininet package."""
    if os.geteuid() != 0:
        raise NetworkError("the emulated network needs root (network namespaces)")
    if shutil.which("mnexec") is None:
        raise NetworkError("mnexec not found: install Debian's 'mininet' package (make deps)")


class Network:
    """An emulated network of P4 switches and hosts built from a ``Topology``.

    Use as a context manager::

        with Network(fat_tree(4)) as net:
            net.host("h1").cmd("ping -c1 10.0.0.2")

    ``target`` is ``auto`` (BMv2 when installed), ``embedded`` or ``bmv2``;
    ``json_path`` optionally loads a program into every switch at start (otherwise the
    switches wait for P4Runtime SetForwardingPipelineConfig).
    """

    def __init__(
        self,
        topology: Topology,
        target: str | None = None,
        run_dir: str | None = None,
        limit_bw: bool = True,
        json_path: str | None = None,
        priority_queues: int = 1,
        log: Callable[[str], None] | None = None,
        switch_processes: int | None = None,
    ) -> None:
        self.topology = topology
        # Embedded switches are dealt into this many processes (0: one process per
        # switch, as BMv2 always runs); default $GRADNET_SWITCH_PROCESSES or the core count.
        if switch_processes is None:
            env = os.environ.get("GRADNET_SWITCH_PROCESSES", "")
            switch_processes = int(env) if env.isdigit() else (os.cpu_count() or 1)
        self.switch_processes = max(0, switch_processes)
        self.target = resolve_target(target)
        self.limit_bw = limit_bw
        self.json_path = json_path
        self.priority_queues = priority_queues
        self._own_dir = run_dir is None
        self.run_dir = Path(run_dir or tempfile.mkdtemp(prefix="gradnet-", dir="/tmp"))
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.log = log or (lambda msg: None)
        self.net: Any = None
        self._lock: int | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self, ready_timeout: float = 120.0) -> Network:
        """Create namespaces and links, launch the switches, wait for P4Runtime."""
        require_root()
        self._lock = claim_run_dir(self.run_dir)
        from mininet.log import setLogLevel
        from mininet.net import Mininet

        # "output" keeps the Mininet CLI's answers (pingall, nodes, ...) and hides its
        # build chatter; tc's harmless "htb quantum is big" notes, which Mininet reports
        # as errors, are filtered out instead of silencing everything.
        setLogLevel("output")
        _quiet_tc_notes()
        n_groups = self.switch_processes if self.target == "embedded" else 0
        groups = [SwitchGroup(i + 1, self.run_dir) for i in range(n_groups)]
        dealt = itertools.count()
        deal = deal_switches(self.topology, n_groups)

        def switch_cls(name: str, **params: Any) -> _TopoSwitch:
            group = groups[deal.get(name, next(dealt) % n_groups)] if groups else None
            return _TopoSwitch(name, target=self.target, run_dir=str(self.run_dir),
                               json_path=self.json_path, priority_queues=self.priority_queues,
                               group=group, **params)

        t0 = time.monotonic()
        try:
            self.net = Mininet(
                topo=self.topology.to_mininet(switch_cls=switch_cls, limit_bw=self.limit_bw),
                controller=None, build=False, autoSetMacs=False, autoStaticArp=False,
                waitConnected=False, inNamespace=False,
            )
            self.net.build()
            self._configure_hosts()
            self.net.start()
            for g in groups:
                g.launch()
            for sw in self.net.switches:
                sw.wait_ready(ready_timeout)
        except (TargetError, Exception) as e:
            self.stop()
            if isinstance(e, TargetError | NetworkError):
                raise
            raise NetworkError(f"cannot start the emulated network: {e}") from e
        procs = f" in {len([g for g in groups if g.members])} processes" if groups else ""
        self.log(f"network up: {len(self.net.hosts)} hosts, {len(self.net.switches)} switches "
                 f"({self.target} target{procs}) in {time.monotonic() - t0:.1f} s; logs in {self.run_dir}")
        return self

    def _configure_hosts(self) -> None:
        topo = self.topology
        for h in self.net.hosts:
            cmds = []
            neigh: list[str] = []
            for iface in topo.graph.nodes[h.name]["ifaces"]:
                if not iface:
                    continue
                name = iface["name"]
                cmds.append(f"ethtool -K {name} tx off rx off tso off gso off gro off >/dev/null 2>&1")
                cmds.append("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 >/dev/null 2>&1")
                # Static ARP to every host NIC in the same subnet: switches route by IP and
                # rewrite MACs, so hosts never need to resolve anything.
                for other in topo.hosts():
                    if other == h.name:
                        continue
                    for oface in topo.graph.nodes[other]["ifaces"]:
                        if oface and _same_subnet(iface, oface):
                            neigh.append(f"neigh replace {oface['ip']} lladdr {oface['mac']} "
                                         f"dev {name} nud permanent")
            if neigh:
                # One `ip -batch` file, not one shell line: Mininet drives each host's shell
                # through a tty, whose line limit (4095 bytes) cut a long line off after
                # about 50 entries, so hosts of a larger network could not reach the rest.
                batch = self.run_dir / f"{h.name}.neigh"
                batch.write_text("\n".join(neigh) + "\n")
                cmds.append(f"ip -batch {shlex.quote(str(batch))}")
            h.cmd("; ".join(cmds))

    def stop(self) -> None:
        """Stop every switch process and remove every namespace of this run."""
        if self.net is not None:
            try:
                # keep tearing down the rest whatever one node does
                for sw in self.net.switches:
                    with contextlib.suppress(Exception):
                        sw.stop()
                for node in (*self.net.hosts, *self.net.switches):
                    with contextlib.suppress(Exception):
                        node.terminate()
            finally:
                self.net = None
        if self._own_dir:
            for sock in self.run_dir.glob("*.grpc"):
                sock.unlink(missing_ok=True)
        if self._lock is not None:
            os.close(self._lock)  # releases the run directory
            self._lock = None

    def __enter__(self) -> Network:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ access
    def host(self, name: str) -> Any:
        """The Mininet host node ``name``."""
        return self.net.get(name)

    def switch(self, name: str) -> Any:
        """The Mininet switch node ``name``."""
        return self.net.get(name)

    def restart_switch(self, name: str, ready_timeout: float = 60.0) -> list[str]:
        """Start switch ``name``'s process again, with an empty pipeline, and wait until
        it serves P4Runtime. An embedded switch in a group restarts its whole group (one
        process serves them all). Returns the names of the switches that restarted."""
        names = self.switch(name).restart()
        for n in names:
            self.switch(n).wait_ready(ready_timeout)
        return names

    def grpc_addresses(self) -> dict[str, str]:
        """P4Runtime address of every switch, by name."""
        return {sw.name: sw.grpc_addr for sw in self.net.switches}

    def switch_logs(self) -> dict[str, str]:
        return {sw.name: sw.log_file for sw in self.net.switches}

    def cli(self) -> None:
        """An interactive Mininet CLI on this network."""
        from mininet.cli import CLI

        CLI(self.net)


def deal_switches(topology: Topology, n: int) -> dict[str, int]:
    """Group index of every switch for ``n`` group processes: halves of equal size with
    the fewest links between them (Kernighan-Lin, fixed seed), recursively, so that most
    switch-to-switch links join two switches of one process, whose links can run in
    memory (docs/embedded.md, "In-memory links"). Round-robin ({}) when ``n`` is not a
    power of two."""
    if n < 2 or n & (n - 1):
        return {}
    from networkx.algorithms.community import kernighan_lin_bisection

    parts = [set(topology.switches())]
    while len(parts) < n:
        parts = [half for part in parts for half in
                 (kernighan_lin_bisection(topology.graph.subgraph(part), seed=1) if len(part) > 1 else (part, set()))]
    return {sw: i for i, part in enumerate(parts) for sw in part}


def claim_run_dir(run_dir: Path) -> int:
    """Lock ``run_dir`` for one network (an exclusive ``flock`` on ``network.lock``,
    released when the returned descriptor closes or the process ends). A second network
    given the same directory fails here, before its switches would unlink the first's
    sockets of the same names."""
    fd = os.open(run_dir / LOCK_FILE, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise NetworkError(f"{run_dir} belongs to a running network: give each network "
                           "a run directory of its own") from None
    return fd


class _TopoSwitch(P4Switch):
    """P4Switch that accepts (and ignores) the topology's TCP ``grpc_port`` hint."""

    def __init__(self, name: str, grpc_port: int | None = None, **params: Any) -> None:
        super().__init__(name, **params)
        self.grpc_port = grpc_port


class _TcNoteFilter:
    """Drops Mininet's "*** Error: ... quantum ... is big" reports of tc's htb notes."""

    def filter(self, record: Any) -> bool:
        msg = str(record.getMessage())
        return not ("quantum" in msg and "Error" in msg)


def _quiet_tc_notes() -> None:
    from mininet.log import lg

    if not any(isinstance(f, _TcNoteFilter) for f in lg.filters):
        lg.addFilter(_TcNoteFilter())


def _same_subnet(a: dict[str, Any], b: dict[str, Any]) -> bool:
    import ipaddress

    na = ipaddress.ip_interface(f"{a['ip']}/{a.get('prefix', 8)}").network
    return ipaddress.ip_address(b["ip"]) in na
