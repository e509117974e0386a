"""Packets per second of the embedded target (and of BMv2 when installed).

Each run starts a testbed (switch in its own namespace, veth ports), installs entries
over P4Runtime, blasts a bounded number of frames into port 1 from the testbench
namespace and counts what comes out of port 2. Two figures per program and target:

- saturated rate: frames out / time between first and last frame out, while offered
  load exceeds what the switch can do (socket buffers absorb the excess);
- lossless rate: the highest offered rate (a short binary search) at which every frame
  comes out.

Programs: ``forward`` (p4src/forward.p4, one LPM table plus egress tables), ``ina``
(p4src/ina.p4 as an aggregating switch: GRADs of two ranks with 64 values each, every
second one completing an aggregate that leaves as one RESULT, so half as many frames
come out as go in; rates and CPU are per frame in), ``ina-mc`` (the same switch fed
RESULTs from the PS, each multicast by the PRE to 4 ports; port 2's copies are counted)
and ``registers``
(tests/p4/registers.p4: 32 register read-add-writes per packet).

Bounds, measured in the same run: ``bare``, a Python AF_PACKET forwarder doing no work
(the I/O ceiling), and ``hand``, the same loop with each program's work hand-coded for
the benchmark's frame (bench/bare_forwarder.py; tests/test_bench_floors.py checks its
output bytes against the embedded target's) -- the ceiling for a Python target running
that program; ``bare-c``, the same forwarder in C (bench/bare_forwarder.c: recvmmsg and
sendmmsg batches, one epoll), the ceiling for the native backend.

    python -m bench.target_bench [--packets 20000] [--targets embedded,native,bmv2,hand,bare,bare-c]
"""

from __future__ import annotations

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
from wire.argtypes import Parser, count, described, names

ROOT = Path(__file__).resolve().parent.parent
console = TableConsole()


@dataclass
class Result:
    program: str
    target: str
    saturated_pps: float
    lossless_pps: float
    cpu_us: float  # switch process CPU per frame in, in the saturation run


OUT_PER_IN = {"ina": 0.5}  # frames out (of port 2) per frame in (ina: one aggregate per two GRADs)
MC_PORTS = (2, 3, 4, 5)  # ina-mc: the RESULT group's ports
TARGETS = ("embedded", "native", "bmv2", "hand", "bare", "bare-c")
PROGRAMS = ("forward", "ina", "ina-mc", "registers")


