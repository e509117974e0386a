"""Conformance of parser_features.p4 and hash_checksum.p4 (rig: ``tests/conformance_rig.py``)."""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import pytest

from tests.conformance_rig import (
    Case,
    Rig,
    _ids,
    crc16_arc,
    ones_complement_csum,
    pytestmark,
    run_case,
    target,
)
from tests.conformance_specs import SPECS, open_rig

__all__ = ["pytestmark", "target"]


class TestParserFeatures:
    """parser_features.p4: selects, masks, stacks, lookahead, verify, errors, push/pop."""

    @pytest.fixture(scope="class")
    @classmethod
    def rig(cls, target: str) -> Iterator[Rig]:
        with open_rig("parser_features", target) as rig:
            yield rig

    @pytest.mark.parametrize("case", SPECS["parser_features"].cases, ids=_ids)
    def test_frame(self, rig: Rig, case: Case) -> None:
        run_case(rig, SPECS["parser_features"], case)


class TestHashChecksum:
    """hash_checksum.p4: crc16, crc32, identity, csum16 hashes; IPv4 checksum verify/update."""

    @pytest.fixture(scope="class")
    @classmethod
    def rig(cls, target: str) -> Iterator[Rig]:
        with open_rig("hash_checksum", target) as rig:
            yield rig

    @pytest.mark.parametrize("case", SPECS["hash_checksum"].cases, ids=_ids)
    def test_frame(self, rig: Rig, case: Case) -> None:
        run_case(rig, SPECS["hash_checksum"], case)

    def test_reference_vectors(self) -> None:
        assert crc16_arc(b"123456789") == 0xBB3D
        assert zlib.crc32(b"123456789") == 0xCBF43926
        assert ones_complement_csum(bytes.fromhex("450000730000400040110000c0a80001c0a800c7")) == 0xB861
