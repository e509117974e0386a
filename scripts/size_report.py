#!/usr/bin/env python3
"""Size report: hand-written Python modules over 600 lines and functions over 80 lines.

Stdlib only (ast), so ``make lint`` can run it before the venv's extras exist.
Prints one line per offender and exits 1 when there is any; ``--warn`` prints the
same report but exits 0 (``make lint`` runs it without ``--warn``: any offender fails).

    python scripts/size_report.py [--warn] [--max-module N] [--max-function N] [ROOT ...]
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80

# Directories never scanned: environments, caches, compiler output and P4 test fixtures.
EXCLUDED_DIRS = {".venv", ".venv-p4rt-shell", ".git", "__pycache__", ".ruff_cache",
                 ".pytest_cache", "node_modules", "build", "results", "logs"}
EXCLUDED_PATHS = ("p4src/build", "tests/p4")
# A file whose head carries one of these markers was written by a program, not a person.
GENERATED_MARKERS = ("@generated", "do not edit", "automatically generated")


@dataclass(frozen=True)
class Offender:
    """One module or function over its limit."""

    path: str
    line: int
    name: str
    lines: int
    limit: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.name} has {self.lines} lines (limit {self.limit})"


def is_generated(text: str) -> bool:
    """True when the first lines of *text* say the file was generated."""
    head = "\n".join(text.splitlines()[:10]).lower()
    return any(marker in head for marker in GENERATED_MARKERS)


def python_files(root: Path) -> Iterator[Path]:
    """Every .py file under *root* outside the excluded directories, sorted."""
    if root.is_file():
        yield root
        return
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if any(part in EXCLUDED_DIRS for part in rel.parts[:-1]):
            continue
        if any(rel.as_posix().startswith(prefix + "/") for prefix in EXCLUDED_PATHS):
            continue
        yield path


def _functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, ast.AST]]:
    """(qualified name, node) for every function, method and nested function."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = prefix + node.name
            yield name, node
            yield from _functions(node, name + ".")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, prefix + node.name + ".")
        else:
            yield from _functions(node, prefix)


def check_file(path: Path, shown: str, max_module: int, max_function: int) -> list[Offender]:
    """The offenders in one file (none for generated or unparsable files)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    if is_generated(text):
        return []
    found: list[Offender] = []
    n_lines = len(text.splitlines())
    if n_lines > max_module:
        found.append(Offender(shown, 1, "module", n_lines, max_module))
    try:
        tree = ast.parse(text, filename=shown)
    except SyntaxError:
        return found
    for name, node in _functions(tree):
        # Decorators count: they are part of what a reader has to take in.
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        length = node.end_lineno - first + 1
        if length > max_function:
            found.append(Offender(shown, node.lineno, f"function {name}", length, max_function))
    return found


def report(roots: list[Path], max_module: int = MAX_MODULE_LINES,
           max_function: int = MAX_FUNCTION_LINES) -> list[Offender]:
    """Every offender under *roots*, modules first within each file."""
    found: list[Offender] = []
    for root in roots:
        for path in python_files(root):
            found.extend(check_file(path, path.as_posix(), max_module, max_function))
    return found


def main(argv: list[str] | None = None) -> int:
    """Print the report; 1 when there are offenders (0 with --warn)."""
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("roots", nargs="*", type=Path, default=[Path(".")],
                        help="directories or files to scan (default: .)")
    parser.add_argument("--warn", action="store_true",
                        help="report offenders but exit 0")
    parser.add_argument("--max-module", type=int, default=MAX_MODULE_LINES)
    parser.add_argument("--max-function", type=int, default=MAX_FUNCTION_LINES)
    args = parser.parse_args(argv)
    found = report(args.roots, args.max_module, args.max_function)
    for offender in found:
        print(offender)
    if found:
        print(f"size report: {len(found)} over the limits "
              f"({args.max_module}-line modules, {args.max_function}-line functions)")
        return 0 if args.warn else 1
    print("size report: nothing over the limits")
    return 0


if __name__ == "__main__":
    sys.exit(main())
