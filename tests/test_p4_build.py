"""The committed p4c outputs (p4src/build/, tests/p4/build/) match the P4 sources.

Needs p4c (``p4c-bm2-ss``); skipped without it. Each program is compiled exactly as
``make p4`` does, into a temporary directory, and both outputs must equal the committed
files byte for byte: a P4 change committed without ``make p4`` fails here. ``ina.p4`` is
also compiled once per other INA packet size (``-DINA_VALUES=N`` -> ``ina_v<N>``).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from targets.embedded.compiler import Program
from wire.ina import INA_VALUE_SIZES

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted([*ROOT.glob("p4src/*.p4"), *ROOT.glob("tests/p4/*.p4")])
# (source, build name, extra p4c arguments): every source once, ina.p4 once more per size
PROGRAMS = [(src, src.stem, ()) for src in SOURCES] + [
    (ROOT / "p4src" / "ina.p4", f"ina_v{n}", (f"-DINA_VALUES={n}",))
    for n in INA_VALUE_SIZES[1:]]
P4C = shutil.which("p4c-bm2-ss")


def _rel(p: Path) -> str:
    return str(p.relative_to(ROOT))


def _id(prog: tuple[Path, str, tuple[str, ...]]) -> str:
    src, name, extra = prog
    return " ".join([_rel(src), *extra])


def test_every_program_has_committed_outputs() -> None:
    for src, name, _ in PROGRAMS:
        out = src.parent / "build" / name
        assert out.with_suffix(".json").exists(), f"{_rel(src)}: no build/{name}.json (make p4)"
        assert out.with_suffix(".p4info.txt").exists(), f"{_rel(src)}: no build/{name}.p4info.txt"


@pytest.mark.parametrize("prog", PROGRAMS, ids=_id)
def test_committed_outputs_load_in_the_embedded_target(prog: tuple[Path, str, tuple[str, ...]]
                                                       ) -> None:
    src, name, _ = prog
    Program((src.parent / "build" / f"{name}.json").read_bytes())


@pytest.mark.p4c
@pytest.mark.skipif(P4C is None, reason="p4c (p4c-bm2-ss) not installed")
@pytest.mark.parametrize("prog", PROGRAMS, ids=_id)
def test_committed_outputs_are_fresh(prog: tuple[Path, str, tuple[str, ...]],
                                     tmp_path: Path) -> None:
    src, name, extra = prog
    json_out = tmp_path / f"{name}.json"
    info_out = tmp_path / f"{name}.p4info.txt"
    r = subprocess.run(
        [P4C, "--arch", "v1model", "--std", "p4-16", "-I", "p4src/include", *extra,
         "--p4runtime-files", str(info_out), "-o", str(json_out), _rel(src)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert r.returncode == 0, r.stderr
    committed = src.parent / "build" / name
    assert json_out.read_bytes() == committed.with_suffix(".json").read_bytes(), (
        f"{_rel(src)} changed but build/{name}.json was not regenerated: run `make p4`")
    assert info_out.read_bytes() == committed.with_suffix(".p4info.txt").read_bytes(), (
        f"{_rel(src)} changed but build/{name}.p4info.txt was not regenerated: run `make p4`")


@pytest.mark.p4c
@pytest.mark.skipif(P4C is None, reason="p4c (p4c-bm2-ss) not installed")
def test_an_ina_size_without_lanes_does_not_compile(tmp_path: Path) -> None:
    r = subprocess.run(
        [P4C, "--arch", "v1model", "--std", "p4-16", "-I", "p4src/include", "-DINA_VALUES=96",
         "-o", str(tmp_path / "x.json"), "p4src/ina.p4"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert r.returncode != 0 and "not one of the generated sizes" in r.stderr
