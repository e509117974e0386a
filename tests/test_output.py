"""Readable tables (controller/output.py): a table wider than the terminal folds into
key/value rows that fit it, with every value shown; the results directory gets the
whole table (text at its natural width, JSON, CSV)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from rich.table import Table

from controller.output import TableConsole, terminal_width


def _wide() -> Table:
    t = Table(title="a wide table " + "with a title longer than the terminal " * 3,
              caption="and a caption as long " * 5)
    cols = [f"column {c}" for c in "abcdefghij"]
    for c in cols:
        t.add_column(c)
    for r in range(3):
        t.add_row(*(f"r{r}-value-{c}" for c in "abcdefghij"))
    t.add_row(*(["[green]yes[/green]"] + [f"r3-{i}" for i in range(9)]))
    return t


def test_wide_table_folds_to_80_columns_and_is_saved_whole(tmp_path: Path) -> None:
    buf = io.StringIO()
    con = TableConsole(buf, results_dir=tmp_path)
    assert con.width == 80  # not a terminal
    con.print(_wide())
    con.print("a line of prose that is longer than eighty columns " * 3)  # never hard-wrapped
    out = buf.getvalue()
    lines = out.splitlines()
    table_lines = lines[:-1]
    assert max(map(len, table_lines)) <= 80, max(table_lines, key=len)
    for r in range(3):
        for c in "abcdefghij":
            assert f"column {c}:" in out and f"r{r}-value-{c}" in out
    assert "yes" in out and "[green]" not in out
    assert len(lines[-1]) > 80

    full = (tmp_path / "tables.txt").read_text().splitlines()
    header = next(ln for ln in full if "column a" in ln)
    assert all(f"column {c}" in header for c in "abcdefghij")  # one line: every column
    assert any(all(f"r0-value-{c}" in ln for c in "abcdefghij") for ln in full)
    (saved,) = json.loads((tmp_path / "tables.json").read_text())
    assert saved["title"].startswith("a wide table") and len(saved["columns"]) == 10
    assert saved["rows"][3][0] == "yes"
    (path,) = tmp_path.glob("a-wide-table-*.csv")
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0][9] == "column j" and rows[1][9] == "r0-value-j" and len(rows) == 5


def test_narrow_table_prints_as_a_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    assert terminal_width(io.StringIO()) == 100
    t = Table()
    t.add_column("switch")
    t.add_column("entries", justify="right")
    t.add_row("s1", "12")
    buf = io.StringIO()
    TableConsole(buf).print(t)
    assert any("switch" in ln and "entries" in ln for ln in buf.getvalue().splitlines())
    monkeypatch.setenv("COLUMNS", "30")  # too narrow even for key/value: values go below
    buf = io.StringIO()
    TableConsole(buf).print(_wide())
    assert max(map(len, buf.getvalue().splitlines())) <= 30
    assert "r2-value-j" in buf.getvalue()
