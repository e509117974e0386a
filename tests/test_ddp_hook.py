"""The PyTorch DDP communication hook through INA (hosts/ina/ddp_hook.py).

The network test runs an unchanged DDP script (hosts/ina/ddp_train.py) on two ranks in
Mininet hosts, once with gloo's all-reduce and once with the INA hook (with and without
an aggregating switch), and checks: the hook's averaged gradients equal gloo's on the
same inputs up to the fixed-point rounding, every rank ends with the same weights, the
accuracy matches gloo's, and the bytes at the PS drop to 1/N with aggregation.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from experiments.ddp import main  # noqa: E402
from hosts.ina.ddp_hook import InaHookState  # noqa: E402
from hosts.ina.policy import Policy  # noqa: E402
from hosts.packets import INA_VALUES  # noqa: E402
from tests.netenv import TARGET, net_skip_reason  # noqa: E402


def test_bucket_larger_than_the_job_is_refused() -> None:
    pol = Policy.ps_only(1, "127.0.0.1", ["127.0.0.2", "127.0.0.3"], 2)
    state = InaHookState.from_policy(pol, 0)
    try:
        assert state.capacity == 2 * INA_VALUES == 128
        with pytest.raises(ValueError, match=r"exceeds the INA job's 128 \(2 fragments x 64\)"):
            state.allreduce_mean(np.zeros(129, dtype=np.float32))
    finally:
        state.close()


def test_rounds_number_fragments_from_a_bounded_cycle() -> None:
    pol = Policy.ps_only(1, "127.0.0.1", ["127.0.0.2", "127.0.0.3"], 2)
    state = InaHookState.from_policy(pol, 0)
    try:  # default: every round that fits 32 bits, then the numbers are reused
        assert state.cycle is not None and state.cycle.cycle == 2**31 and state.round == 0
    finally:
        state.close()
    state = InaHookState.from_policy(pol, 0, round_cycle=3, reuse_after=0.0)
    try:
        assert state.cycle is not None
        offsets = []
        for _ in range(4):
            offsets.append(state.cycle.begin())
            state.cycle.end()
        assert offsets == [0, 2, 4, 0] and state.round == 4
    finally:
        state.close()


def _skip_reason() -> str | None:
    return net_skip_reason("ina")


@pytest.mark.net
@pytest.mark.slow
@pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or "")
def test_ddp_through_ina_matches_gloo(tmp_path: Path) -> None:
    rc = main(["--topo", "star:3", "--workers", "2", "--epochs", "1", "--max-steps", "6",
               "--target", TARGET, "--out-dir", str(tmp_path)])
    assert rc == 0
    (path,) = tmp_path.glob("ddp-*/summary.json")
    runs = {r["run"]: r for r in json.loads(path.read_text())["runs"]}
    assert set(runs) == {"gloo", "ina-ps", "ina"}
    for name in ("ina-ps", "ina"):
        r = runs[name]
        assert r["ranks_agree"]
        # fixed point 2^-16: each rank's value rounded by at most 2^-17, the mean too
        assert r["grad_max_abs_diff_vs_gloo"] <= 2.0**-16
        assert abs(r["accuracy"] - runs["gloo"]["accuracy"]) <= 0.03
        assert r["ps_rounds"] == 6  # one allreduce per step (the model is one bucket)
    assert runs["gloo"]["ranks_agree"]
    ratio = runs["ina"]["ps_rx_bytes"] / runs["ina-ps"]["ps_rx_bytes"]
    assert 0.4 <= ratio <= 0.6  # 1/N for N = 2, plus the acks
