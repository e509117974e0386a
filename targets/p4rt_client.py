"""A small synchronous P4Runtime client for scripts, tests and benchmarks.

finsy's asyncio ``Switch`` is the controller's client; this one is for straight-line
code (a test that inserts three entries and sends a packet). It reuses finsy's
``P4Schema`` and entity classes to encode names and values, and talks to the switch
with the plain gRPC stub, so it works the same against the embedded target and BMv2.

    c = P4RuntimeClient("unix:/tmp/gradnet-x/s1.grpc", device_id=1)
    c.set_pipeline("p4src/build/forward.p4info.txt", "p4src/build/forward.json")
    c.write(+P4TableEntry("ipv4_routes", match=..., action=...))
"""

from __future__ import annotations

import queue
import threading
from pathlib import Path
from typing import Any

import grpc
from finsy import P4Schema
from finsy.p4entity import decode_entity, encode_entities, encode_updates
from finsy.proto import p4r, p4r_grpc, rpc_code, rpc_status


class P4RuntimeError(RuntimeError):
    """A failed P4Runtime call: ``code`` is the gRPC status name, ``details`` per update."""

    def __init__(self, code: str, message: str, details: list[str] | None = None) -> None:
        super().__init__(f"{code}: {message}" + (f" {details}" if details else ""))
        self.code = code
        self.details = details or []


def _error(e: grpc.RpcError) -> P4RuntimeError:
    """Turn an RpcError into P4RuntimeError, unpacking per-update p4.v1.Error details."""
    details: list[str] = []
    for key, value in (e.trailing_metadata() or ()):
        if key != "grpc-status-details-bin":
            continue
        st = rpc_status.Status()
        st.ParseFromString(value)
        for d in st.details:
            err = p4r.Error()
            if d.Unpack(err):
                details.append(f"{rpc_code.Code.Name(err.canonical_code)}:{err.message}")
    return P4RuntimeError(e.code().name, e.details() or "", details)


class P4RuntimeClient:
    """Primary controller connection to one P4Runtime device."""

    def __init__(self, address: str, device_id: int = 0, election_id: int = 1, timeout: float = 10.0) -> None:
        self.address = address
        self.device_id = device_id
        self.election_id = election_id
        self.timeout = timeout
        self.schema: P4Schema | None = None
        self._channel = grpc.insecure_channel(address)
        self._stub = p4r_grpc.P4RuntimeStub(self._channel)
        self._requests: queue.Queue[p4r.StreamMessageRequest | None] = queue.Queue()
        self.packet_ins: queue.Queue[p4r.PacketIn] = queue.Queue()
        self.digests: queue.Queue[p4r.DigestList] = queue.Queue()
        self._arbitration: queue.Queue[p4r.MasterArbitrationUpdate] = queue.Queue()
        self._stream = self._stub.StreamChannel(iter(self._requests.get, None))
        self._reader = threading.Thread(target=self._read_stream, daemon=True)
        self._reader.start()
        self._requests.put(p4r.StreamMessageRequest(arbitration=p4r.MasterArbitrationUpdate(
            device_id=device_id, election_id=p4r.Uint128(high=0, low=election_id))))
        try:
            upd = self._arbitration.get(timeout=timeout)
        except queue.Empty:
            self.close()
            raise P4RuntimeError("DEADLINE_EXCEEDED", f"no arbitration answer from {address}") from None
        self.is_primary = upd.status.code == 0

    def _read_stream(self) -> None:
        try:
            for msg in self._stream:
                kind = msg.WhichOneof("update")
                if kind == "arbitration":
                    self._arbitration.put(msg.arbitration)
                elif kind == "packet":
                    self.packet_ins.put(msg.packet)
                elif kind == "digest":
                    self.digests.put(msg.digest)
        except grpc.RpcError:
            pass

    def close(self) -> None:
        """End the stream and the channel."""
        self._requests.put(None)
        self._channel.close()

    def __enter__(self) -> P4RuntimeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ pipeline
    def set_pipeline(self, p4info: str | Path, device_config: str | Path, cookie: int = 0) -> None:
        """SetForwardingPipelineConfig(VERIFY_AND_COMMIT) with P4Info and BMv2 JSON."""
        self.schema = P4Schema(Path(p4info))
        config = p4r.ForwardingPipelineConfig(
            p4info=self.schema.p4info,
            p4_device_config=Path(device_config).read_bytes(),
            cookie=p4r.ForwardingPipelineConfig.Cookie(cookie=cookie),
        )
        req = p4r.SetForwardingPipelineConfigRequest(
            device_id=self.device_id, election_id=p4r.Uint128(high=0, low=self.election_id),
            action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT, config=config)
        try:
            self._stub.SetForwardingPipelineConfig(req, timeout=self.timeout * 3)
        except grpc.RpcError as e:
            raise _error(e) from None

    def use_schema(self, p4info: str | Path) -> None:
        """Use a P4Info for encoding without setting the pipeline."""
        self.schema = P4Schema(Path(p4info))

    # ------------------------------------------------------------------ write/read
    def write(self, *updates: Any, atomicity: str = "CONTINUE_ON_ERROR") -> None:
        """Write finsy entities marked ``+`` (insert), ``~`` (modify) or ``-`` (delete)."""
        assert self.schema is not None, "set_pipeline or use_schema first"
        msgs = encode_updates(list(updates), self.schema)
        req = p4r.WriteRequest(device_id=self.device_id,
                               election_id=p4r.Uint128(high=0, low=self.election_id),
                               updates=msgs, atomicity=getattr(p4r.WriteRequest, atomicity))
        try:
            self._stub.Write(req, timeout=self.timeout)
        except grpc.RpcError as e:
            raise _error(e) from None

    def read(self, *entities: Any) -> list[Any]:
        """Read entities (finsy objects used as wildcards) and decode the answers."""
        assert self.schema is not None, "set_pipeline or use_schema first"
        req = p4r.ReadRequest(device_id=self.device_id, entities=encode_entities(list(entities), self.schema))
        out = []
        try:
            for resp in self._stub.Read(req, timeout=self.timeout):
                out.extend(decode_entity(e, self.schema) for e in resp.entities)
        except grpc.RpcError as e:
            raise _error(e) from None
        return out

    # ------------------------------------------------------------------ packet I/O
    def packet_out(self, payload: bytes, **metadata: Any) -> None:
        """Send a PacketOut with controller-header metadata given by name."""
        from finsy import P4PacketOut

        assert self.schema is not None
        (msg,) = encode_updates([P4PacketOut(payload, **metadata)], self.schema)
        self._requests.put(msg)

    def packet_in(self, timeout: float = 2.0) -> tuple[bytes, dict[str, int]] | None:
        """The next PacketIn as (payload, {metadata name: value}), or None on timeout."""
        try:
            msg = self.packet_ins.get(timeout=timeout)
        except queue.Empty:
            return None
        meta: dict[str, int] = {}
        if self.schema is not None:
            cpm = self.schema.controller_packet_metadata["packet_in"]
            for m in msg.metadata:
                meta[cpm.metadata[m.metadata_id].name] = int.from_bytes(m.value, "big")
        return msg.payload, meta
