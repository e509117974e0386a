"""What a host's Linux kernel delivers to an agent's socket, encoding by encoding
(docs/trust.md, "IP: only what the switch parsed").

The switches' parser rule (a packet is either parsed whole and checked, or dropped and
counted) only protects an agent if every encoding the kernel would still hand to the
agent's socket is one the switch parses. This test measures the kernel's side, with no
switch: a veth pair, a receiver in its own namespace set up like an emulated host (IPv6
off), the agents' sockets (UDP on the INA port over ``AF_INET``; ``AF_PACKET`` for the
token and NDN EtherTypes), and one forged frame per encoding of ``tests/ina_forge.py``
sent from the other end. The sets asserted here are the table in docs/trust.md; the
network tests (``tests/test_encoding_admission.py``) show the switches drop or refuse
every one of them.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.ina_forge import ENCODINGS, build
from wire.ina import INA_VALUES

ROOT = Path(__file__).resolve().parent.parent
TOKEN_ETHERTYPE, NDN_ETHERTYPE = 0x88B5, 0x8624

pytestmark = [
    pytest.mark.net,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, veth pairs)"),
]

# The receiver: the agents' sockets, everything that arrives for 2 s, as JSON.
RECEIVER = """
import json, select, socket, sys, time
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); udp.bind(("", 40000))
pk = {t: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(t)) for t in (0x88B5, 0x8624)}
for s in pk.values(): s.bind((sys.argv[1], 0))
print("ready", flush=True)
got = []
end = time.time() + float(sys.argv[2])
while time.time() < end:
    r, _, _ = select.select([udp, *pk.values()], [], [], 0.1)
    for s in r:
        d = s.recv(4096)
        kind = "udp" if s is udp else hex([t for t, x in pk.items() if x is s][0])
        got.append([kind, d.hex()])
print(json.dumps(got), flush=True)
"""


def _sh(cmd: str) -> None:
    subprocess.run(cmd, shell=True, check=True)


def _vlan(dst: bytes, src: bytes, tags: list[tuple[int, int]], ethertype: int, body: bytes) -> bytes:
    return dst + src + b"".join(struct.pack("!HH", tpid, vid) for tpid, vid in tags) + \
        struct.pack("!H", ethertype) + body


def test_what_the_kernel_delivers_to_the_agents_sockets() -> None:
    tag = f"{os.getpid() % 10000}"
    ns, a, b = f"kdel{tag}", f"kd{tag}a", f"kd{tag}b"
    _sh(f"ip netns add {ns}")
    try:
        _sh(f"ip link add {a} type veth peer name {b} && ip link set {b} netns {ns} && "
            f"ip link set {a} up && ip netns exec {ns} sh -c 'sysctl -qw net.ipv6.conf.all.disable_ipv6=1; "
            f"ip link set lo up; ip link set {b} up; ip addr add 10.77.0.2/24 dev {b}'")
        mac = subprocess.run(["ip", "netns", "exec", ns, "cat", f"/sys/class/net/{b}/address"],
                             capture_output=True, text=True, check=True).stdout.strip()
        rx = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", RECEIVER, b, "3"],
                              stdout=subprocess.PIPE, text=True)
        assert rx.stdout is not None and rx.stdout.readline().strip() == "ready"
        dst, src = bytes.fromhex(mac.replace(":", "")), bytes.fromhex("020000000066")
        frames: list[bytes] = []
        for i, enc in enumerate(("plain", *ENCODINGS)):
            item = {"src_mac": "02:00:00:00:00:66", "dst_mac": mac, "src_ip": "10.77.0.1",
                    "dst_ip": "10.77.0.2", "values": [i] * INA_VALUES,
                    "ina": {"msg_type": 3, "job_id": 5, "fragment": i, "bitmap": 3, "count": 2}}
            if enc != "plain":
                item["encoding"] = enc
            frames += build(item)
        # token and NDN frames (their EtherType at the host's AF_PACKET socket), tagged
        for et in (TOKEN_ETHERTYPE, NDN_ETHERTYPE):
            for name, tags in (("plain", []), ("vlan0", [(0x8100, 0)]), ("vlan5", [(0x8100, 5)]),
                               ("qinq", [(0x88A8, 0), (0x8100, 0)]), ("qinq5", [(0x88A8, 5), (0x8100, 5)])):
                frames.append(_vlan(dst, src, tags, et, f"{et:x}-{name}".encode().ljust(46, b".")))
        with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as tx:
            tx.bind((a, 0))
            time.sleep(0.2)
            for f in frames:
                tx.send(f)
        out, _ = rx.communicate(timeout=30)
    finally:
        subprocess.run(f"ip link del {a} 2>/dev/null; ip netns del {ns}", shell=True)
    got = json.loads(out.strip().splitlines()[-1])
    names = ("plain", *ENCODINGS)  # the INA fragment field says which encoding arrived
    udp = {names[int.from_bytes(bytes.fromhex(d)[4:8], "big")]: len(d) // 2
           for k, d in got if k == "udp"}
    raw = {bytes.fromhex(d)[14:].split(b".")[0].decode() for k, d in got if k != "udp"}
    # UDP: the option-less IPv4 datagram, also behind a VID-0 tag or two, with a zero UDP
    # checksum, with Ethernet padding, and with trailing bytes inside its UDP length
    assert udp == {"plain": 308, "vlan0": 308, "qinq": 308, "udp_csum_zero": 308,
                   "padded": 308, "trailing": 340}
    # AF_PACKET: tagged frames of the socket's EtherType, tag stripped, any VID (an
    # outer VID that is not 0 leaves the inner tag in place: not delivered)
    assert raw == {f"{et:x}-{n}" for et in (TOKEN_ETHERTYPE, NDN_ETHERTYPE)
                   for n in ("plain", "vlan0", "vlan5", "qinq")}
