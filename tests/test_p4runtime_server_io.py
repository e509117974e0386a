"""The embedded P4Runtime server's PRE, counters, registers, packet-in/out and digests
(rig: ``tests/p4runtime_rig.py``).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import finsy as fy
import grpc
import pytest
from finsy.p4client import P4ClientError
from finsy.proto import p4d, p4i, p4r
from google.protobuf import text_format

from tests.p4runtime_rig import (
    CPU_IO,
    CPU_PORT,
    DEVICE_ID,
    FORWARD,
    Target,
    _config,
    _need,
    _options,
    _pb,
    _read,
    _rpc_status,
    _run,
    _start,
    target,
)

__all__ = ["target"]  # the fixture, imported


def test_multicast_groups_and_clone_sessions(target: Target) -> None:
    _need(FORWARD)

    async def main() -> None:
        async with fy.Switch("s1", target.address, _options(FORWARD)) as sw:
            group = fy.P4MulticastGroupEntry(1, replicas=[(1, 1), (2, 1), (3, 2)])
            await sw.insert([group])
            schema = sw.p4info
            assert _pb(await _read(sw, fy.P4MulticastGroupEntry(1)), schema) == _pb([group], schema)
            pre = target.switch.pre
            assert [(r.port, r.rid) for r in pre.groups[1]] == [(1, 1), (2, 1), (3, 2)]
            with pytest.raises(P4ClientError) as exc:
                await sw.insert([group])
            assert exc.value.details[0].canonical_code == fy.GRPCStatusCode.ALREADY_EXISTS

            group2 = fy.P4MulticastGroupEntry(1, replicas=[4])
            await sw.modify([group2, fy.P4MulticastGroupEntry(9, replicas=[1, 2])], strict=False)
            await sw.insert([fy.P4MulticastGroupEntry(9, replicas=[1, 2])])
            got = await _read(sw, fy.P4MulticastGroupEntry())  # id 0: all groups
            assert _pb(got, schema) == _pb([group2, fy.P4MulticastGroupEntry(9, replicas=[1, 2])], schema)

            clone = fy.P4CloneSessionEntry(5, replicas=[CPU_PORT], packet_length_bytes=128)
            await sw.insert([clone])
            assert _pb(await _read(sw, fy.P4CloneSessionEntry(5)), schema) == _pb([clone], schema)
            assert pre.clone_sessions[5].packet_length_bytes == 128

            await sw.delete([group2, clone])
            assert 1 not in pre.groups and 5 not in pre.clone_sessions
            with pytest.raises(P4ClientError) as exc:
                await sw.delete([clone])
            assert exc.value.details[0].canonical_code == fy.GRPCStatusCode.NOT_FOUND

    _run(main())


def test_counters_read_write(target: Target) -> None:
    _need(FORWARD)

    async def main() -> None:
        async with fy.Switch("s1", target.address, _options(FORWARD)) as sw:
            sizes = {c.preamble.alias: c.size for c in _config(FORWARD).p4info.counters}
            cells = [e async for e in sw.read(fy.P4CounterEntry("ingress_drops"))]
            assert [c.index for c in cells] == list(range(sizes["ingress_drops"]))
            assert all(c.packet_count == 0 for c in cells)

            # An ARP frame is not IPv4: dropped and counted at DROP_REASON_NOT_IPV4 (3).
            arp = bytes.fromhex("ffffffffffff020000000001" "0806") + bytes(28)
            target.switch.process(1, arp)
            target.switch.process(2, arp)
            got = [e async for e in sw.read(fy.P4CounterEntry("ingress_drops", index=3))]
            assert got[0].packet_count == 2
            assert got[0].byte_count == 0  # a packets-only counter has no byte count

            await sw.modify([fy.P4CounterEntry("ingress_drops", index=3, data=fy.P4CounterData(packet_count=40))])
            got = [e async for e in sw.read(fy.P4CounterEntry("ingress_drops", index=3))]
            assert got[0].packet_count == 40
            assert len([e async for e in sw.read(fy.P4CounterEntry())]) == sum(sizes.values())  # every counter

    _run(main())


def test_packet_out_and_packet_in(target: Target) -> None:
    _need(FORWARD)
    frame = bytes.fromhex("020000000002020000000001" "88b5") + b"hello, switch"
    # finsy wants every packet_out field; all but egress_port are zero.
    out_fields = next(h for h in _config(FORWARD).p4info.controller_packet_metadata
                      if h.preamble.name == "packet_out").metadata

    def packet_out(port: int) -> fy.P4PacketOut:
        return fy.P4PacketOut(frame, **{m.name: 0 for m in out_fields} | {"egress_port": port})

    async def main() -> None:
        async with fy.Switch("s1", target.address, _options(FORWARD)) as sw:
            # packet_out.egress_port = 2: the frame leaves on port 2 without the header.
            await sw.write([packet_out(2)])
            for _ in range(100):
                if target.sent:
                    break
                await asyncio.sleep(0.02)
            assert target.sent == [(2, frame)]

            # egress_port = CPU_PORT: it comes straight back as a PacketIn whose
            # ingress_port is the CPU port.
            packets = sw.read_packets()
            first = _start(packets)
            await asyncio.sleep(0)
            await sw.write([packet_out(CPU_PORT)])
            pkt = await asyncio.wait_for(first, 5)
            assert pkt.payload == frame
            assert pkt["ingress_port"] == CPU_PORT
            await packets.aclose()

    _run(main())


def test_controller_header_layout(target: Target) -> None:
    """Fields MSB first in P4Info order, zero bits padding the end, as PI's PacketOutMutate."""
    _need(FORWARD)
    cfg = _config(FORWARD)
    for h in cfg.p4info.controller_packet_metadata:  # a 9 + 3 bit header: 12 bits, 2 bytes
        del h.metadata[:]
        h.metadata.add(id=1, name="port", bitwidth=9)
        h.metadata.add(id=2, name="flags", bitwidth=3)
    with target.primary_stub() as stub:
        stub.SetForwardingPipelineConfig(p4r.SetForwardingPipelineConfigRequest(
            device_id=DEVICE_ID, action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT, config=cfg))
    pl = target.server.service.pipeline
    md = [p4r.PacketMetadata(metadata_id=2, value=b"\x05"), p4r.PacketMetadata(metadata_id=1, value=b"\x01\x03")]
    assert pl.packet_out_frame(p4r.PacketOut(payload=b"xy", metadata=md)) == bytes([0x81, 0xD0]) + b"xy"
    assert pl.packet_out_frame(p4r.PacketOut(payload=b"xy", metadata=md[:1])) == bytes([0x00, 0x50]) + b"xy"
    pin = pl.packet_in_message(bytes([0x81, 0xD0]) + b"xy")
    assert pin.payload == b"xy"
    assert [(m.metadata_id, m.value) for m in pin.metadata] == [(1, b"\x01\x03"), (2, b"\x05")]
    assert pl.packet_in_message(b"\x81") is None  # shorter than the header: dropped
    with pytest.raises(Exception, match="does not fit"):
        pl.packet_out_frame(p4r.PacketOut(metadata=[p4r.PacketMetadata(metadata_id=1, value=b"\x02\x00")]))
    with pytest.raises(Exception, match="Unknown metadata id"):
        pl.packet_out_frame(p4r.PacketOut(metadata=[p4r.PacketMetadata(metadata_id=3, value=b"\x00")]))


