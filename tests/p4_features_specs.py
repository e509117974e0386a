"""P4 features beyond the first conformance set: action profiles and selectors, parser
value sets, varbit fields, header unions (``tests/p4/<name>.p4``).

Same rig as the conformance tests (``tests/conformance_rig.py``): each program runs in a real
testbed on the embedded target, and on BMv2 too when ``simple_switch_grpc`` is on PATH;
``test_differential`` runs the same writes and frames through both and compares.
Expected frames are computed here from the program's documented behaviour and BMv2's
rules (cited per section), so the tests run without BMv2.

This module holds the programs' specs; the models are in ``p4_features_selector`` and
``p4_features_parsing``, the tests in ``test_p4_features_*.py``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from tests import conformance_specs
from tests.conformance_rig import (
    Case,
    ProgramSpec,
    Rig,
)
from tests.p4_features_parsing import (
    _union_cases,
    _vb_cases,
    _vs_cases,
    union_setup,
    vb_setup,
    vs_setup,
)
from tests.p4_features_selector import (
    _selector_cases,
    selector_changes,
    selector_changes_expected,
    selector_setup,
)

# =========================================================================================
# specs, fixtures, tests
# =========================================================================================
SPECS: dict[str, ProgramSpec] = {
    "action_selector": ProgramSpec(selector_setup, _selector_cases(), extras=[selector_changes]),
    "value_set": ProgramSpec(vs_setup, _vs_cases()),
    "varbit_features": ProgramSpec(vb_setup, _vb_cases()),
    "union_features": ProgramSpec(union_setup, _union_cases()),
}
EXPECTED_EXTRAS: dict[str, Callable[[], list[tuple[str, Any]]]] = {
    "selector_changes": selector_changes_expected,
}


def open_rig(program: str, target: str) -> contextlib.AbstractContextManager[Rig]:
    """A started rig for ``program`` (this file's SPECS) on ``target``; stopped on exit."""
    return conformance_specs.open_rig(program, target, specs=SPECS)


def _ids(case: Case) -> str:
    return case.name


def _check_extra(rig: Rig, extra: Callable[[Rig], list[tuple[str, Any]]]) -> None:
    got = extra(rig)
    expect = EXPECTED_EXTRAS[extra.__name__]()
    assert [n for n, _ in got] == [n for n, _ in expect]
    for (name, g), (_, e) in zip(got, expect, strict=True):
        if isinstance(e, list) and e and isinstance(e[0], tuple) and isinstance(e[0][1], bytes):
            g, e = sorted(g), sorted(e)
        assert g == e, f"[{rig.target}] {extra.__name__}/{name}: expected {e!r}, got {g!r}"
