"""The checks of command-line options every command shares: the value types of
:mod:`wire.argtypes` (argparse ``type=`` callables, re-exported here) and the checks
against a topology that follow its build.

A bad option is one line and exit status 2, before anything starts (no network, no
process)::

    python -m experiments: error: argument --budget: must be >= 0 (got -3) (python -m experiments --help)
    gradctl: error: --budget: must be >= 0 (got -3) (gradctl place --help)

The ``type=`` callables raise :class:`argparse.ArgumentTypeError`, which argparse reports
with the option's name. What needs the topology (a host, a switch, a count no larger than
the topology's) raises :class:`OptionError` from the ``check_*`` functions; the command
hands it to :func:`fail` (``parser.error``) right after building the topology, before the
network starts.

Used by ``gradctl`` (controller/) and ``python -m experiments``; the host agents use
:mod:`wire.argtypes` directly (they never import the control plane).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from typing import Any, NoReturn, Protocol

from wire.argtypes import (
    MAX_VALUES,
    Parser,
    Range,
    count,
    fraction,
    integer,
    natural,
    nonnegative,
    number,
    port,
    positive,
    probability,
    values,
)

__all__ = ["MAX_VALUES", "OptionError", "Parser", "Range", "check_at_most", "check_hosts",
           "check_switches", "count", "fail", "fraction", "integer", "natural", "nonnegative",
           "number", "port", "positive", "probability", "values"]


class OptionError(ValueError):
    """A value fine on its own but not with the topology or the other options."""


def _fmt(v: float) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


# ----------------------------------------------------------------------------- topology


class _Topo(Protocol):
    name: str

    def hosts(self) -> list[str]: ...

    def switches(self) -> list[str]: ...


def _names(names: Iterable[str]) -> str:
    names = list(names)
    return ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")


def check_hosts(topo: _Topo, option: str, names: Sequence[str], *,
                among: Sequence[str] | None = None) -> list[str]:
    """``names`` (stripped), each a host of ``topo`` (of ``among`` if given); else
    :class:`OptionError` naming ``option``."""
    pool = list(among) if among is not None else topo.hosts()
    out = [str(n).strip() for n in names]
    bad = [n for n in out if n not in pool]
    if bad:
        what = "a host" if among is None else "one of the hosts it may name"
        raise OptionError(f"{option}: {', '.join(map(repr, bad))} is not {what} of {topo.name} "
                          f"(hosts: {_names(pool)})")
    return out


def check_switches(topo: _Topo, option: str, names: Sequence[str]) -> list[str]:
    """``names``, each a switch of ``topo``; else :class:`OptionError`."""
    out = [str(n).strip() for n in names]
    bad = [n for n in out if n not in topo.switches()]
    if bad:
        raise OptionError(f"{option}: {', '.join(map(repr, bad))} is not a switch of {topo.name} "
                          f"(switches: {_names(topo.switches())})")
    return out


def check_at_most(option: str, value: Any, limit: int | float, why: str) -> None:
    """``value <= limit``, else :class:`OptionError` (``why``: what sets the limit)."""
    if value is not None and value > limit:
        raise OptionError(f"{option}: must be <= {_fmt(limit)}, {why} (got {_fmt(value)})")


def fail(parser: argparse.ArgumentParser, e: Exception) -> NoReturn:
    """``parser.error`` with ``e``'s message (for :class:`OptionError` and the topology's
    own errors): one line, exit status 2."""
    parser.error(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)
