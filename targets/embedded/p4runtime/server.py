"""P4Runtime v1 gRPC server of the embedded target.

It plays the part of the PI server inside BMv2's ``simple_switch_grpc`` (p4lang/PI,
``proto/server`` + ``proto/frontend``): same API version ("1.3.0"), same status codes,
and the same messages where clients match on them (finsy looks for "Election id already
exists" and "No forwarding pipeline config set for this device").

Behaviour, as in PI:

- One device, ``switch.device_id``. Arbitration per role (P4Runtime spec, "Client
  Arbitration"): among the streams of one role (``Role.name``; "" is the default role)
  the highest election id is primary; every stream of that role hears when its primary
  changes, a backup that joins or changes its id hears only about itself. Election ids
  are unique within a role. Roles carry no config (a ``Role.config`` is refused): every
  role may write every entity.
- Writes and pipeline changes only from a primary (beyond PI, which accepts them from
  anyone while no stream is open): a Write must name the role and election id of that
  role's primary on an open StreamChannel, else PERMISSION_DENIED. Pipeline changes
  (SetForwardingPipelineConfig) only from the default role's primary. Reads are open to
  every client. PacketOut from a role's primary; PacketIn and digests go to the primary
  of every role.
- Write runs CONTINUE_ON_ERROR only (other atomicities: UNIMPLEMENTED). When an update
  fails, the call ends with UNKNOWN and one ``p4.v1.Error`` per update (OK ones included)
  packed into the ``grpc-status-details-bin`` trailer.
- Unknown P4 ids: INVALID_ARGUMENT "Invalid P4 id". Bytestrings may be shorter or longer
  than the canonical form as long as the value fits the bit width; replies are canonical.
- Reads stop at the first entity that fails. A table read with an empty match returns
  every entry (table_id 0: every table); default entries only when asked for with
  ``is_default_action``. Counter, register and meter reads without index return every cell.
- PacketOut from the primary only: the ``packet_out`` controller header of the P4Info is
  built from the metadata (fields MSB first in P4Info order, missing ones zero, zero bits
  padding the end to a whole byte, as PI's ``PacketOutMutate``) and prepended to the
  payload. Frames the switch sends to its CPU port lose the ``packet_in`` header and go to
  the primary as PacketIn. A bad PacketOut is answered with a StreamError.
- Digests go out as DigestList only for digests configured with a DigestEntry; samples
  are batched by ``max_list_size``/``max_timeout_ns`` and, with ``ack_timeout_ns`` > 0,
  a sample still waiting for its ack is not sent again.

- Action profiles and selectors as PI over BMv2: members, groups with weights (a member
  gets one BMv2 handle per unit of weight, so a wildcard member read lists it once per
  handle, as PI does), table entries on a member or group, one-shot action sets (a
  hidden group per entry; a profile takes one programming mode until emptied). Refused
  deletes of members or groups still in use answer UNKNOWN, as BMv2's errors reach PI.
  Watch ports are accepted and ignored (ports are always up).

Beyond PI: registers can be read and written (MODIFY; no index = every cell), indirect
meters are configurable, parser value sets are written and read (ValueSetEntry MODIFY;
PI answers UNIMPLEMENTED; size and duplicate members checked as the P4Runtime spec
says), and RECONCILE_AND_COMMIT keeps table entries, counters, registers and PRE state
of objects whose names survive (not action profile members and groups).

Not implemented (UNIMPLEMENTED): direct meters, extern entries, atomic write modes.
Idle timeouts are stored and read back but no IdleTimeoutNotification is ever sent.
VERIFY_AND_SAVE keeps the new pipeline aside until COMMIT; until then Read/Write keep
using the running one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
from finsy.proto import p4r_grpc

from targets.embedded.p4runtime.common import MAX_CONNECTIONS, MAX_MESSAGE
from targets.embedded.p4runtime.service import P4RuntimeService

if TYPE_CHECKING:
    from targets.embedded.switch import Switch

log = logging.getLogger("gradnet.p4runtime")


@dataclass(frozen=True)
class ServerTls:
    """TLS for the P4Runtime server, as simple_switch_grpc's ``--grpc-server-ssl`` flags:
    the server's certificate chain and key (PEM files), and optionally a CA to verify
    clients against; ``client_auth`` requires a client certificate signed by it (mutual
    TLS, ``--grpc-server-with-client-auth``)."""

    cert: str | Path
    key: str | Path
    cacert: str | Path | None = None
    client_auth: bool = False

    def credentials(self) -> grpc.ServerCredentials:
        """gRPC server credentials; ``ValueError`` when the files do not make a valid set."""
        if self.client_auth and self.cacert is None:
            raise ValueError("client authentication needs a CA certificate (--grpc-server-cacert)")
        try:
            key, cert = Path(self.key).read_bytes(), Path(self.cert).read_bytes()
            ca = Path(self.cacert).read_bytes() if self.cacert is not None else None
        except OSError as e:
            raise ValueError(f"cannot read a TLS file: {e}") from e
        return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca,
                                           require_client_auth=self.client_auth)


class P4RuntimeServer:
    """A gRPC server exposing ``P4RuntimeService`` for ``switch`` on ``address``
    (plain, or TLS / mutual TLS with ``tls``)."""

    def __init__(self, switch: Switch, address: str = "127.0.0.1:9559", max_workers: int = 2 * MAX_CONNECTIONS + 8,
                 tls: ServerTls | None = None) -> None:
        self.switch = switch
        self.address = address
        self.tls = tls
        self.service = P4RuntimeService(switch)
        self.port: int | None = None
        self._max_workers = max_workers
        self._server: grpc.Server | None = None
        self._handlers: list[tuple[list[Any], Callable[..., None]]] = []

    def start(self) -> int:
        """Listen and serve; returns the bound TCP port (useful with port 0)."""
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=self._max_workers, thread_name_prefix="p4rt"),
            options=[("grpc.max_receive_message_length", MAX_MESSAGE),
                     ("grpc.max_send_message_length", MAX_MESSAGE),
                     ("grpc.so_reuseport", 0)],
        )
        p4r_grpc.add_P4RuntimeServicer_to_server(self.service, server)
        if self.tls is not None:
            port = server.add_secure_port(self.address, self.tls.credentials())
        else:
            port = server.add_insecure_port(self.address)
        if port == 0:
            raise RuntimeError(f"cannot listen on {self.address}")
        server.start()
        self._server = server
        self.port = port
        self._handlers = [(self.switch.packet_in_handlers, self.service._on_packet_in),
                          (self.switch.digest_handlers, self.service._on_digest)]
        for handlers, fn in self._handlers:
            handlers.append(fn)
        log.info("device %d: P4Runtime server on %s", self.switch.device_id, self.address)
        return port

    def stop(self, grace: float | None = 1.0) -> None:
        """Stop serving: close the streams, then the server."""
        for handlers, fn in self._handlers:
            if fn in handlers:
                handlers.remove(fn)
        self._handlers = []
        self.service.close()
        if self._server is not None:
            self._server.stop(grace).wait()
            self._server = None

    def __enter__(self) -> P4RuntimeServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
