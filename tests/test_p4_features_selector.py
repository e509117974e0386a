"""P4 features: action profiles and selectors over P4Runtime, and the differential test of
every P4-features program against BMv2 (specs: ``tests/p4_features_specs.py``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests import conformance_specs
from tests.conformance_rig import (
    Case,
    Rig,
    pytestmark,
    run_case,
    target,
)
from tests.p4_features_selector import selector_changes
from tests.p4_features_specs import SPECS, _check_extra, _ids, open_rig

__all__ = ["pytestmark", "target"]


class TestActionSelector:
    """action_selector.p4: members, weighted groups, one-shot sets, selection hash."""

    @pytest.fixture(scope="class")
    @classmethod
    def rig(cls, target: str) -> Iterator[Rig]:
        with open_rig("action_selector", target) as rig:
            yield rig

    @pytest.mark.parametrize("case", SPECS["action_selector"].cases, ids=_ids)
    def test_frame(self, rig: Rig, case: Case) -> None:
        run_case(rig, SPECS["action_selector"], case)

    def test_changes_reads_and_oneshot(self, rig: Rig) -> None:
        _check_extra(rig, selector_changes)


# -- differential: the same writes and frames through both targets -------------------------
@pytest.mark.bmv2
@pytest.mark.parametrize("program", sorted(SPECS))
def test_differential(program: str) -> None:
    """Fresh embedded and BMv2 switches, same writes and frames: identical outputs."""
    conformance_specs.assert_same_as_bmv2(program, SPECS)
