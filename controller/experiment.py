"""Kept so that ``python -m controller.experiment ...`` still works: the experiments live in
the top-level :mod:`experiments` package (``python -m experiments``)."""

import sys

from experiments.main import main

if __name__ == "__main__":
    sys.exit(main())
