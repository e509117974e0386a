"""The compiled token NIC (p4src/build/nic.json) on each target: embedded and BMv2.

tests/test_token_nic.py drives the NIC in process (embedded target only); here the same
program runs as a switch process (``targets.testbed``: veth ports in a namespace, the
pipeline and the NIC's multicast group set over P4Runtime) on ``embedded`` always and
on ``bmv2`` when ``simple_switch_grpc`` is installed, and real frames go in and out:

* a GRAD from a member that does not hold the token is dropped and counted;
* the host's PASS becomes a TOKEN emitted by the NIC (next holder from its roster), to
  the host and the LAN;
* a gap in a broadcast and a short tail (the sender's TOKEN says how many fragments)
  each make the NIC send a NACK (the tail's through the multicast copy MyEgress rewrites:
  BMv2 must carry the ingress metadata into the replica);
* a forged ROSTER from another LAN host is dropped;
* with the initiator's MAC installed (``formation_openers``), an intruder's earlier
  FORM_START is dropped and the initiator's opens formation;
* the LAN switch (lan.json) with port security drops a frame whose source MAC is not its
  port's.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from finsy import P4CounterEntry, P4MulticastGroupEntry

from targets.launch import bmv2_available
from targets.p4rt_client import P4RuntimeClient
from targets.testbed import Testbed as SwitchTestbed
from wire.token import (
    TOKEN_VALUES,
    TokenFlags,
    TokenHeader,
    TokenMsg,
    decode_token,
    encode_token,
    mac_bytes,
)

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "p4src" / "build"
MACS = [mac_bytes(f"00:00:0a:00:00:0{i}") for i in range(1, 5)]
INTRUDER = mac_bytes("00:00:0a:00:00:09")
HOST, LANP = 1, 2

pytestmark = [
    pytest.mark.net,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, veth pairs)"),
]


def H(msg: TokenMsg, **kw: object) -> TokenHeader:  # noqa: N802
    return TokenHeader(int(msg), **kw)


class NicRig:
    """nic.json on one target, formed as member 2 of members 1..4 (opened by member 1)."""

    def __init__(self, target: str) -> None:
        self.tb = SwitchTestbed(2, target=target, json_path=str(BUILD / "nic.json"))
        self.client: P4RuntimeClient | None = None

    def start(self) -> NicRig:
        self.tb.start()
        self.client = P4RuntimeClient(self.tb.grpc_addr, device_id=self.tb.device_id)
        self.client.set_pipeline(BUILD / "nic.p4info.txt", BUILD / "nic.json")
        self.client.write(+P4MulticastGroupEntry(1, replicas=[(HOST, 0), (LANP, 0)]))
        self.send(HOST, H(TokenMsg.CONFIG, aux=300_000), MACS[1], n=0)
        self.send(LANP, H(TokenMsg.FORM_START, sender=1), MACS[0], n=1)
        for i, mac in enumerate(MACS, start=1):
            flags = int(TokenFlags.LAST) if i == len(MACS) else 0
            self.send(LANP, H(TokenMsg.ROSTER, sender=1, member=i, mac=mac, count=4, flags=flags), MACS[0], n=1)
        return self

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
        self.tb.stop()
        shutil.rmtree(self.tb.dir, ignore_errors=True)

    def send(self, port: int, hdr: TokenHeader, src: bytes, values: object = None, n: int = 0
             ) -> list[tuple[int, TokenHeader]]:
        """One frame into ``port``; the ``n`` frames expected out (0: listen for a drop)."""
        self.tb.drain()
        self.tb.send(port, encode_token(hdr, src, values=values))
        out: list[tuple[int, TokenHeader]] = []
        end = time.monotonic() + (3.0 if n else 0.3)
        while time.monotonic() < end and (n == 0 or len(out) < n):
            for p in (HOST, LANP):
                frame = self.tb.recv(p, timeout=0.02)
                if frame is not None:
                    out.append((p, decode_token(frame)[2]))
        if n:  # anything beyond the expected ones
            for p, frames in self.tb.recv_all(0.1).items():
                out += [(p, decode_token(f)[2]) for f in frames]
        return out

    def counter(self, name: str, index: int) -> int:
        assert self.client is not None
        (entry,) = self.client.read(P4CounterEntry(name, index=index))
        return int(entry.data.packet_count)


TARGETS = ["embedded", pytest.param("bmv2", marks=pytest.mark.skipif(
    not bmv2_available(), reason="BMv2 (simple_switch_grpc) is not installed"))]


@pytest.fixture(params=TARGETS)
def rig(request: pytest.FixtureRequest) -> Iterator[NicRig]:
    r = NicRig(request.param)
    try:
        yield r.start()
    finally:
        r.close()


def test_token_nic_on_the_target(rig: NicRig) -> None:
    g = np.arange(TOKEN_VALUES, dtype=np.int32)
    # a forged ROSTER LAST from another LAN host (formation is not closed to the opener
    # yet: its roster may be repeated): dropped, counted (formation_source)
    forged = H(TokenMsg.ROSTER, sender=1, member=1, mac=INTRUDER, count=1, flags=int(TokenFlags.LAST))
    assert rig.send(LANP, forged, INTRUDER) == []
    assert rig.counter("NicIngress.membership.member_drops", 6) == 1
    # a GRAD from member 3, which does not hold the token (node 1 does): dropped, counted
    assert rig.send(LANP, H(TokenMsg.GRAD, sender=3, batch=0, frag=0, nfrags=3), MACS[2], g) == []
    assert rig.counter("NicIngress.accumulator.acc_drops", 4) == 1  # not_holder
    # the host passes: the NIC emits the TOKEN naming member 3, to the host and the LAN
    out = rig.send(HOST, H(TokenMsg.PASS, sender=2, batch=0, pass_no=1), MACS[1], n=2)
    assert sorted(p for p, _ in out) == [HOST, LANP]
    assert all((h.msg_type, h.sender, h.next_holder) == (TokenMsg.TOKEN, 2, 3) for _, h in out)
    # member 3 broadcasts fragments 0 and 2 (1 lost): the NIC turns 2 into a NACK for [1, 2)
    assert rig.send(LANP, H(TokenMsg.GRAD, sender=3, batch=0, frag=0, nfrags=4), MACS[2], g) == []
    out = rig.send(LANP, H(TokenMsg.GRAD, sender=3, batch=0, frag=2, nfrags=4), MACS[2], g, n=1)
    assert [(p, h.msg_type, h.member, h.frag, h.nfrags) for p, h in out] == [(LANP, TokenMsg.NACK, 3, 1, 2)]
    # member 3's TOKEN says 4 fragments (3 lost too): TOKEN to the host, NACK to the LAN
    out = rig.send(LANP, H(TokenMsg.TOKEN, sender=3, next_holder=4, batch=0, pass_no=2, nfrags=4),
                   MACS[2], n=2)
    by_port = {p: h for p, h in out}
    assert sorted(by_port) == [HOST, LANP]
    assert by_port[HOST].msg_type == TokenMsg.TOKEN
    nack = by_port[LANP]
    assert (nack.msg_type, nack.sender, nack.member, nack.batch, nack.frag, nack.nfrags) == \
        (TokenMsg.NACK, 2, 3, 0, 3, 4)  # the hole (1) was NACKed already: the tail only
    # the re-sends fill the holes (accepted: a NACK was seen), the rest is not added twice
    for f in (1, 3):
        rig.send(LANP, H(TokenMsg.GRAD, sender=3, batch=0, frag=f, nfrags=4, flags=int(TokenFlags.RESEND)),
                 MACS[2], g)
    assert rig.counter("NicIngress.accumulator.acc_events", 6) == 2  # repaired
    for f in range(4):
        out = rig.send(HOST, H(TokenMsg.READ, batch=0, frag=f), MACS[1], n=1)
        assert [(p, h.msg_type, h.bitmap) for p, h in out] == [(HOST, TokenMsg.READ_REPLY, 0b1000)]
    # once training runs, the roster is closed to everyone
    assert rig.send(LANP, H(TokenMsg.ROSTER, sender=1, member=1, mac=INTRUDER, count=1), MACS[0]) == []
    assert rig.counter("NicIngress.membership.member_drops", 3) == 1  # formation_closed


@pytest.mark.parametrize("target", TARGETS)
def test_controller_named_opener_refuses_an_earlier_intruder(target: str) -> None:
    """With the initiator's MAC installed (formation_openers, as TokenDeployment does), a
    FORM_START from another LAN host that comes first is dropped and counted, and the
    real initiator's opens formation (without the entry, the first one would have won)."""
    from finsy import P4TableAction, P4TableEntry, P4TableMatch

    tb = SwitchTestbed(2, target=target, json_path=str(BUILD / "nic.json"))
    rig = NicRig(target)
    rig.tb = tb
    try:
        tb.start()
        rig.client = P4RuntimeClient(tb.grpc_addr, device_id=tb.device_id)
        rig.client.set_pipeline(BUILD / "nic.p4info.txt", BUILD / "nic.json")
        table = "NicIngress.membership.formation_openers"
        rig.client.write(+P4MulticastGroupEntry(1, replicas=[(HOST, 0), (LANP, 0)]))
        rig.client.write(+P4TableEntry(table, match=P4TableMatch({"hdr.ethernet.src_addr": "00:00:0a:00:00:01"}),
                                       action=P4TableAction("NicIngress.membership.opener")))
        rig.client.write(~P4TableEntry(table, action=P4TableAction("NicIngress.membership.not_opener"),
                                       is_default_action=True))
        rig.send(HOST, H(TokenMsg.CONFIG, aux=300_000), MACS[1], n=0)
        assert rig.send(LANP, H(TokenMsg.FORM_START, sender=1), INTRUDER) == []
        assert rig.counter("NicIngress.membership.member_drops", 6) == 1  # formation_source
        out = rig.send(LANP, H(TokenMsg.FORM_START, sender=1), MACS[0], n=1)
        assert [(p, h.msg_type) for p, h in out] == [(HOST, TokenMsg.FORM_START)]
        forged = H(TokenMsg.ROSTER, sender=1, member=1, mac=INTRUDER, count=1, flags=int(TokenFlags.LAST))
        assert rig.send(LANP, forged, INTRUDER) == []
        assert rig.counter("NicIngress.membership.member_drops", 6) == 2
    finally:
        rig.close()


