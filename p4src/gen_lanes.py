#!/usr/bin/env python3
"""Generate the per-value lanes of the P4 sources from the lane counts of each technique.

P4_16 has no loops over registers or header fields, so every value a packet carries is
one register array and one header field, spelled out once per value ("lane") in each
place that touches it. This script writes those runs, each as a whole file of
``p4src/include/generated/`` that a hand-written file ``#include``s where the run belongs
(a header's field list, a control's declarations, an action's body: the C preprocessor
p4c runs first allows an ``#include`` anywhere). The hand-written files hold no lanes;
the generated ones hold nothing else, each starting with a "do not edit" comment.
``LANE_FILES`` lists every run as its per-lane line(s), ``{i}`` the lane number;
``COUNT_FILES`` state the counts to P4. tests/test_p4_lanes.py checks that the
checked-in files are this script's output, and tests/test_wire_constants.py that the
counts equal wire/ina.py's and wire/token.py's (this file runs under plain python3 and
imports nothing from the project).

In-network aggregation (ina) has several packet sizes, ``INA_VALUE_SIZES`` (docs/ina.md,
"Values per packet"): its runs hold the lanes of the largest size, those beyond the
smallest in preprocessor blocks, one per size (``#if INA_VALUES > 64`` ... ``#endif``),
so one source compiles to each size with ``-DINA_VALUES=N`` (``make p4``:
``p4src/build/ina.json`` for the smallest, the default, and ``ina_v<N>.json`` for the
others). INA lanes are numbered with at least two digits (v00..v99, v100..v255), so the
smallest size keeps its names whatever the largest is. The token NIC has one size,
``TOKEN_VALUES``, its lanes numbered with as many digits as the largest needs.

To change the sizes: edit INA_VALUE_SIZES (or TOKEN_VALUES) here and in wire/ina.py
(wire/token.py), then run ``make p4`` (regenerates, then recompiles with p4c). ``python3
p4src/gen_lanes.py --check`` only reports files that differ; ``--variant-sizes`` prints
the INA sizes ``make p4`` compiles besides the default.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

#: Values per INA packet, smallest first: the first is the default
#: (p4src/build/ina.json); wire/ina.py INA_VALUE_SIZES.
INA_VALUE_SIZES: tuple[int, ...] = (64, 128, 256)
#: The default values per INA packet: wire/ina.py INA_VALUES.
INA_VALUES = INA_VALUE_SIZES[0]
#: Values per token GRAD/READ frame: wire/token.py TOKEN_VALUES.
TOKEN_VALUES = 128

ROOT = Path(__file__).resolve().parent.parent
#: Where the generated files live, relative to the repository root.
GENERATED_DIR = "p4src/include/generated"
_INA = "INA_VALUES"
_TOKEN = "TOKEN_VALUES"


@dataclass(frozen=True)
class LaneFile:
    """One generated run: ``lines`` repeated for each lane, ``{i}`` the lane number.

    ``count``: "INA_VALUES" (several sizes: lanes beyond the smallest in ``#if
    INA_VALUES > N`` blocks, lane numbers of at least two digits) or "TOKEN_VALUES"
    (one size, every lane number as wide as the largest)."""

    name: str  # file name in GENERATED_DIR
    count: str
    what: str  # what the run is, for the file's opening comment
    lines: tuple[str, ...]

    @property
    def path(self) -> str:
        """The file, relative to the repository root."""
        return f"{GENERATED_DIR}/{self.name}"


LANE_FILES: tuple[LaneFile, ...] = (
    LaneFile("ina_lanes_header.p4", _INA, "the fields of header ina_values_t (headers.p4)",
             ("    bit<32> v{i};",)),
    LaneFile("ina_lanes_registers.p4", _INA, "Aggregator's value registers (ina_aggregator.p4)",
             ("    register<bit<32>>(NUM_AGGREGATORS) agg_value_{i};",)),
    LaneFile("ina_lanes_add.p4", _INA, "the lanes of Aggregator.add_values (ina_aggregator.p4)", (
        "        agg_value_{i}.read(v, meta.ina.index);",
        "        hdr.ina_values.v{i} = hdr.ina_values.v{i} + v;",
        "        agg_value_{i}.write(meta.ina.index, hdr.ina_values.v{i});",
    )),
    LaneFile("ina_lanes_read.p4", _INA, "the lanes of Aggregator.read_values (ina_aggregator.p4)",
             ("        agg_value_{i}.read(hdr.ina_values.v{i}, meta.ina.index);",)),
    LaneFile("ina_lanes_zero.p4", _INA, "the lanes of Aggregator.zero_values (ina_aggregator.p4)",
             ("        agg_value_{i}.write(meta.ina.index, 0);",)),
    LaneFile("token_lanes_header.p4", _TOKEN,
             "the fields of header token_values_t (token_headers.p4)",
             ("    bit<32> v{i};",)),
    LaneFile("token_lanes_registers.p4", _TOKEN,
             "TokenAccumulator's value registers (token_accumulator.p4)",
             ("    register<bit<32>>(TOKEN_ACC_SLOTS) acc_v{i};",)),
    LaneFile("token_lanes_start.p4", _TOKEN,
             "the lanes of TokenAccumulator.start_slot (token_accumulator.p4)",
             ("        acc_v{i}.write(meta.tk.slot, hdr.values.v{i});",)),
    LaneFile("token_lanes_add.p4", _TOKEN,
             "the lanes of TokenAccumulator.add_to_slot (token_accumulator.p4)", (
                 "        acc_v{i}.read(v, meta.tk.slot);",
                 "        acc_v{i}.write(meta.tk.slot, v + hdr.values.v{i});",
             )),
    LaneFile("token_lanes_read.p4", _TOKEN,
             "the lanes of TokenAccumulator.read_slot (token_accumulator.p4)",
             ("        acc_v{i}.read(hdr.values.v{i}, meta.tk.slot);",)),
    LaneFile("token_lanes_zero.p4", _TOKEN,
             "the lanes of TokenAccumulator.empty_reply (token_accumulator.p4)",
             ("        hdr.values.v{i} = 0;",)),
)

#: The files stating the counts to P4 (config.p4 and token_headers.p4 include them).
INA_COUNT_FILE = "ina_lanes_count.p4"
TOKEN_COUNT_FILE = "token_lanes_count.p4"

#: Every file the generator writes, relative to the repository root.
GENERATED_FILES: tuple[str, ...] = (
    f"{GENERATED_DIR}/{INA_COUNT_FILE}", f"{GENERATED_DIR}/{TOKEN_COUNT_FILE}",
    *(f.path for f in LANE_FILES))


def _opening(what: str) -> str:
    return f"/* generated by p4src/gen_lanes.py, do not edit.\n * {what[0].upper()}{what[1:]}. */"


def lane_width(n: int) -> int:
    """Digits of a lane number for ``n`` lanes: at least 2 (v00..v63, v000..v127)."""
    return max(2, len(str(n - 1)))


def check_sizes(sizes: tuple[int, ...]) -> tuple[int, ...]:
    """``sizes`` if they are positive and strictly increasing, else ``ValueError``."""
    if not sizes or any(n < 1 for n in sizes) or list(sizes) != sorted(set(sizes)):
        raise ValueError(f"lane counts must be positive and increasing, got {sizes}")
    return tuple(sizes)


def _lanes(lf: LaneFile, lo: int, hi: int, largest: int) -> list[str]:
    width = 2 if lf.count == _INA else lane_width(largest)
    return [line.format(i=f"{k:0{width}d}") for k in range(lo, hi) for line in lf.lines]


def render_run(lf: LaneFile, sizes: int | tuple[int, ...]) -> list[str]:
    """The lane lines of ``lf`` (no opening comment, no line endings) for ``sizes``:
    lanes 0..n-1 for one size ``n``; for INA, lanes 0..sizes[0]-1, then each further
    size's lanes in an ``#if INA_VALUES > <previous size>`` block."""
    sizes = check_sizes((sizes,) if isinstance(sizes, int) else tuple(sizes))
    if lf.count != _INA and len(sizes) != 1:
        raise ValueError(f"{lf.name}: {lf.count} has one size, got {sizes}")
    out = _lanes(lf, 0, sizes[0], sizes[-1])
    for lo, hi in zip(sizes, sizes[1:], strict=False):
        out += [f"#if {_INA} > {lo}", *_lanes(lf, lo, hi, sizes[-1]), "#endif"]
    return out


