"""The option vocabulary every experiment mode shares: one name, one meaning, one help text.

Every ``python -m experiments --mode MODE`` lists the options below that it takes in one
argument group, ``common options``, in this order and with these help texts (the
harness, ``--mode train``, uses the same names and meanings)::

    --seeds N            seeds per configuration (SEED..SEED+N-1)
    --seed N             seed of the run's random inputs
    --target-accuracy A  test accuracy to reach (modes that train to an accuracy)
    --workers N|H,...    training hosts, the gradient contributors
    --bw MBIT            every host link's rate
    --loss SW:PORT=RATE  emulated loss of a switch egress port (repeatable)
    --max-time S         bound on each run
    --target T           switch target auto|embedded|bmv2
    --out-dir DIR        where results go

A mode that cannot take one of them registers it with :func:`reject`: hidden from
``--help`` (its epilog says why) and a clear error (exit 2) when used. An option renamed
into this vocabulary keeps its old spelling for one release through :func:`add_alias`:
hidden, the same ``dest``, and a one-line deprecation note on stderr when used.

Use :func:`add_common` to add the group in one call (it keeps the order), or the
``add_*`` functions one by one in the order above.

Every value is checked where it is parsed (the ``type=`` callables of
:mod:`controller.argtypes`: ``--seed`` >= 0, ``--bw`` and ``--max-time`` > 0, ...); what
needs the topology (hosts, ports, counts) each mode checks right after building it, before
the network starts: a bad option is one line and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from controller import argtypes

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT_DIR = str(REPO_ROOT / "results")
GROUP_TITLE = "common options"

# The help text of each shared option (``%(default)s`` is each mode's default).
HELP: dict[str, str] = {
    "--seeds": "seeds per configuration: SEED..SEED+N-1 (default %(default)s)",
    "--seed": "seed of the run's random inputs: gradients, model, data split, batches; "
              "the first of --seeds (default %(default)s)",
    "--target-accuracy": "test accuracy to reach; a run's time to accuracy is when it first "
                         "gets there (default %(default)s)",
    "--workers": "training hosts, the gradient contributors: a count N; where the mode places "
                 "them, also hosts H,H,... in rank order, or all = every host but the PS "
                 "(default %(default)s)",
    "--bw": "every host link's rate in Mbit/s (default %(default)s)",
    "--loss": "emulated loss of a switch egress port, e.g. s1:2=0.05 (repeatable)",
    "--max-time": "bound on each run in seconds (default %(default)s)",
    "--target": "switch target: auto|embedded|bmv2 (default $TARGET, else auto)",
    "--out-dir": "where results go: a timestamped directory under DIR (default %(default)s)",
}
# The order of the group (the harness's order).
ORDER: tuple[str, ...] = tuple(HELP)
METAVAR: dict[str, str] = {
    "--seeds": "N", "--seed": "N", "--target-accuracy": "ACC", "--workers": "N",
    "--bw": "MBIT", "--loss": "SW:PORT=RATE", "--max-time": "S", "--target": "TARGET",
    "--out-dir": "DIR",
}


def common_group(p: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """The parser's ``common options`` group (made on first use)."""
    for g in p._action_groups:
        if g.title == GROUP_TITLE:
            return g
    return p.add_argument_group(GROUP_TITLE)


def deprecated(parser: argparse.ArgumentParser | None, old: str, new: str, note: str = "") -> None:
    """The one-line deprecation note on stderr."""
    prog = parser.prog if parser is not None else "python -m experiments"
    print(f"{prog}: {old} is deprecated, use {new}{'; ' + note if note else ''} "
          "(the old spelling goes in the next release)", file=sys.stderr)


# ----------------------------------------------------------------------------- the options


def add_seeds(p: argparse.ArgumentParser, default: int = 1) -> None:
    """``--seeds N``: how many seeds a mode that runs several runs."""
    common_group(p).add_argument("--seeds", type=argtypes.count, default=default,
                                 metavar=METAVAR["--seeds"], help=HELP["--seeds"])


def add_seed(p: argparse.ArgumentParser, default: int = 0) -> None:
    """``--seed N``: the run's seed (the first one with ``--seeds``)."""
    common_group(p).add_argument("--seed", type=argtypes.natural, default=default, metavar=METAVAR["--seed"],
                                 help=HELP["--seed"])


def add_target_accuracy(p: argparse.ArgumentParser, default: float | None = None) -> None:
    """``--target-accuracy ACC``: modes that train to an accuracy."""
    common_group(p).add_argument("--target-accuracy", type=argtypes.number(above=0.0, hi=1.0), default=default,
                                 metavar=METAVAR["--target-accuracy"], help=HELP["--target-accuracy"])


