"""Long-lived emulated networks: ``gradctl net up|ls|exec|down``.

``gradctl net up TOPO`` starts a *holder* process (``python -m controller.netctl``) in its
own session. The holder builds the network (``topologies.network.Network``), deploys
``forward.p4`` with the requested loss rates, writes ``<run dir>/net.json`` and then waits
for SIGTERM. ``net.json`` records every process that keeps the network alive (holder,
host shells, switch shells, switch processes) as (PID, start time), so

- ``gradctl net exec DIR HOST -- CMD`` enters the host's namespaces by its shell's PID
  (``mnexec -a``, as Mininet does itself);
- ``gradctl net down DIR`` asks the holder to stop, and when the holder is gone (crashed,
  killed) stops the recorded processes itself. Processes are matched by PID *and* start
  time, so a recycled PID is never signalled; nothing is looked up by name.

The holder also watches every switch (``controller.watch.SwitchWatcher``): a switch
process that dies is restarted and its journal replayed (docs/faults.md); ``net.json``
then records the new process and the switch's health, which ``gradctl net ls`` shows
next to what it probes itself (process alive, P4Runtime answering, pipeline loaded).

All of a run's interfaces live in its namespaces, which vanish with their last process.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from controller import argtypes

STATE_FILE = "net.json"
RUN_PREFIX = "gradnet-"


class NetError(RuntimeError):
    """A network could not be started, found, entered or stopped."""


# ----------------------------------------------------------------------------- processes
def proc_start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (None if it does not exist)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # the command name may hold spaces and parentheses: split after the last ')'
    fields = stat[stat.rindex(")") + 2:].split()
    if fields[0] == "Z":  # a zombie has exited already
        return None
    return int(fields[19])


@dataclass
class Proc:
    """A process that keeps a network alive, identified by PID and start time."""

    pid: int
    start: int | None
    what: str = ""

    @classmethod
    def of(cls, pid: int, what: str = "") -> Proc:
        return cls(pid, proc_start_time(pid), what)

    def alive(self) -> bool:
        """Whether this very process (not a recycled PID) still runs."""
        st = proc_start_time(self.pid)
        return st is not None and st == self.start

    def signal(self, sig: int) -> None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)


@dataclass
class NetState:
    """What ``net.json`` holds."""

    run_dir: str
    spec: str
    target: str = ""
    status: str = "starting"  # starting | up | failed | down
    error: str = ""
    created: float = field(default_factory=time.time)
    holder: Proc | None = None
    hosts: dict[str, Proc] = field(default_factory=dict)
    switches: dict[str, list[Proc]] = field(default_factory=dict)
    topology: dict[str, Any] = field(default_factory=dict)
    #: P4Runtime address and device id of every switch
    grpc: dict[str, list[Any]] = field(default_factory=dict)
    #: the holder's watcher's view of every switch (controller.watch.SwitchHealth)
    health: dict[str, dict[str, Any]] = field(default_factory=dict)

    def save(self) -> None:
        path = Path(self.run_dir) / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1))
        tmp.replace(path)

    @classmethod
    def load(cls, run_dir: str | Path) -> NetState:
        path = Path(run_dir) / STATE_FILE
        if not path.is_file():
            raise NetError(f"{run_dir}: no network here (no {STATE_FILE}; see gradctl net ls)")
        try:
            d = json.loads(path.read_text())
            d["holder"] = Proc(**d["holder"]) if d.get("holder") else None
            d["hosts"] = {h: Proc(**p) for h, p in d.get("hosts", {}).items()}
            d["switches"] = {s: [Proc(**p) for p in ps] for s, ps in d.get("switches", {}).items()}
            return cls(**d)
        except (ValueError, TypeError, KeyError) as e:
            raise NetError(f"{path}: unreadable network state ({e})") from None

    def processes(self) -> list[Proc]:
        """Every recorded process: switch processes first, then shells, holder last."""
        sw = [p for ps in self.switches.values() for p in ps]
        return [*sw, *self.hosts.values(), *([self.holder] if self.holder else [])]

    def switch_health(self, probe_p4runtime: bool = True) -> dict[str, dict[str, Any]]:
        """Every switch's health now: ``process`` (its recorded process runs; PID and
        start time), ``p4runtime`` and ``pipeline`` (probed, unless ``probe_p4runtime``
        is false), ``dataplane`` (the embedded data plane's state from its heartbeat,
        probed likewise; None without one, e.g. on BMv2) and ``packet_errors``,
        ``restarts`` and ``last_restart`` (from the holder's watcher)."""
        from concurrent.futures import ThreadPoolExecutor

        from controller.watch import probe
        from targets.embedded.liveness import probe_dataplane, runtime_socket_for

        def one(name: str) -> dict[str, Any]:
            procs = [p for p in self.switches.get(name, []) if p.what == "switch process"]
            alive = bool(procs) and all(p.alive() for p in procs)
            w = self.health.get(name, {})
            row: dict[str, Any] = {"process": alive, "p4runtime": None, "pipeline": None,
                                   "dataplane": None, "packet_errors": None,
                                   "restarts": int(w.get("restarts", 0)),
                                   "last_restart": w.get("last_restart"), "error": w.get("error", "")}
            addr = self.grpc.get(name)
            if probe_p4runtime and addr and alive:
                row.update(probe(addr[0], int(addr[1]), timeout=1.0))
                dp = probe_dataplane(runtime_socket_for(name, addr[0]), timeout=1.0)
                if dp is not None:
                    row.update(dataplane=dp.get("state"), packet_errors=dp.get("packet_errors"))
            elif probe_p4runtime:
                row.update(p4runtime=False, pipeline=False)
            return row

        names = list(self.switches)
        with ThreadPoolExecutor(max_workers=min(16, max(1, len(names)))) as ex:
            return dict(zip(names, ex.map(one, names), strict=True))

    def live_status(self) -> str:
        """``up``/``starting`` while the holder lives; ``dead`` if it died leaving processes."""
        if self.status in ("down", "failed") and not any(p.alive() for p in self.processes()):
            return self.status
        if self.holder is not None and self.holder.alive():
            return self.status
        return "dead" if any(p.alive() for p in self.processes()) else "down"


# ----------------------------------------------------------------------------- holder
def _holder_main(argv: list[str]) -> int:
    """The holder: build the network, record it, wait for SIGTERM, tear down."""
    p = argtypes.Parser(prog="python -m controller.netctl")
    p.add_argument("--run-dir", required=True)
    p.add_argument("--spec", required=True)
    p.add_argument("--target", default=None)
    p.add_argument("--bw", type=argtypes.positive, default=None)
    p.add_argument("--loss", action="append", default=[])
    p.add_argument("--no-deploy", action="store_true")
    p.add_argument("--cli", action="store_true")
    p.add_argument("--no-watch", action="store_true")
    args = p.parse_args(argv)

    from controller.deploy import deploy
    from controller.held import save_held_loss
    from topologies.network import Network
    from topologies.spec import parse_loss, parse_topology

    state = NetState(run_dir=args.run_dir, spec=args.spec, holder=Proc.of(os.getpid(), "holder"))
    state.save()
    stop = threading.Event()
    watcher = None
    save_lock = threading.Lock()
    if args.cli:
        def _leave(*_: object) -> None:
            raise SystemExit(143)

        signal.signal(signal.SIGTERM, _leave)  # the CLI blocks in input(): leave it at once
    else:
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
    net = None
    try:
        topo = parse_topology(args.spec)
        if args.bw is not None:
            for _, _, data in topo.graph.edges(data=True):
                data["capacity"] = float(args.bw)
        loss = dict(parse_loss(s) for s in args.loss)
        # every later deploy against the run directory installs it again (controller/cli.py)
        save_held_loss(args.run_dir, loss)
        state.topology = topo.to_dict()
        net = Network(topo, target=args.target, run_dir=args.run_dir,
                      log=lambda m: print(m, flush=True))
        net.start()
        state.target = net.target
        if not args.no_deploy:
            rep = deploy(topo, net.grpc_addresses(), loss=loss)
            print(f"deployed forward.p4: {rep}", flush=True)
        state.hosts = {h.name: Proc.of(h.pid, "host shell") for h in net.net.hosts}
        state.grpc = {sw.name: [sw.grpc_addr, sw.device_id] for sw in net.net.switches}
        _record_switches(state, net)
        state.status = "up"
        state.save()
        if not args.no_watch:
            watcher = _start_watcher(state, net, save_lock)
        if args.cli:
            net.cli()
        else:
            while not stop.wait(1.0):
                pass
    except Exception as e:  # reported through net.json to the waiting ``net up``
        state.status, state.error = "failed", f"{type(e).__name__}: {e}"
        state.save()
        print(f"error: {state.error}", file=sys.stderr, flush=True)
        return 1
    finally:
        if watcher is not None:
            watcher.stop()
        if net is not None:
            net.stop()
        if state.status != "failed":
            state.status = "down"
            state.save()
    return 0


def _record_switches(state: NetState, net: Any) -> None:
    """Record every switch's shell and (current) process in ``state``."""
    state.switches = {
        sw.name: [Proc.of(sw.pid, "switch shell"),
                  *([Proc.of(sw.proc.pid, "switch process")] if sw.proc else [])]
        for sw in net.net.switches}


def _start_watcher(state: NetState, net: Any, lock: threading.Lock) -> Any:
    """Watch every switch; restarts and health changes go into ``net.json``."""
    from controller.watch import SwitchWatcher

    def restart(name: str) -> list[str]:
        names = net.restart_switch(name)
        with lock:
            _record_switches(state, net)  # the new PIDs, for net ls / net down
            state.save()
        return names

    def on_change(health: dict[str, Any]) -> None:
        with lock:
            state.health = {s: h.as_dict() for s, h in health.items()}
            state.save()

    switches = {sw.name: (sw.grpc_addr, sw.device_id) for sw in net.net.switches}
    return SwitchWatcher(switches, alive=lambda n: net.switch(n).process_alive(), restart=restart,
                         on_change=on_change, log=lambda m: print(m, flush=True)).start()


# ----------------------------------------------------------------------------- commands
def check_up(spec: str, loss: list[str] | None) -> None:
    """``net up``'s topology and ``--loss`` (ports of that topology): raises
    TopologyError or DeployError before anything starts."""
    from controller.deploy import check_loss
    from topologies.spec import parse_loss, parse_topology

    check_loss(parse_topology(spec), dict(parse_loss(s) for s in loss or []))


def net_up(spec: str, *, target: str | None = None, bw: float | None = None,
           loss: list[str] | None = None, deploy: bool = True, timeout: float = 300.0,
           progress: Any = None, watch: bool = True) -> NetState:
    """Start a network in the background and return its state once it is up."""
    check_up(spec, loss)  # bad specs fail here, before anything starts
    run_dir = tempfile.mkdtemp(prefix=RUN_PREFIX, dir="/tmp")
    argv = [sys.executable, "-m", "controller.netctl", "--run-dir", run_dir, "--spec", spec]
    if target:
        argv += ["--target", target]
    if bw is not None:
        argv += ["--bw", str(bw)]
    for s in loss or []:
        argv += ["--loss", s]
    if not deploy:
        argv.append("--no-deploy")
    if not watch:
        argv.append("--no-watch")
    log = open(Path(run_dir) / "holder.log", "ab")  # noqa: SIM115 (handed to the child)
    from controller.p4runtime import REPO_ROOT

    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True, cwd=str(REPO_ROOT))
    log.close()
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        time.sleep(0.3)
        with contextlib.suppress(NetError):
            st = NetState.load(run_dir)
            if st.status == "up":
                return st
            if st.status == "failed":
                proc.wait(timeout=60)
                raise NetError(f"network failed to start: {st.error} (log: {run_dir}/holder.log)")
        if proc.poll() is not None:
            raise NetError(f"the network holder exited ({proc.returncode}); log: {run_dir}/holder.log")
        if progress is not None:
            lines = (Path(run_dir) / "holder.log").read_text(errors="replace").splitlines()
            if lines and lines[-1] != last:
                last = lines[-1]
                progress(last)
    net_down(run_dir)
    raise NetError(f"network not up after {timeout:.0f} s (log: {run_dir}/holder.log)")


