"""A switch under test with N ports, driven from a separate namespace.

Two network namespaces per testbed, named with a unique prefix per run: ``<p>sw`` holds
the switch process and its ports ``p1..pN``; ``<p>tb`` holds the other veth ends
``t1..tN`` where the test sends and captures frames. The test process never enters a
namespace itself: its packet sockets are opened from a short-lived thread that joins the
testbench namespace (network namespaces are per thread on Linux), and they stay bound
to it. The same testbed runs the embedded target or real BMv2, which is what the
differential tests and the packets-per-second benchmark need.
"""

from __future__ import annotations

import os
import secrets
import select
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from targets.launch import (
    CPU_PORT,
    repo_env,
    resolve_target,
    stop_process,
    switch_command,
    wait_for_grpc,
)
from targets.netns import in_netns

ETH_P_ALL = 0x0003


class TestbedError(RuntimeError):
    """The testbed could not be set up."""


def _run(*argv: str) -> None:
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode:
        raise TestbedError(f"{' '.join(argv)}: {r.stderr.strip()}")


def _packet_socket(iface: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
    s.setsockopt(263, 23, 1)  # PACKET_IGNORE_OUTGOING: don't capture what we send
    s.bind((iface, ETH_P_ALL))
    s.setblocking(False)
    return s


class Testbed:
    """Start with ``with Testbed(4, json_path=...) as tb:``; see the module doc."""

    def __init__(
        self,
        nports: int = 4,
        target: str | None = "embedded",
        json_path: str | None = None,
        cpu_port: int | None = CPU_PORT,
        priority_queues: int = 1,
        device_id: int = 0,
        extra_args: list[str] | None = None,
        command: list[str] | None = None,
        log_level: str = "info",
    ) -> None:
        self.nports = nports
        # a process to run in the switch namespace instead of a P4 target (benchmarks'
        # bare forwarder): it gets the port names p1..pN and must print "ready"
        self.command = command
        self.target = resolve_target(target)
        self.json_path = json_path
        self.cpu_port = cpu_port
        self.priority_queues = priority_queues
        self.device_id = device_id
        self.extra_args = extra_args or []
        self.log_level = log_level  # of switch.log; "trace" for BMv2's per-packet trace
        self.prefix = f"gn{secrets.token_hex(3)}"
        self.ns_sw = self.prefix + "sw"
        self.ns_tb = self.prefix + "tb"
        self.dir = Path(tempfile.mkdtemp(prefix=f"gradnet-{self.prefix}-"))
        self.grpc_addr = f"unix:{self.dir / 'switch.grpc'}"
        self.log_file = str(self.dir / "switch.log")
        self.proc: subprocess.Popen | None = None
        self.socks: dict[int, socket.socket] = {}
        self._made: list[str] = []

    def start(self, timeout: float = 60.0) -> Testbed:
        """Create namespaces and veths, start the switch, open the capture sockets."""
        if os.geteuid() != 0:
            raise TestbedError("the testbed needs root (network namespaces)")
        try:
            for ns in (self.ns_sw, self.ns_tb):
                _run("ip", "netns", "add", ns)
                self._made.append(ns)
                for cmd in ("sysctl -qw net.ipv6.conf.all.disable_ipv6=1",
                            "sysctl -qw net.ipv6.conf.default.disable_ipv6=1", "ip link set lo up"):
                    _run("ip", "netns", "exec", ns, *cmd.split())
            for i in range(1, self.nports + 1):
                _run("ip", "link", "add", f"p{i}", "netns", self.ns_sw, "type", "veth",
                     "peer", "name", f"t{i}", "netns", self.ns_tb)
                for ns, name in ((self.ns_sw, f"p{i}"), (self.ns_tb, f"t{i}")):
                    _run("ip", "netns", "exec", ns, "ip", "link", "set", name, "up")
                    subprocess.run(["ip", "netns", "exec", ns, "ethtool", "-K", name, "tx", "off",
                                    "rx", "off", "tso", "off", "gso", "off", "gro", "off"],
                                   capture_output=True)
            env = repo_env()
            if self.command is not None:
                self._start_command(env, timeout)
            else:
                argv = switch_command(self.target, {i: f"p{i}" for i in range(1, self.nports + 1)},
                                      self.device_id, self.grpc_addr, self.json_path, self.cpu_port,
                                      self.log_file, self.priority_queues, self.extra_args,
                                      log_level=self.log_level)
                self._out = open(self.dir / "switch.out", "wb")  # noqa: SIM115 (closed in stop)
                self.proc = subprocess.Popen(["ip", "netns", "exec", self.ns_sw, *argv],
                                             stdout=self._out, stderr=subprocess.STDOUT, env=env)
                wait_for_grpc(self.grpc_addr, self.proc, timeout)
            for i in range(1, self.nports + 1):
                self.socks[i] = in_netns(self.ns_tb, _packet_socket, f"t{i}")
        except BaseException:
            self.stop()
            raise
        return self

    def _start_command(self, env: dict[str, str], timeout: float) -> None:
        argv = [*self.command, *(f"p{i}" for i in range(1, self.nports + 1))]
        self.proc = subprocess.Popen(["ip", "netns", "exec", self.ns_sw, *argv], env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        r, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if r else b""
        if line.strip() != b"ready":
            raise TestbedError(f"{' '.join(argv)} did not start: {line.decode(errors='replace')}")

    def stop(self) -> None:
        """Stop the switch by PID and delete both namespaces (and so every veth)."""
        for s in self.socks.values():
            s.close()
        self.socks.clear()
        if self.proc is not None:
            stop_process(self.proc)
            self.proc = None
        if getattr(self, "_out", None):
            self._out.close()
        for ns in reversed(self._made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self._made.clear()
        sock = self.dir / "switch.grpc"
        sock.unlink(missing_ok=True)

    def __enter__(self) -> Testbed:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ traffic
    def send(self, port: int, frame: bytes) -> None:
        """Send a frame into switch port ``port``."""
        self.socks[port].send(frame)

    def recv(self, port: int, timeout: float = 1.0) -> bytes | None:
        """The next frame the switch sent out of ``port``, or None."""
        s = self.socks[port]
        r, _, _ = select.select([s], [], [], timeout)
        if not r:
            return None
        return s.recv(65536)

    def recv_all(self, timeout: float = 0.5) -> dict[int, list[bytes]]:
        """Everything that arrives on any port until ``timeout`` s of silence."""
        out: dict[int, list[bytes]] = {p: [] for p in self.socks}
        by_fd = {s.fileno(): p for p, s in self.socks.items()}
        while True:
            r, _, _ = select.select(list(self.socks.values()), [], [], timeout)
            if not r:
                return out
            for s in r:
                try:
                    while True:
                        out[by_fd[s.fileno()]].append(s.recv(65536))
                except BlockingIOError:
                    pass

    def drain(self) -> None:
        """Discard anything queued on the capture sockets."""
        for s in self.socks.values():
            try:
                while True:
                    s.recv(65536)
            except BlockingIOError:
                pass

    def log_tail(self, n: int = 40) -> str:
        """Last lines of the switch's output, for failure messages."""
        text = ""
        for name in ("switch.out", "switch.log", "switch.log.txt"):  # BMv2 appends .txt
            p = self.dir / name
            if p.exists():
                text += p.read_text(errors="replace")[-4000:]
        return "\n".join(text.splitlines()[-n:])


def wait_until(pred, timeout: float = 5.0, step: float = 0.02) -> bool:
    """Poll ``pred`` until true or ``timeout``."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return bool(pred())
