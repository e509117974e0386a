"""The issue-23 benches' tables from known runs (no network): paired ratios and gaps,
the stability floor, the reliable bound, and the INA/PS/ring rows."""

from __future__ import annotations

import math

from bench.differentiated_ablation import bound_per_iteration, summarize
from bench.ina_train_bench import rows_of
from experiments.differentiated import TransportRun


def _run(sync: float, acc: list[float], tcp_bytes: int, sent0: int, missing: int) -> TransportRun:
    ps = {"iterations": 10, "blocks_per_worker": 50, "tcp_bytes": tcp_bytes, "seconds": 2.0,
          "nic_rx_bytes": 500_000, "missing_blocks": {"1": missing},
          "epochs": [{"epoch": e, "accuracy": a} for e, a in enumerate(acc)], "final_accuracy": acc[-1]}
    workers = [{"sync_mean_s": sync, "sent_blocks": [sent0, 500 - sent0]} for _ in range(2)]
    return TransportRun("x", True, ps, workers)


def test_ablation_rows_pair_by_seed_and_take_the_floor_after_epoch_2() -> None:
    runs = {"all-reliable": {0: _run(0.4, [0.1, 0.5, 0.7, 0.8, 0.9], 2 * 10 * 14480, 500, 0),
                             1: _run(0.2, [0.1, 0.5, 0.7, 0.8, 0.8], 2 * 10 * 14480, 500, 0)},
            "differentiated": {0: _run(0.2, [0.1, 0.1, 0.6, 0.7, 0.8], 2 * 10 * 7240, 250, 500),
                               1: _run(0.1, [0.1, 0.2, 0.3, 0.65, 0.7], 2 * 10 * 7240, 250, 500)}}
    base, diff = summarize(runs, 100.0)
    assert math.isclose(diff["ratio"].mean, 0.5) and diff["ratio"].n == 2  # 0.2/0.4 and 0.1/0.2
    assert math.isclose(diff["gap"].mean, 10.0)  # (0.9-0.8 + 0.8-0.7) / 2 in points
    assert diff["floor"] == 0.65 and base["floor"] == 0.8  # epochs 3 and later only
    assert math.isclose(diff["reliable_share"].mean, 0.5) and math.isclose(diff["zero_filled"].mean, 0.5)
    # 14,480 TCP bytes a worker an iteration: 10 full segments; 2 workers at 100 pkt/s
    assert math.isclose(bound_per_iteration(runs["all-reliable"][0], 100.0), 0.2)
    assert math.isclose(base["ps_mbit"].mean, 2.0)


def test_ina_rows_carry_the_bound_ratio_and_the_link_rate() -> None:
    summary = {"schemes": [{"scheme": "ina"}], "runs": [
        {"scheme": "ina", "sync_s_per_iter": 0.02, "iterations": 10, "line_rate_bound_s": 0.1, "ps_rx_bytes": 10},
        {"scheme": "ina", "sync_s_per_iter": 0.03, "iterations": 10, "line_rate_bound_s": 0.1, "ps_rx_bytes": 30}]}
    (row,) = rows_of(summary, 5.0)
    assert row["bw"] == 5.0 and math.isclose(row["sync_over_bound"]["mean"], 2.5)
    assert math.isclose(row["ps_rx_mb"], 20e-6)