def net_ls(root: str = "/tmp") -> list[NetState]:
    """Every network whose run directory is under ``root``, newest first."""
    out = []
    for path in Path(root).glob(f"{RUN_PREFIX}*/{STATE_FILE}"):
        with contextlib.suppress(NetError):
            out.append(NetState.load(path.parent))
    return sorted(out, key=lambda s: -s.created)


def net_down(run_dir: str | Path, timeout: float = 30.0) -> list[Proc]:
    """Stop a network: ask its holder; stop what remains by PID. Returns what it killed."""
    st = NetState.load(run_dir)
    if st.holder is not None and st.holder.alive():
        st.holder.signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while st.holder.alive() and time.monotonic() < deadline:
            time.sleep(0.2)
    killed = []
    # whatever the holder left (or all of it, if the holder crashed): TERM, then KILL
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        left = [p for p in st.processes() if p.alive()]
        if not left:
            break
        for p in left:
            p.signal(sig)
            if p not in killed:
                killed.append(p)
        deadline = time.monotonic() + wait
        while any(p.alive() for p in left) and time.monotonic() < deadline:
            time.sleep(0.1)
    still = [p for p in st.processes() if p.alive()]
    if still:
        raise NetError(f"could not stop PIDs {[p.pid for p in still]}")
    for sock in Path(run_dir).glob("*.grpc"):
        sock.unlink(missing_ok=True)
    if st.status != "failed":
        st.status = "down"
    st.save()
    return killed


