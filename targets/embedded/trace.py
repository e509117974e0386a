"""Per-packet trace of the embedded target, shaped like BMv2's ``-L trace`` log.

Switched on and off at run time, per switch, over the runtime CLI (``trace on [FILE]``,
``trace off``; runtime_cli.py). Off, it costs nothing: the hot generated code is never
changed. On, the switch's ``_receive``/``_transmit`` and its program's ``parse``,
``ingress``, ``egress`` and every table's ``lookup`` are shadowed by instance attributes
that log and call the original; ``trace off`` deletes them again.

Each line carries BMv2's message text after a ``[pkt.N] [cxt 0]`` tag::

    [12:00:00.000] [bmv2] [T] [thread 0] [3.0] [cxt 0] Processing packet received on port 1
    ... Parser 'parser': start / Parser 'parser' entering state 'start' /
    ... Extracting header 'ethernet' / Parser 'parser': end
    ... Pipeline 'ingress': start / Applying table 'MyIngress.forwarding.ipv4_routes'
    ... Looking up key: / * hdr.ipv4.dst_addr: 0a000002
    ... Table 'MyIngress.forwarding.ipv4_routes': hit with handle 0
    ... Action entry is MyIngress.forwarding.set_next_hop - 000000000002,2,
    ... Action MyIngress.forwarding.set_next_hop / Pipeline 'ingress': end
    ... Egress port is 2 / Pipeline 'egress': start ... / Transmitting packet of size 42 out of port 2

so ``normalize`` (strip the prefix up to ``[cxt 0]``) makes a BMv2 log and this trace
diffable. :func:`steps` goes further and reduces either log to what both must agree on,
per packet: ports, parser states and extracted headers, every keyed table applied with
hit or miss and the action it ran, egress port, transmission; ``python -m
targets.embedded.trace diff EMBEDDED.trace BMV2.log`` compares two logs that way. Left out: conditions (p4c's ``node_N`` are evaluated inside generated code),
keyless tables (p4c's ``tbl_act`` wrappers: no lookup happens), and the parser path is
rebuilt from the JSON after parsing (select keys read from the parsed headers; a
``lookahead`` key ends the reconstruction with ``...``).
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from targets.embedded.compiler import Program
    from targets.embedded.switch import Switch

_PREFIX = re.compile(r"^.*?\[cxt \d+\] ")


def normalize(line: str) -> str:
    """A trace or BMv2 log line without its time/thread/packet prefix."""
    return _PREFIX.sub("", line.rstrip("\n"))


_PACKET = re.compile(r"\[(\d+)\.\d+\] \[cxt \d+\] ")
_STEP_RES = [(re.compile(p), f) for p, f in (
    (r"^Processing packet received on port (\d+)", "receive port {0}"),
    (r"^Parser '[^']*' entering state '([^']*)'", "parser state {0}"),
    (r"^Extracting header '([^']*)'", "extract {0}"),
    (r"^Pipeline '([^']*)': start", "pipeline {0}"),
    (r"^Egress port is (\d+)", "egress port {0}"),
    (r"^Transmitting packet of size (\d+) out of port (\d+)", "transmit port {1} size {0}"),
)]
_TABLE = re.compile(r"^Applying table '([^']*)'")
_RESULT = re.compile(r"^Table '([^']*)': (hit|miss)")
_ACTION = re.compile(r"^Action (?!entry )(\S+)")


def steps(lines: Iterable[str]) -> dict[int, list[str]]:
    """The per-packet steps of a trace (this target's) or a BMv2 ``-L trace`` log:
    ``{packet id: ["receive port 1", "parser state start", "extract ethernet", ...,
    "table T hit", "action A", "egress port 2", "transmit port 2 size 42"]}``.

    Only what both targets log alike: no timestamps, threads, keys or handles, no
    conditions, and no keyless tables (BMv2 logs p4c's ``tbl_*`` wrappers with an empty
    ``Looking up key:``; this target does not look them up) nor their actions. BMv2's
    continuation lines (key dumps) belong to the line before them."""
    out: dict[int, list[str]] = {}
    pkt: int | None = None
    table: dict[int, list[Any]] = {}  # packet -> [name, keyed, in key dump, skip action]
    for raw in lines:
        m = _PACKET.search(raw)
        if m is None:  # a continuation line of the message before
            if pkt is not None and raw.startswith("* ") and table.get(pkt, [None, 0, 0])[2]:
                table[pkt][1] = True
            continue
        pkt = int(m.group(1))
        msg = raw[m.end():].rstrip("\n")
        acc = out.setdefault(pkt, [])
        t = table.get(pkt)
        if (tm := _TABLE.match(msg)) is not None:
            table[pkt] = [tm.group(1), False, False, False]
        elif msg.startswith("Looking up key:") and t is not None:
            t[2] = True
        elif msg.startswith("* ") and t is not None and t[2]:
            t[1] = True
        elif (rm := _RESULT.match(msg)) is not None and t is not None:
            t[2] = False
            if t[1]:
                acc.append(f"table {rm.group(1)} {rm.group(2)}")
            else:
                t[3] = True  # keyless: its action is not a step either
        elif (am := _ACTION.match(msg)) is not None:
            if t is not None and t[3]:
                t[3] = False
            else:
                acc.append(f"action {am.group(1)}")
        else:
            for rx, fmt in _STEP_RES:
                if (sm := rx.match(msg)) is not None:
                    acc.append(fmt.format(*sm.groups()))
                    break
    return {p: s for p, s in out.items() if s}


def diff_steps(a: Sequence[str], b: Sequence[str], name_a: str = "a",
               name_b: str = "b") -> list[str]:
    """A unified diff of the :func:`steps` of two logs, packet by packet in order of
    appearance (packet ids differ between targets); ``[]`` when they agree."""
    sa, sb = list(steps(a).values()), list(steps(b).values())
    flat_a = [f"packet {i + 1}: {x}" for i, s in enumerate(sa) for x in s]
    flat_b = [f"packet {i + 1}: {x}" for i, s in enumerate(sb) for x in s]
    return list(difflib.unified_diff(flat_a, flat_b, name_a, name_b, lineterm=""))


def _hex(v: int, bits: int) -> str:
    return format(v, f"0{max(1, (bits + 3) // 4)}x")


class Tracer:
    """The trace of one switch: ``start(path)``, ``stop()``."""

    def __init__(self, switch: Switch) -> None:
        self.switch = switch
        self.out: TextIO | None = None
        self.path: str | None = None
        self.packets = 0
        self._prog: Program | None = None
        self._orig: dict[str, Any] = {}
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        return self.out is not None

    # ------------------------------------------------------------------ switching
    def start(self, path: str) -> None:
        """Trace every packet from now on into ``path`` (appended)."""
        with self._lock:
            self._undo()
            self.out = open(path, "a", buffering=1)  # noqa: SIM115 (closed in stop)
            self.path = path
            sw = self.switch
            sw._receive = self._receive  # type: ignore[method-assign]
            sw._transmit = self._transmit  # type: ignore[method-assign]
            self._hook(sw.program)
        self.switch.wake()  # a loop in C serving the ports hands them back to the Python loop

    def stop(self) -> None:
        """Stop tracing; the switch runs its untouched code again."""
        with self._lock:
            self._undo()
        self.switch.wake()

    def _undo(self) -> None:
        sw = self.switch
        for name in ("_receive", "_transmit"):
            sw.__dict__.pop(name, None)
        self._unhook()
        if self.out is not None:
            self.out.close()
            self.out = None

    def _hook(self, prog: Program | None) -> None:
        self._unhook()
        if prog is None:
            return
        self._prog = prog
        orig_parse, orig_ingress, orig_egress = prog.parse, prog.ingress, prog.egress
        self._orig = {"parse": orig_parse, "ingress": orig_ingress, "egress": orig_egress}
        spec = prog.spec
        parser = spec["parsers"][0]
        states = {s["name"]: s for s in parser["parse_states"]}
        pname = parser["name"]

        def parse(F: list[int], pkt: bytes) -> int:
            self._log(f"Parser '{pname}': start")
            try:
                off = orig_parse(F, pkt)
            finally:
                self._parser_path(prog, F, parser, states)
            self._log(f"Bytes parsed: {off}")
            self._log(f"Parser '{pname}': end")
            return off

        def pipe(name: str, fn: Any) -> Any:
            def run(F: list[int]) -> None:
                self._log(f"Pipeline '{name}': start")
                fn(F)
                self._log(f"Pipeline '{name}': end")
                if name == "ingress":
                    self._log(f"Egress port is {F[prog.sm_egress_spec]}")
            return run

        prog.parse = parse  # type: ignore[method-assign]
        prog.ingress = pipe("ingress", orig_ingress)  # type: ignore[method-assign]
        prog.egress = pipe("egress", orig_egress)  # type: ignore[method-assign]
        keys = {}
        for pl in spec["pipelines"]:
            for t in pl["tables"]:
                keys[t["name"]] = [(k.get("name") or ".".join(k["target"]) if isinstance(k["target"], list)
                                    else str(k["target"])) for k in t["key"]]
        for tname, tbl in prog.tables.items():
            tbl.lookup = self._lookup(tname, tbl, keys.get(tname, []))

    def _unhook(self) -> None:
        prog, self._prog = self._prog, None
        if prog is None:
            return
        for name, fn in self._orig.items():  # the compiled functions are instance attributes
            setattr(prog, name, fn)
        self._orig = {}
        for tbl in prog.tables.values():
            with_dict = getattr(tbl, "__dict__", None)
            if with_dict is not None:
                with_dict.pop("lookup", None)

    # ------------------------------------------------------------------ logging
    def _log(self, msg: str) -> None:
        out = self.out
        if out is None:
            return
        now = time.time()
        stamp = time.strftime("%H:%M:%S", time.localtime(now)) + f".{int(now * 1000) % 1000:03d}"
        out.write(f"[{stamp}] [bmv2] [T] [thread 0] [{self.packets}.0] [cxt 0] {msg}\n")

    def _receive(self, port: int, frame: bytes) -> None:
        sw = self.switch
        if sw.program is not self._prog:  # a new pipeline was installed: follow it
            self._hook(sw.program)
        self.packets += 1
        self._log(f"Processing packet received on port {port}")
        type(sw)._receive(sw, port, frame)

    def _transmit(self, port: int, frame: bytes, out: list[tuple[int, bytes]]) -> None:
        self._log(f"Transmitting packet of size {len(frame)} out of port {port}")
        sw = self.switch
        type(sw)._transmit(sw, port, frame, out)

    def _lookup(self, tname: str, tbl: Any, key_names: list[str]) -> Any:
        orig = type(tbl).lookup
        widths = [getattr(k, "bitwidth", 0) for k in getattr(tbl, "keys", [])]
        key_names = [getattr(k, "name", "") or n for k, n in zip(getattr(tbl, "keys", []), key_names, strict=False)]

        def lookup(key: tuple) -> Any:
            self._log(f"Applying table '{tname}'")
            self._log("Looking up key:")
            for i, v in enumerate(key):
                name = key_names[i] if i < len(key_names) else f"key{i}"
                w = widths[i] if i < len(widths) else 32
                self._log(f"* {name}: {_hex(v, w)}")
            e = orig(tbl, key)
            if e is None:
                self._log(f"Table '{tname}': miss")
                call = tbl.default
            else:
                self._log(f"Table '{tname}': hit with handle {getattr(e, 'handle', 0)}")
                call = e.action
            name = getattr(call, "name", "") if call is not None else ""
            params = "".join(f"{p:x}," for p in getattr(call, "params", ()) or ())
            self._log(f"Action entry is {name} - {params}")
            self._log(f"Action {name}")
            return e

        return lookup

    def _parser_path(self, prog: Program, F: list[int], parser: dict, states: dict[str, dict]) -> None:
        """The states the packet went through, rebuilt from the parsed headers."""
        name = parser.get("init_state")
        for _ in range(64):  # header stacks may loop; BMv2 caps nothing, we cap the log
            if name is None:
                return
            st = states.get(name)
            if st is None:
                return
            self._log(f"Parser '{parser['name']}' entering state '{name}'")
            for op in st.get("parser_ops", []):
                if op.get("op") in ("extract", "extract_VL"):
                    p = op["parameters"][0]
                    if p.get("type") == "regular":
                        self._log(f"Extracting header '{p['value']}'")
            keyspec = st.get("transition_key", [])
            vals, widths = [], []
            try:
                for k in keyspec:
                    if k.get("type") != "field":
                        raise KeyError
                    s, w, _ = prog.field_info(list(k["value"]))
                    vals.append(F[s])
                    widths.append(w)
            except (KeyError, ValueError, IndexError, TypeError):
                self._log(f"Parser state '{name}': key is ... (not rebuilt)")
                return
            # BMv2 gives every field of a select key whole bytes (ParseSwitchKeyBuilder),
            # and p4c writes the transition values that way
            key = total = 0
            for v, w in zip(vals, widths, strict=True):
                bits = (w + 7) // 8 * 8
                key = (key << bits) | v
                total += bits
            if keyspec:
                self._log(f"Parser state '{name}': key is {_hex(key, total)}")
            nxt = None
            for tr in st.get("transitions", []):
                t = tr.get("type", "hexstr")
                if t == "default":
                    nxt = tr.get("next_state")
                    break
                if t == "hexstr":
                    val = int(tr["value"], 16)
                    mask = int(tr["mask"], 16) if tr.get("mask") else (1 << total) - 1
                    if key & mask == val & mask:
                        nxt = tr.get("next_state")
                        break
            else:
                if keyspec:
                    return
            name = nxt


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m targets.embedded.trace steps LOG`` prints a trace's or BMv2 log's
    steps; ``diff A B`` diffs two (exit status 1 when they differ)."""
    p = argparse.ArgumentParser(prog="python -m targets.embedded.trace",
                                description="Reduce an embedded-target trace or a BMv2 "
                                            "'-L trace' log to comparable per-packet steps.")
    sub = p.add_subparsers(dest="cmd", required=True)
    st = sub.add_parser("steps", help="print the per-packet steps of one log")
    st.add_argument("log")
    df = sub.add_parser("diff", help="diff the steps of two logs (exit 1 if they differ)")
    df.add_argument("a")
    df.add_argument("b")
    args = p.parse_args(argv)
    try:
        if args.cmd == "steps":
            with open(args.log, errors="replace") as f:
                for i, s in enumerate(steps(f).values()):
                    print(f"packet {i + 1}:")
                    print("\n".join(f"  {x}" for x in s))
            return 0
        with open(args.a, errors="replace") as fa, open(args.b, errors="replace") as fb:
            d = diff_steps(list(fa), list(fb), args.a, args.b)
    except OSError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print("\n".join(d) if d else "same steps")
    return 1 if d else 0


if __name__ == "__main__":
    sys.exit(main())
