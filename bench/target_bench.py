"""Packets per second of the embedded target (and of BMv2 when installed).

Each run starts a testbed (switch in its own namespace, veth ports), installs entries
over P4Runtime, blasts a bounded number of frames into port 1 from the testbench
namespace and counts what comes out of port 2. Two figures per program and target:

- saturated rate: frames out / time between first and last frame out, while offered
  load exceeds what the switch can do (socket buffers absorb the excess);
- lossless rate: the highest offered rate (a short binary search) at which every frame
  comes out.

Programs: ``forward`` (p4src/forward.p4, one LPM table plus egress tables) and
``registers`` (tests/p4/registers.p4: 32 register read-add-writes per packet).

Bounds, measured in the same run: ``bare``, a Python AF_PACKET forwarder doing no work
(the I/O ceiling), and ``hand``, the same loop with each program's work hand-coded for
the benchmark's frame (bench/bare_forwarder.py; tests/test_bench_floors.py checks its
output bytes against the embedded target's) -- the ceiling for a Python target running
that program.

    python -m bench.target_bench [--packets 20000] [--targets embedded,bmv2,hand,bare]
"""

from __future__ import annotations

import argparse
import os
import select
import socket
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from finsy import P4TableAction, P4TableEntry, P4TableMatch
from rich.table import Table

from bench.bare_forwarder import BENCH_DST, BENCH_EGRESS_PORT, BENCH_NEXT_HOP_MAC, BENCH_PORT_MAC
from controller.output import TableConsole
from experiments.accounting import process_cpu_seconds
from targets.launch import bmv2_available
from targets.netns import in_netns
from targets.p4rt_client import P4RuntimeClient
from targets.testbed import Testbed

ROOT = Path(__file__).resolve().parent.parent
console = TableConsole()


@dataclass
class Result:
    program: str
    target: str
    saturated_pps: float
    lossless_pps: float
    cpu_us: float  # switch process CPU per frame out in the saturation run


def _frame(program: str) -> bytes:
    from scapy.all import IP, UDP, Ether

    if program == "registers":
        from tests.p4.packets import RegisterHeavy  # noqa: PLC0415 (test-only header)

        return bytes(Ether(dst="00:00:00:00:00:02", src="00:00:00:00:00:01") / IP(src="10.0.0.1", dst="10.0.0.2")
                     / UDP(sport=5000) / RegisterHeavy(index=3, values=list(range(32))))
    return bytes(Ether(dst="00:00:00:00:01:00", src="00:00:0a:00:00:01") / IP(src="10.0.0.1", dst="10.0.0.2")
                 / UDP(sport=1000, dport=2000) / (b"\x00" * 18))


def _program_files(program: str) -> tuple[Path, Path]:
    if program == "forward":
        base = ROOT / "p4src" / "build" / "forward"
    else:
        base = ROOT / "tests" / "p4" / "build" / program
    return base.with_suffix(".json"), base.with_suffix(".p4info.txt")


def _install(c: P4RuntimeClient, program: str) -> None:
    if program == "forward":
        c.write(+P4TableEntry("ipv4_routes", match=P4TableMatch(dst_addr=f"{BENCH_DST}/32"),
                              action=P4TableAction("set_next_hop", dmac=BENCH_NEXT_HOP_MAC, port=BENCH_EGRESS_PORT)),
                +P4TableEntry("port_macs", match=P4TableMatch(egress_port=BENCH_EGRESS_PORT),
                              action=P4TableAction("set_source_mac", smac=BENCH_PORT_MAC)))
    else:  # registers.p4: port 1 -> 2, and the 32 read-add-writes happen on the way
        c.write(+P4TableEntry("port_forward", match=P4TableMatch(ingress_port=1),
                              action=P4TableAction("set_egress_port", port=2)))


