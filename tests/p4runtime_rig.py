"""Shared rig of the P4Runtime server tests (``test_p4runtime_server_*.py``): the
server fixture, programs, raw-stub helpers.

The embedded target's P4Runtime server, driven by real clients.

The server runs on 127.0.0.1 (free port) over a real ``Switch`` with the committed p4c
outputs: ``p4src/build/forward.*`` for the main flow and, where present,
``tests/p4/build/cpu_io.*`` for digests. Clients: finsy (the
controller's library), raw gRPC stubs for corner cases, and p4runtime-shell in its own
virtual environment (it pins protobuf<3.21).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
from collections.abc import Iterator
from pathlib import Path

import finsy as fy
import grpc
import pytest
from finsy.p4client import P4ClientError
from finsy.proto import p4i, p4r, p4r_grpc, rpc_status
from google.protobuf import text_format

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
