"""Placement of K programmable switches for in-network aggregation.

Transitional step: the former ``controller/placement.py`` is moved whole to
``symmetry.py`` (so that ``git log --follow`` keeps its history) and re-exported here;
the next commit splits it into one module per technique.
"""

from .symmetry import (
    LPResult,
    Placement,
    PlacementError,
    PlacementProblem,
    RoundTrace,
    RoutingPolicy,
    degree_first_placement,
    greedy_placement,
    optimal_placement,
    random_placement,
    routing_policy,
    solve_lp,
    tor_first_placement,
)
from .symmetry import _Model as _Model
from .symmetry import _Reduced as _Reduced
from .symmetry import _Symmetry as _Symmetry

__all__ = [
    "LPResult",
    "Placement",
    "PlacementError",
    "PlacementProblem",
    "RoundTrace",
    "RoutingPolicy",
    "degree_first_placement",
    "greedy_placement",
    "optimal_placement",
    "random_placement",
    "routing_policy",
    "solve_lp",
    "tor_first_placement",
]
