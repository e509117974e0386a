"""Send forged INA frames from inside a host's network namespace (tests/test_ina_trust.py).

The frames are built with the scapy classes of ``wire/scapy_layers.py`` from a JSON list,
each item ``{"src_mac", "dst_mac", "src_ip", "dst_ip", "ina": {INA fields},
"values": [..] | null}`` (``null``: header only, like a CLEAR), optionally
``"ip_options": "01010101"`` (hex bytes of IPv4 options) and ``"fragsize": N`` (sent as
IP fragments of N payload bytes) and ``"encoding": NAME`` (one of :data:`ENCODINGS`: the
same datagram in another encoding a host's kernel might still deliver), and written to the
interface on a raw socket, so any source address can be forged. Prints ``{"sent": N,
"rounds": R}`` (frames on the wire, passes over the list) when done.

    python -m tests.ina_forge --iface h2-eth0 --frames forged.json [--gap 0.0005]
        [--until-eof --interval 0.2]

``--until-eof`` repeats the whole list every ``--interval`` seconds until stdin closes
(the test closes it once the job is done), so the forgeries arrive while it runs.
"""

from __future__ import annotations

import argparse
import json
import select
import socket
import sys
import time
from collections.abc import Iterable
from typing import Any

from wire.ina import INA_UDP_PORT, INA_VALUES

# Other encodings of one forged datagram (docs/trust.md, "IP: only what the switch
# parsed"): VLAN tags (VID 0, VID 5, 802.1ad over 802.1Q), IPv6, UDP checksum zero or
# wrong, IPv4 header checksum wrong, the frame cut inside the values or inside the INA
# header, Ethernet padding past the IP total length, trailing bytes inside the UDP
# datagram, an IP total length longer or shorter than the datagram.
ENCODINGS = ("vlan0", "vlan5", "qinq", "ipv6", "udp_csum_zero", "udp_csum_bad", "ip_csum_bad",
             "short_values", "short_header", "padded", "trailing", "ip_len_long", "ip_len_short")
ETH, IP4, UDPH = 14, 20, 8


def _encode(ether: bytes, ip: bytes, encoding: str) -> bytes:
    """``ether`` (14 bytes, EtherType IPv4) + ``ip`` (a whole IPv4 datagram, no options)
    re-encoded as ``encoding``."""
    from scapy.layers.inet import IP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import Dot1AD, Dot1Q, Ether
    from scapy.packet import Raw

    dst, src = ether[:6], ether[6:12]
    if encoding in ("vlan0", "vlan5", "qinq"):
        tags = {"vlan0": Dot1Q(vlan=0), "vlan5": Dot1Q(vlan=5),
                "qinq": Dot1AD(vlan=0) / Dot1Q(vlan=0)}[encoding]
        return bytes(Ether(dst=dst, src=src) / tags / IP(ip))
    if encoding == "ipv6":  # the same UDP datagram behind an IPv6 header
        return bytes(Ether(dst=dst, src=src) / IPv6(src="fd00::66", dst="fd00::1", nh=17)
                     / Raw(ip[IP4:]))
    b = bytearray(ip)
    if encoding == "udp_csum_zero":
        b[IP4 + 6:IP4 + 8] = b"\0\0"
    elif encoding == "udp_csum_bad":
        b[IP4 + 6] ^= 0x5A
    elif encoding == "ip_csum_bad":
        b[10] ^= 0x5A
    elif encoding == "short_values":
        del b[len(b) - 100:]
    elif encoding == "short_header":
        del b[IP4 + UDPH + 20:]
    elif encoding == "padded":
        b += bytes(64)
    elif encoding == "trailing":  # 32 more bytes inside the UDP datagram
        b += bytes(range(32))
        b[IP4 + 4:IP4 + 6] = (len(b) - IP4).to_bytes(2, "big")
        b[2:4] = len(b).to_bytes(2, "big")
        b[IP4 + 6:IP4 + 8] = b"\0\0"
        b[10:12] = b"\0\0"
        b[10:12] = _csum(bytes(b[:IP4])).to_bytes(2, "big")
    elif encoding in ("ip_len_long", "ip_len_short"):
        new = len(b) + 100 if encoding == "ip_len_long" else IP4 + UDPH + 60
        b[2:4] = new.to_bytes(2, "big")
        b[10:12] = b"\0\0"
        b[10:12] = _csum(bytes(b[:IP4])).to_bytes(2, "big")
    else:
        raise ValueError(f"unknown encoding {encoding!r} (known: {', '.join(ENCODINGS)})")
    return ether + bytes(b)


def _csum(data: bytes) -> int:
    """The Internet checksum of ``data`` (even length)."""
    s = sum(int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def build(frame: dict[str, Any]) -> list[bytes]:
    """The forged Ethernet frames of one item (see the module doc for the fields): one,
    or one per IP fragment."""
    from scapy.layers.inet import IP, UDP, IPOption, fragment
    from scapy.layers.l2 import Ether

    from wire.scapy_layers import INA, INAValues

    options = [IPOption(bytes.fromhex(frame["ip_options"]))] if frame.get("ip_options") else []
    pkt = (IP(src=frame["src_ip"], dst=frame["dst_ip"], ttl=64, options=options)
           / UDP(sport=INA_UDP_PORT, dport=INA_UDP_PORT) / INA(**frame["ina"]))
    if frame.get("values") is not None:
        values = [int(v) for v in frame["values"]]
        if len(values) != INA_VALUES:
            raise ValueError(f"a frame needs {INA_VALUES} values, got {len(values)}")
        pkt = pkt / INAValues(values=values)
    ips = fragment(pkt, fragsize=frame["fragsize"]) if frame.get("fragsize") else [pkt]
    frames = [bytes(Ether(src=frame["src_mac"], dst=frame["dst_mac"]) / ip) for ip in ips]
    if frame.get("encoding"):
        frames = [_encode(f[:ETH], f[ETH:], frame["encoding"]) for f in frames]
    return frames


def main(argv: Iterable[str] | None = None) -> int:
    """Send the frames; see the module doc."""
    ap = argparse.ArgumentParser(prog="python -m tests.ina_forge")
    ap.add_argument("--iface", required=True)
    ap.add_argument("--frames", required=True, help="JSON list of frames")
    ap.add_argument("--gap", type=float, default=0.0005, help="seconds between frames")
    ap.add_argument("--until-eof", action="store_true",
                    help="repeat the list until stdin closes")
    ap.add_argument("--interval", type=float, default=0.2, help="seconds between repeats")
    args = ap.parse_args(list(argv) if argv is not None else None)
    with open(args.frames) as f:
        frames = [wire for fr in json.load(f) for wire in build(fr)]
    sent = rounds = 0
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as sock:
        sock.bind((args.iface, 0))
        while True:
            for fr in frames:
                sock.send(fr)
                sent += 1
                time.sleep(args.gap)  # paced: the host link's queue never overflows
            rounds += 1
            if not args.until_eof:
                break
            r, _, _ = select.select([sys.stdin], [], [], args.interval)
            if r and not sys.stdin.readline():
                break
    print(json.dumps({"sent": sent, "rounds": rounds}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
