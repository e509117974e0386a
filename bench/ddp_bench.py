"""``python -m bench ddp``: DDP step time and communication overlap, gloo against the
gradnet INA hook on the same network (``experiments/ddp.py``: star:5, 4 ranks, one
epoch of 30 steps, the digits CNN in 3 buckets). Wall clock, not dilated."""

from __future__ import annotations

import sys

from experiments.ddp import main as ddp_main


def main(argv: list[str] | None = None) -> int:
    """Run the DDP experiment at the bench's size (extra arguments pass through)."""
    return ddp_main(["--topo", "star:5", "--workers", "4", "--epochs", "1", "--max-steps", "30",
                     *(argv or [])])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
