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
    return {ln["ifname"].split("@")[0]: int(ln["stats64"]["tx"]["bytes"]) for ln in links
            if "stats64" in ln}


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
