"""The parser: parse states as nested straight-line code (an acyclic graph) or a
state machine, extraction with one ``struct`` unpack per header."""

from __future__ import annotations

import struct as _struct
from collections.abc import Callable
from typing import Any

from targets.embedded.codegen.layout import CompileError, HeaderLayout, json_int


class _TooLong(Exception):
    """An inlined parser would be too long (``Program._parser_inline``)."""


_PIECES = ((8, "Q"), (4, "I"), (2, "H"), (1, "B"))


def _struct_plan(fields: list[tuple[str, int, bool]]) -> tuple[str, list[tuple[list[int], list[tuple[int, int, int, bool]]]]]:
    """How a whole-byte header maps onto one ``struct`` format: the fields grouped into
    the shortest runs that end on a byte boundary (a "chunk": one field of whole bytes,
    or sub-byte fields such as IPv4's version and ihl), each chunk read as a few
    big-endian integers. Returns the format and, per chunk, the byte sizes of its
    pieces and its fields as (field index, width, shift inside the chunk, signed)."""
    fmt = "!"
    chunks: list[tuple[list[int], list[tuple[int, int, int, bool]]]] = []
    run: list[tuple[int, int, bool]] = []
    bits = 0
    for i, (_, w, sg) in enumerate(fields):
        run.append((i, w, sg))
        bits += w
        if bits % 8:
            continue
        nb, pieces = bits // 8, []
        while nb:
            size, code = next((sz, c) for sz, c in _PIECES if sz <= nb)
            pieces.append(size)
            fmt += code
            nb -= size
        shift, members = bits, []
        for j, wj, sj in run:
            shift -= wj
            members.append((j, wj, shift, sj))
        chunks.append((pieces, members))
        run, bits = [], 0
    return fmt, chunks


def _emit_transitions(trans: list[tuple[str | None, str | None]], ind: str, out: list[str],
                      goto: Callable[[str | None, str], None]) -> None:
    """A parse state's transitions as ``if cond: / elif cond: / else:`` blocks at ``ind``;
    ``goto(next_state, indent)`` appends what entering a state is (None: accept). With no
    default transition and no match, simple_switch 1.15 goes to the (null) default next
    state, i.e. accepts with no error -- not NoMatch."""
    first = True
    for cond, nxt in trans:
        if cond is None:
            if first:
                goto(nxt, ind)
            else:
                out.append(f"{ind}else:")
                goto(nxt, ind + "  ")
            return
        out.append(f"{ind}{'if' if first else 'elif'} {cond}:")
        goto(nxt, ind + "  ")
        first = False
    if first:
        out.append(f"{ind}return o")
    else:
        out.append(f"{ind}else:")
        out.append(f"{ind}  return o")


