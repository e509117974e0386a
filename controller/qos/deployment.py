"""Quality of service at run time: DSCP -> priority map and egress queue rate/depth.

Two parts of the switch decide who waits and who is dropped when a port is congested:

* the P4 ingress control ``PriorityClassifier`` (``p4src/include/priority.p4``), whose
  ``dscp_priority`` table sets ``standard_metadata.priority`` from the DSCP; its
  controller twin is :class:`controller.deploy.PriorityClassifier` (P4Runtime), and
  :func:`set_dscp_map` / :func:`read_dscp_map` change and read it on a running switch;
* the traffic manager's strict-priority egress queues (``--priority-queues N``), with a
  rate (packets/s) and a depth (packets) per queue. P4Runtime does not reach them: BMv2
  sets them over Thrift with ``simple_switch_CLI`` (``set_queue_rate``,
  ``set_queue_depth``); the embedded target serves the same commands on a Unix socket in
  the run directory (``targets/embedded/runtime_cli.py``) and adds per-queue counters
  (enqueued, dropped). :class:`EgressQueues` is their controller twin and speaks to both.

Priorities in this module are always ``standard_metadata.priority`` values (higher is
served first); :class:`EgressQueues` translates them to simple_switch's internal queue
index (``N - 1 - priority``) that the runtime CLI's ``PRIORITY`` argument names.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from finsy import P4TableEntry

from controller.deploy import Deployment, PriorityClassifier
from controller.p4runtime import DeployError

__all__ = [
    "Bmv2Runtime",
    "EgressQueues",
    "EmbeddedRuntime",
    "QosError",
    "QueueStats",
    "read_dscp_map",
    "runtime_for",
    "set_dscp_map",
    "static_partition",
]

SIMPLE_SWITCH_CLI = "simple_switch_CLI"


class QosError(DeployError):
    """A queue could not be configured or read (bad argument, unreachable switch, or a
    target that cannot do it)."""


#: the rate of a queue that a static partition leaves unused (packets/s): BMv2 reads a
#: rate of 0 as "unlimited", so an unused queue needs a small positive one
UNUSED_QUEUE_PPS = 1


def static_partition(pps: float, weights: Mapping[int, float], nb_queues: int,
                     unused_pps: int = UNUSED_QUEUE_PPS) -> dict[int, int]:
    """``{priority: packets/s}`` for every queue of a port, highest priority first:
    ``pps`` cut among the priorities of ``weights`` in proportion to their weights, after
    ``unused_pps`` for each queue not in ``weights``. Whole packets/s (simple_switch_CLI
    takes integers), rounded down, at least 1 each, so they add up to at most ``pps``.

    BMv2's stand-in for a line rate shared in strict priority: its priority queues
    (``QueueingLogicPriRL``) only have independent per-queue rates, so a queue can
    never borrow what another leaves idle; the port's total is still bounded by ``pps``.
    """
    if not pps or pps < 1:
        raise QosError(f"a static partition needs a port rate >= 1 packet/s, got {pps}")
    if not weights:
        raise QosError("a static partition needs at least one weighted priority")
    bad = [p for p in weights if not 0 <= p < nb_queues]
    if bad:
        raise QosError(f"priorities {bad} out of range: the port has {nb_queues} queue(s)")
    if any(w <= 0 for w in weights.values()):
        raise QosError(f"partition weights must be > 0, got {dict(weights)}")
    spare = int(pps) - unused_pps * (nb_queues - len(weights))
    if spare < len(weights):
        raise QosError(f"a port rate of {pps:g} packets/s cannot leave {unused_pps} packet/s to each of "
                       f"{nb_queues - len(weights)} unused queue(s) and 1 to each used one")
    total = sum(weights.values())
    return {p: (max(1, int(spare * weights[p] / total)) if p in weights else unused_pps)
            for p in range(nb_queues - 1, -1, -1)}


@dataclass
class QueueStats:
    """One egress queue: configuration and counters (embedded target)."""

    port: int
    priority: int
    rate_pps: float | None
    port_rate_pps: float | None
    depth: int
    occupancy: int
    enqueued: int
    dropped: int


class EmbeddedRuntime:
    """The embedded target's runtime-CLI socket (one connection per command batch)."""

    kind = "embedded"

    def __init__(self, path: str | Path, timeout: float = 5.0) -> None:
        self.path = str(path)
        self.timeout = timeout

    def run(self, lines: list[str]) -> list[str]:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(self.timeout)
                s.connect(self.path)
                f = s.makefile("rwb")
                answers = []
                for line in lines:
                    f.write(line.encode() + b"\n")
                    f.flush()
                    answers.append(f.readline().decode().rstrip("\n"))
                return answers
        except OSError as e:
            raise QosError(f"runtime CLI at {self.path}: {e}") from None


