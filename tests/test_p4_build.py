"""The committed p4c outputs (p4src/build/, tests/p4/build/) match the P4 sources.

Needs p4c (``p4c-bm2-ss``); skipped without it. Each program is compiled exactly as
``make p4`` does, into a temporary directory, and both outputs must equal the committed
files byte for byte: a P4 change committed without ``make p4`` fails here.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from targets.embedded.compiler import Program

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = sorted([*ROOT.glob("p4src/*.p4"), *ROOT.glob("tests/p4/*.p4")])
P4C = shutil.which("p4c-bm2-ss")


def _rel(p: Path) -> str:
    return str(p.relative_to(ROOT))


def test_every_program_has_committed_outputs() -> None:
    for src in PROGRAMS:
        out = src.parent / "build" / src.stem
        assert out.with_suffix(".json").exists(), f"{_rel(src)}: no build/{src.stem}.json (make p4)"
        assert out.with_suffix(".p4info.txt").exists(), f"{_rel(src)}: no build/{src.stem}.p4info.txt"


@pytest.mark.parametrize("src", PROGRAMS, ids=_rel)
def test_committed_outputs_load_in_the_embedded_target(src: Path) -> None:
    Program((src.parent / "build" / f"{src.stem}.json").read_bytes())


@pytest.mark.p4c
@pytest.mark.skipif(P4C is None, reason="p4c (p4c-bm2-ss) not installed")
@pytest.mark.parametrize("src", PROGRAMS, ids=_rel)
def test_committed_outputs_are_fresh(src: Path, tmp_path: Path) -> None:
    json_out = tmp_path / f"{src.stem}.json"
    info_out = tmp_path / f"{src.stem}.p4info.txt"
    r = subprocess.run(
        [P4C, "--arch", "v1model", "--std", "p4-16", "-I", "p4src/include",
         "--p4runtime-files", str(info_out), "-o", str(json_out), _rel(src)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert r.returncode == 0, r.stderr
    committed = src.parent / "build" / src.stem
    assert json_out.read_bytes() == committed.with_suffix(".json").read_bytes(), (
        f"{_rel(src)} changed but build/{src.stem}.json was not regenerated: run `make p4`")
    assert info_out.read_bytes() == committed.with_suffix(".p4info.txt").read_bytes(), (
        f"{_rel(src)} changed but build/{src.stem}.p4info.txt was not regenerated: run `make p4`")
