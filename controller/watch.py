"""Keep a network's switches alive: notice a switch that died or restarted, restart it and
tell it again what it was told (docs/faults.md).

:class:`SwitchWatcher` holds one P4Runtime stream per switch in the ``watcher`` role
(:data:`controller.roles.WATCHER`: it writes nothing on that stream, and its election id
is below every writer's, so on BMv2, which elects one primary across roles, it never
takes a deploy's, the NDN manager's or a shell's place). A stream that ends, or a switch
process that is gone, starts a recovery:

1. the process is gone: ``restart(name)`` starts it again (``Network.restart_switch``;
   an embedded switch group restarts as a whole, so every member recovers);
2. a switch that answers without a pipeline while its journal holds one (it was
   restarted, by us or anyone) gets the journal replayed (:func:`replay`): the recorded
   pipeline, then every recorded WriteRequest in order, as the default role's primary;
3. a process that runs and answers P4Runtime while its data plane is dead (its
   data-plane thread ended, or has not beaten for ``stall_restart`` seconds; the
   embedded target's heartbeat, ``targets/embedded/liveness.py``) is restarted and
   replayed as in 1 and 2. BMv2 has no such heartbeat: its process is what is watched.

Registers and counters start from zero: recovery is a clean slate plus the protocols'
own retransmissions.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from controller.roles import DEPLOY, WATCHER
from targets.embedded.liveness import dataplane_dead, probe_dataplane, runtime_socket_for
from targets.journal import JournalError, SwitchJournal, journal_for
from targets.p4rt_client import P4RuntimeClient, P4RuntimeError, get_pipeline, open_channel

__all__ = ["ReplayReport", "SwitchHealth", "SwitchWatcher", "probe", "replay"]


@dataclass
class SwitchHealth:
    """What the watcher knows of one switch."""

    name: str
    process: bool | None = None      # its process runs (None: unknown to the watcher)
    p4runtime: bool = False          # the watcher's stream is open
    pipeline: bool = False           # a pipeline is loaded
    dataplane: str | None = None     # its data plane's state (None: no heartbeat, e.g. BMv2)
    restarts: int = 0                # restarts the watcher did
    replays: int = 0                 # journal replays the watcher did
    last_restart: float | None = None  # time.time() of the last restart or replay
    error: str = ""                  # the last recovery error ("" once recovered)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ReplayReport:
    """What :func:`replay` wrote, and what the switch refused."""

    requests: int = 0
    updates: int = 0
    refused: list[str] | None = None


def replay(journal: SwitchJournal, address: str, device_id: int, timeout: float = 10.0) -> ReplayReport:
    """Set ``journal``'s pipeline on the switch at ``address`` and write its recorded
    requests in order, as the default role's primary (``controller.roles.DEPLOY``).

    A refused update (e.g. the delete of a multicast group that a restart already
    removed) is reported, not raised: the rest still goes in."""
    cfg = journal.pipeline()
    reqs = list(journal.writes())
    with P4RuntimeClient(address, device_id, election_id=DEPLOY.election_id, role=DEPLOY.name,
                         timeout=timeout) as c:
        if not c.is_primary:
            raise P4RuntimeError("PERMISSION_DENIED", f"{address}: another controller is the "
                                 f"default role's primary; cannot reload the pipeline")
        c.set_pipeline_config(cfg)
        rep = ReplayReport(refused=[])
        for req in reqs:
            try:
                c.write_updates(list(req.updates))
            except P4RuntimeError as e:
                rep.refused.append(str(e)[:300])  # type: ignore[union-attr]
            rep.requests += 1
            rep.updates += len(req.updates)
    return rep


def probe(address: str, device_id: int, timeout: float = 1.0) -> dict[str, bool]:
    """``{"p4runtime": answers, "pipeline": a pipeline is loaded}`` of one switch, by one
    unary GetForwardingPipelineConfig (no stream, no arbitration)."""
    ch = open_channel(address)
    try:
        cfg = get_pipeline(ch, device_id, timeout)
    except P4RuntimeError:
        return {"p4runtime": False, "pipeline": False}
    finally:
        ch.close()
    return {"p4runtime": True, "pipeline": cfg is not None}


class SwitchWatcher:
    """Watch switches ``{name: (address, device_id)}``; restart and replay them.

    ``alive(name)`` says whether a switch's process runs and ``restart(name)`` starts it
    again, returning every switch that restarted with it (a group); without them the
    watcher only replays journals to switches someone else restarted. ``on_change`` gets
    the health of every switch whenever one changes (from the watcher's threads).
    ``dataplane(name)`` is the switch's data-plane status (``Heartbeat.status``; None:
    unknown); by default the runtime-CLI socket beside a Unix P4Runtime socket is asked.
    A data plane dead, or stalled for ``stall_restart`` seconds, is restarted."""

    def __init__(self, switches: Mapping[str, tuple[str, int]], *,
                 alive: Callable[[str], bool] | None = None,
                 restart: Callable[[str], list[str]] | None = None,
                 on_change: Callable[[dict[str, SwitchHealth]], None] | None = None,
                 log: Callable[[str], None] | None = None, poll: float = 1.0,
                 dataplane: Callable[[str], dict[str, Any] | None] | None = None,
                 stall_restart: float = 30.0) -> None:
        self.switches = dict(switches)
        self.alive, self.restart = alive, restart
        self.dataplane = dataplane or self._probe_dataplane
        self.stall_restart = stall_restart
        self.on_change = on_change
        self.log = log or (lambda m: None)
        self.poll = poll
        self.health = {s: SwitchHealth(s) for s in self.switches}
        self._stop = threading.Event()
        self._restart_lock = threading.Lock()
        self._locks = {s: threading.Lock() for s in self.switches}
        self._threads: list[threading.Thread] = []
        self._changed = threading.Condition()

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> SwitchWatcher:
        """Start one thread per switch."""
        for s in self.switches:
            t = threading.Thread(target=self._run, args=(s,), name=f"watch-{s}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self) -> None:
        """Stop watching (closes the streams; the switches keep running)."""
        self._stop.set()
        for t in self._threads:
            t.join(timeout=10)
        self._threads.clear()

    def __enter__(self) -> SwitchWatcher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """Every switch's health as plain data."""
        with self._changed:
            return {s: h.as_dict() for s, h in self.health.items()}

    def wait_for(self, pred: Callable[[dict[str, SwitchHealth]], bool], timeout: float) -> bool:
        """Block until ``pred(health)`` holds (True) or ``timeout`` passes (False)."""
        with self._changed:
            return self._changed.wait_for(lambda: pred(self.health), timeout)

    # ------------------------------------------------------------------ internals
    def _set(self, name: str, **kw: Any) -> None:
        with self._changed:
            h = self.health[name]
            if all(getattr(h, k) == v for k, v in kw.items()):
                return
            for k, v in kw.items():
                setattr(h, k, v)
            self._changed.notify_all()
            snap = {s: SwitchHealth(**x.as_dict()) for s, x in self.health.items()}
        if self.on_change is not None:
            self.on_change(snap)

    def _process_alive(self, name: str) -> bool | None:
        return self.alive(name) if self.alive is not None else None

    def _probe_dataplane(self, name: str) -> dict[str, Any] | None:
        return probe_dataplane(runtime_socket_for(name, self.switches[name][0]))

    def _dataplane_dead(self, name: str) -> str:
        """Why ``name``'s data plane counts as dead ("" if it does not); notes its state."""
        status = self.dataplane(name)
        self._set(name, dataplane=status.get("state") if status else None)
        return dataplane_dead(status, self.stall_restart)

    def _run(self, name: str) -> None:
        addr, dev = self.switches[name]
        while not self._stop.is_set():
            alive = self._process_alive(name)
            self._set(name, process=alive)
            if alive is False:
                self._set(name, p4runtime=False, pipeline=False)
                self._recover(name)
                continue
            try:
                client = P4RuntimeClient(addr, dev, election_id=WATCHER.election_id, role=WATCHER.name,
                                         timeout=3.0)
            except P4RuntimeError:
                self._set(name, p4runtime=False)
                self._stop.wait(self.poll)
                continue
            why = ""
            try:
                self._set(name, p4runtime=True)
                self._ensure_pipeline(name)
                while not self._stop.is_set():
                    if client.wait_stream_end(self.poll):
                        self.log(f"{name}: P4Runtime stream ended")
                        break
                    if self._process_alive(name) is False:
                        break
                    why = self._dataplane_dead(name)
                    if why:
                        break
            finally:
                client.close()
            self._set(name, p4runtime=False)
            if why:
                self._recover(name, why)

    def _recover(self, name: str, dataplane: str = "") -> None:
        """Restart ``name``'s process (once for a whole group), then replay journals.
        ``dataplane``: why its data plane counts as dead, though its process runs."""
        if self.restart is None:
            self._stop.wait(self.poll)
            return
        with self._restart_lock:
            if self._stop.is_set():
                return
            if dataplane:
                # asked again, a moment later: another member of its group may have
                # restarted it already, or a stall may have been a pause (SIGSTOP) that ended
                self._stop.wait(min(self.poll, 1.0))
                dataplane = self._dataplane_dead(name)
                if not dataplane:
                    return
                self.log(f"{name}: {dataplane} while its process runs; restarting it")
            elif self._process_alive(name):
                return  # another member of its group restarted it already
            else:
                self.log(f"{name}: process gone; restarting it")
            try:
                names = self.restart(name)
            except Exception as e:  # reported in the health, retried after a pause
                self._set(name, error=f"restart failed: {type(e).__name__}: {e}")
                self.log(f"{name}: restart failed: {e}")
                self._stop.wait(self.poll)
                return
            now = time.time()
            for n in names:
                with self._changed:
                    self.health[n].restarts += 1
                self._set(n, process=True, last_restart=now, pipeline=False, dataplane=None)
        for n in names:
            self._ensure_pipeline(n)

    def _ensure_pipeline(self, name: str) -> None:
        """Replay ``name``'s journal when it runs no pipeline (once, under its lock)."""
        addr, dev = self.switches[name]
        with self._locks[name]:
            state = probe(addr, dev, timeout=3.0)
            if state["pipeline"] or not state["p4runtime"]:
                self._set(name, pipeline=state["pipeline"])
                return
            journal = journal_for(name, addr)
            if journal is None or not journal.exists():
                self._set(name, pipeline=False)
                return
            try:
                rep = replay(journal, addr, dev)
            except (P4RuntimeError, JournalError) as e:
                self._set(name, error=f"replay failed: {e}")
                self.log(f"{name}: replay failed: {e}")
                return
            with self._changed:
                self.health[name].replays += 1
            refused = f", {len(rep.refused or [])} refused" if rep.refused else ""
            self.log(f"{name}: replayed its journal ({rep.requests} requests, {rep.updates} updates{refused})")
            self._set(name, pipeline=True, error="", last_restart=time.time())
