"""Conformance models of cpu_io.p4, registers.p4 and l2_path.p4: packet-in/out and
digests, register read-add-writes, short frames bridged by MAC.
"""

from __future__ import annotations

import queue
from typing import Any

from finsy import (
    P4DigestEntry,
    P4MulticastGroupEntry,
    P4RegisterEntry,
    P4TableAction,
    P4TableEntry,
    P4TableMatch,
)
from scapy.layers.inet import IP, UDP, IPOption_EOL, IPOption_NOP
from scapy.layers.l2 import ARP, Ether

from targets.p4rt_client import P4RuntimeClient
from tests.conformance_rig import DST, M32, SRC, Case, Out, Rig, _eth, _ip
from tests.p4.packets import (
    RegisterHeavy,
)

# =========================================================================================
# cpu_io.p4
# =========================================================================================
MAC1, MAC2, MAC4 = "00:00:00:00:00:01", "00:00:00:00:00:02", "00:00:00:00:00:04"
BCAST = "ff:ff:ff:ff:ff:ff"
CPU_GROUP = [1, 2, 3]


def _mac_int(mac: str) -> int:
    return int(mac.replace(":", ""), 16)


def cpu_setup(rig: Rig) -> None:
    """Digests sent one by one at once, no ack cache; multicast group 1 for broadcast."""
    rig.write(+P4DigestEntry("mac_learn_digest_t", max_list_size=1, max_timeout_ns=0, ack_timeout_ns=0),
              +P4MulticastGroupEntry(1, replicas=CPU_GROUP))


def _l2(src: str, dst: str, tag: bytes) -> bytes:
    return bytes(Ether(src=src, dst=dst, type=0x88B6) / (tag + b"." * 30))


def _digest(client: P4RuntimeClient, timeout: float) -> list[tuple[int, ...]] | None:
    try:
        msg = client.digests.get(timeout=timeout)
    except queue.Empty:
        return None
    return [tuple(int.from_bytes(m.bitstring, "big") for m in d.struct.members) for d in msg.data]


def _packet_in(rig: Rig, timeout: float) -> tuple[bytes, dict[str, int]] | None:
    """The next PacketIn as (payload, {metadata name: value}), or None."""
    try:
        msg = rig.client.packet_ins.get(timeout=timeout)
    except queue.Empty:
        return None
    assert rig.client.schema is not None
    names = {m.id: m.name for m in rig.client.schema.controller_packet_metadata["packet_in"].metadata}
    return bytes(msg.payload), {names[m.metadata_id]: int.from_bytes(m.value, "big") for m in msg.metadata}


def cpu_flow(rig: Rig) -> list[tuple[str, Any]]:
    """The learning-switch scenario of cpu_io.p4's header comment; what each step gave:
    data-plane frames, PacketIns (payload, metadata) and digests."""
    c = rig.client
    obs: list[tuple[str, Any]] = []

    def step(name: str, port: int | None, frame: bytes, n: int, want_packet_in: bool, want_digest: bool) -> None:
        """Send ``frame`` into ``port`` (None: as a PacketOut to port 3); record what came."""
        if port is None:
            rig.tb.drain()
            c.packet_out(frame, egress_port=3, _pad=0)
            outs = rig.collect(n)
        else:
            outs = rig.exchange(port, frame, n)
        obs.append((f"{name}:data", sorted(outs)))
        obs.append((f"{name}:packet_in", _packet_in(rig, 3.0 if want_packet_in else 0.2)))
        obs.append((f"{name}:digest", _digest(c, 3.0 if want_digest else 0.2)))

    # 1. unknown source and destination: digest + packet-in, nothing on data ports
    step("unknown", 1, _l2(MAC1, MAC2, b"a"), 0, True, True)
    # 2. controller learns MAC1 -> port 1; reverse frame is forwarded, MAC2 digested
    rig.write(+P4TableEntry("dmac", match=P4TableMatch(dst_addr=MAC1), action=P4TableAction("forward", port=1)),
              +P4TableEntry("learned_macs", match=P4TableMatch(src_addr=MAC1), action=P4TableAction("NoAction")))
    step("forward", 2, _l2(MAC2, MAC1, b"b"), 1, False, True)
    # 3. learned source, unknown destination: packet-in only
    step("learned_src", 1, _l2(MAC1, MAC2, b"c"), 0, True, False)
    # 4. packet-out to port 3: the frame as given, no lookup
    step("packet_out", None, _l2(MAC4, MAC2, b"d"), 1, False, False)
    # 5. broadcast via multicast group 1
    rig.write(+P4TableEntry("dmac", match=P4TableMatch(dst_addr=BCAST), action=P4TableAction("set_mcast", group=1)))
    step("broadcast", 4, _l2(MAC4, BCAST, b"e"), len(CPU_GROUP), False, True)
    return obs


