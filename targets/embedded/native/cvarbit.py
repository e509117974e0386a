"""Varbit fields for the native backend, as the Python backend implements them
(codegen/parser.py ``_extract_vl_lines``, codegen/deparser.py ``_deparse_vl``,
codegen/actions.py, codegen/hashes.py).

A header's varbit field lives in a wide slot (``W``, at most 256 bits: the header's
``max_length`` less its fixed fields) and its current width in bits in the header's
hidden last slot. ``extract(hdr, len)`` checks the length is whole bytes
(ParserInvalidArgument), fits the packet (PacketTooShort) and the header's maximum
(HeaderTooShort), in that order; the deparser writes the field at its current width;
setValid zeroes the value but keeps the width; a calculation takes the field at its
current width. Only slots, widths and error codes reach the C.
"""

from __future__ import annotations

from typing import Any

from targets.embedded.native.cexpr import WIDE, Unsupported


class VarbitMixin:
    """Needs ``prog``, ``wide`` (slot -> W index) and the CExprMixin methods."""

    prog: Any
    wide: dict[int, int]

    def setup_varbit(self) -> None:
        """Give each varbit field a wide slot; refuse what the native backend cannot hold."""
        for h in self.prog.headers.values():
            if h.vl < 0:
                continue
            if h.nbits % 8 or any(w > 64 for _, w, _ in h.fields):
                raise Unsupported("a varbit header with fields over 64 bits or not whole bytes")
            if not 0 < self.vl_max_bits(h) <= WIDE:
                raise Unsupported(f"a varbit field over {WIDE} bits")
            self.wide[h.base + 1 + h.vl] = len(self.wide)

    @staticmethod
    def vl_max_bits(h: Any) -> int:
        return h.vl_max_bytes * 8 - h.nbits

    def varbit_of(self, operand: dict[str, Any]) -> Any:
        """The header whose varbit field ``operand`` is (None: not a varbit field)."""
        if operand.get("type") != "field":
            return None
        ref = operand["value"]
        h = self.prog.headers.get(self.prog.aliases.get(".".join(ref), ref)[0])
        if h is None or h.vl < 0 or self.prog.field_slot(ref) != h.base + 1 + h.vl:
            return None
        return h

    def _fixed_io(self, h: Any, fn: str) -> tuple[list[str], list[str]]:
        """``fn`` ("rd" or "wr") over the fixed fields before and after the varbit one;
        offsets after it add the current width ``l``."""
        before, after, off = [], [], 0
        for i, (_, w, _) in enumerate(h.fields[:-1]):
            if i == h.vl:
                off = 0
                continue
            s = h.base + 1 + i
            at = f"{off}" if i < h.vl else f"vo + l + {off}"
            (before if i < h.vl else after).append(
                f"F[{s}] = rdb(p, {at}, {w});" if fn == "rd" else f"wrb(p, {at}, {w}, F[{s}]);")
            off += w
        return before, after

    def extract_vl(self, params: list[Any], err: dict[str, int]) -> list[str]:
        p = params[0]
        if p.get("type") != "regular" or p.get("value") not in self.prog.headers:
            raise Unsupported("extract of a varbit header into a stack or union stack")
        h = self.prog.headers[p["value"]]
        if h.vl < 0:
            raise Unsupported("extract with a length of a header without a varbit field")
        vo = sum(w for _, w, _ in h.fields[:h.vl])
        before, after = self._fixed_io(h, "rd")
        fixed, wi = h.nbits // 8, self.wide[h.base + 1 + h.vl]
        return [f"  {{ uint64_t l = {self.exact64(params[1])}, nb = {fixed} + (l >> 3); const uint8_t *p = pk + o;",
                f"    const uint64_t vo = {vo}; (void)vo;",
                f"    if (l % 8) {{ e = {err.get('ParserInvalidArgument', 6)}; goto perr; }}",
                f"    if ((uint64_t)o + nb > n) {{ e = {err['PacketTooShort']}; goto perr; }}",
                f"    if (nb > {h.vl_max_bytes}) {{ e = {err['HeaderTooShort']}; goto perr; }}",
                *(f"    {x}" for x in before),
                f"    W[{wi}] = rdw(p, {vo}, (int)l);",
                *(f"    {x}" for x in after),
                f"    F[{h.base + len(h.fields)}] = l; F[{h.base}] = 1; o += (uint32_t)nb; }}",
                *self.union_clear(h, "1")]

    def deparse_vl(self, h: Any) -> list[str]:
        """Emit a varbit header at its current width."""
        vo = sum(w for _, w, _ in h.fields[:h.vl])
        before, after = self._fixed_io(h, "wr")
        return [f"  if (F[{h.base}]) {{ uint8_t *p = out + h; uint32_t l = (uint32_t)F[{h.base + len(h.fields)}];",
                f"    const uint32_t vo = {vo}; (void)vo;",
                *(f"    {x}" for x in before),
                f"    wrw(p, {vo}, (int)l, W[{self.wide[h.base + 1 + h.vl]}]);",
                *(f"    {x}" for x in after),
                f"    h += {h.nbits // 8} + (l >> 3);", "  }"]

    def varbit_prim(self, op: str, a: list[Any]) -> list[str] | None:
        """assign_VL (and assign to a varbit field), add_header / remove_header of a
        varbit header; None for anything else."""
        if op == "assign_VL" or (op in ("assign", "modify_field") and self.varbit_of(a[0]) is not None):
            d, s = self.varbit_of(a[0]), self.varbit_of(a[1])
            if d is None or s is None:
                raise Unsupported("a varbit field assigned from something other than a varbit field")
            return [f"  W[{self.wide[d.base + 1 + d.vl]}] = W[{self.wide[s.base + 1 + s.vl]}]; "
                    f"F[{d.base + len(d.fields)}] = F[{s.base + len(s.fields)}];"]
        if op not in ("add_header", "remove_header"):
            return None
        h = self.element(a[0])
        if h.vl < 0:
            return None
        ln = f"F[{h.base + len(h.fields)}]"
        if op == "remove_header":
            return [f"  if (F[{h.base}]) {{ F[{h.base}] = 0; F[H_PKTLEN] -= {h.nbits // 8} + ({ln} >> 3); }}"]
        zero = " ".join(f"W[{self.wide[s]}] = wf(0);" if s in self.wide else f"F[{s}] = 0;"
                        for s in range(h.base + 1, h.base + len(h.fields)))
        return [f"  if (!F[{h.base}]) {{ {zero} F[{h.base}] = 1; F[H_PKTLEN] += {h.nbits // 8} + ({ln} >> 3); }}",
                *self.union_clear(h, "1")]

    def varbit_calc(self, e: dict[str, Any]) -> tuple[str, int] | None:
        """A calculation input that is a varbit field: (C statement, most bits)."""
        h = self.varbit_of(e)
        if h is None:
            return None
        ln = f"F[{h.base + len(h.fields)}]"
        stmt = f"  if (F[{h.base}]) {{ wrw(b, n, (int){ln}, W[{self.wide[h.base + 1 + h.vl]}]); n += (uint32_t){ln}; }}"
        return stmt, self.vl_max_bits(h)
