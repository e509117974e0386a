"""The README and the docs site point at things that exist.

For README.md and every ``docs/*.md``:

* every relative Markdown link (``[text](target)``, images too) names an existing file,
  and its ``#anchor``, when it points into a Markdown page, one of that page's headings;
* every inline-code reference that looks like a repository path (``controller/ina/
  deployment.py``, ``p4src/ina.p4``, ``hosts/ina/ddp_hook.py:ina_allreduce_hook``: a
  first component that is a top-level entry of the repository) exists;
* every module named as ``python -m X`` can be found (``importlib.util.find_spec``).

Then ``mkdocs build --strict`` builds the site (skipped when mkdocs is not installed:
``make docs`` or the ``docs`` extra installs it). Every failure names the file, the line
and the reference, so a moved module shows up as the lines that still name it.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]

FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
PYTHON_M = re.compile(r"\bpython3?\s+-m\s+([A-Za-z_][\w.]*)")
PATHLIKE = re.compile(r"[\w.-]+(?:/[\w.-]+)+/?")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line outside fenced code blocks."""
    out, fenced = [], False
    for n, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append((n, line))
    return out


def slugify(title: str) -> str:
    """A heading's anchor as mkdocs (Python-Markdown's toc) makes it."""
    text = re.sub(r"`([^`]*)`", r"\1", title)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[*_]{1,2}([^*_]+)[*_]{1,2}", r"\1", text)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def github_slug(title: str) -> str:
    """The same heading's anchor as GitHub renders it (the README is read there too)."""
    text = re.sub(r"`([^`]*)`", r"\1", title).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor the page's headings give, mkdocs' and GitHub's spellings alike."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for _n, line in prose_lines(page.read_text()):
        m = HEADING.match(line)
        if not m:
            continue
        for slug in {slugify(m.group(2)), github_slug(m.group(2))}:
            k = seen.get(slug, 0)
            out.add(slug if k == 0 else f"{slug}_{k}")  # mkdocs' suffix for a repeat
            out.add(slug if k == 0 else f"{slug}-{k}")  # GitHub's
            seen[slug] = k + 1
    return out


def link_problems(page: Path, root: Path = ROOT) -> list[str]:
    """Relative links of ``page`` whose file or anchor does not exist."""
    where = page.relative_to(root) if page.is_relative_to(root) else page
    problems = []
    for n, line in prose_lines(page.read_text()):
        for m in LINK.finditer(INLINE_CODE.sub("", line)):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("/"):
                continue  # a URL (http:, mailto:) or a site-absolute path
            file, _, anchor = target.partition("#")
            dest = (page.parent / file).resolve() if file else page
            if not dest.exists():
                problems.append(f"{where}:{n}: link {target!r}: no such file {file!r}")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                problems.append(f"{where}:{n}: link {target!r}: no heading #{anchor} in {file or where}")
    return problems


def top_level(root: Path) -> set[str]:
    """The repository's top-level entries a path reference may start with."""
    return {p.name for p in root.iterdir() if not p.name.startswith(".")}


def path_problems(page: Path, root: Path = ROOT) -> list[str]:
    """Inline-code repository paths of ``page`` that do not exist."""
    where = page.relative_to(root) if page.is_relative_to(root) else page
    tops = top_level(root)
    problems = []
    for n, line in prose_lines(page.read_text()):
        for m in INLINE_CODE.finditer(line):
            ref = m.group(2).strip()
            path = ref.split(":", 1)[0]  # file:symbol, file:line
            if not PATHLIKE.fullmatch(path) or path.split("/", 1)[0] not in tops:
                continue
            if not (root / path).exists():
                problems.append(f"{where}:{n}: `{ref}`: no such path {path!r}")
    return problems


def module_problems(page: Path, root: Path = ROOT) -> list[str]:
    """Modules named as ``python -m X`` in ``page`` (code blocks included) that do not exist."""
    where = page.relative_to(root) if page.is_relative_to(root) else page
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    problems = []
    for n, line in enumerate(page.read_text().splitlines(), 1):
        for m in PYTHON_M.finditer(line):
            name = m.group(1).rstrip(".")
            try:
                found = importlib.util.find_spec(name) is not None
            except (ImportError, ValueError) as e:
                found, name = False, f"{name} ({type(e).__name__}: {e})"
            if not found:
                problems.append(f"{where}:{n}: python -m {name}: no such module")
    return problems


def _id(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_links_resolve(page: Path) -> None:
    problems = link_problems(page)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_code_paths_exist(page: Path) -> None:
    problems = path_problems(page)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_python_m_modules_exist(page: Path) -> None:
    problems = module_problems(page)
    assert not problems, "\n".join(problems)


def test_readme_is_a_front_door() -> None:
    """The README stays short; the detail lives in docs/."""
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines, want <= 200"


def test_every_page_is_in_the_nav() -> None:
    """mkdocs.yml's nav lists every docs page (mkdocs only warns about an omitted one)."""
    nav = (ROOT / "mkdocs.yml").read_text()
    missing = [p.name for p in sorted(DOCS.glob("*.md")) if not re.search(rf":\s*{re.escape(p.name)}\s*$", nav, re.M)]
    assert not missing, f"mkdocs.yml nav lacks {missing}"


def test_checker_catches_broken_references(tmp_path: Path) -> None:
    """Each check can fail, and says which file and which reference."""
    (tmp_path / "other.md").write_text("# Other\n\n## A section\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n"
        "[fine](other.md#a-section) and [self](#page) and [web](https://example.org/x)\n"
        "[gone](missing.md) and [bad anchor](other.md#no-such)\n"
        "`controller/no_such_module.py:thing` and `controller/cli.py:main` and `not/a/top`\n"
        "run `python -m controller.no_such` or `python -m controller.cli`\n"
        "```\n[in a fence](nowhere.md) `controller/also_missing.py`\n```\n")
    links = link_problems(page, ROOT)
    assert len(links) == 2, links
    assert "page.md:4: link 'missing.md'" in links[0]
    assert "link 'other.md#no-such': no heading #no-such" in links[1]
    paths = path_problems(page, ROOT)
    assert paths == [f"{page}:5: `controller/no_such_module.py:thing`: no such path "
                     "'controller/no_such_module.py'"], paths
    mods = module_problems(page, ROOT)
    assert mods == [f"{page}:6: python -m controller.no_such: no such module"], mods


def test_slugs_match_mkdocs() -> None:
    assert slugify("Experiments: `python -m experiments`") == "experiments-python-m-experiments"
    assert slugify("INA vs budget K: does it pay off?") == "ina-vs-budget-k-does-it-pay-off"
    assert slugify("Step → code") == "step-code"


def test_site_builds_strict(tmp_path: Path) -> None:
    """``mkdocs build --strict``: every page in the nav, no broken link or anchor."""
    pytest.importorskip("mkdocs", reason="mkdocs not installed (the docs extra; make docs)")
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                        "--site-dir", str(tmp_path / "site")],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"mkdocs build --strict failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    assert (tmp_path / "site" / "index.html").is_file()
