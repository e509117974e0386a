"""``--fidelity auto``: dilate a comparison until its runs are the network's.

A run is emulator-bound (:mod:`experiments.fidelity`) when the CPU that emulates the
links was spent and the time is above the links' bound. Its remedy is dilation: slow
every link by a factor ``f`` and fix each batch's compute at ``f`` times what it took,
so compute:communication stays what it was while the emulator gets ``f`` times the
time per byte. The comparison is rerun whole (every scheme, every seed: ratios are
only taken within one setting) at 2x, 4x, ... until no run is emulator-bound or the
dilation reaches ``--max-dilation``. Every dilated pass is labelled as such in its
plan, its table and its manifest; its times are dilated seconds.
"""

from __future__ import annotations

import argparse
import copy
import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from experiments.fidelity import EMULATOR_BOUND, X_LINK

MODES = ("off", "auto")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``--fidelity`` and ``--max-dilation`` on the harness's parser."""
    p.add_argument("--fidelity", choices=MODES, default="off",
                   help="auto: when a run is emulator-bound, rerun the comparison with every link "
                        "slowed and compute fixed by the same factor (2x, 4x, ...: dilated time, "
                        "labelled) until every run is link-bound (default off)")
    p.add_argument("--max-dilation", type=_dilation, default=16,
                   help="largest dilation --fidelity auto tries (a power of two >= 2, default 16)")


def _dilation(text: str) -> int:
    try:
        f = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if f < 2 or f & (f - 1):
        raise argparse.ArgumentTypeError(f"{f}: a power of two >= 2")
    return f


def emulator_bound(records: Sequence[Any]) -> list[Any]:
    """The records whose verdict is emulator-bound."""
    return [r for r in records if getattr(r, "fidelity", None) == EMULATOR_BOUND]


def next_factor(records: Sequence[Any], current: int, max_dilation: int) -> int | None:
    """The next dilation: at least twice ``current``, enough for the worst run's x bound
    to fall to :data:`X_LINK` if the excess were all the emulator's (a power of two);
    None when no run is emulator-bound or the next step passes ``max_dilation``."""
    bad = emulator_bound(records)
    if not bad:
        return None
    worst = max((r.x_bound or X_LINK) for r in bad)
    step = 2 ** max(1, math.ceil(math.log2(max(worst / X_LINK, 2.0))))
    f = current * step
    if f > max_dilation:
        f = max_dilation if max_dilation > current else 0
    return f or None


def compute_per_batch(records: Sequence[Any], args: argparse.Namespace) -> float:
    """Compute seconds per batch at dilation 1: ``--compute-time`` if it was fixed, else
    the median of what the undilated runs measured (seconds per iteration)."""
    if getattr(args, "base_compute_time", 0.0):
        return args.base_compute_time
    if args.compute_time:
        return args.compute_time
    vals = [r.compute_s_per_iter for r in records if r.ok and r.compute_s_per_iter]
    return statistics.median(vals) if vals else 0.001


def dilated_args(args: argparse.Namespace, records: Sequence[Any], factor: int) -> argparse.Namespace:
    """``args`` for the pass at ``factor``: links at bw/factor, compute fixed at factor
    times the undilated compute per batch, a fresh results directory, no ``--resume``."""
    base_bw = getattr(args, "base_bw", args.bw)
    base_ct = compute_per_batch(records, args)
    new = copy.copy(args)
    new.base_bw, new.base_compute_time, new.dilation = base_bw, base_ct, factor
    new.bw = base_bw / factor
    new.compute_time = base_ct * factor
    new.max_time = getattr(args, "base_max_time", args.max_time) * factor
    new.base_max_time = getattr(args, "base_max_time", args.max_time)
    new.resume = None
    return new


def continue_auto(args: argparse.Namespace, records: Sequence[Any], rc: int,
                  run: Callable[[argparse.Namespace], int], say: Callable[[str], None]) -> int:
    """After one pass of the harness: rerun dilated if ``--fidelity auto`` asks for it."""
    if getattr(args, "fidelity", "off") != "auto":
        return rc
    current = getattr(args, "dilation", 1)
    bad = emulator_bound(records)
    if not bad:
        say(f"fidelity auto: every run link-bound at dilation {current}x" if current > 1
            else "fidelity auto: every run link-bound, no dilation needed")
        return rc
    f = next_factor(records, current, args.max_dilation)
    names = ", ".join(sorted({f"{r.scheme} seed {r.seed} (x {r.x_bound})" for r in bad}))
    if f is None:
        say(f"fidelity auto: still emulator-bound at the largest dilation {current}x: {names}; "
            "their ratios give no verdict (raise --max-dilation, or use fewer workers)")
        return rc
    new = dilated_args(args, records, f)
    say(f"fidelity auto: {len(bad)} of {len(records)} runs emulator-bound ({names}); rerunning the "
        f"comparison DILATED {f}x: links at {new.bw:g} Mbit/s, compute fixed at "
        f"{new.compute_time:.4g} s per batch (times are dilated seconds)")
    return run(new)