@pytest.fixture
def forward_plus(tmp_path: Path) -> tuple[Path, Path]:
    """forward.* plus a register array and a direct counter on port_macs.

    forward.p4 has neither, and the conformance programs that do may need compiler
    features the embedded target is still growing; so they are added to the p4c output
    the way p4c itself writes them (BMv2 JSON ``register_arrays``/``counter_arrays``,
    P4Info ``registers``/``direct_counters``).
    """
    _need(FORWARD)
    spec = json.loads(FORWARD[0].read_text())
    spec.setdefault("register_arrays", []).append(
        {"name": "MyIngress.cells", "id": len(spec["register_arrays"]), "size": 16, "bitwidth": 20})
    spec["counter_arrays"].append({"name": "MyEgress.mac_rewrite.port_mac_hits", "id": len(spec["counter_arrays"]),
                                   "is_direct": True, "binding": "MyEgress.mac_rewrite.port_macs"})
    info = _config(FORWARD).p4info
    reg = info.registers.add(size=16)
    reg.preamble.id, reg.preamble.name, reg.preamble.alias = 0x16000001, "MyIngress.cells", "cells"
    reg.type_spec.bitstring.bit.bitwidth = 20
    table = next(t for t in info.tables if t.preamble.alias == "port_macs")
    dc = info.direct_counters.add(direct_table_id=table.preamble.id)
    dc.preamble.id, dc.preamble.name, dc.preamble.alias = 0x13000001, "MyEgress.mac_rewrite.port_mac_hits", "port_mac_hits"
    dc.spec.unit = p4i.CounterSpec.BOTH
    table.direct_resource_ids.append(dc.preamble.id)
    out = (tmp_path / "forward_plus.json", tmp_path / "forward_plus.p4info.txt")
    out[0].write_text(json.dumps(spec))
    out[1].write_text(text_format.MessageToString(info))
    return out


