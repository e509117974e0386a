"""Compile a BMv2 JSON program (p4c-bm2-ss, v1model) into Python code.

The JSON is walked once, at load time, and turned into Python source that is then
``exec``-ed: one function for the parser, one per action, one per table or conditional
node of each pipeline, one for the deparser and one per checksum or hash calculation.
At run time a packet is a flat list ``F`` of integers (the PHV): each header instance
owns one slot for its validity bit followed by one slot per field, so generated code
reads and writes fields as ``F[17]`` with no dictionary look-ups or object allocation.

Semantics follow BMv2's ``simple_switch`` (behavioral-model 1.15): arithmetic is on
unbounded integers with p4c's explicit masks, assignment truncates to the destination
width, a parser error stops parsing and the packet enters ingress with
``standard_metadata.parser_error`` set, and the unparsed rest of the packet is payload.
"""

from __future__ import annotations

import json
import random
import re
import threading
from collections.abc import Callable
from typing import Any

from targets.embedded import action_profiles, state
from targets.embedded.codegen.actions import ActionsMixin
from targets.embedded.codegen.deparser import DeparserMixin
from targets.embedded.codegen.expressions import ExprMixin
from targets.embedded.codegen.hashes import HashMixin
from targets.embedded.codegen.layout import (
    ActionInfo,
    CompileError,
    LayoutMixin,
    json_int,
)
from targets.embedded.codegen.parser import ParserMixin
from targets.embedded.codegen.support import (
    ParserError,
    direct_meter_execute,
    log_msg,
    lookahead,
    monotonic,
    sat_cast,
    signed,
    stack_pop,
    stack_push,
    union_stack_pop,
    union_stack_push,
    usat_cast,
)
from targets.embedded.codegen.tables import TablesMixin
from targets.embedded.config_check import SAFE_BUILTINS, SpecError, check_source, check_spec
from targets.embedded.state import ActionCall, StateError

__all__ = ["CompileError", "Program", "load_file"]

# BMv2's PI inverts priorities around INT_MAX (pi_tables_imp.cpp BM_MAX_PRIORITY): a const
# entry of BMv2 priority p (1, 2, ... in program order) reads back as INT_MAX - p.
CONST_PRIORITY_BASE = (1 << 31) - 1

_AST_LOCK = threading.Lock()
_LABEL = re.compile(r"[A-Za-z0-9_./-]{1,200}")  # the program's path, shown in tracebacks


def _reject_constant(name: str) -> Any:
    """``json.loads`` hook: NaN and Infinity are not JSON and not in a BMv2 config."""
    raise ValueError(f"non-standard JSON constant {name}")


