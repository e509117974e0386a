"""Malformed P4Runtime writes get the spec's error codes; the switch keeps serving.

bench/p4rt_fuzz.py builds the cases from each program's P4Info: one deterministic
malformed update per spec rule (ids, widths, prefixes, priorities, duplicates, missing
entries, multicast groups, counters, registers, refused requests), and a seeded random
stream of valid and mutated updates checked against a model of the installed keys.
The switch runs as a real process (embedded target, and BMv2 where
``simple_switch_grpc`` is on PATH) in its own namespace. Where BMv2's PI differs from
the spec, the difference is listed in ``BMV2_DIFFERS`` and the embedded target follows
the spec; the differential test holds BMv2 to exactly that list.
"""

from __future__ import annotations

import os
import shutil

import pytest

from bench import p4rt_fuzz as fz

PROGRAMS = ("table_features", "forward", "ina")
BATCHES = 120  # x 16 updates per program and target: a few seconds
TARGETS = ["embedded", *(["bmv2"] if shutil.which("simple_switch_grpc") else [])]

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")


def _need(program: str) -> None:
    missing = [p for p in fz.program_files(program) if not p.exists()]
    if missing:
        pytest.skip(f"p4c output missing: {missing}")


def _fuzz(target: str, program: str, seed: int) -> tuple[dict[str, tuple[str, str]], fz.FuzzResult, bool]:
    s = fz.Schema.load(fz.program_files(program)[1])
    with fz.switch(target, program) as c:
        det = fz.run_deterministic(c, s, seed)
        res = fz.run_random(c, s, seed, BATCHES, expect=None if target == "embedded" else fz.bmv2_expect)
        alive = c.testbed.proc.poll() is None
    return det, res, alive


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("program", PROGRAMS)
def test_malformed_writes_get_spec_codes(target: str, program: str) -> None:
    _need(program)
    det, res, alive = _fuzz(target, program, seed=1)
    want = {n: spec if target == "embedded" else fz.BMV2_DIFFERS.get(n, spec) for n, (_, spec) in det.items()}
    assert {n: got for n, (got, _) in det.items()} == want
    # every rule the program has objects for was exercised
    must = {"unknown table id", "param wider than its field", "LPM bits set past the prefix",
            "duplicate insert", "delete a missing entry", "multicast group id 0", "unknown counter id",
            "role without a stream"}
    if program == "table_features":
        must |= {"range low > high", "ternary entry without priority", "insert into a const table"}
    if program == "ina":
        must |= {"register index past the array", "counter index past the array"}
    assert must <= set(det)
    assert res.mismatches == []
    assert res.updates == BATCHES * 16 and res.codes.get("OK", 0) > 0 and len(res.codes) >= 4
    assert res.model_ok, "tables differ from the model of the accepted writes"
    assert res.still_writes and alive


@pytest.mark.skipif("bmv2" not in TARGETS, reason="simple_switch_grpc not on PATH")
def test_same_request_same_code_as_bmv2() -> None:
    """Differential: the same deterministic requests on both targets give the same codes,
    except exactly where ``BMV2_DIFFERS`` says BMv2 departs from the spec."""
    _need("table_features")
    ours, _, _ = _fuzz("embedded", "table_features", seed=2)
    theirs, _, _ = _fuzz("bmv2", "table_features", seed=2)
    assert ours.keys() == theirs.keys()
    differ = {n for n in ours if ours[n][0] != theirs[n][0]}
    assert differ == {n for n in ours if n in fz.BMV2_DIFFERS and fz.BMV2_DIFFERS[n] != ours[n][1]}
