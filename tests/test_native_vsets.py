"""Parser value sets on the native backend against the Python one (value_set.p4): a
set on the EtherType, a 12-bit set, a struct set compared field by field in whole
bytes; hits and misses, a set replaced and cleared, the same path on both backends."""

from __future__ import annotations

import pytest
from scapy.all import Ether

from targets.embedded.native.build import compiler as c_compiler
from tests.native_pair import ROOT, pair

pytestmark = pytest.mark.skipif(c_compiler() is None, reason="no C compiler")

PATH = ROOT / "tests" / "p4" / "build" / "value_set.json"
ETH, LOWS, PAIRS = "VParser.ethertypes", "VParser.lows", "VParser.pairs"


def _path(sws: tuple, ether_type: int, hi4: int, low12: int, tag: int) -> int | None:
    """The path the program writes (None: dropped), which both backends must agree on."""
    frame = bytes(Ether(src="00:00:0a:00:00:01", dst="00:00:0a:00:00:02", type=ether_type)) + bytes(
        [hi4 << 4 | low12 >> 8, low12 & 0xFF, tag, 0])
    out = []
    for sw in sws:
        got = sw.process(3, frame)
        out.append(got[0][1][17] if got else None)
    assert out[0] == out[1], out
    return out[0]


def _set(sws: tuple, name: str, members: list[tuple[int, ...]], widths: list[int]) -> None:
    for sw in sws:
        sw.program.value_sets[name].set_members(members, widths)


def test_value_set_hits_and_misses_identical() -> None:
    sws = pair(PATH)
    names = set(sws[0].program.value_sets)
    assert {ETH, LOWS, PAIRS} <= names, names
    assert _path(sws, 0x1234, 1, 0x123, 0) is None  # not in the empty set: dropped
    assert _path(sws, 0x88B6, 1, 0x123, 0x55) == 3
    _set(sws, ETH, [(0x1234,), (0x0800,)], [16])
    _set(sws, LOWS, [(0x123,), (0xFFF,)], [12])
    _set(sws, PAIRS, [(0xA, 0x456)], [4, 12])
    assert _path(sws, 0x1234, 1, 0x123, 0) == 1  # EtherType in the set, low12 in lows
    assert _path(sws, 0x0800, 0xA, 0x456, 0) == 2  # (hi4, low12) in pairs
    assert _path(sws, 0x0800, 0xB, 0x456, 0x55) == 3  # hi4 differs: a miss
    assert _path(sws, 0x0800, 0xA, 0x457, 9) == 4
    assert _path(sws, 0x0801, 0xA, 0x123, 0) is None
    _set(sws, ETH, [(0x0801,)], [16])  # replaced whole
    assert _path(sws, 0x0801, 0xA, 0xFFF, 0) == 1
    assert _path(sws, 0x1234, 0xA, 0xFFF, 0) is None
    for sw in sws:
        sw.program.value_sets[LOWS].clear()
    assert _path(sws, 0x0801, 0xA, 0xFFF, 0) == 4
    for sw in sws:  # the P4Runtime checks stay the Python ones
        with pytest.raises(Exception, match="size"):
            sw.program.value_sets[PAIRS].set_members([(1, 1), (2, 2), (3, 3)], [4, 12])
