"""The BML schedule: every server's exchanges, per parameter set (thread), level by level.

``N**k`` servers in a BCube with ``k`` levels of ``N``-port switches (the specified
convention, :func:`topologies.bcube`): server ``s`` has digits ``s // N**l % N`` for
``l = 0..k-1`` and reaches, through its level-``l`` NIC and one switch, exactly the
``N - 1`` servers whose digits differ from its own only at position ``l``.

The gradient of ``values`` elements is cut into ``k`` contiguous parameter sets; thread
``j`` owns set ``j`` and visits the levels in the order ``j, j+1, ..., j+k-1`` (mod
``k``), so at every stage the ``k`` threads of a server use ``k`` different NICs.

* Aggregation, stage ``i`` at level ``l``: the server's current range
  (the whole set at stage 0, else its result of stage ``i-1``) -- the same range on all
  ``N`` servers of its level-``l`` switch -- is cut into ``N`` slices; the server whose
  level-``l`` digit is ``d`` reduces slice ``d``: it sends slice ``d'`` to the peer with
  digit ``d'`` and adds the ``N - 1`` copies of slice ``d`` it receives.
* Distribution, the levels in reverse order: every server sends the
  slice it reduced at that level to its ``N - 1`` peers and receives theirs, so after
  the stage it holds the whole range the stage's slices were cut from.

Slices need not be equal: a range ``[a, b)`` is cut at ``a + (b - a) * d // N``, so any
``N`` and any length work (empty slices included).

The baselines' vocabulary lives here too (the controller plans them, the agents run
them): :data:`RAIL_SCHEMES`, the k-rail baselines (part ``j`` of ``k`` contiguous parts,
``cut((0, values), k)[j]``, runs the named one-NIC algorithm on rail ``j``), and
:data:`DEFAULT_PIECES`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = [
    "DEFAULT_PIECES",
    "MAX_SERVERS",
    "RAIL_SCHEMES",
    "BcubeSchedule",
    "Exchange",
    "ScheduleError",
    "cut",
    "simulate",
]

#: Servers the address plan (and the int32 fixed-point bound) allows.
MAX_SERVERS = 256 * 254

Range = tuple[int, int]

#: The k-rail baselines and the one-NIC algorithm each runs on each rail.
RAIL_SCHEMES = {"rail_ring": "ring", "rail_sharded_ps": "sharded_ps"}
#: Default pieces per shard (sharded PS) or per chunk (ring), k-rail or not.
DEFAULT_PIECES = {"sharded_ps": 8, "ring": 4, "rail_sharded_ps": 8, "rail_ring": 4}


class ScheduleError(ValueError):
    """Bad BCube parameters (N, k, values) or a server/thread that does not exist."""


def cut(rng: Range, parts: int) -> list[Range]:
    """``[a, b)`` cut into ``parts`` contiguous ranges, sizes differing by at most one."""
    a, b = rng
    bounds = [a + (b - a) * d // parts for d in range(parts + 1)]
    return [(bounds[d], bounds[d + 1]) for d in range(parts)]


@dataclass(frozen=True)
class Exchange:
    """One stage of one thread on one server.

    ``peers[d]`` is the server whose level-``level`` digit is ``d`` (``peers[own]`` is
    this server); ``slices[d]`` is the slice that server ``peers[d]`` reduces at this
    level. Reduce: send ``slices[d]`` to ``peers[d]``, receive ``slices[own]`` from
    every peer and add. Gather: send ``slices[own]`` to every peer, receive
    ``slices[d]`` from ``peers[d]``.
    """

    phase: Literal["reduce", "gather"]
    stage: int  # 0..2k-1: reduce stages 0..k-1, then gather stages k..2k-1
    level: int
    own: int
    peers: tuple[int, ...]
    slices: tuple[Range, ...]

    def sends(self) -> dict[int, Range]:
        """``{peer: range sent to it}``."""
        if self.phase == "reduce":
            return {p: self.slices[d] for d, p in enumerate(self.peers) if d != self.own}
        return {p: self.slices[self.own] for d, p in enumerate(self.peers) if d != self.own}

    def receives(self) -> dict[int, Range]:
        """``{peer: range received from it}``."""
        if self.phase == "reduce":
            return {p: self.slices[self.own] for d, p in enumerate(self.peers) if d != self.own}
        return {p: self.slices[d] for d, p in enumerate(self.peers) if d != self.own}


class BcubeSchedule:
    """The complete BML schedule of BCube(``n``, ``k``) for a gradient of ``values``."""

    def __init__(self, n: int, k: int, values: int) -> None:
        for name, v, lo in (("N", n, 2), ("k", k, 2), ("values", values, 1)):
            if isinstance(v, bool) or not isinstance(v, int | np.integer):
                raise ScheduleError(f"{name} must be an integer, got {v!r}")
            if v < lo:
                why = " (BML: N and k are integers >= 2)" if name != "values" else ""
                raise ScheduleError(f"{name} must be >= {lo}, got {v}{why}")
        if k > 16 or n**k > MAX_SERVERS:
            raise ScheduleError(f"BCube({n}, {k}) has {n}**{k} servers, more than {MAX_SERVERS}")
        self.n, self.k, self.values = int(n), int(k), int(values)
        self.servers = self.n**self.k

    def __repr__(self) -> str:
        return f"BcubeSchedule(n={self.n}, k={self.k}, values={self.values})"

    # -- addressing ------------------------------------------------------------------
    def _check_server(self, s: int) -> int:
        if isinstance(s, bool) or not isinstance(s, int | np.integer) or not 0 <= s < self.servers:
            raise ScheduleError(f"server must be in 0..{self.servers - 1}, got {s!r}")
        return int(s)

    def _check_thread(self, j: int) -> int:
        if isinstance(j, bool) or not isinstance(j, int | np.integer) or not 0 <= j < self.k:
            raise ScheduleError(f"thread must be in 0..{self.k - 1}, got {j!r}")
        return int(j)

    def digits(self, s: int) -> tuple[int, ...]:
        """Digits of server ``s``, index = level (``topologies.bcube``'s ``digits``)."""
        s = self._check_server(s)
        return tuple((s // self.n**lvl) % self.n for lvl in range(self.k))

    def peers(self, s: int, level: int) -> tuple[int, ...]:
        """Servers on ``s``'s level-``level`` switch, indexed by their digit there."""
        s = self._check_server(s)
        if not 0 <= level < self.k:
            raise ScheduleError(f"level must be in 0..{self.k - 1}, got {level!r}")
        base = s - ((s // self.n**level) % self.n) * self.n**level
        return tuple(base + d * self.n**level for d in range(self.n))

    def level_order(self, thread: int) -> list[int]:
        """Levels thread ``thread`` aggregates at, in order (it starts at its own level)."""
        j = self._check_thread(thread)
        return [(j + i) % self.k for i in range(self.k)]

    def parameter_set(self, thread: int) -> Range:
        """The contiguous range of the gradient that thread ``thread`` synchronizes."""
        return cut((0, self.values), self.k)[self._check_thread(thread)]

    # -- the schedule ----------------------------------------------------------------
    def exchanges(self, server: int, thread: int, rng: Range | None = None) -> list[Exchange]:
        """The ``2k`` stages of ``thread`` on ``server``: k reduce, then k gather.

        ``rng`` (default: the thread's whole parameter set) runs the same schedule on a
        piece of the set, for agents that pipeline a set in pieces."""
        s = self._check_server(server)
        if rng is None:
            rng = self.parameter_set(thread)
        elif not 0 <= rng[0] <= rng[1] <= self.values:
            raise ScheduleError(f"range {rng} is outside [0, {self.values})")
        digits = self.digits(s)
        reduce: list[Exchange] = []
        for i, level in enumerate(self.level_order(thread)):
            slices = tuple(cut(rng, self.n))
            own = digits[level]
            reduce.append(Exchange("reduce", i, level, own, self.peers(s, level), slices))
            rng = slices[own]
        gather = [
            Exchange("gather", 2 * self.k - 1 - e.stage, e.level, e.own, e.peers, e.slices)
            for e in reversed(reduce)
        ]
        return reduce + gather

    def reduced_range(self, server: int, thread: int) -> Range:
        """The slice of set ``thread`` that ``server`` holds fully reduced after the last
        aggregation stage (``1/N**k`` of the set)."""
        last = self.exchanges(server, thread)[self.k - 1]
        return last.slices[last.own]

    def owner_table(self, thread: int) -> list[list[tuple[int, Range]]]:
        """``table[i]`` = ``[(server, slice it reduces at aggregation stage i)]``."""
        j = self._check_thread(thread)
        rows: list[list[tuple[int, Range]]] = [[] for _ in range(self.k)]
        for s in range(self.servers):
            for e in self.exchanges(s, j)[: self.k]:
                rows[e.stage].append((s, e.slices[e.own]))
        return rows

    def nic_bytes(self, bytes_per_value: int = 4) -> np.ndarray:
        """Payload bytes each server sends per level NIC: array ``[server, level]``
        (receives are the same by symmetry)."""
        out = np.zeros((self.servers, self.k), dtype=np.int64)
        for s in range(self.servers):
            for j in range(self.k):
                for e in self.exchanges(s, j):
                    out[s, e.level] += sum(b - a for a, b in e.sends().values()) * bytes_per_value
        return out

    def stage_bytes(self, thread: int, bytes_per_value: int = 4) -> list[int]:
        """Per stage of ``thread``, the most payload bytes any server sends (the stage's
        length on a NIC at line rate)."""
        out = [0] * (2 * self.k)
        for s in range(self.servers):
            for e in self.exchanges(s, thread):
                sent = sum(b - a for a, b in e.sends().values()) * bytes_per_value
                out[e.stage] = max(out[e.stage], sent)
        return out


def simulate(schedule: BcubeSchedule, gradients: Sequence[np.ndarray],
             pipeline: int = 1) -> list[np.ndarray]:
    """Run the schedule in memory, stage by stage, on every server and thread at once.

    Every message is taken from the sender's buffer before any receiver changes its
    own (as on the wire), so the result is what the agents compute; ``pipeline`` cuts
    every parameter set into pieces as the agent's option of that name does. Returns
    each server's final buffer (int64).
    """
    if len(gradients) != schedule.servers:
        raise ScheduleError(f"need {schedule.servers} gradients, got {len(gradients)}")
    bufs = [np.array(g, dtype=np.int64).ravel() for g in gradients]
    for b in bufs:
        if b.size != schedule.values:
            raise ScheduleError(f"every gradient must have {schedule.values} values, got {b.size}")
    pieces = [(j, rng) for j in range(schedule.k)
              for rng in cut(schedule.parameter_set(j), pipeline)]
    plans = [[schedule.exchanges(s, j, rng) for j, rng in pieces] for s in range(schedule.servers)]
    for stage in range(2 * schedule.k):
        inbox: list[list[tuple[str, Range, np.ndarray]]] = [[] for _ in bufs]
        for s in range(schedule.servers):
            for e in (p[stage] for p in plans[s]):
                for peer, (a, b) in e.sends().items():
                    inbox[peer].append((e.phase, (a, b), bufs[s][a:b].copy()))
        for s, msgs in enumerate(inbox):
            for phase, (a, b), data in msgs:
                if phase == "reduce":
                    bufs[s][a:b] += data
                else:
                    bufs[s][a:b] = data
    return bufs
