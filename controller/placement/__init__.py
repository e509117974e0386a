"""Placement of K programmable switches for in-network aggregation (ina).

Given a topology (``networkx.Graph``: nodes ``kind`` = ``"host"``/``"switch"``, edges
``capacity`` in Mbit/s), one parameter server (PS) ``d``, its workers ``W``, a budget
``K`` of programmable switches and a per-switch processing capacity ``C``, choose the
switches ``S`` that maximise the aggregation throughput ``gamma`` and the per-worker
split of the gradient stream over them (the gradient routing policy).

* :class:`PlacementProblem` validates the input and precomputes shortest paths.
* :func:`solve_lp` solves the placement LP ("P2") for a fixed ``S``.
* :func:`greedy_placement` is the specified greedy (S = {}; add the switch whose LP has
  the largest gamma; stop at |S| = K).
* :func:`optimal_placement` is the exact optimum as a MILP (small topologies).
* :func:`random_placement`, :func:`tor_first_placement`, :func:`degree_first_placement`
  are baselines, each evaluated by the same LP.
* :func:`routing_policy` turns the LP's rates into per-fragment switch tags.

The LP, the treatment of the PS's ToR switch ``s_d`` and the tag rule are written down
in ``docs/placement.md``. In short: ``s_d`` always aggregates and is outside the budget
(``tor_in_budget=True`` makes it an ordinary candidate that needs a budget slot); flows
follow one shortest path each (``multipath=True``: split evenly over equal-cost next
hops, the expected load of ECMP routing).

Modules (each imports only those above it; this package re-exports their names):

* ``problem``: :class:`PlacementError`, :class:`PlacementProblem` (input validation,
  paths, worker groups) and the results :class:`LPResult`, :class:`RoundTrace`,
  :class:`Placement`.
* ``lp``: the LP (``_Model``, with re-assignable switch slots) and :func:`solve_lp`.
* ``symmetry``: colour refinement and automorphisms of the instance (``_Symmetry``:
  classes of equivalent candidates; ``_Reduced``: an LP solved through its quotient).
* ``greedy``: :func:`greedy_placement` (uses ``lp`` and ``symmetry``).
* ``milp``: :func:`optimal_placement` (uses ``lp``).
* ``baselines``: :func:`random_placement`, :func:`tor_first_placement`,
  :func:`degree_first_placement` (use ``lp``).
* ``policy``: :class:`RoutingPolicy` and :func:`routing_policy` (uses ``problem`` only).
"""

from .baselines import degree_first_placement, random_placement, tor_first_placement
from .greedy import greedy_placement
from .lp import _Model as _Model
from .lp import solve_lp
from .milp import optimal_placement
from .policy import RoutingPolicy, routing_policy
from .problem import LPResult, Placement, PlacementError, PlacementProblem, RoundTrace
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
