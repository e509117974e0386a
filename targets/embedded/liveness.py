"""Whether an embedded switch's data plane still runs: its heartbeat, its fault log, and
the client that reads both over the runtime-CLI socket.

P4Runtime and the runtime CLI are served by threads of their own: a switch whose
data-plane thread died still answers them, so "the process runs and P4Runtime answers"
says nothing about forwarding. The data-plane loop (``loop.run_switches``) therefore
bumps a :class:`Heartbeat` on every iteration, at least every :data:`BEAT_S` even when
no packet arrives, and records how it ended. The runtime CLI's ``dataplane`` command
answers :meth:`Heartbeat.status` as JSON; ``gradctl net ls`` and the watcher
(``controller/watch.py``) read it with :func:`probe_dataplane` (docs/faults.md).

The module is light on purpose: the controller imports it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

#: the loop's longest wait: an idle data plane still beats this often
BEAT_S = 0.5
#: a live thread that has not beaten for this long is ``stalled``
STALL_S = 5.0
#: at most one logged traceback per this many seconds (the rest are counted)
FAULT_LOG_S = 10.0
#: the environment variable that enables the runtime CLI's ``fault`` command (tests)
FAULT_ENV = "GRADNET_FAULT_INJECTION"

__all__ = ["BEAT_S", "FAULT_ENV", "STALL_S", "DataPlaneFault", "FaultLog", "Heartbeat",
           "probe_dataplane", "runtime_socket_for"]


class DataPlaneFault(RuntimeError):
    """Raised in the data-plane loop by an injected fault (tests only): ends the loop."""


class Heartbeat:
    """One data-plane loop's sign of life, shared by the switches it serves.

    The loop writes (``beat``, ``ended``); other threads only read. ``fault`` is the
    test-only injection point: the loop raises :class:`DataPlaneFault` when it is set."""

    def __init__(self) -> None:
        self.beats = 0
        self.last = time.monotonic()
        self.thread: threading.Thread | None = None
        self.ended = False       # the loop returned or raised
        self.stopping = False    # ... because it was asked to stop
        self.error = ""          # what ended it, when something did
        self.fault: str | None = None

    def beat(self) -> None:
        """One iteration of the loop."""
        self.beats += 1
        self.last = time.monotonic()

    def status(self, now: float | None = None) -> dict[str, Any]:
        """``state``: ``running``, ``stalled`` (the thread lives but has not beaten for
        :data:`STALL_S`), ``dead`` (the loop ended without being asked to) or
        ``stopped``; ``beats``; ``age_s`` (since the last beat); ``error``."""
        age = (time.monotonic() if now is None else now) - self.last
        gone = self.ended or (self.thread is not None and not self.thread.is_alive())
        if gone:
            state = "stopped" if self.stopping and not self.error else "dead"
        else:
            state = "stalled" if age > STALL_S else "running"
        return {"state": state, "beats": self.beats, "age_s": round(age, 3), "error": self.error}


class FaultLog:
    """Log a packet-path exception with its traceback at most once per
    :data:`FAULT_LOG_S`; count the ones left out and say so in the next line."""

    def __init__(self, logger: logging.Logger, every: float = FAULT_LOG_S) -> None:
        self.log = logger
        self.every = every
        self._next = 0.0
        self._left_out = 0

    def __call__(self, msg: str, *args: object) -> None:
        """Call from an ``except`` block (the traceback is the one being handled)."""
        now = time.monotonic()
        if now < self._next:
            self._left_out += 1
            return
        self._next = now + self.every
        more = f" ({self._left_out} more since the last report)" if self._left_out else ""
        self._left_out = 0
        self.log.exception(msg + "; packet dropped" + more, *args)


def fault_injection_enabled() -> bool:
    """Whether this process accepts injected faults (``GRADNET_FAULT_INJECTION=1``)."""
    return os.environ.get(FAULT_ENV) == "1"


# ---------------------------------------------------------------------------- client
def runtime_socket_for(name: str, address: str) -> Path | None:
    """The runtime-CLI socket of switch ``name`` at P4Runtime ``address``: beside a Unix
    socket (``<run dir>/<name>.cli``, as the network builder places it); None for a
    TCP address or when there is none (BMv2 has no such socket)."""
    if not address.startswith("unix:"):
        return None
    path = Path(address[5:]).parent / f"{name}.cli"
    return path if path.exists() else None


def probe_dataplane(path: str | Path | None, timeout: float = 1.0) -> dict[str, Any] | None:
    """The data plane's status from the runtime CLI at ``path`` (``dataplane``
    command), or None when it cannot tell: no socket, no answer, an old switch."""
    if path is None:
        return None
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(str(path))
            s.sendall(b"dataplane\n")
            buf = b""
            while not buf.endswith(b"\n") and len(buf) < 65536:
                chunk = s.recv(4096)
                if not chunk:
                    break
                buf += chunk
    except OSError:
        return None
    with contextlib.suppress(ValueError):
        answer = json.loads(buf.decode(errors="replace"))
        if isinstance(answer, dict) and "state" in answer:
            return answer
    return None


def dataplane_dead(status: dict[str, Any] | None, stall_restart_s: float) -> str:
    """Why a data plane with ``status`` counts as dead ("" when it does not): it ended,
    or it has been stalled for ``stall_restart_s``. Unknown (None) is not dead."""
    if status is None:
        return ""
    if status.get("state") == "dead":
        return f"data plane dead ({status.get('error') or 'thread ended'})"
    if status.get("state") == "stalled" and float(status.get("age_s", 0)) >= stall_restart_s:
        return f"data plane stalled for {float(status['age_s']):.0f} s"
    return ""
