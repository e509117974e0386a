"""Tables that stay readable: fitted to the terminal, kept whole in the results directory.

``gradctl``, the experiments and the benchmarks print rich tables through
:class:`TableConsole`. A table is printed as it is when its natural width fits the
console; otherwise it is folded into key/value rows (``column: value``, one block per
row), which stay readable at any width, instead of rich squeezing every column into a
narrow, wrapped strip. The console's width is the terminal's, ``$COLUMNS`` when set, and
80 when the output is not a terminal (a pipe or a log file). Prose is soft-wrapped: a
long line stays one line in a log (the terminal wraps it on screen).

With a results directory (``TableConsole(results_dir=...)`` or ``save_to(dir)`` once the
run has one) every table printed is also written there in full: appended at its natural
width to ``tables.txt`` and, as data, to ``tables.json`` (title, columns, rows as plain
text) and ``<title>.csv``.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import IO, Any

from rich.console import Console, RenderableType
from rich.errors import MarkupError
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

DEFAULT_WIDTH = 80  # not a terminal: a pipe or a log file
_WIDE = 10_000  # "unlimited" width, to measure a table's natural width


def terminal_width(file: IO[str] | None = None) -> int:
    """The width to print for: ``$COLUMNS`` when set, else the terminal's when ``file``
    (default stdout) is one, else 80."""
    env = os.environ.get("COLUMNS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    f = file or sys.stdout
    try:
        if f.isatty():
            return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns or DEFAULT_WIDTH
    except (AttributeError, ValueError, OSError):
        pass
    return DEFAULT_WIDTH


def cell_text(cell: RenderableType) -> str:
    """A table cell as plain text (markup and styles dropped)."""
    if isinstance(cell, Text):
        return cell.plain
    if isinstance(cell, str):
        try:
            return Text.from_markup(cell).plain
        except MarkupError:
            return cell
    buf = io.StringIO()
    Console(file=buf, width=_WIDE, color_system=None).print(cell, end="")
    return buf.getvalue().rstrip()


def _styled(cell: RenderableType) -> RenderableType:
    if isinstance(cell, str):
        try:
            return Text.from_markup(cell)
        except MarkupError:
            return Text(cell)
    return cell


def table_rows(table: Table) -> tuple[list[str], list[list[str]]]:
    """``(column headers, rows)`` of ``table`` as plain text."""
    headers = [cell_text(c.header) for c in table.columns]
    columns = [[cell_text(v) for v in c.cells] for c in table.columns]
    rows = [list(r) for r in zip(*columns, strict=True)] if columns else []
    return headers, rows


def natural_width(table: Table) -> int:
    """The width ``table`` needs to print with no cell wrapped."""
    c = Console(width=_WIDE, file=io.StringIO())
    expand, table.expand = table.expand, False  # an expanding table would measure _WIDE
    try:
        return Measurement.get(c, c.options, table).maximum
    finally:
        table.expand = expand


def folded(table: Table, width: int = DEFAULT_WIDTH) -> RenderableType:
    """``table`` as key/value rows for ``width`` columns: a block per row, one
    ``column: value`` line per cell, a long value wrapping under itself."""
    measure = Console(width=_WIDE, file=io.StringIO())

    def block(text: RenderableType) -> None:  # a title or caption, wrapped at width
        styled = _styled(text)
        styled = styled if isinstance(styled, Text) else Text(cell_text(styled))
        for line in styled.wrap(measure, width, overflow="fold"):
            out.append_text(line)
            out.append("\n")

    out = Text()
    if table.title:
        block(table.title)
    headers = [cell_text(c.header) or f"column {i + 1}" for i, c in enumerate(table.columns)]
    keys = [f"{h}:" if i == 0 else f"  {h}:" for i, h in enumerate(headers)]
    cells = [list(c.cells) for c in table.columns]
    kw = max((len(k) for k in keys), default=0) + 1
    for r in range(table.row_count):
        if r:
            out.append("\n")
        for i, key in enumerate(keys):
            value = _styled(cells[i][r]) if r < len(cells[i]) else Text("")
            value = value if isinstance(value, Text) else Text(cell_text(value))
            indent = kw if width - kw >= 20 else 4  # narrow: values under their keys
            lines = value.wrap(measure, max(width - indent, 1), overflow="fold") if value.plain else [Text("")]
            if indent == kw:
                out.append(key.ljust(kw), style="bold")
            else:
                out.append(key, style="bold")
                out.append("\n" + " " * indent)
            for j, line in enumerate(lines):
                if j:
                    out.append("\n" + " " * indent)
                out.append_text(line)
            out.append("\n")
    if table.caption:
        block(table.caption)
    out.rstrip()
    out.append("\n")  # a blank line before what follows, as after a table
    return out


def fit(table: Table, width: int) -> RenderableType:
    """``table`` itself when it fits ``width`` columns, else :func:`folded`."""
    return table if natural_width(table) <= width else folded(table, width)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()[:60] or "table"


class TableConsole(Console):
    """A rich :class:`Console` for human-readable output (see the module doc).

    ``file``/``stderr`` as rich's; ``width`` only to force one (tests); ``results_dir``
    where the tables go in full (also settable later with :meth:`save_to`)."""

    def __init__(self, file: IO[str] | None = None, *, stderr: bool = False,
                 width: int | None = None, results_dir: str | Path | None = None,
                 **kwargs: Any) -> None:
        out = file or (sys.stderr if stderr else sys.stdout)
        kwargs.setdefault("highlight", False)
        kwargs.setdefault("soft_wrap", True)  # prose is never hard-wrapped in a log
        super().__init__(file=file, stderr=stderr, width=width or terminal_width(out), **kwargs)
        self.results_dir = Path(results_dir) if results_dir else None

    def save_to(self, results_dir: str | Path | None) -> None:
        """Write every table printed from now on to ``results_dir`` too (None: stop)."""
        self.results_dir = Path(results_dir) if results_dir else None

    def print(self, *objects: Any, **kwargs: Any) -> None:  # noqa: D102 (rich's)
        out = []
        for o in objects:
            if isinstance(o, Table):
                self.save_table(o)
                o = fit(o, self.width)
            out.append(o)
        super().print(*out, **kwargs)

    def save_table(self, table: Table) -> None:
        """Write ``table`` in full to the results directory, if there is one."""
        if self.results_dir is None:
            return
        d = self.results_dir
        d.mkdir(parents=True, exist_ok=True)
        headers, rows = table_rows(table)
        title = cell_text(table.title) if table.title else ""
        buf = io.StringIO()
        Console(file=buf, width=natural_width(table), color_system=None,
                soft_wrap=False).print(table)
        with open(d / "tables.txt", "a", encoding="utf-8") as f:
            f.write(buf.getvalue() + "\n")
        # several consoles (an experiment's, its runner's) may write one directory
        try:
            saved = json.loads((d / "tables.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            saved = []
        saved = saved if isinstance(saved, list) else []
        saved.append({"title": title, "columns": headers, "rows": rows})
        tmp = d / "tables.json.tmp"
        tmp.write_text(json.dumps(saved, indent=1), encoding="utf-8")
        os.replace(tmp, d / "tables.json")
        stem = _slug(title) if title else "table"
        name, n = stem, 1
        while (d / f"{name}.csv").exists():
            n += 1
            name = f"{stem}-{n}"
        with open(d / f"{name}.csv", "w", encoding="utf-8", newline="") as f:
            w = csv.writer(f)
            w.writerow(headers)
            w.writerows(rows)

