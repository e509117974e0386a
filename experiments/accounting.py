"""Where a run's time went: link bytes against line rate, and CPU of switches and agents.

A synchronization on an emulated network is limited either by its links or by the CPU
that emulates it (switch processes and agents share the machine's cores). To tell which,
an experiment takes two snapshots around a run:

- every interface's transmitted bytes (``ip -j -s link`` in each node's namespace), which
  give the bytes that crossed each directed link; the **line-rate bound** is the time the
  busiest link needs for them at its capacity (``bytes·8 / capacity``): no schedule on
  that network moves the same traffic faster;
- each switch process's CPU seconds (``/proc/PID/stat``; a process serving a group of
  embedded switches counts once, as ``switches-N``). Agents report their own CPU
  seconds (``cpu_s`` in their JSON summaries).

``measured / bound`` near 1 means the links decided the time; much larger, with a switch
near ``seconds`` of CPU, means the emulator did.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from experiments.cpu_evidence import agent_pids, evidence_result, evidence_sample
from topologies.base import Topology, iface_name

_TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a live process (None if it is gone)."""
    try:
        stat = open(f"/proc/{pid}/stat").read()  # noqa: SIM115 (one short read)
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def process_rss_mib(pid: int) -> float | None:
    """Resident memory of a live process in MiB (None if it is gone)."""
    try:
        for line in open(f"/proc/{pid}/status"):  # noqa: SIM115 (one short read)
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def switch_processes(net: Any) -> dict[str, int]:
    """Name -> PID of every switch process of a running network (a group of embedded
    switches sharing one process counts once, as ``switches-N``)."""
    out: dict[str, int] = {}
    for sw in net.net.switches:
        pid = getattr(getattr(sw, "proc", None), "pid", None)
        group = getattr(sw, "group", None)
        name = f"switches-{group.index}" if group is not None else sw.name
        if pid is not None:
            out.setdefault(name, pid)
    return out


def _tx_bytes(node: Any) -> dict[str, int]:
    out = node.cmd("ip -j -s link show 2>/dev/null")
    try:
        links = json.loads(out)
    except ValueError:
        return {}
    tx = {ln["ifname"].split("@")[0]: int(ln["stats64"]["tx"]["bytes"]) for ln in links if "stats64" in ln}
    for iface, (sent, _) in memlink_bytes(node).items():
        tx[iface] = tx.get(iface, 0) + sent
    return tx


def memlink_rows(node: Any) -> list[dict[str, Any]]:
    """An embedded switch's in-memory links as its runtime's ``memlinks`` lists them (one
    dict a link: port, peer, ``in_memory``, both rings' counters; docs/embedded.md,
    "In-memory links"); [] for hosts, BMv2, or a switch that cannot answer (an older
    one, one restarting)."""
    path = getattr(node, "runtime_socket", None)
    if not path or not os.path.exists(path) or getattr(node, "target", "embedded") != "embedded":
        return []
    from controller.qos.deployment import EmbeddedRuntime, QosError

    try:
        rows = json.loads(EmbeddedRuntime(path).run(["memlinks"])[0])
    except (QosError, ValueError, IndexError):
        return []
    return rows if isinstance(rows, list) else []


def memlink_counters(node: Any) -> dict[str, dict[str, int]]:
    """``{interface: {tx_packets, tx_bytes, rx_packets, rx_bytes}}`` that an embedded
    switch's in-memory links carried (:func:`memlink_rows`): its kernel counters do not
    see them, so every reader of a switch's interface counters adds these."""
    try:
        return {f"{node.name}-eth{r['port']}": {
            "tx_packets": int(r["tx"]["tx_packets"]), "tx_bytes": int(r["tx"]["tx_bytes"]),
            "rx_packets": int(r["rx"]["rx_packets"]), "rx_bytes": int(r["rx"]["rx_bytes"])}
            for r in memlink_rows(node)}
    except (KeyError, TypeError):
        return {}  # an older switch's rows: its kernel counters only


def memlink_bytes(node: Any) -> dict[str, tuple[int, int]]:
    """``{interface: (tx bytes, rx bytes)}`` of :func:`memlink_counters`."""
    return {i: (c["tx_bytes"], c["rx_bytes"]) for i, c in memlink_counters(node).items()}


@dataclass
class Snapshot:
    """Interface tx bytes of every node; CPU seconds and resident memory of every switch
    process."""

    tx: dict[str, dict[str, int]] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)
    rss_mib: dict[str, float] = field(default_factory=dict)  # resident memory per switch process

    @classmethod
    def take(cls, net: Any) -> Snapshot:
        """Read the counters of every node of a running ``topologies.network.Network``."""
        snap = cls()
        for node in (*net.net.hosts, *net.net.switches):
            snap.tx[node.name] = _tx_bytes(node)
        # switches that share a process (targets.launch.SwitchGroup) count once, by the
        # group's name (its log file's)
        for name, pid in switch_processes(net).items():
            if (c := process_cpu_seconds(pid)) is not None:
                snap.cpu[name] = c
            if (m := process_rss_mib(pid)) is not None:
                snap.rss_mib[name] = m
        return snap


