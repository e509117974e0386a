"""The steps every experiment shares: log, start an agent in an emulated host with its
output in files, wait for it to say ``ready``, collect what it printed, per-host TCP set-up.

Agents write stdout/stderr to ``<base>.out``/``<base>.err`` rather than pipes: a pipe that
nobody reads while the experiment waits for another process fills up and stalls the agent.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from controller.output import TableConsole
from controller.p4runtime import REPO_ROOT

console = TableConsole()


def log(msg: str) -> None:
    """A timestamped progress line."""
    console.print(f"[dim]{time.strftime('%H:%M:%S')}[/dim] {msg}")


def spawn(host: Any, base: Path, argv: list[str], *, stdin: bool = False,
          env: Mapping[str, str] | None = None) -> Any:
    """Start ``argv`` in Mininet host ``host`` from the repository root, stdout and stderr
    in ``base.out``/``base.err``; ``stdin`` gives it a pipe (``proc.stdin``) for its start
    signal, ``env`` replaces its environment."""
    kw: dict[str, Any] = {} if env is None else {"env": dict(env)}
    with open(base.with_suffix(".out"), "wb") as out, open(base.with_suffix(".err"), "wb") as err:
        return host.popen(argv, cwd=str(REPO_ROOT), stdout=out, stderr=err,
                          stdin=subprocess.PIPE if stdin else subprocess.DEVNULL, **kw)


def await_ready(agents: list[tuple[Any, Path]], timeout: float = 120.0) -> None:
    """Wait until every agent has printed ``ready`` (its ``--ready``/``--ready-go`` flag);
    kill them all and raise if one exits or the timeout passes first."""
    deadline = time.monotonic() + timeout
    pending = list(agents)
    while pending:
        proc, base = pending[0]
        out = base.with_suffix(".out")
        if out.exists() and out.read_bytes().startswith(b"ready\n"):
            pending.pop(0)
            continue
        if proc.poll() is not None or time.monotonic() > deadline:
            err = base.with_suffix(".err").read_text(errors="replace")[-500:]
            for p, _ in agents:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            raise RuntimeError(f"{base.name} did not get ready (exit {proc.poll()}): {err}")
        time.sleep(0.02)


def finish(proc: Any, base: Path, timeout: float) -> tuple[int, str, str]:
    """Wait for an agent (killing it past ``timeout``); its exit code, stdout and stderr."""
    try:
        proc.wait(timeout=timeout)
    except Exception:
        proc.kill()
        proc.wait()
    return (proc.returncode, base.with_suffix(".out").read_text(errors="replace"),
            base.with_suffix(".err").read_text(errors="replace"))


def json_lines(text: str) -> list[dict[str, Any]]:
    """Every line of an agent's output that parses as a JSON object, in order."""
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out


def last_line(text: str, width: int = 300) -> str:
    """The last line of ``text`` (an agent's stderr), at most ``width`` characters."""
    return (text.strip().splitlines() or [""])[-1][-width:]


def last_json(text: str) -> dict[str, Any]:
    """The last line of ``text`` that parses as a JSON object (an agent's summary), or {}."""
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    return {}


def prepare_hosts(net: Any, hosts: list[str]) -> None:
    """Per-namespace TCP setting: no slow start after an idle wait (the go signal, or the
    gap between iterations), so a reliable channel keeps its window."""
    for h in hosts:
        net.host(h).cmd("sysctl -qw net.ipv4.tcp_slow_start_after_idle=0 >/dev/null 2>&1")
