"""Actions: primitives as Python statements, and the peephole passes over the
straight-line body of an action (register index reuse)."""

from __future__ import annotations

import re
from typing import Any

from targets.embedded.codegen.layout import (
    CLONE,
    CLONE_FL,
    EXIT,
    FLAG,
    ILEN,
    LEARN,
    PKTLEN,
    RECIRC,
    RESUBMIT,
    TRUNCATE,
    CompileError,
    json_int,
)

_INDEX_SET = re.compile(r"    _i = (.+)$")
# a store to a PHV slot, maybe guarded by a register index check
_SLOT_STORE = re.compile(r"    (if 0 <= _i < \d+: )?F\[(\d+)\] = (.+)$")
_CELL_STORE = re.compile(r"    if 0 <= _i < \d+: _R\d+\[_i\] = ")
_GUARD = re.compile(r"    if 0 <= _i < (\d+): ")
_SLOT_REF = re.compile(r"F\[(\d+)\]")
_NAME = re.compile(r"\b[A-Za-z_]\w*")
# names a pure slot expression may use: the PHV, the action data, operators
_PURE_NAMES = frozenset({"F", "D", "if", "else", "and", "or", "not", "True", "False"})


def _drop_repeated_index(lines: list[str]) -> list[str]:
    """Drop ``_i = X`` when ``_i`` already holds X's value: a straight-line action that
    reads and writes 32 registers at one index (the aggregator) computes it once, not
    64 times.

    Values are compared as text, after one step of value numbering: a slot last set by
    an unconditional store of a pure expression (PHV slots, action data, operators)
    stands for that expression, so ``F[11] = (F[118] & 1023)`` ... ``_i = F[11]`` and
    ``F[12] = (F[118] & 1023)`` ... ``_i = F[12]`` are one index (p4c gives every
    register access its own temporary). A store to a slot forgets every value that
    reads it; a register-cell store forgets nothing; any other line forgets all."""
    out: list[str] = []
    held: str | None = None
    defs: dict[str, str] = {}
    for ln in lines:
        m = _INDEX_SET.match(ln)
        if m:
            x = m.group(1)
            r = _SLOT_REF.fullmatch(x)
            v = defs.get(r.group(1), x) if r else x
            if v == held:
                continue
            held = v
            out.append(ln)
            continue
        out.append(ln)
        st = _SLOT_STORE.match(ln)
        if st and ";" not in ln:
            guard, k, e = st.groups()
            defs = {j: d for j, d in defs.items() if j != k and k not in _SLOT_REF.findall(d)}
            if held is not None and k in _SLOT_REF.findall(held):
                held = None
            if (guard is None and k not in _SLOT_REF.findall(e)
                    and all(n in _PURE_NAMES for n in _NAME.findall(e))):
                defs[k] = e
        elif not (_CELL_STORE.match(ln) and ";" not in ln):
            held, defs = None, {}
    return out


