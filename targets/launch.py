"""Launch a P4 switch process: the embedded target or real BMv2 ``simple_switch_grpc``.

Both take the same argument list (the embedded target's CLI is shaped like
simple_switch_grpc's), so choosing a target only changes the executable. The Mininet
node class ``P4Switch`` runs the process inside the switch's own network namespace and
serves P4Runtime on a Unix socket in the run directory, which the controller in the root
namespace reaches without any management network.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from mininet.node import Switch

CPU_PORT = 255
THRIFT_PORT = 9090  # BMv2's runtime CLI (simple_switch_CLI), inside each switch's namespace
BMV2_EXE = "simple_switch_grpc"


def repo_env() -> dict[str, str]:
    """This environment with the repository first on PYTHONPATH: what a switch, a switch
    group or a testbed process needs to import the embedded target from this checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent) + os.pathsep + env.get("PYTHONPATH", "")
    return env


class TargetError(RuntimeError):
    """A switch target could not be found or started."""


def bmv2_available() -> bool:
    """Whether real BMv2 (simple_switch_grpc) is on PATH."""
    return shutil.which(BMV2_EXE) is not None


def resolve_target(target: str | None = None) -> str:
    """``auto`` → ``bmv2`` when simple_switch_grpc exists, else ``embedded``."""
    target = (target or os.environ.get("TARGET") or "auto").lower()
    if target == "auto":
        return "bmv2" if bmv2_available() else "embedded"
    if target not in ("embedded", "bmv2"):
        raise TargetError(f"unknown TARGET {target!r} (expected auto, embedded or bmv2)")
    if target == "bmv2" and not bmv2_available():
        raise TargetError("TARGET=bmv2 but simple_switch_grpc is not on PATH")
    return target


def switch_command(
    target: str,
    ports: dict[int, str],
    device_id: int,
    grpc_addr: str,
    json_path: str | None = None,
    cpu_port: int | None = CPU_PORT,
    log_file: str | None = None,
    priority_queues: int = 1,
    extra: list[str] | None = None,
    thrift_port: int | None = None,
    log_level: str = "info",
) -> list[str]:
    """The argv that starts one switch; identical for both targets except argv[0].

    ``extra`` goes after the target options (after ``--``); ``thrift_port`` (BMv2's
    runtime CLI server) is a core option of BMv2, before ``--``. ``log_level`` is the
    ``-L`` of ``log_file`` (``trace``: BMv2's per-packet trace; ``$GRADNET_BMV2_LOG_LEVEL``
    sets it for every BMv2 switch, e.g. of ``gradctl net up``)."""
    if target == "embedded":
        argv = [sys.executable, "-m", "targets.embedded.cli"]
    else:
        argv = [shutil.which(BMV2_EXE) or BMV2_EXE]
    argv += ["--device-id", str(device_id)]
    for port, iface in sorted(ports.items()):
        argv += ["-i", f"{port}@{iface}"]
    if log_file:
        if target != "embedded":  # BMv2 cannot change it at run time: chosen at start
            log_level = os.environ.get("GRADNET_BMV2_LOG_LEVEL", log_level)
        argv += ["--log-file", log_file, "-L", log_level]
        if log_level == "trace" and target != "embedded":
            argv += ["--log-flush"]  # every line on disk at once: a trace is read while running
    if thrift_port is not None and target != "embedded":
        argv += ["--thrift-port", str(thrift_port)]
    argv += [json_path] if json_path else ["--no-p4"]
    argv += ["--", "--grpc-server-addr", grpc_addr]
    if cpu_port is not None:
        argv += ["--cpu-port", str(cpu_port)]
    if priority_queues > 1:
        # a target option of both (simple_switch_grpc 1.15: after "--")
        argv += ["--priority-queues", str(priority_queues)]
    return argv + list(extra or [])


