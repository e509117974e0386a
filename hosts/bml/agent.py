"""The BML agent of one server: ``python -m hosts.bml --plan P --server S ...``.

Reads the run's plan (``controller.bcube.write_plan``: BCube size, every server's
per-level addresses, gradient length, fixed-point scale), quantizes its float32
gradient to int32 (:func:`wire.fixedpoint.quantize`, exact sums), opens one TCP
connection per (level, peer), waits for the common start, then runs ``k`` threads:
thread ``j`` synchronizes parameter set ``j`` through the stages of
:meth:`wire.bcube_schedule.BcubeSchedule.exchanges`, starting at level ``j``. It writes
the summed int32 vector (``--out``) and prints one JSON line: start/end times, payload
bytes per level, NIC byte counters, per-stage times and the NIC counter samples.

:func:`serve` is the frame every agent (BML and the baselines) shares.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from wire import argtypes
from wire.bcube import BcubeMsg
from wire.bcube_schedule import BcubeSchedule, cut
from wire.fixedpoint import quantize

from .transport import (
    Inbox,
    Link,
    NicSampler,
    PeerConn,
    TransportError,
    connect_mesh,
    mark_ready,
    run_threads,
    wait_for_go,
)

__all__ = ["Algorithm", "Ctx", "bml_algorithm", "bml_links", "main", "run_bml", "serve"]


class Ctx:
    """What an algorithm sees: connections, inbox, its buffer, a deadline, a stage log,
    and the round it runs (0 for the one-shot agents; see :mod:`hosts.bml.collective`)."""

    def __init__(self, server: int, conns: dict[tuple[int, int], PeerConn], inbox: Inbox,
                 deadline: float, rnd: int = 0) -> None:
        self.server = server
        self.conns = conns
        self.inbox = inbox
        self.deadline = deadline
        self.round = rnd
        self.stages: list[list[Any]] = []
        self._lock = threading.Lock()

    def conn(self, level: int, peer: int) -> PeerConn:
        """The connection to ``peer`` on ``level``."""
        try:
            return self.conns[level, peer]
        except KeyError:
            raise TransportError(f"server {self.server}: no connection to {peer} on level {level}") from None

    def receive(self, msg: int, thread: int, stage: int, peer: int, rng: tuple[int, int]) -> np.ndarray:
        """The values of one expected message; checks it covers exactly ``rng``."""
        off, vals = self.inbox.get((msg, thread, stage, peer), self.deadline, self.round)
        if off != rng[0] or vals.size != rng[1] - rng[0]:
            raise TransportError(f"server {self.server}: {BcubeMsg(msg).name} thread {thread} stage "
                                 f"{stage} from {peer} covers [{off}, {off + vals.size}), "
                                 f"expected [{rng[0]}, {rng[1]})")
        return vals

    def log_stage(self, thread: int, stage: int, level: int, t0: float) -> None:
        """Record one finished stage (wall-clock start and end)."""
        with self._lock:
            self.stages.append([thread, stage, level, t0, time.time()])


Algorithm = Callable[[Ctx, np.ndarray], None]


def run_bml(sched: BcubeSchedule, ctx: Ctx, buf: np.ndarray, pipeline: int = 1) -> None:
    """All ``k`` threads of one server over ``buf`` (int32, summed in place).

    ``pipeline`` > 1 cuts each parameter set into that many pieces, each running the
    thread's schedule in its own Python thread (message ``thread`` field =
    ``j * pipeline + piece``): a piece goes on to the next level as soon as it is reduced
    instead of waiting for the slowest peer's whole slice, which keeps NICs busy when
    servers drift apart. ``pipeline == 1`` is the specified k threads exactly.
    """
    def thread(j: int, piece: int, rng: tuple[int, int]) -> None:
        tid = j * pipeline + piece
        for e in sched.exchanges(ctx.server, j, rng):
            t0 = time.time()
            msg = BcubeMsg.REDUCE if e.phase == "reduce" else BcubeMsg.GATHER
            for peer, (a, b) in e.sends().items():
                ctx.conn(e.level, peer).send(msg, tid, e.stage, a, buf[a:b])
            for peer, (a, b) in e.receives().items():
                vals = ctx.receive(msg, tid, e.stage, peer, (a, b))
                if e.phase == "reduce":
                    buf[a:b] += vals  # int32 cannot overflow: quantize bounds |q| by S
                else:
                    buf[a:b] = vals
            ctx.log_stage(tid, e.stage, e.level, t0)

    if pipeline < 1 or sched.k * pipeline > 256:
        raise TransportError(f"pipeline must be in 1..{256 // sched.k} (8-bit thread field)")
    run_threads(((f"bml-{j}.{c}", functools.partial(thread, j, c, rng))
                 for j in range(sched.k)
                 for c, rng in enumerate(cut(sched.parameter_set(j), pipeline))), ctx.inbox)


def bml_algorithm(plan: dict[str, Any]) -> Algorithm:
    """:func:`run_bml` on the plan's BCube, gradient length and ``pipeline``."""
    sched = BcubeSchedule(plan["n"], plan["k"], plan["values"])
    pipeline = int(plan.get("pipeline", 1))
    return lambda ctx, buf: run_bml(sched, ctx, buf, pipeline)


