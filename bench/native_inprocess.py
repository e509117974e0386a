"""CPU per packet of the embedded target's pipeline in process (no sockets), Python
backend against native, on forward.p4 (a routed UDP frame), ina.p4 (GRADs of two
ranks, 64 values each, every second one completing an aggregate sent to the PS; or
RESULTs from the PS, each multicast to 4 ports) and ndn.p4 (an Interest of a 5-component
name through the FIB, then its Data back through the PIT, name after name; the name is
parsed byte by byte into a header stack): what the switch itself costs, without the
kernel's veth work.

A second table: CPU per single-entry table write (an insert, then its delete, one at a
time, as a controller outside one P4Runtime Write makes them) into a table already
holding --entries entries, on the Python backend, on the native one (the entry written
in place, tblops.c) and on the native one copying the whole table per write (what it
did before single-entry writes).

    python -m bench.native_inprocess [--packets 20000] [--entries 2000] [--writes 300]
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from rich.table import Table

from controller.output import TableConsole
from wire.argtypes import Parser, count, described


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


def _ina_result4(backend: str, packets: int) -> tuple[Any, list[tuple[int, bytes]]]:
    """ina.p4's aggregating switch as ``_ina``, fed RESULTs (from the PS, on port 1), each
    multicast down the job's tree to 4 ports (replicas made by the PRE)."""
    import numpy as np
    from scapy.all import IP, UDP, Ether

    from targets.embedded.state import Replica
    from wire.ina import MsgType, encode_ina

    sw, _ = _ina(backend, 2)
    sw.pre.set_group(1001, [Replica(p, 0) for p in (2, 3, 4, 5)], create=False)
    vals = np.random.default_rng(1).integers(-1000, 1000, 64).astype(np.int32)
    hdr = bytes(Ether() / IP(src="10.0.0.1", dst="10.255.0.1") / UDP(sport=40000, dport=40000, chksum=0))
    frames = [(1, hdr + encode_ina(MsgType.RESULT, 1, 0, frag, 1, 0, 3, 2, 2, values=vals)) for frag in range(packets)]
    return sw, frames


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


