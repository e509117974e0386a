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
from wire import argtypes
from wire.argtypes import described


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


def _parser() -> argparse.ArgumentParser:
    """The script's command line."""
    ap = argtypes.Parser(prog="python -m hosts.ina.ddp_train", description=described(__doc__))
    ap.add_argument("--rank", type=argtypes.natural, required=True)
    ap.add_argument("--world", type=argtypes.count, required=True)
    ap.add_argument("--master-addr", required=True, help="rank 0's address (gloo rendezvous)")
    ap.add_argument("--master-port", type=argtypes.port, default=29500)
    ap.add_argument("--hook", choices=["none", "ina"], default="none",
                    help="gradient averaging: gloo all-reduce (none) or gradnet INA")
    ap.add_argument("--policy", help="INA job policy file (with --hook ina)")
    ap.add_argument("--epochs", type=argtypes.count, default=3)
    ap.add_argument("--batch", type=argtypes.count, default=16, help="per-rank batch size")
    ap.add_argument("--lr", type=argtypes.positive, default=0.5)
    ap.add_argument("--max-steps", type=argtypes.natural, default=0, help="cap on steps per epoch (0: none)")
    ap.add_argument("--seed", type=argtypes.natural, default=0)
    ap.add_argument("--check-grad", action="store_true",
                    help="compare the first batch's averaged gradients with gloo's")
    ap.add_argument("--timeout", type=argtypes.positive, default=120.0, help="rendezvous and collective timeout (s)")
    ap.add_argument("--bucket-cap-mb", type=argtypes.positive, default=25.0,
                    help="DDP's bucket_cap_mb (default 25: the digits CNN is one bucket)")
    ap.add_argument("--round-cycle", type=argtypes.natural, default=None,
                    help="INA hook: rounds before the fragment numbers repeat (the PS's "
                         "--round-cycle; default hosts.ina.ddp_hook.HOOK_ROUND_CYCLE)")
    ap.add_argument("--reuse-after", type=argtypes.nonnegative, default=None,
                    help="INA hook: seconds before reused numbers (default 5)")
    ap.add_argument("--sync-hook", action="store_true",
                    help="INA hook: allreduce inside the hook (no overlap with backward)")
    ap.add_argument("--calibrate", type=argtypes.natural, default=5,
                    help="backward passes without communication timed before training")
    return ap