def bml_links(plan: dict[str, Any], me: int) -> list[Link]:
    """One link per (level, peer on that level's switch)."""
    sched = BcubeSchedule(plan["n"], plan["k"], plan["values"])
    ips = plan["ips"]
    return [Link(lvl, p, ips[me][lvl], ips[p][lvl])
            for lvl in range(sched.k) for p in sched.peers(me, lvl) if p != me]


def serve(plan: dict[str, Any], me: int, links: list[Link], algorithm: Algorithm,
          gradient: np.ndarray, args: argparse.Namespace) -> dict[str, Any]:
    """Quantize, connect, wait for the start, run ``algorithm``, save, report."""
    q = quantize(gradient.astype(np.float32).ravel(), plan["scale_bits"], plan["servers"])
    if q.size != plan["values"]:
        raise TransportError(f"gradient has {q.size} values, the plan says {plan['values']}")
    inbox = Inbox()
    conns = connect_mesh(me, links, plan["port"], inbox, timeout=args.connect_timeout)
    ifaces = plan["ifaces"][me]
    mark_ready(args.ready_dir, me)
    start = wait_for_go(args.go, args.connect_timeout + 30)
    sampler = NicSampler(ifaces)
    before = NicSampler.read()
    sampler.start()
    ctx = Ctx(me, conns, inbox, time.monotonic() + args.max_time)
    buf = q.copy()
    algorithm(ctx, buf)
    end = time.time()
    for c in conns.values():  # every FIN queued first: no two servers wait on each other's
        c.send_fin()
    for c in conns.values():
        c.finish(timeout=10.0)
    after = NicSampler.read()
    samples = sampler.stop()
    np.save(args.out, buf)
    levels = sorted({ln.level for ln in links})
    return {
        "server": me, "scheme": plan["scheme"], "start": start, "end": end,
        "seconds": end - start,
        "tx_payload": {lv: sum(c.tx_bytes for (cl, _), c in conns.items() if cl == lv) for lv in levels},
        "rx_payload": {lv: sum(c.rx_bytes for (cl, _), c in conns.items() if cl == lv) for lv in levels},
        "nic": {i: [after[i][0] - before[i][0], after[i][1] - before[i][1]] for i in ifaces},
        "stages": ctx.stages, "samples": samples,
    }


def agent_parser(prog: str, doc: str) -> argparse.ArgumentParser:
    """Options every agent takes."""
    p = argtypes.Parser(prog=prog, description=doc)
    p.add_argument("--plan", required=True, help="plan JSON (controller.bcube.write_plan)")
    p.add_argument("--server", type=argtypes.natural, required=True, help="this server's index (0-based)")
    p.add_argument("--gradient", required=True, help="float32 .npy gradient")
    p.add_argument("--out", required=True, help="where the summed int32 vector goes (.npy)")
    p.add_argument("--ready-dir", required=True, help="directory for the ready marker")
    p.add_argument("--go", required=True, help="go file holding the common start time")
    p.add_argument("--connect-timeout", type=argtypes.positive, default=60.0)
    p.add_argument("--max-time", type=argtypes.positive, default=300.0, help="bound on the synchronization (s)")
    return p


def load_plan(path: str, scheme: str | tuple[str, ...]) -> dict[str, Any]:
    """Read a plan and check it is for ``scheme``."""
    plan = json.loads(Path(path).read_text())
    schemes = (scheme,) if isinstance(scheme, str) else scheme
    if plan.get("scheme") not in schemes:
        raise SystemExit(f"plan {path} is for {plan.get('scheme')!r}, not {'/'.join(schemes)}")
    return plan


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m hosts.bml``."""
    args = agent_parser("python -m hosts.bml", __doc__.splitlines()[0]).parse_args(argv)
    plan = load_plan(args.plan, "bml")
    sched = BcubeSchedule(plan["n"], plan["k"], plan["values"])
    if not 0 <= args.server < sched.servers:
        raise SystemExit(f"--server must be in 0..{sched.servers - 1}")
    report = serve(plan, args.server, bml_links(plan, args.server), bml_algorithm(plan),
                   np.load(args.gradient), args)
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