def add_workers(p: argparse.ArgumentParser, default: int | str, *, hosts: bool = False,
                allow_all: bool = False) -> None:
    """``--workers``: a count (``type`` int); ``hosts``: also ``H,H,...`` or ``all`` (the
    value stays the string the mode resolves, ``all`` -> ``""``); ``allow_all``: a count
    or ``all`` (-> None)."""
    common_group(p).add_argument("--workers", type=workers_type(hosts=hosts, allow_all=allow_all),
                                 default=default, metavar="N|H,H,..." if hosts else METAVAR["--workers"],
                                 help=HELP["--workers"])


def add_bw(p: argparse.ArgumentParser, default: float) -> None:
    """``--bw MBIT``; ``args.bw_given`` says whether it was on the command line."""
    common_group(p).add_argument("--bw", type=argtypes.positive, default=default,
                                 action=_StoreGiven, metavar=METAVAR["--bw"], help=HELP["--bw"])
    p.set_defaults(bw_given=False)


def add_loss(p: argparse.ArgumentParser, *, legacy: tuple[str, str] | None = None) -> None:
    """``--loss SW:PORT=RATE`` (repeatable): ``args.loss`` is a list of
    ``((switch, port), rate)``; a bad spec is an argparse error (exit 2).

    ``legacy = (new_option, dest)``: in a mode where ``--loss RATE`` (a bare rate) meant
    something else, a bare rate still sets ``dest`` for one release, with a deprecation
    note naming ``new_option``."""
    common_group(p).add_argument("--loss", action=_LossAction, default=[], legacy=legacy,
                                 metavar=METAVAR["--loss"], help=HELP["--loss"])


def add_max_time(p: argparse.ArgumentParser, default: float) -> None:
    """``--max-time S``: the bound on each run."""
    common_group(p).add_argument("--max-time", type=argtypes.positive, default=default,
                                 metavar=METAVAR["--max-time"], help=HELP["--max-time"])


def add_target(p: argparse.ArgumentParser) -> None:
    """``--target``: the switch target (None: ``$TARGET``, else auto)."""
    common_group(p).add_argument("--target", default=None, metavar=METAVAR["--target"],
                                 help=HELP["--target"])


def add_out_dir(p: argparse.ArgumentParser, default: str = DEFAULT_OUT_DIR) -> None:
    """``--out-dir DIR``: results go to a timestamped directory under DIR."""
    common_group(p).add_argument("--out-dir", default=default, metavar=METAVAR["--out-dir"],
                                 help=HELP["--out-dir"])


_ADDERS: dict[str, Callable[..., None]] = {
    "--seeds": add_seeds, "--seed": add_seed, "--target-accuracy": add_target_accuracy,
    "--workers": add_workers, "--bw": add_bw, "--loss": add_loss, "--max-time": add_max_time,
    "--target": add_target, "--out-dir": add_out_dir,
}


def add_common(p: argparse.ArgumentParser, mode: str, *, takes: dict[str, dict[str, Any]],
               rejects: dict[str, str]) -> None:
    """The ``common options`` group in the vocabulary's order.

    ``takes``: option -> keyword arguments of its ``add_*`` function; ``rejects``:
    option -> why ``--mode mode`` cannot take it. Every option of the vocabulary must be
    in exactly one of the two. The reasons go to the parser's epilog."""
    missing = [o for o in ORDER if (o in takes) == (o in rejects)]
    if missing:
        raise ValueError(f"options {missing}: each must be taken or rejected, not both or neither")
    for opt in ORDER:
        if opt in takes:
            _ADDERS[opt](p, **takes[opt])
        else:
            reject(p, opt, mode, rejects[opt])
    if rejects:
        lines = "; ".join(f"{o}: {why}" for o, why in rejects.items())
        extra = f"Common options --mode {mode} does not take: {lines}."
        p.epilog = f"{p.epilog}\n\n{extra}" if p.epilog else extra


def reject(p: argparse.ArgumentParser, option: str, mode: str, why: str) -> None:
    """``option`` is hidden and, when given, one clear error (exit 2). ``--seeds 1`` is
    accepted (one seed is what every mode runs)."""
    p.add_argument(option, action=_Reject, nargs="?", default=argparse.SUPPRESS,
                   help=argparse.SUPPRESS, why=f"--mode {mode} does not take {option}: {why}")


def add_alias(p: argparse.ArgumentParser, old: str, new: str, dest: str, *,
              type: Callable[[str], Any] | None = None, append: bool = False, note: str = "") -> None:
    """The old spelling ``old`` of ``new``: hidden, the same ``dest``, a deprecation note."""
    p.add_argument(old, dest=dest, type=type, action=_Alias, new=new, append=append, note=note,
                   default=argparse.SUPPRESS, help=argparse.SUPPRESS)


# ----------------------------------------------------------------------------- parsing


