"""One option vocabulary (experiments/options.py) across ``python -m experiments --mode MODE``.

Every technique mode lists the shared options it takes in one ``common options`` group,
in the vocabulary's order, with the same help text; a shared option a mode cannot take is
one clear error; an old spelling still works for one release and says so on stderr;
``--loss`` with a bad spec is one argparse error (exit 2) in every mode that takes it.
No network is started: everything here happens while parsing.
"""

from __future__ import annotations

import argparse
import importlib
import re

import pytest

from experiments import options as opts
from experiments.main import MODES
from experiments.main import main as experiment_main

# The technique modes (train, the harness, is experiments/train.py: see the last test).
TECHNIQUE_MODES = ("ina", "reach", "ndn", "differentiated", "bcube", "token", "ddp", "compare")
# mode -> the shared options it takes (the rest are rejected with a reason).
TAKES = {
    "ina": {"--seed", "--workers", "--bw", "--loss", "--max-time", "--target", "--out-dir"},
    "ndn": {"--seed", "--workers", "--bw", "--loss", "--max-time", "--target", "--out-dir"},
    "differentiated": {"--seed", "--workers", "--bw", "--loss", "--max-time", "--target", "--out-dir"},
    "bcube": {"--seeds", "--seed", "--bw", "--loss", "--max-time", "--target", "--out-dir"},
    "token": {"--seed", "--workers", "--bw", "--max-time", "--target", "--out-dir"},
    "ddp": {"--seed", "--workers", "--bw", "--loss", "--max-time", "--target", "--out-dir"},
    "compare": {"--seed", "--workers", "--bw", "--max-time", "--target", "--out-dir"},
}
TAKES["reach"] = TAKES["ina"]
LOSS_MODES = [m for m in TECHNIQUE_MODES if "--loss" in TAKES[m] and m != "reach"]


def _parser(mode: str) -> argparse.ArgumentParser:
    return importlib.import_module(MODES[mode]).build_parser()


def _argv(mode: str, *rest: str) -> list[str]:
    """The command line of ``python -m experiments``."""
    return ["--mode", mode, *rest]


def _own_argv(mode: str, *rest: str) -> list[str]:
    """What the mode's own parser gets (ina and reach take ``--mode`` too)."""
    return _argv(mode, *rest) if mode in ("ina", "reach") else list(rest)


def _common_actions(p: argparse.ArgumentParser) -> list[argparse.Action]:
    (group,) = [g for g in p._action_groups if g.title == opts.GROUP_TITLE]
    return list(group._group_actions)


