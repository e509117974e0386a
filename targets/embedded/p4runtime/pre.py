"""The packet replication engine: multicast groups and clone sessions."""

from __future__ import annotations

from typing import Any

from finsy.proto import p4r

from targets.embedded import state
from targets.embedded.p4runtime.base import ServiceBase
from targets.embedded.p4runtime.common import (
    FIRST_RESERVED_GROUP_ID,
    MAX_CLONE_SESSION_ID,
    SC,
    P4RuntimeError,
)


class PreMixin(ServiceBase):
    """Write and read multicast groups and clone sessions."""

    @staticmethod
    def _decode_replicas(replicas: Any) -> tuple[list[state.Replica], list[int]]:
        out: list[state.Replica] = []
        forms: list[int] = []  # 0: egress_port, n > 0: port as n bytes
        seen = set()
        for r in replicas:
            kind = r.WhichOneof("port_kind")
            if kind == "egress_port":
                port, form = r.egress_port, 0
            elif kind == "port":
                if not r.port:
                    raise P4RuntimeError(SC.INVALID_ARGUMENT, "Port must not be the empty string")
                if len(r.port) > 4:
                    raise P4RuntimeError(SC.UNIMPLEMENTED,
                                         f"Got port of {len(r.port)} bytes, but only 4 bytes are supported")
                port, form = int.from_bytes(r.port, "big"), len(r.port)
            else:
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "Missing port in multicast group replica")
            if (port, r.instance) in seen:
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "Duplicate replica in multicast group")
            seen.add((port, r.instance))
            out.append(state.Replica(port, r.instance))
            forms.append(form)
        return out, forms

    def _encode_replicas(self, kind: str, ident: int, replicas: list[state.Replica]) -> list[p4r.Replica]:
        forms = self._port_forms.get((kind, ident), [])
        out = []
        for i, r in enumerate(replicas):
            form = forms[i] if i < len(forms) else 0
            if form:
                out.append(p4r.Replica(port=r.port.to_bytes(form, "big"), instance=r.rid))
            else:
                out.append(p4r.Replica(egress_port=r.port, instance=r.rid))
        return out

    def _write_pre(self, t: int, pe: p4r.PacketReplicationEngineEntry) -> None:
        pre = self.switch.pre
        kind = pe.WhichOneof("type")
        if kind == "multicast_group_entry":
            g = pe.multicast_group_entry
            gid = g.multicast_group_id
            if gid == 0:
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "0 is not a valid group id")
            if gid >= FIRST_RESERVED_GROUP_ID:
                raise P4RuntimeError(SC.OUT_OF_RANGE, "Group id value is too high")
            self._check_update_type(t, p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE)
            if t == p4r.Update.DELETE:
                pre.delete_group(gid)
                self._port_forms.pop(("mc", gid), None)
                return
            replicas, forms = self._decode_replicas(g.replicas)
            pre.set_group(gid, replicas, create=t == p4r.Update.INSERT)
            self._port_forms[("mc", gid)] = forms
        elif kind == "clone_session_entry":
            c = pe.clone_session_entry
            sid = c.session_id
            if sid == 0:
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "0 is not a valid session id")
            if sid >= MAX_CLONE_SESSION_ID:
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "Clone session id out-of-range")
            self._check_update_type(t, p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE)
            if t == p4r.Update.DELETE:
                pre.delete_clone_session(sid)
                self._port_forms.pop(("clone", sid), None)
                return
            if c.class_of_service != 0:
                raise P4RuntimeError(SC.UNIMPLEMENTED, "COS for clone sessions not supported yet")
            if c.packet_length_bytes < 0:
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "packet_length_bytes must not be negative")
            replicas, forms = self._decode_replicas(c.replicas)
            session = state.CloneSession(replicas, c.class_of_service, c.packet_length_bytes)
            pre.set_clone_session(sid, session, create=t == p4r.Update.INSERT)
            self._port_forms[("clone", sid)] = forms
        else:
            raise P4RuntimeError(SC.INVALID_ARGUMENT, "Invalid PRE operation")

    def _read_pre(self, pe: p4r.PacketReplicationEngineEntry, out: list[p4r.Entity]) -> None:
        pre = self.switch.pre
        kind = pe.WhichOneof("type")
        if kind == "multicast_group_entry":
            gid = pe.multicast_group_entry.multicast_group_id
            if gid >= FIRST_RESERVED_GROUP_ID:
                raise P4RuntimeError(SC.OUT_OF_RANGE, "Group id value is too high")
            if gid == 0:
                gids = sorted(pre.groups)
            elif gid in pre.groups:
                gids = [gid]
            else:
                raise P4RuntimeError(SC.NOT_FOUND, "Multicast group does not exist")
            for g in gids:
                entry = p4r.MulticastGroupEntry(multicast_group_id=g,
                                                replicas=self._encode_replicas("mc", g, pre.groups[g]))
                out.append(p4r.Entity(packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
                    multicast_group_entry=entry)))
        elif kind == "clone_session_entry":
            sid = pe.clone_session_entry.session_id
            if sid == 0:
                sids = sorted(pre.clone_sessions)
            elif sid in pre.clone_sessions:
                sids = [sid]
            else:
                raise P4RuntimeError(SC.NOT_FOUND, "Clone session id does not exist")
            for s in sids:
                cs = pre.clone_sessions[s]
                entry = p4r.CloneSessionEntry(session_id=s, replicas=self._encode_replicas("clone", s, cs.replicas),
                                              class_of_service=cs.class_of_service,
                                              packet_length_bytes=cs.packet_length_bytes)
                out.append(p4r.Entity(packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
                    clone_session_entry=entry)))
        else:
            raise P4RuntimeError(SC.INVALID_ARGUMENT, "Invalid PRE operation")
