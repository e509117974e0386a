"""The data-plane loop: one thread, one epoll over the ports of one or more switches.

Nothing that one packet or one switch does may end it: each switch's receive and
service steps run under a guard (the per-packet path has its own, which drops and
counts the packet), and every iteration beats the loop's :class:`Heartbeat`, at least
every ``BEAT_S`` when idle, so that a loop that did end or hang shows
(``targets/embedded/liveness.py``, docs/faults.md).
"""

from __future__ import annotations

import select
import threading
import time
from typing import Any, Protocol

from targets.embedded.liveness import BEAT_S, DataPlaneFault, Heartbeat


class Switch(Protocol):
    """What the loop needs of a switch (``targets.embedded.switch.Switch`` is one; the
    switch module builds on this one, so the loop names only the interface)."""

    heartbeat: Heartbeat | None

    def event_fds(self) -> list[int]: ...

    def on_readable(self, fd: int) -> None: ...

    def service(self) -> float | None: ...

    def fault(self, what: str, *args: object) -> None: ...

    def log_fault_now(self, what: str) -> None: ...


def run_switches(switches: list[Switch], stop: threading.Event, heartbeat: Heartbeat | None = None) -> None:
    """One data-plane thread for several switches (one epoll over all their ports) until
    ``stop`` is set and a switch's wake-up pipe is written (or ``BEAT_S`` passes).

    Emulating many switches on few cores, one process per switch pays a wake-up, a
    context switch and cold caches for almost every packet; a process that serves a
    group of switches handles the packets of all of them in one pass. Every switch gets
    ``heartbeat`` (a new one by default) as its ``heartbeat``."""
    hb = heartbeat or Heartbeat()
    hb.thread = threading.current_thread()
    for sw in switches:
        sw.heartbeat = hb
    try:
        _loop(switches, stop, hb)
    except BaseException as e:
        hb.error = f"{type(e).__name__}: {e}"
        if switches:
            switches[0].log_fault_now("data-plane loop ended")
        if not isinstance(e, Exception):
            raise
        # logged and recorded in the heartbeat (``dead``): the thread ends quietly
    finally:
        hb.stopping = stop.is_set()
        hb.ended = True


def _loop(switches: list[Switch], stop: threading.Event, hb: Heartbeat) -> None:
    ep = select.epoll()
    owner: dict[int, Switch] = {}
    for sw in switches:
        for fd in sw.event_fds():
            ep.register(fd, select.EPOLLIN)
            owner[fd] = sw
    due: dict[Switch, float] = {}  # switch -> monotonic time its queues need service
    native: Any = None  # the C half of the loop, once a switch runs a native program
    try:
        while not stop.is_set():
            hb.beat()
            if hb.fault is not None:
                raise DataPlaneFault(f"injected fault: {hb.fault}")
            wait = BEAT_S
            if due:
                wait = min(max(min(due.values()) - time.monotonic(), 0.0001), BEAT_S)
            active: dict[Switch, None] = {}
            if native is None and any(getattr(sw, "native_loop_ok", bool)() for sw in switches):
                from targets.embedded.native import nloop  # builds loop.c (cached)

                native = nloop.make(ep) or False
            if native and native.refresh(switches):
                # ports of native programs: receive, pipelines and send in C, until idle,
                # a time budget, a packet for the Python path or a Python fd is ready
                why, slow_sw = native.run(wait)
                if slow_sw is not None:
                    active[slow_sw] = None
                events = ep.poll(0) if why == native.PYTHON else []
            else:
                events = ep.poll(wait)
            for fd, _ in events:
                sw = owner[fd]
                try:
                    sw.on_readable(fd)
                except Exception:  # what the per-packet guard did not catch: the batch
                    sw.fault("receiving")
                active[sw] = None
            if due:
                now = time.monotonic()
                for sw, t in list(due.items()):
                    if t <= now:
                        active[sw] = None
            for sw in active:
                try:
                    t = sw.service()
                except Exception:
                    sw.fault("dequeueing or transmitting")
                    t = None
                if t is None:
                    due.pop(sw, None)
                else:
                    due[sw] = time.monotonic() + t
    finally:
        if native:
            native.close()
        ep.close()
