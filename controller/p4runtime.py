"""P4Runtime plumbing every gradnet data plane shares, on top of finsy.

* :class:`Program`: a compiled P4 program (BMv2 JSON + P4Info) and its finsy schema.
* :class:`ControlBlock`: base class of the per-P4-control helpers. One subclass per P4
  control (``Forwarding``, ``PortMacs``, ... in :mod:`controller.deploy`) names the tables,
  actions and counters it owns relative to the control's instance path (e.g.
  ``MyIngress.forwarding``) and builds their entries; the names are checked against the
  P4Info when the block is bound to a program, so a program that lacks them fails early.
* :class:`SwitchSession`: one primary P4Runtime connection (a ``finsy.Switch``) with
  batched writes, counter and table reads and multicast groups.
* :func:`open_sessions`: connects to many switches in parallel.

Everything here is asyncio; :mod:`controller.deploy` has synchronous wrappers.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import finsy
from finsy import (
    P4ClientError,
    P4CounterEntry,
    P4MulticastGroupEntry,
    P4Schema,
    P4TableAction,
    P4TableEntry,
    P4TableMatch,
)
from finsy.p4entity import encode_updates

from controller.roles import DEPLOY
from targets.journal import SwitchJournal, journal_for
from targets.p4rt_client import ClientTls

__all__ = [
    "DEFAULT_BATCH",
    "ControlBlock",
    "DeployError",
    "Program",
    "SwitchSession",
    "close_sessions",
    "multicast_group",
    "open_sessions",
]

#: Updates per WriteRequest: large enough that a fat-tree switch is one or two requests,
#: small enough to stay far below gRPC's 4 MiB message limit.
DEFAULT_BATCH = 1000
#: Repository root (``controller/..``): default program paths are relative to it.
REPO_ROOT = Path(__file__).resolve().parent.parent

_B = TypeVar("_B", bound="ControlBlock")


_EXPECTED_FINSY_WARNINGS = (
    # Neither BMv2's PI server nor the embedded target serves gNMI; finsy warns about
    # it on every connect.
    "gNMI is not implemented",
    # Deploy's clean-up pass attaches, with the new program's P4Info, to switches that
    # run no pipeline yet or still the previous one.
    "Forwarding pipeline is not configured",
    "Retrieved P4Info is different than expected",
)


def _quiet_finsy(record: logging.LogRecord) -> bool:
    # Expected, so not worth a line per switch.
    msg = record.getMessage()
    return not any(w in msg for w in _EXPECTED_FINSY_WARNINGS)


logging.getLogger("finsy").addFilter(_quiet_finsy)


class DeployError(RuntimeError):
    """Deploying to, or reading from, the switches failed (message names the switch)."""


# ----------------------------------------------------------------------------- program


@dataclass(frozen=True)
class Program:
    """A compiled P4 program: BMv2 JSON (the device config) and P4Info text."""

    json_path: Path
    p4info_path: Path

    @classmethod
    def load(cls, json_path: str | Path, p4info_path: str | Path | None = None) -> Program:
        """A program from its BMv2 JSON; the P4Info defaults to ``<stem>.p4info.txt`` beside it.

        Raises :class:`DeployError` when a file is missing or the P4Info does not parse.
        """
        jp = Path(json_path)
        if jp.suffix != ".json":
            raise DeployError(f"program {str(jp)!r}: expected a BMv2 JSON file (*.json)")
        ip = Path(p4info_path) if p4info_path else jp.with_name(jp.stem + ".p4info.txt")
        for path, what in ((jp, "BMv2 JSON"), (ip, "P4Info")):
            if not path.is_file():
                raise DeployError(f"{what} {str(path)!r} not found (compile with 'make p4')")
        prog = cls(jp, ip)
        prog.schema  # noqa: B018 (parse now: a broken P4Info should fail here, not mid-deploy)
        return prog

    @functools.cached_property
    def schema(self) -> P4Schema:
        """The finsy schema (P4Info + device config) of this program."""
        try:
            return P4Schema(self.p4info_path, self.json_path)
        except Exception as e:  # protobuf text-format errors have no common base
            raise DeployError(f"cannot parse P4Info {str(self.p4info_path)!r}: {e}") from None

    @property
    def name(self) -> str:
        """The program's name (file stem), e.g. ``forward``."""
        return self.json_path.stem

    def block(self, cls: type[_B], path: str | None = None) -> _B:
        """The ``cls`` control block bound to this program (cached per class and path)."""
        return _block(self, cls, path)

    def missing(self, kind: str, names: Iterable[str]) -> list[str]:
        """Those of ``names`` that the P4Info has no ``kind`` (tables/actions/counters) of."""
        entities = getattr(self.schema, kind)
        return [n for n in names if entities.get(n) is None]


