"""Evidence of who set a run's pace, read from ``/proc`` while it trains.

:class:`experiments.accounting.TrainingWindow` samples these counters; the verdict of
:mod:`experiments.fidelity` rests on them:

- **scheduler counters** of every thread of the switch and agent processes
  (``/proc/PID/task/TID/schedstat``: nanoseconds on a CPU, nanoseconds runnable but
  waiting in a run queue). Time on a CPU plus time waiting for one is what a thread
  *wanted*: a switch starved by other processes shows it as waiting, not as CPU used;
- **the machine's CPU** (``/proc/stat``: every process, ours or not) as a share of its
  cores;
- **receive-buffer drops** of UDP sockets (``RcvbufErrors`` of ``/proc/PID/net/snmp``,
  read through an agent process, so in its host's network namespace): datagrams the
  kernel threw away because an agent did not read its socket fast enough.

The agent processes are found by their standard output: every harness agent writes it
to a ``*.out`` file in the run's directory (``/proc/PID/fd/1``).
"""

from __future__ import annotations

import os
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")


def thread_times(pid: int) -> dict[int, tuple[float, float]]:
    """TID -> (seconds on a CPU, seconds runnable but waiting for one) of every thread of
    a live process; empty if it is gone (or the kernel keeps no schedstat)."""
    out: dict[int, tuple[float, float]] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                run_ns, wait_ns, _ = f.read().split()
        except (OSError, ValueError):
            continue
        out[int(tid)] = (int(run_ns) / 1e9, int(wait_ns) / 1e9)
    return out


def machine_cpu() -> tuple[float, float]:
    """(busy, total) core-seconds of the whole machine since boot (``/proc/stat``; busy is
    everything but idle and iowait)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    # guest time is counted inside user time already: the first 8 fields are the total
    total = sum(fields[:8])
    return (total - idle) / _TICKS, total / _TICKS


def udp_rcvbuf_errors(pid: int) -> int | None:
    """``Udp: RcvbufErrors`` of the network namespace process ``pid`` lives in (None if
    it is gone)."""
    try:
        with open(f"/proc/{pid}/net/snmp") as f:
            lines = [ln.split() for ln in f if ln.startswith("Udp:")]
    except OSError:
        return None
    if len(lines) < 2 or "RcvbufErrors" not in lines[0]:
        return None
    return int(lines[1][lines[0].index("RcvbufErrors")])


def netns_of(pid: int) -> str | None:
    """The network namespace of a process (``/proc/PID/ns/net``'s link), None if gone."""
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def agent_pids(run_dir: Path | str, exclude: set[int] | None = None) -> dict[int, str]:
    """PID -> name (the output file's stem) of every process whose standard output is a
    ``*.out`` file under ``run_dir``."""
    root = str(Path(run_dir).resolve())
    out: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or (exclude and int(entry) in exclude):
            continue
        try:
            target = os.readlink(f"/proc/{entry}/fd/1")
        except OSError:
            continue
        if target.startswith(root + "/") and target.endswith(".out"):
            out[int(entry)] = Path(target).stem
    return out


def evidence_sample(switches: dict[str, int], agents: dict[int, str]) -> dict[str, float]:
    """One sample of the counters above, keyed for :func:`evidence_result`: per switch
    thread ``sw:PID:TID`` (on CPU + waiting) and ``swwait:PID:TID`` (waiting), per agent
    thread ``ag:``/``agwait:``, the machine's ``busy``/``total`` core-seconds and each
    agent namespace's ``drops:NS``."""
    out: dict[str, float] = {}
    for pid in switches.values():
        for tid, (run, wait) in thread_times(pid).items():
            out[f"sw:{pid}:{tid}"], out[f"swwait:{pid}:{tid}"] = run + wait, wait
    seen: set[str] = set()
    for pid in agents:
        for tid, (run, wait) in thread_times(pid).items():
            out[f"ag:{pid}:{tid}"], out[f"agwait:{pid}:{tid}"] = run + wait, wait
        ns = netns_of(pid)
        if ns is not None and ns not in seen and (d := udp_rcvbuf_errors(pid)) is not None:
            seen.add(ns)
            out[f"drops:{ns}"] = float(d)
    out["busy"], out["total"] = machine_cpu()
    return out


def evidence_result(delta: dict[str, float]) -> dict[str, float]:
    """The window's evidence from the counters' differences over it (seconds, except
    the drop count): ``switch_wait_s`` (switch threads runnable but not running),
    ``busiest_switch_wanted_s`` (the most one switch process's threads ran or waited
    to run, together),
    ``agent_cpu_window_s`` and ``agent_wait_s`` (the agent processes'), ``machine_busy``
    (every process's CPU over the machine's core-seconds) and ``rx_drops``."""
    def total(prefix: str) -> float:
        return sum(v for k, v in delta.items() if k.startswith(prefix))

    sw_wait, ag_wait = total("swwait:"), total("agwait:")
    per_process: dict[str, float] = {}
    for k, v in delta.items():
        if k.startswith("sw:"):
            pid = k.split(":")[1]
            per_process[pid] = per_process.get(pid, 0.0) + v
    return {
        "switch_wait_s": round(sw_wait, 3),
        "busiest_switch_wanted_s": round(max(per_process.values(), default=0.0), 3),
        "agent_cpu_window_s": round(total("ag:") - ag_wait, 3),
        "agent_wait_s": round(ag_wait, 3),
        "machine_busy": round(delta["busy"] / delta["total"], 3) if delta.get("total") else 0.0,
        "rx_drops": int(total("drops:")),
    }
