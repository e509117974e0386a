"""The embedded target's per-packet trace (targets/embedded/trace.py), switched on and
off at run time over the runtime CLI's command set: a known packet's trace names the
parser states, the tables it was looked up in with hit/miss and action, the egress port
and the transmission, in BMv2's ``-L trace`` wording; off, the program's compiled
functions are the untouched originals again. Where BMv2 is present, the same packets
through ``simple_switch_grpc -L trace`` give the same steps (``trace.steps``)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import finsy as fy
import pytest
from scapy.all import ARP, IP, UDP, Ether

from targets.embedded import runtime_cli
from targets.embedded.p4runtime.server import P4RuntimeServer
from targets.embedded.switch import Switch
from targets.embedded.trace import diff_steps, main, normalize, steps
from targets.p4rt_client import P4RuntimeClient

ROOT = Path(__file__).resolve().parents[1]
P4INFO, JSON = ROOT / "p4src/build/forward.p4info.txt", ROOT / "p4src/build/forward.json"


def _route() -> fy.P4TableEntry:
    return fy.P4TableEntry("ipv4_routes", match=fy.P4TableMatch({"hdr.ipv4.dst_addr": "10.0.0.2/32"}),
                           action=fy.P4TableAction("set_next_hop", dmac=2, port=2))


def test_trace_of_a_routed_packet(tmp_path: Path) -> None:
    sw = Switch(device_id=1, cpu_port=255)
    srv = P4RuntimeServer(sw, "127.0.0.1:0")
    port = srv.start()
    sw.start()
    try:
        with P4RuntimeClient(f"127.0.0.1:{port}", device_id=1) as c:
            c.set_pipeline(ROOT / "p4src/build/forward.p4info.txt", ROOT / "p4src/build/forward.json")
            c.write(+fy.P4TableEntry("ipv4_routes", match=fy.P4TableMatch({"hdr.ipv4.dst_addr": "10.0.0.2/32"}),
                                     action=fy.P4TableAction("set_next_hop", dmac=2, port=2)))
            prog = sw.program
            compiled = (prog.parse, prog.ingress, prog.egress)
            frame = bytes(Ether(dst="00:00:00:00:00:01") / IP(src="10.0.0.1", dst="10.0.0.2") / UDP())
            path = tmp_path / "s1.trace"
            assert runtime_cli.execute(sw, "trace") == "off"
            assert runtime_cli.execute(sw, "trace on", str(path)) == f"ok {path}"
            assert [p for p, _ in sw.process(1, frame)] == [2]
            assert runtime_cli.execute(sw, "trace off") == "ok"
            assert (prog.parse, prog.ingress, prog.egress) == compiled  # nothing left behind
            assert "lookup" not in vars(prog.tables["MyIngress.forwarding.ipv4_routes"])
            sw.process(1, frame)  # not traced
            lines = [normalize(x) for x in path.read_text().splitlines()]
            assert lines[0] == "Processing packet received on port 1"
            for want in ["Parser 'parser' entering state 'parse_ipv4'", "Extracting header 'ipv4'",
                         "Applying table 'MyIngress.forwarding.ipv4_routes'", "* hdr.ipv4.dst_addr: 0a000002",
                         "Table 'MyIngress.forwarding.ipv4_routes': hit with handle 0",
                         "Action MyIngress.forwarding.set_next_hop",
                         "Table 'MyEgress.mac_rewrite.port_macs': miss", "Egress port is 2",
                         "Transmitting packet of size 42 out of port 2"]:
                assert want in lines, want
            assert lines.index("Pipeline 'ingress': start") < lines.index("Egress port is 2") \
                < lines.index("Pipeline 'egress': start")
            assert sum(x.startswith("Processing packet") for x in lines) == 1
            assert runtime_cli.execute(sw, "trace on").startswith("error:")  # no default file here
    finally:
        srv.stop(grace=0)
        sw.stop()


def _frames() -> list[bytes]:
    """A routed packet, one with no route, one whose TTL runs out, an ARP request, and
    the routed packet again (its transmission tells that BMv2 is through the rest)."""
    ip = Ether(dst="00:00:00:00:00:01", src="00:00:0a:00:00:01")
    return [bytes(ip / IP(src="10.0.0.1", dst="10.0.0.2") / UDP()),
            bytes(ip / IP(src="10.0.0.1", dst="10.0.0.9") / UDP()),
            bytes(ip / IP(src="10.0.0.1", dst="10.0.0.2", ttl=1) / UDP()),
            bytes(Ether(dst="ff:ff:ff:ff:ff:ff", src="00:00:0a:00:00:01") / ARP(pdst="10.0.0.2")),
            bytes(ip / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=7))]


def _embedded_trace(path: Path) -> list[str]:
    sw = Switch(device_id=1, cpu_port=255)
    srv = P4RuntimeServer(sw, "127.0.0.1:0")
    port = srv.start()
    sw.start()
    try:
        with P4RuntimeClient(f"127.0.0.1:{port}", device_id=1) as c:
            c.set_pipeline(P4INFO, JSON)
            c.write(+_route())
            runtime_cli.execute(sw, "trace on", str(path))
            for f in _frames():
                sw.process(1, f)
            runtime_cli.execute(sw, "trace off")
    finally:
        srv.stop(grace=0)
        sw.stop()
    return path.read_text().splitlines()


def _bmv2_reason() -> str | None:
    if shutil.which("simple_switch_grpc") is None:
        return "BMv2 (simple_switch_grpc) not on PATH"
    if os.geteuid() != 0:
        return "the BMv2 testbed needs root (network namespaces)"
    return None


@pytest.mark.skipif(_bmv2_reason() is not None, reason=_bmv2_reason() or "")
def test_trace_steps_match_bmv2(tmp_path: Path) -> None:
    from targets.testbed import Testbed

    embedded = _embedded_trace(tmp_path / "s1.trace")
    tb = Testbed(2, target="bmv2", log_level="trace")
    try:
        with tb:
            with P4RuntimeClient(tb.grpc_addr, device_id=0) as c:
                c.set_pipeline(P4INFO, JSON)
                c.write(+_route())
                frames = _frames()
                for f in frames:
                    tb.send(1, f)
                got = []
                while len(got) < 2 and (out := tb.recv(2, timeout=10.0)) is not None:
                    got.append(out)
                assert len(got) == 2, tb.log_tail()
            (log,) = tb.dir.glob("switch.log*")  # BMv2 appends .txt to --log-file
            deadline = time.monotonic() + 10  # the last line is written as the packet leaves
            while "Transmitting" not in log.read_text().rsplit("Processing packet", 1)[-1] \
                    and time.monotonic() < deadline:
                time.sleep(0.05)
            bmv2 = log.read_text().splitlines()
    finally:
        shutil.rmtree(tb.dir, ignore_errors=True)
    ours, theirs = list(steps(embedded).values()), list(steps(bmv2).values())
    assert len(ours) == len(theirs) == len(frames)
    assert "table MyIngress.forwarding.ipv4_routes hit" in ours[0]
    assert "table MyIngress.forwarding.ipv4_routes miss" in ours[1]
    assert ours[3][:4] == ["receive port 1", "parser state start", "parser state parse_ethernet",
                           "extract ethernet"]
    assert ours[0][-1] == "transmit port 2 size 42"
    assert diff_steps(embedded, bmv2) == [], "\n".join(diff_steps(embedded, bmv2))
    (tmp_path / "bmv2.log").write_text("\n".join(bmv2))
    assert main(["diff", str(tmp_path / "s1.trace"), str(tmp_path / "bmv2.log")]) == 0


def test_steps_of_a_bmv2_log_and_a_trace_agree() -> None:
    """The reduction itself, on a BMv2 log excerpt (continuation lines, a keyless
    ``tbl_*`` table and conditions left out) and this target's wording of it."""
    bmv2 = """[1] [bmv2] [D] [thread 9] [0.0] [cxt 0] Processing packet received on port 1
[1] [bmv2] [D] [thread 9] [0.0] [cxt 0] Parser 'parser' entering state 'start'
[1] [bmv2] [D] [thread 9] [0.0] [cxt 0] Extracting header 'ethernet'
[1] [bmv2] [T] [thread 9] [0.0] [cxt 0] x.p4(9) Condition "hdr.ipv4.isValid()" (node_8) is true
[1] [bmv2] [T] [thread 9] [0.0] [cxt 0] Applying table 'MyIngress.t'
[1] [bmv2] [D] [thread 9] [0.0] [cxt 0] Looking up key:
* hdr.ipv4.dst_addr   : 0a000002

[1] [bmv2] [D] [thread 9] [0.0] [cxt 0] Table 'MyIngress.t': hit with handle 0
[1] [bmv2] [D] [thread 9] [0.0] [cxt 0] Dumping entry 0
Match key:
* hdr.ipv4.dst_addr   : LPM       0a000002/32
Action entry: MyIngress.a - 2,

[1] [bmv2] [D] [thread 9] [0.0] [cxt 0] Action entry is MyIngress.a - 2,
[1] [bmv2] [T] [thread 9] [0.0] [cxt 0] Action MyIngress.a
[1] [bmv2] [T] [thread 9] [0.0] [cxt 0] Applying table 'tbl_x118'
[1] [bmv2] [D] [thread 9] [0.0] [cxt 0] Looking up key:

[1] [bmv2] [D] [thread 9] [0.0] [cxt 0] Table 'tbl_x118': miss
[1] [bmv2] [T] [thread 9] [0.0] [cxt 0] Action x118
[1] [bmv2] [D] [thread 9] [0.0] [cxt 0] Egress port is 2
[1] [bmv2] [D] [thread 7] [0.0] [cxt 0] Transmitting packet of size 42 out of port 2
""".splitlines()
    pre = "[12:00:00.000] [bmv2] [T] [thread 0] [1.0] [cxt 0] "
    ours = [pre + x for x in (
        "Processing packet received on port 1", "Parser 'parser': start",
        "Parser 'parser' entering state 'start'", "Extracting header 'ethernet'",
        "Applying table 'MyIngress.t'", "Looking up key:", "* hdr.ipv4.dst_addr: 0a000002",
        "Table 'MyIngress.t': hit with handle 0", "Action entry is MyIngress.a - 2,",
        "Action MyIngress.a", "Egress port is 2", "Transmitting packet of size 42 out of port 2")]
    want = ["receive port 1", "parser state start", "extract ethernet", "table MyIngress.t hit",
            "action MyIngress.a", "egress port 2", "transmit port 2 size 42"]
    assert steps(bmv2) == {0: want}
    assert steps(ours) == {1: want}
    assert diff_steps(ours, bmv2) == []
    assert diff_steps(ours[:-1], bmv2)[-1] == "+packet 1: transmit port 2 size 42"
