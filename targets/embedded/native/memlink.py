"""In-memory links between two native switches of one process (memlink.c).

A switch group (``targets/embedded/group.py``) learns from its spec which ports of its
members are joined by a link (``connect``). While both ends run a native program served
by the C loop (``glue.native_rx_ok``), the link is not captured and ``$GRADNET_MEMLINKS``
is not 0, each direction is a ring in native memory: the sending port writes into it
(io.c, or ``RingSender`` for the Python path), the loop serves it as a source of the
receiving port, and the sender emulates the link's rate, delay, queue and MTU (and a
Mininet-style loss, if the link has one). Otherwise both ends use the veth, as before;
``update`` (called by the C loop's ``refresh``, in the data-plane thread) decides it for
every link at once, so both ends always agree, and sends what a ring still holds out on
the veth when a link leaves memory. docs/embedded.md, "In-memory links".
"""

from __future__ import annotations

import ctypes
import fcntl
import logging
import os
import re
import socket
import struct
import time
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("gradnet.switch")

ENV = "GRADNET_MEMLINKS"
QUEUE = 1000  # frames not yet departed: the veth's queue under Mininet's htb (txqueuelen)
RING_BYTES = 4 << 20
SENT, QUEUE_FULL, RING_FULL, LOST, BAD_LENGTH, DOWN = range(6)
STATS = ("tx_packets", "tx_bytes", "rx_packets", "rx_bytes", "queue_drops", "ring_full", "loss_drops",
         "bad_length", "down_drops", "in_flight")
SIOCGIFMTU = 0x8921
_NEVER = (1 << 63) - 1


def enabled() -> bool:
    """Whether links between switches of one process may run in memory ($GRADNET_MEMLINKS,
    default on; 0, off, no or false: every link stays on its veth)."""
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "off", "no", "false")


@dataclass(frozen=True)
class LinkParams:
    """One direction's emulation: rate (Mbit/s, None: none), delay, loss probability,
    queue limit in frames, and the longest frame (None: any)."""

    bw_mbit: float | None = None
    delay_us: float = 0.0
    loss: float = 0.0
    queue: int = QUEUE
    max_frame: int | None = None


@dataclass
class PeerLink:
    """One end of a link: ``sw.peer_links[port]`` (this port sends with ``params``)."""

    peer: Any
    peer_port: int
    params: LinkParams
    ring: int = 0  # its ml_ring_t * once made (kept across moves, with its counters)


class RingSender:
    """What ``Switch._send`` sends a frame to on a port whose link runs in memory: a full
    queue raises as a refused socket send does (the switch counts a queue drop)."""

    def __init__(self, lib: Any, ring: int) -> None:
        self.lib, self.ring = lib, ring

    def send(self, frame: bytes) -> int:
        rc = self.lib.ml_push(self.ring, frame, len(frame), time.monotonic_ns())  # CLOCK_MONOTONIC, as ml_now in memlink.c
        if rc not in (SENT, LOST):
            raise BlockingIOError(f"in-memory link refused the frame ({rc})")
        return len(frame)


def bind(lib: Any) -> None:
    """Give ``lib`` (loop.c's shared object, which holds memlink.c) its ring signatures."""
    vp, u32, u64, i64 = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int64
    for name, res, args in (("ml_new", vp, [u64, u64, i64, u32, u32, u32, u64]), ("ml_free", None, [vp]),
                            ("ml_set_up", None, [vp, u32]), ("ml_stats", None, [vp, ctypes.c_void_p]),
                            ("ml_push", ctypes.c_int, [vp, ctypes.c_char_p, u32, i64]),
                            ("ml_pop", u32, [vp, i64, ctypes.c_void_p, u32])):
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args


def connect(a: Any, pa: int, b: Any, pb: int, ab: LinkParams, ba: LinkParams) -> None:
    """Record that port ``pa`` of switch ``a`` and port ``pb`` of ``b`` are one link
    (``ab``: how a sends to b; ``ba``: back)."""
    for sw, port, peer, pport, params in ((a, pa, b, pb, ab), (b, pb, a, pa, ba)):
        if not hasattr(sw, "peer_links"):
            sw.peer_links = {}
        sw.peer_links[port] = PeerLink(peer, pport, params)


def _captured(sw: Any) -> set[int]:
    return getattr(sw, "memlink_captured", set())


def update(lib: Any, switches: list[Any], native_ok: Any) -> tuple:
    """Decide for every link of ``switches`` whether it runs in memory and apply it (the
    senders in ``sw._ml``); a link leaving memory first sends what its rings hold on the
    veth. Returns a key that changes whenever the decision does."""
    members = {id(sw) for sw in switches}
    on = enabled()
    ok = {id(sw): bool(native_ok(sw)) for sw in switches}
    active = []
    for sw in switches:
        sw._ml_lib = lib
        for port, pl in getattr(sw, "peer_links", {}).items():
            want = (on and id(pl.peer) in members and ok[id(sw)] and ok[id(pl.peer)]
                    and port not in _captured(sw) and pl.peer_port not in _captured(pl.peer)
                    and port in sw._ports and pl.peer_port in pl.peer._ports)
            if want:
                if not pl.ring:
                    pl.ring = _new_ring(lib, sw, port, pl.params)
                if pl.ring and port not in sw._ml:
                    sw._ml[port] = RingSender(lib, pl.ring)
                    log.info("device %d: port %d runs in memory to device %d port %d", sw.device_id, port,
                             pl.peer.device_id, pl.peer_port)
            elif port in sw._ml:
                del sw._ml[port]
                _flush_to_veth(lib, sw, port, pl.ring)
                log.info("device %d: port %d back on its veth", sw.device_id, port)
            if port in sw._ml:
                active.append((id(sw), port, pl.ring))
    return tuple(active)