def cpu_expected() -> list[tuple[str, Any]]:
    """What ``cpu_flow`` must observe."""
    meta1 = {"ingress_port": 1, "_pad": 0}
    a, b, cc, d, e = (_l2(MAC1, MAC2, b"a"), _l2(MAC2, MAC1, b"b"), _l2(MAC1, MAC2, b"c"),
                      _l2(MAC4, MAC2, b"d"), _l2(MAC4, BCAST, b"e"))
    return [
        ("unknown:data", []), ("unknown:packet_in", (a, meta1)), ("unknown:digest", [(_mac_int(MAC1), 1)]),
        ("forward:data", [(1, b)]), ("forward:packet_in", None), ("forward:digest", [(_mac_int(MAC2), 2)]),
        ("learned_src:data", []), ("learned_src:packet_in", (cc, meta1)), ("learned_src:digest", None),
        ("packet_out:data", [(3, d)]), ("packet_out:packet_in", None), ("packet_out:digest", None),
        ("broadcast:data", sorted((p, e) for p in CPU_GROUP)), ("broadcast:packet_in", None),
        ("broadcast:digest", [(_mac_int(MAC4), 4)]),
    ]


# =========================================================================================
# registers.p4
# =========================================================================================
REG_FORWARD = {1: 2, 2: 1}
SLOTS = 1024
V = [(i * 0x9E3779B9 + 0x7F000000) & M32 for i in range(32)]
W = [(i * 1000003) & M32 for i in range(32)]


def registers_setup(rig: Rig) -> None:
    """port_forward 1 -> 2, 2 -> 1 (other ports: default drop)."""
    rig.write(*(+P4TableEntry("port_forward", match=P4TableMatch(ingress_port=i),
                              action=P4TableAction("set_egress_port", port=o)) for i, o in REG_FORWARD.items()))


def _agg(index: int, values: list[int], reset: int = 0, chksum: int | None = None, sport: int = 5000) -> bytes:
    return bytes(Ether(dst=DST, src=SRC) / _ip() / UDP(sport=sport, dport=40000, chksum=chksum)
                 / RegisterHeavy(index=index, reset=reset, values=values))


