"""The embedded P4Runtime server: bytestrings, pipeline config set/get and its actions,
table entries and per-update write errors (rig: ``tests/p4runtime_rig.py``).
"""

from __future__ import annotations

import finsy as fy
import grpc
import pytest
from finsy.p4client import P4ClientError
from finsy.proto import p4r

from targets.embedded.p4runtime.common import decode_bytes, encode_bytes
from tests.p4runtime_rig import (
    DEVICE_ID,
    FORWARD,
    Requests,
    Target,
    _arbitration,
    _config,
    _need,
    _options,
    _pb,
    _read,
    _rpc_status,
    _run,
    _write_errors,
    target,
)

__all__ = ["target"]  # the fixture, imported


# -- unit: bytestrings ----------------------------------------------------------------
def test_bytestring_codec() -> None:
    assert encode_bytes(0) == b"\x00"
    assert encode_bytes(0x1FF) == b"\x01\xff"
    assert decode_bytes(b"\x00\x00\x01\xff", 9, "x") == 0x1FF  # padded: accepted, as PI
    with pytest.raises(Exception, match="empty bytestring"):  # spec: rejected (PI takes it as 0)
        decode_bytes(b"", 9, "x")
    with pytest.raises(Exception, match="does not fit within 9 bits"):
        decode_bytes(b"\x02\x00", 9, "x")


# -- finsy ----------------------------------------------------------------------------
def test_pipeline_set_and_get(target: Target) -> None:
    _need(FORWARD)

    async def main() -> None:
        async with fy.Switch("s1", target.address, _options(FORWARD)) as sw:
            assert sw.is_primary
            assert str(sw.p4runtime_version).startswith("1.3.0")
            assert target.switch.program is not None
            assert "MyIngress.forwarding.ipv4_routes" in target.switch.program.tables

    _run(main())
    channel, stub = target.stub()
    with channel:
        rt = p4r.GetForwardingPipelineConfigRequest
        full = stub.GetForwardingPipelineConfig(rt(device_id=DEVICE_ID, response_type=rt.ALL)).config
        assert full.p4_device_config == FORWARD[0].read_bytes()
        assert full.p4info == _config(FORWARD).p4info
        assert full.HasField("cookie")  # finsy sets one: it skips re-pushing an identical pipeline
        only = stub.GetForwardingPipelineConfig(rt(device_id=DEVICE_ID, response_type=rt.COOKIE_ONLY)).config
        assert not only.HasField("p4info") and not only.p4_device_config
        assert only.cookie.cookie == full.cookie.cookie
        dev = stub.GetForwardingPipelineConfig(rt(device_id=DEVICE_ID, response_type=rt.DEVICE_CONFIG_AND_COOKIE))
        assert dev.config.p4_device_config and not dev.config.HasField("p4info")


def test_table_entries_insert_read_modify_delete(target: Target) -> None:
    _need(FORWARD)

    async def main() -> None:
        async with fy.Switch("s1", target.address, _options(FORWARD)) as sw:
            routes = [
                fy.P4TableEntry("ipv4_routes", match=fy.P4TableMatch({"hdr.ipv4.dst_addr": "10.0.1.0/24"}),
                                action=fy.P4TableAction("set_next_hop", dmac=0x000000000A01, port=1)),
                fy.P4TableEntry("ipv4_routes", match=fy.P4TableMatch({"hdr.ipv4.dst_addr": "10.0.2.2/32"}),
                                action=fy.P4TableAction("set_ecmp_group", group_id=7, group_size=2)),
            ]
            members = [
                fy.P4TableEntry("ecmp_members",
                                match=fy.P4TableMatch({"meta.ecmp_group_id": 7, "meta.ecmp_member_index": i}),
                                action=fy.P4TableAction("set_next_hop", dmac=0x0A0B0C0D0E0F, port=2 + i))
                for i in range(2)
            ]
            prio = fy.P4TableEntry("dscp_priority", match=fy.P4TableMatch({"hdr.ipv4.diffserv": "0xB8/&0xFC"}),
                                   action=fy.P4TableAction("set_priority", prio=5), priority=10)
            await sw.insert([*routes, *members, prio])
            schema = sw.p4info

            assert _pb(await _read(sw, fy.P4TableEntry("ipv4_routes")), schema) == _pb(routes, schema)
            assert _pb(await _read(sw, fy.P4TableEntry("ecmp_members")), schema) == _pb(members, schema)
            assert _pb(await _read(sw, fy.P4TableEntry("dscp_priority")), schema) == _pb([prio], schema)
            everything = await _read(sw, fy.P4TableEntry())  # table_id 0: every table
            assert _pb(everything, schema) == _pb([*routes, *members, prio], schema)
            assert _pb(await _read(sw, members[1]), schema) == _pb([members[1]], schema)  # by key

            # The server's state is the switch's state.
            table = target.switch.program.tables["MyIngress.forwarding.ipv4_routes"]
            assert len(table) == 2

            changed = fy.P4TableEntry("ipv4_routes", match=routes[0].match,
                                      action=fy.P4TableAction("drop"))
            await sw.modify([changed])
            got = await _read(sw, fy.P4TableEntry("ipv4_routes", match=routes[0].match))
            assert _pb(got, schema) == _pb([changed], schema)

            await sw.delete([routes[0], members[0]])
            assert len(await _read(sw, fy.P4TableEntry("ipv4_routes"))) == 1
            assert _pb(await _read(sw, fy.P4TableEntry("ecmp_members")), schema) == _pb([members[1]], schema)

            # Default entry: modify, read back, reset.
            new_default = fy.P4TableEntry("ipv4_routes", is_default_action=True,
                                          action=fy.P4TableAction("set_next_hop", dmac=1, port=3))
            await sw.modify([new_default])
            got = await _read(sw, fy.P4TableEntry("ipv4_routes", is_default_action=True))
            assert _pb(got, schema) == _pb([new_default], schema)
            assert table.default.name == "MyIngress.forwarding.set_next_hop" and table.default.params == (1, 3)
            await sw.modify([fy.P4TableEntry("ipv4_routes", is_default_action=True)])
            got = await _read(sw, fy.P4TableEntry("ipv4_routes", is_default_action=True))
            assert got[0].action.name == "drop"

            await sw.delete_all()
            assert await _read(sw, fy.P4TableEntry()) == []

    _run(main())