def wait_for_grpc(addr: str, proc: subprocess.Popen | None, timeout: float = 30.0) -> None:
    """Block until a gRPC server answers at ``addr``; fail early if ``proc`` died."""
    import grpc

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise TargetError(f"switch exited with code {proc.returncode} before serving {addr}")
        if addr.startswith("unix:") and not os.path.exists(addr[5:]):
            time.sleep(0.05)
            continue
        channel = grpc.insecure_channel(addr)
        try:
            grpc.channel_ready_future(channel).result(timeout=0.5)
            return
        except grpc.FutureTimeoutError:
            pass
        finally:
            channel.close()
    raise TargetError(f"no P4Runtime server at {addr} after {timeout:.0f} s")


def stop_process(proc: subprocess.Popen, timeout: float = 5.0) -> None:
    """SIGTERM, then SIGKILL after ``timeout``; by PID only."""
    if proc.poll() is not None:
        return
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout)
    except ProcessLookupError:
        pass


class SwitchGroup:
    """Embedded switches served by one process (``targets/embedded/group.py``).

    ``Network`` deals its embedded switches round-robin into one group per core: each
    member's ``start`` only registers its ports, then ``launch`` starts the process and
    every member's ``proc`` is that process (stopping one member stops the group)."""

    def __init__(self, index: int, run_dir: Path) -> None:
        self.index = index
        self.run_dir = Path(run_dir)
        self.members: list[tuple[P4Switch, dict[int, str]]] = []
        self.proc: subprocess.Popen | None = None
        self.log_file = str(self.run_dir / f"switches-{index}.log")
        self.nice = -10 if os.geteuid() == 0 else 0

    def add(self, sw: P4Switch, ports: dict[int, str]) -> None:
        """Register a member (from its ``start``)."""
        self.members.append((sw, ports))

    def launch(self) -> None:
        """Start the group's process (in the root namespace: it joins each member's)."""
        if not self.members:
            return
        spec = {"log_file": self.log_file, "log_level": "info", "nice": self.nice, "switches": [
            {"name": sw.name, "device_id": sw.device_id, "netns": f"/proc/{sw.pid}/ns/net",
             "ports": {str(p): i for p, i in ports.items()}, "grpc": sw.grpc_addr,
             "runtime_socket": sw.runtime_socket, "cpu_port": CPU_PORT,
             "priority_queues": sw.priority_queues, "json": sw.json_path, "links": self._links(sw)}
            for sw, ports in self.members]}
        path = self.run_dir / f"switches-{self.index}.json"
        path.write_text(json.dumps(spec, indent=1))
        env = repo_env()
        out = open(self.log_file + ".out", "ab")  # noqa: SIM115 (the process owns it)
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", "targets.embedded.group", str(path)],
                                         stdout=out, stderr=subprocess.STDOUT, env=env)
        finally:
            out.close()
        for sw, _ in self.members:
            sw.proc = self.proc

    def _links(self, sw: P4Switch) -> dict[str, dict]:
        """The ports of ``sw`` whose link joins another member, with that end's TCLink
        parameters (the group may carry such a link in memory: native/memlink.py)."""
        members = {id(m) for m, _ in self.members}
        out = {}
        for intf in sw.intfList():
            link = getattr(intf, "link", None)
            if link is None or intf.name == "lo":
                continue
            other = link.intf2 if link.intf1 is intf else link.intf1
            if id(other.node) not in members or other.node is sw:
                continue
            params = {k: v for k, v in getattr(intf, "params", {}).items()
                      if k in ("bw", "delay", "loss", "max_queue_size") and v is not None}
            out[str(sw.ports[intf])] = {"peer": other.node.name, "peer_port": other.node.ports[other], **params}
        return out

    def restart(self) -> list[str]:
        """Start the group's process again (stopping it first if it still runs): every
        member comes back with an empty pipeline. Returns the members' names."""
        if self.proc is not None:
            stop_process(self.proc)
        for sw, _ in self.members:
            sock = sw.grpc_addr[5:]
            if os.path.exists(sock):
                os.unlink(sock)
        self.launch()
        return [sw.name for sw, _ in self.members]


