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
* ``bml``: BCube hierarchical synchronization (seed 003) on a BCube, one NIC per level
  (``hosts.bml.collective``);
* ``rail_ring``: BML's baseline with the same NIC count: k concurrent ring all-reduces,
  one per rail of a k-rail network, each on 1/k of the gradient (``hosts.bml.collective``);
* ``rail_sharded_ps``: BML's other same-NIC-count baseline: k concurrent sharded PSs on
  the same k-rail network, each on 1/k of the gradient (``hosts.bml.collective``).

Every step: gradients of the batch (compute), their sum over the ranks (sync), the SGD
step ``w <- w - lr * sum / N``. Since every rank applies the same sum, the models stay
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
import hashlib
import json
import os
import resource
import sys
import time
from datetime import timedelta
from typing import Any

import numpy as np

from wire import argtypes

SCHEMES = ("gloo", "ina", "ps", "ring", "bml", "rail_ring", "rail_sharded_ps")
#: The schemes that sum through ``hosts.bml.collective`` and need ``--plan``.
PLAN_SCHEMES = ("ring", "bml", "rail_ring", "rail_sharded_ps")


def _emit(d: dict[str, Any]) -> None:
    print(json.dumps(d), flush=True)


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class GlooSum:
    """The sum over the ranks by ``torch.distributed.all_reduce`` (gloo over TCP)."""

    def __init__(self, args: argparse.Namespace) -> None:
        import torch.distributed as dist

        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = args.master_addr, str(args.master_port)
        dist.init_process_group("gloo", rank=args.rank, world_size=args.world,
                                timeout=timedelta(seconds=args.timeout))
        self.dist = dist

    def __call__(self, flat: np.ndarray) -> np.ndarray:
        import torch

        t = torch.from_numpy(flat)
        self.dist.all_reduce(t)
        return t.numpy()

    def stats(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        self.dist.destroy_process_group()


class InaSum:
    """The sum over the ranks through an INA job (``ina``) or its PS-only twin (``ps``)."""

    def __init__(self, args: argparse.Namespace) -> None:
        from hosts.ina.ddp_hook import InaHookState

        self.state = InaHookState.from_policy(args.policy, args.rank, max_time=args.timeout)

    def __call__(self, flat: np.ndarray) -> np.ndarray:
        return self.state.allreduce_sum(flat)

    def stats(self) -> dict[str, Any]:
        s = self.state
        return {"rounds": s.round, "bytes_sent": s.bytes_sent,
                "retransmissions": sum(x.retransmissions for x in s.stats)}

    def close(self) -> None:
        self.state.close()


class CollectiveSum:
    """The sum over the ranks by ring all-reduce or BML (``hosts.bml.collective``): the
    plan file names the scheme, the servers' addresses and the vector's length."""

    def __init__(self, args: argparse.Namespace) -> None:
        from hosts.bml.collective import Collective

        self.coll = Collective.from_plan_file(args.plan, server=args.rank, timeout=args.timeout)

    def __call__(self, flat: np.ndarray) -> np.ndarray:
        return self.coll.allreduce(flat)

    def stats(self) -> dict[str, Any]:
        st = self.coll.stats()
        tx = st.get("tx_bytes") or {}
        return {"rounds": st.get("rounds", 0),
                "bytes_sent": int(sum(tx.values()) if isinstance(tx, dict) else sum(tx))}

    def close(self) -> None:
        self.coll.close()


BACKENDS = {"gloo": GlooSum, "ina": InaSum, "ps": InaSum,
            **{s: CollectiveSum for s in PLAN_SCHEMES}}


def weights_hash(model: Any) -> str:
    """A short hash of the model's parameters (equal models, equal hashes)."""
    return hashlib.sha256(np.concatenate(
        [p.detach().numpy().ravel() for p in model.parameters()]).tobytes()).hexdigest()[:16]


def build_parser() -> argparse.ArgumentParser:
    """Command-line options."""
    ap = argtypes.Parser(prog="python -m hosts.trainer", description=__doc__.splitlines()[0])
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
    heldout = tr.heldout_set(data, args.seed) if args.rank == 0 else None
    model = tr.build_model(args.model, args.seed)
    x, y = tr.worker_shard(data, args.rank, args.world)
    steps = (len(data.y_train) // args.world) // args.batch  # the same count on every rank
    if args.max_steps > 0:
        steps = min(steps, args.max_steps)
    like = tr.parameter_arrays(model)
    backend = BACKENDS[args.scheme](args)
    cpu0 = _cpu_s()
    t_start = time.monotonic()
    eval_s = compute_s = sync_s = 0.0
    done_steps = 0

    def evaluate(epoch: int, step: int) -> None:
        nonlocal eval_s
        t0 = time.monotonic()
        rec: dict[str, Any] = {"rank": args.rank, "epoch": epoch, "step": step,
                               "t": round(t0 - t_start - eval_s, 4), "weights": weights_hash(model),
                               "compute_s": round(compute_s, 4), "sync_s": round(sync_s, 4)}
        if args.rank == 0:
            accs = tr.evaluate_sets(model, data, heldout)
            rec.update(accuracy=round(accs["test"], 4), heldout=round(accs["heldout"], 4))
        eval_s += time.monotonic() - t0
        _emit(rec)

    evaluate(0, 0)
    try:
        for epoch in range(args.epochs):
            for xb, yb in tr.batches(x, y, args.batch, epoch, args.seed)[:steps]:
                t0 = time.monotonic()
                flat = tr.flatten(tr.compute_gradients(model, xb, yb))
                spent = time.monotonic() - t0
                # a slow rank takes F times as long, measured or fixed (dilated) compute alike
                want = (args.compute_time or spent) * args.slow
                if want > spent:
                    time.sleep(want - spent)
                t1 = time.monotonic()
                compute_s += t1 - t0
                total = backend(flat)
                sync_s += time.monotonic() - t1
                tr.apply_gradients(model, tr.unflatten(total, like), args.lr, scale=1.0 / args.world)
                done_steps += 1
                if args.eval_every and done_steps % args.eval_every == 0:
                    evaluate(epoch + 1, done_steps)
            if not (args.eval_every and done_steps % args.eval_every == 0):
                evaluate(epoch + 1, done_steps)
    except Exception as e:  # a lost peer or a timeout: report what we had
        _emit({"rank": args.rank, "error": f"{type(e).__name__}: {e}"})
        backend_stats = backend.stats()
        backend.close()
        _emit({"rank": args.rank, "done": False, "steps": done_steps, **backend_stats})
        return 1
    _emit({"rank": args.rank, "done": True, "steps": done_steps,
           "steps_per_epoch": steps, "t": round(time.monotonic() - t_start - eval_s, 4),
           "eval_s": round(eval_s, 4), "compute_s": round(compute_s, 4), "sync_s": round(sync_s, 4),
           "cpu_s": round(_cpu_s() - cpu0, 3), "weights": weights_hash(model),
           "parameters": int(sum(p.numel() for p in model.parameters())), **backend.stats()})
    backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
