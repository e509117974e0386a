"""Client arbitration on StreamChannel (primary per role), packet-out and packet-in."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc
from finsy.proto import p4r, rpc_status

from targets.embedded.p4runtime.base import ServiceBase
from targets.embedded.p4runtime.common import (
    ERROR_SPACE,
    MAX_CONNECTIONS,
    PACKET_IN_BACKLOG,
    SC,
    Connection,
    P4RuntimeError,
    abort,
    to_u128,
    u128,
)

log = logging.getLogger("gradnet.p4runtime")

_EOF = object()


@dataclass
class _Abort:
    error: P4RuntimeError


class ArbitrationMixin(ServiceBase):
    """StreamChannel: arbitration, packet-out and digest acks in; arbitration, packet-in out."""

    def _primary(self, role: str = "") -> Connection | None:
        return max((c for c in self._conns if c.role == role), key=lambda c: c.election_id, default=None)

    def _primaries(self) -> list[Connection]:
        """The primary stream of every role that has one."""
        return [p for p in (self._primary(r) for r in {c.role for c in self._conns}) if p is not None]

    def _check_primary(self, request: Any, pipeline: bool = False) -> None:
        """A Write or SetForwardingPipelineConfig must come from the primary of its role
        (role and election id of an open stream); a pipeline change from the default
        role's."""
        role = request.role
        with self._conn_lock:
            primary = self._primary(role)
            if primary is None:
                raise P4RuntimeError(SC.PERMISSION_DENIED,
                                     f"Not primary: no StreamChannel open for role {role!r} "
                                     "(open one with a MasterArbitrationUpdate first)")
            if not request.HasField("election_id") or u128(request.election_id) != primary.election_id:
                raise P4RuntimeError(SC.PERMISSION_DENIED, "Not primary")
        if pipeline and role:
            raise P4RuntimeError(SC.PERMISSION_DENIED,
                                 f"role {role!r} may not change the pipeline (only the default role)")

    def StreamChannel(
        self, request_iterator: Iterator[p4r.StreamMessageRequest], context: grpc.ServicerContext
    ) -> Iterator[p4r.StreamMessageResponse]:
        """Arbitration, packet-out and digest acks in; arbitration, packet-in, digests out."""
        conn = Connection()
        context.add_callback(lambda: conn.send(_EOF))
        reader = threading.Thread(target=self._stream_reader, args=(conn, request_iterator),
                                  name="p4rt-stream", daemon=True)
        reader.start()
        try:
            while True:
                item = conn.out.get()
                if item is _EOF:
                    return
                if isinstance(item, _Abort):
                    abort(context, item.error)
                yield item
        finally:
            self._remove_connection(conn)

    def _stream_reader(self, conn: Connection, requests: Iterator[p4r.StreamMessageRequest]) -> None:
        try:
            for req in requests:
                kind = req.WhichOneof("update")
                if kind == "arbitration":
                    try:
                        self._arbitrate(conn, req.arbitration)
                    except P4RuntimeError as e:
                        self._remove_connection(conn)
                        conn.send(_Abort(e))
                        return
                elif kind == "packet":
                    self._packet_out(conn, req.packet)
                elif kind == "digest_ack" and self._is_primary(conn):
                    self._digest_ack(req.digest_ack)
        except Exception as e:  # the client went away (RpcError) or a bug: end the stream
            if not isinstance(e, grpc.RpcError):
                log.exception("StreamChannel reader failed")
        conn.send(_EOF)

    def _is_primary(self, conn: Connection) -> bool:
        with self._conn_lock:
            return conn.device_id is not None and self._primary(conn.role) is conn

    def _arbitrate(self, conn: Connection, arb: p4r.MasterArbitrationUpdate) -> None:
        eid = u128(arb.election_id)
        role = arb.role.name if arb.HasField("role") else ""
        if arb.HasField("role") and (arb.role.HasField("config") or arb.role.id):
            raise P4RuntimeError(SC.UNIMPLEMENTED, "Role config and numeric role ids are not supported "
                                                   "(name the role; every role has full access)")
        with self._conn_lock:
            if conn.device_id is None:
                self._check_device(arb.device_id)
                if len(self._conns) >= MAX_CONNECTIONS:
                    raise P4RuntimeError(SC.RESOURCE_EXHAUSTED, "Too many connections")
                if any(c.election_id == eid and c.role == role for c in self._conns):
                    raise P4RuntimeError(SC.INVALID_ARGUMENT, "Election id already exists")
                conn.device_id, conn.election_id, conn.role = arb.device_id, eid, role
                self._conns.append(conn)
                if self._primary(role) is conn:
                    self._notify_all(role)
                else:
                    self._notify(conn)
                return
            if arb.device_id != conn.device_id:
                raise P4RuntimeError(SC.FAILED_PRECONDITION, "Invalid device id")
            if role != conn.role:
                raise P4RuntimeError(SC.FAILED_PRECONDITION, "A stream cannot change its role")
            if eid == conn.election_id:  # PI answers nothing when the id does not change
                return
            if any(c is not conn and c.election_id == eid and c.role == role for c in self._conns):
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "New election id already exists")
            was_primary = self._primary(role) is conn
            conn.election_id = eid
            if (self._primary(role) is conn) != was_primary:
                self._notify_all(role)
            else:
                self._notify(conn)

    def _notify(self, conn: Connection) -> None:
        primary = self._primary(conn.role)
        assert primary is not None
        is_primary = conn is primary
        status = rpc_status.Status(code=SC.OK.value[0] if is_primary else SC.ALREADY_EXISTS.value[0],
                                   message="Is primary" if is_primary else "Is backup")
        upd = p4r.MasterArbitrationUpdate(device_id=conn.device_id, election_id=to_u128(primary.election_id),
                                          status=status)
        if conn.role:
            upd.role.name = conn.role
        conn.send(p4r.StreamMessageResponse(arbitration=upd))

    def _notify_all(self, role: str) -> None:
        for c in self._conns:
            if c.role == role:
                self._notify(c)

    def _remove_connection(self, conn: Connection) -> None:
        with self._conn_lock:
            if conn not in self._conns:
                return
            was_primary = self._primary(conn.role) is conn
            self._conns.remove(conn)
            if was_primary and self._primary(conn.role) is not None:
                self._notify_all(conn.role)

    def close(self) -> None:
        """End every open stream (server shutdown)."""
        with self._conn_lock:
            conns, self._conns = self._conns, []
        for c in conns:
            c.send(_EOF)
        with self._digest_lock:
            for st in self._digests.values():
                if st.timer is not None:
                    st.timer.cancel()

    def _packet_out(self, conn: Connection, pkt: p4r.PacketOut) -> None:
        if not self._is_primary(conn):
            return  # PI ignores packet-outs from backups
        pl = self.pipeline
        if pl is None:
            return
        try:
            frame = pl.packet_out_frame(pkt)
            try:
                self.switch.inject_packet_out(frame)
            except ValueError as e:  # no CPU port configured
                raise P4RuntimeError(SC.FAILED_PRECONDITION, str(e)) from e
        except P4RuntimeError as e:
            conn.send(p4r.StreamMessageResponse(error=p4r.StreamError(
                canonical_code=e.code.value[0], message=e.message, space=ERROR_SPACE,
                packet_out=p4r.PacketOutError(packet_out=pkt))))

    def _on_packet_in(self, frame: bytes) -> None:
        """Packet-in handler of the switch (data-plane thread): queue a PacketIn."""
        pl = self.pipeline
        if pl is None:
            return
        with self._conn_lock:
            primaries = self._primaries()
        if not primaries:
            return
        msg = pl.packet_in_message(frame)
        if msg is None:
            self.packet_in_drops += 1
            return
        out = p4r.StreamMessageResponse(packet=msg)
        for primary in primaries:
            if primary.out.qsize() > PACKET_IN_BACKLOG:
                self.packet_in_drops += 1
                continue
            primary.send(out)