@functools.cache
def _block(program: Program, cls: type[_B], path: str | None) -> _B:
    return cls(program, path)


# ----------------------------------------------------------------------------- blocks


class ControlBlock:
    """One instance of a P4 control block in a program, owning its tables.

    Subclasses set ``CONTROL`` (the default instance path, as p4c names it in the P4Info,
    e.g. ``MyIngress.forwarding``) and the local names of what they use in ``TABLES``,
    ``ACTIONS`` and ``COUNTERS``. A program that instantiates the same control under
    another name passes ``path``.
    """

    CONTROL: ClassVar[str] = ""
    TABLES: ClassVar[tuple[str, ...]] = ()
    ACTIONS: ClassVar[tuple[str, ...]] = ()
    COUNTERS: ClassVar[tuple[str, ...]] = ()

    def __init__(self, program: Program, path: str | None = None) -> None:
        """Bind to ``program``; :class:`DeployError` if it lacks any of the block's names."""
        self.program = program
        self.path = path or self.CONTROL
        problems = []
        for kind, names in (("tables", self.TABLES), ("actions", self.ACTIONS),
                            ("counters", self.COUNTERS)):
            missing = program.missing(kind, (self.name(n) for n in names))
            if missing:
                problems.append(f"{kind} {', '.join(missing)}")
        if problems:
            raise DeployError(
                f"program {program.name!r} has no {type(self).__name__} control at "
                f"{self.path!r}: missing {'; '.join(problems)}"
            )

    def name(self, local: str) -> str:
        """Fully qualified P4Info name of ``local`` (a table, action or counter)."""
        return f"{self.path}.{local}" if self.path else local

    def table_size(self, table: str) -> int:
        """The P4Info ``size`` of ``table`` (0 when unspecified)."""
        return self.program.schema.tables[self.name(table)].size

    def entry(
        self,
        table: str,
        match: Mapping[str, Any],
        action: str,
        *,
        priority: int = 0,
        **params: Any,
    ) -> P4TableEntry:
        """A table entry: ``match`` maps P4Info match-field names to finsy match values;
        ``action`` is local to this block unless it contains a dot (e.g. ``NoAction``
        is global, pass it as ``.NoAction``)."""
        act = action[1:] if action.startswith(".") else self.name(action)
        return P4TableEntry(
            self.name(table),
            match=P4TableMatch(match),
            action=P4TableAction(act, **params),
            priority=priority,
        )

    def default_entry(self, table: str, action: str, **params: Any) -> P4TableEntry:
        """The default action of ``table`` (write it with ``~`` = MODIFY)."""
        act = action[1:] if action.startswith(".") else self.name(action)
        return P4TableEntry(self.name(table), action=P4TableAction(act, **params), is_default_action=True)

    def counter(self, counter: str, index: int | None = None) -> P4CounterEntry:
        """A counter entry to read: one cell, or every cell when ``index`` is None."""
        return P4CounterEntry(self.name(counter), index=index)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.path} of {self.program.name}>"


