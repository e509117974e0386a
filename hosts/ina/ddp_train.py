"""A plain PyTorch DDP training script (digits CNN), with gradnet INA as one optional line.

Run one process per rank (each in its Mininet host)::

    python -m hosts.ina.ddp_train --rank R --world N --master-addr 10.0.0.2 [--hook ina --policy P]

Without ``--hook`` it is ordinary DDP over gloo. With ``--hook ina`` the only difference
is ``model.register_comm_hook(InaHookState.from_policy(...), ina_allreduce_hook)``: the
gradients are then averaged by in-network aggregation (the job's PS must be running with
``python -m hosts.ina.ps --policy P --rounds 0``). ``--check-grad`` also all-reduces the
first batch's gradients with gloo and reports the largest difference from what the hook
delivered. One JSON line per epoch, then a summary line.

Timing (both hooks are wrapped in ``hosts.ina.ddp_hook.timed_hook``; gloo's is DDP's own
``allreduce_hook``): the median step time (forward, backward, optimizer), the backward
pass's compute alone (``--calibrate`` steps under ``no_sync``, no communication, before
training), each bucket's communication span, and the fraction of communication
overlapped with the backward pass: ``1 - exposed / comm``, where ``exposed`` is the
backward wall time beyond its compute and ``comm`` the union of the buckets' spans.
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

from hosts.ina.ddp_hook import CommTimer, TimedState, span_length, timed_hook
from hosts.training import batches, evaluate, load_digits_split, make_model, worker_shard


def _emit(d: dict) -> None:
    print(json.dumps(d), flush=True)


def _plain_grads(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
    """This rank's own gradients of the batch (no DDP), for the comparison with gloo."""
    model.zero_grad(set_to_none=True)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    return [p.grad.detach().clone() for p in model.parameters()]


def _calibrate(ddp: DDP, x: torch.Tensor, y: torch.Tensor, args: argparse.Namespace) -> float:
    """Median seconds of a backward pass without communication (``no_sync``)."""
    times = []
    for step, (xb, yb) in enumerate(batches(x, y, args.batch, 0, args.seed)[:args.calibrate]):
        del step
        with ddp.no_sync():
            loss = torch.nn.functional.cross_entropy(ddp(xb), yb)
            t = time.monotonic()
            loss.backward()
            times.append(time.monotonic() - t)
    ddp.zero_grad(set_to_none=True)
    return float(np.median(times))