class DdpTrainer:
    """One rank of the DDP job: the process group, the model with its comm hook
    (gloo's all-reduce or INA), the training loop and its timing."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.step_s: list[float] = []
        self.bwd_s: list[float] = []
        self.comm_s: list[float] = []
        self.exposed_s: list[float] = []
        self.last_step_rounds = 0
        self.grad_check: float | None = None
        self.compute_bwd: float | None = None

    def setup(self) -> None:
        """Join the gloo group; build the model, DDP, the hook, the optimizer, the shard."""
        args = self.args
        torch.set_num_threads(1)  # many ranks share a 2-core machine
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = args.master_addr, str(args.master_port)
        dist.init_process_group("gloo", rank=args.rank, world_size=args.world,
                                timeout=timedelta(seconds=args.timeout))
        self.data = load_digits_split(args.seed)
        self.model = make_model(args.seed)
        self.ddp = DDP(self.model, bucket_cap_mb=args.bucket_cap_mb)
        self.state = None
        if args.hook == "ina":
            from hosts.ina.ddp_hook import HOOK_ROUND_CYCLE, InaHookState, ina_allreduce_hook
            from hosts.ina.rounds import DEFAULT_REUSE_AFTER_S

            self.state = InaHookState.from_policy(
                args.policy, args.rank,
                round_cycle=HOOK_ROUND_CYCLE if args.round_cycle is None else args.round_cycle,
                reuse_after=DEFAULT_REUSE_AFTER_S if args.reuse_after is None else args.reuse_after,
                asynchronous=not args.sync_hook)
            hook, hook_state = ina_allreduce_hook, self.state  # the one line would register these
        else:
            from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

            hook, hook_state = allreduce_hook, None  # DDP's default all-reduce, as a hook
        self.timer = CommTimer()
        self.ddp.register_comm_hook(TimedState(hook, hook_state, self.timer), timed_hook)
        self.opt = torch.optim.SGD(self.ddp.parameters(), lr=args.lr)
        self.x, self.y = worker_shard(self.data, args.rank, args.world)
        # the same number of steps on every rank (shards differ by at most one example)
        self.steps = (len(self.data.y_train) // args.world) // args.batch
        if args.max_steps > 0:
            self.steps = min(self.steps, args.max_steps)

    def run(self) -> int:
        """Set up, calibrate, train every epoch, print the summary; 0."""
        args = self.args
        self.setup()
        if args.calibrate > 0:
            self.compute_bwd = _calibrate(self.ddp, self.x, self.y, args)
        t_start = time.monotonic()
        for epoch in range(args.epochs):
            t0 = time.monotonic()
            comm = self.train_epoch(epoch)
            acc = evaluate(self.model, self.data)
            _emit({"rank": args.rank, "epoch": epoch + 1, "accuracy": round(acc, 4),
                   "epoch_s": round(time.monotonic() - t0, 3), "backward_s": round(comm, 3),
                   "steps": self.steps})
        _emit(self.summary(t_start))
        dist.destroy_process_group()
        return 0

    def train_epoch(self, epoch: int) -> float:
        """One epoch's steps; returns the seconds spent in backward passes."""
        args, state = self.args, self.state
        comm = 0.0
        for step, (xb, yb) in enumerate(batches(self.x, self.y, args.batch, epoch, args.seed)[:self.steps]):
            check = args.check_grad and epoch == 0 and step == 0
            if check:
                own = _plain_grads(self.model, xb, yb)
            ts = time.monotonic()
            self.opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(self.ddp(xb), yb)
            tc = time.monotonic()
            r0 = state.round if state is not None else 0
            loss.backward()  # DDP averages the gradients here (gloo or the INA hook)
            te = time.monotonic()
            comm += te - tc
            spans = self.timer.take()
            self.last_step_rounds = (state.round - r0) if state is not None else 0
            self.bwd_s.append(te - tc)
            self.comm_s.append(span_length(spans))
            if self.compute_bwd is not None:
                self.exposed_s.append(max(0.0, te - tc - self.compute_bwd))
            if check:
                self.grad_check = self.compare_with_gloo(own)
            self.opt.step()
            self.step_s.append(time.monotonic() - ts)
        return comm

    def compare_with_gloo(self, own: list[torch.Tensor]) -> float:
        """Largest difference between the averaged gradients the hook delivered and
        gloo's average of the same per-rank gradients."""
        got = [p.grad.detach().clone() for p in self.model.parameters()]
        diffs = []
        for g_own, g_got in zip(own, got, strict=True):
            ref = g_own.clone()
            dist.all_reduce(ref)  # gloo's sum of the same per-rank gradients
            diffs.append(float((ref / self.args.world - g_got).abs().max()))
        return max(diffs)

    def summary(self, t_start: float) -> dict:
        """The last JSON line: accuracy, weights digest, timing, INA's counters."""
        model, state = self.model, self.state
        summary = {"rank": self.args.rank, "done": True, "hook": self.args.hook,
                   "accuracy": round(evaluate(model, self.data), 4),
                   "seconds": round(time.monotonic() - t_start, 3),
                   "weights_sha256_16": hashlib.sha256(np.concatenate(
                       [p.detach().numpy().ravel() for p in model.parameters()]).tobytes()).hexdigest()[:16]}
        if self.grad_check is not None:
            summary["grad_max_abs_diff_vs_gloo"] = self.grad_check
        summary["timing"] = _timing(self.step_s, self.bwd_s, self.comm_s, self.exposed_s,
                                    self.compute_bwd)
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
            last = state.buckets[len(state.buckets) - self.last_step_rounds:]
            summary["ina_buckets"] = [{"values": b.values, "fragments": b.fragments,
                                       "packets_sent": b.packets_sent,
                                       "retransmissions": b.retransmissions} for b in last]
        return summary


def main(argv: list[str] | None = None) -> int:
    """Train; exit 0 on success."""
    ap = _parser()
    args = ap.parse_args(argv)
    if args.hook == "ina" and not args.policy:
        ap.error("--hook ina needs --policy")
    return DdpTrainer(args).run()

if __name__ == "__main__":
    sys.exit(main())