def net_exec(run_dir: str | Path, host: str, command: list[str]) -> int:
    """Run ``command`` inside ``host``'s namespaces; return its exit status."""
    st = NetState.load(run_dir)
    if st.live_status() != "up":
        raise NetError(f"{run_dir}: network is {st.live_status()}, not up")
    if host not in st.hosts and host not in st.switches:
        names = ", ".join([*st.hosts, *st.switches][:12])
        raise NetError(f"unknown node {host!r} (nodes: {names}, ...)")
    if not command:
        raise NetError("no command given (gradctl net exec DIR HOST -- CMD ...)")
    proc = st.hosts[host] if host in st.hosts else st.switches[host][0]
    if not proc.alive():
        raise NetError(f"{host}'s shell (PID {proc.pid}) is gone")
    return subprocess.call(["mnexec", "-a", str(proc.pid), *command], env=exec_env(st, host))


def exec_env(st: NetState, node: str) -> dict[str, str]:
    """The environment of ``net exec``: this one with the repository on PYTHONPATH and,
    in a host, its NIC as gloo's (and NCCL's) socket interface: gloo otherwise binds to
    the address of the machine's hostname, outside the emulated network. A value the
    caller set stays."""
    from targets.launch import repo_env

    env = repo_env()
    if node in st.hosts:
        iface = f"{node}-eth0"  # a host's first NIC (topologies: <node>-eth<port>)
        for name in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "TP_SOCKET_IFNAME"):
            env.setdefault(name, iface)
    return env