def test_write_errors_are_reported_per_update(target: Target) -> None:
    _need(FORWARD)

    def route(prefix: str, port: int) -> fy.P4TableEntry:
        return fy.P4TableEntry("ipv4_routes", match=fy.P4TableMatch({"hdr.ipv4.dst_addr": prefix}),
                               action=fy.P4TableAction("set_next_hop", dmac=1, port=port))

    async def main() -> None:
        async with fy.Switch("s1", target.address, _options(FORWARD)) as sw:
            await sw.insert([route("10.0.0.0/8", 1)])
            with pytest.raises(P4ClientError) as exc:
                await sw.insert([route("10.0.0.0/8", 2)])
            assert exc.value.code == fy.GRPCStatusCode.UNKNOWN
            assert exc.value.details[0].canonical_code == fy.GRPCStatusCode.ALREADY_EXISTS

            with pytest.raises(P4ClientError) as exc:
                await sw.delete([route("192.168.0.0/16", 1)])
            assert exc.value.details[0].canonical_code == fy.GRPCStatusCode.NOT_FOUND

            # A batch: the good updates are applied, the bad one is reported at its index.
            with pytest.raises(P4ClientError) as exc:
                await sw.insert([route("10.2.0.0/16", 1), route("10.0.0.0/8", 1), route("10.3.0.0/16", 1)])
            assert _write_errors(exc.value) == [None, grpc.StatusCode.ALREADY_EXISTS]
            assert len(await _read(sw, fy.P4TableEntry("ipv4_routes"))) == 3

    _run(main())

    # finsy refuses out-of-range values itself, so these go over a raw stub, as the
    # primary of an open stream (without one every Write is refused: docs/trust.md).
    info = _config(FORWARD).p4info
    routes = next(t for t in info.tables if t.preamble.alias == "ipv4_routes")
    next_hop = next(a for a in info.actions if a.preamble.alias == "set_next_hop")

    def insert_route(port: bytes) -> p4r.Update:
        return p4r.Update(type=p4r.Update.INSERT, entity=p4r.Entity(table_entry=p4r.TableEntry(
            table_id=routes.preamble.id,
            match=[p4r.FieldMatch(field_id=1, lpm=p4r.FieldMatch.LPM(value=b"\x0b\x00\x00\x00", prefix_len=8))],
            action=p4r.TableAction(action=p4r.Action(action_id=next_hop.preamble.id, params=[
                p4r.Action.Param(param_id=1, value=b"\x01"), p4r.Action.Param(param_id=2, value=port)])))))

    channel, stub = target.stub()
    with channel:
        requests = Requests(_arbitration(1))
        stream = stub.StreamChannel(iter(requests))
        assert next(stream).arbitration.status.code == 0
        bad = p4r.WriteRequest(device_id=DEVICE_ID, election_id=p4r.Uint128(low=1), updates=[
            insert_route(b"\x02\x00"),  # port is bit<9>: 512 does not fit
            p4r.Update(type=p4r.Update.INSERT, entity=p4r.Entity(table_entry=p4r.TableEntry(table_id=12345))),
            p4r.Update(type=p4r.Update.INSERT, entity=p4r.Entity(
                extern_entry=p4r.ExternEntry(extern_type_id=1))),
            insert_route(b"\x01\xff"),  # 511 fits
        ])
        with pytest.raises(grpc.RpcError) as err:
            stub.Write(bad)
        assert err.value.code() == grpc.StatusCode.UNKNOWN
        details = [p4r.Error.FromString(d.value) for d in _rpc_status(err.value).details]
        assert [d.canonical_code for d in details] == [grpc.StatusCode.OUT_OF_RANGE.value[0],  # spec; PI: INVALID_ARGUMENT
                                                       grpc.StatusCode.INVALID_ARGUMENT.value[0],
                                                       grpc.StatusCode.UNIMPLEMENTED.value[0], 0]
        assert "does not fit within 9 bits" in details[0].message
        assert details[1].message == "Invalid P4 id"
        assert len(target.switch.program.tables["MyIngress.forwarding.ipv4_routes"]) == 4
        requests.close()


