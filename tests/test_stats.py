"""experiments/stats.py against hand-computed numbers (no scipy call in the expectations)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from experiments.stats import Interval, format_interval, mean_ci, paired_ratios, time_to_target

# t(0.975, 4) = 2.776445, s([1..5]) = sqrt(2.5) = 1.581139 -> 2.776445 * 1.581139 / sqrt(5)
HW_1_TO_5 = 1.963243
# t(0.975, 2) = 4.302653, s([1, 2, 3]) = 1 -> 4.302653 / sqrt(3)
HW_1_TO_3 = 2.484138


def test_mean_ci_known_numbers() -> None:
    iv = mean_ci([1, 2, 3, 4, 5])
    assert iv.mean == pytest.approx(3.0)
    assert iv.n == 5 and iv.dropped == 0 and not iv.single
    assert iv.half_width == pytest.approx(HW_1_TO_5, abs=1e-6)
    assert iv.low == pytest.approx(3.0 - HW_1_TO_5, abs=1e-6)
    assert iv.high == pytest.approx(3.0 + HW_1_TO_5, abs=1e-6)


def test_mean_ci_other_confidence() -> None:
    # t(0.95, 4) = 2.131847 -> 2.131847 * 1.581139 / sqrt(5) = 1.507443
    iv = mean_ci([1, 2, 3, 4, 5], confidence=0.90)
    assert iv.half_width == pytest.approx(1.507443, abs=1e-6)
    with pytest.raises(ValueError):
        mean_ci([1, 2], confidence=1.0)


def test_mean_ci_drops_nan_and_none() -> None:
    iv = mean_ci([1, float("nan"), 2, None, 3, 4, 5])
    assert iv.n == 5 and iv.dropped == 2
    assert iv.mean == pytest.approx(3.0)
    assert iv.half_width == pytest.approx(HW_1_TO_5, abs=1e-6)


def test_mean_ci_single_value() -> None:
    iv = mean_ci([2.5, None])
    assert iv.single and iv.n == 1 and iv.dropped == 1
    assert iv.mean == iv.low == iv.high == 2.5
    assert math.isnan(iv.half_width)
    assert str(iv) == "2.50 (n=1)"


def test_mean_ci_no_values() -> None:
    iv = mean_ci([None, float("nan")])
    assert iv.n == 0 and iv.dropped == 2 and math.isnan(iv.mean)
    assert format_interval(iv) == "n/a (n=0)"


def test_interval_is_frozen() -> None:
    iv = mean_ci([1.0, 2.0])
    with pytest.raises(dataclasses.FrozenInstanceError):
        iv.mean = 0.0  # type: ignore[misc]


def test_paired_ratios_three_seeds() -> None:
    # per-seed ratios 1, 2, 3; seed 3 only in the scheme and seed 4 NaN in the reference
    scheme = {0: 2.0, 1: 6.0, 2: 12.0, 3: 5.0, 4: 1.0}
    reference = {0: 2.0, 1: 3.0, 2: 4.0, 4: float("nan")}
    iv = paired_ratios(scheme, reference)
    assert iv.n == 3 and iv.dropped == 2 and not iv.geometric
    assert iv.mean == pytest.approx(2.0)
    assert iv.half_width == pytest.approx(HW_1_TO_3, abs=1e-6)
    assert str(iv) == "2.00 ± 2.48"


def test_paired_ratios_geometric() -> None:
    iv = paired_ratios({0: 2.0, 1: 6.0, 2: 12.0}, {0: 2.0, 1: 3.0, 2: 4.0}, geometric=True)
    # exp(mean(log 1, log 2, log 3)) = 6 ** (1/3); s(logs) = 0.555548,
    # half width in log space 4.302653 * 0.555548 / sqrt(3) = 1.380031
    assert iv.geometric and iv.n == 3
    assert iv.mean == pytest.approx(1.817121, abs=1e-6)
    assert iv.low == pytest.approx(0.457122, abs=1e-6)
    assert iv.high == pytest.approx(7.223299, abs=1e-5)
    assert format_interval(iv) == "1.82 [0.46, 7.22]"


def test_paired_ratios_zero_reference_dropped() -> None:
    iv = paired_ratios({"a": 1.0, "b": 2.0}, {"a": 0.0, "b": 1.0})
    assert iv.n == 1 and iv.dropped == 1 and iv.mean == 2.0


def test_time_to_target_interpolates() -> None:
    times = [0.0, 10.0, 20.0, 30.0]
    acc = [0.10, 0.60, 0.80, 0.95]
    # crossing 0.9 between (20, 0.80) and (30, 0.95): 20 + 0.10 / 0.15 * 10
    assert time_to_target(times, acc, 0.90) == pytest.approx(26.666667, abs=1e-6)
    assert time_to_target(times, acc, 0.80) == pytest.approx(20.0)
    assert time_to_target(times, acc, 0.05) == 0.0


def test_time_to_target_first_crossing_only() -> None:
    # reaches 0.7 at t=15 (between 10 and 20), dips below, reaches again later
    times = [0.0, 10.0, 20.0, 30.0, 40.0]
    acc = [0.5, 0.6, 0.8, 0.5, 0.9]
    assert time_to_target(times, acc, 0.7) == pytest.approx(15.0)


def test_time_to_target_never_reached() -> None:
    assert time_to_target([1.0, 2.0, 3.0], [0.2, 0.5, 0.89], 0.9) is None
    assert time_to_target([], [], 0.9) is None


def test_time_to_target_skips_nan_and_checks_input() -> None:
    assert time_to_target([0.0, 5.0, 10.0], [0.5, float("nan"), 1.0], 0.75) == pytest.approx(5.0)
    with pytest.raises(ValueError):
        time_to_target([0.0, 1.0], [0.5], 0.9)
    with pytest.raises(ValueError):
        time_to_target([2.0, 1.0], [0.1, 0.2], 0.9)


def test_format_interval() -> None:
    iv = Interval(mean=1.234, low=1.184, high=1.284, n=4, half_width=0.05)
    assert format_interval(iv) == "1.23 ± 0.05"
    assert format_interval(iv, ".1%") == "123.4% ± 5.0%"
    assert str(Interval(1.234, 1.234, 1.234, 1, float("nan"))) == "1.23 (n=1)"
