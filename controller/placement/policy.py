"""The gradient routing policy: the LP's per-worker rates as per-fragment switch tags."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .problem import LPResult, Placement, PlacementError

__all__ = ["RoutingPolicy", "routing_policy"]


@dataclass(frozen=True)
class RoutingPolicy:
    """Per-fragment gradient routing: which switch aggregates each worker's fragment.

    Attributes:
        num_fragments: fragments per gradient (``F``).
        switch_ids: tag value of every switch (device_id; 0 means "no aggregation").
        tor: ``s_d``.
        tags: ``tags[w][f]``: the id of the switch that must aggregate worker ``w``'s
            fragment ``f`` (a switch of ``S`` or ``s_d``), or 0: straight to the PS.
            The packet is routed via that switch (shortest path to it, then on to the
            PS), whether or not it lies on ``w``'s own shortest path to the PS.
        partial_tags: ``partial_tags[s][f]`` for ``s`` in ``S``: the tag the partial
            aggregate of fragment ``f`` leaves ``s`` with: ``s_d``'s id (merged again at
            ``s_d``) or 0 (straight to the PS); 0 also where ``s`` aggregates nothing.
        fan_in: ``fan_in[s][f]``: how many workers' values of fragment ``f`` switch ``s``
            (``S`` and ``s_d``) must sum before it sends the (partial) aggregate on; for
            ``s_d`` it counts the workers inside merged partials too. 0: ``s`` does not
            aggregate ``f``.
    """

    num_fragments: int
    switch_ids: dict[str, int]
    tor: str
    tags: dict[str, tuple[int, ...]]
    partial_tags: dict[str, tuple[int, ...]]
    fan_in: dict[str, tuple[int, ...]]

    def counts(self, worker: str) -> dict[int, int]:
        """How many of ``worker``'s fragments carry each tag."""
        out: dict[int, int] = {}
        for t in self.tags[worker]:
            out[t] = out.get(t, 0) + 1
        return out


def _largest_remainder(weights: Sequence[float], total: int) -> list[int]:
    """Integers summing to ``total`` in proportion to ``weights``; each within 1 of
    its exact share (ties: the earlier weight gets the extra unit)."""
    s = float(sum(weights))
    if s <= 0:
        out = [0] * len(weights)
        if out:
            out[-1] = total
        return out
    exact = [total * w / s for w in weights]
    base = [math.floor(e + 1e-9) for e in exact]
    rest = total - sum(base)
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - base[i]), i))
    for i in order[: max(rest, 0)]:
        base[i] += 1
    return base


def _spread(n: int) -> np.ndarray:
    """A fixed permutation slot -> fragment that spreads contiguous slot blocks over the
    whole gradient (stride ~ n/golden ratio, coprime with n), so each switch sees its
    fragments evenly over an iteration instead of in one burst."""
    if n <= 2:
        return np.arange(n)
    step = max(1, round(n * 0.6180339887))
    while math.gcd(step, n) != 1:
        step += 1
    return (np.arange(n) * step) % n


def _layout_slots(classes: dict[tuple[int, ...], list[str]], n_targets: int, f_n: int) -> np.ndarray:
    """``slot_target[c, slot]``: the target index of each slot of worker class ``c``
    (classes in ``classes``' order, keyed by their quota per target). Targets take
    nested blocks in order; the last target (direct) takes the leftovers."""
    quotas = list(classes)
    qarr = np.array(quotas, dtype=np.int64).reshape(len(quotas), n_targets)
    used = np.zeros((len(quotas), f_n), dtype=bool)
    slot_target = np.full((len(quotas), f_n), n_targets - 1, dtype=np.int64)

    for ti in range(n_targets - 1):  # direct (last) takes the leftovers
        need = qarr[:, ti]
        users = np.nonzero(need)[0]
        if users.size == 0:
            continue
        # fits[c, o]: class c has slots o..o+need-1 (cyclic) free
        occ = np.concatenate([used[users], used[users]], axis=1).astype(np.int64)
        cs = np.concatenate([np.zeros((users.size, 1), np.int64), occ.cumsum(axis=1)], axis=1)
        off = np.arange(f_n)
        ends = off[None, :] + need[users][:, None]
        fits = (cs[np.arange(users.size)[:, None], ends] - cs[:, off]) == 0
        weight = np.array([len(classes[quotas[c]]) for c in users])
        score = (fits * weight[:, None]).sum(axis=0)
        o = int(np.argmax(score))  # first offset that suits the most workers
        for row, c in enumerate(users):
            if fits[row, o]:
                sl = (o + np.arange(need[c])) % f_n
            else:  # no common block: the first free slots from o on, cyclically
                order = (o + np.arange(f_n)) % f_n
                sl = order[~used[c, order]][: need[c]]
            used[c, sl] = True
            slot_target[c, sl] = ti
    return slot_target


