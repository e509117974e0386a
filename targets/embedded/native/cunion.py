"""Header unions and header union stacks for the native backend, as the Python backend
implements them (codegen/parser.py, codegen/actions.py, codegen/support.py).

Making a union member valid (extract, setValid, assignment from a valid header)
invalidates the other members. A union stack's elements are unions laid out alike, one
``stride`` of slots apart, plus a next-index slot: extracting member ``m`` into
``us.next`` checks the index (StackOutOfBounds), extracts into that element's ``m``
and invalidates its other members. push_front / pop_front on a union stack are BMv2
1.15's: the same element swaps as for a header stack, and no element is marked
invalid (support.union_stack_push). Members of a union stack are indexed at run time,
so their fields must be narrow (at most 64 bits). Only numbers reach the C.
"""

from __future__ import annotations

from typing import Any

from targets.embedded.codegen.layout import json_int
from targets.embedded.native.cexpr import Unsupported

SWAP_C = """static inline void swap_slots(uint64_t *F, uint32_t a, uint32_t b, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) { uint64_t t = F[a + i]; F[a + i] = F[b + i]; F[b + i] = t; }
}"""


class UnionMixin:
    """Needs ``prog`` (unions, union_stacks, union_siblings, errors)."""

    prog: Any

    def check_unions(self) -> None:
        """Refuse union stacks the native backend cannot index at run time."""
        for elems, _ in self.prog.union_stacks.values():
            for m in elems[0]:
                if m.vl >= 0 or any(w > 64 or w == 0 for _, w, _ in m.fields):
                    raise Unsupported("a header union stack with fields over 64 bits or varbit fields")

    def union_clear(self, h: Any, cond: str) -> list[str]:
        """Statements invalidating the other members of the union ``h`` belongs to, when
        the C condition ``cond`` (``h``'s validity after the operation) holds."""
        sibs = self.prog.union_siblings.get(h.name)
        if not sibs:
            return []
        return [f"  if ({cond}) {{ {' '.join(f'F[{b}] = 0;' for b in sibs)} }}"]

    def union_valid(self, operand: dict[str, Any]) -> str:
        """``u.isValid()`` of a header union: any member valid."""
        members = self.prog.unions.get(operand.get("value")) if operand.get("type") == "header_union" else None
        if not members:
            raise Unsupported("validity of something other than a header union")
        return "(" + " || ".join(f"F[{m.base}] == 1" for m in members) + ")"

    def _union_stack(self, name: Any) -> tuple[list[list[Any]], int, int]:
        got = self.prog.union_stacks.get(name) if isinstance(name, str) else None
        if got is None:
            raise Unsupported("an unknown header union stack")
        elems, nslot = got
        stride = elems[1][0].base - elems[0][0].base if len(elems) > 1 else 0
        return elems, nslot, stride

    def extract_union_stack(self, v: Any, err: dict[str, int]) -> list[str]:
        """extract(us.next.m): bound, length, member fields and validity, the other
        members invalid, next index."""
        if not isinstance(v, list) or len(v) != 2:
            raise Unsupported("a malformed union stack extract")
        elems, nx, stride = self._union_stack(v[0])
        names = [m.name.rsplit(".", 1)[-1] for m in elems[0]]
        if v[1] not in names:
            raise Unsupported("a member the union lacks")
        first = elems[0][names.index(v[1])]
        if first.nbits % 8:
            raise Unsupported("a header that is not whole bytes")
        nb = first.nbits // 8
        lines = [f"  if (F[{nx}] >= {len(elems)}) {{ e = {err['StackOutOfBounds']}; goto perr; }}",
                 f"  if (o + {nb} > n) {{ e = {err['PacketTooShort']}; goto perr; }}",
                 f"  {{ uint64_t i = F[{nx}], *h = F + {first.base} + i * {stride};"]
        off = 0
        for j, (_, w, _) in enumerate(first.fields):
            lines.append(f"    h[{1 + j}] = rdb(pk + o, {off}, {w});")
            off += w
        lines.append("    h[0] = 1;")
        lines += [f"    F[{o.base} + i * {stride}] = 0;" for o in elems[0] if o is not first]
        lines.append(f"    F[{nx}] = i + 1; o += {nb}; }}")
        return lines

    def union_stack_prim(self, op: str, a: list[Any]) -> list[str]:
        """push_front / pop_front on a header union stack (BMv2 1.15's swaps)."""
        elems, nx, stride = self._union_stack(a[0].get("value"))
        cnt = a[1] if len(a) > 1 else {}
        if cnt.get("type") != "hexstr" or json_int(cnt["value"]) < 0:
            raise Unsupported("a push or pop count that is not a constant")
        k, size, base = json_int(cnt["value"]), len(elems), elems[0][0].base
        if k == 0:
            return []
        if op == "push":
            lines = [f"  F[{nx}] = F[{nx}] + {k} < {size} ? F[{nx}] + {k} : {size};"]
            pairs = [(base + i * stride, base + (i - k) * stride) for i in range(size - 1, k - 1, -1)]
        else:
            lines = [f"  F[{nx}] -= F[{nx}] < {k} ? F[{nx}] : {k};"]
            pairs = [(base + i * stride, base + (i + k) * stride) for i in range(max(size - k, 0))]
        return lines + [f"  swap_slots(F, {x}, {y}, {stride});" for x, y in pairs]
