"""``ServiceBase``: the state the P4Runtime service areas share, and their common checks."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from finsy.proto import p4r

from targets.embedded.p4runtime.common import SC, Connection, DigestState, P4RuntimeError

if TYPE_CHECKING:
    from targets.embedded.p4runtime.pipeline import Pipeline
    from targets.embedded.switch import Switch


class ServiceBase:
    """The state the service areas (mixins of ``P4RuntimeService``) share, and the
    checks every one of them makes."""

    switch: Switch
    pipeline: Pipeline | None
    _saved: Pipeline | None
    _lock: threading.RLock  # pipeline changes, writes and reads
    _conn_lock: threading.RLock
    _conns: list[Connection]
    _digests: dict[int, DigestState]
    _digest_lock: threading.Lock
    _port_forms: dict[tuple[str, int], list[int]]
    packet_in_drops: int
    digest_drops: int

    def _check_device(self, device_id: int) -> None:
        if device_id != self.switch.device_id:
            raise P4RuntimeError(SC.NOT_FOUND, f"Unknown device id {device_id}")

    def _need_pipeline(self) -> Pipeline:
        pl = self.pipeline
        if pl is None:
            raise P4RuntimeError(SC.FAILED_PRECONDITION, "No forwarding pipeline config set for this device")
        return pl

    @staticmethod
    def _check_update_type(t: int, *allowed: int) -> None:
        if t == p4r.Update.UNSPECIFIED:
            raise P4RuntimeError(SC.INVALID_ARGUMENT, "Update type is not set")
        if t not in (p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE):
            raise P4RuntimeError(SC.INVALID_ARGUMENT, "Invalid update type")
        if t not in allowed:
            raise P4RuntimeError(SC.INVALID_ARGUMENT, f"{p4r.Update.Type.Name(t)} update type not supported here")

    @staticmethod
    def _index(entry: Any) -> int | None:
        if not entry.HasField("index"):
            return None
        if entry.index.index < 0:
            raise P4RuntimeError(SC.INVALID_ARGUMENT, "A negative number is not a valid index value")
        return entry.index.index