def test_set_pipeline_actions_and_errors(target: Target) -> None:
    _need(FORWARD)
    Req = p4r.SetForwardingPipelineConfigRequest
    with target.primary_stub() as stub:
        with pytest.raises(grpc.RpcError) as err:
            list(stub.Read(p4r.ReadRequest(device_id=DEVICE_ID, entities=[p4r.Entity(table_entry=p4r.TableEntry())])))
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "No forwarding pipeline config set for this device" in err.value.details()
        with pytest.raises(grpc.RpcError) as err:
            stub.GetForwardingPipelineConfig(p4r.GetForwardingPipelineConfigRequest(device_id=DEVICE_ID))
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION

        bad = _config(FORWARD)
        bad.p4_device_config = b'{"not": "bmv2"}'
        with pytest.raises(grpc.RpcError) as err:
            stub.SetForwardingPipelineConfig(Req(device_id=DEVICE_ID, action=Req.VERIFY_AND_COMMIT, config=bad))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(grpc.RpcError) as err:
            stub.SetForwardingPipelineConfig(Req(device_id=DEVICE_ID, action=Req.COMMIT))
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        with pytest.raises(grpc.RpcError) as err:
            stub.SetForwardingPipelineConfig(Req(device_id=DEVICE_ID + 1, action=Req.VERIFY, config=_config(FORWARD)))
        assert err.value.code() == grpc.StatusCode.NOT_FOUND

        stub.SetForwardingPipelineConfig(Req(device_id=DEVICE_ID, action=Req.VERIFY, config=_config(FORWARD)))
        assert target.switch.program is None  # VERIFY changes nothing
        stub.SetForwardingPipelineConfig(Req(device_id=DEVICE_ID, action=Req.VERIFY_AND_SAVE,
                                             config=_config(FORWARD, cookie=7)))
        assert target.switch.program is None
        stub.SetForwardingPipelineConfig(Req(device_id=DEVICE_ID, action=Req.COMMIT))
        assert target.switch.program is not None
        rt = p4r.GetForwardingPipelineConfigRequest
        got = stub.GetForwardingPipelineConfig(rt(device_id=DEVICE_ID, response_type=rt.COOKIE_ONLY))
        assert got.config.cookie.cookie == 7

        # RECONCILE_AND_COMMIT keeps entries and PRE state; VERIFY_AND_COMMIT wipes them.
        info = _config(FORWARD).p4info
        table = next(t for t in info.tables if t.preamble.alias == "port_macs")
        action = next(a for a in info.actions if a.preamble.alias == "set_source_mac")
        entry = p4r.TableEntry(table_id=table.preamble.id, match=[p4r.FieldMatch(
            field_id=1, exact=p4r.FieldMatch.Exact(value=b"\x00\x01"))],  # non-canonical: accepted
            action=p4r.TableAction(action=p4r.Action(action_id=action.preamble.id, params=[
                p4r.Action.Param(param_id=1, value=b"\x02\x00\x00\x00\x00\x01")])))
        group = p4r.PacketReplicationEngineEntry(multicast_group_entry=p4r.MulticastGroupEntry(
            multicast_group_id=3, replicas=[p4r.Replica(port=b"\x00\x01", instance=0)]))
        stub.Write(p4r.WriteRequest(device_id=DEVICE_ID, updates=[
            p4r.Update(type=p4r.Update.INSERT, entity=p4r.Entity(table_entry=entry)),
            p4r.Update(type=p4r.Update.INSERT, entity=p4r.Entity(packet_replication_engine_entry=group))]))
        stub.SetForwardingPipelineConfig(Req(device_id=DEVICE_ID, action=Req.RECONCILE_AND_COMMIT,
                                             config=_config(FORWARD, cookie=8)))
        read = p4r.ReadRequest(device_id=DEVICE_ID, entities=[
            p4r.Entity(table_entry=p4r.TableEntry(table_id=table.preamble.id)),
            p4r.Entity(packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
                multicast_group_entry=p4r.MulticastGroupEntry()))])
        got = [e for r in stub.Read(read) for e in r.entities]
        assert len(got) == 2
        assert got[0].table_entry.match[0].exact.value == b"\x01"  # canonical on the way out
        assert got[1].packet_replication_engine_entry.multicast_group_entry.replicas[0].port == b"\x00\x01"
        stub.SetForwardingPipelineConfig(Req(device_id=DEVICE_ID, action=Req.VERIFY_AND_COMMIT,
                                             config=_config(FORWARD, cookie=9)))
        assert [e for r in stub.Read(read) for e in r.entities] == []
