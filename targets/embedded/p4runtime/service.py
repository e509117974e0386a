"""The P4Runtime servicer: one class composing the service areas, each a mixin in
its own module, plus the Write and Read dispatch."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

import grpc
from finsy.proto import p4r, p4r_grpc
from google.protobuf import any_pb2

from targets.embedded.p4runtime.arbitration import ArbitrationMixin
from targets.embedded.p4runtime.common import (
    API_VERSION,
    ERROR_SPACE,
    READ_CHUNK,
    SC,
    Connection,
    DigestState,
    P4RuntimeError,
    abort,
)
from targets.embedded.p4runtime.config import PipelineConfigMixin
from targets.embedded.p4runtime.counters import CountersMixin
from targets.embedded.p4runtime.digests import DigestsMixin
from targets.embedded.p4runtime.pipeline import Pipeline
from targets.embedded.p4runtime.pre import PreMixin
from targets.embedded.p4runtime.profiles import ProfilesMixin
from targets.embedded.p4runtime.tables import TablesMixin
from targets.embedded.state import StateError

if TYPE_CHECKING:
    from targets.embedded.switch import Switch

log = logging.getLogger("gradnet.p4runtime")


class P4RuntimeService(ArbitrationMixin, PipelineConfigMixin, TablesMixin, ProfilesMixin, PreMixin, DigestsMixin,
                       CountersMixin, p4r_grpc.P4RuntimeServicer):
    """The P4Runtime servicer over one embedded ``Switch``."""

    def __init__(self, switch: Switch) -> None:
        self.switch = switch
        self.pipeline: Pipeline | None = None
        self._saved: Pipeline | None = None
        # pipeline changes, writes and reads; the switch's, so that the data plane can move a
        # program's state into native memory between two writes
        self._lock = getattr(switch, "ctrl_lock", None) or threading.RLock()
        self._conn_lock = threading.RLock()
        self._conns: list[Connection] = []
        self._digests: dict[int, DigestState] = {}
        self._digest_lock = threading.Lock()
        # PRE replicas remember whether the client wrote the port as bytes (1.4+) or as
        # egress_port, and reads answer in the same form, as PI does.
        self._port_forms: dict[tuple[str, int], list[int]] = {}
        self.packet_in_drops = 0
        self.digest_drops = 0

    def Capabilities(self, request: p4r.CapabilitiesRequest, context: grpc.ServicerContext) -> p4r.CapabilitiesResponse:
        """The P4Runtime API version this server implements."""
        return p4r.CapabilitiesResponse(p4runtime_api_version=API_VERSION)

    def Write(self, request: p4r.WriteRequest, context: grpc.ServicerContext) -> p4r.WriteResponse:
        """Apply the updates in order; report per-update errors as PI does."""
        try:
            self._check_device(request.device_id)
            self._check_primary(request)
            pl = self._need_pipeline()
            if request.atomicity != p4r.WriteRequest.CONTINUE_ON_ERROR:
                raise P4RuntimeError(SC.UNIMPLEMENTED, "Support for atomic write modes has not been implemented yet")
        except P4RuntimeError as e:
            abort(context, e)
        errors: list[P4RuntimeError | None] = []
        native = getattr(pl.program, "native", None)
        # a native program copies each table it changed once, at the end of the Write
        # (not once per update: 4096 ring entries were 4096 whole-table copies)
        with self._lock, (native.deferred_sync() if native is not None else contextlib.nullcontext()):
            for update in request.updates:
                try:
                    self._write_update(pl, update)
                    errors.append(None)
                except P4RuntimeError as e:
                    errors.append(e)
                except StateError as e:
                    errors.append(P4RuntimeError.from_state(e))
                except Exception as e:  # a bug here must not kill the server
                    log.exception("Write: internal error")
                    errors.append(P4RuntimeError(SC.INTERNAL, f"{type(e).__name__}: {e}"))
        failed = [e for e in errors if e is not None]
        if failed:
            details = []
            for e in errors:
                err = p4r.Error()
                if e is not None:
                    err.canonical_code = e.code.value[0]
                    err.message = e.message
                    err.space = ERROR_SPACE
                packed = any_pb2.Any()
                packed.Pack(err)
                details.append(packed)
            msg = f"{len(failed)} of {len(errors)} updates failed: {failed[0].code.name}: {failed[0].message}"
            abort(context, P4RuntimeError(SC.UNKNOWN, msg), details)
        return p4r.WriteResponse()

    def _write_update(self, pl: Pipeline, update: p4r.Update) -> None:
        kind = update.entity.WhichOneof("entity")
        ent = getattr(update.entity, kind) if kind else None
        if kind == "table_entry":
            self._write_table(pl, update.type, ent)
        elif kind == "packet_replication_engine_entry":
            self._write_pre(update.type, ent)
        elif kind == "counter_entry":
            self._write_counter(pl, update.type, ent)
        elif kind == "direct_counter_entry":
            self._write_direct_counter(pl, update.type, ent)
        elif kind == "register_entry":
            self._write_register(pl, update.type, ent)
        elif kind == "meter_entry":
            self._write_meter(pl, update.type, ent)
        elif kind == "direct_meter_entry":
            self._write_direct_meter(pl, update.type, ent)
        elif kind == "digest_entry":
            self._write_digest(pl, update.type, ent)
        elif kind == "value_set_entry":
            self._write_value_set(pl, update.type, ent)
        elif kind == "action_profile_member":
            self._write_profile_member(pl, update.type, ent)
        elif kind == "action_profile_group":
            self._write_profile_group(pl, update.type, ent)
        elif kind is None:
            raise P4RuntimeError(SC.UNKNOWN, "Incorrect entity type")
        else:
            raise P4RuntimeError(SC.UNIMPLEMENTED, f"{kind} writes are not supported")

    def Read(self, request: p4r.ReadRequest, context: grpc.ServicerContext) -> Iterator[p4r.ReadResponse]:
        """Stream the requested entities (wildcards expanded)."""
        out: list[p4r.Entity] = []
        try:
            self._check_device(request.device_id)
            pl = self._need_pipeline()
            with self._lock:
                for entity in request.entities:
                    self._read_entity(pl, entity, out)
        except P4RuntimeError as e:
            abort(context, e)
        except StateError as e:
            abort(context, P4RuntimeError.from_state(e))
        except Exception as e:  # a bug must not kill the server
            log.exception("Read: internal error")
            abort(context, P4RuntimeError(SC.INTERNAL, f"{type(e).__name__}: {e}"))
        if not out:
            yield p4r.ReadResponse()
        for i in range(0, len(out), READ_CHUNK):
            yield p4r.ReadResponse(entities=out[i:i + READ_CHUNK])

    def _read_entity(self, pl: Pipeline, entity: p4r.Entity, out: list[p4r.Entity]) -> None:
        kind = entity.WhichOneof("entity")
        ent = getattr(entity, kind) if kind else None
        if kind == "table_entry":
            self._read_table(pl, ent, out)
        elif kind == "packet_replication_engine_entry":
            self._read_pre(ent, out)
        elif kind == "counter_entry":
            self._read_counter(pl, ent, out)
        elif kind == "direct_counter_entry":
            self._read_direct_counter(pl, ent, out)
        elif kind == "register_entry":
            self._read_register(pl, ent, out)
        elif kind == "meter_entry":
            self._read_meter(pl, ent, out)
        elif kind == "digest_entry":
            self._read_digest(pl, ent, out)
        elif kind == "value_set_entry":
            self._read_value_set(pl, ent, out)
        elif kind == "action_profile_member":
            self._read_profile_members(pl, ent, out)
        elif kind == "action_profile_group":
            self._read_profile_groups(pl, ent, out)
        elif kind == "direct_meter_entry":
            self._read_direct_meter(pl, ent, out)
        elif kind is None:
            raise P4RuntimeError(SC.UNKNOWN, "Incorrect entity type")
        else:
            raise P4RuntimeError(SC.UNIMPLEMENTED, f"{kind} reads are not supported")
