"""A small synchronous P4Runtime client for scripts, tests and benchmarks.

finsy's asyncio ``Switch`` is the controller's client; this one is for straight-line
code (a test that inserts three entries and sends a packet). It reuses finsy's
``P4Schema`` and entity classes to encode names and values, and talks to the switch
with the plain gRPC stub, so it works the same against the embedded target and BMv2.

    c = P4RuntimeClient("unix:/tmp/gradnet-x/s1.grpc", device_id=1)
    c.set_pipeline("p4src/build/forward.p4info.txt", "p4src/build/forward.json")
    c.write(+P4TableEntry("ipv4_routes", match=..., action=...))

A client arbitrates for one role (``role``, "" the default role) with ``election_id``;
writes carry both, so only the role's primary can write (docs/trust.md). ``tls`` (a
:class:`ClientTls`: CA, and for mutual TLS a client certificate and key) makes the
channel a TLS one; :meth:`ClientTls.from_env` reads ``GRADNET_P4RT_CACERT``,
``GRADNET_P4RT_CERT``, ``GRADNET_P4RT_KEY`` and ``GRADNET_P4RT_TARGET_NAME``.
"""

from __future__ import annotations

import os
import queue
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from finsy import P4Schema
from finsy.p4entity import decode_entity, encode_entities, encode_updates
from finsy.proto import p4r, p4r_grpc, rpc_code, rpc_status

from targets.journal import SwitchJournal


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


@dataclass(frozen=True)
class ClientTls:
    """TLS options of a P4Runtime client: the CA that signed the switch's certificate
    (None: the system's roots), and for mutual TLS this client's certificate and key
    (PEM files). ``target_name`` overrides the host name checked against the switch's
    certificate (an address such as ``unix:...`` has none)."""

    cacert: str | Path | None = None
    cert: str | Path | None = None
    key: str | Path | None = None
    target_name: str = ""

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> ClientTls | None:
        """From ``GRADNET_P4RT_CACERT`` / ``_CERT`` / ``_KEY`` / ``_TARGET_NAME``; None
        when none of the first three is set (plain gRPC)."""
        env = dict(os.environ if env is None else env)
        ca, cert, key = (env.get(f"GRADNET_P4RT_{k}") or None for k in ("CACERT", "CERT", "KEY"))
        if ca is None and cert is None and key is None:
            return None
        return cls(ca, cert, key, env.get("GRADNET_P4RT_TARGET_NAME", ""))

    def _read(self) -> tuple[bytes | None, bytes | None, bytes | None]:
        if (self.cert is None) != (self.key is None):
            raise P4RuntimeError("INVALID_ARGUMENT", "a client certificate needs its key, and a key its certificate")
        try:
            return tuple(Path(p).read_bytes() if p is not None else None  # type: ignore[return-value]
                         for p in (self.cacert, self.key, self.cert))
        except OSError as e:
            raise P4RuntimeError("INVALID_ARGUMENT", f"cannot read a TLS file: {e}") from None

    def channel_credentials(self) -> grpc.ChannelCredentials:
        """gRPC channel credentials for these files."""
        ca, key, cert = self._read()
        return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)

    def channel_options(self) -> list[tuple[str, str]]:
        """Channel options (the host-name override, if any)."""
        return [("grpc.ssl_target_name_override", self.target_name)] if self.target_name else []

    def finsy(self) -> Any:
        """The same options as finsy's ``GRPCCredentialsTLS`` (for ``finsy.SwitchOptions``)."""
        from finsy import GRPCCredentialsTLS

        ca, key, cert = self._read()
        return GRPCCredentialsTLS(cacert=ca, cert=cert, private_key=key, target_name_override=self.target_name)


def get_pipeline(channel: grpc.Channel, device_id: int, timeout: float = 2.0) -> p4r.ForwardingPipelineConfig | None:
    """GetForwardingPipelineConfig(P4INFO_AND_COOKIE) on ``channel``: the running
    pipeline, or None when the device has none (FAILED_PRECONDITION, or an empty P4Info).
    Other errors (no server, deadline) raise :class:`P4RuntimeError`."""
    stub = p4r_grpc.P4RuntimeStub(channel)
    req = p4r.GetForwardingPipelineConfigRequest(
        device_id=device_id, response_type=p4r.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE)
    try:
        resp = stub.GetForwardingPipelineConfig(req, timeout=timeout)
    except grpc.RpcError as e:
        if e.code() == grpc.StatusCode.FAILED_PRECONDITION:
            return None
        raise _error(e) from None
    cfg = resp.config
    return cfg if cfg.HasField("p4info") and len(cfg.p4info.tables) + len(cfg.p4info.actions) > 0 else None


def open_channel(address: str, tls: ClientTls | None = None) -> grpc.Channel:
    """A gRPC channel to ``address``: plain, or TLS with ``tls``."""
    if tls is None:
        return grpc.insecure_channel(address)
    return grpc.secure_channel(address, tls.channel_credentials(), options=tls.channel_options())


