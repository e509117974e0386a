"""What a switch was told over P4Runtime, kept as data so it can be told again after a restart.

A switch process that dies takes its pipeline, tables, multicast groups and registers
with it. Every controller write that should outlive a restart is therefore recorded per
switch in the run directory (docs/faults.md)::

    <run dir>/journal/<switch>/pipeline.pb   p4.v1.ForwardingPipelineConfig (binary)
    <run dir>/journal/<switch>/writes.pb     WriteRequests, each a 4-byte big-endian
                                             length and the message (binary), in order

Both are protobuf messages, never code. Loading a pipeline starts a fresh journal (a new
pipeline has empty tables); every successful write is appended. :func:`replay` sets the
recorded pipeline and writes the recorded requests again, in order, as the default role's
primary. Registers and counters are not recorded: BMv2's P4Runtime can neither read nor
write registers, so recovery is a clean slate plus the protocols' own retransmissions.

The run directory is where the switch's P4Runtime Unix socket lives
(``unix:<run dir>/<switch>.grpc``); switches reached over TCP keep no journal unless
``$GRADNET_JOURNAL_DIR`` names a directory for them.
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from finsy.proto import p4r

__all__ = ["JOURNAL_DIR", "JournalError", "SwitchJournal", "journal_for"]

JOURNAL_DIR = "journal"
PIPELINE_FILE = "pipeline.pb"
WRITES_FILE = "writes.pb"
_LEN = struct.Struct(">I")
#: Largest record accepted when reading back (gRPC's default message limit).
MAX_RECORD = 4 << 20

_locks: dict[Path, threading.Lock] = {}
_locks_guard = threading.Lock()


class JournalError(RuntimeError):
    """A journal is missing, truncated or does not parse."""


def _lock(path: Path) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(path, threading.Lock())


@dataclass(frozen=True)
class SwitchJournal:
    """The journal of one switch: a directory with ``pipeline.pb`` and ``writes.pb``."""

    path: Path

    @property
    def pipeline_file(self) -> Path:
        return self.path / PIPELINE_FILE

    @property
    def writes_file(self) -> Path:
        return self.path / WRITES_FILE

    def exists(self) -> bool:
        """Whether a pipeline was recorded (nothing to replay otherwise)."""
        return self.pipeline_file.is_file()

    # ------------------------------------------------------------------ recording
    def record_pipeline(self, config: p4r.ForwardingPipelineConfig) -> None:
        """A pipeline was loaded: start the journal afresh with it."""
        with _lock(self.path):
            self.path.mkdir(parents=True, exist_ok=True)
            tmp = self.pipeline_file.with_suffix(".tmp")
            tmp.write_bytes(config.SerializeToString())
            self.writes_file.write_bytes(b"")
            tmp.replace(self.pipeline_file)

    def record_pipeline_files(self, p4info: p4r.P4Info | Any, device_config: bytes, cookie: int = 0) -> None:
        """:meth:`record_pipeline` from a P4Info message and the BMv2 JSON's bytes."""
        self.record_pipeline(p4r.ForwardingPipelineConfig(
            p4info=p4info, p4_device_config=device_config,
            cookie=p4r.ForwardingPipelineConfig.Cookie(cookie=cookie)))

    def record_write(self, updates: Sequence[p4r.Update]) -> None:
        """Successful updates: append them as one WriteRequest (one ``write`` call, so
        concurrent writers append whole records)."""
        if not updates or not self.exists():
            return  # writes to a pipeline nobody recorded cannot be replayed alone
        data = p4r.WriteRequest(updates=list(updates)).SerializeToString()
        with _lock(self.path):
            fd = os.open(self.writes_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, _LEN.pack(len(data)) + data)
            finally:
                os.close(fd)

    # ------------------------------------------------------------------ reading
    def pipeline(self) -> p4r.ForwardingPipelineConfig:
        """The recorded pipeline."""
        try:
            data = self.pipeline_file.read_bytes()
        except FileNotFoundError:
            raise JournalError(f"{self.path}: no pipeline recorded") from None
        cfg = p4r.ForwardingPipelineConfig()
        try:
            cfg.ParseFromString(data)
        except Exception as e:  # protobuf's DecodeError
            raise JournalError(f"{self.pipeline_file}: does not parse ({e})") from None
        return cfg

    def writes(self) -> Iterator[p4r.WriteRequest]:
        """The recorded WriteRequests, in order (a truncated last record is an error)."""
        try:
            data = self.writes_file.read_bytes()
        except FileNotFoundError:
            return
        i = 0
        while i < len(data):
            if i + 4 > len(data):
                raise JournalError(f"{self.writes_file}: truncated at byte {i}")
            (n,) = _LEN.unpack_from(data, i)
            if n > MAX_RECORD or i + 4 + n > len(data):
                raise JournalError(f"{self.writes_file}: bad record length {n} at byte {i}")
            req = p4r.WriteRequest()
            try:
                req.ParseFromString(data[i + 4:i + 4 + n])
            except Exception as e:
                raise JournalError(f"{self.writes_file}: record at byte {i} does not parse ({e})") from None
            yield req
            i += 4 + n

    def summary(self) -> dict[str, Any]:
        """``{"pipeline": bool, "writes": n, "updates": n}`` (for reports)."""
        if not self.exists():
            return {"pipeline": False, "writes": 0, "updates": 0}
        reqs = list(self.writes())
        return {"pipeline": True, "writes": len(reqs), "updates": sum(len(r.updates) for r in reqs)}


def journal_for(name: str, address: str) -> SwitchJournal | None:
    """The journal of switch ``name`` at P4Runtime ``address``: beside its Unix socket,
    else under ``$GRADNET_JOURNAL_DIR``; None when neither applies."""
    if address.startswith("unix:"):
        return SwitchJournal(Path(address[5:]).parent / JOURNAL_DIR / name)
    root = os.environ.get("GRADNET_JOURNAL_DIR")
    return SwitchJournal(Path(root) / name) if root else None
