"""Does an in-memory link keep its rate? Two native switches in one data-plane thread,
a host veth on each side, their link in memory at ``bw`` Mbit/s; h1 sends more than the
link carries for ``seconds``, and h2's received bytes per ``window`` give the rate the
link delivered (Ethernet frame bytes, as tc's htb counts them), next to the configured
one. The same run on the link's veth shaped by Mininet's htb is the reference.

    python -m bench.memlink_bench --rate [--bw 10] [--seconds 3]
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import threading
import time
from typing import Any

FRAME = 1000  # bytes of every frame h1 sends


def _sh(cmd: str) -> None:
    if os.system(cmd) != 0:
        raise RuntimeError(f"failed: {cmd}")


def _sock(iface: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.setsockopt(263, 23, 1)  # PACKET_IGNORE_OUTGOING
    s.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)  # SO_RCVBUFFORCE
    s.bind((iface, 3))
    return s


def rate_check(bw: float, seconds: float, window: float = 0.1) -> list[dict[str, Any]]:
    """One row per mode (memory, veth+htb): configured and delivered Mbit/s over the
    saturated part of the run, and the lowest and highest window."""
    from targets.embedded.loop import run_switches
    from targets.embedded.native import memlink
    from targets.netns import in_netns
    from tests.test_memlink import _forward_switch  # the two-switch setup of the tests

    tag = f"{os.getpid() % 100000}"
    ns = f"gmr{tag}"
    _sh(f"ip netns add {ns}")
    rows = []
    try:
        _sh(f"ip netns exec {ns} sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1")
        i = {k: f"gr{k}{tag}" for k in ("h1", "a1", "a2", "b1", "b2", "h2")}
        for a, b in ((i["h1"], i["a1"]), (i["a2"], i["b1"]), (i["b2"], i["h2"])):
            _sh(f"ip link add {a} type veth peer name {b} && ip link set {a} netns {ns} && ip link set {b} netns {ns}")
            _sh(f"ip netns exec {ns} sh -c 'ip link set {a} up && ip link set {b} up'")
        for dev in (i["a2"], i["b1"]):  # as Mininet's TCLink shapes both ends
            _sh(f"ip netns exec {ns} tc qdisc add dev {dev} root handle 5:0 htb default 1")
            _sh(f"ip netns exec {ns} tc class add dev {dev} parent 5:0 classid 5:1 htb rate {bw}Mbit burst 15k")
        for mode in ("memory", "veth+htb"):
            os.environ[memlink.ENV] = "1" if mode == "memory" else "0"
            s1, s2 = _forward_switch(1), _forward_switch(2)
            in_netns(ns, lambda s1=s1, s2=s2: (s1.add_port(1, i["a1"]), s1.add_port(2, i["a2"]),
                                               s2.add_port(1, i["b1"]), s2.add_port(2, i["b2"])))
            memlink.connect(s1, 2, s2, 1, memlink.LinkParams(bw_mbit=bw), memlink.LinkParams(bw_mbit=bw))
            stop = threading.Event()
            th = threading.Thread(target=run_switches, args=([s1, s2], stop), daemon=True)
            th.start()
            try:
                rows.append(_measure(mode, bw, seconds, window, in_netns(ns, _sock, i["h1"]),
                                     in_netns(ns, _sock, i["h2"]), s1))
            finally:
                stop.set()
                s1.wake()
                th.join(5)
                s1.stop()
                s2.stop()
    finally:
        os.environ.pop(memlink.ENV, None)
        os.system(f"ip netns del {ns} 2>/dev/null")
    return rows


def _measure(mode: str, bw: float, seconds: float, window: float, h1: socket.socket, h2: socket.socket,
             s1: Any) -> dict[str, Any]:
    from scapy.all import IP, UDP, Ether

    time.sleep(0.3)  # the loop moves the link into memory (or not) at its first turn
    frame = bytes(Ether(src="00:00:0a:00:00:01", dst="02:00:00:00:01:01") / IP(src="10.0.0.1", dst="10.0.0.2")
                  / UDP(sport=1000, dport=2000))
    frame += bytes(FRAME - len(frame))
    got: list[tuple[float, int]] = []
    done = threading.Event()

    def recv() -> None:
        while not done.is_set():
            if select.select([h2], [], [], 0.1)[0]:
                n = len(h2.recv(65536))
                got.append((time.monotonic(), n))

    rx = threading.Thread(target=recv, daemon=True)
    rx.start()
    # twice the link's rate, paced in small bursts; bounded by count and time
    per_s = 2 * bw * 1e6 / 8 / FRAME
    t0 = time.monotonic()
    sent = 0
    while time.monotonic() - t0 < seconds and sent < 200_000:
        due = int((time.monotonic() - t0) * per_s)
        while sent < due:
            with contextlib.suppress(OSError):  # the host's own queue is full: sent later
                h1.send(frame)
            sent += 1
        time.sleep(0.001)
    time.sleep(0.5)
    done.set()
    rx.join(2)
    h1.close()
    h2.close()
    # the saturated part: from 0.5 s after the start to the end of sending
    lo, hi = t0 + 0.5, t0 + seconds
    wins: dict[int, int] = {}
    for t, n in got:
        if lo <= t < hi:
            wins[int((t - lo) / window)] = wins.get(int((t - lo) / window), 0) + n
    rates = [b * 8 / window / 1e6 for k, b in sorted(wins.items()) if k < int((hi - lo) / window)]
    total = sum(n for t, n in got if lo <= t < hi) * 8 / (hi - lo) / 1e6
    from targets.embedded.native.memlink import stats

    in_memory = any(r["in_memory"] for r in stats(s1))
    return {"mode": mode, "in_memory": in_memory, "bw": bw, "delivered": total,
            "min": min(rates, default=0.0), "max": max(rates, default=0.0), "sent": sent,
            "received": len(got), "windows": len(rates)}