def multicast_group(group_id: int, ports: Iterable[int | tuple[int, int]]) -> P4MulticastGroupEntry:
    """A multicast group entry: ``ports`` are egress ports, or ``(port, instance)`` pairs."""
    if isinstance(group_id, bool) or not isinstance(group_id, int) or not 1 <= group_id <= 0xFFFF:
        raise DeployError(f"multicast group id must be an int in 1..65535, got {group_id!r}")
    replicas = list(ports)
    if not replicas:
        raise DeployError(f"multicast group {group_id} has no ports")
    return P4MulticastGroupEntry(group_id, replicas=replicas)


# ----------------------------------------------------------------------------- sessions


class SwitchSession:
    """A primary P4Runtime connection to one switch.

    With ``set_pipeline`` (the default) the program is loaded on connect, always (a fresh
    pipeline has empty tables, so a deploy starts from a clean switch); without it the
    session attaches to the running pipeline and uses the program only for names.
    """

    def __init__(
        self,
        name: str,
        address: str,
        device_id: int,
        program: Program,
        *,
        set_pipeline: bool = True,
        election_id: int = DEPLOY.election_id,
        role: str = DEPLOY.name,
        tls: ClientTls | None = None,
        journal: SwitchJournal | None | bool = True,
    ) -> None:
        # TLS when asked for, else when GRADNET_P4RT_CACERT/_CERT/_KEY say so
        tls = tls if tls is not None else ClientTls.from_env()
        self.name = name
        self.address = address
        self.device_id = device_id
        self.program = program
        self.set_pipeline = set_pipeline
        options = finsy.SwitchOptions(
            p4info=program.p4info_path,
            p4blob=program.json_path if set_pipeline else None,
            p4force=set_pipeline,
            device_id=device_id,
            initial_election_id=election_id,
            role_name=role,
            channel_credentials=tls.finsy() if tls is not None else None,
        )
        self.switch = finsy.Switch(name, address, options)
        self._open = False
        #: Updates written so far (for reports).
        self.written = 0
        #: Where the pipeline and every successful write are recorded for a replay after
        #: a restart (targets/journal.py); ``True``: beside the switch's Unix socket.
        self.journal = journal_for(name, address) if journal is True else (journal or None)

    async def open(self, timeout: float = 30.0) -> SwitchSession:
        """Connect, become primary and (optionally) load the pipeline."""
        try:
            await asyncio.wait_for(self.switch.__aenter__(), timeout)
        except TimeoutError:
            raise DeployError(
                f"{self.name}: no P4Runtime answer at {self.address} within {timeout:g} s"
            ) from None
        except P4ClientError as e:
            raise DeployError(f"{self.name}: cannot connect to {self.address}: {_brief(e)}") from None
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # cancelled from outside: not this switch's failure
            # finsy's own task failed (its request's error is in its log) and it cancelled
            # the connection: one line, not a traceback
            raise DeployError(
                f"{self.name}: the P4Runtime session at {self.address} failed while connecting "
                "(a request timed out or was refused: finsy's log above says which)"
            ) from None
        self._open = True
        if not self.switch.is_primary:
            await self.close()
            raise DeployError(f"{self.name}: another controller is primary at {self.address}")
        if self.set_pipeline and self.journal is not None:
            self.journal.record_pipeline_files(self.program.schema.p4info,
                                               self.program.json_path.read_bytes())
        return self

    async def close(self) -> None:
        """Close the connection (the switch keeps its state)."""
        if self._open:
            self._open = False
            await self.switch.__aexit__(None, None, None)

    async def __aenter__(self) -> SwitchSession:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def write(self, updates: Sequence[Any], batch: int = DEFAULT_BATCH) -> int:
        """Write ``updates`` (finsy ``+entry``/``~entry``/``-entry``) in WriteRequests of
        ``batch`` updates each; returns how many were written."""
        for i in range(0, len(updates), batch):
            chunk = updates[i : i + batch]
            try:
                await self.switch.write(chunk)
            except P4ClientError as e:
                raise DeployError(f"{self.name}: write failed: {_brief(e)}") from None
            except (ValueError, KeyError) as e:  # finsy encoding: bad name or value
                raise DeployError(f"{self.name}: cannot encode an update: {e}") from None
            if self.journal is not None:
                self.journal.record_write(encode_updates(chunk, self.switch.p4info))
        self.written += len(updates)
        return len(updates)

    async def read(self, entities: Any) -> list[Any]:
        """Read entities (finsy wildcards allowed) into a list."""
        try:
            return [e async for e in self.switch.read(entities)]
        except P4ClientError as e:
            raise DeployError(f"{self.name}: read failed: {_brief(e)}") from None

    async def read_counter(
        self, counter: str, indexes: Iterable[int] | None = None
    ) -> dict[int, tuple[int, int]]:
        """``{index: (packets, bytes)}`` of an indirect counter (fully qualified name);
        every cell when ``indexes`` is None."""
        if indexes is None:
            query: list[P4CounterEntry] = [P4CounterEntry(counter)]
        else:
            query = [P4CounterEntry(counter, index=i) for i in indexes]
            if not query:
                return {}
        out: dict[int, tuple[int, int]] = {}
        for e in await self.read(query):
            out[e.index] = (e.packet_count, e.byte_count)
        return out

    async def add_multicast_group(
        self, group_id: int, ports: Iterable[int | tuple[int, int]], *, modify: bool = False
    ) -> None:
        """Install (or with ``modify`` replace) multicast group ``group_id``."""
        entry = multicast_group(group_id, ports)
        await self.write([~entry if modify else +entry])

    def __repr__(self) -> str:
        return f"<SwitchSession {self.name} dev {self.device_id} at {self.address}>"