def _blast(tb: Testbed, frame: bytes, count: int, pps: float | None) -> tuple[int, float]:
    """Send ``count`` frames (paced at ``pps`` if given); return (received, out-duration)."""
    rx = tb.socks[2]
    tx = in_netns(tb.ns_tb, _raw_tx, "t1")
    got = 0
    first = last = 0.0
    done = threading.Event()

    def sender() -> None:
        t0 = time.perf_counter()
        for i in range(count):
            if pps:
                target = t0 + i / pps
                while time.perf_counter() < target:
                    pass
            try:
                tx.send(frame)
            except BlockingIOError:
                select.select([], [tx], [], 0.01)
        done.set()

    th = threading.Thread(target=sender)
    th.start()
    idle_deadline = None
    while True:
        r, _, _ = select.select([rx], [], [], 0.2)
        now = time.perf_counter()
        if r:
            try:
                while True:
                    rx.recv(65536)
                    got += 1
                    last = time.perf_counter()
                    if got == 1:
                        first = last
            except BlockingIOError:
                pass
            idle_deadline = None
        elif done.is_set():
            if idle_deadline is None:
                idle_deadline = now + 1.0
            elif now > idle_deadline:
                break
        if got >= count:
            break
    th.join()
    tx.close()
    return got, (last - first) if got > 1 else 0.0


def _raw_tx(iface: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 << 20)
    s.bind((iface, 0))
    return s


def measure(program: str, target: str, packets: int) -> Result:
    """Run one program on one target (``bare``: the bare forwarder, no program; ``hand``:
    the program's work hand-coded in that forwarder); return its rates."""
    json_path, p4info = _program_files(program)
    if not json_path.exists():
        raise SystemExit(f"{json_path} missing: run `make p4`")
    bare = target in ("bare", "hand")
    work = "none" if target == "bare" else program
    kw = {"command": [sys.executable, "-m", "bench.bare_forwarder", "--work", work]} if bare else {
        "target": "embedded" if target in ("embedded", "native") else target}
    # the embedded switch's backend: python (the row "embedded") or native (C), via the environment
    saved = os.environ.get("GRADNET_BACKEND")
    os.environ["GRADNET_BACKEND"] = "native" if target == "native" else "python"
    try:
        return _measure(program, target, packets, json_path, p4info, bare, kw)
    finally:
        if saved is None:
            os.environ.pop("GRADNET_BACKEND", None)
        else:
            os.environ["GRADNET_BACKEND"] = saved


