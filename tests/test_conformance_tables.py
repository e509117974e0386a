"""Conformance of table_features.p4 and action_features.p4 (rig: ``tests/conformance_rig.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conformance_models_parser import (
    ARITH_AT,
    ARITH_INDEX_ERRORS,
    _arith_frame,
    arith_counter,
    arith_index_codes,
    arith_meter_colors,
    arith_meter_config,
)
from tests.conformance_models_tables import (
    METER_CONFIG,
    T_EXACT_DEFAULT,
    TABLE_WRITE_ERRORS,
    table_const_entries,
    table_const_entries_expected,
    table_const_writes,
    table_default_action,
    table_direct_counter,
    table_direct_meter_config,
    table_meter_colors,
    table_write_codes,
)
from tests.conformance_rig import Case, Rig, _field, _ids, pytestmark, run_case, target
from tests.conformance_specs import SPECS, open_rig
from tests.p4.packets import (
    Arith,
)

__all__ = ["pytestmark", "target"]


class TestTableFeatures:
    """table_features.p4: match kinds, priorities, defaults, const entries, hit/miss/
    action_run control flow, exit, direct counter and direct meter."""

    @pytest.fixture(scope="class")
    @classmethod
    def rig(cls, target: str) -> Iterator[Rig]:
        with open_rig("table_features", target) as rig:
            yield rig

    @pytest.mark.parametrize("case", SPECS["table_features"].cases, ids=_ids)
    def test_frame(self, rig: Rig, case: Case) -> None:
        run_case(rig, SPECS["table_features"], case)

    def test_direct_meter_colors(self, rig: Rig) -> None:
        assert table_meter_colors(rig) == [(0x0216, 0), (0x0216, 1), (0x0216, 2), (0x0216, 2)]

    def test_direct_meter_config_read_back(self, rig: Rig) -> None:
        cfg = METER_CONFIG
        assert table_direct_meter_config(rig) == [(cfg.cir, cfg.cburst, cfg.pir, cfg.pburst), None]

    def test_direct_counter(self, rig: Rig) -> None:
        packets, nbytes, sent = table_direct_counter(rig)
        assert (packets, nbytes) == (3, sent)

    def test_mutable_default_action(self, rig: Rig) -> None:
        assert table_default_action(rig) == [0xD00D, T_EXACT_DEFAULT]

    def test_const_default_and_const_entries_are_read_only(self, rig: Rig) -> None:
        assert table_const_writes(rig) == [True, True, True]

    def test_const_entries_read_back_with_bmv2_priorities(self, rig: Rig) -> None:
        assert table_const_entries(rig) == table_const_entries_expected()

    def test_write_error_codes(self, rig: Rig) -> None:
        expect = [bmv2 if rig.target == "bmv2" else ours for _, _, bmv2, ours in TABLE_WRITE_ERRORS]
        assert table_write_codes(rig) == expect


class TestActionFeatures:
    """action_features.p4: arithmetic, shifts, slices, casts, saturation, logic,
    validity, random, counters and meters, mark_to_drop."""

    @pytest.fixture(scope="class")
    @classmethod
    def rig(cls, target: str) -> Iterator[Rig]:
        with open_rig("action_features", target) as rig:
            yield rig

    @pytest.mark.parametrize("case", SPECS["action_features"].cases, ids=_ids)
    def test_frame(self, rig: Rig, case: Case) -> None:
        run_case(rig, SPECS["action_features"], case)

    def test_random_covers_range(self, rig: Rig) -> None:
        frame = _arith_frame(a=1, b=1)
        values = {_field(f, Arith, ARITH_AT, "rand") for _, f in rig.burst(3, [frame] * 40, 40)}
        assert values <= set(range(100, 200)) and len(values) > 10, sorted(values)

    def test_indirect_meter_colors(self, rig: Rig) -> None:
        assert arith_meter_colors(rig) == [0, 1, 2, 2]

    def test_indirect_meter_config_read_back(self, rig: Rig) -> None:
        cfg = METER_CONFIG
        assert arith_meter_config(rig) == [(cfg.cir, cfg.cburst, cfg.pir, cfg.pburst), None]

    def test_indirect_counter(self, rig: Rig) -> None:
        packets, nbytes, sent = arith_counter(rig)
        assert (packets, nbytes) == (3, sent)

    def test_index_error_codes(self, rig: Rig) -> None:
        expect = [bmv2 if rig.target == "bmv2" else ours for _, _, bmv2, ours in ARITH_INDEX_ERRORS]
        assert arith_index_codes(rig) == expect
