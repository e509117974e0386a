"""The INA agents' per-packet costs, cut where Python allows (docs/ina.md, "The agents'
CPU").

:func:`rare_gc`: the cyclic garbage collector run rarely while an agent's packet loop
runs. The hot paths allocate a tuple or two a packet (a parsed header, an address) and
create no cycles, yet every 700 allocations started a collection of the youngest
generation: 2-4 % of an agent's CPU samples (``perf record``) were the collector's.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def rare_gc(threshold: int = 100_000) -> Iterator[None]:
    """Collections of the youngest generation every ``threshold`` allocations instead of
    700 for the block (thresholds back as they were after): the collector still runs,
    140 times less often."""
    old = gc.get_threshold()
    gc.set_threshold(max(threshold, old[0]), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)
