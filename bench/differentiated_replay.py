"""``python -m bench differentiated-replay``: the differentiated PS's arithmetic without a
network, to separate the optimisation from the transport (the instability).

Replays ``experiments/differentiated.py``'s training in one process: the digits CNN
(``make_model(seed, 8)``), each worker's shard and batch order (``seed * 1000 + rank``),
SANE contributions and classification per worker, the PS's sum of the rebuilt gradients
in worker order and its SGD step ``w -= lr * scale * sum`` with ``scale = 1 / world``, or
smaller where ``--clip`` caps the averaged gradient's L2 norm, exactly as
``hosts/differentiated/ps.py`` computes it. Two transports: ``reliable`` (every block)
and ``important`` (only the blocks above the quantile, the rest zero-filled: what the
differentiated PS gets when every unreliable datagram is lost). The all-reliable replay
gives bit for bit the network run's model (same sums, same order).

Prints per (transport, clip, seed) the test accuracy after each epoch and the largest
update norm (``|sum| / world``) of the run, then the lowest accuracy after epoch 2 over
the seeds.

    python -m bench.differentiated_replay [--seeds 0-7] [--epochs 5] [--clips 0,1]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from wire.argtypes import Parser, count, described, listed, names, natural, nonnegative


def replay(seed: int, transport: str, clip: float, epochs: int = 5, lr: float = 0.5, batch: int = 32,
           world: int = 4, quantile: float = 0.5, alpha: float = 0.5) -> tuple[list[float], list[float]]:
    """Test accuracy after each epoch and the update norm of each iteration."""
    import torch

    from hosts import training as tr
    from hosts.differentiated.blocks import BlockLayout, Contribution, classify
    from hosts.differentiated.ps import _norm

    torch.set_num_threads(1)
    data, model = tr.load_digits_split(seed), tr.make_model(seed, 8)
    shards = [tr.worker_shard(data, r, world) for r in range(world)]
    steps = max(1, (len(data.y_train) // world) // batch)
    layout = BlockLayout.of(tr.parameter_arrays(model), 64)
    contrib = [Contribution(len(layout), alpha) for _ in range(world)]
    accs, norms = [], []
    for epoch in range(epochs):
        order = [tr.batches(*shards[r], batch, epoch, seed=seed * 1000 + r) for r in range(world)]
        for step in range(steps):
            agg = [np.zeros(s, dtype=np.float32) for s in layout.shapes]
            for r in range(world):
                blocks = layout.split(tr.compute_gradients(model, *order[r][step]))
                c = contrib[r].update(blocks)
                keep = range(len(blocks)) if transport == "reliable" else \
                    np.flatnonzero(classify(c, quantile, 3) == 0)
                for a, x in zip(agg, layout.reconstruct({int(j): blocks[j] for j in keep}), strict=True):
                    a += x
            total = _norm(agg)
            scale = 1.0 / world
            if clip and total * scale > clip:
                scale = clip / total
            norms.append(total / world)
            tr.apply_gradients(model, agg, lr, scale)
        accs.append(tr.evaluate(model, data))
    return accs, norms


def _seeds(spec: str) -> list[int]:
    """``--seeds``: ``A-B`` (A <= B) or a comma-separated list, each a seed >= 0."""
    if "-" in spec.strip().lstrip("-"):
        a, b = (natural(x) for x in spec.split("-", 1))
        if a > b:
            raise argparse.ArgumentTypeError(f"an empty range {spec!r} (A-B needs A <= B)")
        return list(range(a, b + 1))
    return listed(natural)(spec)


def main(argv: list[str] | None = None) -> int:
    """Replay every (transport, clip, seed); print the curves and the floors."""
    p = Parser(prog="python -m bench.differentiated_replay", description=described(__doc__))
    p.add_argument("--seeds", type=_seeds, default="0-7", help="seeds, e.g. 0-7 or 3,7 (default 0-7)")
    p.add_argument("--epochs", type=count, default=5, help="epochs (default 5)")
    p.add_argument("--clips", type=listed(nonnegative), default=[0.0, 1.0],
                   help="PS clip values to compare (0: none; default 0,1)")
    p.add_argument("--transports", type=names("reliable", "important"), default=["reliable", "important"],
                   help="reliable and/or important")
    args = p.parse_args(argv)
    seeds = args.seeds
    for transport in args.transports:
        for clip in args.clips:
            floor = 1.0
            for seed in seeds:
                accs, norms = replay(seed, transport, clip, args.epochs)
                floor = min([floor, *accs[2:]])
                print(f"{transport:9s} clip {clip:g} seed {seed}: accuracy per epoch "
                      f"{[round(a, 3) for a in accs]}, largest update norm {max(norms):.2f}", flush=True)
            print(f"{transport:9s} clip {clip:g}: lowest accuracy after epoch 2 over seeds {seeds[0]}-{seeds[-1]}: "
                  f"{floor:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
