"""One data-parallel training rank whose gradients are synchronized by a chosen scheme.

``python -m hosts.trainer --scheme SCHEME --rank R --world N ...`` runs in an emulated
host. Every scheme trains the same thing: the model and initial weights of ``--model``
and ``--seed``, the rank's shard of ``--data``, the same per-rank batch and batch order
(``hosts.training.batches``), plain SGD with the same learning rate. Only the line that
sums the gradients over the ranks differs:

* ``gloo``: ``torch.distributed.all_reduce`` (gloo's ring over TCP, through the P4
  switches running plain forwarding): the reference every ML user knows;
* ``ina``: gradnet's in-network aggregation (``hosts.ina.worker``: the job's aggregating
  switches, then the PS, which runs ``python -m hosts.ina.ps --rounds 0``);
* ``ps``: the same agents with a PS-only policy (every gradient to the PS and back);
* ``ring``: ring all-reduce over TCP between the ranks (``hosts.bml.collective``, the
  bandwidth-optimal software baseline);
* ``bml``: BCube hierarchical synchronization on a BCube, one NIC per level
  (``hosts.bml.collective``);
* ``rail_ring``: BML's baseline with the same NIC count: k concurrent ring all-reduces,
  one per rail of a k-rail network, each on 1/k of the gradient (``hosts.bml.collective``);
* ``rail_sharded_ps``: BML's other same-NIC-count baseline: k concurrent sharded PSs on
  the same k-rail network, each on 1/k of the gradient (``hosts.bml.collective``).

Every step (the one loop of :mod:`hosts.loop`, with this module's :class:`hosts.loop.Sync`
of the scheme, :data:`BACKENDS`): gradients of the batch (compute), their sum over the
ranks (sync), the SGD step ``w <- w - lr * sum / N``. Since every rank applies the same sum, the models stay
identical; each rank reports a hash of its weights at every evaluation so the harness
checks that. Rank 0 evaluates (test split and the larger held-out set) every
``--eval-every`` steps and at each epoch's end; the time it spends evaluating is
reported and left out of the training clock (``t``), since the other ranks only wait.

Every rank runs the same number of steps (``--epochs`` x the steps of the smallest
shard): the harness reads the time to a target accuracy off rank 0's curve, and stops
a run that outlives its ``--max-time`` from outside.

``--slow F`` makes this rank compute F times slower (it sleeps (F-1) x its measured
compute time) and ``--compute-time S`` fixes every step's compute at S seconds (it
sleeps the rest; a labelled dilation). Output: one JSON line per evaluation, then a
summary line.
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import timedelta
from typing import Any

import numpy as np

from hosts.loop import LoopConfig, ModelWork, Sync, SyncResult, TrainLoop, weights_hash
from wire import argtypes
from wire.argtypes import described

__all__ = ["BACKENDS", "SCHEMES", "CollectiveSum", "GlooSum", "InaSum", "build_parser", "main",
           "weights_hash"]

SCHEMES = ("gloo", "ina", "ps", "ring", "bml", "rail_ring", "rail_sharded_ps")
#: The schemes that sum through ``hosts.bml.collective`` and need ``--plan``.
PLAN_SCHEMES = ("ring", "bml", "rail_ring", "rail_sharded_ps")


class GlooSum(Sync):
    """The sum over the ranks by ``torch.distributed.all_reduce`` (gloo over TCP)."""

    def __init__(self, args: argparse.Namespace) -> None:
        import torch.distributed as dist

        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = args.master_addr, str(args.master_port)
        dist.init_process_group("gloo", rank=args.rank, world_size=args.world,
                                timeout=timedelta(seconds=args.timeout))
        self.dist = dist

    def sync(self, grad: np.ndarray) -> SyncResult:
        import torch

        t = torch.from_numpy(grad)
        self.dist.all_reduce(t)
        return SyncResult(sum=t.numpy())

    def close(self) -> None:
        self.dist.destroy_process_group()


class InaSum(Sync):
    """The sum over the ranks through an INA job (``ina``) or its PS-only twin (``ps``)."""

    def __init__(self, args: argparse.Namespace) -> None:
        from hosts.ina.ddp_hook import InaHookState

        self.state = InaHookState.from_policy(args.policy, args.rank, max_time=args.timeout)

    def sync(self, grad: np.ndarray) -> SyncResult:
        return SyncResult(sum=self.state.allreduce_sum(grad))

    def stats(self) -> dict[str, Any]:
        s = self.state
        return {"rounds": s.round, "bytes_sent": s.bytes_sent,
                "retransmissions": sum(x.retransmissions for x in s.stats),
                # by reason (docs/ina.md, "Loss recovery")
                **{k: sum(getattr(x, k) for x in s.stats)
                   for k in ("resend_nack", "request_fast", "request_probe", "request_timer")}}

    def close(self) -> None:
        self.state.close()


class CollectiveSum(Sync):
    """The sum over the ranks by ring all-reduce or BML (``hosts.bml.collective``): the
    plan file names the scheme, the servers' addresses and the vector's length."""

    def __init__(self, args: argparse.Namespace) -> None:
        from hosts.bml.collective import Collective

        self.coll = Collective.from_plan_file(args.plan, server=args.rank, timeout=args.timeout)

    def sync(self, grad: np.ndarray) -> SyncResult:
        return SyncResult(sum=self.coll.allreduce(grad))

    def stats(self) -> dict[str, Any]:
        st = self.coll.stats()
        tx = st.get("tx_bytes") or {}
        return {"rounds": st.get("rounds", 0),
                "bytes_sent": int(sum(tx.values()) if isinstance(tx, dict) else sum(tx))}

    def close(self) -> None:
        self.coll.close()


#: scheme -> the Sync class of this module's ranks (the plugged-in schemes' are in
#: ``hosts.syncs.SYNCS``).
BACKENDS: dict[str, type[Sync]] = {"gloo": GlooSum, "ina": InaSum, "ps": InaSum,
                                    **{s: CollectiveSum for s in PLAN_SCHEMES}}


def build_parser() -> argparse.ArgumentParser:
    """Command-line options."""
    ap = argtypes.Parser(prog="python -m hosts.trainer", description=described(__doc__))
    ap.add_argument("--scheme", choices=SCHEMES, required=True)
    ap.add_argument("--rank", type=argtypes.natural, required=True)
    ap.add_argument("--world", type=argtypes.count, required=True)
    ap.add_argument("--model", default="digits", help="model name (hosts.training)")
    ap.add_argument("--data", default="digits", help="data set name (hosts.training)")
    ap.add_argument("--seed", type=argtypes.natural, default=0, help="initial weights, split and batch order")
    ap.add_argument("--epochs", type=argtypes.count, default=3)
    ap.add_argument("--batch", type=argtypes.count, default=16, help="per-rank batch size")
    ap.add_argument("--lr", type=argtypes.positive, default=0.5)
    ap.add_argument("--max-steps", type=argtypes.natural, default=0, help="cap on steps per epoch (0: none)")
    ap.add_argument("--eval-every", type=argtypes.natural, default=0,
                    help="evaluate every K steps as well as at each epoch's end (0: epochs only)")
    ap.add_argument("--slow", type=argtypes.number(1.0), default=1.0, help="compute F times slower (F >= 1)")
    ap.add_argument("--compute-time", type=argtypes.nonnegative, default=0.0,
                    help="fix each step's compute at S seconds (dilated time; 0: real)")
    ap.add_argument("--master-addr", default="127.0.0.1", help="gloo: rank 0's address")
    ap.add_argument("--master-port", type=argtypes.port, default=29500, help="gloo: rendezvous port")
    ap.add_argument("--policy", help="ina/ps: the job's policy file")
    ap.add_argument("--plan", help=f"{'/'.join(PLAN_SCHEMES)}: the plan file (controller.bcube)")
    ap.add_argument("--timeout", type=argtypes.positive, default=120.0, help="bound on one synchronization (s)")
    return ap


def main(argv: list[str] | None = None) -> int:
    """Train; exit 0 on success, 1 on a synchronization failure."""
    args = build_parser().parse_args(argv)
    if args.scheme in ("ina", "ps") and not args.policy:
        print("--scheme ina/ps needs --policy", file=sys.stderr)
        return 2
    if args.scheme in PLAN_SCHEMES and not args.plan:
        print(f"--scheme {'/'.join(PLAN_SCHEMES)} needs --plan", file=sys.stderr)
        return 2
    if args.slow < 1.0 or args.compute_time < 0:
        print("--slow must be >= 1 and --compute-time >= 0", file=sys.stderr)
        return 2
    import torch

    from hosts import training as tr

    torch.set_num_threads(1)  # many ranks share the machine's cores
    data = tr.load_data(args.data, args.seed)
    steps = (len(data.y_train) // args.world) // args.batch  # the same count on every rank
    if args.max_steps > 0:
        steps = min(steps, args.max_steps)
    work = ModelWork(tr.build_model(args.model, args.seed), data,
                     tr.worker_shard(data, args.rank, args.world), args.batch, args.seed,
                     heldout=tr.heldout_set(data, args.seed) if args.rank == 0 else None)
    cfg = LoopConfig(args.rank, args.world, args.epochs, steps, args.lr, args.eval_every,
                     args.slow, args.compute_time)
    return TrainLoop(cfg, work, BACKENDS[args.scheme](args)).run()


if __name__ == "__main__":
    sys.exit(main())