def _help_text(mode: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as e:
        experiment_main(_argv(mode, "--help"))
    assert e.value.code == 0
    return capsys.readouterr().out


def _common_section(text: str) -> dict[str, str]:
    """``{option: its help, whitespace collapsed}`` of the ``common options:`` section."""
    section = text.split(f"\n{opts.GROUP_TITLE}:\n", 1)[1].split("\n\n", 1)[0]
    out: dict[str, str] = {}
    for block in re.split(r"\n(?=  --)", section):
        m = re.match(r"\s*(--[a-z-]+)(?: \S+)?\s+(.*)", block, re.S)
        assert m, block
        out[m.group(1)] = " ".join(m.group(2).split())
    return out


@pytest.mark.parametrize("mode", TECHNIQUE_MODES)
def test_common_options_same_names_help_and_order(mode: str) -> None:
    p = _parser(mode)
    actions = _common_actions(p)
    names = [a.option_strings[0] for a in actions]
    assert names == [o for o in opts.ORDER if o in TAKES[mode]]  # the vocabulary's order
    for a in actions:
        assert a.help == opts.HELP[a.option_strings[0]]           # one help text per option
    # every shared option it does not list is still known to it: hidden, a clear error
    hidden = {a.option_strings[0]: a for a in p._actions if a.option_strings
              and a.option_strings[0] in opts.ORDER and a.help == argparse.SUPPRESS}
    assert set(hidden) == set(opts.ORDER) - TAKES[mode]
    for opt in hidden:
        assert f"{opt}:" in (p.epilog or "")                      # --help says why


def test_rendered_help_is_the_same_in_every_mode(capsys: pytest.CaptureFixture[str]) -> None:
    """``--help`` of every mode: a ``common options`` section, same wording per option
    (only each mode's default differs)."""
    seen: dict[str, dict[str, str]] = {}
    for mode in TECHNIQUE_MODES:
        section = _common_section(_help_text(mode, capsys))
        assert list(section) == [o for o in opts.ORDER if o in TAKES[mode]], mode
        for opt, text in section.items():
            seen.setdefault(opt, {})[mode] = re.sub(r"\(default [^)]*\)$", "(default D)", text)
    for opt, by_mode in seen.items():
        assert len(set(by_mode.values())) == 1, (opt, by_mode)


@pytest.mark.parametrize("mode", LOSS_MODES)
@pytest.mark.parametrize("spec", ["s1:x=0.1", "s1=0.1", "nonsense", "s1:2=1.5"])
def test_bad_loss_spec_is_one_clear_error(mode: str, spec: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        experiment_main(_argv(mode, "--loss", spec))
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1
    assert f"argument --loss: bad loss spec {spec!r}" in err
    assert "deprecated" not in err


@pytest.mark.parametrize("mode", LOSS_MODES)
def test_loss_parses_to_ports(mode: str) -> None:
    args = _parser(mode).parse_args(_own_argv(mode, "--loss", "s1:2=0.05", "--loss", "s3:1=0"))
    assert args.loss == [(("s1", 2), 0.05), (("s3", 1), 0.0)]
    assert opts.loss_dict(args.loss) == {("s1", 2): 0.05, ("s3", 1): 0.0}


@pytest.mark.parametrize("mode, argv, dest, value, new", [
    ("token", ["--nodes", "3"], "workers", 3, "use --workers"),
    ("token", ["--out", "/tmp/tok"], "out_dir", "/tmp/tok", "use --out-dir"),
    ("token", ["--timeout", "50"], "max_time", 50.0, "use --max-time"),
    ("ndn", ["--gpus", "3"], "workers", 3, "use --workers"),
    ("ndn", ["--gpus", "0"], "workers", None, "use --workers"),          # 0 was "every other host"
    ("ndn", ["--loss", "0.2"], "gpu_loss", 0.2, "use --gpu-loss 0.2"),   # a bare rate: the old --loss
    ("bcube", ["--loss", "0.1"], "link_loss", 0.1, "use --link-loss 0.1"),
])
def test_old_spellings_still_work_and_warn(mode: str, argv: list[str], dest: str, value: object, new: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    args = _parser(mode).parse_args(argv)
    assert getattr(args, dest) == value
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "deprecated" in err[0] and new in err[0]
    if argv[0] == "--loss":
        assert args.loss == []  # the bare rate is not a port spec
    else:  # the old spelling is not in --help
        (alias,) = [a for a in _parser(mode)._actions if argv[0] in a.option_strings]
        assert alias.help == argparse.SUPPRESS


def test_new_spellings_do_not_warn(capsys: pytest.CaptureFixture[str]) -> None:
    args = _parser("token").parse_args(["--workers", "3", "--out-dir", "/tmp/t", "--max-time", "9"])
    assert (args.workers, args.out_dir, args.max_time) == (3, "/tmp/t", 9.0)
    args = _parser("ndn").parse_args(["--workers", "all", "--gpu-loss", "0.1", "--loss", "s1:1=0.2"])
    assert (args.workers, args.gpu_loss, args.loss) == (None, 0.1, [(("s1", 1), 0.2)])
    args = _parser("bcube").parse_args(["--link-loss", "0.05"])
    assert (args.link_loss, args.loss) == (0.05, [])
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("mode, argv, message", [
    ("compare", ["--loss", "s1:1=0.1"], "--mode compare does not take --loss"),
    ("token", ["--loss", "s1:1=0.1"], "--mode token does not take --loss"),
    ("bcube", ["--workers", "4"], "--mode bcube does not take --workers"),
    ("ndn", ["--seeds", "3"], "--mode ndn does not take --seeds"),
    ("ddp", ["--target-accuracy", "0.9"], "--mode ddp does not take --target-accuracy"),
    ("differentiated", ["--workers", "h2,h3"], "this mode takes a count N, not a host list"),
    ("compare", ["--workers", "0"], "a count must be >= 1"),
    ("reach", ["--loss", "s1:1=0.1"], "--mode reach checks reachability on a loss-free network"),
])
def test_what_a_mode_cannot_take_is_one_clear_error(mode: str, argv: list[str], message: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        experiment_main(_argv(mode, *argv))
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and message in err


def test_one_seed_is_accepted_everywhere() -> None:
    for mode in TECHNIQUE_MODES:
        args = _parser(mode).parse_args(_own_argv(mode, "--seeds", "1"))
        if "--seeds" in TAKES[mode]:
            assert args.seeds == 1
        else:
            assert not hasattr(args, "seeds")


def test_workers_host_lists_where_the_mode_places_them() -> None:
    p = _parser("ina")
    assert p.parse_args(["--workers", "h2,h3"]).workers == "h2,h3"
    assert p.parse_args(["--workers", "3"]).workers == "3"
    assert p.parse_args([]).workers == ""  # all: every host but the PS
    assert p.parse_args(["--bw", "5"]).bw_given and not p.parse_args([]).bw_given


def test_timeout_is_the_retransmission_timeout_where_it_stays() -> None:
    for mode in ("ina", "compare"):
        (a,) = [a for a in _parser(mode)._actions if "--timeout" in a.option_strings]
        assert "retransmission timeout" in a.help and "--max-time" in a.help


def test_the_harness_has_the_same_names() -> None:
    """``--mode train`` (experiments/train.py, its own parser) takes every shared option."""
    pytest.importorskip("torch")
    from experiments.train import build_parser

    names = {s for a in build_parser()._actions for s in a.option_strings}
    assert set(opts.ORDER) <= names


def test_add_common_wants_every_option_taken_or_rejected() -> None:
    p = argparse.ArgumentParser()
    with pytest.raises(ValueError, match="taken or rejected"):
        opts.add_common(p, "x", takes={"--seed": {}}, rejects={})