class Program(LayoutMixin, ExprMixin, ActionsMixin, HashMixin, ParserMixin, DeparserMixin,
              TablesMixin):
    """A BMv2 JSON program compiled to Python; see the module doc.

    Public attributes are what the control plane uses: ``tables``, ``actions``,
    ``registers``, ``counters``, ``direct_counters``, ``meters``, ``learn_lists``.
    The data plane calls ``parse``, ``ingress``, ``egress``, ``deparse``,
    ``verify_checksums`` and ``update_checksums``.
    """

    # The traffic manager's standard_metadata slots that the program reads (None: it
    # never does), bound by the switch that installs it (``Switch.install_program``).
    # They live on the program so that a packet, which holds one program from start to
    # end, never writes another program's slot into its header vector.
    tm_bound = False
    tm_ig_ts: int | None = None
    tm_eg_ts: int | None = None
    tm_enq_ts: int | None = None
    tm_enq_depth: int | None = None
    tm_deq_depth: int | None = None
    tm_deq_delta: int | None = None
    # the native backend's instance (targets.embedded.native.binding.NativeBackend) when
    # the switch runs this program natively; None: the Python code runs every packet
    native: Any = None
    # a NativeGen whose C was compiled in the background, waiting for the data plane to
    # swap it in (native.glue.attach / adopt)
    native_built: Any = None

    def __init__(self, spec: dict[str, Any] | str | bytes, seed: int | None = None) -> None:
        # The config is untrusted data (it arrives over P4Runtime): see config_check for
        # the three layers that keep it from running code or exhausting the switch.
        if isinstance(spec, bytes | str):
            try:
                spec = json.loads(spec, parse_constant=_reject_constant)
            except (ValueError, UnicodeDecodeError, RecursionError) as e:
                raise CompileError(f"device config is not valid JSON: {type(e).__name__}: {e}") from e
        if not isinstance(spec, dict) or "header_types" not in spec or "pipelines" not in spec:
            raise CompileError("device config is not a BMv2 JSON program (no header_types/pipelines)")
        try:
            check_spec(spec)
        except SpecError as e:
            raise CompileError(f"invalid BMv2 JSON: {e}") from e
        self.spec = spec
        self.rng = random.Random(seed)
        self._src: list[str] = []
        self._ns: dict[str, Any] = {}
        self._uid = 0
        self._nparams: int | None = None  # action parameters of the action being generated
        try:
            self._layout()
            self._build_objects()
            self._gen_all()
        except CompileError:
            raise
        except SpecError as e:
            raise CompileError(f"invalid BMv2 JSON: {e}") from e
        except (KeyError, IndexError, TypeError, ValueError, AttributeError, OverflowError,
                RecursionError, StopIteration, ZeroDivisionError) as e:
            raise CompileError(f"malformed BMv2 JSON: {type(e).__name__}: {e}") from e

    def _gen_all(self) -> None:
        self.tables: dict[str, state.Table] = {}
        self._table_actions: dict[str, dict[str, ActionInfo]] = {}
        self._const_entries: list[tuple[state.Table, list[dict[str, Any]]]] = []
        self._deferred: list[tuple[str, dict[str, str | None], Callable[[str | None], str]]] = []
        self.action_profiles: dict[str, action_profiles.ActionProfile] = {}
        self._profile_actions: dict[str, dict[str, ActionInfo]] = {}
        self._selector_hashes: list[tuple[action_profiles.ActionProfile, str]] = []
        for a in self.spec.get("actions", []):
            self.actions_by_id[int(a["id"])].fn = self._gen_action(a)  # type: ignore[assignment]
        # which actions may stop the pipeline (a table with none needs no exit check)
        self._action_exits = {int(a["id"]): any(p.get("op") == "exit" for p in a.get("primitives", []))
                              for a in self.spec.get("actions", [])}
        parsers = self.spec.get("parsers", [])
        if len(parsers) != 1:
            raise CompileError(f"expected one parser, found {len(parsers)}")
        self._gen_parser(parsers[0])
        deparsers = self.spec.get("deparsers", [])
        if len(deparsers) != 1:
            raise CompileError(f"expected one deparser, found {len(deparsers)}")
        self._gen_deparser(deparsers[0])
        self._gen_checksums()
        pipes = {p["name"]: p for p in self.spec["pipelines"]}
        for name in ("ingress", "egress"):
            if name not in pipes:
                raise CompileError(f"pipeline {name} missing")
            self._make_action_profiles(pipes[name])
        for name in ("ingress", "egress"):
            self._gen_pipeline(pipes[name])
        ns = self._ns
        ns.update(_PE=ParserError, _sgn=signed, _satc=sat_cast, _usatc=usat_cast,
                  _push=stack_push, _pop=stack_pop, _upush=union_stack_push, _upop=union_stack_pop, _look=lookahead,
                  _rand=self.rng.randint, _log=log_msg, _now=monotonic, _dmx=direct_meter_execute)
        src = "\n\n".join(self._src)
        self.source = src
        # Last line of defence: only whitelisted syntax, attributes and names, and a
        # builtins table without __import__/open/eval (config_check, layer 3).
        for nmap, _, _ in self._deferred:
            ns[nmap] = None  # bound below, once the node functions exist
        program = self.spec.get("program")
        label = program if isinstance(program, str) and _LABEL.fullmatch(program) else "program"
        # One AST conversion at a time per process: CPython 3.11 keeps its AST recursion
        # depth per interpreter, and a switch group loading pipelines on several threads
        # got "SystemError: AST constructor recursion depth mismatch" (gh-106905).
        with _AST_LOCK:
            tree = check_source(src, ns)
            try:
                code = compile(tree, f"<p4:{label}>", "exec")
            except SyntaxError as e:  # a bug in this compiler, not in the user's JSON
                raise CompileError(f"internal code generation error: {e}") from e
        ns["__builtins__"] = dict(SAFE_BUILTINS)
        exec(code, ns)
        for nmap, mapping, ref in self._deferred:
            ns[nmap] = {a: ns[ref(v)] if v is not None else None for a, v in mapping.items()}
        for info in self.actions_by_id.values():
            info.fn = ns[info.fn]  # type: ignore[index]
        for prof, calc in self._selector_hashes:
            prof.hash_fn = ns[calc]
        for tname, tbl in self.tables.items():
            if tbl.profile is not None:
                continue
            tbl.initial_default = self.action_call(tname, tbl.initial_default.name, tbl.initial_default.params)
            tbl.default = tbl.initial_default
        for tbl, entries in self._const_entries:
            for i, e in enumerate(entries):
                tbl.insert(self._const_entry(tbl, e, i))
        self.parse: Callable[[list[int], bytes], int] = ns["_parse"]
        self.deparse: Callable[[list[int], bytes], bytes] = ns["_deparse"]
        self.verify_checksums: Callable[[list[int]], int] = ns["_verify_checksums"]
        self.update_checksums: Callable[..., None] = ns["_update_checksums"]
        self.ingress: Callable[[list[int]], None] = ns["_pipe_ingress"]
        self.egress: Callable[[list[int]], None] = ns["_pipe_egress"]

    def _const_entry(self, tbl: state.Table, e: dict[str, Any], index: int) -> state.TableEntry:
        key = []
        for kf, mk in zip(tbl.keys, e["match_key"], strict=True):
            mt = mk["match_type"]
            if mt in ("exact", "valid"):
                key.append(json_int(mk["key"]))
            elif mt == "lpm":
                key.append((json_int(mk["key"]), int(mk["prefix_length"])))
            elif mt in ("ternary", "optional"):
                mask = json_int(mk.get("mask", hex((1 << kf.bitwidth) - 1)))
                key.append((json_int(mk["key"]) & mask, mask))
            elif mt == "range":
                key.append((json_int(mk["start"]), json_int(mk["end"])))
            else:
                raise CompileError(f"const entry match type {mt}")
        ae = e["action_entry"]
        info = self.actions_by_id[ae["action_id"]]
        call = self.action_call(tbl.name, info.name, tuple(json_int(x) for x in ae.get("action_data", [])))
        # BMv2: a smaller priority value wins; ours follows P4Runtime (larger wins), so
        # map BMv2's 1, 2, 3... onto descending positive P4Runtime priorities.
        prio = CONST_PRIORITY_BASE - int(e.get("priority", index + 1)) if tbl.needs_priority else 0
        return state.TableEntry(tuple(key), call, prio, is_const=True)

    def action_call(self, table: str | None, action: str, params: tuple[int, ...]) -> ActionCall:
        """Bind an action by name for ``table`` (None: any action), checking parameters."""
        if table is not None:
            allowed = self._table_actions.get(table)
            if allowed is None:
                raise StateError("NOT_FOUND", f"unknown table {table}")
            info = allowed.get(action)
            if info is None:
                raise StateError("INVALID_ARGUMENT", f"action {action} is not an action of table {table}")
        else:
            info = self.actions.get(action)
            if info is None:
                raise StateError("NOT_FOUND", f"unknown action {action}")
        if len(params) != len(info.params):
            raise StateError("INVALID_ARGUMENT",
                             f"action {action}: {len(params)} parameters given, {len(info.params)} expected")
        for (pname, w), v in zip(info.params, params, strict=True):
            if not 0 <= v < (1 << w):
                raise StateError("INVALID_ARGUMENT", f"action {action}: parameter {pname} does not fit in {w} bits")
        return ActionCall(info.name, tuple(params), info.fn)

    def profile_action_call(self, profile: str, action: str, params: tuple[int, ...]) -> ActionCall:
        """Bind an action for a member of action profile ``profile`` (an action of one
        of the tables it implements), checking parameters."""
        allowed = self._profile_actions.get(profile, {})
        info = allowed.get(action)
        if info is None:
            raise StateError("INVALID_ARGUMENT", "Invalid action for action profile")
        for tname, tbl in self.tables.items():
            if tbl.profile is self.action_profiles[profile] and action in self._table_actions[tname]:
                return self.action_call(tname, action, params)
        raise StateError("INVALID_ARGUMENT", "Invalid action for action profile")

    def reset_state(self) -> None:
        """Clear registers, counters, meters and table entries (const entries stay)."""
        for r in self.registers.values():
            r.reset()
        for c in self.counters.values():
            c.packets[:] = [0] * c.size
            c.bytes[:] = [0] * c.size
        for t in self.tables.values():
            t.clear()
            t.reset_default()
            t.default_packets = t.default_bytes = 0
            t.direct_written(None)  # the native backend's copy too
        for ap in self.action_profiles.values():
            ap.clear()
        for vs in self.value_sets.values():
            vs.clear()

    def new_phv(self) -> list[int]:
        """A fresh PHV: all headers invalid, metadata zero."""
        return self.template[:]

    def reset_metadata(self, F: list[int]) -> None:
        """Zero every metadata field (BMv2 ``reset_metadata``)."""
        for a, b in self.metadata_slots:
            F[a:b] = [0] * (b - a)

    def copy_field_list(self, dst: list[int], src: list[int], fl_id: int) -> None:
        for s in self.field_lists.get(fl_id, []):
            dst[s] = src[s]


def load_file(path: str) -> Program:
    """Compile a BMv2 JSON file."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise CompileError(f"cannot read {path}: {e}") from e
    return Program(data)
