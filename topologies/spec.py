"""Parse the topology and link-loss specs users type on command lines.

* :func:`parse_topology` -- ``TOPO``: a builder spec (``fat-tree:4``, ``linear:3,2``,
  ``star:4,bw=10``) or a topology file (JSON/YAML, see ``topologies/README.md``);
* :func:`parse_loss` -- ``SW:PORT=RATE`` (``s1:2=0.05``): the emulated loss probability of
  one switch egress port, with the one set of checks every command applies to it.

Both raise :class:`SpecError`, a :class:`TopologyError` whose message is the one line a
command line prints.
"""

from __future__ import annotations

import inspect
import math
import os
from typing import Any

from .base import Topology, TopologyError
from .builders import BUILDERS
from .fileformat import load

__all__ = ["SPEC_EXAMPLES", "SpecError", "check_loss_rate", "parse_loss", "parse_topology"]

SPEC_EXAMPLES = "fat-tree:4, leaf-spine:2,4,2, bcube:4,2, star:4, linear:3"


class SpecError(TopologyError):
    """A topology or loss spec that names nothing valid (a one-line message)."""


def _number(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        return float(text)


def _builder_args(spec: str, name: str, argtext: str, params: list[inspect.Parameter]
                  ) -> dict[str, Any]:
    """The keyword arguments of builder ``name`` from ``argtext`` (``4,2,bw=10``)."""
    positional: list[Any] = []
    keywords: dict[str, Any] = {}
    for item in filter(None, (a.strip() for a in argtext.split(","))):
        key, eq, value = item.partition("=")
        try:
            parsed = _number(value if eq else key)
        except ValueError:
            raise SpecError(f"topology {spec!r}: {item!r} is not a number") from None
        if eq:
            if key not in {p.name for p in params}:
                raise SpecError(
                    f"topology {spec!r}: {name} has no argument {key!r} "
                    f"(arguments: {', '.join(p.name for p in params)})"
                )
            keywords[key] = parsed
        elif keywords:
            raise SpecError(f"topology {spec!r}: positional argument after keyword")
        else:
            positional.append(parsed)
    usage = f"{name}:{','.join(p.name for p in params if p.default is inspect.Parameter.empty)}"
    if len(positional) > len(params):
        raise SpecError(f"topology {spec!r}: too many arguments (usage: {usage})")
    for p, value in zip(params, positional, strict=False):
        if p.name in keywords:
            raise SpecError(f"topology {spec!r}: {p.name} given twice")
        keywords[p.name] = value
    missing = [p.name for p in params
               if p.default is inspect.Parameter.empty and p.name not in keywords]
    if missing:
        raise SpecError(f"topology {spec!r}: missing {', '.join(missing)} (usage: {usage})")
    return keywords


def parse_topology(spec: str) -> Topology:
    """A topology from a builder spec (``fat-tree:4``, ``linear:3,2``, ``star:4,bw=10``)
    or a topology file path; :class:`SpecError` with a clear message otherwise."""
    if os.path.isdir(spec):
        raise SpecError(f"topology file {spec!r} is a directory")
    if os.path.isfile(spec):
        try:
            return load(spec)
        except TopologyError as e:
            raise SpecError(str(e)) from None
    name, sep, argtext = spec.partition(":")
    builder = BUILDERS.get(name.replace("-", "_"))
    if builder is None:
        if os.sep in spec or spec.endswith((".json", ".yaml", ".yml")):
            raise SpecError(f"topology file {spec!r} not found")
        known = ", ".join(sorted(b.replace("_", "-") for b in BUILDERS))
        raise SpecError(
            f"unknown topology {spec!r}: give BUILDER:ARGS ({SPEC_EXAMPLES}; builders: "
            f"{known}) or a topology file"
        )
    params = list(inspect.signature(builder).parameters.values())
    keywords = _builder_args(spec, name, argtext if sep else "", params)
    try:
        return builder(**keywords)
    except TopologyError as e:
        raise SpecError(f"topology {spec!r}: {e}") from None


def check_loss_rate(p: Any) -> float:
    """``p`` if it is a loss probability (a finite number in [0, 1]); SpecError otherwise."""
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not math.isfinite(p):
        raise SpecError(f"loss rate must be a number in [0, 1], got {p!r}")
    if not 0.0 <= p <= 1.0:
        raise SpecError(f"loss rate must be in [0, 1], got {p!r}")
    return p


def parse_loss(spec: str) -> tuple[tuple[str, int], float]:
    """``SW:PORT=RATE`` (e.g. ``s1:2=0.05``) -> ``(("s1", 2), 0.05)``: a switch name, a
    port >= 0 and a rate in [0, 1]; :class:`SpecError` with a clear message otherwise."""
    where, sep, rate_s = spec.partition("=")
    switch, colon, port_s = where.rpartition(":")
    try:
        if not sep or not colon or not switch.strip():
            raise ValueError
        port, rate = int(port_s), float(rate_s)
    except ValueError:
        raise SpecError(
            f"bad loss spec {spec!r}: expected SWITCH:PORT=RATE, e.g. s1:2=0.05") from None
    if not 0.0 <= rate <= 1.0:
        raise SpecError(f"bad loss spec {spec!r}: the rate must be in [0, 1]")
    if port < 0:
        raise SpecError(f"bad loss spec {spec!r}: the port must be >= 0")
    return (switch.strip(), port), rate