def _partial_tags(res: LPResult, fan: dict[str, np.ndarray], perm: np.ndarray,
                  tor_id: int) -> dict[str, tuple[int, ...]]:
    """Each switch's partial-aggregate tags: share via_tor/switch_out of its fragments
    (first in slot order) is merged at s_d (``tor_id``), the rest goes to the PS. Adds
    the merged fan-in to ``fan[res.tor]`` when s_d is active."""
    f_n = len(perm)
    partial_tags: dict[str, tuple[int, ...]] = {}
    inv = np.argsort(perm)  # fragment -> slot, to pick fragments in slot order
    for s in res.switches:
        frags = np.nonzero(fan[s])[0]
        out = res.switch_out.get(s, 0.0)
        share = res.via_tor.get(s, 0.0) / out if out > 0 and res.tor_active else 0.0
        n_tor = _largest_remainder([share, 1 - share], len(frags))[0] if frags.size else 0
        pt = np.zeros(f_n, dtype=np.int64)
        pick = frags[np.argsort(inv[frags], kind="stable")][:n_tor]
        pt[pick] = tor_id
        partial_tags[s] = tuple(int(v) for v in pt)
        if res.tor_active:
            fan[res.tor][pick] += fan[s][pick]
    return partial_tags


def routing_policy(placement: Placement | LPResult, num_fragments: int) -> RoutingPolicy:
    """Turn the LP's per-worker rates into per-fragment tags (see docs/placement.md).

    1. Quotas: worker ``w`` tags ``n[w,t]`` of its ``F`` fragments with target ``t``,
       ``n`` = largest-remainder rounding of ``F * rates[w][t] / gamma`` (each count is
       within one fragment of the LP's share).
    2. Alignment: a switch aggregates fragment ``f`` only across the workers that tag
       ``f`` with it, and its output rate is the number of distinct fragments tagged with
       it; so for every target the workers' fragment sets are made to nest. Targets are
       laid out in slot space in order (S in selection order, ``s_d``, then direct):
       each gets the smallest offset at which every worker class using it has a free
       contiguous block of its quota; workers with equal rates get identical tags.
       Direct sending (0) takes what is left.
    3. Slots map to fragments through one fixed spreading permutation for all workers.

    Tag values are the switches' ``device_id`` (see :meth:`PlacementProblem.switch_ids`);
    given a bare :class:`LPResult` (no graph at hand) they are 1, 2, ... in the order
    ``S``, ``s_d``.
    """
    if isinstance(num_fragments, bool) or not isinstance(num_fragments, int | np.integer):
        raise PlacementError(f"num_fragments must be an integer, got {num_fragments!r}")
    if num_fragments < 1:
        raise PlacementError(f"num_fragments must be >= 1, got {num_fragments}")
    res = placement.result if isinstance(placement, Placement) else placement
    prob_ids = placement.problem.switch_ids() if isinstance(placement, Placement) else None
    f_n = int(num_fragments)
    targets = [*res.switches, res.tor, res.ps]
    ids = prob_ids if prob_ids is not None else {s: i + 1 for i, s in enumerate(targets[:-1])}
    tag_of = {t: ids[t] for t in targets[:-1]}
    tag_of[res.ps] = 0

    # classes of workers with identical rate vectors get identical tag sequences
    classes: dict[tuple[int, ...], list[str]] = {}
    for w, r in res.rates.items():
        quota = tuple(_largest_remainder([r.get(t, 0.0) for t in targets], f_n))
        classes.setdefault(quota, []).append(w)
    quotas = list(classes)
    slot_target = _layout_slots(classes, len(targets), f_n)

    perm = _spread(f_n)  # slot -> fragment
    target_tags = np.array([tag_of[t] for t in targets], dtype=np.int64)
    tags: dict[str, tuple[int, ...]] = {}
    fan = {t: np.zeros(f_n, dtype=np.int64) for t in targets[:-1]}
    for c, quota in enumerate(quotas):
        per_frag = np.empty(f_n, dtype=np.int64)
        per_frag[perm] = slot_target[c]
        seq = tuple(int(t) for t in target_tags[per_frag])
        k = len(classes[quota])
        for w in classes[quota]:
            tags[w] = seq
        for ti, t in enumerate(targets[:-1]):
            fan[t] += k * (per_frag == ti)

    partial_tags = _partial_tags(res, fan, perm, tag_of[res.tor])
    fan_in = {
        t: tuple(int(v) for v in fan[t]) for t in targets[:-1] if t != res.tor or res.tor_active
    }
    return RoutingPolicy(
        num_fragments=f_n,
        switch_ids={t: ids[t] for t in targets[:-1]},
        tor=res.tor,
        tags=tags,
        partial_tags=partial_tags,
        fan_in=fan_in,
    )
