"""``make compare`` (experiments/compare.py): option handling, and one small
compare of every scheme on live emulated networks with every sum checked element by
element (PS, ring, INA and NDN on one fat-tree, BML on BCube(2, 2), the token LAN)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments import compare as ce
from experiments.main import main as experiment_main
from tests.netenv import net_skip_reason

ROOT = Path(__file__).resolve().parent.parent


def test_scheme_names_and_shapes() -> None:
    assert ce.parse_schemes("all") == list(ce.SCHEMES)
    assert ce.parse_schemes("token, PS,ring") == ["ps", "ring", "token"]  # table order
    with pytest.raises(ValueError, match="unknown scheme.*allreduce"):
        ce.parse_schemes("ps,allreduce")
    with pytest.raises(ValueError):
        ce.parse_schemes(" , ")
    assert ce.bcube_shape(8) == (2, 3)
    assert ce.bcube_shape(9) == (3, 2)
    assert ce.bcube_shape(16) == (4, 2)
    assert ce.bcube_shape(6) is None
    assert all(ce.landed(s) for s in ce.SCHEMES)  # every compared scheme is in the tree


@pytest.mark.parametrize("argv, message", [
    (["--schemes", "ps,bogus"], "unknown scheme(s) bogus"),
    (["--workers", "1"], "--workers must be in 2..15"),
    (["--values", "0"], "argument --values: must be >= 1"),
    (["--bw", "0"], "argument --bw: must be > 0"),
    (["--values", "many"], "argument --values: expected an integer"),
])
def test_bad_options_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:  # argparse's one error line, before anything starts
        ce.main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and message in err


def test_bad_scheme_through_the_dispatcher_exits_2() -> None:
    with pytest.raises(SystemExit) as e:
        experiment_main(["--mode", "compare", "--schemes", "nope"])
    assert e.value.code == 2


def test_skipped_schemes_are_listed() -> None:
    """A BCube needs n**k servers and a token NIC at most 32768 values: rows say so."""
    import argparse

    import numpy as np

    args = argparse.Namespace(values=40000)
    row = ce.run_bcube(args, [np.zeros(4, np.float32)] * 6, 30, Path("/nonexistent"))
    assert row.status.startswith("skipped") and "6 servers" in row.status
    row = ce.run_token_lan(args, [np.zeros(4, np.float32)] * 4, 30, Path("/nonexistent"))
    assert row.status.startswith("skipped") and "32768" in row.status


@pytest.mark.long  # each scheme's sums are checked exactly by its own network tests
@pytest.mark.net
@pytest.mark.slow
def test_compare_every_scheme_small(tmp_path: Path) -> None:
    reason = net_skip_reason("forward", "ina", "ndn", "nic", "lan")
    if reason:
        pytest.skip(reason)
    rc = ce.main(["--workers", "4", "--values", "1024", "--bw", "20", "--max-time", "90",
                  "--out-dir", str(tmp_path)])
    (run_dir,) = tmp_path.glob("compare-*")
    summary = json.loads((run_dir / "summary.json").read_text())
    rows = {r["scheme"]: r for r in summary["rows"]}
    assert list(rows) == list(ce.SCHEMES)
    for name, r in rows.items():
        assert r["status"] == "ok", (name, r["status"])
        assert r["exact"] is True, (name, r)
        assert r["contributors"] == 4
        assert r["seconds"] > 0 and r["busiest_bytes"] > 0, (name, r)
    # every contributor's 4 KiB crossed the busiest link at least once in some form
    assert all(r["busiest_bytes"] >= 4096 for r in rows.values())
    for ps_based in ("ps", "ina", "ndn"):
        assert rows[ps_based]["ps_bytes"] > 0
    assert rows["ring"]["ps_bytes"] is None
    assert rc == 0
    png = run_dir / "compare.png"
    assert png.stat().st_size > 10_000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
