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
from dataclasses import dataclass
from typing import Any, NoReturn

__all__ = ["MAX_VALUES", "Listed", "Names", "Parser", "Range", "count", "described", "fraction", "integer",
           "listed", "names", "natural", "nonnegative", "number", "port", "positive", "probability", "values"]


def _fmt(v: float) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


@dataclass(frozen=True)
class Range:
    """An argparse ``type=``: an int (``kind``) or a finite float in a range; ``lo``/``hi``
    inclusive bounds, ``above``/``below`` strict ones (None: open)."""

    kind: type
    lo: float | None = None
    hi: float | None = None
    above: float | None = None
    below: float | None = None

    @property
    def __name__(self) -> str:  # what argparse calls the type in its own messages
        return self.kind.__name__

    def __call__(self, text: str) -> Any:
        try:
            v = self.kind(str(text).strip())
        except ValueError:
            what = "an integer" if self.kind is int else "a number"
            raise argparse.ArgumentTypeError(f"expected {what} (got {text!r})") from None
        if self.kind is float and not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"expected a finite number (got {text!r})")
        if not self.holds(v):
            raise argparse.ArgumentTypeError(self.complaint(v))
        return v

    def complaint(self, v: float) -> str:
        """What is wrong with ``v``: an integer's broken bound (``must be >= 1``), a
        number's whole range (``must be in [0, 1]``)."""
        if self.kind is int and self.lo is not None and v < self.lo:
            return f"must be >= {_fmt(self.lo)} (got {_fmt(v)})"
        if self.kind is int and self.hi is not None and v > self.hi:
            return f"must be <= {_fmt(self.hi)} (got {_fmt(v)})"
        return f"must be {self.describe()} (got {_fmt(v)})"

    def holds(self, v: float) -> bool:
        """Whether ``v`` is in the range."""
        return not ((self.lo is not None and v < self.lo) or (self.hi is not None and v > self.hi)
                    or (self.above is not None and v <= self.above)
                    or (self.below is not None and v >= self.below))

    def describe(self) -> str:
        """``>= 1``, ``in 1..64``, ``in (0, 1]``, ...: what the error message says."""
        low = (f"[{_fmt(self.lo)}" if self.lo is not None
               else f"({_fmt(self.above)}" if self.above is not None else None)
        high = (f"{_fmt(self.hi)}]" if self.hi is not None
                else f"{_fmt(self.below)})" if self.below is not None else None)
        if low and high:
            if self.kind is int and self.lo is not None and self.hi is not None:
                return f"in {_fmt(self.lo)}..{_fmt(self.hi)}"
            return f"in {low}, {high}"
        if low:
            return f">= {_fmt(self.lo)}" if self.lo is not None else f"> {_fmt(self.above)}"  # type: ignore[arg-type]
        if high:
            return f"<= {_fmt(self.hi)}" if self.hi is not None else f"< {_fmt(self.below)}"  # type: ignore[arg-type]
        return "any " + self.__name__


@dataclass(frozen=True)
class Listed:
    """An argparse ``type=``: a comma-separated list, each item checked by ``item`` (a
    :class:`Range`); an empty list is an error unless ``empty`` (then it is none)."""

    item: Range
    empty: bool = False

    @property
    def __name__(self) -> str:
        return f"list of {self.item.__name__}"

    def __call__(self, text: str) -> list[Any]:
        parts = [t.strip() for t in str(text).split(",") if t.strip()]
        if not parts and not self.empty:
            raise argparse.ArgumentTypeError(f"expected comma-separated values (got {text!r})")
        return [self.item(t) for t in parts]


def listed(item: Range, *, empty: bool = False) -> Listed:
    """A comma-separated list of ``item`` values (``2,5,10``); ``empty``: ``''`` is none."""
    return Listed(item, empty)


@dataclass(frozen=True)
class Names:
    """An argparse ``type=``: a comma-separated list of names, each one of ``choices``; an
    empty list is an error (what a ``choices=`` is for one name)."""

    choices: tuple[str, ...]

    @property
    def __name__(self) -> str:
        return "list of names"

    def __call__(self, text: str) -> list[str]:
        parts = [t.strip() for t in str(text).split(",") if t.strip()]
        if not parts:
            raise argparse.ArgumentTypeError(f"expected comma-separated names (got {text!r})")
        bad = [t for t in parts if t not in self.choices]
        if bad:
            raise argparse.ArgumentTypeError(f"unknown {', '.join(bad)} (choose from {', '.join(self.choices)})")
        return parts


def names(*choices: str) -> Names:
    """A comma-separated list of names out of ``choices`` (``ps,ring``)."""
    return Names(tuple(choices))


def integer(lo: int | None = None, hi: int | None = None) -> Range:
    """An integer in ``[lo, hi]`` (either bound may be left open)."""
    return Range(int, lo, hi)


def number(lo: float | None = None, hi: float | None = None, *, above: float | None = None,
           below: float | None = None) -> Range:
    """A finite float in ``[lo, hi]``; ``above``/``below``: strict bounds instead."""
    return Range(float, lo, hi, above, below)


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


def described(doc: str | None) -> str:
    """A command's ``--help`` description: the first paragraph of its module docstring,
    whole (its first line alone stops mid-sentence)."""
    return " ".join((doc or "").strip().split("\n\n")[0].split())


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose error is one line and exit status 2, its usage left to
    ``--help``: ``PROG: error: argument --window: must be >= 1 (got 0) (PROG --help)``."""

    #: the name the error line starts with (None: the parser's ``prog``)
    error_prog: str | None = None

    def error(self, message: str) -> NoReturn:  # noqa: D102 (argparse's)
        self.exit(2, f"{self.error_prog or self.prog}: error: {message} ({self.prog} --help)\n")
