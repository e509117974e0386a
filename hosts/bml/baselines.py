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
* ``rail_ring`` / ``rail_sharded_ps`` -- the same NIC count as BML on a BCube: on a
  k-rail network (``plan['rails'] = k``, every server one NIC per rail, NIC ``j`` in
  rail ``j``'s own fabric) the gradient is cut into ``k`` contiguous parts and part ``j``
  runs its own ring (or sharded PS) over rail ``j`` in its own Python thread, all ``k``
  at once; the messages of rail ``j`` carry ``thread`` numbers of their own so the
  rails never share an inbox key.
"""

from __future__ import annotations

import functools
import json
import sys
from typing import Any

import numpy as np

from hosts.bml.agent import Algorithm, Ctx, agent_parser, load_plan, serve
from hosts.bml.transport import Link, run_threads
from wire.bcube import BcubeMsg
from wire.bcube_schedule import DEFAULT_PIECES, RAIL_SCHEMES, cut

__all__ = ["DEFAULT_PIECES", "RAIL_SCHEMES", "SCHEMES", "algorithm_for", "links_for", "main",
           "on_rails", "plan_rails", "ring", "sharded_ps", "single_ps"]


def sharded_ps(ctx: Ctx, buf: np.ndarray, servers: int, chunks: int = 8, *, level: int = 0,
               rng: tuple[int, int] | None = None, thread: int = 0) -> None:
    """Sharded PS: push shards, sum the own shard, send the sum back (PULL).

    Every shard goes in ``chunks`` pieces (``stage`` = piece number), and the owner sends
    a piece's sum back as soon as all its contributions are in, as PS implementations
    slice their keys: the pulls of early pieces overlap the pushes of later ones, so a
    server's uplink does not idle while the last pushes to its shard trickle in.

    ``rng`` (default all of ``buf``) is the part synchronised, over the connections of
    ``level`` (the NIC / rail), with message ``thread`` = ``thread``."""
    me = ctx.server
    shards = cut(rng or (0, buf.size), servers)
    others = [(me + i) % servers for i in range(1, servers)]  # staggered: no hot receiver
    pieces = [cut(sh, chunks) for sh in shards]
    for c in range(chunks):
        for t in others:
            a, b = pieces[t][c]
            ctx.conn(level, t).send(BcubeMsg.PUSH, thread, c, a, buf[a:b])
    for c in range(chunks):
        a, b = pieces[me][c]
        for t in others:
            buf[a:b] += ctx.receive(BcubeMsg.PUSH, thread, c, t, (a, b))
        for t in others:
            ctx.conn(level, t).send(BcubeMsg.PULL, thread, c, a, buf[a:b])
    for c in range(chunks):
        for t in others:
            buf[slice(*pieces[t][c])] = ctx.receive(BcubeMsg.PULL, thread, c, t, pieces[t][c])


def ring(ctx: Ctx, buf: np.ndarray, servers: int, pieces: int = 4, *, level: int = 0,
         rng: tuple[int, int] | None = None, thread: int = 0) -> None:
    """Ring all-reduce: ``S - 1`` reduce-scatter then ``S - 1`` all-gather steps of one
    chunk (``1/S``) each to the right neighbour.

    Pipelined as ring implementations do: every chunk travels in ``pieces`` pieces
    (message ``thread`` = ``thread`` + piece, ``stage`` = step), and a piece received at
    step ``u`` is forwarded at step ``u + 1`` at once (it is the next step's chunk), so a
    step's latency is paid per piece, not per chunk. ``rng`` (default all of ``buf``) is
    the part synchronised, over the connections of ``level`` (the NIC / rail)."""
    me = ctx.server
    s = servers
    right, left = (me + 1) % s, (me - 1) % s
    chunks = cut(rng or (0, buf.size), s)
    parts = [cut(ch, pieces) for ch in chunks]
    steps = 2 * (s - 1)

    def msg(u: int) -> int:
        return BcubeMsg.RING_REDUCE if u < s - 1 else BcubeMsg.RING_GATHER

    def sent_chunk(u: int) -> int:
        return (me - u) % s if u < s - 1 else (me + 1 - (u - s + 1)) % s

    def send(u: int, c: int) -> None:
        a, b = parts[sent_chunk(u)][c]
        ctx.conn(level, right).send(msg(u), thread + c, u, a, buf[a:b])

    for c in range(pieces):
        send(0, c)
    for u in range(steps):
        got = sent_chunk(u + 1) if u + 1 < steps else (me - (u - s + 1)) % s
        for c in range(pieces):
            part = parts[got][c]
            vals = ctx.receive(msg(u), thread + c, u, left, part)
            if u < s - 1:
                buf[slice(*part)] += vals
            else:
                buf[slice(*part)] = vals
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


def on_rails(ctx: Ctx, buf: np.ndarray, rails: int, one_rail: Any) -> None:
    """Run ``one_rail(level=j, rng=part j)`` for the ``rails`` contiguous parts of
    ``buf`` at once, one Python thread per rail (sockets release the GIL, so the ``k``
    NICs send together, as BML's ``k`` threads do); the first error is raised."""
    run_threads(((f"rail-{j}", functools.partial(one_rail, j, rng))
                 for j, rng in enumerate(cut((0, buf.size), rails))), ctx.inbox)


SCHEMES = {"sharded_ps": sharded_ps, "ring": ring, "ps": single_ps,
           "rail_sharded_ps": sharded_ps, "rail_ring": ring}


def plan_rails(plan: dict[str, Any]) -> int:
    """NICs (rails) a plan's scheme uses: ``plan['rails']`` for the k-rail schemes, else
    1; ValueError when out of 1..16."""
    rails = int(plan.get("rails", 1)) if plan["scheme"] in RAIL_SCHEMES else 1
    if not 1 <= rails <= 16:
        raise ValueError(f"plan rails must be in 1..16, got {rails}")
    return rails


def algorithm_for(plan: dict[str, Any]) -> Algorithm:
    """The algorithm of baseline ``plan['scheme']`` with the plan's ``pieces`` (and
    ``rails`` for the k-rail schemes); ValueError for pieces outside 1..255 (the 8-bit
    thread/stage fields; a k-rail ring needs ``rails * pieces <= 256``)."""
    s = plan["servers"]
    scheme = plan["scheme"]
    fn = SCHEMES[scheme]
    if scheme not in DEFAULT_PIECES:

        def algo(ctx: Ctx, buf: np.ndarray) -> None:
            fn(ctx, buf, s)

        return algo
    chunks = int(plan.get("pieces", DEFAULT_PIECES[scheme]))
    if not 1 <= chunks <= 255:
        raise ValueError(f"plan pieces must be in 1..255, got {chunks}")
    rails = plan_rails(plan)
    if scheme not in RAIL_SCHEMES:

        def algo(ctx: Ctx, buf: np.ndarray) -> None:
            fn(ctx, buf, s, chunks)

        return algo
    # thread numbers: a ring's rail j uses j*pieces .. j*pieces + pieces - 1, a sharded
    # PS's rail j thread j (its stage field counts the pieces)
    per_rail = chunks if fn is ring else 1
    if rails * per_rail > 256:
        raise ValueError(f"rails * pieces must be <= 256 (8-bit thread field), got "
                         f"{rails} * {chunks}")

    def algo(ctx: Ctx, buf: np.ndarray) -> None:
        on_rails(ctx, buf, rails, lambda j, rng: fn(ctx, buf, s, chunks, level=j, rng=rng,
                                                    thread=j * per_rail))

    return algo


def links_for(plan: dict[str, Any], me: int) -> list[Link]:
    """The connections scheme ``plan['scheme']`` needs: on NIC 0, or for a k-rail scheme
    the same peers on every rail ``j`` from NIC ``j``."""
    s = plan["servers"]
    ips = plan["ips"]
    scheme = RAIL_SCHEMES.get(plan["scheme"], plan["scheme"])
    if scheme == "sharded_ps":
        peers = [p for p in range(s) if p != me]
    elif scheme == "ring":
        peers = sorted({(me + 1) % s, (me - 1) % s} - {me})
    else:
        peers = list(range(1, s)) if me == 0 else [0]
    return [Link(j, p, ips[me][j], ips[p][j]) for j in range(plan_rails(plan)) for p in peers]


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
