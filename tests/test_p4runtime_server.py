"""The embedded target's P4Runtime server, driven by real clients.

The server runs on 127.0.0.1 (free port) over a real ``Switch`` with the committed p4c
outputs: ``p4src/build/forward.*`` for the main flow and, where present,
``tests/p4/build/cpu_io.*`` for digests. Clients: finsy (the
controller's library), raw gRPC stubs for corner cases, and p4runtime-shell in its own
virtual environment (it pins protobuf<3.21).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import finsy as fy
import grpc
import pytest
from finsy.p4client import P4ClientError
from finsy.proto import p4d, p4i, p4r, p4r_grpc, rpc_status
from google.protobuf import text_format

from targets.embedded.p4runtime.common import decode_bytes, encode_bytes
from targets.embedded.p4runtime.server import P4RuntimeServer
from targets.embedded.switch import Switch

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "p4src" / "build"
CONFORMANCE_BUILD = ROOT / "tests" / "p4" / "build"
CPU_PORT = 255
DEVICE_ID = 1


def _program(build: Path, name: str) -> tuple[Path, Path]:
    return build / f"{name}.json", build / f"{name}.p4info.txt"


FORWARD = _program(BUILD, "forward")
CPU_IO = _program(CONFORMANCE_BUILD, "cpu_io")


def _need(prog: tuple[Path, Path]) -> None:
    missing = [str(p.relative_to(ROOT)) for p in prog if not p.exists()]
    if missing:
        pytest.skip(f"p4c output missing: {', '.join(missing)} (run `make p4` where p4c is installed)")


# -- fixtures -------------------------------------------------------------------------
class Target:
    """A running Switch + P4RuntimeServer; frames sent to data ports are collected."""

    def __init__(self) -> None:
        self.switch = Switch(device_id=DEVICE_ID, cpu_port=CPU_PORT)
        self.sent: list[tuple[int, bytes]] = []
        self.switch.tx_handlers.append(lambda port, frame: self.sent.append((port, frame)))
        self.server = P4RuntimeServer(self.switch, "127.0.0.1:0")
        self.port = self.server.start()
        self.address = f"127.0.0.1:{self.port}"
        self.switch.start()

    def close(self) -> None:
        self.server.stop(grace=0)
        self.switch.stop()

    def stub(self) -> tuple[grpc.Channel, p4r_grpc.P4RuntimeStub]:
        channel = grpc.insecure_channel(self.address)
        return channel, p4r_grpc.P4RuntimeStub(channel)

    @contextlib.contextmanager
    def primary_stub(self) -> Iterator[_PrimaryStub]:
        """A raw stub whose Writes and pipeline changes come from the primary (election
        id 1) of a StreamChannel held open meanwhile: without one they are refused."""
        channel, stub = self.stub()
        requests = Requests(_arbitration(1))
        stream = stub.StreamChannel(iter(requests))
        try:
            assert next(stream).arbitration.status.code == 0
            yield _PrimaryStub(stub)
        finally:
            requests.close()
            channel.close()


class _PrimaryStub:
    """A P4Runtime stub that puts election id 1 into Write and SetForwardingPipelineConfig."""

    def __init__(self, stub: p4r_grpc.P4RuntimeStub) -> None:
        self._stub = stub

    def __getattr__(self, name: str) -> object:
        return getattr(self._stub, name)

    def Write(self, req: p4r.WriteRequest, **kw: object) -> p4r.WriteResponse:  # noqa: N802
        if not req.HasField("election_id"):
            req.election_id.low = 1
        return self._stub.Write(req, **kw)

    def SetForwardingPipelineConfig(self, req: p4r.SetForwardingPipelineConfigRequest,  # noqa: N802
                                    **kw: object) -> p4r.SetForwardingPipelineConfigResponse:
        if not req.HasField("election_id"):
            req.election_id.low = 1
        return self._stub.SetForwardingPipelineConfig(req, **kw)


@pytest.fixture
def target() -> Iterator[Target]:
    t = Target()
    try:
        yield t
    finally:
        t.close()


def _options(prog: tuple[Path, Path], **kw: object) -> fy.SwitchOptions:
    return fy.SwitchOptions(p4info=prog[1], p4blob=prog[0], device_id=DEVICE_ID, **kw)


def _run(coro: object, timeout: float = 30) -> object:
    return asyncio.run(asyncio.wait_for(coro, timeout))  # type: ignore[arg-type]


def _config(prog: tuple[Path, Path], cookie: int | None = None) -> p4r.ForwardingPipelineConfig:
    info = text_format.Parse(prog[1].read_text(), p4i.P4Info())
    cfg = p4r.ForwardingPipelineConfig(p4info=info, p4_device_config=prog[0].read_bytes())
    if cookie is not None:
        cfg.cookie.cookie = cookie
    return cfg


def _write_errors(ex: P4ClientError) -> list[grpc.StatusCode | None]:
    return [grpc.StatusCode[ex.details[i].canonical_code.name] if i in ex.details else None
            for i in range(max(ex.details) + 1)]


def _pb(entities: list, schema: fy.P4Schema) -> list[bytes]:
    """Entities in protobuf form, sorted: compares what goes over the wire."""
    return sorted(e.encode(schema).SerializeToString(deterministic=True) for e in entities)


async def _read(sw: fy.Switch, entity: object) -> list:
    return [e async for e in sw.read(entity)]


def _start(agen: object) -> asyncio.Future:
    """Start waiting on an async iterator now (finsy opens its queue on the first step)."""
    return asyncio.ensure_future(anext(agen))  # type: ignore[call-overload]


class Requests:
    """A request stream for a raw StreamChannel that stays open until ``close()``."""

    def __init__(self, *msgs: p4r.StreamMessageRequest) -> None:
        self._q: queue.Queue[p4r.StreamMessageRequest | None] = queue.Queue()
        for m in msgs:
            self._q.put(m)

    def __iter__(self) -> Iterator[p4r.StreamMessageRequest]:
        while (m := self._q.get()) is not None:
            yield m

    def put(self, msg: p4r.StreamMessageRequest) -> None:
        self._q.put(msg)

    def close(self) -> None:
        self._q.put(None)


def _arbitration(election_id: int) -> p4r.StreamMessageRequest:
    return p4r.StreamMessageRequest(arbitration=p4r.MasterArbitrationUpdate(
        device_id=DEVICE_ID, election_id=p4r.Uint128(low=election_id)))


def _rpc_status(err: grpc.RpcError) -> rpc_status.Status:
    for key, value in err.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            return rpc_status.Status.FromString(value)
    raise AssertionError("no grpc-status-details-bin trailer")


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


def test_only_the_primary_may_write(target: Target) -> None:
    _need(FORWARD)
    entry = fy.P4TableEntry("port_macs", match=fy.P4TableMatch({"standard_metadata.egress_port": 1}),
                            action=fy.P4TableAction("set_source_mac", smac=0x020000000001))

    async def main() -> None:
        async with fy.Switch("primary", target.address, _options(FORWARD, initial_election_id=20)) as s1:
            async with fy.Switch("backup", target.address, _options(FORWARD, initial_election_id=10)) as s2:
                assert s1.is_primary and not s2.is_primary
                with pytest.raises(P4ClientError) as exc:
                    await s2.insert([entry])
                assert exc.value.code == fy.GRPCStatusCode.PERMISSION_DENIED
                await s1.insert([entry])
                assert _pb(await _read(s2, fy.P4TableEntry("port_macs")), s2.p4info) == _pb([entry], s1.p4info)
                # A second connection with the primary's election id is refused.
                channel, stub = target.stub()
                with channel:
                    requests = Requests(_arbitration(20))
                    stream = stub.StreamChannel(iter(requests))
                    with pytest.raises(grpc.RpcError) as err:
                        list(stream)
                    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                    assert "Election id already exists" in err.value.details()
                    requests.close()
            # Still primary after the backup left.
            await s1.delete([entry])

    _run(main())

    # Once streams are open, a Write without the primary's election id is refused.
    channel, stub = target.stub()
    with channel:
        requests = Requests(_arbitration(5))
        stream = stub.StreamChannel(iter(requests))
        first = next(stream)
        assert first.arbitration.status.code == 0 and first.arbitration.election_id.low == 5
        with pytest.raises(grpc.RpcError) as err:
            stub.Write(p4r.WriteRequest(device_id=DEVICE_ID, election_id=p4r.Uint128(low=4)))
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
        stub.Write(p4r.WriteRequest(device_id=DEVICE_ID, election_id=p4r.Uint128(low=5)))
        requests.close()  # half-close: the server ends the stream, as PI does
        assert list(stream) == []
        with pytest.raises(grpc.RpcError) as err:  # no stream left: an election id is refused
            stub.Write(p4r.WriteRequest(device_id=DEVICE_ID, election_id=p4r.Uint128(low=5)))
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
        for req in (p4r.WriteRequest(device_id=DEVICE_ID),  # ... and so is a Write without one
                    p4r.SetForwardingPipelineConfigRequest(
                        device_id=DEVICE_ID, config=_config(FORWARD),
                        action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)):
            call = stub.Write if isinstance(req, p4r.WriteRequest) else stub.SetForwardingPipelineConfig
            with pytest.raises(grpc.RpcError) as err:
                call(req)
            assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
            assert "no StreamChannel open" in err.value.details()


def _role_arbitration(role: str, election_id: int) -> p4r.StreamMessageRequest:
    msg = _arbitration(election_id)
    msg.arbitration.role.name = role
    return msg


def test_arbitration_per_role(target: Target) -> None:
    """P4Runtime spec, Client Arbitration: one primary per role (highest election id);
    a backup's write is refused; roles are independent (same election id in two roles,
    one role's primary leaving does not touch the other); only the default role's
    primary changes the pipeline."""
    _need(FORWARD)
    channel, stub = target.stub()
    streams: list[Requests] = []

    def open_stream(role: str, eid: int) -> tuple[Requests, Iterator[p4r.StreamMessageResponse]]:
        reqs = Requests(_role_arbitration(role, eid))
        streams.append(reqs)
        return reqs, stub.StreamChannel(iter(reqs))

    def write(role: str, eid: int) -> grpc.StatusCode:
        try:
            stub.Write(p4r.WriteRequest(device_id=DEVICE_ID, role=role, election_id=p4r.Uint128(low=eid)))
            return grpc.StatusCode.OK
        except grpc.RpcError as e:
            return e.code()

    with channel:
        try:
            _, deploy = open_stream("", 10)
            assert next(deploy).arbitration.status.code == 0
            stub.SetForwardingPipelineConfig(p4r.SetForwardingPipelineConfigRequest(
                device_id=DEVICE_ID, election_id=p4r.Uint128(low=10), config=_config(FORWARD),
                action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT))
            low_reqs, low = open_stream("ndn-pit", 5)
            first = next(low).arbitration
            assert first.status.code == 0 and first.role.name == "ndn-pit"  # alone in its role
            high_reqs, high = open_stream("ndn-pit", 10)  # 10 is taken in "", not in "ndn-pit"
            assert next(high).arbitration.status.code == 0
            demoted = next(low).arbitration  # its role's primary changed: it is told
            assert demoted.status.code == grpc.StatusCode.ALREADY_EXISTS.value[0]
            assert demoted.election_id.low == 10
            assert write("ndn-pit", 5) == grpc.StatusCode.PERMISSION_DENIED  # the backup
            assert write("ndn-pit", 10) == grpc.StatusCode.OK
            assert write("", 10) == grpc.StatusCode.OK  # the default role is untouched
            assert write("", 5) == grpc.StatusCode.PERMISSION_DENIED
            assert write("shell", 60) == grpc.StatusCode.PERMISSION_DENIED  # no stream in that role
            # a named role may not change the pipeline, even as its primary
            with pytest.raises(grpc.RpcError) as err:
                stub.SetForwardingPipelineConfig(p4r.SetForwardingPipelineConfigRequest(
                    device_id=DEVICE_ID, role="ndn-pit", election_id=p4r.Uint128(low=10), config=_config(FORWARD),
                    action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT))
            assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
            # the role's primary leaves: its backup takes over; the default role is unaffected
            high_reqs.close()
            assert list(high) == []
            promoted = next(low).arbitration
            assert promoted.status.code == 0 and promoted.election_id.low == 5
            assert write("ndn-pit", 5) == grpc.StatusCode.OK
            assert write("", 10) == grpc.StatusCode.OK
            # a second stream with an id taken in its own role is refused
            _, dup = open_stream("ndn-pit", 5)
            with pytest.raises(grpc.RpcError) as err:
                list(dup)
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        finally:
            for r in streams:
                r.close()


def test_backup_becomes_primary_when_primary_leaves(target: Target) -> None:
    _need(FORWARD)
    channel, stub = target.stub()
    with channel:
        backup_requests, primary_requests = Requests(_arbitration(1)), Requests(_arbitration(2))
        backup = stub.StreamChannel(iter(backup_requests))
        msg = next(backup)
        assert msg.arbitration.status.code == 0  # alone: primary
        primary = stub.StreamChannel(iter(primary_requests))
        assert next(primary).arbitration.status.code == 0
        msg = next(backup)  # primary changed: everybody is told
        assert msg.arbitration.status.code == grpc.StatusCode.ALREADY_EXISTS.value[0]
        assert msg.arbitration.election_id.low == 2
        primary.cancel()
        primary_requests.close()
        msg = next(backup)
        assert msg.arbitration.status.code == 0 and msg.arbitration.election_id.low == 1
        # Raising one's own election id is answered (to that stream only).
        backup_requests.put(_arbitration(3))
        msg = next(backup)
        assert msg.arbitration.status.code == 0 and msg.arbitration.election_id.low == 3
        backup.cancel()
        backup_requests.close()


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


# -- p4runtime-shell ----------------------------------------------------------------------
SHELL_VENV = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gradnet" / "p4rt-shell-venv"
SHELL_VERSION = "0.0.6"  # installs on Python 3.11 with p4runtime 1.4.1 and protobuf 3.20.3


@pytest.fixture(scope="session")
def p4rt_shell_python() -> Path:
    """Python of a private venv holding p4runtime-shell (it pins protobuf<3.21)."""
    python = SHELL_VENV / "bin" / "python"
    probe = [str(python), "-c", "import p4runtime_sh.shell"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    try:
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(SHELL_VENV)], check=True,
                       capture_output=True, timeout=120)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        f"p4runtime-shell=={SHELL_VERSION}"], check=True, capture_output=True, timeout=600)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as e:
        out = getattr(e, "stderr", b"") or b""
        pytest.skip(f"cannot create the p4runtime-shell venv (no network?): {e} {out.decode()[-300:]}")
    if subprocess.run(probe, capture_output=True).returncode != 0:
        pytest.skip("p4runtime-shell installed but does not import")
    return python


def test_p4runtime_shell_interop(target: Target, p4rt_shell_python: Path) -> None:
    _need(FORWARD)
    script = textwrap.dedent(f"""
        import p4runtime_sh.shell as sh
        sh.setup(device_id={DEVICE_ID}, grpc_addr="{target.address}", election_id=(0, 1),
                 config=sh.FwdPipeConfig("{FORWARD[1]}", "{FORWARD[0]}"))
        te = sh.TableEntry("MyIngress.forwarding.ipv4_routes")(action="MyIngress.forwarding.set_next_hop")
        te.match["hdr.ipv4.dst_addr"] = "10.0.3.0/24"
        te.action["dmac"] = "00:00:00:00:0a:03"
        te.action["port"] = "3"
        te.insert()
        got = list(sh.TableEntry("MyIngress.forwarding.ipv4_routes").read())
        assert len(got) == 1, got
        e = got[0]
        print("MATCH", e.match["hdr.ipv4.dst_addr"].lpm.prefix_len, e.match["hdr.ipv4.dst_addr"].lpm.value.hex())
        print("PARAMS", [p.value.hex() for p in e.action.msg().params])
        try:
            te.insert()
        except Exception as ex:
            print("DUP", type(ex).__name__, "ALREADY_EXISTS" in str(ex))
        g = sh.MulticastGroupEntry(4).add(1, 1).add(2, 1)
        g.insert()
        print("GROUPS", len(list(sh.MulticastGroupEntry(4).read())))
        sh.teardown()
    """)
    res = subprocess.run([str(p4rt_shell_python), "-c", script], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "MATCH 24 0a000300" in res.stdout
    assert "PARAMS ['0a03', '03']" in res.stdout
    assert "DUP P4RuntimeWriteException True" in res.stdout
    assert "GROUPS 1" in res.stdout
    assert len(target.switch.program.tables["MyIngress.forwarding.ipv4_routes"]) == 1
