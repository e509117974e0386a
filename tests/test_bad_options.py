"""A bad option is one error line and exit status 2, before anything starts.

For every ``python -m experiments --mode M`` (each mode of controller/registry.py), every
``gradctl`` command and group, every host agent and every ``python -m bench NAME``:

* each option with a range (an argparse ``type=`` of :mod:`wire.argtypes`, or a
  comma-separated list of them, ``listed``) is given a value just outside it (generated from the parsers themselves, so a new option is
  covered the day it lands), and no numeric option is left without a range;
* the table below gives what needs the topology or the other options (hosts, switches,
  ports, counts larger than the topology's) and the cases found by hand.

Each runs in-process with the network, ``subprocess.Popen`` and ``tempfile.mkdtemp``
refused (nothing may start), and must end with exit status 2, one line on stderr that
names the option, no traceback, in well under 15 s. A few run as real subprocesses too.
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from controller import registry
from wire.argtypes import Listed, Range

ROOT = Path(__file__).resolve().parents[1]
MODES = list(registry.MODES)
# ``python -m hosts.bml`` is hosts.bml.agent's main
AGENTS = sorted({"hosts.bml.agent" if m == "hosts.bml" else m
                 for e in registry.ENTRIES for m in (*e.agents.values(), *e.scheme_agents.values())})
BENCHES = list(registry.BENCHES)
#: numeric options that take any integer on purpose
ANY_INT = {"--batch-seed"}  # -1: each node's own sequence number


class _Started(AssertionError):
    """Something tried to start: a network, a process, a run directory."""


@pytest.fixture
def nothing_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refuse every way a command starts something."""
    from topologies import network

    def refuse(*_a: Any, **_k: Any) -> Any:
        raise _Started("a bad option started something")

    monkeypatch.setattr(network.Network, "__init__", refuse)
    monkeypatch.setattr(subprocess, "Popen", refuse)
    monkeypatch.setattr(tempfile, "mkdtemp", refuse)


def _experiments(argv: list[str]) -> Any:
    from experiments.main import main

    return main(argv)


def _gradctl(argv: list[str]) -> Any:
    from controller.cli import main

    return main(argv)


def _bench(argv: list[str]) -> Any:
    from bench.__main__ import main

    return main(argv)


def _agent(module: str) -> Callable[[list[str]], Any]:
    return lambda argv: importlib.import_module(module).main(argv)


def _run(fn: Callable[[list[str]], Any], argv: list[str],
         capsys: pytest.CaptureFixture[str]) -> tuple[Any, str, str]:
    try:
        code = fn(argv)
    except SystemExit as e:
        code = e.code
    return code, *capsys.readouterr()


