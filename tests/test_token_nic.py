"""The token smart NIC (p4src/nic.p4) and LAN switch (lan.p4), in process.

The committed p4c output runs in the embedded target through ``Switch.process``: each
test feeds real token frames (wire/token.py) to the NIC's host port (1) or LAN port
(2) and checks what leaves, the read-out sums element by element against numpy, and
the drop counters. The same program on a real emulated LAN: test_token_network.py.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from targets.embedded.state import Replica
from targets.embedded.switch import Switch
from wire.token import (
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


def _give_token(sw: Switch, holder: int, batch: int = 0) -> None:
    """A TOKEN from the LAN naming ``holder`` (sent by the member before it)."""
    prev = (holder - 2) % 4 + 1
    if prev == 2:  # member 2 is this NIC: its host passes, the NIC emits
        out = tx(sw, HOST, H(TokenMsg.PASS, sender=2, batch=batch), MACS[1])
        assert sorted(p for p, *_ in out) == [HOST, LANP] and out[0][1].next_holder == holder
        return
    tx(sw, LANP, H(TokenMsg.TOKEN, sender=prev, next_holder=holder, batch=batch), MACS[prev - 1])


def test_sums_are_exact_and_include_the_own_gradient(nic: Switch) -> None:
    rng = np.random.default_rng(1)
    grads = {s: rng.integers(-2**28, 2**28, (3, TOKEN_VALUES)).astype(np.int32) for s in (1, 2, 3, 4)}
    for s, mac in zip((1, 2, 3, 4), MACS, strict=True):
        if s > 1:
            _give_token(nic, s)
        for frag in range(3):
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
    _give_token(nic, 1)
    assert tx(nic, LANP, H(TokenMsg.GRAD, sender=1, batch=0, frag=0), MACS[0], grads[1][0]) == []
    assert _acc_drops(nic, 1) == 1  # stale
    tx(nic, LANP, H(TokenMsg.GRAD, sender=1, batch=1, frag=0), MACS[0], grads[1][0])
    got, bitmap = _read(nic, 1, 0)
    assert np.array_equal(got, grads[1][0]) and bitmap == 0b10


def test_sums_wrap_like_int32(nic: Switch) -> None:
    big = np.full(TOKEN_VALUES, 2**31 - 1, dtype=np.int32)
    for s in (1, 3):
        if s == 3:
            _give_token(nic, 3)
        tx(nic, LANP, H(TokenMsg.GRAD, sender=s, batch=0, frag=0), MACS[s - 1], big)
    got, _ = _read(nic, 0, 0)
    assert np.all(got == -2)  # documented: hosts keep sums inside int32, the NIC wraps


def test_duplicates_and_non_members_change_nothing(nic: Switch) -> None:
    rng = np.random.default_rng(2)
    g1 = rng.integers(-1000, 1000, TOKEN_VALUES).astype(np.int32)
    tx(nic, LANP, H(TokenMsg.GRAD, sender=1, batch=0, frag=0), MACS[0], g1)
    tx(nic, LANP, H(TokenMsg.GRAD, sender=1, batch=0, frag=0), MACS[0], g1)
    assert _acc_drops(nic, 2) == 1  # duplicate
    # a re-sent fragment nobody asked for (no NACK seen) is dropped
    tx(nic, LANP, H(TokenMsg.GRAD, sender=1, batch=0, frag=0, flags=int(TokenFlags.RESEND)), MACS[0], g1)
    assert _acc_drops(nic, 5) == 1  # unasked
    forged = rng.integers(-1000, 1000, TOKEN_VALUES).astype(np.int32)
    # a non-member MAC claiming member 3's number, an unknown number, number 0
    for sender in (3, 9, 0):
        assert tx(nic, LANP, H(TokenMsg.GRAD, sender=sender, batch=0, frag=0), INTRUDER, forged) == []
    assert tx(nic, LANP, H(TokenMsg.TOKEN, sender=3, next_holder=2, pass_no=99), INTRUDER) == []
    assert _drops(nic, 2) == 4  # non_member
    got, bitmap = _read(nic, 0, 0)
    assert np.array_equal(got, g1) and bitmap == 0b10
    # formation is closed: a late node's answer is dropped
    assert tx(nic, LANP, H(TokenMsg.FORM_REPLY), INTRUDER) == []
    assert _drops(nic, 3) == 1
    # host-only messages never come from the LAN; a short GRAD is malformed
    assert tx(nic, LANP, H(TokenMsg.READ, batch=0, frag=0), MACS[0]) == []
    assert _drops(nic, 4) == 1
    short = encode_token(H(TokenMsg.GRAD, sender=1, batch=0, frag=0), MACS[0], values=g1)[:100]
    assert nic.process(LANP, short) == []
    assert _drops(nic, 1) == 1
    got, _ = _read(nic, 0, 0)
    assert np.array_equal(got, g1)


def test_other_ethertypes_are_bridged(nic: Switch) -> None:
    frame = MACS[0] + MACS[1] + b"\x08\x00" + bytes(46)
    assert nic.process(HOST, frame) == [(LANP, frame)]
    assert nic.process(LANP, frame) == [(HOST, frame)]


def test_watchdog_resend_then_staggered_node_lost(nic: Switch) -> None:
    # member 2's host passed the token (its NIC named member 3), which stays silent
    out = tx(nic, HOST, H(TokenMsg.PASS, sender=2, pass_no=1), MACS[1])
    assert sorted(p for p, *_ in out) == [HOST, LANP] and out[0][1].next_holder == 3
    assert tx(nic, HOST, H(TokenMsg.TICK), MACS[1]) == []  # not yet
    time.sleep(WAIT_US / 1e6 + 0.05)
    out = tx(nic, HOST, H(TokenMsg.TICK), MACS[1])
    assert [(p, h.msg_type) for p, h, _ in out] == [(HOST, TokenMsg.RESEND_DUE)]
    assert tx(nic, HOST, H(TokenMsg.TICK), MACS[1]) == []  # asked once
    # the host re-sends (flag RESEND), up to 3 times, every t/2 after the first (a lossy
    # LAN); member 2 is d = 3 positions after member 3
    resend = H(TokenMsg.PASS, sender=2, pass_no=1, flags=int(TokenFlags.RESEND))
    tx(nic, HOST, resend, MACS[1])
    resends, lost = 1, []
    t0 = time.monotonic()
    while not lost and time.monotonic() - t0 < 8:
        out = tx(nic, HOST, H(TokenMsg.TICK), MACS[1])
        if [h.msg_type for _p, h, _ in out] == [TokenMsg.RESEND_DUE]:
            tx(nic, HOST, resend, MACS[1])
            resends += 1
            t0 = time.monotonic()
        else:
            lost = out
        time.sleep(0.02)
    assert resends == 3
    waited = time.monotonic() - t0
    assert waited >= 3 * WAIT_US / 1e6
    assert sorted(p for p, *_ in lost) == [HOST, LANP]  # to its host and to the LAN
    h = lost[0][1]
    assert (h.msg_type, h.member, h.sender, h.next_holder) == (TokenMsg.NODE_LOST, 3, 2, 2)
    assert h.aux >= 3 * WAIT_US
    # member 3 is out: its frames are ignored from now on
    assert tx(nic, LANP, H(TokenMsg.GRAD, sender=3, batch=0, frag=0), MACS[2]) == []
    assert _drops(nic, 2) == 1
    # until it rejoins (and holds the token again: this NIC, holding it, names it)
    tx(nic, LANP, H(TokenMsg.REJOIN, sender=1, member=3), MACS[0])
    out = tx(nic, HOST, H(TokenMsg.PASS, sender=2, pass_no=2), MACS[1])
    assert out[0][1].next_holder == 3
    assert tx(nic, LANP, H(TokenMsg.GRAD, sender=3, batch=0, frag=0), MACS[2]) == []
    _got, bitmap = _read(nic, 0, 0)
    assert bitmap == 0b1000


def test_config_sets_one_resend_before_the_wait_for_node_lost(nic: Switch) -> None:
    """CONFIG's ``member`` = 1 (``--resends 1``, the method's single re-send): after the
    one RESEND_DUE the NIC asks no more, and NODE_LOST follows d*t after the re-send."""
    assert tx(nic, HOST, H(TokenMsg.CONFIG, aux=WAIT_US, member=1), MACS[1]) == []
    tx(nic, HOST, H(TokenMsg.PASS, sender=2, pass_no=1), MACS[1])
    time.sleep(WAIT_US / 1e6 + 0.05)
    out = tx(nic, HOST, H(TokenMsg.TICK), MACS[1])
    assert [h.msg_type for _p, h, _ in out] == [TokenMsg.RESEND_DUE]
    tx(nic, HOST, H(TokenMsg.PASS, sender=2, pass_no=1, flags=int(TokenFlags.RESEND)), MACS[1])
    t0 = time.monotonic()
    lost: list = []
    while not lost and time.monotonic() - t0 < 5:
        out = tx(nic, HOST, H(TokenMsg.TICK), MACS[1])
        assert [h.msg_type for _p, h, _ in out] != [TokenMsg.RESEND_DUE]  # one re-send only
        lost = out
        time.sleep(0.02)
    waited = time.monotonic() - t0
    h = lost[0][1]
    assert (h.msg_type, h.member, h.sender) == (TokenMsg.NODE_LOST, 3, 2)
    # member 2 is d = 3 positions after member 3: 3t after the re-send, not 3t after a third
    assert 3 * WAIT_US <= h.aux < 4 * WAIT_US and waited >= 3 * WAIT_US / 1e6
    assert _counter(nic, "NicIngress.membership.member_events", 4) == 1  # RESEND_DUE once


def test_lan_switch_floods_broadcasts_and_forwards_unicast() -> None:
    sw = Switch()
    sw.install_program(sw.load_program(LAN.read_bytes()))
    for p in (1, 2, 3):
        sw.pre.set_group(p, [Replica(q, 0) for q in (1, 2, 3) if q != p], create=True)
    bcast = encode_token(H(TokenMsg.TOKEN, sender=1, next_holder=2), MACS[0])
    assert sorted(p for p, _ in sw.process(1, bcast)) == [2, 3]
    assert sorted(p for p, _ in sw.process(3, bcast)) == [1, 2]


def test_grad_from_a_non_holder_is_dropped_and_counted(nic: Switch) -> None:
    g = np.arange(TOKEN_VALUES, dtype=np.int32)
    # node 1 holds the token first: member 3's GRAD is dropped, from the LAN...
    assert tx(nic, LANP, H(TokenMsg.GRAD, sender=3, batch=0, frag=0), MACS[2], g) == []
    # ... and this NIC's own host's too
    assert tx(nic, HOST, H(TokenMsg.GRAD, sender=2, batch=0, frag=0), MACS[1], g) == []
    assert _acc_drops(nic, 4) == 2  # not_holder
    _got, bitmap = _read(nic, 0, 0)
    assert bitmap == 0
    # once the token names member 3, its GRAD is added
    _give_token(nic, 3)
    assert tx(nic, LANP, H(TokenMsg.GRAD, sender=3, batch=0, frag=0), MACS[2], g) == []
    got, bitmap = _read(nic, 0, 0)
    assert bitmap == 0b1000 and np.array_equal(got, g)
    # a host never sends a TOKEN itself: the NIC drops it (host_token)
    assert tx(nic, HOST, H(TokenMsg.TOKEN, sender=2, next_holder=4), MACS[1]) == []
    assert _drops(nic, 7) == 1


def test_the_nic_emits_the_token_from_its_roster(nic: Switch) -> None:
    out = tx(nic, HOST, H(TokenMsg.PASS, sender=2, batch=3, pass_no=7, bitmap=0b110, aux=5), MACS[1])
    assert sorted(p for p, *_ in out) == [HOST, LANP]
    h = out[0][1]
    assert (h.msg_type, h.sender, h.next_holder, h.batch, h.pass_no, h.bitmap, h.aux) == \
        (TokenMsg.TOKEN, 2, 3, 3, 7, 0b110, 5)
    # member 3 leaves (NODE_LOST by member 4, who then holds the token and passes to 1)
    tx(nic, LANP, H(TokenMsg.NODE_LOST, sender=4, member=3, next_holder=4), MACS[3])
    tx(nic, LANP, H(TokenMsg.TOKEN, sender=4, next_holder=1, pass_no=8), MACS[3])
    tx(nic, LANP, H(TokenMsg.TOKEN, sender=1, next_holder=2, pass_no=9), MACS[0])
    out = tx(nic, HOST, H(TokenMsg.PASS, sender=2, pass_no=10), MACS[1])
    assert out[0][1].next_holder == 4  # member 3 is skipped
    # the emitted token is on the wire with the NIC's own MAC
    frames = nic.process(HOST, encode_token(H(TokenMsg.PASS, sender=2, pass_no=11), MACS[1]))
    _d, src, _h, _r = decode_token(frames[0][1])
    assert src == MACS[1]


def test_lost_fragments_are_detected_and_asked_for(nic: Switch) -> None:
    rng = np.random.default_rng(3)
    g = rng.integers(-2**20, 2**20, (5, TOKEN_VALUES)).astype(np.int32)
    # member 1 holds the token and broadcasts 5 fragments; 1 and 3 and 4 are lost
    assert tx(nic, LANP, H(TokenMsg.GRAD, sender=1, batch=0, frag=0, nfrags=5), MACS[0], g[0]) == []
    out = tx(nic, LANP, H(TokenMsg.GRAD, sender=1, batch=0, frag=2, nfrags=5), MACS[0], g[2])
    # the gap: fragment 2 added, the frame turned into this NIC's NACK for [1, 2)
    assert len(out) == 1 and out[0][0] == LANP
    h = out[0][1]
    assert (h.msg_type, h.sender, h.member, h.batch, h.frag, h.nfrags) == (TokenMsg.NACK, 2, 1, 0, 1, 2)
    # the tail: member 1's TOKEN says 5 fragments; the host gets the token, the LAN a NACK
    out = tx(nic, LANP, H(TokenMsg.TOKEN, sender=1, next_holder=2, batch=0, nfrags=5, pass_no=1), MACS[0])
    by_port = {p: h for p, h, _ in out}
    assert by_port[HOST].msg_type == TokenMsg.TOKEN
    nack = by_port[LANP]
    assert (nack.msg_type, nack.sender, nack.member, nack.batch, nack.nfrags) == (TokenMsg.NACK, 2, 1, 0, 5)
    assert nack.frag == 3  # the hole (1) was NACKed already: only the tail [3, 5)
    # member 1 re-sends (flag RESEND; it no longer holds the token): the holes are filled,
    # what was there already is not added twice
    for f in range(5):
        tx(nic, LANP, H(TokenMsg.GRAD, sender=1, batch=0, frag=f, nfrags=5, flags=int(TokenFlags.RESEND)),
           MACS[0], g[f])
    for f in range(5):
        got, bitmap = _read(nic, 0, f)
        assert bitmap == 0b10 and np.array_equal(got, g[f])
    assert _counter(nic, "NicIngress.accumulator.acc_events", 6) == 3  # repaired
    # a TOKEN from a member none of whose fragments arrived here: all of them are asked for
    out = tx(nic, LANP, H(TokenMsg.TOKEN, sender=3, next_holder=4, batch=0, nfrags=2, pass_no=3), MACS[2])
    nack = {p: h for p, h, _ in out}[LANP]
    assert (nack.msg_type, nack.member, nack.frag, nack.nfrags) == (TokenMsg.NACK, 3, 0, 2)
    # a NACK naming this NIC's host goes to the host; one naming another member stops here
    out = tx(nic, LANP, H(TokenMsg.NACK, sender=3, member=2, batch=0, frag=0, nfrags=1), MACS[2])
    assert [p for p, *_ in out] == [HOST]
    assert tx(nic, LANP, H(TokenMsg.NACK, sender=3, member=4, batch=0, frag=0, nfrags=1), MACS[2]) == []


def test_only_the_initiator_sends_the_roster() -> None:
    sw = Switch()
    sw.install_program(sw.load_program(NIC.read_bytes()))
    sw.pre.set_group(1, [Replica(HOST, 0), Replica(LANP, 0)], create=True)
    tx(sw, HOST, H(TokenMsg.CONFIG, aux=WAIT_US), MACS[1])
    tx(sw, LANP, H(TokenMsg.FORM_START, sender=1), MACS[0])
    # a forged ROSTER LAST (and FORM_START) from another LAN host: dropped, counted
    forged = H(TokenMsg.ROSTER, sender=1, member=1, mac=INTRUDER, count=1, flags=int(TokenFlags.LAST))
    assert tx(sw, LANP, forged, INTRUDER) == []
    assert tx(sw, LANP, H(TokenMsg.FORM_START, sender=1), INTRUDER) == []
    assert _drops(sw, 6) == 2  # formation_source
    # formation is still open: the real roster closes it, and repeats of it are taken
    for _ in range(2):
        for i, mac in enumerate(MACS, start=1):
            flags = int(TokenFlags.LAST) if i == len(MACS) else 0
            out = tx(sw, LANP, H(TokenMsg.ROSTER, sender=1, member=i, mac=mac, count=4, flags=flags), MACS[0])
            assert [p for p, *_ in out] == [HOST]
    assert tx(sw, LANP, H(TokenMsg.FORM_REPLY), INTRUDER) == []
    assert _drops(sw, 3) == 1  # formation_closed
    out = tx(sw, HOST, H(TokenMsg.PASS, sender=2), MACS[1])
    assert out[0][1].next_holder == 3


def test_two_declarations_of_the_same_loss_the_nearest_declarer_wins(nic: Switch) -> None:
    # member 3 is declared lost twice: by member 1 (2 positions after it) and by member 4
    # (1 position after it); whatever the order, every NIC ends with member 4 holding
    tx(nic, LANP, H(TokenMsg.NODE_LOST, sender=1, member=3, next_holder=1), MACS[0])
    out = tx(nic, LANP, H(TokenMsg.NODE_LOST, sender=4, member=3, next_holder=4), MACS[3])
    assert [p for p, *_ in out] == [HOST]  # the nearer one is taken
    g = np.ones(TOKEN_VALUES, dtype=np.int32)
    tx(nic, LANP, H(TokenMsg.GRAD, sender=1, batch=0, frag=0), MACS[0], g)
    assert _acc_drops(nic, 4) == 1  # member 1 no longer holds the token
    # the other order, on a NIC that saw member 4's declaration first: member 1's is dropped
    sw = _fresh_nic()
    tx(sw, LANP, H(TokenMsg.NODE_LOST, sender=4, member=3, next_holder=4), MACS[3])
    assert tx(sw, LANP, H(TokenMsg.NODE_LOST, sender=1, member=3, next_holder=1), MACS[0]) == []
    assert _drops(sw, 8) == 1  # lost_tie
    tx(sw, LANP, H(TokenMsg.GRAD, sender=4, batch=0, frag=0), MACS[3], g)
    _got, bitmap = _read(sw, 0, 0)
    assert bitmap == 0b10000


def _fresh_nic() -> Switch:
    sw = Switch()
    sw.install_program(sw.load_program(NIC.read_bytes()))
    sw.pre.set_group(1, [Replica(HOST, 0), Replica(LANP, 0)], create=True)
    tx(sw, HOST, H(TokenMsg.CONFIG, aux=WAIT_US), MACS[1])
    tx(sw, LANP, H(TokenMsg.FORM_START, sender=1), MACS[0])
    for i, mac in enumerate(MACS, start=1):
        flags = int(TokenFlags.LAST) if i == len(MACS) else 0
        tx(sw, LANP, H(TokenMsg.ROSTER, sender=1, member=i, mac=mac, count=4, flags=flags), MACS[0])
    return sw
