"""``python -m experiments`` (``make run``, ``make run-MODE``, ``make compare``): pick an
experiment by ``--mode`` and hand it the rest of the command line.

``--mode ina`` (the default, ``make run``) and ``--mode reach`` live in
:mod:`experiments.ina`; every other mode is one module of this package with its own
``main(argv) -> int`` and options (``python -m experiments --mode MODE --help``).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys

# ``--mode`` -> module: an entry of the one registry (controller/registry.py). A mode's
# module is imported only when chosen, so a missing optional dependency (torch) stays local.
from controller.registry import MODES

PROG = "python -m experiments"

# The modes whose module takes the whole command line, ``--mode`` included.
_KEEP_MODE = ("ina", "reach")


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m experiments`` (and of ``python -m controller.experiment``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--mode", default="ina")
    known, rest = pre.parse_known_args(argv)
    module = MODES.get(known.mode)
    if module is None:  # one line, argparse's shape (a console would fold it)
        print(f"{PROG}: error: --mode {known.mode!r}: unknown; choose one of {', '.join(MODES)}",
              file=sys.stderr)
        return 2
    if importlib.util.find_spec(module) is None:
        print(f"{PROG}: error: --mode {known.mode}: this technique has not landed yet ({module})",
              file=sys.stderr)
        return 2
    mod = importlib.import_module(module)
    return int(mod.main(argv if known.mode in _KEEP_MODE else rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
