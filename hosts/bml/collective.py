"""Repeated all-reduce for training: one :class:`Collective` per training process.

The one-shot agents (``python -m hosts.bml``, ``python -m hosts.bml.baselines``) connect,
synchronize one gradient and exit. A training process instead creates one
:class:`Collective` and calls :meth:`Collective.allreduce` once per iteration::

    from hosts.bml.collective import Collective

    with Collective.from_plan_file("plan.json", server=rank, timeout=60.0) as coll:
        for step in range(steps):
            grad = flat_gradient(model)                 # float32, plan["values"] long
            total = coll.allreduce(grad)                # sum over all servers, float32
            apply(model, total / coll.servers)
        print(coll.stats())

API
---
* ``Collective(plan, server, *, timeout=60.0, connect_timeout=None, scale_bits=None)``
  connects the mesh of the plan's scheme once -- the same links, ports and framed TCP
  transport as the one-shot agents (:func:`~hosts.bml.agent.bml_links`,
  :func:`~hosts.bml.baselines.links_for`, :func:`~hosts.bml.transport.connect_mesh`)
  -- and returns when all of this server's connections are up (no start barrier is
  needed: a peer's messages wait in the inbox until this server asks for them).
  ``plan`` is a plan dict (:func:`controller.bcube.bcube_plan` for ``bml``,
  :func:`controller.bcube.fat_tree_plan` for ``ring``, ``sharded_ps``, ``ps``, or
  :func:`loopback_plan`); :meth:`Collective.from_plan_file` reads one from JSON.
* :meth:`Collective.allreduce` ``(vec) -> np.ndarray``: the sum over all servers of a
  float vector with exactly ``plan["values"]`` elements (any shape; a wrong size raises
  ValueError: the plan fixes the length, write the plan with ``values`` = your model's
  parameter count). Returns a new float32 array of ``vec``'s shape. Runs the plan's
  algorithm unchanged (:func:`~hosts.bml.agent.run_bml`,
  :func:`~hosts.bml.baselines.ring`, :func:`~hosts.bml.baselines.sharded_ps`,
  :func:`~hosts.bml.baselines.single_ps`). Calls are serialized; every server must
  make the same number of calls.
* :meth:`Collective.stats` -- rounds, seconds spent in ``allreduce``, bytes sent and
  received per level (= per NIC; headers included) and NIC counters since construction.
* :meth:`Collective.close` (or the ``with`` block) -- FIN after the queued messages,
  waits for the peers' FINs (at most ``timeout``). Call it before the process exits:
  ``allreduce`` returns once this server has its sum, while its last sends to slower
  peers may still sit in the writer threads' queues.

Exactness and identity
----------------------
Fixed point, as the one-shot agents: each server quantizes its float32 vector to int32
``q = rint(g * 2**scale_bits)`` (:func:`wire.fixedpoint.quantize`, scale from the
plan's ``scale_bits`` unless overridden), the algorithm sums the integers exactly (no
wraparound: ``quantize`` raises :class:`~wire.fixedpoint.FixedPointOverflow`, a
ValueError, when ``|g| > ((2**31 - 1) // servers) / 2**scale_bits``), and the result is
``float32(sum(q) / 2**scale_bits)``. Integer addition is exact and order-free, and the
conversion is a fixed function of the integer sum, so every server gets a
bit-identical result every round (synchronous training keeps identical models); the
result differs from the real sum only by each input's rounding to ``2**-scale_bits``
and the final cast to float32.

Rounds
------
Round ``r`` (0, 1, ...) is the ``r``-th call. Before round ``r >= 1`` sends anything it
puts a ``ROUND`` marker (``offset = r``, :class:`wire.bcube.BcubeMsg`) on every
connection; the reader of a connection files each later message under that round, and
the algorithm asks the inbox for ``(round, msg_type, thread, stage, sender)``
(:class:`hosts.bml.transport.Inbox`). So a peer that starts round ``r + 1`` while this
server still receives round ``r`` never has its messages taken for round ``r``'s.

Failures (bounded waits)
------------------------
Each call must finish within ``timeout`` seconds, else :class:`TransportError`. A peer
that dies closes its connections: the reader sees the end, and a wait for any further
message of that peer raises :class:`TransportError` at once (a peer that closed after
its last round is no error while its messages are all in). After a transport error the collective is broken:
it closes all its connections at once (so its own peers fail fast too, and the failure
spreads through the mesh instead of every server waiting out its timeout), and every
later call raises TransportError. Checks made before anything is sent (wrong size,
non-finite values, fixed-point overflow) raise ValueError and start no round.

``python -m hosts.bml.collective --plan P --server S --rounds R --seed X --out F``
runs ``R`` rounds of seeded random vectors (:func:`round_vector`) and saves the results
and stats: a self-test for running in emulated hosts.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from wire import argtypes
from wire.bcube import BCUBE_TCP_PORT
from wire.bcube_schedule import DEFAULT_PIECES, RAIL_SCHEMES, BcubeSchedule
from wire.fixedpoint import dequantize, quantize

from .agent import Algorithm, Ctx, bml_algorithm, bml_links
from .baselines import SCHEMES as BASELINES
from .baselines import algorithm_for, links_for
from .transport import Inbox, NicSampler, PeerConn, TransportError, connect_mesh

__all__ = ["SCHEMES", "Collective", "TransportError", "loopback_plan", "main", "round_vector"]

#: Schemes a plan may name.
SCHEMES = ("bml", *BASELINES)


class Collective:
    """A persistent all-reduce endpoint of one server (see the module doc)."""

    def __init__(self, plan: dict[str, Any], server: int, *, timeout: float = 60.0,
                 connect_timeout: float | None = None, scale_bits: int | None = None) -> None:
        """Connect this server's mesh; ``timeout`` bounds every :meth:`allreduce` and
        :meth:`close`, ``connect_timeout`` (default ``timeout``) the connection set-up;
        ``scale_bits`` overrides the plan's fixed-point scale (same on every server!)."""
        scheme = plan.get("scheme")
        if scheme not in SCHEMES:
            raise ValueError(f"plan scheme {scheme!r} is not one of {', '.join(SCHEMES)}")
        servers = int(plan["servers"])
        if isinstance(server, bool) or not 0 <= server < servers:
            raise ValueError(f"server must be in 0..{servers - 1}, got {server!r}")
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0, got {timeout}")
        self.plan = plan
        self.scheme: str = scheme
        self.server = int(server)
        self.servers = servers
        self.values = int(plan["values"])
        self.scale_bits = int(plan["scale_bits"] if scale_bits is None else scale_bits)
        self.timeout = float(timeout)
        if scheme == "bml":
            BcubeSchedule(plan["n"], plan["k"], self.values)  # bad sizes: ScheduleError
            links = bml_links(plan, self.server)
            self._algo: Algorithm = bml_algorithm(plan)
        else:
            links = links_for(plan, self.server)
            self._algo = algorithm_for(plan)
        self._ifaces: list[str] = list(plan.get("ifaces", [[]] * servers)[self.server])
        self._inbox = Inbox()
        self._conns: dict[tuple[int, int], PeerConn] = connect_mesh(
            self.server, links, int(plan.get("port", BCUBE_TCP_PORT)), self._inbox,
            timeout=self.timeout if connect_timeout is None else connect_timeout,
            fail_on_eof=True)
        self._nic0 = self._nic_now()
        self._lock = threading.Lock()
        self._round = 0
        self._seconds = 0.0
        self._last = 0.0
        self._broken: BaseException | None = None
        self._closed = False

    @classmethod
    def from_plan_file(cls, path: str | Path, server: int, **kwargs: Any) -> Collective:
        """A collective from a plan JSON file (``kwargs``: those of the constructor)."""
        return cls(json.loads(Path(path).read_text()), server, **kwargs)

    # -- the collective --------------------------------------------------------------
    def allreduce(self, vec: np.ndarray) -> np.ndarray:
        """The float32 sum of ``vec`` over all servers (bit-identical on every server).

        ValueError (nothing sent, no round used) for a size other than the plan's
        ``values``, a non-float or non-finite vector, or a fixed-point overflow;
        TransportError when the round does not complete within ``timeout``."""
        arr = np.asarray(vec)
        if arr.size != self.values:
            raise ValueError(f"allreduce: vector has {arr.size} elements, the plan fixes "
                             f"{self.values} (plan['values']); every server must pass that many")
        if arr.dtype.kind != "f":
            raise ValueError(f"allreduce: vector must be floating point, got dtype {arr.dtype}")
        q = quantize(arr.astype(np.float32, copy=False).ravel(), self.scale_bits, self.servers)
        with self._lock:
            if self._closed:
                raise TransportError(f"server {self.server}: collective is closed")
            if self._broken is not None:
                raise TransportError(f"server {self.server}: collective is broken "
                                     f"({self._broken})") from self._broken
            rnd = self._round
            t0 = time.perf_counter()
            try:
                if rnd:
                    for c in self._conns.values():
                        c.send_round(rnd)
                ctx = Ctx(self.server, self._conns, self._inbox,
                          time.monotonic() + self.timeout, rnd)
                self._algo(ctx, q)
            except BaseException as exc:
                self._broken = exc
                self._abort()
                raise
            self._last = time.perf_counter() - t0
            self._seconds += self._last
            self._round = rnd + 1
        return dequantize(q, self.scale_bits).reshape(arr.shape)

    def stats(self) -> dict[str, Any]:
        """Counters since construction: ``rounds``, ``seconds`` (total in
        :meth:`allreduce`), ``last_seconds``, ``tx_bytes`` / ``rx_bytes`` per level (NIC
        index; framed payload incl. 16-byte headers), ``nic`` (``{iface: [rx, tx]}``
        kernel byte counters of this namespace's plan interfaces)."""
        levels = sorted({lv for lv, _ in self._conns})
        now = self._nic_now()
        return {
            "server": self.server, "scheme": self.scheme, "servers": self.servers,
            "values": self.values, "scale_bits": self.scale_bits,
            "rounds": self._round, "seconds": self._seconds, "last_seconds": self._last,
            "tx_bytes": {lv: sum(c.tx_bytes for (cl, _), c in self._conns.items() if cl == lv)
                         for lv in levels},
            "rx_bytes": {lv: sum(c.rx_bytes for (cl, _), c in self._conns.items() if cl == lv)
                         for lv in levels},
            "nic": {i: [now[i][0] - self._nic0[i][0], now[i][1] - self._nic0[i][1]]
                    for i in now if i in self._nic0},
        }

    def close(self) -> None:
        """Send FIN after everything queued and wait (at most ``timeout`` in all) for
        the peers' FINs; at once if the collective is broken. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._broken is not None:
                return  # _abort closed everything
            end = time.monotonic() + self.timeout
            for c in self._conns.values():
                c.send_fin()  # all first: waiting on one while others hold theirs deadlocks
            for c in self._conns.values():
                c.finish(timeout=max(0.0, end - time.monotonic()))

    def __enter__(self) -> Collective:
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if exc is not None and self._broken is None and not self._closed:
            with self._lock:
                self._broken = exc
                self._closed = True
                self._abort()
            return
        self.close()

    # -- internals -------------------------------------------------------------------
    def _abort(self) -> None:
        for c in self._conns.values():
            c.abort()

    def _nic_now(self) -> dict[str, tuple[int, int]]:
        try:
            dev = NicSampler.read()
        except OSError:
            return {}
        return {i: dev[i] for i in self._ifaces if i in dev}


# ----------------------------------------------------------------------------- helpers
def loopback_plan(scheme: str, values: int, scale_bits: int, port: int, *,
                  servers: int = 0, n: int = 0, k: int = 0,
                  pieces: int | None = None, pipeline: int = 1, rails: int = 1) -> dict[str, Any]:
    """A plan on this machine's loopback (tests, or a training run without Mininet):
    server ``s`` is ``127.<level + 1>.<s // 256>.<s % 256 + 1>`` on each level, all on
    ``port`` (Linux answers on all of 127/8). ``bml``: BCube(``n``, ``k``); baselines:
    ``servers`` servers, one level (``rails`` levels for the k-rail schemes)."""
    if scheme == "bml":
        BcubeSchedule(n, k, values)
        servers, levels = n**k, k
    elif scheme in BASELINES:
        if servers < 2:
            raise ValueError(f"{scheme} needs servers >= 2, got {servers}")
        levels = rails if scheme in RAIL_SCHEMES else 1
    else:
        raise ValueError(f"unknown scheme {scheme!r} (choose from {', '.join(SCHEMES)})")
    plan: dict[str, Any] = {
        "scheme": scheme, "servers": servers, "values": values, "scale_bits": scale_bits,
        "port": port, "hosts": [f"lo{s}" for s in range(servers)],
        "ips": [[f"127.{lv + 1}.{s // 256}.{s % 256 + 1}" for lv in range(levels)]
                for s in range(servers)],
        "ifaces": [["lo"] for _ in range(servers)],
    }
    if scheme == "bml":
        plan.update(n=n, k=k, pipeline=pipeline)
    elif scheme in DEFAULT_PIECES:
        plan["pieces"] = pieces or DEFAULT_PIECES[scheme]
        if scheme in RAIL_SCHEMES:
            plan["rails"] = rails
    return plan


def round_vector(seed: int, server: int, rnd: int, values: int) -> np.ndarray:
    """The self-test's float32 vector of ``server`` in round ``rnd`` (gradient-like)."""
    rng = np.random.default_rng([seed, server, rnd])
    return (rng.standard_normal(values) * 0.01).astype(np.float32)


def main(argv: list[str] | None = None) -> int:
    """``python -m hosts.bml.collective``: the self-test (see the module doc)."""
    p = argtypes.Parser(prog="python -m hosts.bml.collective",
                                description="Repeated all-reduce self-test of one server.")
    p.add_argument("--plan", required=True, help="plan JSON (controller.bcube)")
    p.add_argument("--server", type=argtypes.natural, required=True, help="this server's index (0-based)")
    p.add_argument("--rounds", type=argtypes.count, default=5)
    p.add_argument("--seed", type=argtypes.natural, default=0)
    p.add_argument("--timeout", type=argtypes.positive, default=60.0)
    p.add_argument("--out", help="results (.npy, [rounds, values] float32)")
    args = p.parse_args(argv)
    with Collective.from_plan_file(args.plan, args.server, timeout=args.timeout) as coll:
        out = np.stack([coll.allreduce(round_vector(args.seed, args.server, r, coll.values))
                        for r in range(args.rounds)]) if args.rounds else np.zeros((0, 0))
        if args.out:
            np.save(args.out, out)
        print(json.dumps(coll.stats()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
