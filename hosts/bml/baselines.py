"""Baselines for BML on a fat-tree (one NIC per server): ``python -m hosts.bml.baselines``.

Same plan, fixed point, framing, TCP transport and start protocol as the BML agent
(:mod:`hosts.bml.agent`); the plan's ``scheme`` picks the algorithm:

* ``sharded_ps`` -- every server is a worker and the parameter server of ``1/S`` of
  the gradient (the comparison of the BML paper): it pushes shard ``t`` to server
  ``t``, sums the ``S`` contributions to its own shard and pushes the sum back to
  everyone (PULL).
* ``ring`` -- ring all-reduce over servers ``0..S-1``: ``S - 1`` reduce-scatter steps
  then ``S - 1`` all-gather steps, each sending ``1/S`` of the gradient to the right
  neighbour, pipelined in pieces.
* ``ps`` -- a single parameter server (server 0, also a worker), as in the INA work:
  everyone pushes the whole gradient to it, it sends the sum back.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np

from hosts.bml.agent import Algorithm, Ctx, agent_parser, load_plan, serve
from hosts.bml.schedule import cut
from hosts.bml.transport import Link
from hosts.packets import BcubeMsg

__all__ = ["SCHEMES", "algorithm_for", "links_for", "main", "ring", "sharded_ps", "single_ps"]


def sharded_ps(ctx: Ctx, buf: np.ndarray, servers: int, chunks: int = 8) -> None:
    """Sharded PS: push shards, sum the own shard, send the sum back (PULL).

    Every shard goes in ``chunks`` pieces (``stage`` = piece number), and the owner sends
    a piece's sum back as soon as all its contributions are in, as PS implementations
    slice their keys: the pulls of early pieces overlap the pushes of later ones, so a
    server's uplink does not idle while the last pushes to its shard trickle in."""
    me = ctx.server
    shards = cut((0, buf.size), servers)
    others = [(me + i) % servers for i in range(1, servers)]  # staggered: no hot receiver
    pieces = [cut(sh, chunks) for sh in shards]
    for c in range(chunks):
        for t in others:
            a, b = pieces[t][c]
            ctx.conn(0, t).send(BcubeMsg.PUSH, 0, c, a, buf[a:b])
    for c in range(chunks):
        a, b = pieces[me][c]
        for t in others:
            buf[a:b] += ctx.receive(BcubeMsg.PUSH, 0, c, t, (a, b))
        for t in others:
            ctx.conn(0, t).send(BcubeMsg.PULL, 0, c, a, buf[a:b])
    for c in range(chunks):
        for t in others:
            buf[slice(*pieces[t][c])] = ctx.receive(BcubeMsg.PULL, 0, c, t, pieces[t][c])


def ring(ctx: Ctx, buf: np.ndarray, servers: int, pieces: int = 4) -> None:
    """Ring all-reduce: ``S - 1`` reduce-scatter then ``S - 1`` all-gather steps of one
    chunk (``1/S``) each to the right neighbour.

    Pipelined as ring implementations do: every chunk travels in ``pieces`` pieces
    (message ``thread`` = piece, ``stage`` = step), and a piece received at step ``u`` is
    forwarded at step ``u + 1`` at once (it is the next step's chunk), so a step's
    latency is paid per piece, not per chunk."""
    me = ctx.server
    s = servers
    right, left = (me + 1) % s, (me - 1) % s
    chunks = cut((0, buf.size), s)
    parts = [cut(ch, pieces) for ch in chunks]
    steps = 2 * (s - 1)

    def msg(u: int) -> int:
        return BcubeMsg.RING_REDUCE if u < s - 1 else BcubeMsg.RING_GATHER

    def sent_chunk(u: int) -> int:
        return (me - u) % s if u < s - 1 else (me + 1 - (u - s + 1)) % s

    def send(u: int, c: int) -> None:
        a, b = parts[sent_chunk(u)][c]
        ctx.conn(0, right).send(msg(u), c, u, a, buf[a:b])

    for c in range(pieces):
        send(0, c)
    for u in range(steps):
        got = sent_chunk(u + 1) if u + 1 < steps else (me - (u - s + 1)) % s
        for c in range(pieces):
            rng = parts[got][c]
            vals = ctx.receive(msg(u), c, u, left, rng)
            if u < s - 1:
                buf[slice(*rng)] += vals
            else:
                buf[slice(*rng)] = vals
            if u + 1 < steps:
                send(u + 1, c)  # what step u brought in is what step u + 1 sends on


def single_ps(ctx: Ctx, buf: np.ndarray, servers: int) -> None:
    """Single PS on server 0 (which is also a worker)."""
    whole = (0, buf.size)
    if ctx.server != 0:
        ctx.conn(0, 0).send(BcubeMsg.PUSH, 0, 0, 0, buf)
        buf[:] = ctx.receive(BcubeMsg.PULL, 0, 1, 0, whole)
        return
    for w in range(1, servers):
        buf += ctx.receive(BcubeMsg.PUSH, 0, 0, w, whole)
    for w in range(1, servers):
        ctx.conn(0, w).send(BcubeMsg.PULL, 0, 1, 0, buf)


SCHEMES = {"sharded_ps": sharded_ps, "ring": ring, "ps": single_ps}


def algorithm_for(plan: dict[str, Any]) -> Algorithm:
    """The algorithm of baseline ``plan['scheme']`` with the plan's ``pieces``;
    ValueError for pieces outside 1..255 (the 8-bit thread/stage fields)."""
    s = plan["servers"]
    fn = SCHEMES[plan["scheme"]]
    if plan["scheme"] in ("sharded_ps", "ring"):
        chunks = int(plan.get("pieces", 8 if plan["scheme"] == "sharded_ps" else 4))
        if not 1 <= chunks <= 255:
            raise ValueError(f"plan pieces must be in 1..255, got {chunks}")

        def algo(ctx: Ctx, buf: np.ndarray) -> None:
            fn(ctx, buf, s, chunks)
    else:

        def algo(ctx: Ctx, buf: np.ndarray) -> None:
            fn(ctx, buf, s)

    return algo


def links_for(plan: dict[str, Any], me: int) -> list[Link]:
    """The connections scheme ``plan['scheme']`` needs (all on NIC 0)."""
    s = plan["servers"]
    ips = plan["ips"]
    scheme = plan["scheme"]
    if scheme == "sharded_ps":
        peers = [p for p in range(s) if p != me]
    elif scheme == "ring":
        peers = sorted({(me + 1) % s, (me - 1) % s} - {me})
    else:
        peers = list(range(1, s)) if me == 0 else [0]
    return [Link(0, p, ips[me][0], ips[p][0]) for p in peers]


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m hosts.bml.baselines``."""
    args = agent_parser("python -m hosts.bml.baselines",
                        __doc__.splitlines()[0]).parse_args(argv)
    plan = load_plan(args.plan, tuple(SCHEMES))
    s = plan["servers"]
    if not 0 <= args.server < s:
        raise SystemExit(f"--server must be in 0..{s - 1}")
    try:
        algo = algorithm_for(plan)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    report = serve(plan, args.server, links_for(plan, args.server), algo,
                   np.load(args.gradient), args)
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
