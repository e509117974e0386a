"""Send forged INA frames from inside a host's network namespace (tests/test_ina_trust.py).

The frames are built with the scapy classes of ``wire/scapy_layers.py`` from a JSON list,
each item ``{"src_mac", "dst_mac", "src_ip", "dst_ip", "ina": {INA fields},
"values": [..] | null}`` (``null``: header only, like a CLEAR), optionally
``"ip_options": "01010101"`` (hex bytes of IPv4 options) and ``"fragsize": N`` (sent as
IP fragments of N payload bytes), and written to the interface on a raw socket, so any
source address can be forged. Prints ``{"sent": N}`` (frames on the wire) when done.

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
    return [bytes(Ether(src=frame["src_mac"], dst=frame["dst_mac"]) / ip) for ip in ips]


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
    sent = 0
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as sock:
        sock.bind((args.iface, 0))
        while True:
            for fr in frames:
                sock.send(fr)
                sent += 1
                time.sleep(args.gap)  # paced: the host link's queue never overflows
            if not args.until_eof:
                break
            r, _, _ = select.select([sys.stdin], [], [], args.interval)
            if r and not sys.stdin.readline():
                break
    print(json.dumps({"sent": sent}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