def _measure(program: str, target: str, packets: int, json_path: Path, p4info: Path, bare: bool,
             kw: dict) -> Result:
    with Testbed(2, **kw) as tb:
        c = None
        if not bare:
            c = P4RuntimeClient(tb.grpc_addr)
            c.set_pipeline(p4info, json_path)
            _install(c, program)
        frame = _frame(program)
        tb.drain()
        # warm-up (and a check that the path works at all)
        got, _ = _blast(tb, frame, 200, 2000)
        if got < 190:
            raise SystemExit(f"{program} on {target}: only {got}/200 warm-up frames came out\n{tb.log_tail()}")
        cpu0 = process_cpu_seconds(tb.proc.pid) or 0.0
        got, dt = _blast(tb, frame, packets, None)
        cpu = (process_cpu_seconds(tb.proc.pid) or 0.0) - cpu0
        saturated = got / dt if dt > 0 else 0.0
        lo, hi = 0.0, max(saturated * 1.2, 1000.0)
        for _ in range(5):
            mid = (lo + hi) / 2
            n = min(packets, max(2000, int(mid * 1.5)))
            got, _ = _blast(tb, frame, n, mid)
            if got >= n:
                lo = mid
            else:
                hi = mid
        if c is not None:
            c.close()
    return Result(program, target, saturated, lo, cpu / got * 1e6 if got else 0.0)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: measure and print the table."""
    p = argparse.ArgumentParser(prog="python -m bench.target_bench", description=__doc__.splitlines()[0])
    p.add_argument("--packets", type=int, default=20000, help="frames per saturation run (default 20000)")
    p.add_argument("--programs", default="forward,registers", help="comma-separated: forward,registers")
    p.add_argument("--targets", default=None,
                   help="embedded,native,bmv2,hand,bare (default: all, bmv2 only if installed; embedded is the "
                        "Python backend, native the program compiled to C)")
    args = p.parse_args(argv)
    if os.geteuid() != 0:
        print("target_bench needs root (network namespaces)", file=sys.stderr)
        return 2
    targets = args.targets.split(",") if args.targets else (
        ["embedded", "native", "bmv2", "hand", "bare"] if bmv2_available() else ["embedded", "native", "hand", "bare"])
    unknown = set(targets) - {"embedded", "native", "bmv2", "hand", "bare"}
    if unknown:
        p.error(f"unknown target(s) {', '.join(sorted(unknown))}: choose from embedded, native, bmv2, hand, bare")
    results: list[Result] = []
    bare: Result | None = None
    for prog in args.programs.split(","):
        for tgt in targets:
            if tgt == "bare":
                if bare is None:  # the forwarder runs no program: measured once
                    console.print("[dim]measuring the bare Python AF_PACKET forwarder ...[/dim]")
                    bare = measure("forward", "bare", args.packets)
                continue
            what = f"{prog} hand-coded in Python" if tgt == "hand" else f"{prog} on {tgt}"
            console.print(f"[dim]measuring {what} ...[/dim]")
            results.append(measure(prog, tgt, args.packets))
    console.print(results_table(results, bare))
    console.print("[dim]bare = a Python AF_PACKET forwarder without P4 (bench/bare_forwarder.py), the "
                  "I/O ceiling; hand = the same forwarder doing the program's work in hand-written Python "
                  "(output bytes checked equal to the embedded target's), the ceiling for a Python target "
                  "running that program. Goals: embedded >= 2x BMv2 and >= 0.8x bare. CPU us/frame is the "
                  "switch process's CPU time per frame out while saturated (steadier than pps on a shared "
                  "machine).[/dim]")
    if "native" in targets:  # ina.p4 too, in process (the switch's own CPU, no veths)
        from bench import native_inprocess

        native_inprocess.main(["--packets", str(min(args.packets, 6000))])
    return 0


def results_table(results: list[Result], bare: Result | None) -> Table:
    """One row per program and target, with ratios to BMv2, to the hand-coded program and
    to the bare forwarder."""
    table = Table(title="P4 target packet rate (1 core per switch, 2-vCPU machine)")
    for col in ("program", "target", "saturated pps", "lossless pps", "CPU us/frame",
                "CPU vs python", "vs BMv2", "vs hand-coded", "vs bare"):
        table.add_column(col, justify="left" if col in ("program", "target") else "right")
    by = {(r.program, r.target): r for r in results}

    def ratio(r: Result, ref: Result | None) -> str:
        return f"{r.lossless_pps / ref.lossless_pps:.2f}x" if ref and ref.lossless_pps else "-"

    def cpu_ratio(r: Result) -> str:  # how many times less CPU a frame than the Python backend
        py = by.get((r.program, "embedded"))
        return f"{py.cpu_us / r.cpu_us:.2f}x" if py and r.cpu_us else "-"

    names = {"hand": "hand-coded Python", "embedded": "embedded (python)", "native": "embedded (native C)"}
    for r in results:
        table.add_row(r.program, names.get(r.target, r.target), f"{r.saturated_pps:,.0f}",
                      f"{r.lossless_pps:,.0f}", f"{r.cpu_us:.1f}", cpu_ratio(r),
                      ratio(r, by.get((r.program, "bmv2"))) if r.target != "hand" else "-",
                      ratio(r, by.get((r.program, "hand"))), ratio(r, bare))
    if bare is not None:
        table.add_row("(none)", "bare", f"{bare.saturated_pps:,.0f}", f"{bare.lossless_pps:,.0f}",
                      f"{bare.cpu_us:.1f}", "-", "-", "-", "1.00x")
    return table


if __name__ == "__main__":
    sys.exit(main())
