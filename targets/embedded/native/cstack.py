"""Header stacks and parser lookahead for the native backend, as the Python backend
implements them (codegen/parser.py, codegen/expressions.py, codegen/support.py).

A stack's elements are ordinary headers laid out one after another (``stride`` slots
each: validity, then the fields) and one more slot holds its next index. Extracting
into ``stack.next`` checks that index against the size first (StackOutOfBounds, a
parser error like PacketTooShort), then the packet's length. ``stack.last`` is the
element before the next index, read without a bound as the Python backend reads it.
push_front / pop_front shift whole elements and mark the freed ones invalid. Only
narrow fields (at most 64 bits) may live in a stack, since those are indexed at run
time; an element named by a constant index is just its header. Everything spliced in
is a slot number, a width or a count.
"""

from __future__ import annotations

from typing import Any

from targets.embedded.codegen.layout import StackLayout, json_int
from targets.embedded.native.cexpr import Unsupported

# zero-padded bits of the packet past byte o (lookahead reads past the end as zeros)
LOOK_C = """static inline const uint8_t *look_buf(const uint8_t *pk, uint32_t o, uint32_t n, uint32_t off,
                                       int w, uint8_t *tmp) {
  uint32_t need = (off + (uint32_t)w + 7) >> 3, have = n > o ? n - o : 0;
  if (have >= need) return pk + o;
  memset(tmp, 0, need);
  memcpy(tmp, pk + o, have);
  return tmp;
}
static inline uint64_t look64(const uint8_t *pk, uint32_t o, uint32_t n, uint32_t off, int w) {
  uint8_t tmp[48];
  return rdb(look_buf(pk, o, n, off, w, tmp), off, w);
}
static inline w256 look256(const uint8_t *pk, uint32_t o, uint32_t n, uint32_t off, int w) {
  uint8_t tmp[48];
  return rdw(look_buf(pk, o, n, off, w, tmp), off, w);
}"""
LOOK_MAX = 256  # offset + width of a lookahead, in bits (fits look64/look256's buffer)