@dataclass
class TimeSplit:
    """Line-rate bound and CPU of one run (see the module doc)."""

    bound_s: float
    busiest_link: str
    busiest_bytes: int
    link_bytes: dict[str, int]
    switch_cpu_s: dict[str, float]
    agent_cpu_s: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        busiest_sw = max(self.switch_cpu_s, key=self.switch_cpu_s.get, default=None)
        return {
            "line_rate_bound_s": round(self.bound_s, 4), "busiest_link": self.busiest_link,
            "busiest_link_bytes": self.busiest_bytes,
            "switch_cpu_s_total": round(sum(self.switch_cpu_s.values()), 3),
            "busiest_switch": busiest_sw,
            "switch_cpu_s": {k: round(v, 3) for k, v in self.switch_cpu_s.items()},
            "busiest_switch_cpu_s": round(self.switch_cpu_s.get(busiest_sw, 0.0), 3)
            if busiest_sw else 0.0,
            "agent_cpu_s": {k: round(v, 3) for k, v in self.agent_cpu_s.items()},
            "link_bytes": self.link_bytes,
        }


def time_split(topo: Topology, before: Snapshot, after: Snapshot,
               agent_cpu_s: dict[str, float] | None = None) -> TimeSplit:
    """Bytes per directed link between two snapshots, the busiest link's time at line
    rate, and the CPU each switch process used."""
    link_bytes: dict[str, int] = {}
    bound, busiest, busiest_bytes = 0.0, "-", 0
    for ln in topo.links():
        for a, pa, b in ((ln.a, ln.port_a, ln.b), (ln.b, ln.port_b, ln.a)):
            iface = iface_name(a, pa)
            sent = after.tx.get(a, {}).get(iface, 0) - before.tx.get(a, {}).get(iface, 0)
            if sent <= 0:
                continue
            link_bytes[f"{a}->{b}"] = sent
            t = sent * 8 / (ln.capacity * 1e6)
            if t > bound:
                bound, busiest, busiest_bytes = t, f"{a}->{b}", sent
    cpu = {s: after.cpu[s] - before.cpu.get(s, 0.0) for s in after.cpu}
    return TimeSplit(bound, busiest, busiest_bytes, link_bytes, cpu, dict(agent_cpu_s or {}))


class TrainingWindow:
    """The CPU of the switch processes during a run's training window only.

    A thread samples every switch process's CPU seconds (``/proc``) every ``period`` s,
    and watches the agents' output files under ``agent_dir``: the training window runs
    from the first evaluation record (a JSON line with ``"step":``, which every scheme's
    evaluator prints at step 0 as its clock starts) to the last one (the final
    evaluation, at the end of the last epoch). Start-up (imports, model and data loading,
    rendezvous, the data distribution of token), the PS's idle exit and teardown are
    left out; the agents report their own CPU from the training's start (``cpu_s``)."""

    MARK = b'"step":'

    def __init__(self, net: Any, agent_dir: Any, period: float = 0.2) -> None:
        import threading

        self.pids = switch_processes(net)
        self.dir, self.period = agent_dir, period
        self.samples: list[tuple[float, dict[str, float]]] = []  # (time, CPU s per process)
        # (time, counters of experiments.cpu_evidence): run-queue waits, threads, the
        # machine's CPU, the agents' CPU and their namespaces' UDP receive-buffer drops
        self.evidence: list[tuple[float, dict[str, float]]] = []
        self.agents: dict[int, str] = {}
        self.first: float | None = None
        self.last: float | None = None
        self._seen: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="training-window", daemon=True)

    def __enter__(self) -> TrainingWindow:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._sample()

    def _sample(self) -> None:
        import time
        from pathlib import Path

        t = time.monotonic()
        self.samples.append((t, {n: c for n, p in self.pids.items()
                                 if (c := process_cpu_seconds(p)) is not None}))
        if len(self.samples) % 5 == 1:  # agents start after the window opens: look again
            self.agents.update(agent_pids(self.dir, exclude=set(self.pids.values())))
        self.evidence.append((t, evidence_sample(self.pids, self.agents)))
        for f in Path(self.dir).rglob("*.out"):
            try:
                with open(f, "rb") as fh:
                    fh.seek(self._seen.get(str(f), 0))
                    new = fh.read()
            except OSError:
                continue
            # count only whole lines: a half-written record is read again next time
            new = new[:new.rfind(b"\n") + 1]
            self._seen[str(f)] = self._seen.get(str(f), 0) + len(new)
            if self.MARK in new:
                self.first = t if self.first is None else self.first
                self.last = t

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self._sample()

    def _cpu_at(self, t: float, name: str, samples: list | None = None) -> float:
        """Process ``name``'s CPU seconds (or another counter of ``samples``) at time
        ``t``, interpolated between samples."""
        pts = [(ts, c[name]) for ts, c in (self.samples if samples is None else samples) if name in c]
        for (t0, c0), (t1, c1) in zip(pts, pts[1:], strict=False):
            if t0 <= t <= t1:
                return c0 + (c1 - c0) * ((t - t0) / (t1 - t0) if t1 > t0 else 0.0)
        return pts[-1][1] if pts and t > pts[-1][0] else (pts[0][1] if pts else 0.0)

    def result(self) -> dict[str, float] | None:
        """``window_s``, the switch processes' ``switch_cpu_s`` in it and the busiest one's
        ``busiest_switch_cpu_s`` (a switch process runs one data-plane thread: near
        ``window_s`` it is saturated whatever the other cores do); None: no record seen,
        or only one."""
        if self.first is None or self.last is None or self.last <= self.first:
            return None
        per = [self._cpu_at(self.last, n) - self._cpu_at(self.first, n) for n in self.pids]
        keys = {k for _, c in self.evidence for k in c}
        ev = {k: self._cpu_at(self.last, k, self.evidence) - self._cpu_at(self.first, k, self.evidence)
              for k in keys}
        return {"window_s": round(self.last - self.first, 3), "switch_cpu_s": round(sum(per), 3),
                "busiest_switch_cpu_s": round(max(per, default=0.0), 3), **evidence_result(ev)}
