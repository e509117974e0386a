"""Differential test: every conformance program's setup and frames through fresh embedded
and BMv2 switches, outputs compared byte for byte (masked fields named per spec).
"""

from __future__ import annotations

import pytest

from tests.conformance_rig import pytestmark
from tests.conformance_specs import SPECS, assert_same_as_bmv2

__all__ = ["pytestmark"]


@pytest.mark.bmv2
@pytest.mark.parametrize("program", sorted(SPECS))
def test_differential(program: str) -> None:
    """Fresh embedded and BMv2 switches, same setup and frames: identical outputs
    (``ProgramSpec.masked`` fields zeroed, after their plausibility checks)."""
    assert_same_as_bmv2(program)