class _Frames:
    """The frames of a program's stream: one frame again and again, or for ina GRADs of
    ranks 0 and 1 on fragment after fragment (never reused, across runs)."""

    def __init__(self, program: str) -> None:
        self.program, self.frag = program, 0
        self.one = _frame(program) if not program.startswith("ina") else b""

    def take(self, count: int) -> list[bytes]:
        if not self.program.startswith("ina"):
            return [self.one] * count
        import numpy as np
        from scapy.all import IP, UDP, Ether

        from wire.ina import MsgType, encode_ina

        vals = np.arange(64, dtype=np.int32)
        probe = encode_ina(MsgType.GRAD, 1, 0, 0, 1, 0, 1, 1, 2, values=vals)
        hdr = bytes(Ether() / IP(src="10.0.0.2", dst="10.255.0.1") / UDP(sport=40000, dport=40000, chksum=0) / probe)
        hdr = hdr[:len(hdr) - len(probe)]  # the same headers for every GRAD (UDP checksum 0)
        out = []
        if self.program == "ina-mc":  # RESULTs of fragment after fragment, from the PS
            hdr = bytes(Ether() / IP(src="10.0.0.1", dst="10.255.0.1") / UDP(sport=40000, dport=40000, chksum=0))
            for _ in range(count):
                frag, self.frag = self.frag, self.frag + 1
                out.append(hdr + encode_ina(MsgType.RESULT, 1, 0, frag, 1, 0, 3, 2, 2, values=vals))
            return out
        for _ in range((count + 1) // 2):
            frag, self.frag = self.frag, self.frag + 1
            out += [hdr + encode_ina(MsgType.GRAD, 1, rank, frag, 1, 0, 1 << rank, 1, 2, values=vals) for rank in (0, 1)]
        return out[:count]


def _frame(program: str) -> bytes:
    from scapy.all import IP, UDP, Ether

    if program == "registers":
        from tests.p4.packets import RegisterHeavy  # noqa: PLC0415 (test-only header)

        return bytes(Ether(dst="00:00:00:00:00:02", src="00:00:00:00:00:01") / IP(src="10.0.0.1", dst="10.0.0.2")
                     / UDP(sport=5000) / RegisterHeavy(index=3, values=list(range(32))))
    return bytes(Ether(dst="00:00:00:00:01:00", src="00:00:0a:00:00:01") / IP(src="10.0.0.1", dst="10.0.0.2")
                 / UDP(sport=1000, dport=2000) / (b"\x00" * 18))


def _program_files(program: str) -> tuple[Path, Path]:
    if program in ("forward", "ina", "ina-mc"):
        base = ROOT / "p4src" / "build" / program.removesuffix("-mc")
    else:
        base = ROOT / "tests" / "p4" / "build" / program
    return base.with_suffix(".json"), base.with_suffix(".p4info.txt")


def _install(c: P4RuntimeClient, program: str) -> None:
    if program == "forward":
        c.write(+P4TableEntry("ipv4_routes", match=P4TableMatch(dst_addr=f"{BENCH_DST}/32"),
                              action=P4TableAction("set_next_hop", dmac=BENCH_NEXT_HOP_MAC, port=BENCH_EGRESS_PORT)),
                +P4TableEntry("port_macs", match=P4TableMatch(egress_port=BENCH_EGRESS_PORT),
                              action=P4TableAction("set_source_mac", smac=BENCH_PORT_MAC)))
    elif program.startswith("ina"):  # the aggregating switch 10.255.0.1 of job 1; RESULTs to port 2 (ina-mc: 2-5)
        from finsy import P4MulticastGroupEntry

        a = "MyIngress.aggregator."
        c.write(+P4TableEntry(a + "ina_jobs", match=P4TableMatch({"hdr.ina.job_id": 1}),
                              action=P4TableAction(a + "set_job", ps_ip="10.0.0.1", result_group=1001)),
                +P4TableEntry("ina_fabric_ports", match=P4TableMatch(ingress_port=1),
                              action=P4TableAction("MyIngress.admission.fabric_port")),
                +P4TableEntry("ipv4_routes", match=P4TableMatch(dst_addr="10.0.0.1/32"),  # the PS
                              action=P4TableAction("set_next_hop", dmac="00:00:00:00:00:02", port=2)),
                +P4MulticastGroupEntry(1001, replicas=list(MC_PORTS) if program == "ina-mc" else [2]))
        c.write(~P4TableEntry(a + "ina_switch", is_default_action=True, action=P4TableAction(
            a + "set_switch_identity", switch_id=1, switch_ip="10.255.0.1", sd_id=1, sd_ip="10.255.0.1")))
    else:  # registers.p4: port 1 -> 2, and the 32 read-add-writes happen on the way
        c.write(+P4TableEntry("port_forward", match=P4TableMatch(ingress_port=1),
                              action=P4TableAction("set_egress_port", port=2)))


def _blast(tb: Testbed, frames: list[bytes], pps: float | None, expect: int) -> tuple[int, float]:
    """Send ``frames`` (paced at ``pps`` if given); return (received, out-duration),
    waiting for ``expect`` frames out at most."""
    count = len(frames)
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
                tx.send(frames[i])
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
        if got >= expect:
            break
    th.join()
    tx.close()
    return got, (last - first) if got > 1 else 0.0


def _cpu_s(pid: int) -> float:
    """CPU seconds of all threads of ``pid`` from the scheduler's nanosecond counters
    (/proc/PID/task/*/schedstat): a fast target spends less than a 10 ms tick of
    /proc/PID/stat on a few thousand frames."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that just ended
    return total / 1e9 if total else (process_cpu_seconds(pid) or 0.0)


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
    bare = target in ("bare", "hand", "bare-c")
    work = {"bare": "none", "bare-c": "c"}.get(target, program)
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
    with Testbed(len(MC_PORTS) + 1 if program == "ina-mc" else 2, **kw) as tb:
        c = None
        if not bare:
            c = P4RuntimeClient(tb.grpc_addr)
            c.set_pipeline(p4info, json_path)
            _install(c, program)
        frames, per = _Frames(program), OUT_PER_IN.get(program, 1.0)
        tb.drain()
        # warm-up (and a check that the path works at all)
        got, _ = _blast(tb, frames.take(200), 2000, int(200 * per))
        if got < 190 * per:
            raise SystemExit(f"{program} on {target}: only {got}/{int(200 * per)} warm-up frames came out\n"
                             f"{tb.log_tail()}")
        batch = frames.take(packets)
        cpu0 = _cpu_s(tb.proc.pid)
        got, dt = _blast(tb, batch, None, int(packets * per))
        cpu = _cpu_s(tb.proc.pid) - cpu0
        frames_in = got / per  # what the switch received for what came out
        saturated = frames_in / dt if dt > 0 else 0.0
        lo, hi = 0.0, max(saturated * 1.2, 1000.0)
        for _ in range(5):
            mid = (lo + hi) / 2
            n = min(packets, max(2000, int(mid * 1.5)))
            got, _ = _blast(tb, frames.take(n), mid, int(n * per))
            if got >= int(n * per):
                lo = mid
            else:
                hi = mid
        if c is not None:
            c.close()
    return Result(program, target, saturated, lo, cpu / frames_in * 1e6 if frames_in else 0.0)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: measure and print the table."""
    p = Parser(prog="python -m bench.target_bench", description=described(__doc__))
    p.add_argument("--packets", type=count, default=20000, help="frames per saturation run (default 20000)")
    p.add_argument("--programs", type=names(*PROGRAMS), default=["forward", "ina"], help="comma-separated: forward,ina,ina-mc,registers "
                   "(ina-mc: RESULTs multicast to 4 ports)")
    p.add_argument("--targets", type=names(*TARGETS), default=None,
                   help=f"{','.join(TARGETS)} (default: all, bmv2 only if installed; embedded is the Python backend, "
                        "native the program compiled to C, bare and bare-c forwarders without P4 in Python and C)")
    args = p.parse_args(argv)
    if os.geteuid() != 0:
        print("target_bench needs root (network namespaces)", file=sys.stderr)
        return 2
    targets = args.targets or [t for t in TARGETS if t != "bmv2" or bmv2_available()]
    programs = args.programs
    results: list[Result] = []
    bounds: dict[str, Result] = {}
    for prog in programs:
        for tgt in targets:
            if tgt in ("bare", "bare-c"):
                if tgt not in bounds:  # the forwarders run no program: measured once
                    console.print(f"[dim]measuring the {tgt} AF_PACKET forwarder ...[/dim]")
                    bounds[tgt] = measure("forward", tgt, args.packets)
                continue
            if tgt == "hand" and prog.startswith("ina"):
                continue  # no hand-coded INA
            what = f"{prog} hand-coded in Python" if tgt == "hand" else f"{prog} on {tgt}"
            console.print(f"[dim]measuring {what} ...[/dim]")
            results.append(measure(prog, tgt, args.packets))
    console.print(results_table(results, bounds.get("bare"), bounds.get("bare-c")))
    console.print("[dim]bare = a Python AF_PACKET forwarder without P4 (bench/bare_forwarder.py), the "
                  "I/O ceiling of a Python target; bare-c = the same in C (bench/bare_forwarder.c: recvmmsg and "
                  "sendmmsg batches), the ceiling of the native backend; hand = the Python forwarder doing the "
                  "program's work in hand-written Python (output bytes checked equal to the embedded target's). "
                  "CPU us/frame is the switch process's CPU time per frame in while saturated (steadier than "
                  "pps on a shared machine); 'CPU / bare C' is that over the C forwarder's (goal for native: "
                  "<= 1.25). Rates of fast targets are bounded by the benchmark's Python sender.[/dim]")
    if "native" in targets:  # ina.p4 too, in process (the switch's own CPU, no veths)
        from bench import native_cpuport, native_inprocess, native_tm

        native_inprocess.main(["--packets", str(min(args.packets, 6000))])
        native_tm.main(["--packets", str(min(args.packets, 4000))])  # through a shaped port
        native_cpuport.main(["--frames", str(min(args.packets, 3000))])  # packet-ins, queue clocks
    return 0


def results_table(results: list[Result], bare: Result | None, bare_c: Result | None = None) -> Table:
    """One row per program and target, with ratios to BMv2, to the hand-coded program,
    to the bare forwarder and, in CPU per frame, to the bare C forwarder."""
    table = Table(title="P4 target packet rate (1 core per switch; shared, loaded 2-core machine)")
    for col in ("program", "target", "saturated pps", "lossless pps", "CPU us/frame",
                "CPU vs python", "vs BMv2", "vs hand-coded", "vs bare", "CPU / bare C"):
        table.add_column(col, justify="left" if col in ("program", "target") else "right")
    by = {(r.program, r.target): r for r in results}

    def ratio(r: Result, ref: Result | None) -> str:
        return f"{r.lossless_pps / ref.lossless_pps:.2f}x" if ref and ref.lossless_pps else "-"

    def cpu_ratio(r: Result) -> str:  # how many times less CPU a frame than the Python backend
        py = by.get((r.program, "embedded"))
        return f"{py.cpu_us / r.cpu_us:.2f}x" if py and r.cpu_us else "-"

    def over_c(r: Result) -> str:
        return f"{r.cpu_us / bare_c.cpu_us:.2f}" if bare_c and bare_c.cpu_us else "-"

    names = {"hand": "hand-coded Python", "embedded": "embedded (python)", "native": "embedded (native C)"}
    for r in results:
        table.add_row(r.program, names.get(r.target, r.target), f"{r.saturated_pps:,.0f}",
                      f"{r.lossless_pps:,.0f}", f"{r.cpu_us:.1f}", cpu_ratio(r),
                      ratio(r, by.get((r.program, "bmv2"))) if r.target != "hand" else "-",
                      ratio(r, by.get((r.program, "hand"))), ratio(r, bare), over_c(r))
    for name, b in (("bare (Python)", bare), ("bare C", bare_c)):
        if b is not None:
            table.add_row("(none)", name, f"{b.saturated_pps:,.0f}", f"{b.lossless_pps:,.0f}", f"{b.cpu_us:.1f}",
                          "-", "-", "-", ratio(b, bare), over_c(b))
    return table


if __name__ == "__main__":
    sys.exit(main())
