"""The module import graph of gradnet's packages, and the parts of it that must be acyclic.

:func:`import_graph` reads every ``.py`` file of the given packages with :mod:`ast` (it
imports nothing) and records which modules of those packages each one imports:
absolute and relative imports alike, wherever they are (module level, inside functions,
classes, ``try`` or ``if`` blocks, ``if TYPE_CHECKING:`` included). :func:`find_cycles`
reports one cycle per strongly connected component of such a graph.

Importing ``a.b`` also runs ``a/__init__.py``; that implicit edge is not recorded (every
package's ``__init__`` imports its own modules, so it would make every package a cycle).
A module importing its own package's ``__init__`` is recorded and would show up here.
Imports under ``if __name__ == \"__main__\":`` are not edges (they run only as a script).

The layering the tests hold (docs/ARCHITECTURE.md): the wire layer (``wire``, the formats
both sides agree on) imports nothing else of the project; hosts, targets and topologies
never import the control plane or the experiments; the control plane never imports an
experiment (``controller.experiment``, the alias of ``python -m experiments``, aside) nor
any host module (what it shares with the agents is in ``wire``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("controller", "hosts", "topologies", "targets", "experiments", "bench", "wire")

Graph = dict[str, set[str]]


def module_files(packages: Iterable[str], root: Path = ROOT) -> dict[str, Path]:
    """``{dotted module name: file}`` for every ``.py`` file under ``root/<package>``
    (``pkg/__init__.py`` is the module ``pkg``)."""
    out: dict[str, Path] = {}
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if not all(p.isidentifier() for p in parts):
                continue  # not importable (e.g. a build or scratch directory)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def _known_prefix(name: str, known: Mapping[str, Path]) -> str | None:
    """The longest dotted prefix of ``name`` that is a known module (``a.b.c`` -> ``a.b``)."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        cand = ".".join(parts[:n])
        if cand in known:
            return cand
    return None


def _is_main_block(node: ast.stmt) -> bool:
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
            and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__")


