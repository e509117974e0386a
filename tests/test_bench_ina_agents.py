"""``python -m bench ina-agents`` (bench/ina_agents_bench.py): a small run of both packet
paths side by side is exact on every rank, and bad options are a one-line error."""

from __future__ import annotations

import pytest

from bench import ina_agents_bench


def test_small_run_both_paths_exact(capsys):
    rc = ina_agents_bench.main(["--values", "4096", "--rounds", "2", "--workers", "2",
                                "--vpp", "64", "--reps", "1", "--paths", "native,python"])
    out = capsys.readouterr().out
    assert rc == 0  # every rank's sums exact in every run
    assert "native" in out and "python" in out and "NO" not in out


@pytest.mark.parametrize("argv", [["--paths", "gpu"], ["--paths", "native,native"],
                                  ["--vpp", "100"], ["--coalesce-us", "-1"]])
def test_bad_options_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as e:
        ina_agents_bench.main(argv)
    assert e.value.code == 2
    assert "error" in capsys.readouterr().err