# ----------------------------------------------------------------------------- pcap
MAX_PCAP_PACKETS = 1_000_000
MAX_PCAP_SECONDS = 3600.0


def link_iface(st: NetState, link: str) -> tuple[str, str]:
    """(node, interface) to capture ``link`` on: ``A-B`` (a link of the topology, seen at
    A's end) or ``NODE:PORT``. Interfaces are named ``<node>-eth<port>``."""
    links = st.topology.get("links", [])
    if ":" in link:
        node, _, port = link.partition(":")
        if not port.isdigit():
            raise NetError(f"{link!r}: PORT must be a number (e.g. s1:3)")
        ports = {int(ln["ports"][node]) for ln in links if node in ln["ports"]}
        if int(port) not in ports:
            raise NetError(f"{link!r}: {node} has no port {port} (ports: {sorted(ports)})")
        return node, f"{node}-eth{port}"
    a, sep, b = link.partition("-")
    for ln in links:
        if sep and set(ln["nodes"]) == {a, b}:
            return a, f"{a}-eth{ln['ports'][a]}"
    raise NetError(f"{link!r}: no such link (give A-B, e.g. s1-s2 or h1-s1, or NODE:PORT)")


def net_pcap(run_dir: str | Path, link: str, out: str | Path, count: int = 1000,
             duration: float = 10.0) -> int:
    """Capture ``link`` of a running network into the pcap file ``out`` until ``count``
    packets or ``duration`` seconds (both bounded); return the number captured."""
    st = NetState.load(run_dir)
    if st.live_status() != "up":
        raise NetError(f"{run_dir}: network is {st.live_status()}, not up")
    if not 0 < count <= MAX_PCAP_PACKETS or not 0 < duration <= MAX_PCAP_SECONDS:
        raise NetError(f"--count must be in 1..{MAX_PCAP_PACKETS} and --duration in (0, {MAX_PCAP_SECONDS:.0f}]")
    node, iface = link_iface(st, link)
    proc = st.hosts.get(node) or (st.switches.get(node) or [None])[0]
    if proc is None or not proc.alive():
        raise NetError(f"{node}'s shell is gone")
    from targets.launch import repo_env

    with _on_veth(st, node, iface):
        r = subprocess.run(["mnexec", "-a", str(proc.pid), sys.executable, "-m", "controller.netctl", "--pcap",
                            iface, str(Path(out).resolve()), str(count), str(duration)],
                           env=repo_env(), capture_output=True, text=True)
    if r.returncode:
        raise NetError(f"capture on {node}:{iface} failed: {r.stderr.strip()[-300:]}")
    return int(r.stdout.strip() or 0)