class P4RuntimeClient:
    """Controller connection to one P4Runtime device: primary or backup of ``role``."""

    def __init__(self, address: str, device_id: int = 0, election_id: int = 1, timeout: float = 10.0,
                 role: str = "", tls: ClientTls | None = None, journal: SwitchJournal | None = None) -> None:
        self.address = address
        #: records pipelines and successful writes for a replay after a restart (None: not)
        self.journal = journal
        self._ended = threading.Event()
        self.device_id = device_id
        self.election_id = election_id
        self.role = role
        self.timeout = timeout
        self.schema: P4Schema | None = None
        self._stream_error: grpc.RpcError | None = None
        # no ``tls``: TLS when GRADNET_P4RT_CACERT/_CERT/_KEY say so, else plain gRPC
        self._channel = open_channel(address, tls if tls is not None else ClientTls.from_env())
        self._stub = p4r_grpc.P4RuntimeStub(self._channel)
        self._requests: queue.Queue[p4r.StreamMessageRequest | None] = queue.Queue()
        self.packet_ins: queue.Queue[p4r.PacketIn] = queue.Queue()
        self.digests: queue.Queue[p4r.DigestList] = queue.Queue()
        self._arbitration: queue.Queue[p4r.MasterArbitrationUpdate | None] = queue.Queue()
        self._stream = self._stub.StreamChannel(iter(self._requests.get, None))
        self._reader = threading.Thread(target=self._read_stream, daemon=True)
        self._reader.start()
        arb = p4r.MasterArbitrationUpdate(device_id=device_id, election_id=p4r.Uint128(high=0, low=election_id))
        if role:
            arb.role.name = role
        self._requests.put(p4r.StreamMessageRequest(arbitration=arb))
        try:
            upd = self._arbitration.get(timeout=timeout)
        except queue.Empty:
            self.close()
            raise P4RuntimeError("DEADLINE_EXCEEDED", f"no arbitration answer from {address}") from None
        if upd is None:  # the stream failed: refused arbitration, TLS handshake, no server
            self.close()
            err = self._stream_error
            raise P4RuntimeError(err.code().name if err is not None else "UNAVAILABLE",
                                 f"{address}: {err.details() if err is not None else 'stream closed'}")
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
        except grpc.RpcError as e:
            self._stream_error = e
        self._ended.set()
        self._arbitration.put(None)  # wakes a constructor still waiting for its answer

    def wait_stream_end(self, timeout: float | None = None) -> bool:
        """Block until the stream ends (the switch died, restarted or closed it) or
        ``timeout`` passes; True when it ended."""
        return self._ended.wait(timeout)

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
        self.set_pipeline_config(config)

    def set_pipeline_config(self, config: p4r.ForwardingPipelineConfig) -> None:
        """SetForwardingPipelineConfig(VERIFY_AND_COMMIT) of a whole config message
        (e.g. one read back from a journal)."""
        req = p4r.SetForwardingPipelineConfigRequest(
            device_id=self.device_id, role=self.role, election_id=p4r.Uint128(high=0, low=self.election_id),
            action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT, config=config)
        try:
            self._stub.SetForwardingPipelineConfig(req, timeout=self.timeout * 3)
        except grpc.RpcError as e:
            raise _error(e) from None
        if self.journal is not None:
            self.journal.record_pipeline(config)

    def get_pipeline(self) -> p4r.ForwardingPipelineConfig | None:
        """The running pipeline's P4Info and cookie, or None when none is loaded
        (a unary call: needs no stream and no primary)."""
        return get_pipeline(self._channel, self.device_id, self.timeout)

    def use_schema(self, p4info: str | Path) -> None:
        """Use a P4Info for encoding without setting the pipeline."""
        self.schema = P4Schema(Path(p4info))

    # ------------------------------------------------------------------ write/read
    def write(self, *updates: Any, atomicity: str = "CONTINUE_ON_ERROR") -> None:
        """Write finsy entities marked ``+`` (insert), ``~`` (modify) or ``-`` (delete)."""
        assert self.schema is not None, "set_pipeline or use_schema first"
        self.write_updates(encode_updates(list(updates), self.schema), atomicity=atomicity)

    def write_updates(self, msgs: list[p4r.Update], atomicity: str = "CONTINUE_ON_ERROR") -> None:
        """Write already encoded ``p4.v1.Update`` messages in one WriteRequest."""
        req = p4r.WriteRequest(device_id=self.device_id, role=self.role,
                               election_id=p4r.Uint128(high=0, low=self.election_id),
                               updates=msgs, atomicity=getattr(p4r.WriteRequest, atomicity))
        try:
            self._stub.Write(req, timeout=self.timeout)
        except grpc.RpcError as e:
            raise _error(e) from None
        if self.journal is not None:
            self.journal.record_write(msgs)

    def write_codes(self, updates: list[p4r.Update], *, role: str | None = None,
                    election_id: int | None = None, device_id: int | None = None) -> list[str]:
        """Send raw ``p4.v1.Update`` messages in one CONTINUE_ON_ERROR Write and return the
        canonical code name of each update ("OK" where it was applied). A request refused
        as a whole (arbitration, device id) gives its code for every update. ``role``,
        ``election_id`` and ``device_id`` override the client's own (to test refusals)."""
        req = p4r.WriteRequest(
            device_id=self.device_id if device_id is None else device_id,
            role=self.role if role is None else role,
            election_id=p4r.Uint128(high=0, low=self.election_id if election_id is None else election_id),
            updates=updates)
        try:
            self._stub.Write(req, timeout=self.timeout)
        except grpc.RpcError as e:
            codes: list[str] = []
            for key, value in (e.trailing_metadata() or ()):
                if key == "grpc-status-details-bin":
                    st = rpc_status.Status.FromString(value)
                    for d in st.details:
                        err = p4r.Error()
                        if d.Unpack(err):
                            codes.append(rpc_code.Code.Name(err.canonical_code))
            if len(codes) == len(updates):
                return codes
            return [e.code().name] * len(updates)
        return ["OK"] * len(updates)

    def read(self, *entities: Any) -> list[Any]:
        """Read entities (finsy objects used as wildcards) and decode the answers."""
        assert self.schema is not None, "set_pipeline or use_schema first"
        req = p4r.ReadRequest(device_id=self.device_id, role=self.role, entities=encode_entities(list(entities), self.schema))
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