def imports_of(module: str, path: Path, known: Mapping[str, Path]) -> set[str]:
    """The modules of ``known`` that ``module`` (its source at ``path``) imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    # a script block (``if __name__ == "__main__":``) runs only as a script: not an edge
    tree.body = [n for n in tree.body if not _is_main_block(n)]
    # the package relative imports start from: the module itself for an __init__
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    out: set[str] = set()

    def add(name: str) -> None:
        target = _known_prefix(name, known)
        if target is not None:
            out.add(target)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if node.level - 1 > len(package):
                    continue  # beyond the top-level package: not one of ours
                base_parts = package[: len(package) - (node.level - 1)]
                if node.module:
                    base_parts = [*base_parts, node.module]
                base = ".".join(base_parts)
            else:
                base = node.module or ""
            for alias in node.names:
                sub = f"{base}.{alias.name}" if base else alias.name
                # ``from pkg import mod`` imports the module pkg.mod; otherwise a name of pkg
                add(sub if sub in known else base)
    return out


def import_graph(packages: Iterable[str], root: Path = ROOT) -> Graph:
    """``{module: modules it imports}`` over every module of ``packages`` under ``root``
    (only imports of modules of those packages are edges)."""
    files = module_files(packages, root)
    return {mod: imports_of(mod, path, files) for mod, path in files.items()}


def subgraph(graph: Mapping[str, Iterable[str]], package: str) -> Graph:
    """The part of ``graph`` inside ``package`` (the package itself and its modules)."""

    def inside(mod: str) -> bool:
        return mod == package or mod.startswith(package + ".")

    return {m: {t for t in deps if inside(t)} for m, deps in graph.items() if inside(m)}


def find_cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """One shortest cycle ``[a, b, ..., a]`` per strongly connected component of
    ``graph`` that has one (a self-import counts), sorted; ``[]`` if acyclic."""
    adj = {n: sorted(set(deps)) for n, deps in graph.items()}
    for deps in list(adj.values()):
        for d in deps:
            adj.setdefault(d, [])
    # Tarjan's strongly connected components, iteratively
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    sccs: list[list[str]] = []
    for start in sorted(adj):
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            if i < len(adj[node]):
                work.append((node, i + 1))
                nxt = adj[node][i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                comp = []
                while True:
                    n = stack.pop()
                    on_stack.discard(n)
                    comp.append(n)
                    if n == node:
                        break
                sccs.append(comp)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    cycles = []
    for comp in sccs:
        members = set(comp)
        first = min(comp)
        if len(comp) == 1 and first not in adj[first]:
            continue
        # breadth-first from `first` back to itself, inside the component
        prev: dict[str, str] = {}
        frontier = [first]
        found = False
        while frontier and not found:
            nxt_frontier = []
            for u in frontier:
                for v in adj[u]:
                    if v == first:
                        prev[first] = u
                        found = True
                        break
                    if v in members and v not in prev:
                        prev[v] = u
                        nxt_frontier.append(v)
                if found:
                    break
            frontier = nxt_frontier
        cycle = [first]
        node = prev[first]
        while node != first:
            cycle.append(node)
            node = prev[node]
        cycle.append(first)
        cycles.append(cycle[::-1])
    return sorted(cycles)


def _assert_acyclic(graph: Graph) -> None:
    cycles = find_cycles(graph)
    text = "\n".join(" -> ".join(c) for c in cycles)
    if cycles:
        print(f"import cycles:\n{text}")
    assert not cycles, f"import cycles:\n{text}"


# ----------------------------------------------------------------------------- tests


def test_import_graph_and_find_cycles_on_a_small_package(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .a import A\nfrom . import d\n")
    (pkg / "a.py").write_text("from . import b\nA = 1\n")
    (pkg / "b.py").write_text("def f():\n    from .sub.c import C\n    return C\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "c.py").write_text("import os\nimport pkg.a\nC = 2\n")
    (pkg / "d.py").write_text("from pkg.a import A\nfrom ..outside import x\n")
    (pkg / "e.py").write_text("from .e import y\n")

    graph = import_graph(["pkg"], tmp_path)
    assert graph == {
        "pkg": {"pkg.a", "pkg.d"},
        "pkg.a": {"pkg.b"},
        "pkg.b": {"pkg.sub.c"},
        "pkg.sub": set(),
        "pkg.sub.c": {"pkg.a"},
        "pkg.d": {"pkg.a"},
        "pkg.e": {"pkg.e"},
    }
    assert find_cycles(graph) == [
        ["pkg.a", "pkg.b", "pkg.sub.c", "pkg.a"],
        ["pkg.e", "pkg.e"],
    ]
    assert find_cycles(subgraph(graph, "pkg.sub")) == []


def test_no_cycle_among_topologies_modules() -> None:
    graph = subgraph(import_graph(PACKAGES), "topologies")
    assert {"topologies.base", "topologies.builders", "topologies.fileformat"} <= set(graph)
    assert "topologies.base" in graph["topologies.fileformat"]  # the graph sees imports
    _assert_acyclic(graph)


def test_no_cycle_among_placement_modules() -> None:
    graph = subgraph(import_graph(PACKAGES), "controller.placement")
    modules = {"problem", "lp", "symmetry", "greedy", "milp", "baselines", "policy"}
    assert {f"controller.placement.{m}" for m in modules} <= set(graph)
    assert "controller.placement.lp" in graph["controller.placement.greedy"]
    _assert_acyclic(graph)


# Modules allowed to cross a layer, each for a stated reason.
EXCEPTIONS = {
    ("controller.experiment", "experiments.main"),  # ``python -m controller.experiment`` alias
}


def _inside(mod: str, package: str) -> bool:
    return mod == package or mod.startswith(package + ".")


def layer_violations(graph: Mapping[str, Iterable[str]]) -> list[str]:
    """Every import that crosses the layering above, as ``importer -> imported (rule)``."""
    bad = []
    for mod, deps in sorted(graph.items()):
        for dep in sorted(deps):
            if (mod, dep) in EXCEPTIONS:
                continue
            rule = None
            if _inside(mod, "wire") and not _inside(dep, "wire"):
                rule = "the wire layer imports nothing else of the project"
            elif any(_inside(mod, p) for p in ("hosts", "targets", "topologies")) and any(
                    _inside(dep, p) for p in ("controller", "experiments", "bench")):
                rule = "agents, targets and topologies stay below the control plane"
            elif _inside(mod, "controller") and any(_inside(dep, p) for p in ("experiments", "bench")):
                rule = "the control plane does not import experiments"
            elif _inside(mod, "controller") and _inside(dep, "hosts"):
                rule = "the control plane imports no host module (shared formats: wire)"
            elif _inside(mod, "experiments") and _inside(dep, "bench"):
                rule = "experiments do not import benchmarks"
            if rule:
                bad.append(f"{mod} -> {dep} ({rule})")
    return bad


def test_no_import_cycle_anywhere() -> None:
    graph = import_graph(PACKAGES)
    assert {"experiments.ina", "controller.ina.deployment", "hosts.ina.worker"} <= set(graph)
    _assert_acyclic(graph)


def test_layering() -> None:
    graph = import_graph(PACKAGES)
    bad = layer_violations(graph)
    assert not bad, "imports across layers:\n" + "\n".join(bad)


def test_layering_check_catches_a_violation() -> None:
    graph = {"controller.ina.deployment": {"experiments.ina", "hosts.ina.worker", "wire.ina"},
             "hosts.ina.worker": {"controller.deploy", "wire.ina"},
             "controller.experiment": {"experiments.main"},
             "wire.ina": {"wire.ports"}, "wire.ndn": {"hosts.net", "wire.ports"}}
    assert layer_violations(graph) == [
        "controller.ina.deployment -> experiments.ina (the control plane does not import experiments)",
        "controller.ina.deployment -> hosts.ina.worker (the control plane imports no host module "
        "(shared formats: wire))",
        "hosts.ina.worker -> controller.deploy (agents, targets and topologies stay below the control "
        "plane)",
        "wire.ndn -> hosts.net (the wire layer imports nothing else of the project)",
    ]


def test_wire_imports_only_wire() -> None:
    graph = import_graph(PACKAGES)
    wire = {m: deps for m, deps in graph.items() if _inside(m, "wire")}
    assert {"wire.ina", "wire.ina_policy", "wire.ndn", "wire.bcube_schedule"} <= set(wire)
    assert "wire.ina" in wire["wire.ina_policy"]  # the graph sees wire's own imports
    assert all(_inside(d, "wire") for deps in wire.values() for d in deps)
