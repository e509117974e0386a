"""P4 features: parser value sets, varbit fields and header unions (specs:
``tests/p4_features_specs.py``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from finsy import (
    P4ValueSetEntry,
)
from finsy.p4entity import P4ValueSetMember

from targets.p4rt_client import P4RuntimeError
from tests.conformance_rig import (
    Case,
    Rig,
    pytestmark,
    run_case,
    target,
)
from tests.p4_features_parsing import (
    VS_FRAMES,
    VS_SETS,
    _bmv2_pvs,
    _union_cases,
    _vb_cases,
    _vs,
    _vs_cases,
    _vs_write,
    vs_expect,
    vs_path,
)
from tests.p4_features_selector import _write_error
from tests.p4_features_specs import SPECS, open_rig

__all__ = ["pytestmark", "target"]


class TestValueSet:
    """value_set.p4: value sets in select, on an EtherType, a 12-bit field and a struct."""

    @pytest.fixture(scope="class")
    @classmethod
    def rig(cls, target: str) -> Iterator[Rig]:
        with open_rig("value_set", target) as rig:
            yield rig

    @pytest.mark.parametrize("case", _vs_cases(), ids=lambda c: c.name)
    def test_frame_with_empty_sets(self, rig: Rig, case: Case) -> None:
        run_case(rig, SPECS["value_set"], case)

    def test_programmed_sets(self, rig: Rig) -> None:
        """The sets filled (over P4Runtime; on BMv2, whose PI answers UNIMPLEMENTED, with
        its Thrift CLI): every frame takes the path the sets give."""
        fill = (lambda sets: _bmv2_pvs(rig, sets)) if rig.target == "bmv2" else (lambda sets: _vs_write(rig, sets))
        fill(VS_SETS)
        try:
            for i, f in enumerate(VS_FRAMES):
                port = 1 + i % 4
                got = rig.exchange(port, _vs(*f), 1 if vs_path(*f, VS_SETS) else 0)
                assert got == vs_expect(f, port, VS_SETS), (f, got)
        finally:
            fill({name: [] for name in VS_SETS})  # back to empty for the other tests
        f = (0x1234, 0x1, 0x123, 0x00)
        assert rig.exchange(1, _vs(*f), 0) == []

    def test_p4runtime_value_set_entry(self, rig: Rig) -> None:
        """ValueSetEntry MODIFY / read, size and duplicate checks (P4Runtime spec)."""
        try:
            _vs_write(rig, VS_SETS)
        except P4RuntimeError as e:
            if rig.target == "bmv2" and "UNIMPLEMENTED" in str(e):
                pytest.skip("BMv2's P4Runtime server (PI, 2023) answers UNIMPLEMENTED to ValueSetEntry writes")
            raise
        try:
            read = {e.value_set_id: [dict(m) for m in e.members] for e in rig.client.read(P4ValueSetEntry(
                "pairs", members=[]))}
            assert read == {"pairs": [{"hi4": 0xF, "low12": 0x001}, {"hi4": 0x1, "low12": 0x123}]}
            too_many = [P4ValueSetMember(v) for v in (1, 2, 3, 4, 5)]
            assert _write_error(rig, ~P4ValueSetEntry("ethertypes", members=too_many)) == "RESOURCE_EXHAUSTED"
            twice = [P4ValueSetMember(0x1234), P4ValueSetMember(0x1234)]
            assert _write_error(rig, ~P4ValueSetEntry("ethertypes", members=twice)) == "ALREADY_EXISTS"
        finally:
            _vs_write(rig, {name: [] for name in VS_SETS})


class TestVarbit:
    """varbit_features.p4: varbit extract / emit / checksum and their parser errors."""

    @pytest.fixture(scope="class")
    @classmethod
    def rig(cls, target: str) -> Iterator[Rig]:
        with open_rig("varbit_features", target) as rig:
            yield rig

    @pytest.mark.parametrize("case", _vb_cases(), ids=lambda c: c.name)
    def test_frame(self, rig: Rig, case: Case) -> None:
        run_case(rig, SPECS["varbit_features"], case)


class TestHeaderUnions:
    """union_features.p4: union member validity, setValid/setInvalid, union stacks."""

    @pytest.fixture(scope="class")
    @classmethod
    def rig(cls, target: str) -> Iterator[Rig]:
        with open_rig("union_features", target) as rig:
            yield rig

    @pytest.mark.parametrize("case", _union_cases(), ids=lambda c: c.name)
    def test_frame(self, rig: Rig, case: Case) -> None:
        run_case(rig, SPECS["union_features"], case)
