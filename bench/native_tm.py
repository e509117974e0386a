"""CPU per packet through a shaped port, Python backend against native, side by side.

forward.p4 in this process, ports 1 and 2 datagram socket pairs (no namespace): bursts
of --burst frames of four priorities (DSCP -> priority) into port 1; port 2 unshaped, or
shaped with a port rate of --rate packets/s (every frame queued, strict priority, the
traffic manager's token bucket): on the Python backend in traffic.py's queues, on the
native one in tm.c's. After each burst the switch's receive (``on_readable``, batched in
C on native) and, a burst's time later, one drain (``service``) run; the CPU time of
those two calls (process time, so not the wait) over the frames that left is the figure.
A last row runs each switch in its own data-plane loop (``run_switches``: on native the
loop in C, which drains on its timer) fed bursts at the port's rate (at most 20,000
packets/s): that thread's CPU time over the frames that left.

    python -m bench.native_tm [--packets 4000] [--burst 32] [--rate 200000]
"""

from __future__ import annotations

import sys
import time
from typing import Any

from rich.table import Table

from controller.output import TableConsole
from wire.argtypes import Parser, count, described


def _switch(backend: str, rate: float | None) -> Any:
    from targets.embedded.switch import Switch
    from tests.test_native_tm import _switch as make

    sw: Switch = make(backend, depth=256)
    if rate is not None:
        sw.set_port_rate(rate, 2)
    return sw


def _cost(backend: str, rate: float | None, frames: list[bytes], burst: int) -> tuple[float, int]:
    """CPU µs per frame out of port 2, and how many left."""
    sw = _switch(backend, rate)
    peer_in, peer_out = sw.peers[1], sw.peers[2]
    fd = sw._ports[1].fileno()
    cpu, out = 0.0, 0
    try:
        for k in range(-burst, len(frames), burst):  # a first burst to warm up (lazy imports), not counted
            for f in frames[k:k + burst] if k >= 0 else frames[:burst]:
                peer_in.send(f)
            t0 = time.process_time()
            sw.on_readable(fd)
            sw.service()
            t1 = time.process_time()
            if rate is not None:
                time.sleep(burst / rate)  # the port's rate lets the rest go (not counted)
                t2 = time.process_time()
                sw.service()
                t1 += time.process_time() - t2
            n = 0
            while True:
                try:
                    peer_out.recv(65536)
                    n += 1
                except BlockingIOError:
                    break
            if k >= 0:
                cpu, out = cpu + t1 - t0, out + n
    finally:
        for s in [*sw._ports.values(), *sw.peers.values()]:
            s.close()
    return cpu / max(1, out) * 1e6, out


def _loop_cost(backend: str, rate: float, frames: list[bytes], burst: int) -> tuple[float, int]:
    """CPU µs of the data-plane thread (``run_switches``: the C loop on native) per frame
    out of port 2, shaped at ``rate``, fed bursts at that rate; how many left."""
    import threading

    from targets.embedded.loop import run_switches

    sw = _switch(backend, rate)
    stop = threading.Event()
    th = threading.Thread(target=run_switches, args=([sw], stop), daemon=True)
    th.start()
    out = 0

    def take() -> int:
        n = 0
        while True:
            try:
                sw.peers[2].recv(65536)
                n += 1
            except BlockingIOError:
                return n

    try:
        time.sleep(0.3)  # the loop takes the ports
        assert th.ident is not None
        clk = time.pthread_getcpuclockid(th.ident)
        c0 = time.clock_gettime(clk)
        for k in range(0, len(frames), burst):
            for f in frames[k:k + burst]:
                while True:
                    try:
                        sw.peers[1].send(f)
                        break
                    except BlockingIOError:  # the switch is behind: wait for it (the load adapts)
                        time.sleep(0.0002)
            time.sleep(burst / rate)
            out += take()
        end = time.monotonic() + 2
        while out < len(frames) and time.monotonic() < end:
            time.sleep(0.01)
            out += take()
        cpu = time.clock_gettime(clk) - c0
    finally:
        stop.set()
        sw.wake()
        th.join(5)
        for s in [*sw._ports.values(), *sw.peers.values()]:
            s.close()
    return cpu / max(1, out) * 1e6, out


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: measure and print the table."""
    p = Parser(prog="python -m bench.native_tm", description=described(__doc__))
    p.add_argument("--packets", type=count, default=4000, help="frames per run (default 4000)")
    p.add_argument("--burst", type=count, default=32, help="frames per burst (default 32)")
    p.add_argument("--rate", type=count, default=200000,
                   help="port 2's rate in packets/s when shaped (default 200000)")
    args = p.parse_args(argv)
    from tests.test_native_tm import _frames

    frames = _frames(64) * (args.packets // 64 + 1)
    frames = frames[:args.packets]
    table = Table(title=f"CPU µs per packet through a shaped port, {args.packets} frames in bursts of {args.burst} "
                        "(in process; shared, loaded 2-core machine)")
    for col in ("port 2", "python", "native", "python / native", "frames out (py / native)"):
        table.add_column(col, justify="left" if col == "port 2" else "right")
    for name, rate in (("unshaped", None), (f"port rate {args.rate} pkt/s", float(args.rate))):
        (py, n1), (nat, n2) = (_cost(b, rate, frames, args.burst) for b in ("python", "native"))
        table.add_row(name, f"{py:.1f}", f"{nat:.1f}", f"{py / nat:.1f}x", f"{n1} / {n2}")
    loop_rate = min(args.rate, 20000)
    (py, n1), (nat, n2) = (_loop_cost(b, loop_rate, frames, args.burst) for b in ("python", "native"))
    table.add_row(f"port rate {loop_rate} pkt/s, the switch's loop thread", f"{py:.1f}", f"{nat:.1f}",
                  f"{py / nat:.1f}x", f"{n1} / {n2}")
    TableConsole().print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