def _check(fn: Callable[[list[str]], Any], argv: list[str], fragment: str,
           capsys: pytest.CaptureFixture[str]) -> str:
    """Run; assert the one-line error; return it."""
    code, out, err = _run(fn, argv, capsys)
    assert "Traceback" not in out + err, (argv, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1, (argv, code, err)
    assert "error:" in lines[0] and fragment in lines[0], (argv, fragment, lines[0])
    return lines[0]


# ----------------------------------------------------------------------------- the table

E, G, B = "experiments", "gradctl", "bench"
TABLE: list[tuple[str, list[str], str]] = [
    # found by a careless user
    (E, ["--budget", "-3"], "--budget: must be >= 0 (got -3)"),
    (E, ["--values", "0"], "--values: must be >= 1 (got 0)"),
    (E, ["--values", "-5"], "--values: must be >= 1 (got -5)"),
    (E, ["--mode", "differentiated", "--bw", "-1"], "--bw: must be > 0 (got -1)"),
    (E, ["--max-time", "-1"], "--max-time: must be > 0 (got -1)"),
    (E, ["--mode", "ndn", "--workers", "0"], "a count must be >= 1"),
    (G, ["train", "--lr", "-1"], "--lr: must be > 0 (got -1)"),
    # ina: the topology's hosts, switches and ports; combinations
    (E, ["--budget", "100"], "--budget: must be <= 20"),
    (E, ["--topo", "star:4", "--budget", "3"], "--budget: must be <= 1, star-4 has 1 switches"),
    (E, ["--topo", "star:4", "--budget", "1"], "exceeds the 0 candidate switches"),
    (E, ["--ps", "h99"], "--ps 'h99' is not a host"),
    (E, ["--workers", "h2,h99"], "--workers: h99 not hosts"),
    (E, ["--workers", "99"], "--workers 99: only 15 hosts"),
    (E, ["--jobs", "2", "--ps", "h1"], "--jobs 2 needs 2 parameter servers"),
    (E, ["--loss", "s99:1=0.1"], "unknown switch 's99'"),
    (E, ["--loss", "s1:99=0.1"], "s1 has no port 99"),
    (E, ["--loss", "s1:1=2"], "the rate must be in [0, 1]"),
    (E, ["--k", "3"], "k: must be even"),
    (E, ["--topo", "nosuch:3"], "unknown topology"),
    (E, ["--values-per-packet", "100"], "--values-per-packet: invalid choice"),
    (E, ["--values", str(2**24 + 1)], "--values: must be <= 16777216"),
    (E, ["--mode", "reach", "--loss", "s1:1=0.1"], "checks reachability on a loss-free network"),
    (E, ["--mode", "nope"], "--mode 'nope': unknown; choose one of ina, reach"),
    (E, ["--preset", "nope"], "--preset: invalid choice"),
    # ndn
    (E, ["--mode", "ndn", "--workers", "99"], "--workers: must be <= 15"),
    (E, ["--mode", "ndn", "--workers", "2", "--busy", "2"], "--busy: must be <= 1"),
    (E, ["--mode", "ndn", "--gpu-loss", "2"], "--gpu-loss: must be in [0, 1]"),
    (E, ["--mode", "ndn", "--baselines", "ip,nope"], "--baselines: choose from"),
    (E, ["--mode", "ndn", "--loss", "s1:99=0.1"], "has no port 99"),
    # differentiated
    (E, ["--mode", "differentiated", "--levels", "9"], "--levels: must be <= 7"),
    (E, ["--mode", "differentiated", "--transports", "nope"], "--transports: choose from"),
    (E, ["--mode", "differentiated", "--loss", "s1:99=0.1"], "has no port 99"),
    (E, ["--mode", "differentiated", "--top-share", "1"], "--top-share: must be in (0, 1)"),
    (E, ["--mode", "differentiated", "--workers", "300"], "--batch: must be <= 4"),
    # bcube
    (E, ["--mode", "bcube", "--n", "5", "--k", "3"], "at most 32"),
    (E, ["--mode", "bcube", "--schemes", "bml,nope"], "unknown scheme(s) ['nope']"),
    (E, ["--mode", "bcube", "--tune-pipeline", "0"], "values must be in 1..64"),
    (E, ["--mode", "bcube", "--loss", "s99:1=0.1"], "unknown switch"),
    # token
    (E, ["--mode", "token", "--kill", "h9@3"], "--kill: 'h9' is not a host"),
    (E, ["--mode", "token", "--slow", "h9=2"], "--slow: 'h9' is not a host"),
    (E, ["--mode", "token", "--slow", "h2=0.5"], "a factor >= 1"),
    (E, ["--mode", "token", "--kill", "h2@-1"], "a time >= 0"),
    (E, ["--mode", "token", "--min-nodes", "9"], "--min-nodes: must be <= 4"),
    (E, ["--mode", "token", "--workers", "99"], "--workers: nodes"),
    (E, ["--mode", "token", "--bw", "2000"], "--bw must be in (0, 1000]"),
    # ddp
    (E, ["--mode", "ddp", "--ps", "h99"], "--ps: 'h99' is not a host"),
    (E, ["--mode", "ddp", "--workers", "9"], "--workers: must be in 1..4"),
    (E, ["--mode", "ddp", "--runs", "nope"], "--runs: unknown run(s) nope"),
    (E, ["--mode", "ddp", "--budget", "9"], "exceeds the 0 candidate switches"),
    (E, ["--mode", "ddp", "--loss", "s1:99=0.1"], "has no port 99"),
    # compare
    (E, ["--mode", "compare", "--workers", "1"], "--workers must be in 2..15"),
    (E, ["--mode", "compare", "--budget", "50"], "--budget: must be <= 19"),
    (E, ["--mode", "compare", "--schemes", "nope"], "unknown scheme(s) nope"),
    # train (the harness; gradctl train is the same)
    (E, ["--mode", "train", "--lr", "0"], "--lr: must be > 0"),
    (E, ["--mode", "train", "--scheme", "gloo,nope"], "--scheme: unknown nope"),
    (E, ["--mode", "train", "--workers", "9", "--topo", "star:4"], "needs 10"),
    (E, ["--mode", "train", "--slow", "h9=2"], "h9 is not a training host"),
    (E, ["--mode", "train", "--target-accuracy", "1.5"], "--target-accuracy: must be in (0, 1]"),
    (E, ["--mode", "train", "--loss", "s9:1=0.1"], "s9"),
    (E, ["--mode", "train", "--scheme", "gloo,ina", "--budget", "50"], "--budget 50: budget K=50"),
    (E, ["--mode", "train", "--workers", "300"], "ina: a job has 1..256 workers, got 300"),
    (E, ["--mode", "train", "--scheme", "gloo", "--workers", "300"], "has no full batch"),
    # gradctl
    (G, ["place", "fat-tree:4", "--ps", "h1", "--budget", "-3", "--capacity", "1"],
     "--budget: must be >= 0 (got -3)"),
    (G, ["place", "fat-tree:4", "--ps", "h99", "--budget", "2", "--capacity", "1000"],
     "unknown host 'h99' for --ps"),
    (G, ["place", "fat-tree:4", "--ps", "h1", "--budget", "21", "--capacity", "1000"],
     "larger than the 20 switches"),
    (G, ["ina", "deploy", "fat-tree:4", "--run-dir", "/nonexistent-gradnet", "--ps", "h1",
         "--budget", "2", "--capacity", "1000", "--values", "0"], "--values: must be >= 1"),
    (G, ["ina", "undeploy", "/nonexistent-gradnet", "300"], "J: must be <= 255"),
    (G, ["deploy", "star:3", "--addresses", "/nonexistent.yaml", "--dscp", "99=1"],
     "DSCP must be in 0..63"),
    (G, ["deploy", "star:3", "--addresses", "/nonexistent.yaml", "--loss", "s1:x=1"],
     "bad loss spec"),
    (G, ["net", "up", "star:3", "--loss", "s1:99=0.1"], "s1 has no port 99"),
    (G, ["net", "up", "star:3", "--bw", "0"], "--bw: must be > 0"),
    (G, ["net", "up", "nosuch:3"], "unknown topology"),
    (G, ["net", "pcap", "/nonexistent-gradnet", "s1-h1", "--count", "0"], "--count: must be >= 1"),
    (G, ["ndn", "deploy", "star:3", "--run-dir", "/tmp", "--pit-lifetime", "0"],
     "--pit-lifetime: must be > 0"),
    (G, ["qos", "set", "star:3", "--run-dir", "/tmp", "--priority", "9"], "--priority: must be <= 7"),
    (G, ["token", "topo", "--nodes", "40"], "--nodes: must be <= 31"),
    (G, ["bcube", "schedule", "--n", "1", "--k", "2"], "N must be >= 2"),
    (G, ["bcube", "model", "--n", "3", "--k", "2", "--bw", "-1"], "--bw: must be > 0"),
    (G, ["simulate", "star:3", "--budget", "-1"], "--budget: must be >= 0"),
    (G, ["routes", "nosuch:3"], "unknown topology"),
    (G, ["routes", "star:3", "-s", "s99"], "unknown switch 's99'"),
    (G, ["qos", "show", "star:3", "--run-dir", "/tmp", "-s", "s99"], "unknown switch(es) s99"),
    (G, ["ina", "counters", "star:3", "--run-dir", "/tmp", "--switch", "s99"], "'s99' is no switch"),
    (G, ["ndn", "show", "star:3", "--run-dir", "/tmp", "--switch", "s99"],
     "--switch: 's99' is not a switch of star-3"),
    (G, ["simulate", "star:3", "--ps", "h99"], "--ps 'h99' is not a host"),
    (G, ["topo", "show"], "the following arguments are required: TOPO"),
    # agents
    ("hosts.ina.worker", ["--policy", "p.json", "--rank", "0", "--window", "0"], "--window: must be >= 1"),
    ("hosts.ina.ps", ["--rounds", "-1"], "--rounds: must be >= 0"),
    ("hosts.ndn.gpu", ["--probe-factor", "0"], "--probe-factor: must be > 0"),
    ("hosts.token.node", ["--cutoff", "0"], "--cutoff: must be in (0, 1]"),
    ("hosts.trainer", ["--lr", "-1"], "--lr: must be > 0"),
    ("hosts.differentiated.worker", ["--quantile", "2"], "--quantile: must be in [0, 1]"),
    # benches (python -m bench NAME ...): lists, names, what needs other options or files
    (B, ["ina-bfp", "--workers", "2,0"], "--workers: must be >= 1 (got 0)"),
    (B, ["ina-bfp", "--workers", "2,x"], "--workers: expected an integer (got 'x')"),
    (B, ["ina-bfp", "--values-per-packet", "100"], "100 values a packet has no program"),
    (B, ["ndn-baselines", "--sizes", ","], "--sizes: expected comma-separated values"),
    (B, ["ndn-baselines", "--schemes", "ndn,nope"], "--schemes: unknown nope (choose from"),
    (B, ["ndn-baselines", "--from-rows", "/nonexistent-gradnet.json"], "--from-rows: no such file"),
    (B, ["ndn", "--target", "nope"], "--target: invalid choice: 'nope'"),
    (B, ["ndn", "--fabric-loss", "0.1,1"], "--fabric-loss: must be in [0, 1) (got 1)"),
    (B, ["ndn-window", "--gpus", "600"], "--gpus: 600 GPUs and a PS on one switch"),
    (B, ["target", "--programs", "forward,nope"], "--programs: unknown nope"),
    (B, ["target", "--targets", ""], "--targets: expected comma-separated names"),
    (B, ["bcube", "--sizes", "5x3"], "BCube(5,3) has 125 servers; the fat-tree has 16"),
    (B, ["bcube", "--tune-pipeline", "0"], "--tune-pipeline: must be >= 1 (got 0)"),
    (B, ["token", "--nodes", "1,40"], "--nodes: must be <= 31 (got 40)"),
    (B, ["token-grid", "--spread", "1,0.5"], "--spread: must be >= 1 (got 0.5)"),
    (B, ["differentiated", "--workers", "300"], "--workers: must be <= "),
    (B, ["differentiated-ablation", "--variants", "nope"], "--variants: unknown nope"),
    (B, ["differentiated-replay", "--seeds", "7-3"], "an empty range '7-3'"),
    (B, ["memlinks", "--seconds", "40"], "--seconds: must be in (0.5, 30] (got 40)"),
    (B, ["fuzz", "--programs", "nope"], "--programs: unknown nope"),
    (B, ["fuzz-p4rt", "--programs", "nope"], "--programs: no compiled program 'nope'"),
    (B, ["simulate", "--placement-k", "5"], "a fat-tree's arity is even (got 5)"),
    (B, ["simulate", "--bcube-sizes", "1x2"], "BCube(1,2): N >= 2"),
    (B, ["regimes", "--models", "resnet"], "--models: unknown resnet"),
    (B, ["regimes", "--resume", "/nonexistent-gradnet"], "--resume: no such directory"),
    (B, ["method-params", "--part", "nope"], "--part: unknown nope"),
]


def _fn(command: str) -> Callable[[list[str]], Any]:
    return {E: _experiments, G: _gradctl, B: _bench}.get(command) or _agent(command)


@pytest.mark.parametrize(("command", "argv", "fragment"), TABLE,
                         ids=[f"{c.split('.')[-1]}:{' '.join(a)}"[:60] for c, a, _ in TABLE])
def test_the_table(command: str, argv: list[str], fragment: str, tmp_path: Path,
                   capsys: pytest.CaptureFixture[str], nothing_starts: None) -> None:
    argv = [*argv, "--out-dir", str(tmp_path)] if command == E else argv
    _check(_fn(command), argv, fragment, capsys)
    assert not list(tmp_path.iterdir())  # no results directory either


# ----------------------------------------------------------------------------- every option


class _Captured(Exception):
    pass


def _parser_of(fn: Callable[[list[str]], Any], argv: list[str]) -> argparse.ArgumentParser:
    """The parser ``fn`` parses ``argv`` with (caught as it starts parsing)."""
    seen: list[argparse.ArgumentParser] = []
    real = argparse.ArgumentParser.parse_args

    def grab(self: argparse.ArgumentParser, *a: Any, **k: Any) -> Any:
        seen.append(self)
        raise _Captured

    argparse.ArgumentParser.parse_args = grab  # type: ignore[method-assign]
    try:
        fn(argv)
    except _Captured:
        pass
    finally:
        argparse.ArgumentParser.parse_args = real  # type: ignore[method-assign]
    assert seen, argv
    return seen[0]


def _subcommands(p: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[
        tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, p
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sp in a.choices.items():
                yield from _subcommands(sp, (*path, name))


def _outside(r: Range) -> str:
    """A value just outside ``r``."""
    step = 1 if r.kind is int else 0.5
    if r.lo is not None:
        v = r.lo - step
    elif r.above is not None:
        v = r.above
    elif r.hi is not None:
        v = r.hi + step
    else:
        assert r.below is not None
        v = r.below
    return f"{v:g}" if isinstance(v, float) else str(v)


def _each_option(p: argparse.ArgumentParser) -> Iterator[tuple[str, Range]]:
    """Every option with a range (a list's: its items')."""
    for a in p._actions:
        r = a.type.item if isinstance(a.type, Listed) else a.type
        if isinstance(r, Range) and a.option_strings:
            yield max(a.option_strings, key=len), r


def _unchecked(p: argparse.ArgumentParser) -> list[str]:
    """Numeric options without a range (nor choices)."""
    return [max(a.option_strings or [a.dest], key=len) for a in p._actions
            if a.type in (int, float) and not a.choices
            and not set(a.option_strings) & ANY_INT]


def _sweep(fn: Callable[[list[str]], Any], prefix: list[str], p: argparse.ArgumentParser,
           capsys: pytest.CaptureFixture[str], extra: list[str] = ()) -> int:  # type: ignore[assignment]
    assert not _unchecked(p), (prefix, _unchecked(p))
    n = 0
    for opt, r in _each_option(p):
        bad = _outside(r)
        _check(fn, [*prefix, f"{opt}={bad}", *extra], f"{opt}: {r.complaint(r.kind(bad))}", capsys)
        n += 1
    return n


@pytest.mark.parametrize("mode", MODES)
def test_every_option_of_every_mode(mode: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    nothing_starts: None) -> None:
    if mode in ("ddp", "train"):
        pytest.importorskip("torch")
    p = _parser_of(_experiments, ["--mode", mode])
    n = _sweep(_experiments, ["--mode", mode], p, capsys, ["--out-dir", str(tmp_path)])
    assert n >= 3 and not list(tmp_path.iterdir())


def _groups() -> list[str]:
    from controller.cli import build_parser

    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return list(sub.choices)


@pytest.mark.parametrize("group", _groups())
def test_every_option_of_every_gradctl_command(group: str, capsys: pytest.CaptureFixture[str],
                                               nothing_starts: None) -> None:
    from controller.cli import build_parser

    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    for path, p in _subcommands(sub.choices[group], (group,)):
        _sweep(_gradctl, list(path), p, capsys)


@pytest.mark.parametrize("module", AGENTS)
def test_every_option_of_every_agent(module: str, capsys: pytest.CaptureFixture[str],
                                     nothing_starts: None) -> None:
    if module in ("hosts.ina.ddp_train", "hosts.trainer"):
        pytest.importorskip("torch")
    fn = _agent(module)
    assert _sweep(fn, [], _parser_of(fn, []), capsys) >= 1


@pytest.mark.parametrize("name", BENCHES)
def test_every_option_of_every_bench(name: str, capsys: pytest.CaptureFixture[str],
                                     nothing_starts: None) -> None:
    """``python -m bench NAME``: parsed before anything (root, ns-3, a network) is needed."""
    if name in ("ddp", "train"):
        pytest.importorskip("torch")
    p = _parser_of(_bench, [name])
    n = _sweep(_bench, [name], p, capsys)
    assert n >= 1 or name == "method-params"  # its one option is a list of names


@pytest.mark.parametrize("module", ["bench.native_inprocess", "bench.native_tm"])
def test_every_option_of_the_benches_helpers(module: str, capsys: pytest.CaptureFixture[str],
                                             nothing_starts: None) -> None:
    """The target bench's parts, runnable alone (``python -m bench.native_tm``)."""
    fn = _agent(module)
    assert _sweep(fn, [], _parser_of(fn, []), capsys) >= 1


@pytest.mark.parametrize("argv", [
    [sys.executable, "-m", "experiments", "--budget", "-3"],
    [sys.executable, "-m", "experiments", "--mode", "ndn", "--workers", "0"],
    [sys.executable, "-m", "controller.cli", "train", "--lr", "-1"],
    [sys.executable, "-m", "hosts.ina.worker", "--policy", "p.json", "--rank", "-1"],
    [sys.executable, "-m", "bench", "token", "--batches", "0"],
])
def test_as_a_command(argv: list[str], tmp_path: Path) -> None:
    """The real command line: exit status 2, one line, nothing left behind."""
    r = subprocess.run([*argv, *(["--out-dir", str(tmp_path)] if "experiments" in argv else [])],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr + r.stdout, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "error:" in r.stderr
    assert not list(tmp_path.iterdir())