@pytest.mark.parametrize("target", TARGETS)
def test_lan_switch_refuses_a_source_mac_not_behind_its_port(target: str) -> None:
    """lan.json with port security as TokenDeployment installs it: a frame from port 1
    carrying port 2's MAC is dropped and counted; one with port 1's own MAC is flooded."""
    from finsy import P4TableAction, P4TableEntry, P4TableMatch

    tb = SwitchTestbed(2, target=target, json_path=str(BUILD / "lan.json"))
    client = None
    try:
        tb.start()
        client = P4RuntimeClient(tb.grpc_addr, device_id=tb.device_id)
        client.set_pipeline(BUILD / "lan.p4info.txt", BUILD / "lan.json")
        client.write(+P4MulticastGroupEntry(1, replicas=[(2, 0)]))
        client.write(+P4MulticastGroupEntry(2, replicas=[(1, 0)]))
        table = "LanIngress.lan.port_sources"
        for port, mac in ((1, "00:00:0a:00:00:01"), (2, "00:00:0a:00:00:02")):
            client.write(+P4TableEntry(table, match=P4TableMatch(
                {"standard_metadata.ingress_port": port, "hdr.ethernet.src_addr": mac}),
                action=P4TableAction("LanIngress.lan.source_ok")))
        client.write(~P4TableEntry(table, action=P4TableAction("LanIngress.lan.wrong_source"),
                                   is_default_action=True))
        frame = encode_token(H(TokenMsg.TOKEN, sender=2, next_holder=1), MACS[1])  # port 2's MAC
        tb.drain()
        tb.send(1, frame)
        assert tb.recv(2, timeout=0.5) is None
        (entry,) = client.read(P4CounterEntry("LanIngress.lan.lan_source_drops", index=1))
        assert entry.data.packet_count == 1
        tb.send(1, encode_token(H(TokenMsg.TOKEN, sender=1, next_holder=2), MACS[0]))
        assert tb.recv(2, timeout=3.0) is not None
    finally:
        if client is not None:
            client.close()
        tb.stop()
        shutil.rmtree(tb.dir, ignore_errors=True)


