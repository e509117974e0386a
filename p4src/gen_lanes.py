#!/usr/bin/env python3
"""Generate the per-value lanes of the P4 sources from the lane counts of each technique.

P4_16 has no loops over registers or header fields, so every value a packet carries is
one register array and one header field, spelled out once per value ("lane") in each
place that touches it. This script owns those runs; everything else in the .p4 files is
hand-written, and edited in the .p4 files themselves.

How: the checked-in .p4 files are their own templates, with no markers (a new comment
line would shift the line numbers p4c records in p4src/build/*.json). ``LANE_RUNS``
lists every run as its per-lane line(s), with ``{i}`` for the zero-padded lane number;
the generator finds the run that starts at lane 0 in the file and replaces it, whatever
its current length, with the lanes of the counts below. ``COUNT_LINES`` are the lines
that state the counts to P4. With the counts below the output is byte-identical to the
checked-in files, so the committed p4c outputs stay valid; tests/test_p4_lanes.py checks
that, and tests/test_wire_constants.py that the counts equal wire/ina.py's and
wire/token.py's (this file runs under plain python3 and imports nothing from the project).

INA (technique 1) has several packet sizes, ``INA_VALUE_SIZES`` (docs/ina.md, "Values
per packet"): its runs hold the lanes of the largest size, those beyond the smallest in
preprocessor blocks, one per size (``#if INA_VALUES > 64`` ... ``#endif``), so one
source compiles to each size with ``-DINA_VALUES=N`` (``make p4``: ``p4src/build/ina.json``
for the smallest, the default of ``config.p4``, and ``ina_v<N>.json`` for the others).
INA lanes are numbered with at least two digits (v00..v99, v100..v255), so the smallest
size keeps its names whatever the largest is. The token NIC (technique 5) has one size,
``TOKEN_VALUES``, its lanes numbered with as many digits as the largest needs.

To change the sizes: edit INA_VALUE_SIZES (or TOKEN_VALUES) here and in wire/ina.py (wire/token.py),
then run ``make p4`` (regenerates, then recompiles with p4c). ``python3
p4src/gen_lanes.py --check`` only reports files that differ; ``--variant-sizes`` prints
the INA sizes ``make p4`` compiles besides the default.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

#: Values per INA packet (technique 1), smallest first: the first is the default
#: (p4src/build/ina.json); wire/ina.py INA_VALUE_SIZES.
INA_VALUE_SIZES: tuple[int, ...] = (64, 128, 256)
#: The default values per INA packet: wire/ina.py INA_VALUES.
INA_VALUES = INA_VALUE_SIZES[0]
#: Values per token GRAD/READ frame (technique 5): wire/token.py TOKEN_VALUES.
TOKEN_VALUES = 128

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class LaneRun:
    """A run of lanes in one file: ``lines`` repeated for each lane, ``{i}`` the lane.

    ``guard``: the macro of a run with several sizes (its lanes beyond the smallest size
    in ``#if GUARD > N`` blocks, lane numbers of at least two digits); None: one size,
    every lane number as wide as the largest."""

    path: str  # relative to the repository root
    count: str  # "INA_VALUES" or "TOKEN_VALUES"
    lines: tuple[str, ...]
    guard: str | None = None


@dataclass(frozen=True)
class CountLine:
    """A line stating a lane count to P4: ``{n}`` is the (default) count; a line with
    ``{sizes}`` instead lists the sizes as ``COUNT != a && COUNT != b ...``."""

    path: str
    count: str
    line: str


_AGG = "p4src/include/aggregator.p4"
_TOK = "p4src/include/token_accumulator.p4"
_INA = "INA_VALUES"

LANE_RUNS: tuple[LaneRun, ...] = (
    # INA values header (technique 1)
    LaneRun("p4src/include/headers.p4", _INA, ("    bit<32> v{i};",), _INA),
    # Aggregator registers; add_values, read_values, zero_values (clear_aggregator, take_over)
    LaneRun(_AGG, _INA, ("    register<bit<32>>(NUM_AGGREGATORS) agg_value_{i};",), _INA),
    LaneRun(_AGG, _INA, (
        "        agg_value_{i}.read(v, meta.ina.index);",
        "        hdr.ina_values.v{i} = hdr.ina_values.v{i} + v;",
        "        agg_value_{i}.write(meta.ina.index, hdr.ina_values.v{i});",
    ), _INA),
    LaneRun(_AGG, _INA, ("        agg_value_{i}.read(hdr.ina_values.v{i}, meta.ina.index);",), _INA),
    LaneRun(_AGG, _INA, ("        agg_value_{i}.write(meta.ina.index, 0);",), _INA),
    # Token values header (technique 5)
    LaneRun("p4src/include/token_headers.p4", "TOKEN_VALUES", ("    bit<32> v{i};",)),
    # NIC accumulator registers; start_slot, add_to_slot, read_slot, empty_reply
    LaneRun(_TOK, "TOKEN_VALUES", ("    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v{i};",)),
    LaneRun(_TOK, "TOKEN_VALUES", ("        acc_v{i}.write(meta.tk.slot, hdr.values.v{i});",)),
    LaneRun(_TOK, "TOKEN_VALUES", (
        "        acc_v{i}.read(v, meta.tk.slot);",
        "        acc_v{i}.write(meta.tk.slot, v + hdr.values.v{i});",
    )),
    LaneRun(_TOK, "TOKEN_VALUES", ("        acc_v{i}.read(hdr.values.v{i}, meta.tk.slot);",)),
    LaneRun(_TOK, "TOKEN_VALUES", ("        hdr.values.v{i} = 0;",)),
)

COUNT_LINES: tuple[CountLine, ...] = (
    CountLine("p4src/include/config.p4", _INA, "#define INA_VALUES {n}"),
    CountLine("p4src/include/config.p4", _INA, "#if {sizes}"),
    CountLine("p4src/include/token_headers.p4", "TOKEN_VALUES", "#define TOKEN_VALUES      {n}"),
)

#: Every file the generator writes, relative to the repository root.
GENERATED_FILES: tuple[str, ...] = tuple(
    dict.fromkeys([r.path for r in LANE_RUNS] + [c.path for c in COUNT_LINES]))


class LaneError(ValueError):
    """A file's lanes cannot be located: a run is missing, ambiguous or hand-edited."""


def lane_width(n: int) -> int:
    """Digits of a lane number for ``n`` lanes: at least 2 (v00..v63, v000..v127)."""
    return max(2, len(str(n - 1)))


def check_sizes(sizes: tuple[int, ...]) -> tuple[int, ...]:
    """``sizes`` if they are positive and strictly increasing, else ``ValueError``."""
    if not sizes or any(n < 1 for n in sizes) or list(sizes) != sorted(set(sizes)):
        raise ValueError(f"lane counts must be positive and increasing, got {sizes}")
    return tuple(sizes)


def _lane_name(run: LaneRun, k: int, largest: int) -> str:
    return f"{k:02d}" if run.guard else f"{k:0{lane_width(largest)}d}"


def _lanes(run: LaneRun, lo: int, hi: int, largest: int) -> list[str]:
    return [line.format(i=_lane_name(run, k, largest)) for k in range(lo, hi)
            for line in run.lines]


def render_run(run: LaneRun, sizes: int | tuple[int, ...]) -> list[str]:
    """The lines of ``run`` (no line endings) for ``sizes``: lanes 0..n-1 for one size
    ``n``; for a guarded run, lanes 0..sizes[0]-1, then each further size's lanes in a
    ``#if GUARD > <previous size>`` block."""
    sizes = check_sizes((sizes,) if isinstance(sizes, int) else tuple(sizes))
    if run.guard is None and len(sizes) != 1:
        raise ValueError(f"{run.path}: a run without a guard has one size, got {sizes}")
    out = _lanes(run, 0, sizes[0], sizes[-1])
    for lo, hi in zip(sizes, sizes[1:], strict=False):
        out += [f"#if {run.guard} > {lo}", *_lanes(run, lo, hi, sizes[-1]), "#endif"]
    return out


def _pattern(line: str, placeholder: str) -> re.Pattern[str]:
    head, *rest = line.split(placeholder)
    return re.compile(re.escape(head) + "".join(r"(\d+)" + re.escape(p) for p in rest))


def _rewrite_run(lines: list[str], run: LaneRun, sizes: tuple[int, ...]) -> list[str]:
    k = len(run.lines)
    pats = [_pattern(t, "{i}") for t in run.lines]
    guard_re = re.compile(rf"#if {re.escape(run.guard)} > \d+") if run.guard else None

    def lane_at(p: int) -> str | None:
        """The lane number text of a group of lines at p matching the run, else None."""
        if p + k > len(lines):
            return None
        found = set()
        for pat, line in zip(pats, lines[p:p + k], strict=True):
            m = pat.fullmatch(line)
            if m is None:
                return None
            found.update(m.groups())
        return found.pop() if len(found) == 1 else None

    starts = [p for p in range(len(lines)) if (t := lane_at(p)) is not None and int(t) == 0]
    if len(starts) != 1:
        raise LaneError(f"{run.path}: {len(starts)} runs start with lane 0 of {run.lines[0]!r}")
    start = starts[0]
    w = len(lane_at(start) or "")
    end, lane, depth = start, 0, 0

    def is_lane(p: int, n: int) -> bool:
        # the lane in this file's width, or in the guarded runs' (at least two digits)
        return any(lines[p:p + k] == [t.format(i=name) for t in run.lines]
                   for name in (f"{n:0{w}d}", f"{n:02d}"))

    while True:
        if is_lane(end, lane):
            end, lane = end + k, lane + 1
        elif guard_re is not None and end < len(lines) and guard_re.fullmatch(lines[end]):
            end, depth = end + 1, depth + 1
        elif depth and end < len(lines) and lines[end] == "#endif":
            end, depth = end + 1, depth - 1
        else:
            break
    if depth:
        raise LaneError(f"{run.path}:{end + 1}: an #if of lane {lane} of {run.lines[0]!r} "
                        "has no #endif (edited by hand?)")
    for p in range(end, min(end + k, len(lines))):
        if any(pat.fullmatch(lines[p]) for pat in pats):
            raise LaneError(f"{run.path}:{p + 1}: lane {lane} of {run.lines[0]!r} is not "
                            "the generated text (edited by hand?)")
    return lines[:start] + render_run(run, sizes) + lines[end:]


def _count_text(cl: CountLine, sizes: tuple[int, ...]) -> str:
    if "{sizes}" in cl.line:
        return cl.line.format(sizes=" && ".join(f"{cl.count} != {n}" for n in sizes))
    return cl.line.format(n=sizes[0])


def _rewrite_count(lines: list[str], cl: CountLine, sizes: tuple[int, ...]) -> list[str]:
    if "{sizes}" in cl.line:
        head = cl.line.split("{sizes}")[0]
        one = rf"{re.escape(cl.count)} != \d+"
        pat = re.compile(re.escape(head) + rf"{one}(?: && {one})*")
    else:
        pat = _pattern(cl.line, "{n}")
    hits = [p for p, line in enumerate(lines) if pat.fullmatch(line)]
    if len(hits) != 1:
        raise LaneError(f"{cl.path}: {len(hits)} lines match {cl.line!r}")
    return lines[:hits[0]] + [_count_text(cl, sizes)] + lines[hits[0] + 1:]


def regenerate(path: str, text: str, counts: dict[str, tuple[int, ...]]) -> str:
    """``text`` (the file at ``path``) with its lanes and count lines for ``counts``
    (count name -> its sizes, smallest first; one size for an unguarded count)."""
    if text.endswith("\n"):
        body, tail = text[:-1], "\n"
    else:
        body, tail = text, ""
    lines = body.split("\n")
    for cl in COUNT_LINES:
        if cl.path == path:
            lines = _rewrite_count(lines, cl, counts[cl.count])
    for run in LANE_RUNS:
        if run.path == path:
            lines = _rewrite_run(lines, run, counts[run.count])
    return "\n".join(lines) + tail


def generate(src: Path = ROOT, out: Path | None = None,
             ina_sizes: tuple[int, ...] = INA_VALUE_SIZES,
             token_values: int = TOKEN_VALUES, write: bool = True) -> dict[str, bool]:
    """Regenerate every file of ``GENERATED_FILES`` from ``src`` into ``out`` (default: in place).

    ``ina_sizes``: the INA packet sizes, smallest (the default) first.
    Returns ``{path: changed}``, ``changed`` meaning the output differs from the source.
    With ``write`` a file is written where it changed or where ``out`` is another tree.
    """
    counts = {"INA_VALUES": check_sizes(tuple(ina_sizes)),
              "TOKEN_VALUES": check_sizes((token_values,))}
    out = src if out is None else out
    changed = {}
    for rel in GENERATED_FILES:
        text = (src / rel).read_bytes().decode()
        new = regenerate(rel, text, counts)
        changed[rel] = new != text
        if write and (changed[rel] or out.resolve() != src.resolve()):
            dst = out / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(new.encode())
    return changed


def _sizes_arg(text: str) -> tuple[int, ...]:
    try:
        return check_sizes(tuple(int(x) for x in text.split(",")))
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def main(argv: list[str] | None = None) -> int:
    """Command line: regenerate in place, into ``--out``, or only ``--check``."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--out", type=Path, help="write into this tree instead of in place")
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 if a checked-in file is not the generated one")
    ap.add_argument("--ina-sizes", type=_sizes_arg, default=INA_VALUE_SIZES,
                    help="INA values per packet, smallest (the default) first "
                         f"(default {','.join(map(str, INA_VALUE_SIZES))})")
    ap.add_argument("--token-values", type=int, default=TOKEN_VALUES)
    ap.add_argument("--variant-sizes", action="store_true",
                    help="print the INA sizes compiled besides the default (make p4) and exit")
    args = ap.parse_args(argv)
    if args.variant_sizes:
        print(" ".join(map(str, args.ina_sizes[1:])))
        return 0
    try:
        changed = generate(ROOT, args.out, args.ina_sizes, args.token_values,
                           write=not args.check)
    except LaneError as e:
        print(f"gen_lanes: {e}", file=sys.stderr)
        return 1
    if args.check:
        for rel in (rel for rel, c in changed.items() if c):
            print(f"{rel}: not the generated lanes (run p4src/gen_lanes.py)", file=sys.stderr)
        return 1 if any(changed.values()) else 0
    for rel, c in changed.items():
        print(f"gen_lanes: {rel} {'regenerated' if c else 'unchanged'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
