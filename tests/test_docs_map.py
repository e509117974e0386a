"""The "Step → code" tables at the end of the technique docs name real code.

Each technique's doc ends with a section ``## Step → code``: a Markdown table with
one row per step of the technique's method, columns ``step | code | notes``. The code
cell lists ``file:symbol`` references (backticked, separated by commas or ``<br>``):

* ``path/to/module.py:name`` or ``path/to/module.py:Class.method``: the module is
  imported (path -> dotted name) and the symbol resolved with ``getattr``;
* ``p4src/...p4:Control.table`` (or ``:Control``, ``:Control.action``, ...): the file
  must exist and every dotted part must occur as a word in it.

A step that is not implemented has ``—`` as its code cell and says "not implemented"
in its notes. Every table must have at least ``MIN_ROWS`` rows.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEADING = "## Step → code"
MIN_ROWS = 8
# The five technique docs (placement.md maps the placement half of ina).
DOCS = ("ina.md", "placement.md", "ndn.md", "differentiated.md", "bcube.md", "token.md")
NONE = "—"


@dataclass(frozen=True)
class Row:
    doc: str
    line: int
    step: str
    refs: tuple[str, ...]
    notes: str

    def where(self) -> str:
        return f"docs/{self.doc}:{self.line} (step {self.step!r})"


def _cells(line: str) -> list[str]:
    """The cells of a Markdown table row (``\\|`` is a literal bar inside a cell)."""
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", body)]


def parse_map(doc: str, text: str) -> list[Row]:
    """The rows of ``doc``'s step table; raises AssertionError when the section is
    missing, is not the doc's last section, or holds a malformed table."""
    lines = text.splitlines()
    starts = [i for i, ln in enumerate(lines) if ln.strip() == HEADING]
    assert len(starts) == 1, f"docs/{doc}: expected one {HEADING!r} section, found {len(starts)}"
    start = starts[0]
    later = [ln for ln in lines[start + 1:] if ln.startswith("#")]
    assert not later, f"docs/{doc}: {HEADING!r} must be the last section, but {later[0]!r} follows it"
    table = [i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("|")]
    assert table, f"docs/{doc}: no table under {HEADING!r}"
    assert table == list(range(table[0], table[-1] + 1)), f"docs/{doc}: the table is interrupted"
    header, sep, *body = table
    assert [c.lower() for c in _cells(lines[header])] == ["step", "code", "notes"], (
        f"docs/{doc}:{header + 1}: table header must be | step | code | notes |")
    assert all(set(c) <= set(":-") and c for c in _cells(lines[sep])), (
        f"docs/{doc}:{sep + 1}: expected the header separator row")
    rows = []
    for i in body:
        cells = _cells(lines[i])
        assert len(cells) == 3, f"docs/{doc}:{i + 1}: expected 3 cells, got {len(cells)}: {lines[i]!r}"
        step, code, notes = cells
        assert step, f"docs/{doc}:{i + 1}: empty step cell"
        refs = tuple(r.strip().strip("`").strip() for r in re.split(r",|<br\s*/?>", code))
        rows.append(Row(doc, i + 1, step, tuple(r for r in refs if r), notes))
    return rows


def _module_name(path: str) -> str:
    parts = list(Path(path).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def check_ref(ref: str) -> str | None:
    """None when ``ref`` (``file:symbol``) names existing code, else why not."""
    path, sep, symbol = ref.partition(":")
    if not sep or not path or not symbol:
        return f"{ref!r} is not file:symbol"
    if not re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*", symbol):
        return f"{ref!r}: {symbol!r} is not a (dotted) identifier"
    file = ROOT / path
    if not file.is_file():
        return f"{ref!r}: no file {path}"
    if path.endswith(".py"):
        name = _module_name(path)
        try:
            obj = importlib.import_module(name)
        except Exception as e:  # noqa: BLE001 (reported as the row's failure)
            return f"{ref!r}: importing {name} failed: {type(e).__name__}: {e}"
        for i, part in enumerate(symbol.split(".")):
            try:
                obj = getattr(obj, part)
            except AttributeError:
                where = ".".join([name, *symbol.split(".")[:i]])
                return f"{ref!r}: {where} has no attribute {part!r}"
        return None
    if path.endswith(".p4"):
        text = file.read_text()
        for part in symbol.split("."):
            if not re.search(rf"\b{re.escape(part)}\b", text):
                return f"{ref!r}: {part!r} does not occur as a word in {path}"
        return None
    return f"{ref!r}: only .py and .p4 files can be checked"


def row_problems(row: Row) -> list[str]:
    if row.refs == (NONE,):
        if "not implemented" not in row.notes.lower():
            return [f"{row.where()}: code cell {NONE!r} needs 'not implemented' in its notes"]
        return []
    if not row.refs or NONE in row.refs:
        return [f"{row.where()}: no file:symbol in the code cell"]
    return [f"{row.where()}: {why}" for ref in row.refs if (why := check_ref(ref)) is not None]


@pytest.mark.parametrize("doc", DOCS)
def test_step_table_resolves(doc: str) -> None:
    rows = parse_map(doc, (ROOT / "docs" / doc).read_text())
    assert len(rows) >= MIN_ROWS, f"docs/{doc}: {len(rows)} rows under {HEADING!r}, want >= {MIN_ROWS}"
    problems = [p for row in rows for p in row_problems(row)]
    assert not problems, "\n".join(problems)


def test_checker_rejects_bad_references() -> None:
    """The checks can fail: a made-up symbol, file, or P4 name is reported."""
    assert check_ref("hosts/differentiated/blocks.py:Contribution.update") is None
    assert check_ref("p4src/include/ndn_persistent_pit.p4:PersistentPit.persistent_pit") is None
    assert "no attribute" in (check_ref("hosts/differentiated/blocks.py:Contribution.nope") or "")
    assert "no file" in (check_ref("hosts/nope.py:x") or "")
    assert "as a word" in (check_ref("p4src/include/ina_aggregator.p4:Aggregator.no_such_table") or "")
    assert "as a word" in (check_ref("p4src/include/ina_aggregator.p4:Aggregator.add_value") or "")
    assert "not file:symbol" in (check_ref("hosts/training.py") or "")
    text = "# t\n\n## Step → code\n\n| step | code | notes |\n|---|---|---|\n" \
           "| S1 | `hosts/training.py:flatten`, `hosts/training.py:gone` | |\n"
    (row,) = parse_map("x.md", text)
    assert [p for p in row_problems(row) if "gone" in p] and "docs/x.md:7" in row_problems(row)[0]
    with pytest.raises(AssertionError, match="last section"):
        parse_map("x.md", text + "\n## Later\n")