class Bmv2Runtime:
    """BMv2's Thrift runtime CLI, ``simple_switch_CLI --thrift-port P``, run in the
    switch's namespace (``mnexec -a PID``) when ``pid`` is given."""

    kind = "bmv2"

    def __init__(self, thrift_port: int, pid: int | None = None, timeout: float = 20.0) -> None:
        self.thrift_port = thrift_port
        self.pid = pid
        self.timeout = timeout

    def run(self, lines: list[str]) -> list[str]:
        exe = shutil.which(SIMPLE_SWITCH_CLI)
        if exe is None:
            raise QosError(f"{SIMPLE_SWITCH_CLI} not found: setting BMv2's queues needs BMv2 "
                           "built with Thrift (its runtime CLI)")
        argv = [exe, "--thrift-port", str(self.thrift_port)]
        if self.pid is not None:
            argv = ["mnexec", "-a", str(self.pid), *argv]
        r = subprocess.run(argv, input="\n".join(lines) + "\n", capture_output=True, text=True,
                           timeout=self.timeout)
        if r.returncode:
            raise QosError(f"{SIMPLE_SWITCH_CLI}: exit {r.returncode}: {r.stderr.strip()[-300:]}")
        bad = [ln for ln in r.stdout.splitlines() if "Error" in ln or "Invalid" in ln]
        if bad:
            raise QosError(f"{SIMPLE_SWITCH_CLI}: {bad[0].strip()}")
        return ["ok"] * len(lines)


def runtime_for(run_dir: str | Path, switch: str) -> EmbeddedRuntime | Bmv2Runtime:
    """The runtime CLI of ``switch`` of a running network: the embedded target's socket
    ``<run_dir>/<switch>.cli``, or the BMv2 Thrift endpoint ``<switch>.thrift`` that the
    network builder wrote."""
    d = Path(run_dir)
    sock, thrift = d / f"{switch}.cli", d / f"{switch}.thrift"
    if sock.exists():
        return EmbeddedRuntime(sock)
    if thrift.exists():
        info = json.loads(thrift.read_text())
        return Bmv2Runtime(int(info["thrift_port"]), int(info["pid"]))
    raise QosError(f"no runtime CLI for {switch} in {str(d)!r} (expected {sock.name} or "
                   f"{thrift.name}: is the network running, and started by gradnet?)")


