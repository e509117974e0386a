"""Generate the C of a program for the native backend from the compiled Python Program.

The Python ``Program`` has already checked the config and laid the PHV out; this module
walks the same JSON again and emits C over the same slots: a parser (one label per
parse state), checksum and hash calculations, one function per action, the two
pipelines as labelled blocks joined by ``goto``, and a deparser. What the native
backend does not implement raises :class:`Unsupported` naming the feature, before any C
is built. Everything spliced into the C is a number or an identifier made here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from targets.embedded.codegen import layout as L
from targets.embedded.codegen.layout import json_int
from targets.embedded.native.cexpr import CExprMixin, Unsupported, mask_hex
from targets.embedded.native.cpipe import PipelineMixin
from targets.embedded.native.cstack import LOOK_C, StackMixin
from targets.embedded.native.cunion import SWAP_C, UnionMixin
from targets.embedded.native.cvarbit import VarbitMixin
from targets.embedded.native.nvsets import vset_cond
from targets.embedded.tm_metadata import bind_metadata

_HERE = Path(__file__).parent
_ALGOS = {"crc16": "h_crc16", "crc16_custom": "h_crc16", "crc32": "h_crc32", "crc32_custom": "h_crc32",
          "crcCCITT": "h_ccitt", "csum16": "h_csum16", "cksum16": "h_csum16", "xor16": "h_xor16",
          "identity": "h_identity"}


def refuse_objects(prog: Any) -> None:
    """Raise Unsupported for objects of the program the native backend lacks."""
    checks = [
        (any(any(w > 256 for _, w, _ in h.fields) for h in prog.headers.values()), "fields over 256 bits"),
        (any(any(sg for _, _, sg in h.fields) for h in prog.headers.values()), "signed fields (int<W>)"),
        (any(r.bitwidth > 256 for r in prog.registers.values()), "registers over 256 bits"),
    ]
    for present, what in checks:
        if present:
            raise Unsupported(what)
    if not prog.tm_bound:
        bind_metadata(prog)


TM_FIELDS = ("ig_ts", "eg_ts", "enq_ts", "enq_depth", "deq_depth", "deq_delta")


def reads_clock(prog: Any) -> bool:
    """Whether the program reads a clock of the traffic manager (the native calls are
    then given the time: Switch._now_us)."""
    return any(getattr(prog, f"tm_{n}") is not None for n in ("ig_ts", "eg_ts", "enq_ts"))


class NativeGen(CExprMixin, PipelineMixin, StackMixin, UnionMixin, VarbitMixin):
    """One program's C source (``source``) and the index maps the binding uses."""

    def __init__(self, prog: Any) -> None:
        refuse_objects(prog)
        self.prog = prog
        self.spec = prog.spec
        self.check_stacks()
        self.check_unions()
        self.wide: dict[int, int] = {}
        for h in prog.headers.values():
            for i, (_, w, _) in enumerate(h.fields):
                if w > 64:
                    self.wide[h.base + 1 + i] = len(self.wide)
        self.setup_varbit()
        self.reg_index = {n: i for i, n in enumerate(prog.registers)}
        self.ctr_index = {n: i for i, n in enumerate(prog.counters)}
        self.tbl_index = {n: i for i, n in enumerate(prog.tables)}
        self.mtr_index = {n: i for i, n in enumerate(prog.meters)}
        self.prof_index = {n: i for i, n in enumerate(prog.action_profiles)}
        self.vset_uses: list[tuple[str, list[int], int | None]] = []  # selects on a value set (nvsets.py)
        self.calc_fns: dict[str, str] = {}
        self.calc_bytes = 1
        self.out: list[str] = [LOOK_C, SWAP_C]
        self._uid = 0
        self.hdr_max = sum(h.vl_max_bytes if h.vl >= 0 else h.nbits // 8
                           for h in (prog.headers[n] for n in self.spec["deparsers"][0]["order"]))
        body: list[str] = []
        body += self.gen_parser(self.spec["parsers"][0])
        body += self.gen_checksums()
        body += self.gen_actions()
        for pl in self.spec["pipelines"]:
            body += self.gen_pipeline(pl)
        body += self.gen_deparser(self.spec["deparsers"][0])
        body += self.gen_clone_support()
        fixed = [(_HERE / f"{n}.c").read_text() for n in ("runtime", "api", "meters", "direct", "profiles", "vsets",
                                                           "tblops", "meta", "pre", "process", "memlink", "io", "tm")]
        parts = [fixed[0], self.gen_decls(), *fixed[1:6], "\n".join(self.out), "\n".join(body), *fixed[6:]]
        self.source = "\n".join(parts)

    def uid(self, prefix: str) -> str:
        self._uid += 1
        return f"{prefix}{self._uid}"

    # -- constants --------------------------------------------------------------------
    def gen_decls(self) -> str:
        p = self.prog
        sm = p.sm

        def slot(name: str) -> int:
            s = sm.get(name)
            return -1 if s is None else s

        tables = list(p.tables.values())
        d = [f"#define NS {p.nslots}", f"#define NW {len(self.wide)}", f"#define NT {len(tables)}",
             f"#define NR {len(p.registers)}", f"#define NC {len(p.counters)}", f"#define NM {len(p.meters)}",
             f"#define NAP {len(p.action_profiles)}", f"#define NVS {len(self.vset_uses)}",
             f"#define HBUF {self.calc_bytes}", f"#define HDRMAX {self.hdr_max}"]
        d.append(f"#define H_FLAG UINT64_C({L.FLAG:#x})")
        for name, v in (("EXIT", L.EXIT), ("CLONE", L.CLONE), ("CLONE_FL", L.CLONE_FL), ("RESUBMIT", L.RESUBMIT),
                        ("RECIRC", L.RECIRC), ("LEARN", L.LEARN), ("TRUNCATE", L.TRUNCATE), ("PKTLEN", L.PKTLEN),
                        ("ILEN", L.ILEN), ("INPORT", L.INPORT)):
            d.append(f"#define H_{name} {v}")
        for name in ("ingress_port", "egress_spec", "egress_port", "instance_type", "packet_length",
                     "checksum_error", "mcast_grp", "priority", "qid", "parser_error", "egress_rid"):
            d.append(f"#define SM_{name.upper()} {slot(name)}")
        for name in TM_FIELDS:  # the traffic manager's clocks and depths (meta.c), narrow slots
            v = getattr(p, f"tm_{name}")
            if v is not None and not (isinstance(v, int) and 0 <= v < p.nslots and v not in self.wide):
                raise Unsupported(f"traffic-manager field {name} in slot {v!r}")
            d.append(f"#define TM_{name.upper()} {-1 if v is None else int(v)}")
        tmpl = ", ".join(str(v) for v in p.template)
        d.append(f"static const uint64_t TEMPLATE[NS] = {{{tmpl}}};")
        d.append(self._array("uint32_t", "REG_S", [r.size for r in p.registers.values()]))
        d.append(self._array("int", "REG_W", [r.bitwidth for r in p.registers.values()]))
        d.append(self._array("uint64_t", "CTR_S", [c.size for c in p.counters.values()]))
        d.append(self._array("uint64_t", "MTR_S", [m.size for m in p.meters.values()]))
        d.append(self._array("uint8_t", "MTR_B", [int(m.unit == "bytes") for m in p.meters.values()]))
        d.append(self._array("int", "AP_NP", [self.profile_params(n) for n in p.action_profiles]))
        d.append(self._array("int", "TBL_NK", [self.key_limbs(t) for t in tables]))
        d.append(self._array("int", "TBL_NP", [self.table_params(t) for t in tables]))
        d.append(self._array("int", "TBL_EXACT", [int(t.kind == "exact") for t in tables]))
        rng = []
        for i, t in enumerate(tables):
            flags = [int(k.match_type == "range") for k in t.keys for _ in range(self.limbs(k.bitwidth))]
            rng.append(f"static const uint8_t TR{i}[] = {{{', '.join(map(str, flags or [0]))}}};")
        d += rng
        d.append(f"static const uint8_t *const TBL_RANGE[NT + 1] = {{{', '.join(f'TR{i}' for i in range(len(tables)))}"
                 f"{', ' if tables else ''}0}};")
        for fn in ("g_ingress", "g_egress"):
            d.append(f"static void {fn}(void *c);")
        return "\n".join(d)

    @staticmethod
    def _array(ctype: str, name: str, vals: list[int]) -> str:
        return f"static const {ctype} {name}[] = {{{', '.join(str(v) for v in vals) or '0'}}};"

    @staticmethod
    def limbs(w: int) -> int:
        return (w + 63) // 64

    def key_limbs(self, t: Any) -> int:
        return sum(self.limbs(k.bitwidth) for k in t.keys)

    def table_params(self, t: Any) -> int:
        """Action data slots of a table's entries: the most parameters, and one for the
        direct counter and meter cell handle (direct.c) in a table that has them."""
        infos = self.prog._table_actions[t.name].values()
        n = max([len(i.params) for i in infos] or [0])
        if t.profile is not None:  # the member or group reference (profiles.c) in slot 0
            n = max(n, 1)
        n += int(self.has_direct(t.name))
        if n > 16:
            raise Unsupported("an action with more than 16 parameters")
        return n

    def profile_params(self, name: str) -> int:
        """Action data slots of an action profile's members."""
        return max([len(i.params) for i in self.prog._profile_actions.get(name, {}).values()] or [0])

    def has_direct(self, table: str) -> bool:
        return table in self.prog.direct_counters.values() or table in self.prog.direct_meters.values()

    # -- parser -----------------------------------------------------------------------
    def gen_parser(self, parser: dict[str, Any]) -> list[str]:
        states = {s["name"]: i for i, s in enumerate(parser["parse_states"])}
        err = self.prog.errors
        out = ["static uint32_t g_parse(ctx_t *c) {",
               "  uint64_t *F = c->F; w256 *W = c->W; (void)W; const uint8_t *pk = c->pkt;",
               "  uint32_t o = 0, n = c->n; uint64_t k = 0, e = 0; (void)k; (void)pk;",
               f"  goto S{states[parser['init_state']]};"]
        self.in_parser = True  # lookahead reads pk, o, n
        for i, s in enumerate(parser["parse_states"]):
            out.append(f" S{i}:")
            for op in s["parser_ops"]:
                out += self._parser_op(op, err)
            out += self._transitions(s, states)
        self.in_parser = False
        out += [" perr:", "  F[SM_PARSER_ERROR] = e;" if self.prog.sm.get("parser_error") is not None else "  (void)e;",
                "  return o;", "}"]
        return out

    def _parser_op(self, op: dict[str, Any], err: dict[str, int]) -> list[str]:
        name, params = op["op"], op["parameters"]
        if name == "extract":
            p = params[0]
            if p["type"] == "stack":
                return self.extract_stack(p["value"], err)
            if p["type"] == "union_stack":
                return self.extract_union_stack(p["value"], err)
            if p["type"] != "regular":
                raise Unsupported(f"extract into a {p['type']}")
            h = self.prog.headers[p["value"]]
            if h.nbits % 8:
                raise Unsupported("a header that is not whole bytes")
            nb = h.nbits // 8
            lines = [f"  if (o + {nb} > n) {{ e = {err['PacketTooShort']}; goto perr; }}"]
            off = 0
            for i, (_, w, _) in enumerate(h.fields):
                s = h.base + 1 + i
                if w > 64:
                    lines.append(f"  W[{self.wide[s]}] = rdw(pk + o, {off}, {w});")
                else:
                    lines.append(f"  F[{s}] = rdb(pk + o, {off}, {w});")
                off += w
            lines.append(f"  F[{h.base}] = 1; o += {nb};")
            return lines + self.union_clear(h, "1")
        if name == "extract_VL":
            return self.extract_vl(params, err)
        if name == "set":
            check = [self.set_lookahead_check(params[1]["value"], err)] if params[1].get("type") == "lookahead" else []
            return [*check, "  " + self.store(params[0], params[1])]
        if name == "verify":
            e = params[1]
            code = str(err[e["value"]]) if e.get("type") == "error" else self.exact64(e)
            return [f"  if (!{self.cond(params[0])}) {{ e = {code}; goto perr; }}"]
        if name == "primitive":
            lines: list[str] = []
            for prim in params:
                lines += self.primitive(prim)
            return lines
        raise Unsupported(f"parser operation {name!r}" if isinstance(name, str) else "parser operation")

    def _transitions(self, s: dict[str, Any], states: dict[str, int]) -> list[str]:
        parts, total = [], 0
        for kf in s.get("transition_key", []):
            if kf["type"] == "field":
                sl, w = self.finfo(kf["value"])
                src = self.load(sl, w, 64)
            elif kf["type"] in ("stack_field", "lookahead"):
                w = self.bits(kf) or 0
                src = self.cx(kf, 64)
            else:
                raise Unsupported(f"a parser select on a {kf['type']}")
            wb = (w + 7) // 8 * 8
            if w > 64:
                raise Unsupported("a parser select key over 64 bits")
            parts.append((src, w, wb))
            total += wb
        if total > 64:
            raise Unsupported("a parser select key over 64 bits")
        lines = []
        if parts:
            terms, shift = [], total
            for src, _, wb in parts:
                shift -= wb
                terms.append(f"({src} << {shift})" if shift else src)
            lines.append(f"  k = {' | '.join(terms)};")

        def go(nxt: str | None) -> str:
            return "return o;" if nxt is None else f"goto S{states[nxt]};"

        for tr in s["transitions"]:
            ttype = tr.get("type", "hexstr")
            if ttype == "default":
                lines.append(f"  {go(tr['next_state'])}")
                return lines
            if ttype == "parse_vset":
                lines.append(f"  if ({vset_cond(self, tr, [w for _, w, _ in parts])}) {go(tr['next_state'])}")
                continue
            if ttype != "hexstr":
                raise Unsupported(f"parser transition type {ttype}")
            val = json_int(tr["value"])
            mask = tr.get("mask")
            mv = json_int(mask) if mask is not None else (1 << 64) - 1
            if val < 0 or mv < 0 or (val & mv) >> 64:
                continue  # never equal to a key of at most 64 bits (as in the Python backend)
            cond = f"(k & UINT64_C({mv & (2**64 - 1):#x})) == UINT64_C({val & mv:#x})"
            lines.append(f"  if ({cond}) {go(tr['next_state'])}")
        lines.append("  return o;")
        return lines

    # -- deparser ---------------------------------------------------------------------
    def gen_deparser(self, dep: dict[str, Any]) -> list[str]:
        out = ["static uint32_t g_deparse(ctx_t *c, uint8_t *out, uint32_t cap) {",
               "  uint64_t *F = c->F; w256 *W = c->W; (void)W; uint32_t h = 0;",
               "  if (cap < HDRMAX) return UINT32_MAX;", "  memset(out, 0, HDRMAX);"]
        for hname in dep["order"]:
            h = self.prog.headers[hname]
            if h.vl >= 0:
                out += self.deparse_vl(h)
                continue
            out.append(f"  if (F[{h.base}]) {{")
            off = 0
            for i, (_, w, _) in enumerate(h.fields):
                s = h.base + 1 + i
                fn = f"wrw(out + h, {off}, {w}, W[{self.wide[s]}])" if w > 64 else f"wrb(out + h, {off}, {w}, F[{s}])"
                out.append(f"    {fn};")
                off += w
            out.append(f"    h += {h.nbits // 8};")
            out.append("  }")
        out += ["  return h;", "}"]
        return out

    # -- clones ----------------------------------------------------------------------------
    def gen_clone_support(self) -> list[str]:
        """``g_reset_meta`` (zero every metadata field, as ``Program.reset_metadata``) and
        ``g_copy_fl`` (copy field list ``id``'s fields, as ``Program.copy_field_list``;
        0 for an unknown list, which copies nothing) for the clones pre.c makes."""
        out = ["static void g_reset_meta(uint64_t *F, w256 *W) {", "  (void)W;"]
        for a, b in self.prog.metadata_slots:
            if b > a:
                out.append(f"  memset(F + {a}, 0, 8 * {b - a});")
            out += [f"  W[{self.wide[s]}] = wf(0);" for s in range(a, b) if s in self.wide]
        out += ["}", "static void g_copy_fl(uint64_t *F, w256 *W, const uint64_t *sF, const w256 *sW, uint64_t id) {",
                "  (void)W; (void)sW; (void)F; (void)sF;", "  switch (id) {"]
        for fid, slots in self.prog.field_lists.items():
            copies = " ".join(f"W[{self.wide[s]}] = sW[{self.wide[s]}];" if s in self.wide else f"F[{s}] = sF[{s}];"
                              for s in slots)
            out.append(f"  case UINT64_C({int(fid) & (2**64 - 1)}): {copies} break;")
        out += ["  default: break;", "  }", "}"]
        return out + self.gen_learn()

    def gen_learn(self) -> list[str]:
        """``g_learn``: the values of learn list ``id``'s fields, in its order, into ``o``
        (one word a field, four for a wide one); how many words, -1 for an unknown list.
        LEARN_MAXW: the most words of any list (process.c's digest queue)."""
        out = ["static int g_learn(const uint64_t *F, const w256 *W, uint64_t id, uint64_t *o) {",
               "  (void)F; (void)W; (void)o;", "  switch (id) {"]
        most = 0
        for lid, ll in self.prog.learn_by_id.items():
            parts, k = [], 0
            for s in ll.slots:
                parts.append(f"memcpy(o + {k}, W[{self.wide[s]}].v, 32);" if s in self.wide else f"o[{k}] = F[{s}];")
                k += 4 if s in self.wide else 1
            most = max(most, k)
            out.append(f"  case UINT64_C({int(lid) & (2**64 - 1)}): {' '.join(parts)} return {k};")
        return [f"#define LEARN_MAXW {most}", *out, "  default: return -1;", "  }", "}"]

    # -- calculations and checksums -------------------------------------------------------
    def calc_fn(self, name: str) -> str:
        """The C function computing calculation ``name`` (generated once)."""
        if name in self.calc_fns:
            return self.calc_fns[name]
        calc = self.prog.calculations.get(name)
        if calc is None:
            raise Unsupported("an unknown calculation")
        algo = _ALGOS.get(calc["algo"])
        if algo is None:
            raise Unsupported(f"hash algorithm {calc['algo']!r}" if isinstance(calc["algo"], str) else "hash algorithm")
        fn = self.uid("calc")
        lines = [f"static uint64_t {fn}(ctx_t *c, const uint8_t *P, uint32_t pn) {{",
                 "  uint64_t *F = c->F; w256 *W = c->W; (void)W; (void)F; uint8_t *b = c->hbuf; uint32_t n = 0;"]
        total, payload = 0, False
        body = []
        for e in calc["input"]:
            t = e["type"]
            vl = self.varbit_calc(e) if t == "field" else None
            if vl is not None:
                body.append(vl[0])
                total += vl[1]
            elif t == "field":
                s, w = self.finfo(e["value"])
                hdr = self.prog.headers[self.prog.aliases.get(".".join(e["value"]), e["value"])[0]]
                guard = "" if hdr.metadata else f"if (F[{hdr.base}]) "
                body.append(f"  {guard}{{ {self._put(s, w)} n += {w}; }}")
                total += w
            elif t == "hexstr":
                w = int(e["bitwidth"])
                v = json_int(e["value"]) & ((1 << w) - 1)
                if w > 64:
                    raise Unsupported("a calculation constant over 64 bits")
                body.append(f"  wrb(b, n, {w}, UINT64_C({v:#x})); n += {w};")
                total += w
            elif t == "header":
                h = self.prog.headers[e["value"]]
                put = " ".join(f"{self._put(h.base + 1 + i, w)} n += {w};" for i, (_, w, _) in enumerate(h.fields))
                body.append(f"  if (F[{h.base}]) {{ {put} }}")
                total += h.nbits
            elif t == "payload":
                payload = True
            else:
                raise Unsupported(f"calculation input {t}")
        nbytes = (total + 7) // 8 + 1
        self.calc_bytes = max(self.calc_bytes, nbytes)
        lines.append(f"  memset(b, 0, {nbytes});")
        lines += body
        lines.append("  n = (n + 7) >> 3;")
        if payload:
            lines.append("  memcpy(b + n, P, pn); n += pn;")
        else:
            lines.append("  (void)P; (void)pn;")
        lines += [f"  return {algo}(b, n);", "}"]
        self.out.append("\n".join(lines))
        self.calc_fns[name] = fn
        return fn

    def _put(self, s: int, w: int) -> str:
        return f"wrw(b, n, {w}, W[{self.wide[s]}]);" if w > 64 else f"wrb(b, n, {w}, F[{s}]);"

    def gen_checksums(self) -> list[str]:
        ver = ["static int g_verify(ctx_t *c) {", "  uint64_t *F = c->F; w256 *W = c->W; (void)W; (void)F; int bad = 0;"]
        upd = ["static void g_update(ctx_t *c, const uint8_t *P, uint32_t pn) {",
               "  uint64_t *F = c->F; w256 *W = c->W; (void)W; (void)F; (void)P; (void)pn;"]
        for ck in self.spec.get("checksums", []):
            fn = self.calc_fn(ck["calculation"])
            s, w = self.finfo(ck["target"])
            if w > 64:
                raise Unsupported("a checksum over 64 bits")
            cond = self.cond(ck["if_cond"]) if ck.get("if_cond") else "1"
            if ck.get("verify"):
                ver.append(f"  if ({cond} && ({fn}(c, 0, 0) & {mask_hex(w)}) != F[{s}]) bad = 1;")
            if ck.get("update"):
                upd.append(f"  if ({cond}) F[{s}] = {fn}(c, P, pn) & {mask_hex(w)};")
        return [*ver, "  return bad;", "}", *upd, "}"]