def _register_cases() -> list[Case]:
    """An ordered sequence; expected values from a model of the registers."""
    regs: dict[int, list[int]] = {}
    cases = []

    def agg(name: str, port: int, index: int, values: list[int], reset: int = 0) -> None:
        slot = index & (SLOTS - 1)
        old = regs.get(slot, [0] * 32)
        new = [0] * 32 if reset else [(o + v) & M32 for o, v in zip(old, values, strict=True)]
        regs[slot] = new
        out = REG_FORWARD.get(port)
        expect = [] if out is None else [(out, _agg(index, new, reset, chksum=0))]
        cases.append(Case(name, port, _agg(index, values, reset), expect))

    agg("slot7_first", 1, 7, V)
    agg("slot7_second_doubles", 2, 7, V)
    agg("slot7_alias_index_masked", 1, 7 + SLOTS, V)
    agg("slot8_independent", 1, 8, W)
    agg("slot7_reset", 1, 7, V, reset=1)
    agg("slot7_after_reset", 2, 7, W)
    agg("slot9_dropped_but_aggregated", 3, 9, W)
    agg("slot9_sees_dropped_packet", 1, 9, W)
    agg("slot_max_index", 2, M32, V)
    plain = bytes(Ether(dst=DST, src=SRC) / _ip() / UDP(sport=5000, dport=1234) / (b"\x01" * 40))
    cases.append(Case("plain_udp_forwarded", 1, plain, [(2, plain)]))
    v6 = bytes(Ether(dst=DST, src=SRC, type=0x86DD) / (b"\x60" + b"\x00" * 50))
    cases.append(Case("not_ipv4_forwarded", 2, v6, [(1, v6)]))
    opts = bytes(Ether(dst=DST, src=SRC) / _ip(options=[IPOption_NOP()] * 3 + [IPOption_EOL()])
                 / UDP(sport=1, dport=40000) / RegisterHeavy(index=7, values=V))
    cases.append(Case("ipv4_options_not_aggregated", 1, opts, [(2, opts)]))
    short = _agg(7, V)[:14 + 20 + 8 + 30]
    cases.append(Case("agg_truncated_forwarded_untouched", 1, short, [(2, short)]))
    cases.append(Case("port3_dropped", 3, plain, []))
    return cases


REG_CASES = _register_cases()


READBACK_SLOT = 100  # a slot the sequence does not use


def register_readback(rig: Rig) -> list[int]:
    """Aggregate V twice into slot 100 (from port 1, then port 2), then read agg_r05,
    agg_r31 and agg_r00 at that slot over P4Runtime (expected: 2 * V, mod 2^32)."""
    for port in (1, 2):
        assert len(rig.exchange(port, _agg(READBACK_SLOT, V), 1)) == 1
    out = []
    for reg in ("agg_r05", "agg_r31", "agg_r00"):
        (entry,) = rig.client.read(P4RegisterEntry(reg, index=READBACK_SLOT))
        out.append(int(entry.data))
    return out


# =========================================================================================
# l2_path.p4
# =========================================================================================
L2_DMAC = {DST: 2, BCAST: 4}     # dmac entries: destination MAC -> port
L2_DEFAULT_PORT = 3              # dmac's default action, forward(3), set over P4Runtime
L2_ROUTES = {"10.0.0.2": 1}      # ipv4_host: destination -> port (TTL - 1)
L2_SMAC_LOW = {2: 0x22, 3: 0x33}  # port_smac: egress_port -> new src_addr[7:0]
PACKET_TOO_SHORT = 1


def l2_setup(rig: Rig) -> None:
    """The entries of l2_path.p4's header comment; dmac's default becomes forward(3)."""
    ups: list[Any] = [+P4TableEntry("dmac", match=P4TableMatch(dst_addr=mac), action=P4TableAction("forward", port=p))
                      for mac, p in L2_DMAC.items()]
    ups += [+P4TableEntry("ipv4_host", match=P4TableMatch(dst_addr=ip), action=P4TableAction("route", port=p))
            for ip, p in L2_ROUTES.items()]
    ups += [+P4TableEntry("port_smac", match=P4TableMatch(egress_port=p), action=P4TableAction("rewrite_smac", low=v))
            for p, v in L2_SMAC_LOW.items()]
    rig.write(*ups)
    rig.write(~P4TableEntry("dmac", action=P4TableAction("forward", port=L2_DEFAULT_PORT), is_default_action=True))


def _l2_out(frame: bytes, in_port: int, out_port: int, error: int = 0) -> bytes:
    """What l2_path.p4's egress makes of a bridged ``frame`` (see its header comment)."""
    src = int.from_bytes(frame[6:12], "big")
    low = L2_SMAC_LOW.get(out_port, src & 0xFF)
    src = (src & 0xFF00_0000_0000) | (in_port & 0xFF) << 32 | len(frame) << 16 | error << 8 | low
    return frame[:6] + src.to_bytes(6, "big") + frame[12:]


