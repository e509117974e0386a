"""``python -m hosts.bml``: the BML agent of one server (see :mod:`hosts.bml.agent`)."""

import sys

from hosts.bml.agent import main

sys.exit(main())
