"""The traffic manager's clocks and queue depths in C (targets/embedded/native/meta.c)
against the Python backend: metadata_echo.p4 copies enq_timestamp, enq_qdepth,
deq_timedelta, deq_qdepth and both global timestamps into the frame it sends, so the
frames out carry what each backend filled in. Through a port shaped in C (rates, four
priorities, a burst that waits) with an injected clock both must give the same bytes,
frame by frame; through the loop in C on the real clock, the depths must be exact and
the times within the bounds of the run."""

from __future__ import annotations

import select
import socket
import struct
import time
import types

import pytest

from targets.embedded import switch as switch_mod
from targets.embedded.native import tmglue
from targets.embedded.native.build import compiler
from targets.embedded.switch import Switch
from tests.native_pair import PROGRAMS

pytestmark = pytest.mark.skipif(compiler() is None, reason="no C compiler")
ECHO = next(p for p in PROGRAMS if p.stem == "metadata_echo")
T0 = 1000.0  # the injected clock's start (seconds)
# echo_t after the Ethernet header: the inputs, then what the pipelines fill in
ECHO_LEN = 60
OFF = {"ig_ts": 14 + 18, "enq_ts": 14 + 38, "enq_depth": 14 + 42, "deq_delta": 14 + 46,
       "deq_depth": 14 + 50, "eg_ts": 14 + 54}


def _switch(backend: str) -> Switch:
    sw = Switch(seed=1, backend=backend, priority_queues=4, queue_depth=8)
    sw.install_program(sw.load_program(ECHO.read_bytes()))
    assert (sw.program.native is not None) == (backend == "native")
    sw.peers = {}  # type: ignore[attr-defined]
    for port in (1, 2, 3):
        mine, peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        mine.setblocking(False)
        peer.setblocking(False)
        sw._ports[port], sw._fd_port[mine.fileno()] = mine, port
        sw.peers[port] = peer  # type: ignore[attr-defined]
    return sw


def _frame(out_port: int, prio: int, tag: int) -> bytes:
    echo = struct.pack("!HBBH", out_port, prio, 0, 0) + bytes(ECHO_LEN - 6)
    return b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01" + b"\x88\xb6" + echo + tag.to_bytes(2, "big")


def _field(frame: bytes, name: str) -> int:
    o = OFF[name]
    return int.from_bytes(frame[o:o + (6 if name.endswith("_ts") and name[:2] in ("ig", "eg") else 4)], "big")


def _received(sock: socket.socket) -> list[bytes]:
    out = []
    while True:
        try:
            out.append(sock.recv(65536))
        except BlockingIOError:
            return out


def _close(sw: Switch) -> None:
    for s in [*sw._ports.values(), *sw.peers.values()]:  # type: ignore[attr-defined]
        s.close()


def _run(sw: Switch, clock: list[float], frames: list[bytes], steps: list[float]) -> list[list[bytes]]:
    """Feed ``frames`` in chunks at T0 (every third chunk one frame at a time, the Python
    path's receive, whose packets join the native queues), then service the switch at
    each time of ``steps``; what left ports 2 and 3 after each."""
    nat = sw.program.native
    clock[0] = T0
    if nat is not None:
        tmglue.set_clock(nat, T0)
    for k in range(0, len(frames), 6):
        if k // 6 % 3 == 2:
            for f in frames[k:k + 6]:
                sw._receive(1, f)
            sw._send()  # as the loop does after each frame it receives this way
            continue
        for f in frames[k:k + 6]:
            sw.peers[1].send(f)  # type: ignore[attr-defined]
        sw.on_readable(sw._ports[1].fileno())
    sw.service()
    out = [_received(sw.peers[2]) + _received(sw.peers[3])]  # type: ignore[attr-defined]
    for t in steps:
        clock[0] = t
        if nat is not None:
            tmglue.set_clock(nat, t)
        sw.service()
        out.append(_received(sw.peers[2]) + _received(sw.peers[3]))  # type: ignore[attr-defined]
    return out


def test_queue_clocks_and_depths_identical_with_an_injected_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """A burst of four priorities into port 2 (two queues with rates, a port rate) and
    frames to unshaped port 3 between them: every frame out, with the enqueue time and
    depth, the dequeue delta and depth and the egress time it carries, equal on both
    backends, drain after drain."""
    clock = [T0]
    monkeypatch.setattr(switch_mod, "time", types.SimpleNamespace(monotonic=lambda: clock[0], sleep=time.sleep))
    frames = [_frame(3 if i % 5 == 4 else 2, (i * 7 + i // 4) % 4, i) for i in range(36)]
    steps = [T0 + 0.0013 * k for k in range(1, 80)]
    got = {}
    for backend in ("python", "native"):
        clock[0] = T0  # the switch's clock origin (Switch._t0)
        sw = _switch(backend)
        sw.set_queue_rate(300, 2, 3)
        sw.set_queue_rate(500, 2, 1)
        sw.set_port_rate(900, 2)
        try:
            got[backend] = _run(sw, clock, frames, steps)
            if backend == "native":
                assert not any(sw._tm[2].queues)  # every packet to port 2 waited in C
        finally:
            _close(sw)
    py, nat = got["python"], got["native"]
    for k, (a, b) in enumerate(zip(py, nat, strict=True)):
        assert a == b, f"drain {k}: {len(a)} frames against {len(b)}"
    out = [f for batch in nat for f in batch]
    assert 30 <= len(out) == sum(map(len, py))  # a queue full at times (depth 8): a drop
    assert max(_field(f, "enq_depth") for f in out) > 3 and max(_field(f, "deq_depth") for f in out) > 3
    assert max(_field(f, "deq_delta") for f in out) > 10000  # microseconds waited
    to3 = [f for f in out if f[14] == 0 and f[15] == 3]
    assert to3 and all(_field(f, "deq_delta") == 0 and _field(f, "deq_depth") == 0 for f in to3)


def test_loop_in_c_fills_depths_exactly_and_times_within_the_run() -> None:
    """The loop in C, real clock, an unshaped port: depths 0, enqueue == dequeue (delta 0),
    ingress <= egress time, all between the switch's clock before and after."""
    from targets.embedded.native.nloop import NativeLoop

    sw = _switch("native")
    ep = select.epoll()
    loop = NativeLoop(ep)
    try:
        assert loop.refresh([sw])
        before = sw._now_us()
        out = []
        for k in range(0, 40, 8):  # (a datagram socket pair queues about 10)
            for i in range(k, k + 8):
                sw.peers[1].send(_frame(3, i % 4, i))  # type: ignore[attr-defined]
            while loop.run(0.01)[0] != 0:
                pass
            out += _received(sw.peers[3])  # type: ignore[attr-defined]
        after = sw._now_us()
    finally:
        loop.close()
        ep.close()
        _close(sw)
    assert len(out) == 40 and [int.from_bytes(f[-2:], "big") for f in out] == list(range(40))
    for f in out:
        assert _field(f, "enq_depth") == _field(f, "deq_depth") == _field(f, "deq_delta") == 0
        ig, eg = _field(f, "ig_ts"), _field(f, "eg_ts")
        assert before <= ig <= eg <= after, (before, ig, eg, after, {n: _field(f, n) for n in OFF})
        assert _field(f, "enq_ts") == eg & 0xFFFFFFFF
