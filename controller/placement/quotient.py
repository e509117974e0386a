"""Colour refinement (1-WL) and LP quotients for the placement's symmetry reduction.

:func:`_refine` partitions the nodes of a labelled graph by colour refinement;
:func:`_solve_quotient` solves an LP in coordinate form through its quotient by the
refinement of its rows and columns (``controller/placement/symmetry.py`` uses both).
"""

from __future__ import annotations

import numpy as np
from ortools.linear_solver import pywraplp


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: a well-spread 64-bit hash of each element (wraps mod 2^64)."""
    x = x.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


def _refine(colors: np.ndarray, src: np.ndarray, dst: np.ndarray, lab: np.ndarray) -> np.ndarray:
    """Colour refinement (1-WL): a node's new colour is its old one plus the multiset of
    (label, colour) over its in-arcs, until the number of colours stops growing. Colours
    are ranks of hashes of that history, so they do not depend on node numbering and two
    copies refined together get comparable colours."""
    lab_h = _mix(lab.astype(np.uint64) + np.uint64(0x51ED27))
    n_col = len(np.unique(colors))
    for _ in range(len(colors)):
        acc = np.zeros(len(colors), dtype=np.uint64)
        np.add.at(acc, dst, _mix(lab_h ^ colors[src].astype(np.uint64)))
        key = _mix(colors.astype(np.uint64)) ^ (acc * np.uint64(0xD6E8FEB86659FD93))
        _, new = np.unique(key, return_inverse=True)
        new = new.astype(np.int64).ravel()
        m = int(new.max()) + 1 if len(new) else 0
        colors = new
        if m <= n_col:
            break
        n_col = m
    return colors


_Coords = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
               np.ndarray, np.ndarray]


def _prune(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, row_lb: np.ndarray,
           row_ub: np.ndarray, col_lb: np.ndarray, col_ub: np.ndarray,
           obj: np.ndarray) -> tuple[_Coords, np.ndarray]:
    """The LP without what cannot matter, and the mask of the columns kept."""
    # drop what cannot matter: columns fixed at 0, zero entries, and rows that 0
    # satisfies and that have no entries (links no path uses) or no bounds
    keep_c = (col_ub > 0) | (col_lb > 0)
    vals = np.where(keep_c[cols], vals, 0.0)
    used = np.bincount(rows[vals != 0], minlength=len(row_lb)) > 0
    trivial = (row_lb <= 0) & (row_ub >= 0) & ~used
    keep_r = ~trivial & (np.isfinite(row_lb) | np.isfinite(row_ub))
    cmap = np.cumsum(keep_c) - 1
    rmap = np.cumsum(keep_r) - 1
    ok = keep_c[cols] & keep_r[rows] & (vals != 0)
    rows, cols, vals = rmap[rows[ok]], cmap[cols[ok]], vals[ok]
    row_lb, row_ub = row_lb[keep_r], row_ub[keep_r]
    col_lb, col_ub, obj = col_lb[keep_c], col_ub[keep_c], obj[keep_c]
    return (rows, cols, vals, row_lb, row_ub, col_lb, col_ub, obj), keep_c


def _colour_classes(lp: _Coords) -> tuple[np.ndarray, np.ndarray, float]:
    """Row classes, column classes (colour refinement of the LP's rows and columns) and
    the scale of its coefficients."""
    rows, cols, vals, row_lb, row_ub, col_lb, col_ub, obj = lp
    n_r = len(row_lb)

    # initial colours: rows by their bounds, columns by bounds and objective (hashed: a
    # collision only coarsens the partition, which the check below catches)
    def h(*parts: np.ndarray) -> np.ndarray:
        out = np.zeros(len(parts[0]), dtype=np.uint64)
        for p in parts:
            out = _mix(out ^ np.ascontiguousarray(p, dtype=float).view(np.uint64))
        return out

    init = np.concatenate([h(row_lb, row_ub), h(col_lb, col_ub, obj) ^ np.uint64(1)])
    _, init = np.unique(init, return_inverse=True)
    scale = float(np.abs(vals).max())
    # coefficients equal to 12 significant digits share a label
    _, lab = np.unique(np.round(vals / scale, 12), return_inverse=True)
    lab = lab.ravel()
    col = _refine(
        init.ravel().astype(np.int64),
        np.concatenate([rows, cols + n_r]),
        np.concatenate([cols + n_r, rows]),
        np.concatenate([lab, lab]),
    )
    _, rc = np.unique(col[:n_r], return_inverse=True)
    _, cc = np.unique(col[n_r:], return_inverse=True)
    rc, cc = rc.ravel(), cc.ravel()
    return rc, cc, scale


def _solve_glop(quot: np.ndarray, rep_r: np.ndarray, rep_c: np.ndarray, lp: _Coords,
                size: np.ndarray, maximize: bool) -> tuple[float, np.ndarray] | None:
    """Solve the quotient LP (one variable per column class, one constraint per row
    class, objective weighted by class ``size``) with GLOP: its optimum and each class's
    value, or None where the solver fails."""
    _, _, _, row_lb, row_ub, col_lb, col_ub, obj = lp
    s = pywraplp.Solver.CreateSolver("GLOP")
    inf = s.infinity()
    y = [
        s.NumVar(float(col_lb[k]), min(float(col_ub[k]), inf), "") for k in rep_c.tolist()
    ]
    cons = [
        s.Constraint(max(float(row_lb[k]), -inf), min(float(row_ub[k]), inf))
        for k in rep_r.tolist()
    ]
    for i, j in zip(*np.nonzero(quot), strict=True):
        cons[i].SetCoefficient(y[j], float(quot[i, j]))
    for j, k in enumerate(rep_c.tolist()):
        if obj[k]:
            s.Objective().SetCoefficient(y[j], float(obj[k] * size[j]))
    if maximize:
        s.Objective().SetMaximization()
    else:
        s.Objective().SetMinimization()
    if s.Solve() != pywraplp.Solver.OPTIMAL:
        return None
    return s.Objective().Value(), np.array([v.solution_value() for v in y])


def _solve_quotient(
    rows: np.ndarray,
    cols: np.ndarray,
    vals: np.ndarray,
    row_lb: np.ndarray,
    row_ub: np.ndarray,
    col_lb: np.ndarray,
    col_ub: np.ndarray,
    obj: np.ndarray,
    *,
    maximize: bool,
    always: bool,
) -> tuple[float, np.ndarray] | None:
    """Solve an LP in coordinate form (``col_lb <= x <= col_ub``, ``row_lb <= A x <=
    row_ub``, optimise ``obj . x``) through its quotient by colour refinement. Returns the
    optimum and every column's value (its class's value; columns fixed at 0 are 0), or
    None where the quotient would not be much smaller (unless ``always``), is not
    equitable (a hash collision) or the solver fails."""
    n_all = len(col_ub)
    lp, keep_c = _prune(rows, cols, vals, row_lb, row_ub, col_lb, col_ub, obj)
    rows, cols, vals, row_lb, row_ub, col_lb, col_ub, obj = lp
    n_r, n_c = len(row_lb), len(col_ub)
    rc, cc, scale = _colour_classes(lp)
    n_rc, n_cc = int(rc.max()) + 1, int(cc.max()) + 1
    if n_r * n_cc > 4_000_000 or n_c * n_rc > 4_000_000 or (4 * n_cc > n_c and not always):
        return None  # too little symmetry for the quotient to pay off
    # block sums: each row's sum over each column class, each column's over each row class
    by_col = np.bincount(rows * n_cc + cc[cols], vals, n_r * n_cc).reshape(n_r, n_cc)
    by_row = np.bincount(cols * n_rc + rc[rows], vals, n_c * n_rc).reshape(n_c, n_rc)
    rep_r = np.zeros(n_rc, dtype=np.int64)
    rep_r[rc[::-1]] = np.arange(n_r)[::-1]  # first row of each class
    rep_c = np.zeros(n_cc, dtype=np.int64)
    rep_c[cc[::-1]] = np.arange(n_c)[::-1]
    quot = by_col[rep_r]
    tol = 1e-9 * scale
    if (
        np.abs(by_col - quot[rc]).max() > tol
        or np.abs(by_row - by_row[rep_c][cc]).max() > tol
        or not np.array_equal(row_lb[rep_r][rc], row_lb)
        or not np.array_equal(row_ub[rep_r][rc], row_ub)
        or not np.array_equal(col_lb[rep_c][cc], col_lb)
        or not np.array_equal(col_ub[rep_c][cc], col_ub)
        or not np.array_equal(obj[rep_c][cc], obj)
    ):
        return None  # not equitable (a hash collision): do not trust the quotient
    solved = _solve_glop(quot, rep_r, rep_c, lp, np.bincount(cc, minlength=n_cc), maximize)
    if solved is None:
        return None
    value, y_val = solved
    x = np.zeros(n_all)
    x[np.flatnonzero(keep_c)] = y_val[cc]
    return value, x