def _l2_case(name: str, port: int, frame: bytes, error: int = 0) -> Case:
    dst = ":".join(f"{b:02x}" for b in frame[:6])
    out = L2_DMAC.get(dst, L2_DEFAULT_PORT)
    return Case(name, port, frame, [(out, _l2_out(frame, port, out, error))])


def _l2_cases() -> list[Case]:
    other = "02:00:00:00:00:99"
    udp = bytes(_ip(dst="10.0.0.9") / UDP(sport=7, dport=9) / (b"u" * 18))
    routed_in = bytes(Ether(dst=DST, src=SRC) / _ip(dst="10.0.0.2") / UDP(sport=7, dport=9) / b"routed")
    ip = IP(routed_in[14:34])
    ip.ttl, ip.chksum = 63, None
    routed_out = _l2_out(routed_in[:14] + bytes(ip) + routed_in[34:], 2, L2_ROUTES["10.0.0.2"])
    return [
        _l2_case("arp_request_broadcast", 1, bytes(Ether(dst=BCAST, src=SRC) / ARP(pdst="10.0.0.2"))),
        _l2_case("arp_reply_known_dst", 3, bytes(Ether(dst=DST, src=SRC) / ARP(op=2))),
        _l2_case("arp_unknown_dst_default_action", 2, bytes(Ether(dst=other, src=SRC) / ARP(op=2))),
        _l2_case("unknown_ethertype", 1, _eth(0x9000) + b"raw-frame" * 5),
        _l2_case("unknown_ethertype_default_action", 4, _eth(0x9000, dst=other) + b"x" * 46),
        _l2_case("ipv6_frame", 1, _eth(0x86DD) + b"\x60" + b"\x00" * 39),
        _l2_case("vlan_tagged", 2, _eth(0x8100) + b"\x00\x05\x08\x00" + udp),
        _l2_case("ethernet_header_only_14_bytes", 1, _eth(0x9000)),
        _l2_case("ethernet_header_only_default_action", 2, _eth(0x88CC, dst=other)),
        _l2_case("ipv4_type_14_bytes_parser_error", 1, _eth(0x0800), PACKET_TOO_SHORT),
        _l2_case("ipv4_truncated_10_bytes", 3, _eth(0x0800) + udp[:10], PACKET_TOO_SHORT),
        _l2_case("ipv4_truncated_19_bytes_default_action", 4, _eth(0x0800, dst=other) + udp[:19], PACKET_TOO_SHORT),
        _l2_case("ipv4_exactly_20_bytes_bridged", 1, _eth(0x0800) + udp[:20]),
        _l2_case("ipv4_no_route_bridged", 2, _eth(0x0800) + udp),
        Case("ipv4_routed_ttl_and_checksum", 2, routed_in, [(L2_ROUTES["10.0.0.2"], routed_out)]),
    ]


def l2_default_drop(rig: Rig) -> list[list[Out]]:
    """dmac's default set to drop() (the program's own default) drops an unknown
    destination; back to forward(3), the frame goes out on port 3 again."""
    frame = _eth(0x9000, dst="02:00:00:00:00:77") + b"d" * 20
    seen = []
    for action, n in ((P4TableAction("drop"), 0), (P4TableAction("forward", port=L2_DEFAULT_PORT), 1)):
        rig.write(~P4TableEntry("dmac", action=action, is_default_action=True))
        seen.append(sorted(rig.exchange(1, frame, n)))
    return seen


def l2_default_drop_expected() -> list[list[Out]]:
    """What ``l2_default_drop`` must see."""
    frame = _eth(0x9000, dst="02:00:00:00:00:77") + b"d" * 20
    return [[], [(L2_DEFAULT_PORT, _l2_out(frame, 1, L2_DEFAULT_PORT))]]