def _ndn(backend: str, packets: int) -> tuple[Any, list[tuple[int, bytes]]]:
    """ndn.p4 with a FIB route for /h1 on port 1: Interests for /h1/train/v=1/seg=<i> from
    port 2, each followed by its Data from port 1 (PIT hit, back to port 2)."""
    from controller.ndn import TransientPit, check_name, prefix_hash
    from targets.embedded.state import Replica, TableEntry
    from targets.embedded.switch import Switch
    from tests.native_pair import ROOT
    from wire.ndn import NDN_MAC, data_packet, interest_packet

    sw = Switch(seed=1, cpu_port=255, backend=backend)
    p = sw.load_program((ROOT / "p4src" / "build" / "ndn.json").read_bytes())
    sw.install_program(p)
    for g in TransientPit.port_groups([1, 2, 3, 4]):
        e = g.entity if hasattr(g, "entity") else g
        sw.pre.set_group(e.multicast_group_id, [Replica(r[0] if isinstance(r, tuple) else r, 0)
                                                for r in e.replicas], create=True)
    fib = "MyIngress.fib.fib"
    k = len(check_name("/h1"))
    key = tuple((prefix_hash("/h1"), 0xFFFFFFFF) if i == k else (0, 0) for i in range(1, 7))
    p.tables[fib].insert(TableEntry(key, p.action_call(fib, "MyIngress.fib.set_next_hop", (1,)), priority=k))
    eth = NDN_MAC + bytes.fromhex("00000a000001") + (0x8624).to_bytes(2, "big")
    frames = []
    for i in range(max(packets // 2, 1)):
        name = f"/h1/train/v=1/seg={i}"
        frames += [(2, eth + interest_packet(name)), (1, eth + data_packet(name, b"\x01" * 200, final_block=3))]
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
    p = Parser(prog="python -m bench.native_inprocess", description=described(__doc__))
    p.add_argument("--packets", type=count, default=20000, help="packets per program and backend (default 20000)")
    p.add_argument("--entries", type=count, default=2000, help="entries in the table written to (default 2000)")
    p.add_argument("--writes", type=count, default=300, help="insert+delete pairs timed per table (default 300)")
    args = p.parse_args(argv)
    if args.packets < 1 or args.writes < 1 or not 0 <= args.entries <= 4000:
        p.error("--packets and --writes must be >= 1, --entries 0..4000")
    table = Table(title="embedded target in process: CPU per packet (shared, loaded 2-core machine)")
    for col in ("program", "python µs", "native µs", "ratio", "frames out (each)"):
        table.add_column(col, justify="left" if col == "program" else "right")
    saved = os.environ.get("GRADNET_BACKEND")
    try:
        for name, make in (("forward", _forward), ("ina (64 values)", _ina), ("ina RESULT to 4 ports", _ina_result4), ("ndn Interest + Data", _ndn)):
            py, out = measure(make, "python", args.packets)
            nat, out2 = measure(make, "native", args.packets)
            table.add_row(name, f"{py:.1f}", f"{nat:.1f}", f"{py / nat:.2f}x", f"{out} / {out2}")
    finally:
        if saved is None:
            os.environ.pop("GRADNET_BACKEND", None)
        else:
            os.environ["GRADNET_BACKEND"] = saved
    TableConsole().print(table)
    TableConsole().print(writes_table(args.entries, args.writes))
    return 0


def _write_cost(kind: str, mode: str, entries: int, writes: int) -> float:
    """CPU µs per single-entry write (insert, then delete) into forward.p4's ``kind``
    table (exact: ecmp_members, lpm: ipv4_routes) holding ``entries`` entries; ``mode``
    python, native, or native-copy (every write copies the whole table)."""
    from targets.embedded.state import TableEntry
    from targets.embedded.switch import Switch
    from tests.native_pair import ROOT

    sw = Switch(seed=1, backend="python" if mode == "python" else "native")
    p = sw.load_program((ROOT / "p4src" / "build" / "forward.json").read_bytes())
    sw.install_program(p)
    name = "MyIngress.forwarding." + ("ecmp_members" if kind == "exact" else "ipv4_routes")
    tbl, call = p.tables[name], p.action_call(name, "MyIngress.forwarding.set_next_hop", (0x020000000002, 2))

    def key(i: int) -> tuple:
        return (i >> 8, i & 0xFF) if kind == "exact" else ((0x0A000000 + (i << 8), 24),)

    nat = p.native
    if nat is not None:
        with nat.deferred_sync():  # the table's starting entries: one copy
            for i in range(entries):
                tbl.insert(TableEntry(key(i), call))
        if mode == "native-copy":
            tbl.on_change = lambda t, op, e: nat.sync_table(t)  # what every write did before
    else:
        for i in range(entries):
            tbl.insert(TableEntry(key(i), call))
    t0 = time.process_time()
    for i in range(entries, entries + writes):
        tbl.insert(TableEntry(key(i), call))
        tbl.delete(key(i), 0)
    return (time.process_time() - t0) / (2 * writes) * 1e6


def writes_table(entries: int, writes: int) -> Table:
    """The single-entry write costs (see the module doc) as a table."""
    table = Table(title=f"single-entry table writes into {entries} entries: CPU µs per write "
                        "(shared, loaded 2-core machine)")
    for col in ("table", "python", "native, in place", "native, whole copy (before)", "copy / in place"):
        table.add_column(col, justify="left" if col == "table" else "right")
    for kind in ("exact", "lpm"):
        py, nat, copy = (_write_cost(kind, m, entries, writes) for m in ("python", "native", "native-copy"))
        table.add_row(kind, f"{py:.1f}", f"{nat:.1f}", f"{copy:.0f}", f"{copy / nat:.0f}x")
    return table


if __name__ == "__main__":
    sys.exit(main())
