"""Bounded reachability probe: ICMP echo to a list of targets, replies counted.

Runs inside one emulated host (``python -m hosts.reach --targets 10.0.0.2,10.0.0.3``)
and prints one JSON object ``{"sent": {ip: n}, "received": {ip: n}, "rtt_ms": {ip: avg}}``.
All requests go out at once over one raw socket and replies are matched by ICMP id and
sequence, so probing N targets takes one timeout, not N. Traffic is bounded by
``--count`` per target and ``--timeout`` seconds in all.
"""

from __future__ import annotations

import json
import os
import select
import socket
import struct
import sys
import time

from hosts.net import set_buffers
from wire import argtypes
from wire.argtypes import described


def _checksum(data: bytes) -> int:
    if len(data) & 1:
        data += b"\x00"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def _echo(ident: int, seq: int, payload: bytes) -> bytes:
    hdr = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
    return struct.pack("!BBHHH", 8, 0, _checksum(hdr + payload), ident, seq) + payload


def probe(targets: list[str], count: int = 1, timeout: float = 2.0, interval: float = 0.0) -> dict:
    """Send ``count`` echo requests to each target; count matching replies until ``timeout``."""
    ident = os.getpid() & 0xFFFF
    sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    set_buffers(sock, rcvbuf=4 << 20, sndbuf=None, force=False)
    sent = dict.fromkeys(targets, 0)
    received = dict.fromkeys(targets, 0)
    rtts: dict[str, list[float]] = {t: [] for t in targets}
    pending: dict[int, tuple[str, float]] = {}
    seq = 0
    for c in range(count):
        for t in targets:
            seq += 1
            pending[seq] = (t, time.monotonic())
            try:
                sock.sendto(_echo(ident, seq, b"gradnet-reach"), (t, 0))
                sent[t] += 1
            except OSError:
                pass
        if interval and c + 1 < count:
            time.sleep(interval)
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        r, _, _ = select.select([sock], [], [], max(0.0, deadline - time.monotonic()))
        if not r:
            break
        data, addr = sock.recvfrom(2048)
        ihl = (data[0] & 0x0F) * 4
        if len(data) < ihl + 8:
            continue
        typ, _, _, rid, rseq = struct.unpack("!BBHHH", data[ihl:ihl + 8])
        if typ != 0 or rid != ident or rseq not in pending:
            continue
        target, t0 = pending.pop(rseq)
        if addr[0] == target:
            received[target] += 1
            rtts[target].append((time.monotonic() - t0) * 1000)
    sock.close()
    return {
        "sent": sent,
        "received": received,
        "rtt_ms": {t: (sum(v) / len(v) if v else None) for t, v in rtts.items()},
    }


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: probe targets and print the JSON result."""
    p = argtypes.Parser(prog="python -m hosts.reach", description=described(__doc__))
    p.add_argument("--targets", required=True, help="comma-separated IPv4 addresses")
    p.add_argument("--count", type=argtypes.count, default=1, help="echo requests per target (default 1)")
    p.add_argument("--timeout", type=argtypes.positive, default=2.0, help="seconds to wait for replies (default 2)")
    p.add_argument("--interval", type=argtypes.nonnegative, default=0.0, help="seconds between rounds")
    args = p.parse_args(argv)
    if not 1 <= args.count <= 1000:
        p.error("--count must be within 1..1000")
    targets = [t for t in args.targets.split(",") if t]
    try:
        for t in targets:
            socket.inet_aton(t)
    except OSError:
        p.error(f"bad target address in {args.targets!r}")
    print(json.dumps(probe(targets, args.count, args.timeout, args.interval)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
