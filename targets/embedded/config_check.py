"""Pipeline configs are data, never code: the checks around the BMv2 JSON compiler.

A device config arrives over P4Runtime (SetForwardingPipelineConfig) from whoever can
reach the switch's gRPC address, and ``targets.embedded.compiler`` turns it into Python
source run with ``exec``. Three layers keep a hostile or malformed config from running
anything or taking the switch down:

1. :func:`check_spec` (before compiling): the JSON's shape and values. Names are strings
   matching :data:`NAME_RE`; ids, widths and sizes are ints (never bools, floats or
   strings) within bounds (a width of 10**12 would make ``1 << w`` eat the memory);
   ``op`` values come from the known primitive, parser and expression operators; ``type``
   values are names (the compiler refuses kinds it does not know); ``hexstr`` constants match
   :data:`HEXSTR_RE`; the ``errors`` table is ``[[name, int code], ...]``; no floats,
   ``NaN`` or ``Infinity`` anywhere; nesting and total size bounded.
2. The compiler itself emits only ints it computed (``repr`` of a validated int), slots,
   and strings as ``repr`` literals; every name from the JSON stays a dict key.
3. :func:`check_source` (after generating, before ``exec``): the generated module's AST
   may use only the node kinds, attribute names and free names the compiler emits, no
   name or attribute starting with ``__``, and runs with a builtins table holding only
   :data:`SAFE_BUILTINS` (no ``__import__``, ``open``, ``eval``...). Should a value ever
   slip past layer 1 into the source, it cannot reach anything but the switch's own
   objects.

Each failure raises ``CompileError`` with a message naming the offending place; the
P4Runtime server answers it with INVALID_ARGUMENT and keeps the running pipeline.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from typing import Any

#: A BMv2 JSON object name (p4c: ``MyIngress.ipv4_lpm``, ``hdr.stack[0]``, ``$valid$``).
NAME_RE = re.compile(r"[A-Za-z_$][A-Za-z0-9_$.\[\]]{0,255}")
#: A ``hexstr`` constant (p4c writes ``0x...``, sometimes negative; decimal accepted).
HEXSTR_RE = re.compile(r"-?(0x[0-9a-fA-F]{1,1024}|[0-9]{1,1200})")

MAX_WIDTH = 4096            # bits in one field, register cell, key or constant
MAX_ARRAY = 1 << 22         # cells in one register/counter/meter array, entries in a table
MAX_TOTAL_CELLS = 1 << 24   # register + counter + meter cells of the whole program
MAX_DEPTH = 64              # JSON nesting
MAX_NODES = 2_000_000       # JSON values in all
MAX_STRING = 1 << 16        # characters in one string
MAX_INT = 1 << 64           # any JSON integer's magnitude (ids, sizes, priorities)

#: Keys whose value is an object name (or null).
NAME_KEYS = frozenset({
    "name", "header_type", "init_state", "next_state", "init_table", "base_default_next",
    "calculation", "binding", "action_profile", "true_next", "false_next", "direct_meters",
})
#: Keys whose value is an integer (ids, sizes, widths, priorities).
INT_KEYS = frozenset({
    "id", "size", "bitwidth", "max_size", "action_id", "prefix_length", "priority",
    "compressed_bitwidth", "max_length", "max_group_size", "header_type_id",
})
#: Keys whose integer value is a count of cells or entries.
SIZE_KEYS = frozenset({"size", "max_size", "max_group_size"})
#: Keys whose integer value is a bit width.
WIDTH_KEYS = frozenset({"bitwidth", "compressed_bitwidth"})

PRIMITIVE_OPS = frozenset({
    "assign", "modify_field", "assign_VL", "assign_header", "assign_header_stack",
    "assign_union", "assign_union_stack", "add_header", "remove_header", "push", "pop",
    "mark_to_drop", "exit", "modify_field_with_hash_based_offset", "modify_field_rng_uniform",
    "register_read", "register_write", "count", "execute_meter", "clone_ingress_pkt_to_egress",
    "clone_egress_pkt_to_egress", "resubmit", "recirculate", "generate_digest", "truncate",
    "log_msg", "assert", "assume", "add", "subtract", "_jump", "_jump_if_zero", "drop",
    "no_op", "add_to_field", "subtract_from_field", "shift_left", "shift_right", "bit_and",
    "bit_or", "bit_xor", "min", "max",
})
PARSER_OPS = frozenset({"extract", "extract_VL", "set", "verify", "primitive", "advance", "shift"})
EXPRESSION_OPS = frozenset({
    "+", "-", "*", "/", "%", "<<", ">>", "&", "|", "^", "~", "==", "!=", ">", ">=", "<", "<=",
    "and", "or", "not", "d2b", "b2d", "valid", "valid_union", "?", "?:", "two_comp_mod",
    "sat_cast", "usat_cast", "access_field", "dereference_header_stack",
    "dereference_union_stack", "access_union_header", "last_stack_index", "size_stack",
    "min", "max",
})
KNOWN_OPS = PRIMITIVE_OPS | PARSER_OPS | EXPRESSION_OPS


class SpecError(ValueError):
    """A pipeline config fails a check (the compiler re-raises it as ``CompileError``)."""


def _where(path: Iterable[str | int]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".") or "<root>"


def _int_value(v: Any, path: list[str | int], lo: int = -MAX_INT, hi: int = MAX_INT) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise SpecError(f"{_where(path)}: expected an integer, got {type(v).__name__} {_short(v)}")
    if not lo <= v <= hi:
        raise SpecError(f"{_where(path)}: integer {_short(v)} out of range [{lo}, {hi}]")
    return v


def _short(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 60 else s[:57] + "..."


def check_name(v: Any, what: str) -> str:
    """``v`` if it is an object name matching :data:`NAME_RE`, else ``SpecError``."""
    if not isinstance(v, str) or not NAME_RE.fullmatch(v):
        raise SpecError(f"{what}: not a valid name: {_short(v)}")
    return v


def check_spec(spec: Any) -> None:
    """Validate a parsed BMv2 JSON before compiling it (layer 1 of the module doc)."""
    if not isinstance(spec, dict):
        raise SpecError("device config is not a JSON object")
    _walk(spec)
    _check_errors(spec.get("errors", []))
    _check_header_types(spec.get("header_types"))
    total = 0
    for kind in ("register_arrays", "counter_arrays", "meter_arrays"):
        arrays = spec.get(kind, [])
        if not isinstance(arrays, list):
            raise SpecError(f"{kind}: expected a list")
        for i, a in enumerate(arrays):
            if not isinstance(a, dict):
                raise SpecError(f"{kind}[{i}]: expected an object")
            if kind == "register_arrays" or not a.get("is_direct"):
                total += _int_value(a.get("size"), [kind, i, "size"], 0, MAX_ARRAY)
            if kind == "register_arrays":
                _int_value(a.get("bitwidth"), [kind, i, "bitwidth"], 1, MAX_WIDTH)
            if kind == "meter_arrays" and a.get("type", "packets") not in ("packets", "bytes"):
                raise SpecError(f"{kind}[{i}].type: expected packets or bytes, got {_short(a.get('type'))}")
    if total > MAX_TOTAL_CELLS:
        raise SpecError(f"the program's register, counter and meter arrays hold {total} cells "
                        f"(at most {MAX_TOTAL_CELLS})")


def _walk(spec: dict[str, Any]) -> None:
    """Every value: types, bounds, names, ops; iterative, so depth cannot blow the stack."""
    stack: list[tuple[Any, list[str | int], str | None]] = [(spec, [], None)]
    seen = 0
    while stack:
        v, path, key = stack.pop()
        seen += 1
        if seen > MAX_NODES:
            raise SpecError(f"device config has more than {MAX_NODES} JSON values")
        if len(path) > MAX_DEPTH:
            raise SpecError(f"{_where(path)}: nested deeper than {MAX_DEPTH}")
        if isinstance(v, dict):
            for k, x in v.items():
                if not isinstance(k, str) or len(k) > 256:
                    raise SpecError(f"{_where(path)}: bad key {_short(k)}")
                _check_keyed(k, x, path + [k], v)
                stack.append((x, path + [k], k))
        elif isinstance(v, list):
            for i, x in enumerate(v):
                stack.append((x, path + [i], key))
        elif isinstance(v, float):
            raise SpecError(f"{_where(path)}: floating-point value {_short(v)} (BMv2 JSON has none)")
        elif isinstance(v, bool) or v is None:
            pass
        elif isinstance(v, int):
            _int_value(v, path)
        elif isinstance(v, str):
            if len(v) > MAX_STRING or "\x00" in v:
                raise SpecError(f"{_where(path)}: string too long or with a NUL character")
        else:  # pragma: no cover - json.loads makes nothing else
            raise SpecError(f"{_where(path)}: unexpected value {type(v).__name__}")


def _check_keyed(k: str, x: Any, path: list[str | int], parent: dict[str, Any]) -> None:
    if k in NAME_KEYS:
        if x is not None and not (k == "name" and path[:1] == ["source_info"]):
            check_name(x, _where(path))
    elif k in INT_KEYS:
        hi = MAX_ARRAY if k in SIZE_KEYS else MAX_WIDTH if k in WIDTH_KEYS else MAX_INT
        lo = 0 if k in SIZE_KEYS or k in WIDTH_KEYS else -MAX_INT
        _int_value(x, path, lo, hi)
    elif k == "op":
        if not isinstance(x, str) or x not in KNOWN_OPS:
            raise SpecError(f"{_where(path)}: unknown operator {_short(x)}")
    elif k == "type":
        # the compiler refuses kinds it does not know; here only the shape
        check_name(x, _where(path))
        if x == "hexstr" and "value" in parent:
            hv = parent["value"]
            if isinstance(hv, bool) or not (isinstance(hv, int) or
                                            (isinstance(hv, str) and HEXSTR_RE.fullmatch(hv))):
                raise SpecError(f"{_where(path[:-1])}.value: not a hex constant: {_short(hv)}")
        if x == "runtime_data" and "value" in parent:
            _int_value(parent["value"], path[:-1] + ["value"], 0, 1 << 16)
        if x in ("string", "header_stack", "header") and "value" in parent and not isinstance(parent["value"], str):
            raise SpecError(f"{_where(path[:-1])}.value: expected a string")
        if x == "lookahead" and "value" in parent:
            lv = parent["value"]
            if not (isinstance(lv, list) and len(lv) == 2):
                raise SpecError(f"{_where(path[:-1])}.value: expected [offset, width]")
            _int_value(lv[0], path[:-1] + ["value", 0], 0, 1 << 20)
            _int_value(lv[1], path[:-1] + ["value", 1], 1, MAX_WIDTH)


def _check_errors(errors: Any) -> None:
    if not isinstance(errors, list):
        raise SpecError("errors: expected a list of [name, code]")
    for i, e in enumerate(errors):
        if not (isinstance(e, list) and len(e) == 2):
            raise SpecError(f"errors[{i}]: expected [name, code], got {_short(e)}")
        check_name(e[0], f"errors[{i}] name")
        _int_value(e[1], ["errors", i, 1], 0, (1 << 31) - 1)


def _check_header_types(types: Any) -> None:
    if not isinstance(types, list):
        raise SpecError("header_types: expected a list")
    for i, t in enumerate(types):
        if not isinstance(t, dict) or not isinstance(t.get("fields"), list):
            raise SpecError(f"header_types[{i}]: expected an object with a fields list")
        for j, f in enumerate(t["fields"]):
            where = f"header_types[{i}].fields[{j}]"
            if not (isinstance(f, list) and 2 <= len(f) <= 3):
                raise SpecError(f"{where}: expected [name, width(, signed)], got {_short(f)}")
            check_name(f[0], f"{where} name")
            if f[1] != "*":
                _int_value(f[1], ["header_types", i, "fields", j, 1], 0, MAX_WIDTH)
            if len(f) == 3 and not isinstance(f[2], bool):
                raise SpecError(f"{where}: signedness must be true or false, got {_short(f[2])}")
        if "max_length" in t:
            _int_value(t["max_length"], ["header_types", i, "max_length"], 0, MAX_WIDTH)


# -- layer 3: the generated source --------------------------------------------------------
#: Builtins the generated code may call; ``exec`` gets exactly these.
SAFE_BUILTINS: dict[str, Any] = {"int": int, "len": len, "min": min, "max": max, "bytes": bytes,
                                 "range": range}
#: Attribute names the compiler emits (methods of its own objects, ints and bytes).
ALLOWED_ATTRS = frozenset({
    "action", "append", "bytes", "code", "count", "default", "default_bytes", "default_packets",
    "execute", "fn", "from_bytes", "get", "join", "keys", "lookup", "name", "pack", "packets",
    "params", "pick", "to_bytes", "unpack_from",
})
_ALLOWED_NODES = (
    ast.Module, ast.FunctionDef, ast.arguments, ast.arg, ast.Return, ast.Assign, ast.AugAssign,
    ast.If, ast.While, ast.For, ast.Break, ast.Continue, ast.Try, ast.ExceptHandler, ast.Raise,
    ast.Pass, ast.Expr, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Call,
    ast.Name, ast.Constant, ast.Subscript, ast.Slice, ast.Tuple, ast.List, ast.Attribute,
    ast.NamedExpr, ast.Load, ast.Store, ast.operator, ast.unaryop, ast.boolop, ast.cmpop,
    ast.expr_context,
)


def check_source(src: str, namespace: dict[str, Any]) -> ast.Module:
    """Parse generated source and check it against the whitelist (layer 3); returns the
    AST. Free names must be bound in ``namespace``, defined by the source, or in
    :data:`SAFE_BUILTINS`."""
    try:
        tree = ast.parse(src)
    except (SyntaxError, ValueError) as e:
        raise SpecError(f"generated code does not parse (a malformed config?): {e}") from e
    defined: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise SpecError(f"generated code holds a {type(node).__name__} (line "
                            f"{getattr(node, 'lineno', '?')}): refused")
        if isinstance(node, ast.FunctionDef):
            if node.decorator_list or node.returns:
                raise SpecError(f"generated function {node.name} has decorators or annotations")
            defined.add(node.name)
        elif isinstance(node, ast.arg):
            defined.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            defined.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr not in ALLOWED_ATTRS:
            raise SpecError(f"generated code uses attribute {node.attr!r} (line {node.lineno}): refused")
        if isinstance(node, ast.Name):
            if node.id.startswith("__"):
                raise SpecError(f"generated code uses name {node.id!r} (line {node.lineno}): refused")
            if node.id not in defined and node.id not in namespace and node.id not in SAFE_BUILTINS:
                raise SpecError(f"generated code uses unknown name {node.id!r} (line {node.lineno}): refused")
        if isinstance(node, ast.FunctionDef):
            for d in node.args.defaults:
                if not isinstance(d, ast.Constant):
                    raise SpecError(f"generated function {node.name}: non-constant default")
    body_ok = all(isinstance(s, ast.FunctionDef) for s in tree.body)
    if not body_ok:
        raise SpecError("generated code has module-level statements other than function definitions")
    return tree