class ParserMixin:
    """Generate the parser function."""

    def _gen_parser(self, parser: dict[str, Any]) -> None:
        states = {s["name"]: i for i, s in enumerate(parser["parse_states"])}
        by_name = {s["name"]: s for s in parser["parse_states"]}
        init = parser["init_state"]
        inline = self._parser_inline(parser, by_name, init)
        lines = ["def _parse(F, pkt):", "    o = 0; n = len(pkt)", "    try:"]
        if inline is not None:
            # An acyclic parse graph: each path is straight-line code, nested ifs for
            # the transitions, no state variable or dispatch loop.
            lines += inline
        else:
            lines += [f"      st = {states[init]}", "      while True:"]

            def goto(nxt: str | None, ind: str) -> None:
                lines.append(f"{ind}st = {states[nxt]}" if nxt is not None else f"{ind}return o")

            for i, s in enumerate(parser["parse_states"]):
                lines.append(f"        {'if' if i == 0 else 'elif'} st == {i}:")
                body, trans = self._parser_state(s, "          ")
                lines.extend(body)
                _emit_transitions(trans, "          ", lines, goto)
            lines.append("        else: return o")
        lines.append("    except _PE as e:")
        lines.append(f"        F[{self.sm['parser_error']}] = e.code")
        lines.append("        return o")
        self._src.append("\n".join(lines))

    _PARSER_INLINE_LINES = 1500  # beyond this many lines of inlined paths, a state machine

    def _parser_inline(self, parser: dict[str, Any], by_name: dict[str, dict[str, Any]],
                       init: str) -> list[str] | None:
        """The parser as nested straight-line code, or None where that does not apply: a
        loop in the parse graph (header stacks), a value set (its uses are registered
        once per transition) or too many paths."""
        for st in parser["parse_states"]:
            if any(tr.get("type") == "parse_vset" for tr in st["transitions"]):
                return None
        # acyclic? (depth-first search, grey = on the current path)
        colour: dict[str, int] = {}

        def cyclic(name: str) -> bool:
            colour[name] = 1
            for tr in by_name[name]["transitions"]:
                nxt = tr["next_state"]
                if nxt is None:
                    continue
                if nxt not in by_name:
                    raise CompileError(f"parser: unknown state {nxt!r}")
                if colour.get(nxt) == 1 or (nxt not in colour and cyclic(nxt)):
                    return True
            colour[name] = 2
            return False

        if cyclic(init):
            return None
        out: list[str] = []

        def emit(nxt: str | None, ind: str) -> None:
            if nxt is None:
                out.append(f"{ind}return o")
                return
            if len(out) > self._PARSER_INLINE_LINES:
                raise _TooLong
            body, trans = self._parser_state(by_name[nxt], ind)
            out.extend(body)
            _emit_transitions(trans, ind, out, emit)

        try:
            emit(init, "      ")
        except _TooLong:
            return None
        return out

    def _parser_state(self, s: dict[str, Any], ind: str) -> tuple[list[str], list[tuple[str | None, str | None]]]:
        """One parse state: its statements (operations, then the transition key ``k``) and
        its transitions in order, (condition or None for the default, next state)."""
        body: list[str] = []
        for op in s["parser_ops"]:
            self._parser_op(op, body, ind)
        key_parts = []
        key_bits = 0
        key_widths: list[int] = []  # value sets need the fields' own widths
        for k in s.get("transition_key", []):
            if k["type"] == "field":
                sl, w, _ = self.field_info(k["value"])
                wb = (w + 7) // 8 * 8
                key_parts.append((f"F[{sl}]", wb))
                key_bits += wb
                key_widths.append(w)
            elif k["type"] == "stack_field":
                tgt, w, _ = self.lvalue(k)
                wb = (w + 7) // 8 * 8
                key_parts.append((tgt, wb))
                key_bits += wb
                key_widths.append(w)
            elif k["type"] == "lookahead":
                off, w = int(k["value"][0]), int(k["value"][1])
                wb = (w + 7) // 8 * 8
                key_parts.append((f"_look(pkt, o, {off}, {w})", wb))
                key_bits += wb
                key_widths.append(w)
            elif k["type"] == "expression":
                raise CompileError("expression in transition key")
            else:
                raise CompileError(f"transition key type {k['type']}")
        if key_parts:
            expr, shift = [], key_bits
            for src, wb in key_parts:
                shift -= wb
                expr.append(f"({src} << {shift})" if shift else f"({src})")
            body.append(f"{ind}k = {' | '.join(expr)}")
        trans: list[tuple[str | None, str | None]] = []
        for tr in s["transitions"]:
            nxt = tr["next_state"]
            ttype = tr.get("type", "hexstr")
            if ttype == "default":
                trans.append((None, nxt))
                break
            if ttype == "hexstr":
                val = json_int(tr["value"])
                mask = tr.get("mask")
                cond = f"k & {json_int(mask)} == {val & json_int(mask)}" if mask is not None else f"k == {val}"
            elif ttype == "parse_vset":
                vs = self.value_sets.get(tr["value"])
                if vs is None:
                    raise CompileError(f"unknown parser value set {tr['value']!r}")
                mask = tr.get("mask")
                shadow = vs.add_use(key_widths, json_int(mask) if mask is not None else None)
                sname = self._bind("_VS", shadow)
                cond = f"k & {json_int(mask)} in {sname}.keys" if mask is not None else f"k in {sname}.keys"
            else:
                raise CompileError(f"transition type {ttype}")
            trans.append((cond, nxt))
        return body, trans

    def _extract_vl_lines(self, h: HeaderLayout, base: str, length: str, ind: str, out: list[str]) -> None:
        """extract(hdr, length) as BMv2's extract_VL: the length must be whole bytes
        (ParserInvalidArgument), then fit the packet (PacketTooShort), then the header's
        maximum size (HeaderTooShort)."""
        if h.nbits % 8:
            raise CompileError(f"header {h.name}: fixed fields are not a whole number of bytes")
        fixed = h.nbits // 8
        e = self.errors
        out.append(f"{ind}_vl = {length}")
        out.append(f"{ind}if _vl % 8: raise _PE({e.get('ParserInvalidArgument', 6)})")
        out.append(f"{ind}_nb = {fixed} + (_vl >> 3)")
        out.append(f"{ind}if o + _nb > n: raise _PE({e['PacketTooShort']})")
        if h.vl_max_bytes:
            out.append(f"{ind}if _nb > {h.vl_max_bytes}: raise _PE({e['HeaderTooShort']})")
        out.append(f"{ind}v = int.from_bytes(pkt[o:o + _nb], 'big'); o += _nb")
        after = sum(w for _, w, _ in h.fields[h.vl + 1:])
        for i, (_, w, sg) in enumerate(h.fields[:-1]):
            if i == h.vl:
                val = f"(v >> {after}) & ((1 << _vl) - 1)"
            else:
                rest = sum(x for _, x, _ in h.fields[i + 1:])
                shift = f"{rest} + _vl" if i < h.vl else str(rest)
                val = f"(v >> ({shift})) & {(1 << w) - 1:#x}"
                if sg:
                    val = f"_sgn({val}, {w})"
            out.append(f"{ind}F[{base} + {1 + i}] = {val}")
        out.append(f"{ind}F[{base} + {len(h.fields)}] = _vl")
        out.append(f"{ind}F[{base}] = 1")

    def _extract_lines(self, h: HeaderLayout, base: str, ind: str, out: list[str]) -> None:
        if h.vl >= 0:
            raise CompileError(f"header {h.name} has a varbit field: 'extract' needs a length (extract_VL)")
        if h.nbits % 8:
            raise CompileError(f"header {h.name} is not a whole number of bytes")
        nb = h.nbits // 8
        out.append(f"{ind}if o + {nb} > n: raise _PE({self.errors['PacketTooShort']})")
        # one struct.unpack_from into small integers, then shifts and masks on those:
        # cheaper than slicing a bignum of the whole header field by field
        fmt, chunks = _struct_plan(h.fields)
        st = self._bind("_ST", _struct.Struct(fmt))
        names = [f"u{k}" for k in range(len(fmt) - 1)]
        out.append(f"{ind}{', '.join(names)}{',' if len(names) == 1 else ''} = {st}.unpack_from(pkt, o); o += {nb}")
        vals: list[str] = []
        k = 0
        for pieces, members in chunks:
            rest = sum(pieces) * 8
            terms = []
            for size in pieces:
                rest -= size * 8
                terms.append(f"(u{k} << {rest})" if rest else f"u{k}")
                k += 1
            c = terms[0] if len(terms) == 1 else f"({' | '.join(terms)})"
            for _, w, shift, sg in members:
                if len(members) == 1:
                    val = c
                else:
                    val = f"({c} >> {shift}) & {(1 << w) - 1:#x}" if shift else f"{c} & {(1 << w) - 1:#x}"
                vals.append(f"_sgn({val}, {w})" if sg else val)
        if base.isdigit():
            b = int(base)
            out.append(f"{ind}F[{b + 1}:{b + 1 + len(vals)}] = ({', '.join(vals)},)")
        else:
            out.extend(f"{ind}F[{base} + {1 + i}] = {val}" for i, val in enumerate(vals))
        out.append(f"{ind}F[{base}] = 1")

    def _parser_op(self, op: dict[str, Any], out: list[str], ind: str) -> None:
        name = op["op"]
        params = op["parameters"]
        if name == "extract":
            p = params[0]
            if p["type"] == "regular":
                h = self.headers[p["value"]]
                self._extract_lines(h, str(h.base), ind, out)
                for sb in self.union_siblings.get(h.name, []):
                    out.append(f"{ind}F[{sb}] = 0")
            elif p["type"] == "union_stack":
                elems, nslot = self.union_stacks[p["value"][0]]
                names = [m.name.rsplit(".", 1)[-1] for m in elems[0]]
                k = names.index(p["value"][1])
                first = elems[0][k]
                stride = elems[1][0].base - elems[0][0].base if len(elems) > 1 else 0
                out.append(f"{ind}_i = F[{nslot}]")
                out.append(f"{ind}if _i >= {len(elems)}: raise _PE({self.errors['StackOutOfBounds']})")
                out.append(f"{ind}_b = {first.base} + _i * {stride}")
                self._extract_lines(first, "_b", ind, out)
                for o in elems[0]:
                    if o is not first:
                        out.append(f"{ind}F[{o.base} + _i * {stride}] = 0")
                out.append(f"{ind}F[{nslot}] = _i + 1")
            elif p["type"] == "stack":
                st = self.stacks[p["value"]]
                out.append(f"{ind}_i = F[{st.next_slot}]")
                out.append(f"{ind}if _i >= {len(st.headers)}: raise _PE({self.errors['StackOutOfBounds']})")
                out.append(f"{ind}_b = {st.headers[0].base} + _i * {st.stride}")
                self._extract_lines(st.headers[0], "_b", ind, out)
                out.append(f"{ind}F[{st.next_slot}] = _i + 1")
            else:
                raise CompileError(f"extract of {p['type']} is not supported")
        elif name == "set":
            if params[1]["type"] == "lookahead":
                # BMv2 (ParserOpSet<ParserLookAhead>) checks only the width, not the offset.
                nb = (int(params[1]["value"][1]) + 7) // 8
                out.append(f"{ind}if n - o < {nb}: raise _PE({self.errors['PacketTooShort']})")
            out.append(ind + self.store(params[0], self.expr(params[1]), self._bits(params[1])))
        elif name == "verify":
            cond = self.expr(params[0])
            err = self.expr(params[1]) if params[1]["type"] != "error" else str(self.errors[params[1]["value"]])
            out.append(f"{ind}if not ({cond}): raise _PE({err})")
        elif name == "primitive":
            for p in params:
                self.primitive(p, out, ind)
        elif name == "advance":
            bits = self.expr(params[0])
            out.append(f"{ind}_a = ({bits}) >> 3")
            out.append(f"{ind}if o + _a > n: raise _PE({self.errors['PacketTooShort']})")
            out.append(f"{ind}o += _a")
        elif name == "extract_VL":
            p = params[0]
            length = self.expr(params[1])
            if p["type"] == "regular":
                h = self.headers[p["value"]]
                self._extract_vl_lines(h, str(h.base), length, ind, out)
                for sb in self.union_siblings.get(h.name, []):
                    out.append(f"{ind}F[{sb}] = 0")
            elif p["type"] == "stack":
                st = self.stacks[p["value"]]
                out.append(f"{ind}_i = F[{st.next_slot}]")
                out.append(f"{ind}if _i >= {len(st.headers)}: raise _PE({self.errors['StackOutOfBounds']})")
                out.append(f"{ind}_b = {st.headers[0].base} + _i * {st.stride}")
                self._extract_vl_lines(st.headers[0], "_b", length, ind, out)
                out.append(f"{ind}F[{st.next_slot}] = _i + 1")
            else:
                raise CompileError(f"extract_VL of {p['type']} is not supported")
        else:
            raise CompileError(f"unsupported parser op {name!r}")
