"""Block floating point on real training gradients: its error next to a float32 all-reduce.

N ranks train the digits CNN (``hosts/training.py``) with SGD on their shards; at every
step each rank's gradient (the whole model, flattened as one DDP bucket) is summed four
ways: exactly (float64), as a float32 all-reduce does (float32 additions, rank order),
by INA block floating point (``wire.fixedpoint.bfp_reference``: the network returns
exactly these integer sums, which the network tests check element by element), and by
plain fixed point at scale 2^-16 where that does not overflow. Per block (one packet's
values: 64 unless ``--values-per-packet``) the error is measured normwise against the
exact sum, relative to the block's largest magnitude over the ranks (docs/ina.md, "Block
floating point"); the table gives the largest over blocks and steps, next to the
documented bound. With 128 or 256 values a block, the same error is also given relative
to each 64-value window's largest magnitude: what coarser blocks cost the smaller values.

    python -m bench.ina_bfp_bench [--workers 2,8,64,256] [--steps 20] [--seed 0]
                                  [--values-per-packet 64[,128,256]]
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from wire.argtypes import Parser, count, described, integer, listed, natural
from wire.fixedpoint import (
    FixedPointOverflow,
    bfp_dequantize,
    bfp_error_bound,
    bfp_reference,
    dequantize,
    num_fragments,
    quantize,
)
from wire.ina import INA_VALUE_SIZES


@dataclass
class BfpErrors:
    """Largest per-block normwise errors (relative to the block's largest magnitude)."""

    workers: int
    steps: int
    bfp: float  # BFP vs the exact sum
    float32: float  # a float32 all-reduce vs the exact sum
    bfp_vs_float32: float  # BFP vs the float32 all-reduce
    fixed: float | None  # fixed point 2^-16 vs exact (None: overflowed at every step)
    fixed_refused: int  # steps at which fixed point 2^-16 would overflow
    bound: float  # wire.fixedpoint.bfp_error_bound(N)
    values_per_packet: int = 64  # the BFP block
    bfp_64: float = 0.0  # BFP vs exact, relative to each 64-value window's largest


def _peaks(grads: list[np.ndarray], block: int) -> np.ndarray:
    """Per block of ``block`` values, the largest magnitude over the ranks."""
    n_b = num_fragments(grads[0].size, block)
    pad = n_b * block - grads[0].size
    return np.max([np.abs(np.pad(g, (0, pad))).reshape(n_b, block).max(1) for g in grads],
                  axis=0)


def _blockwise(err: np.ndarray, peak: np.ndarray, block: int = 64) -> float:
    n_b = peak.size
    e = np.pad(np.abs(err), (0, n_b * block - err.size)).reshape(n_b, block).max(1)
    return float((e / np.where(peak > 0, peak, 1.0)).max())


def measure(workers: int, steps: int, seed: int = 0, lr: float = 0.5,
            batch: int = 16, values_per_packet: int = 64) -> BfpErrors:
    """Train ``steps`` SGD steps of ``workers`` ranks and measure every step's sums
    (block floating point in blocks of ``values_per_packet`` values)."""
    import torch

    from hosts.training import (
        apply_gradients,
        batches,
        compute_gradients,
        flatten,
        load_digits_split,
        make_model,
        worker_shard,
    )

    torch.set_num_threads(1)
    data = load_digits_split(seed)
    model = make_model(seed)
    shards = [worker_shard(data, r, workers) for r in range(workers)]
    per_epoch = min(len(batches(x, y, batch, 0, seed)) for x, y in shards)
    n_steps = steps
    v = values_per_packet
    worst = {"bfp": 0.0, "float32": 0.0, "bfp_vs_float32": 0.0, "bfp_64": 0.0}
    fixed_worst: float | None = None
    refused = 0
    shapes = None
    per_rank: list = []
    for step in range(n_steps):
        epoch, k = divmod(step, per_epoch)  # a small shard: several epochs
        if k == 0:
            per_rank = [batches(x, y, batch, epoch, seed) for x, y in shards]
        grads_t = [compute_gradients(model, *per_rank[r][k]) for r in range(workers)]
        shapes = grads_t[0]
        grads = [flatten(g) for g in grads_t]
        exact = np.sum([g.astype(np.float64) for g in grads], axis=0)
        f32 = grads[0].copy()
        for g in grads[1:]:
            f32 += g  # float32 additions, as a float32 all-reduce
        peak, peak64 = _peaks(grads, v), _peaks(grads, 64)
        sums, e = bfp_reference(grads, workers, v)
        bfp = bfp_dequantize(sums.astype(np.int32), e, workers,
                             values_per_packet=v)[: exact.size]
        worst["bfp"] = max(worst["bfp"], _blockwise(bfp - exact, peak, v))
        worst["bfp_64"] = max(worst["bfp_64"], _blockwise(bfp - exact, peak64, 64))
        worst["float32"] = max(worst["float32"], _blockwise(f32 - exact, peak, v))
        worst["bfp_vs_float32"] = max(worst["bfp_vs_float32"],
                                      _blockwise(bfp.astype(np.float64) - f32, peak, v))
        try:
            q = np.sum([quantize(g, 16, workers).astype(np.int64) for g in grads], axis=0)
            fx = dequantize(q.astype(np.int32), 16)
            fixed_worst = max(fixed_worst or 0.0, _blockwise(fx - exact, peak, v))
        except FixedPointOverflow:
            refused += 1
        # train on the BFP mean, as the DDP hook would
        mean = bfp / np.float32(workers)
        offs = np.cumsum([0] + [a.size for a in shapes])
        apply_gradients(model, [mean[offs[i]:offs[i + 1]].reshape(a.shape)
                                for i, a in enumerate(shapes)], lr)
    return BfpErrors(workers, n_steps, worst["bfp"], worst["float32"],
                     worst["bfp_vs_float32"], fixed_worst, refused, bfp_error_bound(workers),
                     v, worst["bfp_64"])


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: one row per worker count."""
    p = Parser(prog="python -m bench.ina_bfp_bench", description=described(__doc__))
    p.add_argument("--workers", type=listed(integer(1, 256)), default=[2, 8, 64, 256],
                   help="rank counts, 1..256 each (default 2,8,64,256)")
    p.add_argument("--steps", type=count, default=20, help="SGD steps per rank count (default 20)")
    p.add_argument("--seed", type=natural, default=0, help="data and model seed (default 0)")
    p.add_argument("--values-per-packet", type=listed(integer(1)), default=[64],
                   help="BFP block sizes (values per packet), e.g. 64,128,256 (default 64)")
    args = p.parse_args(argv)
    sizes = args.values_per_packet
    bad = sorted(set(sizes) - set(INA_VALUE_SIZES))
    if bad:
        p.error(f"argument --values-per-packet: {bad[0]} values a packet has no program (choose from "
                f"{', '.join(map(str, INA_VALUE_SIZES))})")
    from rich.table import Table

    from controller.output import TableConsole

    console = TableConsole()
    t = Table(title="INA block floating point on digits-CNN gradients: largest per-block "
                    "error / block's largest magnitude")
    for col in ("ranks", "values/packet", "steps", "BFP vs exact", "bound",
                "BFP vs exact per 64", "float32 all-reduce vs exact",
                "BFP vs float32", "fixed 2^-16 vs exact", "fixed refused"):
        t.add_column(col, justify="right")
    ok = True
    for n in args.workers:
        for v in sizes:
            r = measure(n, args.steps, args.seed, values_per_packet=v)
            ok &= r.bfp <= r.bound
            t.add_row(str(n), str(v), str(r.steps), f"{r.bfp:.2e}", f"{r.bound:.2e}",
                      f"{r.bfp_64:.2e}", f"{r.float32:.2e}", f"{r.bfp_vs_float32:.2e}",
                      "-" if r.fixed is None else f"{r.fixed:.2e}", str(r.fixed_refused))
    console.print(t)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