def test_registers_read_write(target: Target, forward_plus: tuple[Path, Path]) -> None:
    async def main() -> None:
        async with fy.Switch("s1", target.address, _options(forward_plus)) as sw:
            schema = sw.p4info
            await sw.modify([fy.P4RegisterEntry("cells", index=7, data=123456)])
            got = await _read(sw, fy.P4RegisterEntry("cells", index=7))
            assert _pb(got, schema) == _pb([fy.P4RegisterEntry("cells", index=7, data=123456)], schema)
            cells = await _read(sw, fy.P4RegisterEntry("cells"))  # no index: every cell
            assert [c.index for c in cells] == list(range(16))
            assert [c.data for c in cells] == [0] * 7 + [123456] + [0] * 8
            assert target.switch.program.registers["MyIngress.cells"].cells[7] == 123456
            assert len(await _read(sw, fy.P4RegisterEntry())) == 16  # id 0: every register

            await sw.modify([fy.P4RegisterEntry("cells", data=5)])  # no index: every cell
            assert target.switch.program.registers["MyIngress.cells"].cells == [5] * 16

            with pytest.raises(P4ClientError) as exc:
                await sw.modify([fy.P4RegisterEntry("cells", index=5000, data=1)])
            assert exc.value.details[0].canonical_code == fy.GRPCStatusCode.OUT_OF_RANGE
            with pytest.raises(P4ClientError) as exc:
                await sw.insert([fy.P4RegisterEntry("cells", index=1, data=1)])
            assert exc.value.details[0].canonical_code == fy.GRPCStatusCode.INVALID_ARGUMENT

    _run(main())
    with target.primary_stub() as stub:  # 2^20 does not fit a bit<20> cell (finsy would refuse to send it)
        with pytest.raises(grpc.RpcError) as err:
            stub.Write(p4r.WriteRequest(device_id=DEVICE_ID, updates=[p4r.Update(
                type=p4r.Update.MODIFY, entity=p4r.Entity(register_entry=p4r.RegisterEntry(
                    register_id=0x16000001, index=p4r.Index(index=1), data=p4d.P4Data(bitstring=b"\x10\x00\x00")))),
            ]))
        detail = p4r.Error.FromString(_rpc_status(err.value).details[0].value)
        assert detail.canonical_code == grpc.StatusCode.OUT_OF_RANGE.value[0]  # spec, "Bytestrings"