class StackMixin:
    """Needs ``prog`` (stacks, headers, errors) and the CExprMixin methods."""

    prog: Any
    in_parser: bool = False

    def check_stacks(self) -> None:
        """Refuse stacks the native backend cannot index at run time."""
        for st in self.prog.stacks.values():
            h = st.headers[0]
            if h.vl >= 0 or any(w > 64 or w == 0 for _, w, _ in h.fields):
                raise Unsupported("a header stack with fields over 64 bits or varbit fields")

    def stack(self, name: Any) -> StackLayout:
        st = self.prog.stacks.get(name) if isinstance(name, str) else None
        if st is None:
            raise Unsupported("an unknown header stack")
        return st

    def element(self, operand: dict[str, Any]) -> Any:
        """The header layout of a header operand or a stack element at a constant index."""
        t, v = operand.get("type"), operand.get("value")
        if t == "header" and v in self.prog.headers:
            return self.prog.headers[v]
        if t == "expression" and isinstance(v, dict) and v.get("op") == "dereference_header_stack":
            st = self.stack(v["left"].get("value"))
            idx = v.get("right") or {}
            if idx.get("type") != "hexstr" or not 0 <= json_int(idx["value"]) < len(st.headers):
                raise Unsupported("a header stack index that is not a constant in range")
            return st.headers[json_int(idx["value"])]
        raise Unsupported("a header operation on a header union or a dynamic stack element")

    # -- stack.last.f -----------------------------------------------------------------
    def last_field(self, v: Any) -> tuple[str, int]:
        """(C lvalue, width) of ``stack.last.field``."""
        st = self.stack(v[0])
        h = st.headers[0]
        for i, (fname, w, _) in enumerate(h.fields):
            if fname == v[1]:
                lo = h.base + 1 + i - st.stride
                if lo < 0:
                    raise Unsupported("stack.last of a stack at the start of the PHV")
                return f"F[{lo} + F[{st.next_slot}] * {st.stride}]", w
        raise Unsupported("a field the stack's header type lacks")

    # -- parser -----------------------------------------------------------------------
    def extract_stack(self, name: Any, err: dict[str, int]) -> list[str]:
        """extract(stack.next): bound, length, fields, validity, next index."""
        st = self.stack(name)
        h = st.headers[0]
        if h.nbits % 8:
            raise Unsupported("a header that is not whole bytes")
        nb, nx = h.nbits // 8, st.next_slot
        lines = [f"  if (F[{nx}] >= {len(st.headers)}) {{ e = {err['StackOutOfBounds']}; goto perr; }}",
                 f"  if (o + {nb} > n) {{ e = {err['PacketTooShort']}; goto perr; }}",
                 f"  {{ uint64_t *h = F + {h.base} + F[{nx}] * {st.stride};"]
        off = 0
        for i, (_, w, _) in enumerate(h.fields):
            lines.append(f"    h[{1 + i}] = rdb(pk + o, {off}, {w});")
            off += w
        lines.append(f"    h[0] = 1; F[{nx}] += 1; o += {nb}; }}")
        return lines

    def lookahead(self, v: Any, m: int) -> str:
        """``lookahead<bit<w>>`` at bit ``off`` past the cursor, modulo 2^m (parser only)."""
        if not self.in_parser:
            raise Unsupported("lookahead outside the parser")
        off, w = self.look_args(v)
        if w > 64:
            code = f"look256(pk, o, n, {off}, {w})"
            return code if m > 64 else f"{code}.v[0]"
        code = f"look64(pk, o, n, {off}, {w})"
        return code if m <= 64 else f"wf({code})"

    @staticmethod
    def look_args(v: Any) -> tuple[int, int]:
        if not isinstance(v, list) or len(v) != 2:
            raise Unsupported("a malformed lookahead")
        off, w = int(v[0]), int(v[1])
        if off < 0 or w < 1 or off + w > LOOK_MAX:
            raise Unsupported(f"a lookahead beyond {LOOK_MAX} bits")
        return off, w

    def set_lookahead_check(self, v: Any, err: dict[str, int]) -> str:
        """A ``set`` from a lookahead first checks the width (not the offset) fits."""
        _, w = self.look_args(v)
        return f"  if (n - o < {(w + 7) // 8}) {{ e = {err['PacketTooShort']}; goto perr; }}"

    # -- push_front / pop_front -------------------------------------------------------
    def stack_prim(self, op: str, a: list[Any]) -> list[str] | None:
        if op not in ("push", "pop"):
            return None
        if a[0].get("type") == "header_union_stack":
            return self.union_stack_prim(op, a)
        if a[0].get("type") != "header_stack":
            raise Unsupported("push or pop on something other than a stack")
        st = self.stack(a[0].get("value"))
        cnt = a[1] if len(a) > 1 else {}
        if cnt.get("type") != "hexstr" or json_int(cnt["value"]) < 0:
            raise Unsupported("a push or pop count that is not a constant")
        size, stride, base, nx = len(st.headers), st.stride, st.headers[0].base, st.next_slot
        k = min(json_int(cnt["value"]), size)
        keep = (size - k) * stride
        if op == "push":
            lines = [f"  memmove(F + {base + k * stride}, F + {base}, 8 * {keep});"] if keep and k else []
            lines += [f"  F[{base + i * stride}] = 0;" for i in range(k)]
            lines.append(f"  F[{nx}] = F[{nx}] + {k} < {size} ? F[{nx}] + {k} : {size};")
        else:
            lines = [f"  memmove(F + {base}, F + {base + k * stride}, 8 * {keep});"] if keep and k else []
            lines += [f"  F[{base + i * stride}] = 0;" for i in range(size - k, size)]
            lines.append(f"  F[{nx}] = F[{nx}] > {k} ? F[{nx}] - {k} : 0;")
        return lines

    def stack_index_op(self, op: str, e: dict[str, Any]) -> str:
        """``last_stack_index`` (next - 1, wrapping as a uint64) / ``size_stack``."""
        operand = e.get("right") or e.get("left") or {}
        st = self.stack(operand.get("value"))
        if op == "size_stack":
            return f"UINT64_C({len(st.headers)})"
        return f"(F[{st.next_slot}] - 1)"
