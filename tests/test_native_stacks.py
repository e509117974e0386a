"""Header stacks on both backends (tests/p4/parser_features.p4: an MPLS stack of 4):
a full stack, an overflow (StackOutOfBounds), pop_front and push_front in ingress, the
deparse of the valid elements in order, and lookahead behind the stack. Each frame goes
through the Python and the native backend; both must give the expected bytes."""

from __future__ import annotations

import pytest
from scapy.all import IP, UDP, Ether, Raw

from targets.embedded.native.build import compiler
from tests.native_pair import ROOT, pair, snapshot
from tests.p4.packets import Mpls, ParseResult

pytestmark = pytest.mark.skipif(compiler() is None, reason="no C compiler")
PROGRAM = ROOT / "tests" / "p4" / "build" / "parser_features.json"
ETH = Ether(src="00:00:0a:00:00:01", dst="00:00:0a:00:00:02", type=0x8847)
IPV4 = IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=1, dport=2) / Raw(b"payload!")


def labels(*ls: int, bos_at: int | None = None) -> bytes:
    """MPLS labels, bos set on index ``bos_at`` (default: the last)."""
    last = len(ls) - 1 if bos_at is None else bos_at
    return b"".join(bytes(Mpls(label=v, tc=1, bos=int(i == last), ttl=9 + i)) for i, v in enumerate(ls))


def result(path: int, count: int, err: int, valid: int) -> bytes:
    return bytes(ParseResult(path=path, label_count=count, error_code=err, stack_valid=valid))


@pytest.fixture(scope="module")
def sws():  # noqa: ANN201
    return pair(PROGRAM)


def one(sws, frame: bytes) -> bytes:  # noqa: ANN001
    """The frame both backends send back (port 1 in, port 1 out)."""
    out, native = sws[0].process(1, frame), sws[1].process(1, frame)
    assert native == out
    assert [p for p, _ in out] == [1]
    return out[0][1]


def test_full_stack_deparses_every_element_in_order(sws) -> None:  # noqa: ANN001
    stack = labels(10, 11, 12, 13)
    got = one(sws, bytes(ETH) + stack + bytes(IPV4))
    assert got == bytes(ETH) + result(0x0F, 4, 0, 0x0F) + stack + bytes(IPV4)


def test_overflow_is_stack_out_of_bounds(sws) -> None:  # noqa: ANN001
    # five labels, none with bos among the first four: the fifth extract overflows
    stack = labels(10, 11, 12, 13, 14)
    got = one(sws, bytes(ETH) + stack + bytes(IPV4))
    # the parser stops at the fifth label: it and what follows stay payload
    assert got == bytes(ETH) + result(0x02, 4, 3, 0x0F) + stack + bytes(IPV4)


def test_short_label_is_packet_too_short(sws) -> None:  # noqa: ANN001
    stack = labels(10, 11, bos_at=5)
    got = one(sws, bytes(ETH) + stack + b"\x00\x01")
    assert got == bytes(ETH) + result(0x02, 2, 1, 0x03) + stack + b"\x00\x01"


def test_pop_front_shifts_the_stack(sws) -> None:  # noqa: ANN001
    got = one(sws, bytes(ETH) + labels(3, 21, 22) + bytes(IPV4))
    # label 3 (implicit null) popped: 21, 22 move to the front, bos still on 22
    rest = labels(3, 21, 22)[4:]
    assert got == bytes(ETH) + result(0x0F, 3, 0, 0x07) + rest + bytes(IPV4)


def test_pop_front_of_a_full_stack_invalidates_the_last_element(sws) -> None:  # noqa: ANN001
    got = one(sws, bytes(ETH) + labels(3, 21, 22, 23) + bytes(IPV4))
    assert got == bytes(ETH) + result(0x0F, 4, 0, 0x0F) + labels(3, 21, 22, 23)[4:] + bytes(IPV4)


def test_push_front_onto_an_empty_stack(sws) -> None:  # noqa: ANN001
    eth = Ether(src="00:00:0a:00:00:01", dst="00:00:0a:00:00:02", type=0x0800)
    got = one(sws, bytes(eth) + bytes(IPV4))
    pushed = bytes(Mpls(label=100, tc=0, bos=0, ttl=64)) + bytes(Mpls(label=200, tc=0, bos=1, ttl=64))
    assert got == bytes(ETH) + result(0x09, 0, 0, 0) + pushed + bytes(IPV4)


def test_lookahead_behind_the_stack(sws) -> None:  # noqa: ANN001
    # lookahead<bit<4>> behind a bos label: a non-4 nibble accepts; no byte at all is
    # PacketTooShort (p4c sets the lookahead into a temporary: BMv2 checks its width)
    stack = labels(7)
    got = one(sws, bytes(ETH) + stack + b"\x60")
    assert got == bytes(ETH) + result(0x06, 1, 0, 0x01) + stack + b"\x60"
    got = one(sws, bytes(ETH) + stack)
    assert got == bytes(ETH) + result(0x06, 1, 1, 0x01) + stack
    assert snapshot(sws[0]) == snapshot(sws[1])
