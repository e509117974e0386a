"""CPU per packet of the embedded target's pipeline in process (no sockets), Python
backend against native, on forward.p4 (a routed UDP frame) and ina.p4 (GRADs of two
ranks, 64 values each, every second one completing an aggregate that is multicast to
2 ports): what the switch itself costs, without the kernel's veth work.

    python -m bench.native_inprocess [--packets 20000]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from rich.table import Table

from controller.output import TableConsole


def _forward(backend: str, packets: int) -> tuple[Any, list[tuple[int, bytes]]]:
    from scapy.all import IP, UDP, Ether

    from targets.embedded.state import TableEntry
    from targets.embedded.switch import Switch
    from tests.native_pair import ROOT

    sw = Switch(seed=1, backend=backend)
    p = sw.load_program((ROOT / "p4src" / "build" / "forward.json").read_bytes())
    sw.install_program(p)
    routes, macs = "MyIngress.forwarding.ipv4_routes", "MyEgress.mac_rewrite.port_macs"
    p.tables[routes].insert(TableEntry(((0x0A000002, 32),), p.action_call(
        routes, "MyIngress.forwarding.set_next_hop", (0x000000000002, 2))))
    p.tables[macs].insert(TableEntry((2,), p.action_call(macs, "MyEgress.mac_rewrite.set_source_mac", (0x020000000102,))))
    frame = bytes(Ether(src="00:00:0a:00:00:01", dst="02:00:00:01:00:01") / IP(src="10.0.0.1", dst="10.0.0.2")
                  / UDP(sport=1000, dport=2000) / (b"\x00" * 18))
    return sw, [(1, frame)]


def _ina(backend: str, packets: int) -> tuple[Any, list[tuple[int, bytes]]]:
    import numpy as np
    from scapy.all import IP, UDP, Ether

    from controller.ina import ina_program_path
    from targets.embedded.state import Replica, TableEntry
    from tests.ina_probe import aggregating_switch
    from wire.ina import MsgType, encode_ina

    os.environ["GRADNET_BACKEND"] = backend
    sw, p = aggregating_switch(ina_program_path(64).read_bytes())
    sw.pre.set_group(1001, [Replica(2, 0), Replica(3, 0)], create=True)
    routes = "MyIngress.forwarding.ipv4_routes"  # the complete aggregate goes to the PS on port 2
    p.tables[routes].insert(TableEntry(((0x0A000001, 32),), p.action_call(
        routes, "MyIngress.forwarding.set_next_hop", (0x000000000002, 2))))
    rng = np.random.default_rng(1)
    vals = rng.integers(-1000, 1000, 64).astype(np.int32)
    probe = encode_ina(MsgType.GRAD, 1, 0, 0, 1, 0, 1, 1, 2, values=vals)
    hdr = bytes(Ether() / IP(src="10.0.0.2", dst="10.255.0.1") / UDP(sport=40000, dport=40000, chksum=0) / probe)
    hdr = hdr[:len(hdr) - len(probe)]  # the same headers for every GRAD (UDP checksum 0)
    frames = []
    for i in range(packets):  # fragment after fragment, two ranks each: every second one completes
        frag, rank = i // 2, i % 2
        frames.append((1, hdr + encode_ina(MsgType.GRAD, 1, rank, frag, 1, 0, 1 << rank, 1, 2, values=vals)))
    return sw, frames


def measure(make: Any, backend: str, packets: int) -> tuple[float, int]:
    """(CPU µs per packet, frames out) over ``packets`` packets."""
    sw, frames = make(backend, packets)
    out = 0
    t0 = time.process_time()
    for i in range(packets):
        port, f = frames[i % len(frames)]
        out += len(sw.process(port, f))
    return (time.process_time() - t0) / packets * 1e6, out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.native_inprocess", description=__doc__.splitlines()[0])
    p.add_argument("--packets", type=int, default=20000, help="packets per program and backend (default 20000)")
    args = p.parse_args(argv)
    if args.packets < 1:
        p.error("--packets must be >= 1")
    table = Table(title="embedded target in process: CPU per packet (shared, loaded 2-core machine)")
    for col in ("program", "python µs", "native µs", "ratio", "frames out (each)"):
        table.add_column(col, justify="left" if col == "program" else "right")
    saved = os.environ.get("GRADNET_BACKEND")
    try:
        for name, make in (("forward", _forward), ("ina (64 values)", _ina)):
            py, out = measure(make, "python", args.packets)
            nat, out2 = measure(make, "native", args.packets)
            table.add_row(name, f"{py:.1f}", f"{nat:.1f}", f"{py / nat:.2f}x", f"{out} / {out2}")
    finally:
        if saved is None:
            os.environ.pop("GRADNET_BACKEND", None)
        else:
            os.environ["GRADNET_BACKEND"] = saved
    TableConsole().print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