class P4Switch(Switch):
    """A Mininet switch node running a P4 target in its own network namespace.

    Parameters (via ``addSwitch(..., **params)`` or the network builder):
    ``device_id``, ``target`` (embedded|bmv2), ``run_dir`` (logs and gRPC socket),
    ``json_path`` (program to load at start, else wait for P4Runtime),
    ``priority_queues``, ``group`` (a ``SwitchGroup`` to run in instead of a process of
    its own; embedded target only).
    """

    def __init__(self, name: str, device_id: int = 1, target: str = "embedded",
                 run_dir: str = "/tmp/gradnet", json_path: str | None = None,
                 priority_queues: int = 1, group: SwitchGroup | None = None, **params) -> None:
        # Always its own namespace (Mininet passes its global default explicitly): no
        # interface of a run in the root namespace, so concurrent runs cannot collide.
        params["inNamespace"] = True
        super().__init__(name, **params)
        self.device_id = device_id
        self.target = target
        self.run_dir = Path(run_dir)
        self.json_path = json_path
        self.priority_queues = priority_queues
        self.grpc_addr = f"unix:{self.run_dir / (name + '.grpc')}"
        # Run-time queue configuration (controller.qos): the embedded target's runtime-CLI
        # socket; BMv2's Thrift server listens on THRIFT_PORT inside this namespace.
        self.runtime_socket = str(self.run_dir / f"{name}.cli")
        self.log_file = str(self.run_dir / f"{name}.log")
        self.proc: subprocess.Popen | None = None
        self._ports: dict[int, str] = {}
        self.group = group if target == "embedded" else None
        if self.group is not None:
            self.log_file = self.group.log_file

    def defaultIntf(self):  # noqa: N802 (Mininet API)
        return None

    def start(self, controllers) -> None:  # noqa: ARG002 (no OpenFlow controllers)
        """Disable offloads on every port and launch the switch process."""
        ports = {}
        for intf in self.intfList():
            if intf.name == "lo":
                continue
            port = self.ports[intf]
            ports[port] = intf.name
            self.cmd(f"ethtool -K {intf.name} tx off rx off tso off gso off gro off >/dev/null 2>&1")
        self.cmd("ip link set lo up")
        self._ports = ports
        sock = self.grpc_addr[5:]
        if os.path.exists(sock):
            os.unlink(sock)
        if self.group is not None:
            self.group.add(self, ports)  # the group's process starts once all have registered
            return
        self._launch(ports)

    def _launch(self, ports: dict[int, str]) -> None:
        extra = ["--runtime-socket", self.runtime_socket] if self.target == "embedded" else []
        argv = switch_command(self.target, ports, self.device_id, self.grpc_addr, self.json_path,
                              CPU_PORT, self.log_file, self.priority_queues, extra, THRIFT_PORT)
        log = open(self.log_file + ".out", "ab")  # noqa: SIM115 (closed in stop)
        env = repo_env()
        self._out = log
        self.proc = self.popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        if self.target != "embedded":
            # where controller.qos finds BMv2's Thrift server: in this PID's namespace
            Path(self.runtime_socket).with_suffix(".thrift").write_text(
                f'{{"pid": {self.proc.pid}, "thrift_port": {THRIFT_PORT}}}\n')

    def process_alive(self) -> bool:
        """Whether this switch's process (its own, or its group's) runs."""
        return self.proc is not None and self.proc.poll() is None

    def restart(self) -> list[str]:
        """Start this switch's process again (stopping it first if it still runs), with
        an empty pipeline. A group member restarts its whole group (one process serves
        them all). Returns the names of every switch that restarted."""
        if self.group is not None:
            return self.group.restart()
        if self.proc is not None:
            stop_process(self.proc)
        if getattr(self, "_out", None):
            self._out.close()
        sock = self.grpc_addr[5:]
        if os.path.exists(sock):
            os.unlink(sock)
        self._launch(self._ports)
        return [self.name]

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Block until this switch serves P4Runtime."""
        wait_for_grpc(self.grpc_addr, self.proc, timeout)

    def stop(self, deleteIntfs: bool = True) -> None:  # noqa: N803 (Mininet API)
        """Stop the switch process by PID, then remove the node."""
        if self.proc is not None:
            stop_process(self.proc)
            self.proc = None
        if getattr(self, "_out", None):
            self._out.close()
        super().stop(deleteIntfs)