class EgressQueues:
    """Controller twin of one switch's traffic manager: per-queue rate and depth, and
    (embedded target) per-queue counters.

    ``runtime`` is :func:`runtime_for`'s answer (or a socket path of the embedded
    target); ``nb_queues`` is the switch's ``--priority-queues``.
    """

    def __init__(self, runtime: EmbeddedRuntime | Bmv2Runtime | str | Path, nb_queues: int = 1,
                 name: str = "") -> None:
        self.runtime = runtime if isinstance(runtime, EmbeddedRuntime | Bmv2Runtime) \
            else EmbeddedRuntime(runtime)
        if nb_queues < 1:
            raise QosError(f"a port has at least one queue, got nb_queues={nb_queues}")
        self.nb_queues = nb_queues
        self.name = name or getattr(self.runtime, "path", "switch")

    @classmethod
    def of(cls, run_dir: str | Path, switch: str, nb_queues: int = 1) -> EgressQueues:
        """The queues of ``switch`` in a running network's run directory."""
        return cls(runtime_for(run_dir, switch), nb_queues, name=switch)

    @property
    def target(self) -> str:
        """``embedded`` or ``bmv2``."""
        return self.runtime.kind

    @property
    def has_counters(self) -> bool:
        """Whether :meth:`stats` and :meth:`counters` work (not on BMv2)."""
        return not isinstance(self.runtime, Bmv2Runtime)

    def _queue_index(self, priority: int | None) -> int | None:
        if priority is None:
            return None
        if not 0 <= priority < self.nb_queues:
            raise QosError(f"{self.name}: priority {priority} out of range: the switch has "
                           f"{self.nb_queues} queue(s) per port (priorities 0..{self.nb_queues - 1})")
        return self.nb_queues - 1 - priority

    def _command(self, cmd: str, value: float | int, port: int | None, priority: int | None) -> None:
        if port is None and priority is not None:
            raise QosError("a priority needs a port (as in simple_switch_CLI)")
        if port is not None and not 0 <= port < 512:
            raise QosError(f"port must be in 0..511, got {port}")
        q = self._queue_index(priority)
        words = [cmd, f"{value:g}" if isinstance(value, float) else str(value)]
        words += [str(port)] if port is not None else []
        words += [str(q)] if q is not None else []
        (answer,) = self.runtime.run([" ".join(words)])
        if answer != "ok":
            raise QosError(f"{self.name}: {' '.join(words)}: {answer}")

    def set_rate(self, pps: float | None, port: int | None = None, priority: int | None = None) -> None:
        """Limit the queue(s) to ``pps`` packets/s (None or 0: unlimited): every queue,
        every queue of ``port``, or the one serving ``priority`` on ``port``."""
        if pps is not None and pps < 0:
            raise QosError(f"rate must be >= 0 packets/s, got {pps}")
        self._command("set_queue_rate", float(pps or 0), port, priority)

    def set_port_rate(self, pps: float | None, port: int | None = None) -> None:
        """Give ``port`` (None: every port) a rate shared by its queues in strict
        priority, a line rate (None or 0: unlimited). Embedded target only: BMv2's
        queues have independent per-queue rates and no shared port rate."""
        if isinstance(self.runtime, Bmv2Runtime):
            raise QosError(f"{self.name}: BMv2 has no port rate shared by its priority queues "
                           "(each queue has its own rate): use set_rate per queue")
        if pps is not None and pps < 0:
            raise QosError(f"rate must be >= 0 packets/s, got {pps}")
        if port is not None and not 0 <= port < 512:
            raise QosError(f"port must be in 0..511, got {port}")
        words = ["set_port_rate", f"{float(pps or 0):g}"] + ([str(port)] if port is not None else [])
        (answer,) = self.runtime.run([" ".join(words)])
        if answer != "ok":
            raise QosError(f"{self.name}: {' '.join(words)}: {answer}")

    def set_port_byte_rate(self, bytes_per_s: float | None, port: int | None = None) -> None:
        """As :meth:`set_port_rate`, in bytes per second (a packet costs its length, not
        a full frame's share). Embedded target only."""
        if isinstance(self.runtime, Bmv2Runtime):
            raise QosError(f"{self.name}: BMv2 has no port rate shared by its priority queues")
        if bytes_per_s is not None and bytes_per_s < 0:
            raise QosError(f"rate must be >= 0 bytes/s, got {bytes_per_s}")
        if port is not None and not 0 <= port < 512:
            raise QosError(f"port must be in 0..511, got {port}")
        words = ["set_port_byte_rate", f"{float(bytes_per_s or 0):g}"] + ([str(port)] if port is not None else [])
        (answer,) = self.runtime.run([" ".join(words)])
        if answer != "ok":
            raise QosError(f"{self.name}: {' '.join(words)}: {answer}")

    def set_static_partition(self, pps: float, port: int, weights: Mapping[int, float],
                             unused_pps: int = UNUSED_QUEUE_PPS) -> dict[int, int]:
        """Cut ``pps`` among ``port``'s queues (:func:`static_partition`) and give each
        queue its share with :meth:`set_rate`; returns ``{priority: packets/s}``. Both
        targets; on BMv2 the only way to bound a port's total rate. The embedded target's
        shared port rate, if one was set, still applies on top."""
        rates = static_partition(pps, weights, self.nb_queues, unused_pps)
        if not 0 <= port < 512:
            raise QosError(f"port must be in 0..511, got {port}")
        cmds = [f"set_queue_rate {r} {port} {self._queue_index(p)}" for p, r in rates.items()]
        for cmd, answer in zip(cmds, self.runtime.run(cmds), strict=True):
            if answer != "ok":
                raise QosError(f"{self.name}: {cmd}: {answer}")
        return rates

    def set_depth(self, depth: int, port: int | None = None, priority: int | None = None) -> None:
        """Set the depth (packets) of the queue(s), scoped like :meth:`set_rate`."""
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
            raise QosError(f"depth must be an integer >= 1, got {depth!r}")
        self._command("set_queue_depth", depth, port, priority)

    def stats(self, port: int | None = None) -> list[QueueStats]:
        """Per-queue configuration and counters (embedded target only: BMv2's runtime CLI
        has no per-queue counters)."""
        if isinstance(self.runtime, Bmv2Runtime):
            raise QosError(f"{self.name}: BMv2's runtime CLI has no per-queue counters "
                           "(enqueued/dropped are an embedded-target extension)")
        (answer,) = self.runtime.run([f"get_queue_stats {port}" if port is not None else "get_queue_stats"])
        if answer.startswith("error"):
            raise QosError(f"{self.name}: {answer}")
        return [QueueStats(**{k: d[k] for k in QueueStats.__dataclass_fields__}) for d in json.loads(answer)]

    def counters(self, port: int) -> dict[int, dict[str, int]]:
        """``{priority: {"enqueued": n, "dropped": n}}`` of one port."""
        return {q.priority: {"enqueued": q.enqueued, "dropped": q.dropped} for q in self.stats(port)}