def parse_loss_spec(spec: str) -> tuple[tuple[str, int], float]:
    """``SW:PORT=RATE`` -> ``((sw, port), rate)`` (:func:`topologies.spec.parse_loss`, the
    one parser and checks every command shares); ArgumentTypeError with its message."""
    from topologies.spec import SpecError, parse_loss

    try:
        return parse_loss(spec)
    except SpecError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def loss_dict(entries: Sequence[tuple[tuple[str, int], float]]) -> dict[tuple[str, int], float]:
    """``args.loss`` as ``{(switch, port): rate}`` (a later entry for a port wins)."""
    return dict(entries)


def check_full_batch(workers: int, batch: int, option: str = "--batch", seed: int = 0) -> None:
    """Every worker's shard of the digits training set holds a full batch of ``batch``
    (else a run would never step); :class:`controller.argtypes.OptionError` otherwise."""
    from hosts.training import load_data

    n = len(load_data("digits", seed).y_train)
    if n // workers < batch:
        raise argtypes.OptionError(
            f"{option}: must be <= {n // workers}, the smallest shard of the {n} training "
            f"examples over --workers {workers} (got {batch})")


def check_ina_budget(topo: Any, ps: str, workers: list[str], budget: int) -> None:
    """``--budget`` switches the INA placement can take for this PS and these workers
    (:class:`controller.argtypes.OptionError` if not), before a run plans its job."""
    from controller.ina import InaJob
    from controller.p4runtime import DeployError
    from controller.placement import PlacementError

    try:
        InaJob.plan(topo, ps, workers, budget, 1000.0, 1)
    except PlacementError as e:
        raise argtypes.OptionError(f"--budget {budget}: {e}") from None
    except DeployError as e:
        raise argtypes.OptionError(f"ina: {e}") from None


def workers_type(*, hosts: bool = False, allow_all: bool = False,
                 zero_is_all: bool = False) -> Callable[[str], Any]:
    """The ``--workers`` parser of :func:`add_workers` (``zero_is_all``: ``0`` means all,
    for an old spelling such as ``--gpus 0``)."""

    def parse(spec: str) -> Any:
        s = str(spec).strip()
        if hosts:
            if s.lower() == "all":
                return ""
            if s.lstrip("+-").isdigit() and int(s) < 1:
                raise argparse.ArgumentTypeError(f"{spec!r}: a count must be >= 1")
            return s
        if allow_all and s.lower() == "all":
            return None
        try:
            n = int(s)
        except ValueError:
            want = "a count N" + (" or all" if allow_all else "")
            raise argparse.ArgumentTypeError(f"{spec!r}: this mode takes {want}, not a host list") from None
        if allow_all and zero_is_all and n == 0:  # the old spelling of all (--gpus 0)
            return None
        if n < 1:
            raise argparse.ArgumentTypeError(f"{spec!r}: a count must be >= 1")
        return n

    parse.__name__ = "workers"
    return parse


class _StoreGiven(argparse._StoreAction):
    """Store, and record ``<dest>_given = True``."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, values)
        setattr(namespace, f"{self.dest}_given", True)


class _LossAction(argparse.Action):
    """``--loss SW:PORT=RATE``, appended as ``((sw, port), rate)``."""

    def __init__(self, option_strings: list[str], dest: str,
                 legacy: tuple[str, str] | None = None, **kw: Any) -> None:
        super().__init__(option_strings, dest, **kw)
        self.legacy = legacy

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        spec = str(values).strip()
        if self.legacy is not None:
            try:
                rate = float(spec)
            except ValueError:
                pass
            else:
                new, dest = self.legacy
                if not 0.0 <= rate <= 1.0:
                    raise argparse.ArgumentError(self, f"{spec!r}: a rate must be in [0, 1]")
                deprecated(parser, f"--loss {spec} (a bare rate)", f"{new} {spec}",
                           "--loss now takes SW:PORT=RATE")
                setattr(namespace, dest, rate)
                return
        try:
            entry = parse_loss_spec(spec)
        except argparse.ArgumentTypeError as e:
            raise argparse.ArgumentError(self, str(e)) from None
        items = list(getattr(namespace, self.dest, None) or [])
        items.append(entry)
        setattr(namespace, self.dest, items)


class _Alias(argparse.Action):
    """A deprecated spelling: store (or append) into the new option's ``dest``."""

    def __init__(self, option_strings: list[str], dest: str, new: str = "", append: bool = False,
                 note: str = "", **kw: Any) -> None:
        super().__init__(option_strings, dest, **kw)
        self.new, self.append, self.note = new, append, note

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        deprecated(parser, option_string or self.option_strings[0], self.new, self.note)
        if self.append:
            items = list(getattr(namespace, self.dest, None) or [])
            items.append(values)
            values = items
        setattr(namespace, self.dest, values)


class _Reject(argparse.Action):
    """A common option the mode cannot take: one clear error."""

    def __init__(self, option_strings: list[str], dest: str, why: str = "", **kw: Any) -> None:
        super().__init__(option_strings, dest, **kw)
        self.why = why

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        if option_string == "--seeds" and values is not None and str(values).strip() == "1":
            return  # one seed: what the mode runs anyway
        parser.error(self.why)
