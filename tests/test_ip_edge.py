"""Only what the parser read whole is forwarded (docs/trust.md, "IP: only what the switch
parsed"), in process on the embedded target.

An IPv4 packet with options (IHL != 5) or an IP fragment (MF set or offset != 0) carries
a UDP datagram the parser never reads, while the receiving kernel strips the options or
reassembles the fragments and delivers it. ``forward.p4`` and ``ina.p4`` drop such
packets on every port and count them in ``ingress_drops`` (``ip_options``,
``ip_fragment``); an INA packet among them never reaches admission or the aggregators.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP, IPOption, fragment
from scapy.layers.l2 import Ether

from controller.forward import DROP_REASONS
from targets.embedded.state import TableEntry
from targets.embedded.switch import Switch
from wire.ina import INA_UDP_PORT, INA_VALUES, MsgType

BUILD = Path(__file__).resolve().parent.parent / "p4src" / "build"
ROUTES = "MyIngress.forwarding.ipv4_routes"
DROPS = "MyIngress.forwarding.ingress_drops"
ADMISSION = "MyIngress.admission.ina_admission_drops"
FABRIC = "MyIngress.admission.ina_fabric_ports"
HOST_PORT, FABRIC_PORT, OUT_PORT = 1, 3, 2
REASON = {name: i for i, name in DROP_REASONS.items()}


def _switch(program: str) -> Switch:
    sw = Switch(seed=1)
    sw.install_program(sw.load_program((BUILD / f"{program}.json").read_bytes()))
    p = sw.program
    p.tables[ROUTES].insert(TableEntry(((0x0A000002, 32),), p.action_call(
        ROUTES, "MyIngress.forwarding.set_next_hop", (0x020000000002, OUT_PORT))))
    if program == "ina":  # port 3 faces a switch: admission trusts it
        p.tables[FABRIC].insert(TableEntry((FABRIC_PORT,), p.action_call(
            FABRIC, "MyIngress.admission.fabric_port", ())))
    return sw


def _result(**ip: object) -> IP:
    """A RESULT spoofing a PS at 10.0.0.1 to a worker at 10.0.0.2 (values all 12345)."""
    from wire.scapy_layers import INA, INAValues

    return (IP(src="10.0.0.1", dst="10.0.0.2", ttl=64, **ip)
            / UDP(sport=INA_UDP_PORT, dport=INA_UDP_PORT)
            / INA(msg_type=int(MsgType.RESULT), job_id=1, fragment=0, bitmap=0b1111, count=4)
            / INAValues(values=[12345] * INA_VALUES))


def _eth(ip: IP) -> bytes:
    return bytes(Ether(src="00:00:0a:00:00:09", dst="02:00:00:01:00:01") / ip)


def _drops(sw: Switch, name: str) -> int:
    return sw.program.counters[DROPS].read(REASON[name])[0]


@pytest.mark.parametrize("program", ["forward", "ina"])
@pytest.mark.parametrize("port", [HOST_PORT, FABRIC_PORT], ids=["host-port", "fabric-port"])
def test_options_and_fragments_are_dropped_and_counted(program: str, port: int) -> None:
    """A RESULT with a 4-byte option, and the same RESULT as three fragments (the first
    one with the whole INA header), are dropped on a host port and on a switch-facing
    port alike, each frame counted once; the same RESULT whole is forwarded from a
    switch-facing port (and, on ina.p4, refused by admission from a host port)."""
    sw = _switch(program)
    assert sw.process(port, _eth(_result(options=[IPOption(b"\x01\x01\x01\x01")]))) == []
    assert _drops(sw, "ip_options") == 1
    frags = fragment(_result(), fragsize=128)
    assert len(frags) == 3 and frags[0].flags.MF and frags[0].frag == 0
    for f in frags:
        assert sw.process(port, _eth(f)) == []
    assert _drops(sw, "ip_fragment") == 3
    whole = sw.process(port, _eth(_result()))
    if program == "ina":
        admitted = sum(sw.program.counters[ADMISSION].read(i)[0] for i in range(8))
        assert (admitted, len(whole)) == ((1, 0) if port == HOST_PORT else (0, 1))
    else:
        assert [p for p, _ in whole] == [OUT_PORT]
    assert sw.stats.errors == 0


@pytest.mark.parametrize("program", ["forward", "ina"])
def test_short_ihl_and_df_are_as_before(program: str) -> None:
    """IHL < 5 is refused as options are; DF alone (what TCP sends) is no fragment."""
    sw = _switch(program)
    raw = bytearray(_eth(IP(src="10.0.0.9", dst="10.0.0.2", ttl=64) / UDP(dport=5000) / (b"x" * 8)))
    raw[14] = 0x44  # version 4, IHL 4
    assert sw.process(HOST_PORT, bytes(raw)) == []
    assert _drops(sw, "ip_options") == 1
    df = _eth(IP(src="10.0.0.9", dst="10.0.0.2", ttl=64, flags="DF") / UDP(dport=5000) / (b"x" * 8))
    assert [p for p, _ in sw.process(HOST_PORT, df)] == [OUT_PORT]
    assert _drops(sw, "ip_fragment") == 0


def test_forward_p4_drops_every_encoding_it_does_not_parse_whole() -> None:
    """The IP baselines' and differentiated blocks' program, ``forward.p4`` (no admission:
    the receivers check members): each encoding of ``tests/ina_forge.py`` that is no
    untagged IPv4 (tags, IPv6) is dropped and counted ``not_ipv4``, a bad IPv4 header
    checksum ``checksum_error``; the rest is routed: a whole IPv4/UDP datagram (forward.p4
    reads no INA header: a frame cut inside it is UDP payload whose IP total length the
    receiving kernel finds too long, and drops)."""
    from tests.ina_forge import ENCODINGS, build

    sw = _switch("forward")
    item = {"src_mac": "00:00:0a:00:00:09", "dst_mac": "02:00:00:01:00:01", "src_ip": "10.0.0.1",
            "dst_ip": "10.0.0.2", "values": [1] * INA_VALUES,
            "ina": {"msg_type": int(MsgType.RESULT), "job_id": 1, "fragment": 0, "bitmap": 3, "count": 2}}
    dropped = {"vlan0": "not_ipv4", "vlan5": "not_ipv4", "qinq": "not_ipv4", "ipv6": "not_ipv4",
               "ip_csum_bad": "checksum_error"}
    want = dict.fromkeys(DROP_REASONS.values(), 0)
    for enc in ENCODINGS:
        (frame,) = build({**item, "encoding": enc})
        out = sw.process(HOST_PORT, frame)
        if enc in dropped:
            want[dropped[enc]] += 1
            assert out == [], enc
        else:
            assert [p for p, _ in out] == [OUT_PORT], enc
    assert {n: _drops(sw, n) for n in want} == want
    assert sw.stats.errors == 0
