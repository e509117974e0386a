"""The traffic manager's queues and their configuration (rates, depths, port rates),
as a mixin of ``Switch``: the data plane enqueues and drains, the control plane
(runtime CLI) configures and reads queue stats from another thread."""

from __future__ import annotations

import collections
from collections.abc import Callable

#: How far behind a port's rate the switch's loop may fall and still catch up: while
#: packets wait, a port rate earns up to this many seconds of frames. With a bucket of one
#: frame, every late wake-up of the loop (a loaded CPU) lost the rate it should have sent,
#: and a port set to 1,651 pkt/s served well under it (docs/differentiated.md, "Deadline").
PORT_CATCH_UP_S = 0.01


class PortQueues:
    """One egress port's queues: strict priority, optional rate (pps) and depth."""

    __slots__ = ("queues", "rate", "tokens", "last", "depth", "enqueued", "dropped",
                 "port_rate", "port_tokens", "port_last", "port_frame")

    def __init__(self, nb_queues: int, depth: int) -> None:
        self.queues = [collections.deque() for _ in range(nb_queues)]
        self.rate: list[float | None] = [None] * nb_queues
        self.tokens = [1.0] * nb_queues
        self.last = [0.0] * nb_queues
        self.depth = [depth] * nb_queues
        # per-queue counters (index = queue slot, highest priority first), read by the
        # runtime CLI's get_queue_stats
        self.enqueued = [0] * nb_queues
        self.dropped = [0] * nb_queues
        # optional rate of the whole port, shared by its queues in strict priority (a
        # line rate; gradnet extension: BMv2 only has per-queue rates)
        self.port_rate: float | None = None
        self.port_tokens = 1.0
        self.port_last = 0.0
        # None: port_rate counts packets; else it counts frames of port_frame bytes and a
        # packet costs its length in them (a byte rate: port_rate * port_frame bytes/s)
        self.port_frame: int | None = None

    def size(self) -> int:
        return sum(len(q) for q in self.queues)


class TrafficConfigMixin:
    """Queue rates and depths per port and priority, like BMv2's set_queue_rate /
    set_queue_depth, plus whole-port rates (a gradnet extension)."""

    nb_queues: int
    queue_depth: int
    _ports: dict
    _tm: dict[int, PortQueues]
    _rate_cfg: dict[tuple[int | None, int | None], float]
    _depth_cfg: dict[tuple[int | None, int | None], int]
    _port_rate_cfg: dict[int | None, float | None]
    _port_frame_cfg: dict[int | None, int | None]
    _shaped: bool
    wake: Callable[[], None]  # Switch.wake: the data plane re-plans its dequeue timer

    def set_queue_rate(self, pps: float | None, port: int | None = None, priority: int | None = None) -> None:
        """Limit a queue's rate in packets/s (None: unlimited), like BMv2's set_queue_rate."""
        self._set_cfg(self._rate_cfg, pps, port, priority)

    def set_queue_depth(self, depth: int, port: int | None = None, priority: int | None = None) -> None:
        """Set a queue's depth in packets, like BMv2's set_queue_depth."""
        self._set_cfg(self._depth_cfg, depth, port, priority)

    def set_port_rate(self, pps: float | None, port: int | None = None, frame_bytes: int | None = None) -> None:
        """Limit a whole port (None: every port) to ``pps`` packets/s, shared by its
        queues in strict priority, like a line rate (None: unlimited). A gradnet
        extension: BMv2's queues only have their own, independent rates. With
        ``frame_bytes`` the rate is a byte rate, ``pps * frame_bytes`` bytes/s: a packet
        costs its length over ``frame_bytes`` of a packet's share."""
        if frame_bytes is not None and frame_bytes < 1:
            raise ValueError(f"frame_bytes must be >= 1, got {frame_bytes}")
        if port is None:
            self._port_rate_cfg.clear()
            self._port_frame_cfg.clear()
        self._port_rate_cfg[port] = pps
        self._port_frame_cfg[port] = frame_bytes
        self._reapply()

    def _set_cfg(self, cfg: dict, value: object, port: int | None, priority: int | None) -> None:
        # A wider setting replaces the narrower ones it covers (BMv2's set_all / per-port
        # calls overwrite every queue they name), so the latest call wins.
        for key in [k for k in cfg if (port is None or k[0] == port) and (priority is None or k[1] == priority)]:
            del cfg[key]
        cfg[(port, priority)] = value
        self._reapply()

    def _reapply(self) -> None:
        self._shaped = any(v is not None for v in (*self._rate_cfg.values(), *self._port_rate_cfg.values()))
        self._tm_version = getattr(self, "_tm_version", 0) + 1  # the native fast-port mask is stale
        for p, q in list(self._tm.items()):  # may run in a control thread
            self._apply_cfg(p, q)
        self.wake()  # the data plane re-plans its dequeue timer

    def queue_stats(self, port: int | None = None) -> list[dict[str, object]]:
        """Per-queue state and counters, one dict per queue of every port (or ``port``
        only): rate, depth, occupancy, enqueued, dropped.

        ``priority`` is the ``standard_metadata.priority`` the queue serves; ``queue`` is
        simple_switch's internal index (``nb_queues - 1 - priority``, 0 served first),
        which is what the ``priority`` argument of set_queue_rate/set_queue_depth names,
        as in BMv2."""
        nat = getattr(getattr(self, "program", None), "native", None)
        in_c = getattr(nat, "tm_occupancy", None)  # what waits in C (native/tm.c)
        out: list[dict[str, object]] = []
        ports = sorted(set(self._ports) | set(self._tm)) if port is None else [port]
        for p in ports:
            q = self._tm.get(p)
            if q is None:
                q = PortQueues(self.nb_queues, self.queue_depth)
                self._apply_cfg(p, q)
            for prio in range(self.nb_queues):
                slot = self.nb_queues - 1 - prio
                out.append({"port": p, "priority": prio, "queue": slot, "rate_pps": q.rate[slot],
                            "port_rate_pps": q.port_rate, "port_frame_bytes": q.port_frame,
                            "depth": q.depth[slot], "occupancy": len(q.queues[slot]) + (in_c(p, slot) if in_c else 0),
                            "enqueued": q.enqueued[slot], "dropped": q.dropped[slot]})
        return out

    def _apply_cfg(self, port: int, q: PortQueues) -> None:
        for key in (None, port):
            if key in self._port_rate_cfg:
                q.port_rate = self._port_rate_cfg[key]
                q.port_frame = self._port_frame_cfg.get(key)
        for prio in range(self.nb_queues):
            for key in ((None, None), (port, None), (None, prio), (port, prio)):
                if key in self._rate_cfg:
                    q.rate[prio] = self._rate_cfg[key]
                if key in self._depth_cfg:
                    q.depth[prio] = self._depth_cfg[key]

    def _queue(self, port: int) -> PortQueues:
        q = self._tm.get(port)
        if q is None:
            q = PortQueues(self.nb_queues, self.queue_depth)
            self._apply_cfg(port, q)
            self._tm[port] = q
        return q