def test_direct_counters(target: Target, forward_plus: tuple[Path, Path]) -> None:
    ipv4 = (bytes.fromhex("020000000002020000000001" "0800" "450000140000000040fd" "0000" "0a000001" "0a000202"))
    ipv4 = ipv4[:24] + _ip_checksum(ipv4[14:34]) + ipv4[26:]

    async def main() -> None:
        async with fy.Switch("s1", target.address, _options(forward_plus)) as sw:
            mac = fy.P4TableEntry("port_macs", match=fy.P4TableMatch({"standard_metadata.egress_port": 2}),
                                  action=fy.P4TableAction("set_source_mac", smac=0x020000000099))
            await sw.insert([
                fy.P4TableEntry("ipv4_routes", match=fy.P4TableMatch({"hdr.ipv4.dst_addr": "10.0.2.0/24"}),
                                action=fy.P4TableAction("set_next_hop", dmac=0x020000000003, port=2)),
                mac,
            ])
            out = target.switch.process(1, ipv4)
            out += target.switch.process(1, ipv4)
            assert [p for p, _ in out] == [2, 2]
            assert out[0][1][6:12] == bytes.fromhex("020000000099")
            got = await _read(sw, fy.P4DirectCounterEntry("port_mac_hits"))  # every entry
            assert len(got) == 1 and got[0].packet_count == 2 and got[0].byte_count == 2 * len(ipv4)
            got = await _read(sw, fy.P4DirectCounterEntry(table_entry=mac))
            assert got[0].packet_count == 2
            entries = await _read(sw, fy.P4TableEntry("port_macs", counter_data=fy.P4CounterData()))
            assert entries[0].counter_data.packet_count == 2  # counter_data asked for: returned

            await sw.modify([fy.P4DirectCounterEntry(table_entry=mac, data=fy.P4CounterData(packet_count=9,
                                                                                             byte_count=99))])
            got = await _read(sw, fy.P4DirectCounterEntry(table_entry=mac))
            assert (got[0].packet_count, got[0].byte_count) == (9, 99)
            with pytest.raises(P4ClientError) as exc:  # ipv4_routes has no direct counter
                await sw.modify([fy.P4DirectCounterEntry(table_entry=fy.P4TableEntry(
                    "ipv4_routes", match=fy.P4TableMatch({"hdr.ipv4.dst_addr": "10.0.2.0/24"})),
                    data=fy.P4CounterData(packet_count=1))])
            assert exc.value.details[0].canonical_code == fy.GRPCStatusCode.INVALID_ARGUMENT

    _run(main())


def _ip_checksum(header: bytes) -> bytes:
    header = header[:10] + b"\0\0" + header[12:]
    total = sum(int.from_bytes(header[i:i + 2], "big") for i in range(0, len(header), 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return (~total & 0xFFFF).to_bytes(2, "big")


def test_digests_and_table_miss_packet_in(target: Target) -> None:
    _need(CPU_IO)
    frame = bytes.fromhex("000000000002" "000000000001" "88b5") + bytes(50)

    async def main() -> None:
        async with fy.Switch("s1", target.address, _options(CPU_IO)) as sw:
            await sw.insert([fy.P4DigestEntry("mac_learn_digest_t", max_list_size=1)])
            assert len([e async for e in sw.read(fy.P4DigestEntry())]) == 1
            digests = sw.read_digests("mac_learn_digest_t")
            packets = sw.read_packets()
            first_digest, first_packet = _start(digests), _start(packets)
            await asyncio.sleep(0)
            target.switch.process(1, frame)
            dl = await asyncio.wait_for(first_digest, 5)
            assert [tuple(d.values()) for d in dl.data] == [(1, 1)]
            await sw.write([dl.ack()])
            pkt = await asyncio.wait_for(first_packet, 5)
            assert pkt.payload == frame and pkt["ingress_port"] == 1
            await digests.aclose()
            await packets.aclose()

    _run(main())
