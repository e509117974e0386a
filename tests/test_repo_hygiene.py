"""The tracked tree holds no merge leftovers: a conflict marker in a Makefile or a module
would break ``make`` or an import only where that file is used."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^(<{7} |>{7} |={7}$)", re.M)


def conflict_markers(paths: list[Path]) -> list[str]:
    """``path:line`` of every line that starts like a git conflict marker."""
    out = []
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary files (figures) cannot hold a text merge's markers
        for m in MARKER.finditer(text):
            name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
            out.append(f"{name}:{text.count(chr(10), 0, m.start()) + 1}")
    return out


def test_no_conflict_markers_in_tracked_files() -> None:
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    paths = [ROOT / f for f in files.stdout.splitlines() if (ROOT / f).is_file()]
    assert paths, "git ls-files listed nothing"
    assert conflict_markers(paths) == []


def test_conflict_markers_are_found(tmp_path: Path) -> None:
    bad = tmp_path / "probe.txt"
    bad.write_text("a\n<<<<<<< HEAD\nb\n=======\nc\n>>>>>>> main\n")
    assert conflict_markers([bad]) == ["probe.txt:2", "probe.txt:4", "probe.txt:6"]
