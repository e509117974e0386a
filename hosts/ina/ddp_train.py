"""A plain PyTorch DDP training script (digits CNN), with gradnet INA as one optional line.

Run one process per rank (each in its Mininet host)::

    python -m hosts.ina.ddp_train --rank R --world N --master-addr 10.0.0.2 [--hook ina --policy P]

Without ``--hook`` it is ordinary DDP over gloo. With ``--hook ina`` the only difference
is ``model.register_comm_hook(InaHookState.from_policy(...), ina_allreduce_hook)``: the
gradients are then averaged by in-network aggregation (the job's PS must be running with
``python -m hosts.ina.ps --policy P --rounds 0``). ``--check-grad`` also all-reduces the
first batch's gradients with gloo and reports the largest difference from what the hook
delivered. One JSON line per epoch, then a summary line.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from hosts.training import batches, evaluate, load_digits_split, make_model, worker_shard


def _emit(d: dict) -> None:
    print(json.dumps(d), flush=True)


def _plain_grads(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
    """This rank's own gradients of the batch (no DDP), for the comparison with gloo."""
    model.zero_grad(set_to_none=True)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    return [p.grad.detach().clone() for p in model.parameters()]


def main(argv: list[str] | None = None) -> int:
    """Train; exit 0 on success."""
    ap = argparse.ArgumentParser(prog="python -m hosts.ina.ddp_train", description=__doc__.splitlines()[0])
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--master-addr", required=True, help="rank 0's address (gloo rendezvous)")
    ap.add_argument("--master-port", type=int, default=29500)
    ap.add_argument("--hook", choices=["none", "ina"], default="none",
                    help="gradient averaging: gloo all-reduce (none) or gradnet INA")
    ap.add_argument("--policy", help="INA job policy file (with --hook ina)")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=16, help="per-rank batch size")
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--max-steps", type=int, default=0, help="cap on steps per epoch (0: none)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--check-grad", action="store_true",
                    help="compare the first batch's averaged gradients with gloo's")
    ap.add_argument("--timeout", type=float, default=120.0, help="rendezvous and collective timeout (s)")
    args = ap.parse_args(argv)
    if args.hook == "ina" and not args.policy:
        ap.error("--hook ina needs --policy")
    torch.set_num_threads(1)  # many ranks share a 2-core machine

    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = args.master_addr, str(args.master_port)
    dist.init_process_group("gloo", rank=args.rank, world_size=args.world,
                            timeout=timedelta(seconds=args.timeout))
    data = load_digits_split(args.seed)
    model = make_model(args.seed)
    ddp = DDP(model)
    state = None
    if args.hook == "ina":
        from hosts.ina.ddp_hook import InaHookState, ina_allreduce_hook

        state = InaHookState.from_policy(args.policy, args.rank)
        ddp.register_comm_hook(state, ina_allreduce_hook)  # the one line
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr)
    x, y = worker_shard(data, args.rank, args.world)
    # the same number of steps on every rank (shards differ by at most one example)
    steps = (len(data.y_train) // args.world) // args.batch
    if args.max_steps > 0:
        steps = min(steps, args.max_steps)
    grad_check = None
    t_start = time.monotonic()
    for epoch in range(args.epochs):
        t0 = time.monotonic()
        comm = 0.0
        for step, (xb, yb) in enumerate(batches(x, y, args.batch, epoch, args.seed)[:steps]):
            if args.check_grad and epoch == 0 and step == 0:
                own = _plain_grads(model, xb, yb)
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(ddp(xb), yb)
            tc = time.monotonic()
            loss.backward()  # DDP averages the gradients here (gloo or the INA hook)
            comm += time.monotonic() - tc
            if args.check_grad and epoch == 0 and step == 0:
                got = [p.grad.detach().clone() for p in model.parameters()]
                diffs = []
                for g_own, g_got in zip(own, got, strict=True):
                    ref = g_own.clone()
                    dist.all_reduce(ref)  # gloo's sum of the same per-rank gradients
                    diffs.append(float((ref / args.world - g_got).abs().max()))
                grad_check = max(diffs)
            opt.step()
        acc = evaluate(model, data)
        _emit({"rank": args.rank, "epoch": epoch + 1, "accuracy": round(acc, 4),
               "epoch_s": round(time.monotonic() - t0, 3), "backward_s": round(comm, 3),
               "steps": steps})
    summary = {"rank": args.rank, "done": True, "hook": args.hook,
               "accuracy": round(evaluate(model, data), 4),
               "seconds": round(time.monotonic() - t_start, 3),
               "weights_sha256_16": hashlib.sha256(np.concatenate(
                   [p.detach().numpy().ravel() for p in model.parameters()]).tobytes()).hexdigest()[:16]}
    if grad_check is not None:
        summary["grad_max_abs_diff_vs_gloo"] = grad_check
    if state is not None:
        summary["ina_rounds"] = state.round
        summary["ina_bytes_sent"] = state.bytes_sent
        summary["ina_retransmissions"] = sum(s.retransmissions for s in state.stats)
        state.close()
    _emit(summary)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
