"""Helpers the source-binding network tests run inside an emulated host.

``send``: put raw frames on an interface (``AF_PACKET``), round robin, at most ``--count``
frames and ``--seconds`` seconds, at ``--pps``; prints ``{"sent": n}``.
``recv``: count the UDP datagrams arriving on ``--port`` for ``--seconds`` seconds, by
source address; prints ``{"from": {ip: n}}``.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path


def _send(args: argparse.Namespace) -> dict[str, int]:
    frames = [bytes.fromhex(h) for h in json.loads(Path(args.frames).read_text(encoding="utf-8"))]
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((args.iface, 0))
    sent, gap = 0, 1.0 / args.pps
    end = time.monotonic() + args.seconds
    while sent < args.count and time.monotonic() < end:
        s.send(frames[sent % len(frames)])
        sent += 1
        time.sleep(gap)
    return {"sent": sent}


def _recv(args: argparse.Namespace) -> dict[str, dict[str, int]]:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", args.port))
    got: Counter[str] = Counter()
    end = time.monotonic() + args.seconds
    print("listening", flush=True)
    while (left := end - time.monotonic()) > 0:
        s.settimeout(left)
        try:
            _data, src = s.recvfrom(65535)
        except TimeoutError:
            break
        got[src[0]] += 1
    return {"from": dict(got)}


def main(argv: Iterable[str] | None = None) -> int:
    """Entry point; exit 2 on bad arguments."""
    ap = argparse.ArgumentParser(description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    snd = sub.add_parser("send", help="send raw frames")
    snd.add_argument("--iface", required=True, help="interface to send on")
    snd.add_argument("--frames", required=True, help="JSON list of frames in hex")
    snd.add_argument("--count", type=int, default=1000, help="at most this many frames")
    snd.add_argument("--seconds", type=float, default=10.0, help="at most this long")
    snd.add_argument("--pps", type=float, default=200.0, help="frames per second")
    rcv = sub.add_parser("recv", help="count UDP datagrams by source")
    rcv.add_argument("--port", type=int, required=True, help="UDP port to listen on")
    rcv.add_argument("--seconds", type=float, default=5.0, help="listen this long")
    args = ap.parse_args(list(argv) if argv is not None else None)
    out = _send(args) if args.cmd == "send" else _recv(args)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
