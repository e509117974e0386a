"""The deparser (one ``struct`` pack per header) and checksum verification / update."""

from __future__ import annotations

import struct as _struct
from typing import Any

from targets.embedded.codegen.layout import HeaderLayout
from targets.embedded.codegen.parser import _struct_plan


class DeparserMixin:
    """Generate the deparser and the checksum functions."""

    def _gen_deparser(self, dep: dict[str, Any]) -> None:
        lines = ["def _deparse(F, payload):", "    out = []"]
        for hname in dep["order"]:
            h = self.headers[hname]
            if h.vl >= 0:
                lines.append(self._deparse_vl(h))
                continue
            fmt, chunks = _struct_plan(h.fields)
            st = self._bind("_ST", _struct.Struct(fmt))
            args = []
            for pieces, members in chunks:
                parts = []
                for i, w, shift, sg in members:
                    fv = f"F[{h.base + 1 + i}]"
                    if sg:
                        fv = f"({fv} & {(1 << w) - 1:#x})"
                    parts.append(f"({fv} << {shift})" if shift else fv)
                c = " | ".join(parts)
                if len(pieces) == 1:
                    args.append(c)
                    continue
                rest = sum(pieces) * 8
                for n, size in enumerate(pieces):
                    rest -= size * 8
                    src = f"(_c := {c})" if n == 0 else "_c"
                    args.append(f"({src} >> {rest}) & {(1 << size * 8) - 1:#x}" if rest else f"{src} & {(1 << size * 8) - 1:#x}")
            lines.append(f"    if F[{h.base}]: out.append({st}.pack({', '.join(args)}))")
        lines.append("    out.append(payload)")
        lines.append("    return b''.join(out)")
        self._src.append("\n".join(lines))

    def _deparse_vl(self, h: HeaderLayout) -> str:
        """Emit a header with a varbit field: its bits as extracted (or assigned)."""
        b = h.base
        parts = []
        for i, (_, w, sg) in enumerate(h.fields[:-1]):
            fv = f"F[{b + 1 + i}]"
            rest = sum(x for _, x, _ in h.fields[i + 1:])
            if i == h.vl:
                parts.append(f"({fv} << {rest})" if rest else fv)
                continue
            if sg:
                fv = f"({fv} & {(1 << w) - 1:#x})"
            shift = f"({rest} + _l)" if i < h.vl else str(rest)
            parts.append(f"({fv} << {shift})" if shift != "0" else fv)
        return (f"    if F[{b}]: _l = F[{b + len(h.fields)}]; "
                f"out.append(({' | '.join(parts)}).to_bytes({h.nbits // 8} + (_l >> 3), 'big'))")

    def _gen_checksums(self) -> None:
        ver = ["def _verify_checksums(F):", "    bad = 0"]
        upd = ["def _update_checksums(F, P=b''):"]
        for c in self.spec.get("checksums", []):
            calc = self._calc_fn(c["calculation"])
            tgt, w, _ = self.lvalue({"type": "field", "value": c["target"]})
            cond = self.expr(c["if_cond"]) if c.get("if_cond") else "True"
            if c.get("verify"):
                ver.append(f"    if ({cond}) and ({calc}(F) & {(1 << w) - 1:#x}) != {tgt}: bad = 1")
            if c.get("update"):
                upd.append(f"    if {cond}: {tgt} = {calc}(F, P) & {(1 << w) - 1:#x}")
        ver.append("    return bad")
        if len(upd) == 1:
            upd.append("    pass")
        self._src.append("\n".join(ver))
        self._src.append("\n".join(upd))
