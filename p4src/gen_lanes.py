#!/usr/bin/env python3
"""Generate the per-value lanes of the P4 sources from one lane count per technique.

P4_16 has no loops over registers or header fields, so every value a packet carries is
one register array and one header field, spelled out once per value ("lane") in each
place that touches it. This script owns those runs; everything else in the .p4 files is
hand-written, and edited in the .p4 files themselves.

How: the checked-in .p4 files are their own templates, with no markers (a new comment
line would shift the line numbers p4c records in p4src/build/*.json). ``LANE_RUNS``
lists every run as its per-lane line(s), with ``{i}`` for the zero-padded lane number;
the generator finds the run that starts at lane 0 in the file and replaces it, whatever
its current length, with lanes 0..N-1. ``COUNT_LINES`` are the ``#define``s that state
N to P4. With the counts below the output is byte-identical to the checked-in files, so
the committed p4c outputs stay valid; tests/test_p4_lanes.py checks that, and that the
counts equal hosts/packets.py's (this file imports nothing from the project).

To change the number of values per packet: edit INA_VALUES (or TOKEN_VALUES) here and
in hosts/packets.py, then run ``make p4`` (regenerates, then recompiles with p4c).
``python3 p4src/gen_lanes.py --check`` only reports files that differ.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

#: Values per INA packet (technique 1): hosts/packets.py INA_VALUES.
INA_VALUES = 64
#: Values per token GRAD/READ frame (technique 5): hosts/packets.py TOKEN_VALUES.
TOKEN_VALUES = 128

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class LaneRun:
    """A run of lanes in one file: ``lines`` repeated for each lane, ``{i}`` the lane."""

    path: str  # relative to the repository root
    count: str  # "INA_VALUES" or "TOKEN_VALUES"
    lines: tuple[str, ...]


@dataclass(frozen=True)
class CountLine:
    """A line stating a lane count to P4; ``{n}`` is the count."""

    path: str
    count: str
    line: str


_AGG = "p4src/include/aggregator.p4"
_TOK = "p4src/include/token_accumulator.p4"

LANE_RUNS: tuple[LaneRun, ...] = (
    # INA values header (technique 1)
    LaneRun("p4src/include/headers.p4", "INA_VALUES", ("    bit<32> v{i};",)),
    # Aggregator registers; add_values, read_values, zero_values (clear_aggregator, take_over)
    LaneRun(_AGG, "INA_VALUES", ("    register<bit<32>>(NUM_AGGREGATORS) agg_value_{i};",)),
    LaneRun(_AGG, "INA_VALUES", (
        "        agg_value_{i}.read(v, meta.ina.index);",
        "        hdr.ina_values.v{i} = hdr.ina_values.v{i} + v;",
        "        agg_value_{i}.write(meta.ina.index, hdr.ina_values.v{i});",
    )),
    LaneRun(_AGG, "INA_VALUES", ("        agg_value_{i}.read(hdr.ina_values.v{i}, meta.ina.index);",)),
    LaneRun(_AGG, "INA_VALUES", ("        agg_value_{i}.write(meta.ina.index, 0);",)),
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
    CountLine("p4src/include/config.p4", "INA_VALUES", "#define INA_VALUES {n}"),
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


def render_run(run: LaneRun, n: int) -> list[str]:
    """The lines of ``run`` for lanes 0..n-1 (no line endings)."""
    w = lane_width(n)
    return [line.format(i=f"{k:0{w}d}") for k in range(n) for line in run.lines]


def _pattern(line: str, placeholder: str) -> re.Pattern[str]:
    head, *rest = line.split(placeholder)
    return re.compile(re.escape(head) + "".join(r"(\d+)" + re.escape(p) for p in rest))


def _rewrite_run(lines: list[str], run: LaneRun, n: int) -> list[str]:
    k = len(run.lines)
    pats = [_pattern(t, "{i}") for t in run.lines]

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
    end, lane = start, 0
    while lines[end:end + k] == [t.format(i=f"{lane:0{w}d}") for t in run.lines]:
        end, lane = end + k, lane + 1
    for p in range(end, min(end + k, len(lines))):
        if any(pat.fullmatch(lines[p]) for pat in pats):
            raise LaneError(f"{run.path}:{p + 1}: lane {lane} of {run.lines[0]!r} is not "
                            "the generated text (edited by hand?)")
    return lines[:start] + render_run(run, n) + lines[end:]


def _rewrite_count(lines: list[str], cl: CountLine, n: int) -> list[str]:
    pat = _pattern(cl.line, "{n}")
    hits = [p for p, line in enumerate(lines) if pat.fullmatch(line)]
    if len(hits) != 1:
        raise LaneError(f"{cl.path}: {len(hits)} lines match {cl.line!r}")
    return lines[:hits[0]] + [cl.line.format(n=n)] + lines[hits[0] + 1:]


def regenerate(path: str, text: str, counts: dict[str, int]) -> str:
    """``text`` (the file at ``path``) with its lanes and count lines for ``counts``."""
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


def generate(src: Path = ROOT, out: Path | None = None, ina_values: int = INA_VALUES,
             token_values: int = TOKEN_VALUES, write: bool = True) -> dict[str, bool]:
    """Regenerate every file of ``GENERATED_FILES`` from ``src`` into ``out`` (default: in place).

    Returns ``{path: changed}``, ``changed`` meaning the output differs from the source.
    With ``write`` a file is written where it changed or where ``out`` is another tree.
    """
    if ina_values < 1 or token_values < 1:
        raise ValueError("lane counts must be positive")
    counts = {"INA_VALUES": ina_values, "TOKEN_VALUES": token_values}
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


def main(argv: list[str] | None = None) -> int:
    """Command line: regenerate in place, into ``--out``, or only ``--check``."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--out", type=Path, help="write into this tree instead of in place")
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 if a checked-in file is not the generated one")
    ap.add_argument("--ina-values", type=int, default=INA_VALUES)
    ap.add_argument("--token-values", type=int, default=TOKEN_VALUES)
    args = ap.parse_args(argv)
    try:
        changed = generate(ROOT, args.out, args.ina_values, args.token_values,
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
