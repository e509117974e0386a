"""INA at data-centre shape on this machine: the k=8 fat-tree preset (``make run-scale``).

80 switches (the embedded target in one process per core), 128 hosts, one INA job of 127
workers and its PS baseline on the same gradients, both checked element by element.
Links at 0.2 Mbit/s: a time dilation chosen so the links, not the two emulating cores,
set the pace; every time is printed beside its line-rate bound, with what the emulation
cost (bring-up, memory, CPU per switch process).

    python -m bench.ina_k8_bench [any python -m experiments --mode ina option]
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Run ``python -m experiments --preset k8`` with ``argv`` appended."""
    from experiments.ina import main as ina_main

    return ina_main(["--preset", "k8", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
