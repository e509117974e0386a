"""``--fidelity auto``: when it dilates, by how much, and what a dilated pass runs with."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from experiments import fidelity_auto as fa
from experiments.fidelity import EMULATOR_BOUND, LINK_BOUND
from experiments.harness_records import RunRecord
from experiments.train import build_parser


def _rec(scheme: str, fidelity: str, x_bound: float, compute: float = 0.004) -> RunRecord:
    return RunRecord(scheme=scheme, seed=0, ok=True, fidelity=fidelity, x_bound=x_bound,
                     compute_s_per_iter=compute)


def test_no_dilation_when_every_run_is_link_bound() -> None:
    recs = [_rec("ina", LINK_BOUND, 1.2), _rec("gloo", LINK_BOUND, 3.0)]
    assert fa.next_factor(recs, 1, 16) is None


def test_factor_grows_with_the_worst_excess_and_stops_at_the_cap() -> None:
    assert fa.next_factor([_rec("ina", EMULATOR_BOUND, 2.0)], 1, 16) == 2
    assert fa.next_factor([_rec("ina", EMULATOR_BOUND, 5.0)], 1, 16) == 4  # 5/1.5 -> 4
    assert fa.next_factor([_rec("ina", EMULATOR_BOUND, 40.0)], 1, 16) == 16  # capped
    assert fa.next_factor([_rec("ina", EMULATOR_BOUND, 2.0)], 16, 16) is None  # cap reached


def test_a_dilated_pass_keeps_compute_to_communication() -> None:
    args = build_parser().parse_args(["--scheme", "ina,gloo", "--bw", "20", "--fidelity", "auto"])
    recs = [_rec("ina", EMULATOR_BOUND, 3.0, 0.004), _rec("gloo", LINK_BOUND, 1.1, 0.006)]
    new = fa.dilated_args(args, recs, 4)
    assert new.bw == pytest.approx(5.0)
    assert new.compute_time == pytest.approx(4 * 0.005)  # the median measured compute, x4
    assert new.max_time == pytest.approx(4 * args.max_time)
    again = fa.dilated_args(new, recs, 8)  # from the undilated figures, not compounded
    assert again.bw == pytest.approx(2.5) and again.compute_time == pytest.approx(8 * 0.005)
    assert args.bw == 20 and args.compute_time == 0.0  # the first pass's options untouched


def test_continue_auto_reruns_only_when_asked_and_needed() -> None:
    seen: list[argparse.Namespace] = []
    said: list[str] = []
    args = build_parser().parse_args(["--scheme", "ina,gloo", "--fidelity", "auto"])
    bad = [_rec("ina", EMULATOR_BOUND, 3.0)]
    assert fa.continue_auto(args, bad, 0, lambda a: seen.append(a) or 0, said.append) == 0
    assert [a.dilation for a in seen] == [2] and "DILATED 2x" in said[-1]
    off = build_parser().parse_args(["--scheme", "ina,gloo"])
    assert fa.continue_auto(off, bad, 1, lambda a: seen.append(a) or 0, said.append) == 1
    assert len(seen) == 1  # --fidelity off: no rerun


@pytest.mark.parametrize("bad", [["--fidelity", "always"], ["--max-dilation", "3"],
                                 ["--max-dilation", "1"], ["--max-dilation", "x"]])
def test_bad_fidelity_options_are_one_line_errors(bad: list[str]) -> None:
    p = subprocess.run([sys.executable, "-m", "experiments", "--mode", "train", "--dry-run", *bad],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr and "error:" in p.stderr