# ----------------------------------------------------------------------------- DSCP map


async def read_dscp_map(dep: Deployment, switch: str) -> dict[int, int]:
    """``{dscp: priority}`` installed in ``switch``'s ``dscp_priority`` table."""
    pc = dep.block(switch, PriorityClassifier)
    out = {}
    for e in await dep.session(switch).read(P4TableEntry(pc.name("dscp_priority"))):
        # one ternary key, decoded by finsy as (value, mask) of the diffserv byte
        key = next(iter(e.match.values()), 0) if e.match else 0
        value = key[0] if isinstance(key, tuple) else int(key)
        if e.action is not None and getattr(e.action, "args", None):
            out[value >> 2] = int(e.action.args["prio"])
    return dict(sorted(out.items()))


async def set_dscp_map(dep: Deployment, switch: str, rules: Mapping[int, int]) -> int:
    """Install ``{dscp: priority}`` on a running ``switch``, replacing (MODIFY) entries
    that exist; returns the number of entries written."""
    pc = dep.block(switch, PriorityClassifier)
    pc.dscp_entries(rules)  # validates DSCPs and priorities (DeployError)
    have = await read_dscp_map(dep, switch)
    updates: list[Any] = []
    for dscp, prio in sorted(rules.items()):
        # the same entry as PriorityClassifier.dscp_entries, but MODIFY where one exists
        entry = pc.entry("dscp_priority", {"hdr.ipv4.diffserv": f"{dscp << 2:#04x}/&0xfc"},
                         "set_priority", priority=1, prio=prio)
        updates.append(~entry if dscp in have else +entry)
    if updates:
        await dep.session(switch).write(updates)
    return len(updates)
