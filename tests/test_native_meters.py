"""Indirect meters on the native backend against the Python one (meters.p4): with the
clock injected on both, the same configurations (written as the P4Runtime MeterEntry
write does) and packet times give the same colour for every packet, packets and bytes
meters, yellow and red included; a reconfiguration or a cleared cell takes effect for the
next packet; an index past the array is green."""

from __future__ import annotations

import pytest
from scapy.all import Ether

from targets.embedded import compiler
from targets.embedded.codegen import support
from targets.embedded.native.build import compiler as c_compiler
from targets.embedded.native.nmeters import set_meter_clock
from targets.embedded.state import StateError, TableEntry
from tests.native_pair import ROOT, pair
from tests.p4.packets import MeterProbe

pytestmark = pytest.mark.skipif(c_compiler() is None, reason="no C compiler")

PATH = ROOT / "tests" / "p4" / "build" / "meters.json"
PKT, BYTE = "MIngress.pkt_meter", "MIngress.byte_meter"
T0 = 1000.0


@pytest.fixture
def clocked(monkeypatch: pytest.MonkeyPatch) -> tuple[list[float], tuple]:
    """Both switches, and the one clock (seconds) both backends' meters read."""
    clock = [T0]
    monkeypatch.setattr(support, "monotonic", lambda: clock[0])
    monkeypatch.setattr(compiler, "monotonic", lambda: clock[0])  # bound as _now at load
    sws = pair(PATH)
    set_meter_clock(sws[1].program.native, T0)
    return clock, sws


def _at(clock: list[float], sws: tuple, t: float) -> None:
    clock[0] = t
    set_meter_clock(sws[1].program.native, t)


def _colours(sws: tuple, index: int, pad: int = 0) -> list[tuple[int, int, int]]:
    """(packets colour, bytes colour, next cell's low bit) on each backend."""
    frame = bytes(Ether(src="00:00:0a:00:00:01", dst="00:00:0a:00:00:02") / MeterProbe(index=index)) + bytes(pad)
    out = []
    for sw in sws:
        (port, f), = sw.process(2, frame)
        assert port == 1
        p = MeterProbe(f[14:18])
        out.append((p.pkt_color, p.byte_color, p.low_bit))
    return out


def _configure(sws: tuple, name: str, i: int, cfg: tuple[int, int, int, int] | None) -> None:
    for sw in sws:
        arr = sw.program.meters[name]
        arr.clear_config(i) if cfg is None else arr.set_config(i, *cfg)


def test_colours_per_packet_identical(clocked: tuple) -> None:
    clock, sws = clocked
    _configure(sws, PKT, 2, (10, 3, 20, 5))       # 10 pkt/s, burst 3; peak 20 pkt/s, burst 5
    _configure(sws, BYTE, 2, (1000, 60, 2000, 100))  # bytes per second, bursts in bytes
    _configure(sws, PKT, 3, (1, 1, 100, 5))  # read into a 1-bit field: yellow keeps 1
    times = [T0 + 0.001 * k for k in range(8)] + [T0 + 0.1 + 0.013 * k for k in range(30)] + [T0 + 5.0, T0 + 5.0]
    seen = []
    for k, t in enumerate(times):
        _at(clock, sws, t)
        py, nat = _colours(sws, 2, pad=7 * (k % 5))
        assert py == nat, (k, t, py, nat)
        seen.append(py)
    pkt = [s[0] for s in seen]
    assert pkt[:8] == [0, 0, 0, 1, 1, 2, 2, 2]  # the committed burst, then the peak one, then red
    assert {s[1] for s in seen} == {0, 1, 2} and {s[2] for s in seen} == {0, 1}
    assert seen[-2][0] == 0  # refilled after 5 s


