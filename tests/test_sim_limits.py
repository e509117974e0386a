"""The arithmetic of docs/simulation.md's extrapolations (sim/limits.py): no ns-3, no
simulation."""

from __future__ import annotations

import pytest

from sim.limits import MODELS, extrapolate, fit_errors, fit_line, hour_budget, rss_kib


def test_fit_line_recovers_a_line_and_reports_its_error():
    xs = [32768.0, 131072.0, 524288.0]
    ys = [1e-4 + 2e-9 * x for x in xs]
    a, b = fit_line(xs, ys)
    assert a == pytest.approx(1e-4) and b == pytest.approx(2e-9)
    assert max(abs(e) for e in fit_errors(xs, ys, a, b)) < 1e-9
    a, b = fit_line([1.0, 2.0, 3.0], [1.0, 3.0, 2.0])  # least squares, not interpolation
    assert (a, b) == pytest.approx((1.0, 0.5))
    assert fit_errors([1.0, 2.0, 3.0], [1.0, 3.0, 2.0], a, b) == pytest.approx([0.5, -1 / 3, 0.25])
    with pytest.raises(ValueError):
        fit_line([1.0, 1.0], [2.0, 3.0])


def test_extrapolation_to_real_models_and_the_hour_budget():
    assert MODELS == {"ResNet-50": 102_400_000, "BERT-base": 440_000_000}
    sizes = [32768, 131072]
    e = extrapolate("ina", sizes, [0.2e-3 + 1e-9 * s for s in sizes], [1e-9 * s for s in sizes])
    assert e.worst_error < 1e-9
    assert e.predicted["ResNet-50"] == pytest.approx(0.2e-3 + 0.1024)
    assert e.bound["BERT-base"] == pytest.approx(0.44)
    assert hour_budget(1e6, 50.0) == pytest.approx(72e6)  # 3,600 s x 1e6 events/s / 50
    assert rss_kib() > 0
