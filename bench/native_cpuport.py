"""CPU per frame of the two packet kinds the native backend used to hand to Python:
packet-ins (cpu_io.p4, frames to an unknown destination, each to the CPU port and the
packet-in handler) and a program reading the queue clocks and depths (metadata_echo.p4,
which copies them into the frame), Python backend against native. Frames are received
as the switch's loop receives them (``Switch.on_readable``: batched in C on the native
backend), from a datagram socket pair standing in for the port, as many a batch as the
pair queues (net.unix.max_dgram_qlen, often 10): the Python side's cost per batch is
spread over few frames, so the figures are upper bounds for longer batches.

    python -m bench.native_cpuport [--frames 3000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import time
from pathlib import Path

from rich.table import Table

from controller.output import TableConsole
from wire.argtypes import described

ROOT = Path(__file__).resolve().parent.parent
CPU = 255


def _qlen() -> int:
    try:
        return max(1, int(Path("/proc/sys/net/unix/max_dgram_qlen").read_text()) - 1)
    except (OSError, ValueError):
        return 8


def measure(program: str, frame: bytes, backend: str, frames: int, repeats: int) -> tuple[float, int, bool]:
    """Best CPU µs per frame over ``repeats`` runs of ``frames`` frames into port 1;
    the packet-ins handed to the handler and whether the program ran natively."""
    from targets.embedded.switch import Switch

    sw = Switch(seed=1, backend=backend, cpu_port=CPU, priority_queues=1)
    sw.install_program(sw.load_program((ROOT / "tests" / "p4" / "build" / f"{program}.json").read_bytes()))
    pins: list[bytes] = []
    sw.packet_in_handlers.append(pins.append)
    peers = {}
    for port in (1, 2):
        mine, peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        mine.setblocking(False)
        peer.setblocking(False)
        sw._ports[port], sw._fd_port[mine.fileno()] = mine, port
        peers[port] = peer
    batch, best = _qlen(), float("inf")
    try:
        for _ in range(repeats):
            spent, done = 0.0, 0
            while done < frames:
                k = min(batch, frames - done)
                for _ in range(k):
                    peers[1].send(frame)
                t0 = time.process_time()
                sw.on_readable(sw._ports[1].fileno())
                sw._send()
                spent += time.process_time() - t0
                done += k
                while True:  # what left port 2 (metadata_echo), untimed
                    try:
                        peers[2].recv(70000)
                    except BlockingIOError:
                        break
            best = min(best, spent / frames)
    finally:
        for s in (*sw._ports.values(), *peers.values()):
            s.close()
    return best * 1e6, len(pins), sw.program.native is not None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.native_cpuport", description=described(__doc__))
    p.add_argument("--frames", type=int, default=3000, help="frames per run (default 3000)")
    p.add_argument("--repeats", type=int, default=3, help="runs per backend, the best kept (default 3)")
    args = p.parse_args(argv)
    if args.frames < 1 or not 1 <= args.repeats <= 20:
        p.error("--frames must be >= 1, --repeats 1..20")
    unknown = b"\x00\x00\x00\x00\x00\x99" + b"\x00\x00\x00\x00\x00\x01" + b"\x08\x00" + bytes(50)
    echo = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x88\xb6" + struct.pack("!HBBH", 2, 0, 0, 0) + bytes(54)
    table = Table(title=f"CPU µs per frame, received {_qlen()} a batch (shared, loaded 2-core machine)")
    for col in ("program", "python µs", "native µs", "ratio", "packet-ins (each)"):
        table.add_column(col, justify="left" if col == "program" else "right")
    for name, program, frame in (("cpu_io: packet-ins", "cpu_io", unknown),
                                 ("metadata_echo: queue clocks", "metadata_echo", echo)):
        py, pins, _ = measure(program, frame, "python", args.frames, args.repeats)
        nat, pins2, native = measure(program, frame, "native", args.frames, args.repeats)
        if not native:
            print(f"{program}: not run natively (no C compiler?)", file=sys.stderr)
            return 1
        table.add_row(name, f"{py:.1f}", f"{nat:.1f}", f"{py / nat:.2f}x", f"{pins} / {pins2}")
    TableConsole().print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