def test_tagged_frames_are_dropped_both_ways(rig: NicRig) -> None:
    """An 802.1Q/802.1ad-tagged token frame (VID 0, VID 5, two tags) is not the protocol
    to the NIC's parser, yet the host's kernel strips the tag and hands it to the node's
    0x88B5 socket (tests/test_kernel_delivery.py): the NIC drops every tagged frame, from
    the LAN and from the host, and counts it (``tagged``); the same frame untagged from
    the LAN reaches the host."""
    tok = H(TokenMsg.TOKEN, sender=1, next_holder=2, batch=0, pass_no=1)
    frame = encode_token(tok, MACS[0])
    n = 0
    for tags in ([(0x8100, 0)], [(0x8100, 5)], [(0x88A8, 0), (0x8100, 0)]):
        tagged = frame[:12] + b"".join(t.to_bytes(2, "big") + v.to_bytes(2, "big") for t, v in tags) \
            + frame[12:]
        for port in (LANP, HOST):
            rig.tb.drain()
            rig.tb.send(port, tagged)
            n += 1
            assert not any(rig.tb.recv_all(0.3).values()), (tags, port)
    assert rig.counter("NicIngress.membership.member_drops", 9) == n  # tagged
    out = rig.send(LANP, tok, MACS[0], n=1)
    assert (HOST, TokenMsg.TOKEN) in [(p, h.msg_type) for p, h in out]
