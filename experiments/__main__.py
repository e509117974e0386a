"""``python -m experiments``: see :mod:`experiments.main`."""

import sys

from experiments.main import main

sys.exit(main())
