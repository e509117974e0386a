"""Pipelines: one function per table or conditional node, the pipeline loop, and the
table objects (keys, defaults, action profiles) the control plane fills."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from targets.embedded import action_profiles, state
from targets.embedded.codegen.layout import EXIT, ILEN, CompileError, json_int
from targets.embedded.codegen.support import noop
from targets.embedded.state import ActionCall

# How many levels of conditionals a node's return evaluates in place (see _gen_pipeline).
_INLINE_DEPTH = 3


class TablesMixin:
    """Generate the pipelines and build their tables."""

    def _gen_pipeline(self, pl: dict[str, Any]) -> None:
        nodes: dict[str, str] = {}
        for t in pl["tables"]:
            nodes[t["name"]] = self._name("_n")
        for c in pl.get("conditionals", []):
            nodes[c["name"]] = self._name("_n")

        def ref(name: str | None) -> str:
            return "None" if name is None else nodes[name]

        conds = {c["name"]: c for c in pl.get("conditionals", [])}

        def follow(name: str | None, depth: int = 0) -> str:
            """The next node as an expression: conditionals (pure reads of the PHV)
            evaluated in place, a few levels deep, instead of being called one by one
            through the pipeline loop."""
            c = conds.get(name) if name is not None else None
            if c is None or depth >= _INLINE_DEPTH:
                return ref(name)
            return (f"({follow(c.get('true_next'), depth + 1)} if {self.expr(c['expression'])} "
                    f"else {follow(c.get('false_next'), depth + 1)})")

        for t in pl["tables"]:
            self.tables[t["name"]] = self._gen_table_node(t, nodes[t["name"]], ref, follow)
        for c in pl.get("conditionals", []):
            lines = [f"def {nodes[c['name']]}(F):",
                     f"    return {follow(c['name'])}"]
            self._src.append("\n".join(lines))
        init = pl.get("init_table")
        if pl["name"] not in ("ingress", "egress"):  # the only two compiled (_gen_all)
            raise CompileError(f"pipeline {pl['name']!r}")
        lines = [f"def _pipe_{pl['name']}(F):", f"    n = {follow(init)}", "    while n is not None:", "        n = n(F)"]
        self._src.append("\n".join(lines))

    def _key_source(self, t: dict[str, Any]) -> list[str]:
        """The expressions of a table's key fields, in key order."""
        key_src = []
        for k in t["key"]:
            mt = k["match_type"]
            if mt == "valid":
                key_src.append(f"F[{self.headers[k['target']].base}]")
                continue
            s, w, _ = self.field_info(k["target"])
            src = f"F[{s}]"
            if k.get("mask"):
                src = f"({src} & {json_int(k['mask'])})"
            key_src.append(src)
        return key_src

    def _gen_table_node(self, t: dict[str, Any], fname: str, ref: Callable[[str | None], str],
                        follow: Callable[[str | None], str]) -> state.Table:
        """Generate the node function ``fname`` of table ``t``; returns the table."""
        tbl = self._make_table(t)
        tname = self._bind("_T", tbl)
        key_src = self._key_source(t)
        keyexpr = f"({', '.join(key_src)},)" if key_src else "()"
        if tbl.profile is not None:
            self._gen_indirect_node(t, tbl, tname, keyexpr, fname, ref, follow)
            return tbl
        # Only an action that calls exit() can stop the pipeline here.
        exits = any(self._action_exits.get(i, True) for i in t.get("action_ids", [])) or not t.get("action_ids")
        exit_check = [f"    if F[{EXIT}]: return None"] if exits else []
        if not key_src:
            # A keyless table (p4c wraps every bare action call in one) always
            # misses: its default action, which the control plane may change.
            lines = [f"def {fname}(F):", f"    c = {tname}.default"]
            if t["name"] in self.direct_counters.values():
                lines.append(f"    {tname}.default_packets += 1; {tname}.default_bytes += F[{ILEN}]")
            lines += ["    c.fn(F, c.params)", *exit_check, self._next_node(t, ref, follow, "c.name")]
            self._src.append("\n".join(lines))
            return tbl
        lookup = f"{tname}.lookup({keyexpr})"
        lines = [f"def {fname}(F):",
                 f"    e = {lookup}",
                 "    if e is None:",
                 f"        c = {tname}.default",
                 ]
        if t["name"] in self.direct_counters.values():
            lines.append(f"        {tname}.default_packets += 1; {tname}.default_bytes += F[{ILEN}]")
        lines += ["        c.fn(F, c.params)", "    else:", "        c = e.action"]
        if t["name"] in self.direct_counters.values():
            lines.append(f"        e.packets += 1; e.bytes += F[{ILEN}]")
        dm = t.get("direct_meters")
        if dm:
            mspec = self._direct_meter_specs[dm]
            target, _, _ = self.lvalue({"type": "field", "value": mspec["result_target"]})
            unit = mspec.get("type", "packets")
            if unit not in ("packets", "bytes"):
                raise CompileError(f"direct meter {dm}: unit {unit!r}")
            # BMv2 runs the direct meter on a hit, before the action.
            lines.insert(-1, f"        {target} = _dmx(e, {unit!r}, F[{ILEN}])")
        lines.append("        c.fn(F, c.params)")
        lines += exit_check
        lines.append(self._next_node(t, ref, follow, "c.name"))
        self._src.append("\n".join(lines))
        return tbl

    def _gen_indirect_node(self, t: dict[str, Any], tbl: state.Table, tname: str, keyexpr: str, fname: str,
                           ref: Callable[[str | None], str],
                           follow: Callable[[str | None], str]) -> None:
        """A table node with an action profile: a hit picks the member's action (from the
        group by the selector hash); a miss runs the default, BMv2's no-op until set."""
        ap = self._bind("_AP", tbl.profile)
        plen = f"F[{ILEN}]"  # counters and meters count the ingress length, as in BMv2
        counted = t["name"] in self.direct_counters.values()
        lines = [f"def {fname}(F):",
                 f"    e = {tname}.lookup({keyexpr})" if keyexpr != "()" else "    e = None",
                 "    if e is None:",
                 f"        c = {tname}.default"]
        if counted:
            lines.append(f"        {tname}.default_packets += 1; {tname}.default_bytes += {plen}")
        lines += ["    else:", f"        c = {ap}.pick(e.action, F)"]
        if counted:
            lines.append(f"        e.packets += 1; e.bytes += {plen}")
        if t.get("direct_meters"):
            mspec = self._direct_meter_specs[t["direct_meters"]]
            target, _, _ = self.lvalue({"type": "field", "value": mspec["result_target"]})
            unit = mspec.get("type", "packets")
            if unit not in ("packets", "bytes"):
                raise CompileError(f"direct meter of table {t['name']}: unit {unit!r}")
            lines.append(f"        {target} = _dmx(e, {unit!r}, {plen})")
        lines += ["    if c is not None: c.fn(F, c.params)", f"    if F[{EXIT}]: return None"]
        # the empty default action (c.name "") and an empty group go to the table's base
        # next node, like BMv2's default_default_entry
        lines.append(self._next_node(t, ref, follow, "c.name if c is not None else ''",
                                     default_to_base=True))
        self._src.append("\n".join(lines))

    def _next_node(self, t: dict[str, Any], ref: Callable[[str | None], str],
                   follow: Callable[[str | None], str], action_name: str,
                   default_to_base: bool = False) -> str:
        """The ``return`` line of a table node: by hit/miss, or by the action that ran
        (``action_name``, an expression; an unlisted one goes to the base next node when
        ``default_to_base``). ``follow`` turns a statically known next node into an
        expression (conditionals evaluated in place)."""
        nt = t.get("next_tables", {})
        if "__HIT__" in nt or "__MISS__" in nt:
            return f"    return {follow(nt.get('__MISS__'))} if e is None else {follow(nt.get('__HIT__'))}"
        distinct = set(nt.values())
        if len(distinct) <= 1:
            return f"    return {follow(distinct.pop() if distinct else t.get('base_default_next'))}"
        nmap = self._name("_NX")
        self._deferred.append((nmap, dict(nt.items()), ref))
        if default_to_base:
            return f"    return {nmap}.get({action_name}, {ref(t.get('base_default_next'))})"
        return f"    return {nmap}[{action_name}]"

    def _make_table(self, t: dict[str, Any]) -> state.Table:
        ttype = t.get("type", "simple")
        if ttype not in ("simple", "indirect", "indirect_ws"):
            raise CompileError(f"table {t['name']}: unknown table type {ttype!r}")
        keys = []
        for k in t["key"]:
            mt = k["match_type"]
            if mt == "valid":
                keys.append(state.KeyField(k.get("name", k["target"]), "exact", 1))
                continue
            _, w, _ = self.field_info(k["target"])
            keys.append(state.KeyField(k.get("name", ".".join(k["target"])), mt, w))
        action_names = [self.actions_by_id[i].name for i in t["action_ids"]]
        self._table_actions[t["name"]] = {self.actions_by_id[i].name: self.actions_by_id[i] for i in t["action_ids"]}
        de = t.get("default_entry")
        if ttype != "simple":
            # BMv2: an indirect table's default is an empty (no-op) action until the
            # control plane sets one; p4c emits no default_entry for it.
            default, default_const = ActionCall("", (), noop), False
        elif de:
            info = self.actions_by_id[de["action_id"]]
            default = ActionCall(info.name, tuple(json_int(x) for x in de.get("action_data", [])))
            default_const = bool(de.get("action_const"))
        else:
            info = self.actions_by_id[t["action_ids"][0]]
            default = ActionCall(info.name, tuple(0 for _ in info.params))
            default_const = False
        tbl = state.Table(t["name"], keys, action_names, int(t.get("max_size", 1024)),
                          default, default_const, t["name"] in self.direct_counters.values())
        if ttype != "simple":
            ap = self.action_profiles.get(t.get("action_profile", ""))
            if ap is None:
                raise CompileError(f"table {t['name']}: unknown action profile {t.get('action_profile')!r}")
            if ap.with_selector != (ttype == "indirect_ws"):
                raise CompileError(f"table {t['name']}: {ttype} table with action profile {ap.name}")
            tbl.profile = ap
            for a in action_names:
                self._profile_actions.setdefault(ap.name, {})[a] = self._table_actions[t["name"]][a]
        self._const_entries.append((tbl, t.get("entries", [])))
        return tbl

    def _make_action_profiles(self, pl: dict[str, Any]) -> None:
        for ap in pl.get("action_profiles", []):
            sel = ap.get("selector")
            prof = action_profiles.ActionProfile(ap["name"], int(ap.get("max_size", 0)), sel is not None)
            if sel is not None:
                for e in sel["input"]:
                    if e["type"] != "field":
                        raise CompileError(f"action selector {ap['name']}: input type {e['type']}")
                # BMv2 builds a Calculation over the selector fields: the same bytes
                # (fields of invalid headers left out) and algorithm as a hash().
                cname = f"$selector::{ap['name']}"
                self.calculations[cname] = {"name": cname, "algo": sel["algo"], "input": sel["input"]}
                self._selector_hashes.append((prof, self._calc_fn(cname)))
            self.action_profiles[ap["name"]] = prof
