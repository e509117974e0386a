"""The embedded target's per-packet trace (targets/embedded/trace.py), switched on and
off at run time over the runtime CLI's command set: a known packet's trace names the
parser states, the tables it was looked up in with hit/miss and action, the egress port
and the transmission, in BMv2's ``-L trace`` wording; off, the program's compiled
functions are the untouched originals again."""

from __future__ import annotations

from pathlib import Path

import finsy as fy
from scapy.all import IP, UDP, Ether

from targets.embedded import runtime_cli
from targets.embedded.p4runtime_server import P4RuntimeServer
from targets.embedded.switch import Switch
from targets.embedded.trace import normalize
from targets.p4rt_client import P4RuntimeClient

ROOT = Path(__file__).resolve().parents[1]


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
