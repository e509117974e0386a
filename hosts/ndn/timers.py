"""The NDN agents' timing rules: the GPU's probe timer and the PS's estimate of when a
GPU finishes its next gradient."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["finish_estimate", "probe_timeout"]


def probe_timeout(delays: Sequence[float], factor: float, lo: float, hi: float, initial: float) -> float:
    """Step 5.3.1's probe timer: ``factor`` x the largest of the last five send-to-update
    delays, within ``lo`` .. ``hi``; ``initial`` before any delay is known."""
    recent = list(delays)[-5:]
    if not recent:
        return initial
    return min(hi, max(lo, factor * max(recent)))


def finish_estimate(old: float | None, took: float, wait: float, rtt: float) -> float:
    """Step 5.1's estimate of a GPU's finishing time after one more gradient.

    ``took``: round start (or the GPU's previous gradient) to its first segment; ``wait``:
    the PS's first Interest to that segment; ``rtt``: how long an answer given at once
    takes (the PS: the smallest ``wait`` seen, or its measured round trip plus four
    deviations when larger: the queue at its port). A GPU that held the
    Interest (``wait`` clearly above ``rtt``) answered when it finished, so ``took`` is a
    measurement, averaged with the old estimate; one that answered at once was done
    before the PS asked, so the estimate shrinks to 0.7 x the smaller of the two."""
    if old is None:
        return took
    if wait > rtt + 0.02:
        return 0.5 * old + 0.5 * took
    return 0.7 * min(old, took)