def _hoist_index_guards(lines: list[str]) -> list[str]:
    """Check a register index once for all the accesses that share it.

    Every register access is guarded (``if 0 <= _i < N: ...``: out of range, simple_switch
    leaves the destination or the cell alone). Where the lines after one ``_i = X`` up to
    the next hold two or more guards, all against one size, they become
    ``if 0 <= _i < N: <the lines, unguarded> else: <the lines as they were>``: the same
    behaviour, one comparison instead of 64 in the aggregator."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        ln = lines[i]
        out.append(ln)
        i += 1
        if not _INDEX_SET.match(ln):
            continue
        j = i
        while j < len(lines) and not _INDEX_SET.match(lines[j]):
            j += 1
        seg = lines[i:j]
        guards = [g.group(1) for g in map(_GUARD.match, seg) if g]
        if len(guards) >= 2 and len(set(guards)) == 1:
            out.append(f"    if 0 <= _i < {guards[0]}:")
            for s in seg:
                g = _GUARD.match(s)
                out.append("        " + s[g.end():] if g else "    " + s)
            out.append("    else:")
            out.extend("    " + s for s in seg)
        else:
            out.extend(seg)
        i = j
    return out


class ActionsMixin:
    """Generate one function per action."""

    def primitive(self, p: dict[str, Any], out: list[str], ind: str) -> None:
        """Append the statements of one primitive call to ``out``."""
        op = p["op"]
        a = p.get("parameters", [])
        for gen in (self._header_primitive, self._extern_primitive, self._flow_primitive):
            if gen(op, a, out, ind):
                return
        raise CompileError(f"unsupported primitive {op!r}")

    def _header_primitive(self, op: str, a: list[Any], out: list[str], ind: str) -> bool:
        """Assignments and header / header stack operations; False: not one of them."""
        if op == "assign_VL" or (op in ("assign", "modify_field") and self._varbit_len_slot(a[0]) is not None):
            # varbit = varbit (BMv2 assign_VL): value and current width
            dl, sl = self._varbit_len_slot(a[0]), self._varbit_len_slot(a[1])
            if dl is None or sl is None:
                raise CompileError("a varbit field can only be assigned from a varbit field")
            out.append(f"{ind}F[{self.field_slot(a[0]['value'])}] = F[{self.field_slot(a[1]['value'])}]; "
                       f"F[{dl}] = F[{sl}]")
        elif op in ("assign", "modify_field"):
            out.append(ind + self.store(a[0], self.expr(a[1]), self._bits(a[1])))
        elif op == "assign_header":
            dst, src = self._header_base(a[0]), self._header_base(a[1])
            n = len(self._header_of_access(a[0]).fields) + 1
            out.append(f"{ind}_d = {dst}; _s = {src}; F[_d:_d + {n}] = F[_s:_s + {n}]")
            out.extend(self._union_invalidate(a[0], ind, "F[_d]"))
        elif op == "assign_header_stack":
            d, s = self.stacks[a[0]["value"]], self.stacks[a[1]["value"]]
            n = len(d.headers) * d.stride
            db, sb = d.headers[0].base, s.headers[0].base
            out.append(f"{ind}F[{db}:{db + n}] = F[{sb}:{sb + n}]; F[{d.next_slot}] = F[{s.next_slot}]")
        elif op == "add_header" and self._header_of_access(a[0]).vl >= 0:
            # BMv2 resets the fields but keeps the varbit's width, and counts it
            h = self._header_of_access(a[0])
            n = len(h.fields)
            out.append(f"{ind}_b = {self._header_base(a[0])}")
            out.append(f"{ind}if not F[_b]: F[_b:_b + {n}] = _ZERO{n}; F[{PKTLEN}] += {h.nbits // 8} + (F[_b + {n}] >> 3)")
            self._ns[f"_ZERO{n}"] = [1] + [0] * (n - 1)
            out.extend(self._union_invalidate(a[0], ind, "1"))
        elif op == "add_header":
            hb = self._header_base(a[0])
            n = len(self._header_of_access(a[0]).fields)
            nb = self._header_of_access(a[0]).nbits // 8
            out.append(f"{ind}_b = {hb}")
            out.append(f"{ind}if not F[_b]: F[_b:_b + {n + 1}] = _ZERO{n + 1}; F[{PKTLEN}] += {nb}")
            self._ns[f"_ZERO{n + 1}"] = [1] + [0] * n
            out.extend(self._union_invalidate(a[0], ind, "1"))
        elif op == "remove_header":
            h = self._header_of_access(a[0])
            nb = h.nbits // 8
            vl = f" + (F[_b + {len(h.fields)}] >> 3)" if h.vl >= 0 else ""
            out.append(f"{ind}_b = {self._header_base(a[0])}")
            out.append(f"{ind}if F[_b]: F[_b] = 0; F[{PKTLEN}] -= {nb}{vl}")
        elif op in ("push", "pop") and a[0]["type"] == "header_union_stack":
            elems, nslot = self.union_stacks[a[0]["value"]]
            stride = elems[1][0].base - elems[0][0].base if len(elems) > 1 else 0
            fn = "_upush" if op == "push" else "_upop"
            out.append(f"{ind}{fn}(F, {elems[0][0].base}, {len(elems)}, {stride}, {nslot}, {self.expr(a[1])})")
        elif op in ("push", "pop"):
            st = self.stacks[a[0]["value"]]
            cnt = self.expr(a[1])
            fn = "_push" if op == "push" else "_pop"
            out.append(f"{ind}{fn}(F, {st.headers[0].base}, {len(st.headers)}, {st.stride}, {st.next_slot}, {cnt})")
        else:
            return False
        return True

    def _extern_primitive(self, op: str, a: list[Any], out: list[str], ind: str) -> bool:
        """Hashes, random numbers, registers, counters and meters; False: not one of them."""
        if op == "modify_field_with_hash_based_offset":
            calc = self._calc_fn(a[2]["value"])
            base, size = self.expr(a[1]), self.expr(a[3])
            # simple_switch treats a max of 0 as 1 (the result is then just base).
            out.append(f"{ind}_sz = {size} or 1")
            out.append(ind + self.store(a[0], f"{base} + {calc}(F) % _sz"))
        elif op == "modify_field_rng_uniform":
            # lo > hi: simple_switch leaves the destination unchanged
            out.append(f"{ind}_lo = {self.expr(a[1])}; _hi = {self.expr(a[2])}")
            out.append(f"{ind}if _lo <= _hi: " + self.store(a[0], "_rand(_lo, _hi)"))
        elif op == "register_read":
            reg = self.registers[a[1]["value"]]
            cells = self._bind("_R", reg.cells)
            out.append(f"{ind}_i = {self.expr(a[2])}")
            # out of bounds: simple_switch leaves the destination unchanged
            out.append(f"{ind}if 0 <= _i < {reg.size}: " + self.store(a[0], f"{cells}[_i]", reg.bitwidth))
        elif op == "register_write":
            reg = self.registers[a[0]["value"]]
            cells = self._bind("_R", reg.cells)
            out.append(f"{ind}_i = {self.expr(a[1])}")
            val, vb = self.expr(a[2]), self._bits(a[2])
            val = val if vb is not None and vb <= reg.bitwidth else f"({val}) & {reg.mask:#x}"
            out.append(f"{ind}if 0 <= _i < {reg.size}: {cells}[_i] = {val}")
        elif op == "count":
            c = self._bind("_C", self.counters[a[0]["value"]])
            out.append(f"{ind}{c}.count({self.expr(a[1])}, F[{ILEN}])")
        elif op == "execute_meter":
            m = self._bind("_M", self.meters[a[0]["value"]])
            out.append(ind + self.store(a[2], f"{m}.execute({self.expr(a[1])}, F[{ILEN}], _now())"))
        else:
            return False
        return True

    def _flow_primitive(self, op: str, a: list[Any], out: list[str], ind: str) -> bool:
        """Drop, exit, clone, resubmit, recirculate, digest, truncate, log and assert, and
        the P4_14 arithmetic primitives; False: not one of them."""
        sm = self.sm
        if op == "mark_to_drop":
            out.append(f"{ind}F[{sm['egress_spec']}] = 511")
            if sm.get("mcast_grp") is not None:
                out.append(f"{ind}F[{sm['mcast_grp']}] = 0")
        elif op == "exit":
            out.append(f"{ind}F[{EXIT}] = 1")
            out.append(f"{ind}return")
        elif op == "clone_ingress_pkt_to_egress" or op == "clone_egress_pkt_to_egress":
            fl = self.expr(a[1]) if len(a) > 1 else "0"
            out.append(f"{ind}F[{CLONE}] = {FLAG} | ({self.expr(a[0])}); F[{CLONE_FL}] = {fl}")
        elif op == "resubmit":
            fl = self.expr(a[0]) if a else "0"
            out.append(f"{ind}F[{RESUBMIT}] = {FLAG} | ({fl})")
        elif op == "recirculate":
            fl = self.expr(a[0]) if a else "0"
            out.append(f"{ind}F[{RECIRC}] = {FLAG} | ({fl})")
        elif op == "generate_digest":
            out.append(f"{ind}F[{LEARN}] = {self.expr(a[1])}")
        elif op == "truncate":
            out.append(f"{ind}F[{TRUNCATE}] = {self.expr(a[0])}")
        elif op == "log_msg":
            fmt = a[0]["value"]
            if not isinstance(fmt, str):
                raise CompileError("log_msg: the format is not a string")
            args = [self.expr(x) for x in a[1]["value"]] if len(a) > 1 else []
            out.append(f"{ind}_log({fmt!r}, [{', '.join(args)}])")
        elif op in ("assert", "assume"):
            out.append(f"{ind}if not ({self.expr(a[0])}): _log('assertion failed: ' + {op!r}, [])")
        elif op in ("add", "subtract"):  # P4_14-era primitives
            sign = "+" if op == "add" else "-"
            out.append(ind + self.store(a[0], f"{self.expr(a[1])} {sign} {self.expr(a[2])}"))
        else:
            return False
        return True

    def _gen_action(self, a: dict[str, Any]) -> str:
        fname = f"_act{int(a['id'])}"
        self._nparams = len(a["runtime_data"])
        try:
            return self._gen_action_body(a, fname)
        finally:
            self._nparams = None

    def _gen_action_body(self, a: dict[str, Any], fname: str) -> str:
        prims = a["primitives"]
        lines = [f"def {fname}(F, D):"]
        if not prims:
            lines.append("    pass")
        elif any(p["op"] in ("_jump", "_jump_if_zero") for p in prims):
            # p4c lowers `if` inside actions to jumps: run them with a program counter.
            lines.append("    pc = 0")
            lines.append("    while True:")
            for i, p in enumerate(prims):
                lines.append(f"        {'if' if i == 0 else 'elif'} pc == {i}:")
                if p["op"] == "_jump":
                    lines.append(f"            pc = {json_int(p['parameters'][0]['value'])}; continue")
                elif p["op"] == "_jump_if_zero":
                    cond = self.expr(p["parameters"][0])
                    tgt = json_int(p["parameters"][1]["value"])
                    lines.append(f"            if not ({cond}): pc = {tgt}; continue")
                else:
                    self.primitive(p, lines, "            ")
                lines.append(f"            pc = {i + 1}")
            lines.append("        else:")
            lines.append("            return")
        else:
            for p in prims:
                self.primitive(p, lines, "    ")
            lines = _hoist_index_guards(_drop_repeated_index(lines))
        self._src.append("\n".join(lines))
        return fname
