"""Statistics for the time-to-accuracy harness: means with Student-t confidence intervals,
paired per-seed ratios against a reference scheme, and the interpolated time at which an
accuracy curve first reaches a target.

Every scheme trains the same model on the same data for the same seeds, so comparisons
between schemes are *paired* by seed: :func:`paired_ratios` divides a scheme's value by the
reference's value for each seed both have, then takes the interval of those ratios. That
removes the seed-to-seed variance the schemes share (a hard split is hard for everyone),
which an interval of each scheme's own mean would keep.

Which ratio to show: the harness shows the **arithmetic mean of the per-seed ratios** with
its t interval (``paired_ratios(..., geometric=False)``, the default): it reads directly as
"on average this scheme took x times the reference's time" and its ± is symmetric. The
geometric mean (``geometric=True``: the t interval of the log-ratios, exponentiated) is the
right summary when ratios spread over a wide range (say from 0.5 to 4), because it treats a
halving and a doubling alike and ``ratio(a, b) == 1 / ratio(b, a)`` holds exactly; its
interval is asymmetric and is printed as ``mean [low, high]``. For ratios near 1 with a
few per cent spread the two agree to within rounding.

Only numpy and scipy (which scikit-learn brings in) are used.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as _st

__all__ = ["Interval", "mean_ci", "paired_ratios", "time_to_target", "format_interval"]


@dataclass(frozen=True)
class Interval:
    """A mean with its two-sided confidence interval.

    ``n`` values went in (after ``dropped`` NaN/None values were removed). With ``n == 1``
    there is no spread to estimate: ``low == high == mean``, ``half_width`` is NaN and
    :attr:`single` is true (``str`` says ``n=1``). With ``n == 0`` everything is NaN.
    For a geometric interval (:func:`paired_ratios` with ``geometric=True``) the bounds are
    asymmetric around ``mean`` and ``half_width`` is ``(high - low) / 2``.
    """

    mean: float
    low: float
    high: float
    n: int
    half_width: float
    dropped: int = 0
    confidence: float = 0.95
    geometric: bool = False

    @property
    def single(self) -> bool:
        """True when the interval rests on one value (no confidence interval)."""
        return self.n == 1

    def __str__(self) -> str:
        return format_interval(self)


def _clean(values: Iterable[Any]) -> tuple[np.ndarray, int]:
    """The finite-or-infinite float values of ``values`` and how many NaN/None were dropped."""
    kept: list[float] = []
    dropped = 0
    for v in values:
        if v is None:
            dropped += 1
            continue
        f = float(v)
        if math.isnan(f):
            dropped += 1
            continue
        kept.append(f)
    return np.asarray(kept, dtype=np.float64), dropped


def _interval(arr: np.ndarray, dropped: int, confidence: float) -> Interval:
    n = int(arr.size)
    if n == 0:
        nan = float("nan")
        return Interval(nan, nan, nan, 0, nan, dropped, confidence)
    mean = float(arr.mean())
    if n == 1:
        return Interval(mean, mean, mean, 1, float("nan"), dropped, confidence)
    s = float(arr.std(ddof=1))
    half = float(_st.t.ppf((1.0 + confidence) / 2.0, n - 1)) * s / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, n, half, dropped, confidence)


def mean_ci(values: Iterable[float | None], confidence: float = 0.95) -> Interval:
    """Mean and two-sided Student-t confidence interval of ``values``.

    The half width is ``t.ppf((1 + confidence) / 2, n - 1) * s / sqrt(n)`` with ``s`` the
    sample standard deviation (``ddof=1``). NaN and None values (e.g. a run that never
    reached its target) are dropped and counted in ``Interval.dropped``. One value gives a
    degenerate interval (see :class:`Interval`); none gives NaN.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), not {confidence}")
    arr, dropped = _clean(values)
    return _interval(arr, dropped, confidence)


def paired_ratios(scheme: Mapping[Any, float | None], reference: Mapping[Any, float | None],
                  confidence: float = 0.95, geometric: bool = False) -> Interval:
    """Interval of the per-seed ratios ``scheme[seed] / reference[seed]``.

    Only seeds present in both mappings with usable values count; ``dropped`` is the number
    of seeds (of either mapping) that gave no ratio: missing on one side, NaN/None on
    either, a zero reference, or (geometric) a non-positive ratio.

    ``geometric=False`` (the default, what the harness shows): arithmetic mean of the
    ratios with a t interval. ``geometric=True``: t interval of ``log(ratio)``,
    exponentiated (geometric mean; asymmetric bounds). See the module docstring.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), not {confidence}")
    seeds = set(scheme) | set(reference)
    ratios: list[float] = []
    for seed in seeds:
        if seed not in scheme or seed not in reference:
            continue
        a, b = scheme[seed], reference[seed]
        if a is None or b is None:
            continue
        a, b = float(a), float(b)
        if math.isnan(a) or math.isnan(b) or b == 0.0:
            continue
        r = a / b
        if not math.isfinite(r) or (geometric and r <= 0.0):
            continue
        ratios.append(r)
    dropped = len(seeds) - len(ratios)
    arr = np.asarray(ratios, dtype=np.float64)
    if not geometric:
        return _interval(arr, dropped, confidence)
    log_iv = _interval(np.log(arr), dropped, confidence)
    low, high = math.exp(log_iv.low), math.exp(log_iv.high)
    half = (high - low) / 2.0 if log_iv.n > 1 else float("nan")
    return Interval(math.exp(log_iv.mean), low, high, log_iv.n, half, dropped, confidence,
                    geometric=True)


def time_to_target(times: Sequence[float], accuracies: Sequence[float | None],
                   target: float) -> float | None:
    """The first time the accuracy reaches ``target`` (``>=``), or None if it never does.

    ``times`` and ``accuracies`` are the evaluation points of one run, in time order. The
    crossing is linearly interpolated between the last point below the target and the
    first point at or above it; when the very first evaluation already meets the target,
    its time is returned. NaN/None accuracies are skipped (neither below nor above).
    """
    if len(times) != len(accuracies):
        raise ValueError(f"{len(times)} times but {len(accuracies)} accuracies")
    prev: tuple[float, float] | None = None
    for t, a in zip(times, accuracies, strict=True):
        if a is None or math.isnan(float(a)):
            continue
        t, a = float(t), float(a)
        if prev is not None and t < prev[0]:
            raise ValueError("times must be non-decreasing")
        if a >= target:
            if prev is None:
                return t
            t0, a0 = prev
            return t0 + (target - a0) / (a - a0) * (t - t0)
        prev = (t, a)
    return None


def format_interval(iv: Interval, fmt: str = ".2f") -> str:
    """``"1.23 ± 0.05"``; ``"1.23 (n=1)"`` for one value; ``"1.23 [1.10, 1.38]"`` for a
    geometric interval; ``"n/a (n=0)"`` when there was no value."""
    if iv.n == 0:
        return "n/a (n=0)"
    if iv.n == 1:
        return f"{iv.mean:{fmt}} (n=1)"
    if iv.geometric:
        return f"{iv.mean:{fmt}} [{iv.low:{fmt}}, {iv.high:{fmt}}]"
    return f"{iv.mean:{fmt}} ± {iv.half_width:{fmt}}"