@contextlib.contextmanager
def _on_veth(st: NetState, node: str, iface: str) -> Iterator[None]:
    """While capturing a switch port of the embedded target: its link on its veth, not in
    memory (runtime CLI ``link_capture``; docs/embedded.md, "In-memory links"), and the
    ring's frames moved there first. Other ports, hosts and BMv2 need nothing."""
    sock = Path(st.run_dir) / f"{node}.cli"
    port = iface.rpartition("-eth")[2]
    if node not in st.switches or not sock.exists() or not port.isdigit():
        yield
        return
    from controller.qos.deployment import EmbeddedRuntime, QosError

    rt = EmbeddedRuntime(sock)
    try:
        rt.run([f"link_capture {port} on"])
        time.sleep(0.05)  # the data plane moves the link at its next turn
    except QosError:
        pass  # an older switch: its links are veths anyway
    try:
        yield
    finally:
        with contextlib.suppress(QosError):
            rt.run([f"link_capture {port} off"])


def _capture_main(iface: str, out: str, count: int, duration: float) -> int:
    """Inside the node's namespace: an AF_PACKET socket on ``iface`` (both directions),
    written as a pcap file (linktype Ethernet); prints the packet count."""
    import select
    import socket
    import struct

    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    s.bind((iface, 0))
    n = 0
    end = time.monotonic() + duration
    with open(out, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        while n < count:
            left = end - time.monotonic()
            if left <= 0 or not select.select([s], [], [], left)[0]:
                break
            frame = s.recv(65535)
            t = time.time()
            f.write(struct.pack("<IIII", int(t), int((t % 1) * 1e6), len(frame), len(frame)) + frame)
            n += 1
    print(n)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--pcap"]:
        sys.exit(_capture_main(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])))
    sys.exit(_holder_main(sys.argv[1:]))
