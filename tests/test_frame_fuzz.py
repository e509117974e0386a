"""Malformed and random frames into every P4 program (bench/frame_fuzz.py, short run: 1,000 frames).

Per program one small network (embedded target unless TARGET says otherwise) is
deployed as its technique deploys it; a host sends mutated frames of every protocol the
fabric speaks; then, without reloading any pipeline, the technique runs for real and
its result is checked exactly. ``python -m bench fuzz`` runs 100,000 frames each.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench import frame_fuzz
from tests.netenv import net_skip_reason

COUNT = 1000
RSS_GROWTH_MIB = 64  # far above what a leak-free switch grows by on 1,000 frames (< 5)


def _seeds() -> list[bytes]:
    peers = [("00:00:0a:00:00:01", "10.0.0.1"), ("00:00:0a:00:00:03", "10.0.0.3")]
    return frame_fuzz.corpus("00:00:0a:00:00:02", "10.0.0.2", peers)


def test_corpus_speaks_every_protocol_and_mutations_vary() -> None:
    seeds = _seeds()
    types = {int.from_bytes(f[12:14], "big") for f in seeds}
    assert {0x0800, 0x0806, 0x8100, 0x86DD, 0x8624, 0x88B5} <= types
    rng = np.random.default_rng(3)
    frames = [frame_fuzz.mutate(seeds, rng) for _ in range(3000)]
    assert all(len(f) <= frame_fuzz.MAX_FRAME for f in frames)
    lengths = {len(f) for f in frames}
    assert min(lengths) < 14 and max(lengths) >= 1400  # headerless and MTU-sized frames
    assert sum(f in seeds for f in frames) < len(frames) // 4  # mostly mutated
    again = np.random.default_rng(3)
    assert [frame_fuzz.mutate(seeds, again) for _ in range(100)] == frames[:100]  # seeded


@pytest.mark.net
@pytest.mark.slow
# token's NIC and LAN programs: a second run of the same fuzz (python -m bench fuzz)
@pytest.mark.parametrize("program", [pytest.param(p, marks=pytest.mark.long) if p == "token" else p
                                     for p in frame_fuzz.PROGRAMS])
def test_program_survives_fuzz_and_still_works(program: str, tmp_path: Path) -> None:
    needs = {"forward": ("forward", "ina"), "ina": ("ina",), "ndn": ("ndn",), "token": ("nic", "lan")}
    reason = net_skip_reason(*needs[program])
    if reason:
        pytest.skip(reason)
    # token: formation frames included; forged FORM_START/ROSTER from the fuzzing host once
    # closed every NIC's formation for good (now: LAN port security, the controller's opener)
    res = frame_fuzz.fuzz_program(program, COUNT, 2000.0, seed=7, target=None, run_dir=tmp_path)
    assert res.send["sent"] + res.send["refused_by_kernel"] == COUNT
    assert res.send["sent"] >= COUNT * 0.99
    for row in res.rows:
        assert row.alive, f"{row.switches}: the switch process died"
        assert row.tracebacks == 0, f"{row.switches}: a traceback in the switch log"
        assert row.rx >= COUNT * 0.9 or program == "token"  # token: only nic4/lan see them all
        assert row.rss_after_kb - row.rss_before_kb < RSS_GROWTH_MIB * 1024
    assert max(r.rx for r in res.rows) >= COUNT * 0.9
    assert res.exact, res.check
