"""The embedded P4Runtime server's arbitration: only the primary writes, roles, a backup
taking over (rig: ``tests/p4runtime_rig.py``).
"""

from __future__ import annotations

from collections.abc import Iterator

import finsy as fy
import grpc
import pytest
from finsy.p4client import P4ClientError
from finsy.proto import p4r

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
    _run,
    target,
)

__all__ = ["target"]  # the fixture, imported


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