def render(ina_sizes: tuple[int, ...] = INA_VALUE_SIZES,
           token_values: int = TOKEN_VALUES) -> dict[str, str]:
    """``{path: text}`` of every generated file for these counts (paths as in
    ``GENERATED_FILES``)."""
    ina_sizes = check_sizes(tuple(ina_sizes))
    token = check_sizes((token_values,))
    sizes_test = " && ".join(f"{_INA} != {n}" for n in ina_sizes)
    texts = {
        f"{GENERATED_DIR}/{INA_COUNT_FILE}": [
            _opening("the INA values per packet, the default and every size "
                     "the lanes have (config.p4)"),
            f"#ifndef {_INA}", f"#define {_INA} {ina_sizes[0]}", "#endif",
            f"#if {sizes_test}",
            f'#error "{_INA}: not one of the generated sizes (p4src/gen_lanes.py)"',
            "#endif"],
        f"{GENERATED_DIR}/{TOKEN_COUNT_FILE}": [
            _opening("the values per token GRAD/READ frame (token_headers.p4)"),
            f"#define {_TOKEN} {token[0]}"],
    }
    for lf in LANE_FILES:
        texts[lf.path] = [_opening(lf.what),
                          *render_run(lf, ina_sizes if lf.count == _INA else token)]
    return {path: "\n".join(lines) + "\n" for path, lines in texts.items()}


def generate(out: Path = ROOT, ina_sizes: tuple[int, ...] = INA_VALUE_SIZES,
             token_values: int = TOKEN_VALUES, write: bool = True) -> dict[str, bool]:
    """Write every file of ``GENERATED_FILES`` into the tree ``out`` (default: this one).

    ``ina_sizes``: the INA packet sizes, smallest (the default) first.
    Returns ``{path: changed}``, ``changed`` meaning the file in ``out`` was missing or
    differed, or is a ``.p4`` file of the directory that no run writes; with ``write``
    such files are (re)written or removed, the others left alone.
    """
    changed = {}
    texts = render(ina_sizes, token_values)
    for stale in sorted((out / GENERATED_DIR).glob("*.p4")):
        rel = f"{GENERATED_DIR}/{stale.name}"
        if rel not in texts:  # a file no run writes any more
            changed[rel] = True
            if write:
                stale.unlink()
    for rel, text in texts.items():
        dst = out / rel
        new = text.encode()
        changed[rel] = not dst.is_file() or dst.read_bytes() != new
        if write and changed[rel]:
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(new)
    return changed


def _sizes_arg(text: str) -> tuple[int, ...]:
    try:
        return check_sizes(tuple(int(x) for x in text.split(",")))
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def main(argv: list[str] | None = None) -> int:
    """Command line: regenerate in place, into ``--out``, or only ``--check``."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--out", type=Path, default=ROOT,
                    help="write into this tree instead of this repository")
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
        changed = generate(args.out, args.ina_sizes, args.token_values, write=not args.check)
    except ValueError as e:
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
