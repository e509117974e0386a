"""The token smart NIC (p4src/nic.p4) and LAN switch (lan.p4), in process.

The committed p4c output runs in the embedded target through ``Switch.process``: each
test feeds real token frames (hosts/packets.py) to the NIC's host port (1) or LAN port
(2) and checks what leaves, the read-out sums element by element against numpy, and
the drop counters. The same program on a real emulated LAN: test_token_network.py.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from hosts.packets import (
    TOKEN_HEADER_LEN,
    TOKEN_VALUES,
    TokenDecodeError,
    TokenFlags,
    TokenHeader,
    TokenMsg,
    decode_token,
    encode_token,
    mac_bytes,
    token_values,
)
from targets.embedded.state import Replica
from targets.embedded.switch import Switch

ROOT = Path(__file__).resolve().parent.parent
NIC = ROOT / "p4src" / "build" / "nic.json"
LAN = ROOT / "p4src" / "build" / "lan.json"
MACS = [mac_bytes(f"00:00:0a:00:00:0{i}") for i in range(1, 5)]  # members 1..4
INTRUDER = mac_bytes("00:00:0a:00:00:09")
HOST, LANP = 1, 2
WAIT_US = 300_000  # t = 0.3 s


def _counter(sw: Switch, name: str, index: int) -> int:
    return sw.program.counters[name].packets[index]


def _drops(sw: Switch, reason: int) -> int:
    return _counter(sw, "NicIngress.membership.member_drops", reason)


def _acc_drops(sw: Switch, reason: int) -> int:
    return _counter(sw, "NicIngress.accumulator.acc_drops", reason)


def tx(sw: Switch, port: int, hdr: TokenHeader, src: bytes, values: object = None
       ) -> list[tuple[int, TokenHeader, memoryview]]:
    out = []
    for p, frame in sw.process(port, encode_token(hdr, src, values=values)):
        _d, _s, h, rest = decode_token(frame)
        out.append((p, h, rest))
    return out


def H(msg: TokenMsg, **kw: object) -> TokenHeader:  # noqa: N802
    return TokenHeader(int(msg), **kw)


@pytest.fixture
def nic() -> Switch:
    """NIC of member 2 (MACS[1]) after formation of members 1..4, opened by member 1."""
    sw = Switch()
    sw.install_program(sw.load_program(NIC.read_bytes()))
    sw.pre.set_group(1, [Replica(HOST, 0), Replica(LANP, 0)], create=True)
    assert tx(sw, HOST, H(TokenMsg.CONFIG, aux=WAIT_US), MACS[1]) == []
    assert [p for p, *_ in tx(sw, LANP, H(TokenMsg.FORM_START, sender=1), MACS[0])] == [HOST]
    for i, mac in enumerate(MACS, start=1):
        flags = int(TokenFlags.LAST) if i == len(MACS) else 0
        out = tx(sw, LANP, H(TokenMsg.ROSTER, sender=1, member=i, mac=mac, count=4, flags=flags), MACS[0])
        assert [p for p, *_ in out] == [HOST]
    return sw


def _read(sw: Switch, batch: int, frag: int, last: bool = False) -> tuple[np.ndarray, int]:
    out = tx(sw, HOST, H(TokenMsg.READ, batch=batch, frag=frag, flags=int(TokenFlags.LAST) if last else 0),
             MACS[1])
    assert len(out) == 1 and out[0][0] == HOST and out[0][1].msg_type == TokenMsg.READ_REPLY
    return token_values(out[0][2]), out[0][1].bitmap


def test_frames_round_trip() -> None:
    vals = np.arange(-64, 64, dtype=np.int32)
    hdr = H(TokenMsg.GRAD, sender=3, batch=7, frag=2, nfrags=30, mac=MACS[2], aux=32)
    frame = encode_token(hdr, MACS[2], values=vals)
    assert len(frame) == 14 + TOKEN_HEADER_LEN + 4 * TOKEN_VALUES
    _d, src, back, rest = decode_token(frame)
    assert back == hdr and src == MACS[2] and np.array_equal(token_values(rest), vals)
    with pytest.raises(TokenDecodeError):
        decode_token(frame[:30])
    with pytest.raises(ValueError):
        encode_token(hdr, MACS[2], values=np.zeros(5, dtype=np.int32))


def test_sums_are_exact_and_include_the_own_gradient(nic: Switch) -> None:
    rng = np.random.default_rng(1)
    grads = {s: rng.integers(-2**28, 2**28, (3, TOKEN_VALUES)).astype(np.int32) for s in (1, 2, 3, 4)}
    for frag in range(3):
        for s, mac in zip((1, 2, 3, 4), MACS, strict=True):
            port = HOST if s == 2 else LANP
            out = tx(nic, port, H(TokenMsg.GRAD, sender=s, batch=0, frag=frag, nfrags=3), mac, grads[s][frag])
            if s == 2:  # the host's own GRAD goes on to the LAN, its values untouched
                assert len(out) == 1 and out[0][0] == LANP
                assert np.array_equal(token_values(out[0][2]), grads[2][frag])
            else:  # received gradients are consumed by the accumulator
                assert out == []
    for frag in range(3):
        got, bitmap = _read(nic, 0, frag, last=frag == 2)
        want = sum(grads[s][frag].astype(np.int64) for s in grads)
        assert np.array_equal(got, want.astype(np.int32))
        assert bitmap == 0b11110
    # the next batch starts the other bank; batch 0 is now outside the window
    assert tx(nic, LANP, H(TokenMsg.GRAD, sender=1, batch=0, frag=0), MACS[0], grads[1][0]) == []
    assert _acc_drops(nic, 1) == 1  # stale
    tx(nic, LANP, H(TokenMsg.GRAD, sender=1, batch=1, frag=0), MACS[0], grads[1][0])
    got, bitmap = _read(nic, 1, 0)
    assert np.array_equal(got, grads[1][0]) and bitmap == 0b10


def test_sums_wrap_like_int32(nic: Switch) -> None:
    big = np.full(TOKEN_VALUES, 2**31 - 1, dtype=np.int32)
    for s in (1, 3):
        tx(nic, LANP, H(TokenMsg.GRAD, sender=s, batch=0, frag=0), MACS[s - 1], big)
    got, _ = _read(nic, 0, 0)
    assert np.all(got == -2)  # documented: hosts keep sums inside int32, the NIC wraps


def test_duplicates_and_non_members_change_nothing(nic: Switch) -> None:
    rng = np.random.default_rng(2)
    g1 = rng.integers(-1000, 1000, TOKEN_VALUES).astype(np.int32)
    tx(nic, LANP, H(TokenMsg.GRAD, sender=1, batch=0, frag=5), MACS[0], g1)
    tx(nic, LANP, H(TokenMsg.GRAD, sender=1, batch=0, frag=5, flags=int(TokenFlags.RESEND)), MACS[0], g1)
    assert _acc_drops(nic, 2) == 1  # duplicate
    forged = rng.integers(-1000, 1000, TOKEN_VALUES).astype(np.int32)
    # a non-member MAC claiming member 3's number, an unknown number, number 0
    for sender in (3, 9, 0):
        assert tx(nic, LANP, H(TokenMsg.GRAD, sender=sender, batch=0, frag=5), INTRUDER, forged) == []
    assert tx(nic, LANP, H(TokenMsg.TOKEN, sender=3, next_holder=2, pass_no=99), INTRUDER) == []
    assert _drops(nic, 2) == 4  # non_member
    got, bitmap = _read(nic, 0, 5)
    assert np.array_equal(got, g1) and bitmap == 0b10
    # formation is closed: a late node's answer is dropped
    assert tx(nic, LANP, H(TokenMsg.FORM_REPLY), INTRUDER) == []
    assert _drops(nic, 3) == 1
    # host-only messages never come from the LAN; a short GRAD is malformed
    assert tx(nic, LANP, H(TokenMsg.READ, batch=0, frag=5), MACS[0]) == []
    assert _drops(nic, 4) == 1
    short = encode_token(H(TokenMsg.GRAD, sender=1, batch=0, frag=5), MACS[0], values=g1)[:100]
    assert nic.process(LANP, short) == []
    assert _drops(nic, 1) == 1
    got, _ = _read(nic, 0, 5)
    assert np.array_equal(got, g1)


def test_other_ethertypes_are_bridged(nic: Switch) -> None:
    frame = MACS[0] + MACS[1] + b"\x08\x00" + bytes(46)
    assert nic.process(HOST, frame) == [(LANP, frame)]
    assert nic.process(LANP, frame) == [(HOST, frame)]


def test_watchdog_resend_then_staggered_node_lost(nic: Switch) -> None:
    # member 2's host passed the token to member 3, which stays silent
    out = tx(nic, HOST, H(TokenMsg.TOKEN, sender=2, next_holder=3, pass_no=1), MACS[1])
    assert [p for p, *_ in out] == [LANP]
    assert tx(nic, HOST, H(TokenMsg.TICK), MACS[1]) == []  # not yet
    time.sleep(WAIT_US / 1e6 + 0.05)
    out = tx(nic, HOST, H(TokenMsg.TICK), MACS[1])
    assert [(p, h.msg_type) for p, h, _ in out] == [(HOST, TokenMsg.RESEND_DUE)]
    assert tx(nic, HOST, H(TokenMsg.TICK), MACS[1]) == []  # asked once
    # the host re-sends (flag RESEND); member 2 is d = 3 positions after member 3
    t0 = time.monotonic()
    tx(nic, HOST, H(TokenMsg.TOKEN, sender=2, next_holder=3, pass_no=1, flags=int(TokenFlags.RESEND)),
       MACS[1])
    lost = []
    while not lost and time.monotonic() - t0 < 5:
        lost = tx(nic, HOST, H(TokenMsg.TICK), MACS[1])
        time.sleep(0.02)
    waited = time.monotonic() - t0
    assert waited >= 3 * WAIT_US / 1e6
    assert sorted(p for p, *_ in lost) == [HOST, LANP]  # to its host and to the LAN
    h = lost[0][1]
    assert (h.msg_type, h.member, h.sender, h.next_holder) == (TokenMsg.NODE_LOST, 3, 2, 2)
    assert h.aux >= 3 * WAIT_US
    # member 3 is out: its frames are ignored from now on
    assert tx(nic, LANP, H(TokenMsg.GRAD, sender=3, batch=0, frag=0), MACS[2]) == []
    assert _drops(nic, 2) == 1
    # until it rejoins
    tx(nic, LANP, H(TokenMsg.REJOIN, sender=1, member=3), MACS[0])
    assert tx(nic, LANP, H(TokenMsg.GRAD, sender=3, batch=0, frag=0), MACS[2]) == []
    _got, bitmap = _read(nic, 0, 0)
    assert bitmap == 0b1000


def test_lan_switch_floods_broadcasts_and_forwards_unicast() -> None:
    sw = Switch()
    sw.install_program(sw.load_program(LAN.read_bytes()))
    for p in (1, 2, 3):
        sw.pre.set_group(p, [Replica(q, 0) for q in (1, 2, 3) if q != p], create=True)
    bcast = encode_token(H(TokenMsg.TOKEN, sender=1, next_holder=2), MACS[0])
    assert sorted(p for p, _ in sw.process(1, bcast)) == [2, 3]
    assert sorted(p for p, _ in sw.process(3, bcast)) == [1, 2]