def _timing(step_s: list[float], bwd_s: list[float], comm_s: list[float],
            exposed_s: list[float], compute_bwd: float | None) -> dict:
    """Medians over the steps after the first (DDP rebuilds its buckets in step 1)."""
    def med(v: list[float]) -> float | None:
        v = v[1:] if len(v) > 1 else v
        return round(float(np.median(v)), 6) if v else None
    out = {"steps": len(step_s), "step_s": med(step_s), "backward_s": med(bwd_s),
           "comm_s": med(comm_s), "backward_compute_s": None if compute_bwd is None
           else round(compute_bwd, 6), "exposed_comm_s": med(exposed_s), "overlap": None}
    tail = slice(1, None) if len(comm_s) > 1 else slice(None)
    comm, exposed = sum(comm_s[tail]), sum(exposed_s[tail])
    if exposed_s and comm > 0:
        out["overlap"] = round(max(0.0, 1.0 - min(exposed, comm) / comm), 4)
    return out


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
    ap.add_argument("--bucket-cap-mb", type=float, default=25.0,
                    help="DDP's bucket_cap_mb (default 25: the digits CNN is one bucket)")
    ap.add_argument("--round-cycle", type=int, default=None,
                    help="INA hook: rounds before the fragment numbers repeat (the PS's "
                         "--round-cycle; default hosts.ina.ddp_hook.HOOK_ROUND_CYCLE)")
    ap.add_argument("--reuse-after", type=float, default=None,
                    help="INA hook: seconds before reused numbers (default 2)")
    ap.add_argument("--sync-hook", action="store_true",
                    help="INA hook: allreduce inside the hook (no overlap with backward)")
    ap.add_argument("--calibrate", type=int, default=5,
                    help="backward passes without communication timed before training")
    args = ap.parse_args(argv)
    if args.hook == "ina" and not args.policy:
        ap.error("--hook ina needs --policy")
    torch.set_num_threads(1)  # many ranks share a 2-core machine

    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = args.master_addr, str(args.master_port)
    dist.init_process_group("gloo", rank=args.rank, world_size=args.world,
                            timeout=timedelta(seconds=args.timeout))
    data = load_digits_split(args.seed)
    model = make_model(args.seed)
    ddp = DDP(model, bucket_cap_mb=args.bucket_cap_mb)
    state = None
    if args.hook == "ina":
        from hosts.ina.ddp_hook import HOOK_ROUND_CYCLE, InaHookState, ina_allreduce_hook
        from hosts.ina.rounds import DEFAULT_REUSE_AFTER_S

        state = InaHookState.from_policy(
            args.policy, args.rank,
            round_cycle=HOOK_ROUND_CYCLE if args.round_cycle is None else args.round_cycle,
            reuse_after=DEFAULT_REUSE_AFTER_S if args.reuse_after is None else args.reuse_after,
            asynchronous=not args.sync_hook)
        hook, hook_state = ina_allreduce_hook, state  # the one line would register these
    else:
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

        hook, hook_state = allreduce_hook, None  # DDP's default all-reduce, as a hook
    timer = CommTimer()
    ddp.register_comm_hook(TimedState(hook, hook_state, timer), timed_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr)
    x, y = worker_shard(data, args.rank, args.world)
    # the same number of steps on every rank (shards differ by at most one example)
    steps = (len(data.y_train) // args.world) // args.batch
    if args.max_steps > 0:
        steps = min(steps, args.max_steps)
    grad_check = None
    compute_bwd = _calibrate(ddp, x, y, args) if args.calibrate > 0 else None
    step_s: list[float] = []
    bwd_s: list[float] = []
    comm_s: list[float] = []
    exposed_s: list[float] = []
    last_step_rounds = 0
    t_start = time.monotonic()
    for epoch in range(args.epochs):
        t0 = time.monotonic()
        comm = 0.0
        for step, (xb, yb) in enumerate(batches(x, y, args.batch, epoch, args.seed)[:steps]):
            if args.check_grad and epoch == 0 and step == 0:
                own = _plain_grads(model, xb, yb)
            ts = time.monotonic()
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(ddp(xb), yb)
            tc = time.monotonic()
            r0 = state.round if state is not None else 0
            loss.backward()  # DDP averages the gradients here (gloo or the INA hook)
            te = time.monotonic()
            comm += te - tc
            spans = timer.take()
            last_step_rounds = (state.round - r0) if state is not None else 0
            bwd_s.append(te - tc)
            comm_s.append(span_length(spans))
            if compute_bwd is not None:
                exposed_s.append(max(0.0, te - tc - compute_bwd))
            if args.check_grad and epoch == 0 and step == 0:
                got = [p.grad.detach().clone() for p in model.parameters()]
                diffs = []
                for g_own, g_got in zip(own, got, strict=True):
                    ref = g_own.clone()
                    dist.all_reduce(ref)  # gloo's sum of the same per-rank gradients
                    diffs.append(float((ref / args.world - g_got).abs().max()))
                grad_check = max(diffs)
            opt.step()
            step_s.append(time.monotonic() - ts)
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
    summary["timing"] = _timing(step_s, bwd_s, comm_s, exposed_s, compute_bwd)
    if state is not None:
        summary["ina_rounds"] = state.round
        summary["ina_bytes_sent"] = state.bytes_sent
        summary["ina_retransmissions"] = sum(s.retransmissions for s in state.stats)
        state.close()
        summary["ina_fragment_space"] = state.fragment_space
        summary["ina_max_fragment"] = max((b.first_fragment + b.fragments - 1
                                           for b in state.buckets), default=None)
        summary["ina_reuse_wait_s"] = round(state.cycle.waited_s, 3) if state.cycle else 0.0
        # one step's buckets (the last; DDP rebuilds its buckets after the first step)
        last = state.buckets[len(state.buckets) - last_step_rounds:]
        summary["ina_buckets"] = [{"values": b.values, "fragments": b.fragments,
                                   "packets_sent": b.packets_sent,
                                   "retransmissions": b.retransmissions} for b in last]
    _emit(summary)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
