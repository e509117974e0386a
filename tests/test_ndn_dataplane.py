"""ndn.p4's data-plane NDN, compiled, on each target over real ports (``targets.testbed``:
the switch process in its own namespace, veth ports, P4Runtime): the embedded target
always, BMv2 ``simple_switch_grpc`` when it is installed.

No controller reads packet-ins here (it is "stopped"): a subscription still lands in the
persistent PIT (the switch replicates the next update to the subscriber's port); a
duplicate-nonce Interest is a counted drop; an expired PIT entry is freed (its late Data
a counted ``pit_expired`` drop, the next one unsolicited). Where the program keeps this
state (registers) the controller cannot read it on BMv2, so the tests watch packets and
counters only. The in-process tests of the same blocks are in test_ndn_switch.py.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from ndn.encoding import InterestParam, make_interest

from controller.ndn import (
    NDN_DROP_REASONS,
    NDN_EVENTS,
    NdnDrops,
    NdnFib,
    PersistentPit,
    TransientPit,
)
from controller.p4runtime import Program
from targets.launch import bmv2_available
from tests.netenv import ROOT
from wire.ndn import NDN_MAC, data_packet, interest_packet, name_of

NDN_JSON = ROOT / "p4src" / "build" / "ndn.json"
NDN_P4INFO = ROOT / "p4src" / "build" / "ndn.p4info.txt"
SRC = bytes.fromhex("00000a000009")
TARGETS = ["embedded", pytest.param("bmv2", marks=pytest.mark.bmv2)]

pytestmark = pytest.mark.net


def frame(pkt: bytes) -> bytes:
    return NDN_MAC + SRC + (0x8624).to_bytes(2, "big") + pkt


@pytest.fixture(scope="module", params=TARGETS)
def switch(request: pytest.FixtureRequest) -> Iterator[tuple[Any, Any, Program]]:
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    if request.param == "bmv2" and not bmv2_available():
        pytest.skip("BMv2 simple_switch_grpc is not installed")
    from targets.p4rt_client import P4RuntimeClient
    from targets.testbed import Testbed

    prog = Program.load(NDN_JSON)
    with Testbed(4, target=request.param, json_path=str(NDN_JSON)) as tb, \
            P4RuntimeClient(tb.grpc_addr, device_id=0, election_id=10) as c:
        c.set_pipeline(NDN_P4INFO, NDN_JSON)
        c.use_schema(NDN_P4INFO)
        fib, pit, pp = prog.block(NdnFib), prog.block(TransientPit), prog.block(PersistentPit)
        c.write(fib.route_entry("/h1", 1))                  # the PS is behind port 1
        c.write(*pit.port_groups([1, 2, 3, 4]))
        c.write(pit.lifetime_entry(4.0))
        c.write(pp.config_entry("switch", 6.0))
        tb.drain()
        yield tb, c, prog


def _counters(c: Any, prog: Program) -> tuple[dict[str, int], dict[str, int]]:
    from finsy import P4CounterEntry

    d = prog.block(NdnDrops)

    def read(name: str) -> dict[int, tuple[int, int]]:
        return {x.index: (x.packet_count, x.byte_count) for x in c.read(P4CounterEntry(d.name(name)))}

    return (NdnDrops.decode(read("ndn_drops"), NDN_DROP_REASONS),
            NdnDrops.decode(read("ndn_events"), NDN_EVENTS))


def _out(tb: Any, timeout: float = 0.5) -> dict[int, list[bytes]]:
    return {p: fs for p, fs in tb.recv_all(timeout=timeout).items() if fs}


def test_subscription_lands_with_no_controller(switch: tuple[Any, Any, Program]) -> None:
    tb, c, prog = switch
    ins = frame(interest_packet(name_of(b"*insert*", "h1", "train", "h3")))
    tb.send(2, ins)
    assert _out(tb) == {1: [ins]}                          # on toward the PS, by the FIB
    upd = frame(data_packet(name_of(b"*distribute*", "h1", "train", "v=1", "seg=0"), b"u" * 64))
    tb.send(1, upd)
    assert _out(tb) == {2: [upd]}                          # replicated to the subscriber
    ack = frame(data_packet(name_of(b"*distribute*", "h1", "train", "h3"), b""))
    tb.send(1, ack)
    assert _out(tb) == {2: [ack]}
    _, ev = _counters(c, prog)
    assert ev.get("subscribed") == 1 and ev.get("distributed") == 1 and "punted" not in ev


def test_duplicate_nonce_interest_is_dropped(switch: tuple[Any, Any, Program]) -> None:
    tb, c, prog = switch
    before, _ = _counters(c, prog)
    i = frame(bytes(make_interest(name_of("h1", "dup", "seg=0"), InterestParam(nonce=0x1234, lifetime=4000))))
    tb.send(3, i)
    tb.send(3, i)
    tb.send(4, i)
    assert _out(tb) == {1: [i]}
    drops, _ = _counters(c, prog)
    assert drops.get("duplicate_nonce", 0) - before.get("duplicate_nonce", 0) == 2


def test_expired_pit_entry_is_freed(switch: tuple[Any, Any, Program]) -> None:
    tb, c, prog = switch
    before, _ = _counters(c, prog)
    name = name_of("h1", "short", "seg=0")
    i = frame(bytes(make_interest(name, InterestParam(nonce=0x4321, lifetime=50))))
    tb.send(2, i)
    assert _out(tb) == {1: [i]}
    time.sleep(0.3)                                        # past its 50 ms InterestLifetime
    d = frame(data_packet(name, b"late"))
    tb.send(1, d)
    tb.send(1, d)
    assert _out(tb) == {}
    drops, _ = _counters(c, prog)
    assert drops.get("pit_expired", 0) - before.get("pit_expired", 0) == 1
    assert drops.get("unsolicited_data", 0) - before.get("unsolicited_data", 0) == 1   # freed
