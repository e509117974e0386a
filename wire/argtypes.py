"""Command-line value types every command and agent shares: argparse ``type=`` callables
that check a value's range where it is parsed.

A bad value is one error line and exit status 2 (:class:`Parser`: argparse's error line,
the usage left to ``--help``), before anything starts::

    python -m hosts.ina.worker: error: argument --window: must be >= 1 (got 0) (python -m hosts.ina.worker --help)

The callables raise :class:`argparse.ArgumentTypeError` (argparse adds the option's name).
The commands that start agents (``gradctl``, ``python -m experiments``) use the same ones
through :mod:`controller.argtypes`, which adds the checks against a topology; this module
imports nothing of gradnet, so the agents on the hosts can use it too.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import NoReturn

__all__ = ["MAX_VALUES", "Parser", "count", "fraction", "integer", "natural", "nonnegative",
           "number", "port", "positive", "probability", "values"]


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
#: The largest gradient a command or agent takes, in float32 values (64 MiB a copy): a
#: bound on memory checked before anything starts, far above what an emulation runs.
MAX_VALUES = 2**24
#: A gradient's length in values.
values = integer(1, MAX_VALUES)


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose error is one line and exit status 2, its usage left to
    ``--help``: ``PROG: error: argument --window: must be >= 1 (got 0) (PROG --help)``."""

    #: the name the error line starts with (None: the parser's ``prog``)
    error_prog: str | None = None

    def error(self, message: str) -> NoReturn:  # noqa: D102 (argparse's)
        self.exit(2, f"{self.error_prog or self.prog}: error: {message} ({self.prog} --help)\n")
