"""The one registry of techniques (controller/registry.py): everything it names exists, and
nothing plugs in outside it."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from controller import registry

ROOT = Path(__file__).resolve().parents[1]


def _has_def(path: Path, name: str) -> bool:
    """Whether the module at ``path`` defines or imports ``name`` at top level."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for n in tree.body:
        if isinstance(n, ast.FunctionDef) and n.name == name:
            return True
        if isinstance(n, ast.ImportFrom) and any((a.asname or a.name) == name for a in n.names):
            return True
    return False


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@pytest.mark.parametrize("module", sorted({m for e in registry.ENTRIES for m in e.modules()}))
def test_every_registered_module_is_found(module: str) -> None:
    assert importlib.util.find_spec(module) is not None, module


def test_entries_are_unique_and_the_five_techniques_are_there() -> None:
    names = [e.name for e in registry.ENTRIES]
    assert len(names) == len(set(names))
    assert registry.TECHNIQUES == ("ina", "ndn", "differentiated", "bcube", "token")
    for t in registry.TECHNIQUES:
        e = registry.entry(t)
        assert e.modes and e.cli and e.benches and e.docs, t
        assert (ROOT / e.docs).is_file(), e.docs
    for e in registry.ENTRIES:
        assert e.docs is None or (ROOT / e.docs).is_file(), e.docs


def test_derived_views_are_the_registry() -> None:
    from bench.__main__ import BENCHES
    from controller.bcube import AGENTS
    from controller.cli import TECHNIQUE_CLIS
    from experiments.main import MODES
    from experiments.train import ALL_SCHEMES, BUILTIN_SCHEMES, PLUGINS

    assert MODES is registry.MODES and BENCHES is registry.BENCHES
    assert TECHNIQUE_CLIS is registry.TECHNIQUE_CLIS and AGENTS is registry.AGENTS
    assert PLUGINS is registry.PLUGINS
    assert set(ALL_SCHEMES) == set(registry.SCHEMES)
    assert set(BUILTIN_SCHEMES) == {s for s, m in registry.SCHEMES.items() if m is None}


def test_every_experiment_mode_is_registered() -> None:
    # each experiments/*.py with main() is a mode (main.py dispatches to them)
    found = {_module(p) for p in (ROOT / "experiments").glob("*.py")
             if p.name not in ("main.py", "__main__.py") and _has_def(p, "main")}
    assert found == set(registry.MODES.values())
    plugins = {_module(p) for p in (ROOT / "experiments").glob("train_*.py")}
    assert plugins == set(registry.PLUGINS.values())


def test_every_bench_is_registered() -> None:
    registered = set(registry.BENCHES.values())
    for p in (ROOT / "bench").glob("*_bench.py"):
        assert _module(p) in registered, p
    # the other benchmarks with main(): registered too, except the target benchmark's floor
    # and its in-process tables (native backend, shaped port, packet-ins), which ``bench target`` runs
    helpers = {"bench.bare_forwarder", "bench.native_inprocess", "bench.native_tm", "bench.native_cpuport"}
    found = {_module(p) for p in (ROOT / "bench").glob("*.py")
             if p.name != "__main__.py" and _has_def(p, "main")}
    assert found - helpers == registered


def test_every_cli_group_is_registered() -> None:
    files = [*ROOT.glob("controller/**/cli.py"), *ROOT.glob("controller/*_cli.py"),
             *ROOT.glob("sim/cli.py"), *ROOT.glob("experiments/*.py")]
    found = {_module(p) for p in files if _has_def(p, "register")}
    assert found == set(registry.TECHNIQUE_CLIS)


def test_every_host_agent_is_registered() -> None:
    agents = {m for e in registry.ENTRIES for m in (*e.agents.values(), *e.scheme_agents.values())}
    for p in (ROOT / "hosts").rglob("*.py"):
        if p.name == "__main__.py" or not _has_def(p, "main"):
            continue
        mod = _module(p)
        # ``python -m hosts.bml`` runs hosts/bml/agent.py through its package's __main__
        assert mod in agents or mod.rpartition(".")[0] in agents, mod


def test_the_registry_imports_nothing() -> None:
    tree = ast.parse((ROOT / "controller" / "registry.py").read_text(encoding="utf-8"))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree)
                 if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= {"__future__", "collections", "dataclasses", "types"}
    code = ("import sys, controller.registry; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('experiments', 'bench', 'hosts', 'sim', 'finsy', 'torch', 'rich')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.strip()
    assert out == "[]"