def _new_ring(lib: Any, sw: Any, port: int, p: LinkParams) -> int:
    max_frame = p.max_frame if p.max_frame is not None else _max_frame(sw, port)
    bps = int(p.bw_mbit * 1e6) if p.bw_mbit else 0
    loss = min(int(round(p.loss * 2**32)), 2**32 - 1) if p.loss > 0 else 0
    ring = lib.ml_new(RING_BYTES, bps, int(p.delay_us * 1000), p.queue, max_frame or 0, loss,
                      (sw.device_id << 16 | port) * 0x9E3779B97F4A7C15 % 2**64)
    if not ring:
        log.warning("device %d: no memory for the ring of port %d: it stays on its veth", sw.device_id, port)
    return ring or 0


def _max_frame(sw: Any, port: int) -> int:
    """The longest frame the port's veth takes: its MTU, an Ethernet header and a VLAN
    tag (0: unknown, any length)."""
    s, iface = sw._ports.get(port), sw._ifaces.get(port, "")
    try:
        req = struct.pack("16si", iface.encode()[:15], 0)
        return int(struct.unpack("16si", fcntl.ioctl(s.fileno(), SIOCGIFMTU, req))[1]) + 18
    except (OSError, AttributeError):
        return 0


def _flush_to_veth(lib: Any, sw: Any, port: int, ring: int) -> None:
    buf = ctypes.create_string_buffer(65536 + 64)
    s: socket.socket | None = sw._ports.get(port)
    while ring:
        n = lib.ml_pop(ring, _NEVER, buf, len(buf))
        if not n:
            return
        if s is not None:
            try:
                s.send(buf.raw[:n])
            except OSError:
                sw.stats.ports[port].queue_drops += 1


def mark_down(sw: Any) -> None:
    """A stopped switch: the rings toward it drop (and count) what its peers send."""
    lib = getattr(sw, "_ml_lib", None)
    for pl in getattr(sw, "peer_links", {}).values():
        back = getattr(pl.peer, "peer_links", {}).get(pl.peer_port)
        if back is not None and back.ring and lib is not None:
            lib.ml_set_up(back.ring, 0)


def stats(sw: Any, lib: Any | None = None) -> list[dict[str, Any]]:
    """One dict per link of ``sw``: its ports, whether it runs in memory, and both rings'
    counters (``tx``: this port sends; ``rx``: the peer sends)."""
    lib = lib or getattr(sw, "_ml_lib", None)
    out = []
    for port, pl in sorted(getattr(sw, "peer_links", {}).items()):
        back = getattr(pl.peer, "peer_links", {}).get(pl.peer_port)
        row: dict[str, Any] = {"port": port, "peer": pl.peer.device_id, "peer_port": pl.peer_port,
                               "in_memory": port in sw._ml, "captured": port in _captured(sw),
                               "bw_mbit": pl.params.bw_mbit, "delay_us": pl.params.delay_us}
        for side, ring in (("tx", pl.ring), ("rx", back.ring if back else 0)):
            arr = (ctypes.c_uint64 * (len(STATS)))()
            if ring and lib is not None:
                lib.ml_stats(ring, arr)
            row[side] = dict(zip(STATS, arr, strict=True))
        out.append(row)
    return out


def command(sw: Any, cmd: str, args: list[str]) -> str:
    """The runtime CLI's ``memlinks`` (one JSON list, ``stats``) and ``link_capture PORT
    on|off`` (the link goes back to its veth while captured); ValueError: bad usage."""
    import json

    if cmd == "memlinks":
        if args:
            raise ValueError("usage: memlinks")
        return json.dumps(stats(sw))
    if len(args) != 2 or not args[0].isdigit() or args[1] not in ("on", "off"):
        raise ValueError("usage: link_capture PORT on|off")
    port = int(args[0])
    cap = set(_captured(sw))
    (cap.add if args[1] == "on" else cap.discard)(port)
    sw.memlink_captured = cap  # a new set: the data-plane thread reads it without a lock
    sw.wake()
    return "ok"


_DELAY = re.compile(r"^\s*([0-9.]+)\s*(us|ms|s)?\s*$")


def from_spec(d: dict[str, Any]) -> LinkParams:
    """LinkParams from a group spec's link entry (Mininet's TCLink parameters: ``bw``
    Mbit/s, shaped only in 0 < bw <= 1000 as TCLink does; ``delay`` such as "5ms";
    ``loss`` in percent; ``max_queue_size`` in frames)."""
    bw = d.get("bw")
    bw = float(bw) if bw is not None and 0 < float(bw) <= 1000 else None
    delay_us = 0.0
    if d.get("delay"):
        m = _DELAY.match(str(d["delay"]))
        if m is None:
            raise ValueError(f"link delay {d['delay']!r}: give a number with us, ms or s")
        delay_us = float(m.group(1)) * {"us": 1, "ms": 1e3, "s": 1e6, None: 1}[m.group(2)]
    loss = float(d.get("loss") or 0) / 100
    return LinkParams(bw, delay_us, loss, int(d.get("max_queue_size") or QUEUE))
