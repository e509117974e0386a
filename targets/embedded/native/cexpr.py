"""C expressions from BMv2 JSON operands, exact at every width.

Every expression is generated *modulo 2^m* for an m its consumer chooses: a store into a
w-bit field needs its value modulo 2^w, so ``+ - * << & | ^ ~`` work on 64-bit words
(m <= 64) or 256-bit ones (``w256``, m <= 256) and wrap exactly as the Python backend's
unbounded integers masked afterwards. Comparisons, shifts right, conditions, indexes and
keys need the exact value: the generator bounds its bit length (``bits``) and evaluates
it modulo 2^bound, which is exact; a value it cannot bound (a difference, a complement)
there is refused, never truncated. Names and strings of the JSON never reach the C:
slots, limbs and constants are numbers.
"""

from __future__ import annotations

from typing import Any

from targets.embedded.codegen.layout import json_int

WIDE = 256  # the widest value the native backend computes with


class Unsupported(Exception):
    """The program uses a feature the native backend does not implement (named)."""


def mask_hex(w: int) -> str:
    return f"UINT64_C({(1 << w) - 1:#x})"


def wconst(v: int) -> str:
    """A w256 literal of ``v`` modulo 2^256."""
    v &= (1 << WIDE) - 1
    limbs = [(v >> (64 * i)) & ((1 << 64) - 1) for i in range(4)]
    return "wc(" + ", ".join(f"UINT64_C({x:#x})" for x in limbs) + ")"


