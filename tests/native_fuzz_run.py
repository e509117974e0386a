"""Fuzzed frames through one program on the native backend, in a process of its own
(tests/test_native_sanitizers.py runs it with a sanitizer build): random entries, then
``count`` mutated frames of every protocol; prints how many frames came out. Then the
same frames through the loop in C, unless the third argument is ``noloop``."""

from __future__ import annotations

import contextlib
import sys

import numpy as np

from targets.embedded.state import CloneSession, Replica
from targets.embedded.switch import Switch
from tests.native_pair import ROOT, fill_profiles, fill_tables, fill_value_sets
from tests.test_native_equivalence import _frames

REFLECTS = {"union_features", "varbit_features"}  # every frame back out of its ingress port


def main(argv: list[str]) -> int:
    name, count = argv[0], int(argv[1])
    path = next(p for d in ("p4src", "tests/p4") for p in (ROOT / d / "build").glob(f"{name}.json"))
    sw = Switch(seed=1, backend="native", cpu_port=64, priority_queues=8)
    sw.install_program(sw.load_program(path.read_bytes()))
    twin = Switch(seed=1, backend="python", cpu_port=64, priority_queues=8)  # fill_tables writes pairs
    twin.install_program(twin.load_program(path.read_bytes()))
    rng = np.random.default_rng(7)
    for g in (1, 2, 3, 5, 6, 1001):  # multicast groups and clone sessions (copies made in C, pre.c)
        reps = [Replica(int(p), g) for p in rng.choice([0, 1, 2, 3, 64], size=g % 5)]
        sw.pre.set_group(g, reps, create=True)
        sw.pre.set_clone_session(g, CloneSession(reps[:2], packet_length_bytes=int(rng.choice([0, 9, 60]))), create=True)
    frames = _frames(rng, count)
    if name == "reenter_loop":  # its probes: every mode, limits up to past the loop bound, odd lengths
        frames += [bytes(12) + b"\x88\xb7" + bytes([int(rng.integers(0, 6)), int(rng.integers(0, 80))])
                   + bytes(int(rng.integers(0, 40))) for _ in range(count // 4)]
    fill_tables((twin, sw), frames[:200], rng)
    fill_profiles((twin, sw), frames[:200], rng)  # profiles.c
    fill_value_sets((twin, sw), rng)  # vsets.c
    for tname in set(sw.program.direct_meters.values()):  # direct.c
        t = sw.program.tables[tname]
        for e in t.entries():
            e.meter_config = (int(rng.integers(0, 100)), int(rng.integers(0, 9)), 100, 9)
            t.direct_written(e, counters=False, meter=True)
    for arr in sw.program.meters.values():  # meters.c: rates from none to huge, bursts to 2**40
        for i in range(arr.size):
            cir, cb = int(rng.integers(0, 10**int(rng.integers(0, 12)) + 1)), int(rng.integers(0, 2**40))
            arr.set_config(i, cir, cb, cir + int(rng.integers(0, 1000)), cb + int(rng.integers(0, 100)))
    out = 0
    for i, f in enumerate(frames):
        out += len(sw.process(int(rng.choice([0, 1, 2, 64])), f if i % 7 else f[: int(rng.integers(0, 60))]))
    print(f"{name}: {len(frames)} frames, {out} out, {sw.stats.errors} errors")
    if argv[2:] == ["noloop"]:  # a program that reflects frames would bounce them over the link to each bound
        return 0 if sw.stats.errors == 0 else 1
    peer = Switch(seed=2, backend="native", cpu_port=64, priority_queues=8)  # port 2 of sw, in memory
    # a program that sends every frame back out of its port unchanged would bounce it
    # over the in-memory link forever: its peer runs forward.p4 instead
    peer_path = ROOT / "p4src" / "build" / "forward.json" if name in REFLECTS else path
    peer.install_program(peer.load_program(peer_path.read_bytes()))
    looped, ring = _through_c_loop(sw, peer, frames[:1000], rng, path.read_bytes())
    print(f"{name}: {looped} frames through the loop in C, {ring} over an in-memory link")
    return 0 if sw.stats.errors == 0 else 1


def _through_c_loop(sw: Switch, peer: Switch, frames: list[bytes], rng: np.random.Generator,
                    program: bytes) -> tuple[int, int]:
    """The same frames through the loop in C (loop.c, io.c: recvmmsg, sendmmsg), over
    datagram socket pairs standing in for ports 0-2 (no namespace needed), port 2 joined
    in memory (memlink.c, rate-limited) to port 1 of ``peer``; returns how many the
    switch counted in and how many crossed the in-memory link. Before the last 50 frames
    ``program`` is installed anew, after one run of the loop (the frames left in a batch
    go to the new instance)."""
    import select
    import socket

    from targets.embedded.native import memlink
    from targets.embedded.native.nloop import NativeLoop

    socks = []
    for s in (sw, peer):
        pairs = {p: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM) for p in (0, 1, 2)}
        for a, b in pairs.values():
            a.setblocking(False)
            b.setblocking(False)
        s._ports = {p: a for p, (a, _) in pairs.items()}
        s._fd_port = {a.fileno(): p for p, (a, _) in pairs.items()}
        socks.append(pairs)
    memlink.connect(sw, 2, peer, 1, memlink.LinkParams(bw_mbit=100.0, max_frame=9000), memlink.LinkParams())
    # shaped ports (tm.c): queues with rates and small depths, a byte rate, drained on the loop's timer
    sw.set_queue_depth(3)
    sw.set_queue_rate(5000, None, 7)  # queue 7: priority 0, on every port
    sw.set_port_rate(20000, 0, frame_bytes=300)
    sw.set_port_rate(30000, 1)
    ep = select.epoll()
    loop = NativeLoop(ep)
    assert loop.refresh([sw, peer]) and sw._ml and peer._ml
    before = sum(s.rx for s in sw.stats.ports.values())
    for i in range(0, len(frames), 50):
        for f in frames[i:i + 50]:
            socks[0][int(rng.choice([0, 1, 2]))][1].send(f or b"\0")
        if i + 50 >= len(frames):  # a program swap with frames perhaps left in a batch
            loop.run(0.01)
            sw.install_program(sw.load_program(program))
            loop.refresh([sw, peer])
        for _ in range(1000):  # until idle (slow-path packets finish in Python); bounded:
            if loop.run(0.01)[0] == 0:  # a frame may bounce between the two switches
                break
        for _, b in (*socks[0].values(), *socks[1].values()):  # empty what the switches sent
            while True:
                try:
                    b.recv(70000)
                except BlockingIOError:
                    break
        for f in frames[i:i + 50]:  # and every frame straight into the ring, as sw's Python path sends
            with contextlib.suppress(BlockingIOError):  # a length the link refuses: counted
                sw._ml[2].send(f)
        for _ in range(1000):
            if loop.run(0.01)[0] == 0:
                break
    # a burst of long frames (160 kB) in one batch: on cpu_io (unknown destinations) packet-ins past
    # the first size of the events queue (meta.c grows it)
    for k in range(8):  # (a datagram socket pair queues about 10)
        with contextlib.suppress(BlockingIOError):
            socks[0][0][1].send(bytes(rng.integers(0, 256, 12, dtype=np.uint8)) + b"\x88\xb5" + bytes(20000 + k))
    for _ in range(1000):
        if loop.run(0.01)[0] == 0:
            break
    loop.close()
    ep.close()
    for f in frames[:300]:  # one at a time: the Python path after ingress, into the queues in C (np_tm_push)
        sw._receive(int(rng.choice([0, 1, 2])), f)
    sw.service()  # a last drain of the shaped queues outside the loop (what stays is freed with the program)
    qs = sw.queue_stats()
    print(f"shaped queues: {sum(q['enqueued'] for q in qs)} enqueued, {sum(q['dropped'] for q in qs)} dropped")
    ring = memlink.stats(sw)[0]["tx"]["rx_packets"]
    return sum(s.rx for s in sw.stats.ports.values()) - before, ring


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
