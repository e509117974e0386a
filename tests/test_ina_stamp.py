"""The job's admission stamp (docs/trust.md, "INA: admitted packets carry the job's
stamp"), in process on the embedded target and in the agents' code.

``ina.p4``'s admission writes the stamp of an admitted member's GRAD or PS packet into
``worker_id`` and updates the UDP checksum so that the receiving kernel still takes it;
what arrives on a switch-facing port keeps its stamp; a refused packet never leaves.
The agents' policy carries the stamp, and :func:`hosts.ina.stamp.admitted` is their
check. The network test is ``tests/test_ina_outsiders.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from hosts.ina.stamp import admitted, policy_stamp
from targets.embedded.state import TableEntry
from targets.embedded.switch import Switch
from wire.ina import INA_HEADER, INA_UDP_PORT, INA_VALUES, MsgType
from wire.ina_policy import Policy, PolicyError

BUILD = Path(__file__).resolve().parent.parent / "p4src" / "build"
A = "MyIngress.admission."
ROUTES = "MyIngress.forwarding.ipv4_routes"
HOST_PORT, OUT_PORT, FABRIC_PORT = 1, 2, 3
STAMP = 0xBEEF


def _switch() -> Switch:
    sw = Switch(seed=1)
    sw.install_program(sw.load_program((BUILD / "ina.json").read_bytes()))
    p = sw.program
    for dst in (0x0A000001, 0x0A000002):
        p.tables[ROUTES].insert(TableEntry(((dst, 32),), p.action_call(
            ROUTES, "MyIngress.forwarding.set_next_hop", (0x020000000002, OUT_PORT))))
    p.tables[A + "ina_fabric_ports"].insert(TableEntry((FABRIC_PORT,), p.action_call(
        A + "ina_fabric_ports", A + "fabric_port", ())))
    # rank 1 of job 7 at 10.0.0.3 on port 1; job 7's PS at 10.0.0.9 on port 1
    p.tables[A + "ina_members"].insert(TableEntry((HOST_PORT, 0x0A000003, 7, 1), p.action_call(
        A + "ina_members", A + "member", (1 << 1, STAMP))))
    p.tables[A + "ina_servers"].insert(TableEntry((HOST_PORT, 0x0A000009, 7), p.action_call(
        A + "ina_servers", A + "job_server", (STAMP,))))
    return sw


def _packet(src: str, dst: str, msg: MsgType, worker_id: int, chksum: int | None = None) -> bytes:
    from wire.scapy_layers import INA, INAValues

    udp = UDP(sport=INA_UDP_PORT, dport=INA_UDP_PORT)
    if chksum is not None:
        udp.chksum = chksum
    bm = 0b10 if msg == MsgType.GRAD else 0b11
    return bytes(Ether(src="00:00:0a:00:00:03", dst="02:00:00:01:00:01")
                 / IP(src=src, dst=dst, ttl=64) / udp
                 / INA(msg_type=int(msg), job_id=7, worker_id=worker_id, fragment=5, tag=0,
                       bitmap=bm, count=bin(bm).count("1"))
                 / INAValues(values=list(range(INA_VALUES))))


def _out(sw: Switch, port: int, frame: bytes) -> bytes | None:
    outs = sw.process(port, frame)
    return outs[0][1] if outs else None


def _udp_ok(frame: bytes) -> bool:
    """The UDP checksum as a receiving kernel checks it (0: none)."""
    pkt = Ether(frame)
    got = pkt[UDP].chksum
    if got == 0:
        return True
    del pkt[UDP].chksum
    return Ether(bytes(pkt))[UDP].chksum == got


@pytest.mark.parametrize("msg,src", [(MsgType.GRAD, "10.0.0.3"), (MsgType.RESULT, "10.0.0.9")],
                         ids=["member-grad", "ps-result"])
@pytest.mark.parametrize("chksum", [None, 0], ids=["udp-checksum", "no-checksum"])
def test_admitted_packets_leave_stamped_with_a_valid_checksum(msg: MsgType, src: str,
                                                              chksum: int | None) -> None:
    sw = _switch()
    dst = "10.0.0.2" if msg == MsgType.RESULT else "10.0.0.1"
    frame = _packet(src, dst, msg, 1, chksum)
    out = _out(sw, HOST_PORT, frame)
    assert out is not None
    assert INA_HEADER.unpack_from(bytes(Ether(out)[UDP].payload))[2] == STAMP
    assert _udp_ok(out)
    assert (Ether(out)[UDP].chksum == 0) == (chksum == 0)  # no checksum stays none


def test_fabric_ports_keep_the_stamp_and_refused_packets_never_leave() -> None:
    sw = _switch()
    # from a switch-facing port: admitted upstream, forwarded as it is
    out = _out(sw, FABRIC_PORT, _packet("10.0.0.3", "10.0.0.1", MsgType.GRAD, STAMP))
    assert out is not None and INA_HEADER.unpack_from(bytes(Ether(out)[UDP].payload))[2] == STAMP
    # an outsider guessing the stamp from a host port: refused, nothing leaves
    assert _out(sw, HOST_PORT, _packet("10.0.0.66", "10.0.0.1", MsgType.GRAD, STAMP)) is None
    assert _out(sw, HOST_PORT, _packet("10.0.0.66", "10.0.0.2", MsgType.RESULT, STAMP)) is None


def test_the_udp_checksum_update_covers_every_stamp() -> None:
    """Incremental update (RFC 1624) against a full recomputation, for stamps and
    original worker ids at the edges of ones' complement arithmetic."""
    sw = _switch()
    for i, stamp in enumerate((1, 0x7FFF, 0xFFFE, 0xFFFF)):
        for wid in (0, 1, 0xFFFF):
            # a member at 10.0.0.(10+i) whose rank field is ``wid`` (the packet carries bit 1)
            sw.program.tables[A + "ina_members"].insert(TableEntry((HOST_PORT, 0x0A00000A + i, 7, wid),
                sw.program.action_call(A + "ina_members", A + "member", (0b10, stamp))))
            out = _out(sw, HOST_PORT, _packet(f"10.0.0.{10 + i}", "10.0.0.1", MsgType.GRAD, wid))
            assert out is not None, (stamp, wid)
            assert INA_HEADER.unpack_from(bytes(Ether(out)[UDP].payload))[2] == stamp
            assert _udp_ok(out), (stamp, wid)


def test_policy_carries_the_stamp_and_the_agents_check_it() -> None:
    base = {"version": 1, "job": 7, "ps": "10.0.0.9", "workers": ["10.0.0.3"],
            "num_fragments": 1, "tags": 0, "sd": None}
    assert policy_stamp(Policy.from_dict(base)) == 0
    pol = Policy.from_dict({**base, "stamp": STAMP})
    assert policy_stamp(pol) == STAMP and Policy.from_dict(pol.to_dict()).stamp == STAMP
    with pytest.raises(PolicyError, match="stamp"):
        Policy.from_dict({**base, "stamp": 70000})
    assert admitted(STAMP, STAMP) and not admitted(STAMP, 0) and not admitted(STAMP, 1)
    assert admitted(0, 12345)  # no stamp: unchecked
