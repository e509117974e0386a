"""``python -m bench train``: the time-to-accuracy table, every scheme side by side in one run.

The harness (``experiments/train.py``, ``gradctl train``) at its defaults: the digits CNN,
3 seeds, gloo (the reference), PS and INA on a star of 4 training hosts and a PS at
20 Mbit/s. Options pass through: ``python -m bench.train_bench --model mlp --bw 10``.
It prints time to the model's target accuracy, final accuracy, sync and compute time per
iteration with the line-rate bound, each as mean ± 95 % CI over seeds, and the paired
per-seed ratio of every scheme's time to gloo's.
"""

from __future__ import annotations

import sys

from experiments.train import main as harness_main


def main(argv: list[str] | None = None) -> int:
    """Run the harness with ``argv`` (default: its defaults)."""
    return harness_main(list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