class CExprMixin:
    """Expressions over the PHV ``F`` (narrow slots) and ``W`` (wide fields), action data
    ``D`` (w256 per parameter). Needs ``prog`` (the Python Program: layout) and
    ``wide`` (slot -> index into W)."""

    prog: Any
    wide: dict[int, int]
    nparams: int | None = None
    param_widths: list[int] | None = None

    # -- fields -----------------------------------------------------------------------
    def finfo(self, ref: list[str]) -> tuple[int, int]:
        """(slot, width) of a field reference; refuses signed fields."""
        s, w, sg = self.prog.field_info(ref)
        if sg:
            raise Unsupported("signed field (int<W>)")
        if w == 0:
            raise Unsupported("varbit field")
        if w > WIDE:
            raise Unsupported(f"field wider than {WIDE} bits")
        return s, w

    def load(self, s: int, w: int, m: int) -> str:
        """Field at slot ``s`` (width ``w``) as a value modulo 2^m."""
        if w > 64:
            x = f"W[{self.wide[s]}]"
            return x if m > 64 else f"{x}.v[0]"
        return f"F[{s}]" if m <= 64 else f"wf(F[{s}])"

    def store_slot(self, s: int, w: int, e: dict[str, Any] | None, code: str | None = None) -> str:
        """Statement storing expression ``e`` (or C ``code`` already modulo 2^w) into a field."""
        if code is None:
            code = self.cx(e, w)
        if w > 64:
            return f"W[{self.wide[s]}] = wtr({code}, {w});"
        if w == 64:
            return f"F[{s}] = {code};"
        return f"F[{s}] = ({code}) & {mask_hex(w)};"

    def store(self, operand: dict[str, Any], e: dict[str, Any]) -> str:
        if operand.get("type") == "stack_field":
            target, w = self.last_field(operand["value"])
            return f"{target} = ({self.cx(e, 64)}) & {mask_hex(w)};"
        if operand.get("type") != "field":
            raise Unsupported(f"assignment to a {operand.get('type')} operand")
        s, w = self.finfo(operand["value"])
        return self.store_slot(s, w, e)

    # -- bounds -----------------------------------------------------------------------
    def bits(self, e: dict[str, Any] | None) -> int | None:
        """An upper bound on the bit length of a non-negative value; None: unknown."""
        if e is None:
            return None
        t, v = e.get("type"), e.get("value")
        if t == "hexstr":
            n = json_int(v)
            return max(n.bit_length(), 1) if n >= 0 else None
        if t == "bool":
            return 1
        if t == "field":
            return self.finfo(v)[1]
        if t == "stack_field":
            return self.last_field(v)[1]
        if t == "lookahead":
            return self.look_args(v)[1]
        if t in ("runtime_data", "local"):
            return self._param_width(int(v))
        if t != "expression":
            return None
        if "op" not in v:
            return self.bits(v)
        op = v["op"]
        if op in ("==", "!=", "<", "<=", ">", ">=", "and", "or", "not", "d2b", "b2d", "valid", "valid_union"):
            return 1
        if op == "size_stack":
            return max(len(self.stack((v.get("right") or v.get("left") or {}).get("value")).headers).bit_length(), 1)
        lb, rb = self.bits(v.get("left")), self.bits(v.get("right"))
        if op == "&":
            known = [b for b in (lb, rb) if b is not None]
            return min(known) if known else None
        if op in ("?", "?:"):
            return None if lb is None or rb is None else max(lb, rb)
        if lb is None or rb is None:
            return None
        if op == "+":
            return max(lb, rb) + 1
        if op in ("|", "^"):
            return max(lb, rb)
        if op == ">>":
            return lb
        if op == "*":
            return lb + rb
        if op == "<<" and v["right"].get("type") == "hexstr":
            return lb + json_int(v["right"]["value"])
        return None

    def _param_width(self, i: int) -> int:
        if self.param_widths is None or not 0 <= i < len(self.param_widths):
            raise Unsupported("action parameter outside an action")
        return self.param_widths[i]

    def exact(self, e: dict[str, Any] | None) -> tuple[str, int]:
        """(C code, m) of a value needed exactly: evaluated modulo 2^m, m >= its bound."""
        b = self.bits(e)
        if b is None:
            raise Unsupported("a value that may be negative or unbounded is compared, shifted or used as an index")
        if b > WIDE:
            raise Unsupported(f"a value wider than {WIDE} bits")
        m = 64 if b <= 64 else WIDE
        return self.cx(e, m), m

    def exact64(self, e: dict[str, Any] | None) -> str:
        code, m = self.exact(e)
        if m > 64:
            raise Unsupported("an index, size or shift wider than 64 bits")
        return code

    def cond(self, e: dict[str, Any] | None) -> str:
        """A C truth value."""
        code, m = self.exact(e)
        return f"wnz({code})" if m > 64 else f"({code} != 0)"

    # -- expressions ------------------------------------------------------------------
    def cx(self, e: dict[str, Any] | None, m: int) -> str:
        """C code for ``e`` modulo 2^m: a uint64_t when m <= 64, else a w256."""
        if e is None:
            raise Unsupported("missing operand")
        if m > WIDE:
            raise Unsupported(f"a value wider than {WIDE} bits")
        t, v = e.get("type"), e.get("value")
        if t == "hexstr":
            n = json_int(v)
            return f"UINT64_C({n & ((1 << 64) - 1):#x})" if m <= 64 else wconst(n)
        if t == "bool":
            return ("UINT64_C(1)" if v else "UINT64_C(0)") if m <= 64 else f"wf({int(bool(v))})"
        if t == "field":
            s, w = self.finfo(v)
            return self.load(s, w, m)
        if t == "stack_field":
            return self._fit(self.last_field(v)[0], 64, m)
        if t == "lookahead":
            return self.lookahead(v, m)
        if t in ("runtime_data", "local"):
            i = int(v)
            self._param_width(i)
            return f"D[{i}]" if m > 64 else f"D[{i}].v[0]"
        if t == "expression":
            if "op" not in v:
                return self.cx(v, m)
            return self._op(v, m)
        raise Unsupported(f"operand type {t}")

    def _boolean(self, code: str, m: int) -> str:
        return f"(uint64_t)({code})" if m <= 64 else f"wf({code})"

    def _op(self, e: dict[str, Any], m: int) -> str:
        op, left, right = e["op"], e.get("left"), e.get("right")
        narrow = m <= 64
        if op in ("+", "-", "*", "&", "|", "^") and left is not None:
            if op == "&":  # x & c with c >= 0 is exact from x modulo c's bound
                known = [b for b in (self.bits(left), self.bits(right)) if b is not None]
                if known and min(known) <= 64 < m:
                    return self._fit(self._op(e, 64), 64, m)
            a, b = self.cx(left, m), self.cx(right, m)
            if narrow:
                return f"({a} {op} {b})"
            fn = {"+": "wadd", "-": "wsub", "*": "wmul", "&": "wand", "|": "wor", "^": "wxor"}[op]
            return f"{fn}({a}, {b})"
        if op == "-" and left is None:
            a = self.cx(right, m)
            return f"(0 - {a})" if narrow else f"wsub(wf(0), {a})"
        if op == "~":
            a = self.cx(right, m)
            return f"(~{a})" if narrow else f"wnot({a})"
        if op == "<<":
            a, s = self.cx(left, m), self.exact64(right)
            return f"shl64({a}, {s})" if narrow else f"wshl({a}, {s})"
        if op == ">>":
            (a, ma), s = self.exact(left), self.exact64(right)
            return self._fit(f"shr64({a}, {s})" if ma <= 64 else f"wshr({a}, {s})", ma, m)
        if op in ("==", "!=", "<", "<=", ">", ">="):
            return self._boolean(self._compare(op, left, right), m)
        if op in ("and", "or"):
            c = f"({self.cond(left)} {'&&' if op == 'and' else '||'} {self.cond(right)})"
            return self._boolean(c, m)
        if op == "not":
            return self._boolean(f"!{self.cond(right)}", m)
        if op == "d2b":
            return self._boolean(self.cond(right), m)
        if op == "b2d":
            return self._boolean(self.cond(right), m)
        if op == "valid":
            return self._boolean(f"F[{self.element(right).base}] == 1", m)
        if op == "valid_union":
            return self._boolean(self.union_valid(right or {}), m)
        if op in ("last_stack_index", "size_stack"):
            if m > 64:
                raise Unsupported("a stack index into a field over 64 bits")
            return self.stack_index_op(op, e)
        if op in ("?", "?:"):
            c = self.cond(e["cond"])
            return f"({c} ? {self.cx(left, m)} : {self.cx(right, m)})"
        raise Unsupported(f"expression op {op!r}" if isinstance(op, str) else "expression op")

    @staticmethod
    def _fit(code: str, have: int, want: int) -> str:
        """An exact value computed modulo 2^have, as a value modulo 2^want."""
        if (have <= 64) == (want <= 64):
            return code
        return f"wf({code})" if want > 64 else f"({code}).v[0]"

    def _compare(self, op: str, left: dict[str, Any], right: dict[str, Any]) -> str:
        lb, rb = self.bits(left), self.bits(right)
        if lb is None or rb is None:
            raise Unsupported("a comparison of values that may be negative or unbounded")
        m = 64 if max(lb, rb) <= 64 else WIDE
        if max(lb, rb) > WIDE:
            raise Unsupported(f"a comparison wider than {WIDE} bits")
        a, b = self.cx(left, m), self.cx(right, m)
        if m <= 64:
            return f"({a} {op} {b})"
        return {"==": f"weq({a}, {b})", "!=": f"!weq({a}, {b})", "<": f"wlt({a}, {b})",
                ">": f"wlt({b}, {a})", "<=": f"!wlt({b}, {a})", ">=": f"!wlt({a}, {b})"}[op]