def test_reconfigure_clear_and_out_of_range(clocked: tuple) -> None:
    clock, sws = clocked
    _configure(sws, PKT, 0, (1, 1, 1, 1))
    assert _colours(sws, 0)[0][0] == 0
    assert all(c[0] == 2 for c in _colours(sws, 0))  # one token, no refill yet
    _at(clock, sws, T0 + 0.5)
    _configure(sws, PKT, 0, (1, 2, 2, 2))  # full buckets from now
    for want in (0, 0, 2):  # two tokens
        assert [c[0] for c in _colours(sws, 0)] == [want, want]
    _configure(sws, PKT, 0, None)  # unconfigured: green
    assert [c[0] for c in _colours(sws, 0)] == [0, 0]
    _configure(sws, PKT, 7, (1, 1, 1, 1))
    for _ in range(3):  # index 7's low bit reads cell 8: past the array, green
        assert [c[2] for c in _colours(sws, 7)] == [0, 0]
    for sw in sws:
        with pytest.raises(StateError, match="peak rate below"):
            sw.program.meters[PKT].set_config(1, 10, 1, 5, 1)
        assert sw.program.meters[PKT].configs[:2] == [None, None]


def test_direct_meter_and_counter_per_packet(monkeypatch: pytest.MonkeyPatch) -> None:
    """table_features.p4's direct meter (t_lpm, packets, read in the action) and direct
    counter (t_exact): the colour of every packet, a meter written again (restarted at
    its next packet), counters written and read back; the same on both backends."""
    from tests.p4.packets import TableProbe

    clock = [T0]
    monkeypatch.setattr(support, "monotonic", lambda: clock[0])
    monkeypatch.setattr(compiler, "monotonic", lambda: clock[0])
    sws = pair(ROOT / "tests" / "p4" / "build" / "table_features.json")
    set_meter_clock(sws[1].program.native, T0)
    for sw in sws:
        p = sw.program
        p.tables["TIngress.t_exact"].insert(TableEntry((5,), p.action_call("TIngress.t_exact", "TIngress.set_exact", (7,))))
        p.tables["TIngress.t_lpm"].insert(TableEntry(((0x0A000000, 8),), p.action_call(
            "TIngress.t_lpm", "TIngress.set_lpm", (9,)), meter_config=(10, 2, 20, 4)))

    def colours(exact_key: int) -> list[int]:
        frame = bytes(Ether() / TableProbe(exact_key=exact_key, lpm_key=0x0A000001))
        out = []
        for sw in sws:
            (_, f), = sw.process(1, frame)
            out.append(TableProbe(f[14:]).lpm_color)
        assert out[0] == out[1], out
        return out

    seen = []
    for k in range(12):
        _at(clock, sws, T0 + 0.01 * k)
        seen.append(colours(5)[0])
    assert seen[:6] == [0, 0, 1, 1, 2, 2], seen  # committed burst 2, peak burst 4
    assert 0 in seen[6:]  # refilled at 10-20 packets/s
    for sw in sws:  # a new config: full buckets from the next packet
        t = sw.program.tables["TIngress.t_lpm"]
        e = t.get(((0x0A000000, 8),), 0)
        e.meter_config, e.meter = (1, 1, 1, 1), None
        t.direct_written(e, counters=False, meter=True)
    assert [colours(5)[0] for _ in range(3)] == [0, 2, 2]
    colours(6)  # a miss of t_exact: its default's counters
    got = []
    for sw in sws:
        t = sw.program.tables["TIngress.t_exact"]
        t.direct_read()
        e = t.get((5,), 0)
        got.append((e.packets, t.default_packets))
        e.packets = 100
        t.direct_written(e)
    assert got[0] == got[1] == (15, 1)
    colours(5)
    for sw in sws:
        t = sw.program.tables["TIngress.t_exact"]
        t.direct_read()
        assert t.get((5,), 0).packets == 101
    nat = sws[1].program.tables["TIngress.t_exact"]
    nat.get((5,), 0).packets += 2  # as the Python path counts a packet it finishes
    nat.direct_read()
    assert nat.get((5,), 0).packets == 103  # added to the native count, not lost
    colours(5)
    nat.direct_read()
    assert nat.get((5,), 0).packets == 104
