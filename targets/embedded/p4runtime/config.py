"""SetForwardingPipelineConfig / GetForwardingPipelineConfig, and carrying state
across a RECONCILE_AND_COMMIT."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import grpc
from finsy.proto import p4r

from targets.embedded import state
from targets.embedded.compiler import CompileError
from targets.embedded.p4runtime.base import ServiceBase
from targets.embedded.p4runtime.common import SC, P4RuntimeError, abort
from targets.embedded.p4runtime.pipeline import Pipeline
from targets.embedded.state import StateError

if TYPE_CHECKING:
    from targets.embedded.compiler import Program

log = logging.getLogger("gradnet.p4runtime")

_SetAction = p4r.SetForwardingPipelineConfigRequest
_GetType = p4r.GetForwardingPipelineConfigRequest


class PipelineConfigMixin(ServiceBase):
    """Verify, save, commit and read back the forwarding pipeline."""

    def SetForwardingPipelineConfig(
        self, request: p4r.SetForwardingPipelineConfigRequest, context: grpc.ServicerContext
    ) -> p4r.SetForwardingPipelineConfigResponse:
        """Verify, save and/or commit a P4Info + BMv2 JSON pipeline."""
        try:
            self._check_device(request.device_id)
            self._check_primary(request, pipeline=True)
            action = request.action
            if action not in (_SetAction.VERIFY, _SetAction.VERIFY_AND_SAVE, _SetAction.VERIFY_AND_COMMIT,
                              _SetAction.COMMIT, _SetAction.RECONCILE_AND_COMMIT):
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "Invalid SetForwardingPipeline action")
            with self._lock:
                if action == _SetAction.COMMIT:
                    if self._saved is None:
                        raise P4RuntimeError(SC.FAILED_PRECONDITION, "No saved forwarding pipeline config to commit")
                    pl, self._saved = self._saved, None
                    self._install(pl, reconcile=False)
                    return p4r.SetForwardingPipelineConfigResponse()
                pl = self._verify(request.config)
                if action == _SetAction.VERIFY_AND_SAVE:
                    self._saved = pl
                elif action != _SetAction.VERIFY:
                    self._install(pl, reconcile=action == _SetAction.RECONCILE_AND_COMMIT)
        except P4RuntimeError as e:
            abort(context, e)
        return p4r.SetForwardingPipelineConfigResponse()

    def _verify(self, config: p4r.ForwardingPipelineConfig) -> Pipeline:
        if not config.HasField("p4info"):
            raise P4RuntimeError(SC.INVALID_ARGUMENT, "Missing P4Info in forwarding pipeline config")
        if not config.p4_device_config:
            raise P4RuntimeError(SC.INVALID_ARGUMENT, "Missing p4_device_config (BMv2 JSON) in forwarding pipeline config")
        try:
            program = self.switch.load_program(config.p4_device_config)
        except CompileError as e:
            raise P4RuntimeError(SC.INVALID_ARGUMENT, f"Invalid device config: {e}") from e
        except Exception as e:  # a compiler bug: report it, keep serving
            log.exception("compiling the device config failed")
            raise P4RuntimeError(SC.INTERNAL, f"Error when compiling the device config: {type(e).__name__}: {e}") from e
        return Pipeline(config, program)

    def _install(self, pl: Pipeline, reconcile: bool) -> None:
        old = self.pipeline
        pre = self.switch.pre
        keep_pre = None
        if reconcile and old is not None:
            carry_state(old.program, pl.program)
            keep_pre = (dict(pre.groups), dict(pre.clone_sessions), dict(self._port_forms))
        self.switch.install_program(pl.program)
        if keep_pre is not None:
            pre.groups.update(keep_pre[0])
            pre.clone_sessions.update(keep_pre[1])
            self._port_forms = keep_pre[2]
        else:
            pre.groups.clear()
            pre.clone_sessions.clear()
            self._port_forms.clear()
        with self._digest_lock:
            for st in self._digests.values():
                if st.timer is not None:
                    st.timer.cancel()
            self._digests.clear()
        self.pipeline = pl
        log.info("device %d: pipeline committed (cookie %s)", self.switch.device_id, pl.cookie)

    def GetForwardingPipelineConfig(
        self, request: p4r.GetForwardingPipelineConfigRequest, context: grpc.ServicerContext
    ) -> p4r.GetForwardingPipelineConfigResponse:
        """The running pipeline: P4Info and/or device config, always with its cookie."""
        try:
            self._check_device(request.device_id)
            pl = self._need_pipeline()
            rt = request.response_type
            if rt not in (_GetType.ALL, _GetType.COOKIE_ONLY, _GetType.P4INFO_AND_COOKIE,
                          _GetType.DEVICE_CONFIG_AND_COOKIE):
                raise P4RuntimeError(SC.INVALID_ARGUMENT, "Invalid response_type in GetForwardingPipelineConfigRequest")
        except P4RuntimeError as e:
            abort(context, e)
        config = p4r.ForwardingPipelineConfig()
        if rt in (_GetType.ALL, _GetType.P4INFO_AND_COOKIE):
            config.p4info.CopyFrom(pl.p4info)
        if rt in (_GetType.ALL, _GetType.DEVICE_CONFIG_AND_COOKIE):
            config.p4_device_config = pl.device_config
        if pl.cookie is not None:
            config.cookie.cookie = pl.cookie
        return p4r.GetForwardingPipelineConfigResponse(config=config)


def carry_state(old: Program, new: Program) -> None:
    """RECONCILE_AND_COMMIT: copy entries, defaults and counter/register cells by name."""
    try:
        for name, ot in old.tables.items():
            nt = new.tables.get(name)
            if ot.profile is not None:
                continue  # members and groups are not carried over: the client rewrites them
            if nt is None or [(k.match_type, k.bitwidth) for k in ot.keys] != [(k.match_type, k.bitwidth)
                                                                              for k in nt.keys]:
                continue
            ot.direct_read()  # the native backend's direct counters into the entries
            for e in ot.entries():
                if e.is_const:
                    continue
                call = new.action_call(name, e.action.name, e.action.params)
                nt.insert(state.TableEntry(e.key, call, e.priority, packets=e.packets, bytes=e.bytes,
                                           idle_timeout_ns=e.idle_timeout_ns, metadata=e.metadata,
                                           meter_config=e.meter_config))
            if ot.default is not ot.initial_default and not nt.default_const:
                nt.set_default(new.action_call(name, ot.default.name, ot.default.params))
        for name, oc in old.counters.items():
            nc = new.counters.get(name)
            if nc is not None and nc.size == oc.size:
                nc.packets[:] = oc.packets
                nc.bytes[:] = oc.bytes
        for name, orr in old.registers.items():
            nr = new.registers.get(name)
            if nr is not None and nr.size == orr.size and nr.bitwidth == orr.bitwidth:
                nr.cells[:] = orr.cells
    except StateError as e:
        raise P4RuntimeError(SC.UNKNOWN, f"Error when reconciling config: {e}") from e
