"""Shared pieces of the P4Runtime service: constants, the error type, bytestrings,
gRPC status helpers and ``ServiceBase``, the state every service area works on."""

from __future__ import annotations

import queue
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc
from finsy.proto import p4r, rpc_status
from google.protobuf import any_pb2

from targets.embedded.state import StateError

API_VERSION = "1.3.0"
MAX_CONNECTIONS = 16
ERROR_SPACE = "ALL-sswitch-p4org"
FIRST_RESERVED_GROUP_ID = 1 << 15  # PI keeps groups above this for clone sessions
MAX_CLONE_SESSION_ID = 32768
READ_CHUNK = 1000  # entities per ReadResponse, keeps messages far below gRPC's 4 MB
PACKET_IN_BACKLOG = 10000  # per stream; past it packet-ins are dropped (and counted)
MAX_MESSAGE = 256 * 1024 * 1024

SC = grpc.StatusCode




@dataclass
class DigestState:
    """One digest's configuration and what it has buffered, sent and not yet acked."""

    config: p4r.DigestEntry.Config
    buffer: list[tuple[int, ...]] = field(default_factory=list)
    pending: dict[int, tuple[float, list[tuple[int, ...]]]] = field(default_factory=dict)
    cache: set[tuple[int, ...]] = field(default_factory=set)
    next_list_id: int = 1
    timer: threading.Timer | None = None

@dataclass(eq=False)
class Connection:
    """One StreamChannel: its election id and the queue of messages to send on it."""

    election_id: int = -1
    device_id: int | None = None
    role: str = ""
    out: queue.Queue = field(default_factory=queue.Queue)
    packet_in_drops: int = 0

    def send(self, item: Any) -> None:
        self.out.put(item)

class P4RuntimeError(Exception):
    """A request that fails with a gRPC status ``code``."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @classmethod
    def from_state(cls, e: StateError) -> P4RuntimeError:
        """Map a state-layer error (status given by name) to a P4RuntimeError."""
        return cls(getattr(SC, e.code, SC.UNKNOWN), str(e))


def invalid_id() -> P4RuntimeError:
    """The error PI answers for an unknown P4 id."""
    return P4RuntimeError(SC.INVALID_ARGUMENT, "Invalid P4 id")


_E = TypeVar("_E")


def all_or_one(entities: Mapping[int, _E], entity_id: int) -> list[_E]:
    """Every entity (id 0: P4Runtime's wildcard read) or the one with ``entity_id``."""
    if entity_id == 0:
        return list(entities.values())
    e = entities.get(entity_id)
    if e is None:
        raise invalid_id()
    return [e]


def decode_bytes(value: bytes, bitwidth: int, what: str) -> int:
    """A P4Runtime bytestring as an int; OUT_OF_RANGE if it is empty or needs more than
    ``bitwidth`` bits (spec, "Bytestrings"; BMv2's PI answers INVALID_ARGUMENT for a
    value too wide and takes an empty string as 0: bench/p4rt_fuzz.py ``BMV2_DIFFERS``).

    A string padded with leading zero bytes is accepted, as the spec requires.
    """
    if not value:
        raise P4RuntimeError(SC.OUT_OF_RANGE, f"{what}: empty bytestring")
    v = int.from_bytes(value, "big")
    if v >> bitwidth:
        raise P4RuntimeError(SC.OUT_OF_RANGE, f"{what}: bytestring provided does not fit within {bitwidth} bits")
    return v


def encode_bytes(value: int) -> bytes:
    """The canonical P4Runtime bytestring of ``value`` (no leading zero bytes; 0 -> b'\\0')."""
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def u128(msg: p4r.Uint128) -> int:
    """A P4Runtime Uint128 (election id) as an int."""
    return (msg.high << 64) | msg.low


def to_u128(v: int) -> p4r.Uint128:
    """An int as a P4Runtime Uint128."""
    return p4r.Uint128(high=v >> 64, low=v & ((1 << 64) - 1))


def meter_config(c: p4r.MeterConfig) -> tuple[int, int, int, int] | None:
    """A MeterConfig as (cir, cburst, pir, pburst); None for PI's "default" (all -1)."""
    values = (c.cir, c.cburst, c.pir, c.pburst)
    if values == (-1, -1, -1, -1):
        return None
    if min(values) < 0:
        raise P4RuntimeError(SC.INVALID_ARGUMENT, "Negative meter rate or burst")
    if c.pir < c.cir:
        raise P4RuntimeError(SC.INVALID_ARGUMENT, "Meter peak rate is below the committed rate")
    return values


def meter_config_msg(cfg: tuple[int, int, int, int]) -> p4r.MeterConfig:
    """(cir, cburst, pir, pburst) as a MeterConfig message."""
    return p4r.MeterConfig(cir=cfg[0], cburst=cfg[1], pir=cfg[2], pburst=cfg[3])


class _Status:
    """A ``grpc.Status`` for ``abort_with_status`` (grpcio-status is not a dependency)."""

    def __init__(self, code: grpc.StatusCode, message: str, details: list[any_pb2.Any] | None = None) -> None:
        status = rpc_status.Status(code=code.value[0], message=message, details=details or [])
        self.code = code
        self.details = message
        self.trailing_metadata = (("grpc-status-details-bin", status.SerializeToString()),)


def abort(context: grpc.ServicerContext, e: P4RuntimeError, details: list[any_pb2.Any] | None = None) -> None:
    """End the RPC with ``e``'s status (and ``details`` in grpc-status-details-bin)."""
    context.abort_with_status(_Status(e.code, e.message, details))
