"""Argument types every command line shares: argparse ``type=`` callables that check a
value where it is parsed, and the checks against a topology that follow its build.

A bad option is one line and exit status 2, before anything starts (no network, no
process)::

    gradctl place: error: argument --budget: must be >= 0 (got -3)

The ``type=`` callables (:func:`integer`, :func:`number` and the named ones below) raise
:class:`argparse.ArgumentTypeError`, which argparse reports with the option's name. What
needs the topology (a host, a switch, a port, a count no larger than the topology's)
raises :class:`OptionError` from the ``check_*`` functions; the command hands its message
to ``parser.error`` right after building the topology, before the network starts.

Used by ``gradctl`` (controller/), ``python -m experiments`` and the host agents: it
imports nothing of theirs.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NoReturn, Protocol

__all__ = ["OptionError", "check_at_most", "check_hosts", "check_switches", "count", "fail",
           "fraction", "integer", "natural", "nonnegative", "number", "port", "positive",
           "probability"]


class OptionError(ValueError):
    """A value fine on its own but not with the topology or the other options."""


def _fmt(v: float) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def integer(lo: int | None = None, hi: int | None = None) -> Callable[[str], int]:
    """An integer in ``[lo, hi]`` (either bound may be left open)."""

    def parse(text: str) -> int:
        try:
            v = int(str(text).strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer (got {text!r})") from None
        _check_range(v, lo, hi, None, None)
        return v

    parse.__name__ = "int"
    return parse


def number(lo: float | None = None, hi: float | None = None, *, above: float | None = None,
           below: float | None = None) -> Callable[[str], float]:
    """A finite float in ``[lo, hi]``; ``above``/``below``: strict bounds instead."""

    def parse(text: str) -> float:
        try:
            v = float(str(text).strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number (got {text!r})") from None
        if not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"expected a finite number (got {text!r})")
        _check_range(v, lo, hi, above, below)
        return v

    parse.__name__ = "float"
    return parse


def _check_range(v: float, lo: float | None, hi: float | None, above: float | None,
                 below: float | None) -> None:
    low = f"[{_fmt(lo)}" if lo is not None else (f"({_fmt(above)}" if above is not None else None)
    high = f"{_fmt(hi)}]" if hi is not None else (f"{_fmt(below)})" if below is not None else None)
    bad = ((lo is not None and v < lo) or (hi is not None and v > hi)
           or (above is not None and v <= above) or (below is not None and v >= below))
    if not bad:
        return
    if low and high:
        if isinstance(v, int) and lo is not None and hi is not None:
            rng = f"in {_fmt(lo)}..{_fmt(hi)}"
        else:
            rng = f"in {low}, {high}"
    elif low:
        rng = f">= {_fmt(lo)}" if lo is not None else f"> {_fmt(above)}"  # type: ignore[arg-type]
    else:
        rng = f"<= {_fmt(hi)}" if hi is not None else f"< {_fmt(below)}"  # type: ignore[arg-type]
    raise argparse.ArgumentTypeError(f"must be {rng} (got {_fmt(v)})")


#: A count of things where zero makes no sense (workers, epochs, rounds, values ...).
count = integer(1)
#: A non-negative integer (seeds, budgets, caps where 0 means none).
natural = integer(0)
#: A rate, a time, a learning rate: > 0.
positive = number(above=0.0)
#: A time or a rate where 0 means none or off: >= 0.
nonnegative = number(0.0)
#: A probability (a loss rate): in [0, 1].
probability = number(0.0, 1.0)
#: A share strictly between nothing and everything: in (0, 1).
fraction = number(above=0.0, below=1.0)
#: A TCP/UDP port.
port = integer(1, 65535)


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
