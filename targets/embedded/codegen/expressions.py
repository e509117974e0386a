"""Expressions and assignable operands of the BMv2 JSON as Python source."""

from __future__ import annotations

from typing import Any

from targets.embedded.codegen.layout import CompileError, HeaderLayout, StackLayout, json_int


class ExprMixin:
    """Python source for operands, expressions and stores; names bound into the namespace."""

    def _name(self, prefix: str) -> str:
        self._uid += 1
        return f"{prefix}{self._uid}"

    def _bind(self, prefix: str, obj: Any) -> str:
        name = self._name(prefix)
        self._ns[name] = obj
        return name

    def _header_base(self, operand: dict[str, Any]) -> str:
        """Python expression for the base slot of a (possibly dynamic) header operand."""
        t, v = operand["type"], operand["value"]
        if t == "header":
            if v in self.headers:
                return str(self.headers[v].base)
            raise CompileError(f"unknown header {v}")
        if t == "expression":
            e = v
            if e["op"] == "dereference_header_stack":
                st = self.stacks[e["left"]["value"]]
                idx = self.expr(e["right"])
                return f"({st.headers[0].base} + ({idx}) * {st.stride})"
            raise CompileError(f"header expression op {e['op']}")
        if t == "stack_field":
            raise CompileError("stack_field used as header")
        raise CompileError(f"operand {t} is not a header")

    def _varbit_len_slot(self, operand: dict[str, Any]) -> int | None:
        """The width slot of a varbit field operand (None: not a varbit field)."""
        if operand.get("type") != "field":
            return None
        h = self.headers.get(self.aliases.get(".".join(operand["value"]), operand["value"])[0])
        if h is None or h.vl < 0 or self.field_slot(operand["value"]) != h.base + 1 + h.vl:
            return None
        return h.base + len(h.fields)

    def _union_invalidate(self, operand: dict[str, Any], ind: str, cond: str) -> list[str]:
        """Statements invalidating the other members of the union ``operand`` belongs
        to (when ``cond``, the member's validity after the operation, holds)."""
        if operand["type"] != "header" or operand["value"] not in self.union_siblings:
            return []
        sibs = "; ".join(f"F[{b}] = 0" for b in self.union_siblings[operand["value"]])
        return [f"{ind}if {cond}: {sibs}"]

    def _stack_last_base(self, st: StackLayout) -> str:
        return f"({st.headers[0].base} + (F[{st.next_slot}] - 1) * {st.stride})"

    def lvalue(self, operand: dict[str, Any]) -> tuple[str, int, bool]:
        """(target expression, bitwidth, signed) of an assignable operand."""
        t, v = operand["type"], operand["value"]
        if t == "field":
            s, w, sg = self.field_info(v)
            return f"F[{s}]", w, sg
        if t == "stack_field":
            st = self.stacks[v[0]]
            h = st.headers[0]
            for i, (n, w, sg) in enumerate(h.fields):
                if n == v[1]:
                    return f"F[{self._stack_last_base(st)} + {1 + i}]", w, sg
            raise CompileError(f"stack {v[0]} has no field {v[1]}")
        if t == "expression" and v["op"] == "access_field":
            hb = self._header_base(v["left"])
            off = json_int(v["right"]["value"]) if isinstance(v["right"], dict) else int(v["right"])
            hdr = self._header_of_access(v["left"])
            _, w, sg = hdr.fields[off]
            return f"F[{hb} + {1 + off}]", w, sg
        raise CompileError(f"cannot assign to operand of type {t}")

    def _header_of_access(self, operand: dict[str, Any]) -> HeaderLayout:
        if operand["type"] == "header":
            return self.headers[operand["value"]]
        e = operand["value"]
        return self.stacks[e["left"]["value"]].headers[0]

    def store(self, operand: dict[str, Any], value: str, bits: int | None = None) -> str:
        """Statement assigning ``value`` to an operand, truncated to its width; ``bits``
        bounds the value's bit length when it is known non-negative (``_bits``), and a
        value that already fits is stored without the mask."""
        target, w, sg = self.lvalue(operand)
        if sg:
            return f"{target} = _sgn({value}, {w})"
        if bits is not None and bits <= w:
            return f"{target} = {value}"
        return f"{target} = ({value}) & {(1 << w) - 1:#x}"

    def _bits(self, operand: dict[str, Any] | None) -> int | None:
        """An upper bound on the bit length of an operand's value, for a value that is a
        non-negative int by construction; None when unknown (signed, bool, calls, ...).

        Sound because every PHV slot of an unsigned field holds a value of its width:
        the parser extracts exactly that many bits and every store masks (or, here,
        proves the mask redundant)."""
        if operand is None:
            return None
        t = operand.get("type")
        v = operand.get("value")
        if t == "hexstr":
            n = json_int(v)
            return n.bit_length() if n >= 0 else None
        if t == "field":
            if self._varbit_len_slot(operand) is not None:
                return None
            _, w, sg = self.field_info(v)
            return None if sg else w
        if t != "expression":
            return None
        if "op" not in v:
            return self._bits(v)
        op = v["op"]
        lb, rb = self._bits(v.get("left")), self._bits(v.get("right"))
        if op == "&":  # x & c with c >= 0 lies in [0, c] whatever x is
            known = [b for b in (lb, rb) if b is not None]
            return min(known) if known else None
        if lb is None or rb is None:
            return None
        if op == "+":
            return max(lb, rb) + 1
        if op in ("|", "^"):
            return max(lb, rb)
        if op == ">>":
            return lb
        if op in ("?", "?:"):
            return max(lb, rb)
        return None

    def expr(self, operand: dict[str, Any] | None) -> str:
        """Python expression source for a BMv2 JSON operand / expression."""
        if operand is None:
            raise CompileError("missing operand")
        t = operand["type"]
        v = operand.get("value")
        if t == "hexstr":
            return str(json_int(v))
        if t == "bool":
            return "True" if v else "False"
        if t == "field":
            return f"F[{self.field_slot(v)}]"
        if t in ("runtime_data", "local"):
            # "local": an action parameter used inside an expression (BMv2 P4Objects.cpp:
            # "runtime data for expressions in actions"), e.g. a slice assignment `f[7:0] = param`.
            i = int(v)
            if self._nparams is not None and not 0 <= i < self._nparams:
                raise CompileError(f"action parameter {i} out of range (the action has {self._nparams})")
            return f"D[{i}]"
        if t == "header":
            return self._header_base(operand)
        if t == "stack_field":
            return self.lvalue(operand)[0]
        if t in ("header_stack", "string"):
            if not isinstance(v, str):
                raise CompileError(f"{t} operand: expected a string, got {type(v).__name__}")
            return repr(v)  # a string literal: data, never code
        if t == "expression":
            if "op" not in v:  # p4c sometimes wraps an expression in a second one
                return self.expr(v)
            return self._op(v)
        if t == "lookahead":  # only valid in parser code, where pkt and o exist
            off, w = int(v[0]), int(v[1])
            return f"_look(pkt, o, {off}, {w})"
        raise CompileError(f"unsupported operand type {t}")

    def _op(self, e: dict[str, Any]) -> str:
        op = e["op"]
        left, right = e.get("left"), e.get("right")
        binops = {"+": "+", "-": "-", "*": "*", "<<": "<<", ">>": ">>", "&": "&", "|": "|",
                  "^": "^", "==": "==", "!=": "!=", ">": ">", ">=": ">=", "<": "<", "<=": "<=",
                  "and": "and", "or": "or"}
        if op in binops:
            if left is None:
                return f"({binops[op]}{self.expr(right)})"
            return f"({self.expr(left)} {binops[op]} {self.expr(right)})"
        if op == "/":
            return f"({self.expr(left)} // {self.expr(right)})"
        if op == "%":
            return f"({self.expr(left)} % {self.expr(right)})"
        if op == "not":
            return f"(not {self.expr(right)})"
        if op == "~":
            return f"(~{self.expr(right)})"
        if op == "d2b":
            return f"({self.expr(right)} != 0)"
        if op == "b2d":
            return f"int({self.expr(right)})"
        if op == "valid":
            return f"(F[{self._header_base(right)}] == 1)"
        if op == "valid_union":
            if right.get("type") != "header_union" or right["value"] not in self.unions:
                # BMv2 refuses it too (p4c 1.2.4 emits this for a union stack element)
                raise CompileError(f"Invalid reference to object of type '{right.get('type')}' "
                                   f"with name '{right.get('value')}'")
            members = self.unions[right["value"]]
            return "(" + " or ".join(f"F[{m.base}] == 1" for m in members) + ")"
        if op in ("?", "?:"):
            c = e["cond"]
            return f"({self.expr(left)} if {self.expr(c)} else {self.expr(right)})"
        if op == "two_comp_mod":
            return f"_sgn({self.expr(left)}, {self.expr(right)})"
        if op == "sat_cast":
            return f"_satc({self.expr(left)}, {self.expr(right)})"
        if op == "usat_cast":
            return f"_usatc({self.expr(left)}, {self.expr(right)})"
        if op == "access_field":
            return self.lvalue({"type": "expression", "value": e})[0]
        if op == "dereference_header_stack":
            return self._header_base({"type": "expression", "value": e})
        if op in ("last_stack_index", "size_stack") and (right or left)["value"] in self.union_stacks:
            elems, nslot = self.union_stacks[(right or left)["value"]]
            return f"(F[{nslot}] - 1)" if op == "last_stack_index" else str(len(elems))
        if op == "last_stack_index":
            st = self.stacks[right["value"] if right else left["value"]]
            return f"(F[{st.next_slot}] - 1)"
        if op == "size_stack":
            st = self.stacks[right["value"] if right else left["value"]]
            return str(len(st.headers))
        if op == "min":
            return f"min({self.expr(left)}, {self.expr(right)})"
        if op == "max":
            return f"max({self.expr(left)}, {self.expr(right)})"
        raise CompileError(f"unsupported expression op {op!r}")
