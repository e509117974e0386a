"""TEST TOOL, run inside an emulated host: one rank of the DDP hook's allreduces on
buckets of given sizes, many iterations (tests/test_ddp_hook.py).

    python -m tests.ddp_rounds_tool --policy P --rank R --sizes 1000,65,1 --iterations 30
        --round-cycle 5 --reuse-after 0.5 --seed S --out out.npz

Bucket ``b`` of iteration ``i`` holds ``default_rng([seed, rank, i, b]).standard_normal
(size) * 0.05``; the sums (float32) go to ``--out`` in order, and one JSON line reports
each bucket's fragments, GRADs sent and GRADs re-sent on a NACK, and the largest wire fragment
number.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from hosts.ina.ddp_hook import InaHookState


def bucket(seed: int, rank: int, i: int, b: int, n: int) -> np.ndarray:
    """The gradient bucket rank ``rank`` reduces as bucket ``b`` of iteration ``i``."""
    return (np.random.default_rng([seed, rank, i, b]).standard_normal(n) * 0.05).astype(np.float32)


def main(argv: list[str] | None = None) -> int:
    """Run the allreduces; exit 0 when all finished."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", required=True)
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--sizes", required=True)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--round-cycle", type=int, default=5)
    ap.add_argument("--reuse-after", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]
    state = InaHookState.from_policy(args.policy, args.rank, timeout=0.05, max_time=60.0,
                                     round_cycle=args.round_cycle, reuse_after=args.reuse_after,
                                     asynchronous=False)
    sums = []
    try:
        for i in range(args.iterations):
            for b, n in enumerate(sizes):
                sums.append(state.allreduce_sum(bucket(args.seed, args.rank, i, b, n)))
    finally:
        state.close()
    np.savez(args.out, *sums)
    assert state.cycle is not None
    print(json.dumps({
        "rounds": state.round, "reuse_wait_s": state.cycle.waited_s,
        "fragment_space": state.fragment_space,
        "max_fragment": max(r.first_fragment + r.fragments - 1 for r in state.buckets),
        "buckets": [[r.values, r.fragments, r.packets_sent, r.grad_resends]
                    for r in state.buckets]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