def _brief(e: P4ClientError) -> str:
    """A one-line summary of a P4Runtime error: code, message and the first failed updates."""
    text = f"{e.code.name}: {e.message}"
    details = [d for d in e.details.values()]
    if details:
        shown = "; ".join(f"{d.canonical_code.name}: {d.message}" for d in details[:3])
        more = f" (+{len(details) - 3} more)" if len(details) > 3 else ""
        text += f" [{shown}{more}]"
    return text


#: Sessions that load a pipeline, opened at once. One embedded-target process serves many
#: switches (40 of fat-tree k=8's 80 in each of 2), and each SetForwardingPipelineConfig
#: compiles the program there (about 0.3 CPU-s for ina.p4): 40 at once on a loaded 2-core
#: machine ran past finsy's fixed 10 s deadline of one request. A few at a time keep each
#: request short; the deployment as a whole takes the CPU it takes either way.
PIPELINE_LOADS_IN_FLIGHT = 4


async def open_sessions(
    specs: Mapping[str, tuple[str, int, Program]],
    *,
    set_pipeline: bool = True,
    timeout: float = 30.0,
    in_flight: int = PIPELINE_LOADS_IN_FLIGHT,
) -> dict[str, SwitchSession]:
    """Connect to every switch in ``specs`` (``{name: (address, device_id, program)}``) in
    parallel, at most ``in_flight`` at a time when loading the pipeline (``timeout`` counts
    from a session's own start). All or nothing: when one fails, the others are closed and
    the first error (in ``specs`` order) is raised as :class:`DeployError`."""
    sessions = {
        name: SwitchSession(name, addr, dev, prog, set_pipeline=set_pipeline)
        for name, (addr, dev, prog) in specs.items()
    }
    gate = asyncio.Semaphore(max(1, in_flight) if set_pipeline else max(1, len(sessions)))

    async def one(s: SwitchSession) -> SwitchSession:
        async with gate:
            return await s.open(timeout)

    results = await asyncio.gather(*(one(s) for s in sessions.values()), return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    if errors:
        await close_sessions(sessions.values())
        first = errors[0]
        if isinstance(first, DeployError):
            more = f" (and {len(errors) - 1} more switches failed)" if len(errors) > 1 else ""
            raise DeployError(f"{first}{more}") from None
        raise first
    return sessions


async def close_sessions(sessions: Iterable[SwitchSession]) -> None:
    """Close every session (errors while closing are ignored)."""
    await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)

