"""Actions (one C function each) and the two pipelines (labelled blocks joined by
``goto``) of the native backend, with simple_switch's semantics as the Python backend
implements them (codegen/actions.py, codegen/tables.py)."""

from __future__ import annotations

from typing import Any

from targets.embedded.codegen import layout as L
from targets.embedded.codegen.layout import json_int
from targets.embedded.native.cexpr import Unsupported, mask_hex

_PROLOGUE = "  uint64_t *F = c->F; w256 *W = c->W; (void)W; (void)F; (void)D;"


class PipelineMixin:
    """Needs ``prog``, ``spec``, the CExprMixin methods and ``calc_fn``."""

    # -- actions ----------------------------------------------------------------------
    def gen_actions(self) -> list[str]:
        out: list[str] = []
        for a in self.spec.get("actions", []):
            aid = int(a["id"])
            self.param_widths = [int(p["bitwidth"]) for p in a["runtime_data"]]
            if any(w > 256 for w in self.param_widths):
                raise Unsupported("an action parameter over 256 bits")
            try:
                out += [f"static void a{aid}(ctx_t *c, const w256 *D) {{", _PROLOGUE]
                prims = a["primitives"]
                jumps = any(p["op"] in ("_jump", "_jump_if_zero") for p in prims)
                for i, p in enumerate(prims):
                    if jumps:
                        out.append(f" J{i}:;")
                    if p["op"] == "_jump":
                        out.append(f"  goto J{self._target(p, len(prims))};")
                    elif p["op"] == "_jump_if_zero":
                        out.append(f"  if (!{self.cond(p['parameters'][0])}) goto J{self._target(p, len(prims))};")
                    else:
                        out += self.primitive(p)
                if jumps:
                    out.append(f" J{len(prims)}:;")
                out.append("}")
            finally:
                self.param_widths = None
        return out

    @staticmethod
    def _target(p: dict[str, Any], n: int) -> int:
        t = json_int(p["parameters"][-1]["value"])
        if not 0 <= t <= n:
            raise Unsupported("a jump out of its action")
        return t

    def primitive(self, p: dict[str, Any]) -> list[str]:
        """C statements of one primitive call."""
        op, a = p["op"], p.get("parameters", [])
        for gen in (self.varbit_prim, self._header_prim, self.stack_prim, self._extern_prim, self._flow_prim):
            lines = gen(op, a)
            if lines is not None:
                return lines
        raise Unsupported(f"primitive {op!r}" if isinstance(op, str) else "primitive")

    def _header_base(self, operand: dict[str, Any]) -> Any:
        return self.element(operand)

    def _header_prim(self, op: str, a: list[Any]) -> list[str] | None:
        if op in ("assign", "modify_field"):
            return ["  " + self.store(a[0], a[1])]
        if op == "add_header":
            h = self._header_base(a[0])
            zero = " ".join(f"W[{self.wide[h.base + 1 + i]}] = wf(0);" if w > 64 else f"F[{h.base + 1 + i}] = 0;"
                            for i, (_, w, _) in enumerate(h.fields))
            return [f"  if (!F[{h.base}]) {{ {zero} F[{h.base}] = 1; F[H_PKTLEN] += {h.nbits // 8}; }}",
                    *self.union_clear(h, "1")]
        if op == "remove_header":
            h = self._header_base(a[0])
            return [f"  if (F[{h.base}]) {{ F[{h.base}] = 0; F[H_PKTLEN] -= {h.nbits // 8}; }}"]
        if op == "assign_header":
            d, s = self._header_base(a[0]), self._header_base(a[1])
            if len(d.fields) != len(s.fields):
                raise Unsupported("assign_header between different header types")
            lines = [f"  F[{d.base}] = F[{s.base}];"]
            for i in range(len(d.fields)):
                ds, ss = d.base + 1 + i, s.base + 1 + i
                lines.append(f"  W[{self.wide[ds]}] = W[{self.wide[ss]}];" if ds in self.wide else f"  F[{ds}] = F[{ss}];")
            return lines + self.union_clear(d, f"F[{d.base}]")
        return None

    def _cell(self, reg_name: Any) -> tuple[int, Any, str]:
        reg = self.prog.registers.get(reg_name) if isinstance(reg_name, str) else None
        if reg is None:
            raise Unsupported("an unknown register")
        k = self.reg_index[reg.name]
        ctype = "w256" if reg.bitwidth > 64 else "uint64_t"
        return k, reg, f"(({ctype} *)c->R[{k}])[i]"

    def _extern_prim(self, op: str, a: list[Any]) -> list[str] | None:
        if op == "register_read":
            _, reg, cell = self._cell(a[1]["value"])
            if a[0].get("type") != "field":
                raise Unsupported("register_read into a non-field")
            s, w = self.finfo(a[0]["value"])
            val = self._fit(cell, reg.bitwidth, w)
            return [f"  {{ uint64_t i = {self.exact64(a[2])}; if (i < {reg.size}) {{ {self.store_slot(s, w, None, val)} }} }}"]
        if op == "register_write":
            _, reg, cell = self._cell(a[0]["value"])
            w = reg.bitwidth
            v = self.cx(a[2], w)
            val = f"wtr({v}, {w})" if w > 64 else (v if w == 64 else f"({v}) & {mask_hex(w)}")
            return [f"  {{ uint64_t i = {self.exact64(a[1])}; if (i < {reg.size}) {cell} = {val}; }}"]
        if op == "count":
            name = a[0].get("value")
            if name not in self.ctr_index:
                raise Unsupported("an unknown counter")
            return [f"  ctr_count(c, {self.ctr_index[name]}, {self.exact64(a[1])}, F[H_ILEN]);"]
        if op == "execute_meter":
            name = a[0].get("value")
            if name not in self.mtr_index or a[2].get("type") != "field":
                raise Unsupported("an unknown meter or a colour into a non-field")
            s, w = self.finfo(a[2]["value"])
            col = f"meter_exec(c, {self.mtr_index[name]}, {self.exact64(a[1])}, F[H_ILEN])"
            col = f"wf({col})" if w > 64 else (col if w == 64 else f"({col}) & {mask_hex(w)}")
            return ["  " + self.store_slot(s, w, None, col)]
        if op == "modify_field_with_hash_based_offset":
            fn = self.calc_fn(a[2]["value"])
            s, w = self.finfo(a[0]["value"])
            if w > 64:
                raise Unsupported("a hash into a field over 64 bits")
            code = f"({self.exact64(a[1])} + {fn}(c, 0, 0) % sz)"
            return [f"  {{ uint64_t sz = {self.exact64(a[3])}; if (!sz) sz = 1; {self.store_slot(s, w, None, code)} }}"]
        if op == "modify_field_rng_uniform":
            s, w = self.finfo(a[0]["value"])
            if w > 64:
                raise Unsupported("random() into a field over 64 bits")
            lo, hi = self.exact64(a[1]), self.exact64(a[2])
            return [f"  {{ uint64_t lo = {lo}, hi = {hi}; if (lo <= hi) {{ "
                    f"{self.store_slot(s, w, None, 'rng_range(c, lo, hi)')} }} }}"]
        return None

    def _flow_prim(self, op: str, a: list[Any]) -> list[str] | None:
        sm = self.prog.sm
        if op == "mark_to_drop":
            lines = [f"  F[{sm['egress_spec']}] = 511;"]
            if sm.get("mcast_grp") is not None:
                lines.append(f"  F[{sm['mcast_grp']}] = 0;")
            return lines
        if op == "exit":
            return ["  F[H_EXIT] = 1; return;"]
        flag = f"UINT64_C({L.FLAG:#x})"
        if op in ("clone_ingress_pkt_to_egress", "clone_egress_pkt_to_egress"):
            fl = self.exact64(a[1]) if len(a) > 1 else "0"
            return [f"  F[H_CLONE] = {flag} | {self.exact64(a[0])}; F[H_CLONE_FL] = {fl};"]
        if op in ("resubmit", "recirculate"):
            fl = self.exact64(a[0]) if a else "0"
            return [f"  F[H_{'RESUBMIT' if op == 'resubmit' else 'RECIRC'}] = {flag} | {fl};"]
        if op == "generate_digest":
            return [f"  F[H_LEARN] = {self.exact64(a[1])};"]
        if op == "truncate":
            return [f"  F[H_TRUNCATE] = {self.exact64(a[0])};"]
        return None

    # -- pipelines --------------------------------------------------------------------
    def gen_pipeline(self, pl: dict[str, Any]) -> list[str]:
        if pl["name"] not in ("ingress", "egress"):
            raise Unsupported("a pipeline other than ingress and egress")
        names = [t["name"] for t in pl["tables"]] + [c["name"] for c in pl.get("conditionals", [])]
        label = {n: f"N{i}" for i, n in enumerate(names)}

        def go(n: str | None) -> str:
            return "return;" if n is None else f"goto {label[n]};"

        out = [f"static void g_{pl['name']}(void *cv) {{", "  ctx_t *c = cv; uint64_t *F = c->F; w256 *W = c->W;",
               "  const w256 *d = 0; int a = 0, hit = 0; (void)W; (void)d; (void)a; (void)hit;",
               f"  {go(pl.get('init_table'))}"]
        for t in pl["tables"]:
            out += self._table_node(t, label[t["name"]], go)
        for cnd in pl.get("conditionals", []):
            out.append(f" {label[cnd['name']]}:")
            out.append(f"  if ({self.cond(cnd['expression'])}) {go(cnd.get('true_next'))} "
                       f"else {go(cnd.get('false_next'))}")
        out.append("}")
        return out

    def _key(self, t: dict[str, Any]) -> list[str]:
        limbs: list[str] = []
        for k in t["key"]:
            if k["match_type"] == "valid":
                limbs.append(f"F[{self.prog.headers[k['target']].base}]")
                continue
            s, w = self.finfo(k["target"])
            if k["match_type"] == "range" and w > 64:
                raise Unsupported("a range match on a field over 64 bits")
            mask = json_int(k["mask"]) if k.get("mask") else None
            if w <= 64:
                limbs.append(f"F[{s}]" if mask is None else f"(F[{s}] & UINT64_C({mask & (2**64 - 1):#x}))")
                continue
            for i in range(self.limbs(w)):
                m = "" if mask is None else f" & UINT64_C({(mask >> (64 * i)) & (2**64 - 1):#x})"
                limbs.append(f"(W[{self.wide[s]}].v[{i}]{m})")
        return limbs

    def _direct(self, t: dict[str, Any], ti: int) -> list[str]:
        """A table's direct counter and meter (direct.c), before its action, as the Python
        backend runs them: a hit counts into the entry's cell (its handle in the last
        action data slot) and runs its meter into the result field; a miss counts into
        the default's counters."""
        name = t["name"]
        counted = name in self.prog.direct_counters.values()
        dm = t.get("direct_meters")
        if not counted and not dm:
            return []
        h = f"d[{self.table_params(self.prog.tables[name]) - 1}].v[0]"
        hit = [f"dc_count(c, {ti}, {h}, F[H_ILEN]);"] if counted else []
        if dm:
            spec = self.prog._direct_meter_specs[dm]
            s, w = self.finfo(spec["result_target"])
            size = "1.0" if spec.get("type", "packets") == "packets" else "(double)F[H_ILEN]"
            col = f"dm_exec(c, {ti}, {h}, {size})"
            col = f"wf({col})" if w > 64 else (col if w == 64 else f"({col}) & {mask_hex(w)}")
            hit.append(self.store_slot(s, w, None, col))
        miss = f" else dc_count(c, {ti}, UINT64_MAX, F[H_ILEN]);" if counted else ""
        return [f"  if (hit) {{ {' '.join(hit)} }}{miss}"]

    def _pick(self, t: dict[str, Any]) -> list[str]:
        """A hit of a table with an action profile runs the member's action, or the one
        its group's selector hash picks (profiles.c); an empty group: none (-1)."""
        if t.get("type", "simple") == "simple":
            return []
        prof = self.prog.tables[t["name"]].profile
        if prof is None or prof.name not in self.prof_index:
            raise Unsupported("a table with an unknown action profile")
        fn = self.calc_fn(f"$selector::{prof.name}") if prof.with_selector else "0"
        return [f"  if (hit) a = ap_pick(c, {self.prof_index[prof.name]}, d, {fn}, &d);"]

    def _table_node(self, t: dict[str, Any], lab: str, go: Any) -> list[str]:
        ti = self.tbl_index[t["name"]]
        key = self._key(t)
        out = [f" {lab}:"]
        if key:
            out.append(f"  {{ const uint64_t k[] = {{{', '.join(key)}}}; a = tlookup(&c->T[{ti}], k, &d); }}")
            out.append(f"  hit = a >= 0; if (!hit) {{ a = c->T[{ti}].def_act; d = c->T[{ti}].def_data; }}")
        else:
            out.append(f"  hit = 0; a = c->T[{ti}].def_act; d = c->T[{ti}].def_data;")
        out += self._direct(t, ti)
        out += self._pick(t)
        cases = " ".join(f"case {int(i)}: a{int(i)}(c, d); break;" for i in t["action_ids"])
        out.append(f"  switch (a) {{ {cases} default: break; }}")
        out.append("  if (F[H_EXIT]) return;")
        nt = t.get("next_tables", {})
        if "__HIT__" in nt or "__MISS__" in nt:
            out.append(f"  if (hit) {go(nt.get('__HIT__'))} else {go(nt.get('__MISS__'))}")
            return out
        distinct = set(nt.values())
        if len(distinct) <= 1:
            out.append(f"  {go(distinct.pop() if distinct else t.get('base_default_next'))}")
            return out
        ids = {a.name: a.id for a in self.prog._table_actions[t["name"]].values()}
        cases = " ".join(f"case {int(ids[n])}: {go(nxt)}" for n, nxt in nt.items() if n in ids)
        out.append(f"  switch (a) {{ {cases} default: {go(t.get('base_default_next'))} }}")
        return out
