"""float32 <-> int32 fixed point for in-network aggregation (docs/ina.md, "Fixed point").

A worker sends ``q = round(g * 2**S)`` as int32; switches and the PS add the integers;
the result is ``sum(q) / 2**S``. The sum of N workers is exact (no wraparound) when every
worker keeps ``max |q| <= (2**31 - 1) // N``, which :func:`quantize` enforces: it never
clips, it raises :class:`FixedPointOverflow` naming the largest scale that would fit.
Rounding is to nearest, ties to even (``numpy.rint``).
"""

from __future__ import annotations

import math

import numpy as np

from hosts.packets import INA_MAX_WORKERS, INA_VALUES

__all__ = [
    "DEFAULT_SCALE_BITS",
    "FixedPointOverflow",
    "dequantize",
    "max_abs_q",
    "max_scale_bits",
    "num_fragments",
    "pad_to_fragments",
    "quantize",
]

DEFAULT_SCALE_BITS = 16
_INT32_MAX = 2**31 - 1
_MAX_SCALE_BITS = 62  # beyond this float64 scaling of any float32 overflows int32 anyway


class FixedPointOverflow(ValueError):
    """A gradient whose fixed-point sum over N workers could overflow int32."""


def max_abs_q(num_workers: int) -> int:
    """Largest ``|q|`` a worker may send so that the sum of ``num_workers`` fits int32."""
    if not 1 <= num_workers <= INA_MAX_WORKERS:
        raise ValueError(f"num_workers must be in 1..{INA_MAX_WORKERS}, got {num_workers}")
    return _INT32_MAX // num_workers


def _scaled(g: np.ndarray, scale_bits: int) -> np.ndarray:
    # float64 keeps every float32 exactly; multiplying by 2**S is exact too.
    return np.rint(g.astype(np.float64, copy=False) * math.ldexp(1.0, scale_bits))


def max_scale_bits(gradient: np.ndarray, num_workers: int) -> int | None:
    """Largest ``S`` (0..62) for which ``gradient`` passes the overflow bound; None if
    not even ``S = 0`` does."""
    g = np.asarray(gradient)
    bound = max_abs_q(num_workers)
    peak = float(np.max(np.abs(g))) if g.size else 0.0
    if peak == 0.0:
        return _MAX_SCALE_BITS
    # analytic guess, then step to the exact edge (rounding can go either way)
    s = min(_MAX_SCALE_BITS, max(0, math.floor(math.log2(bound / peak))))
    while s > 0 and abs(_scaled(np.array([peak]), s)[0]) > bound:
        s -= 1
    while s < _MAX_SCALE_BITS and abs(_scaled(np.array([peak]), s + 1)[0]) <= bound:
        s += 1
    return s if abs(_scaled(np.array([peak]), s)[0]) <= bound else None


def quantize(gradient: np.ndarray, scale_bits: int, num_workers: int) -> np.ndarray:
    """``round(g * 2**scale_bits)`` as int32 (same shape, flattened order kept).

    Raises ``FixedPointOverflow`` (a ``ValueError``) when ``max |q|`` exceeds
    ``(2**31 - 1) // num_workers``, naming the scale to use instead, and ``ValueError``
    for NaN/inf or a non-float input."""
    g = np.asarray(gradient)
    if g.dtype.kind != "f":
        raise ValueError(f"gradient must be floating point, got dtype {g.dtype}")
    if not 0 <= scale_bits <= _MAX_SCALE_BITS:
        raise ValueError(f"scale_bits must be in 0..{_MAX_SCALE_BITS}, got {scale_bits}")
    if g.size and not np.isfinite(g).all():
        bad = int(np.flatnonzero(~np.isfinite(g.ravel()))[0])
        raise ValueError(f"gradient has a non-finite value at element {bad}")
    bound = max_abs_q(num_workers)
    q = _scaled(g, scale_bits)
    peak = float(np.max(np.abs(q))) if q.size else 0.0
    if peak > bound:
        s = max_scale_bits(g, num_workers)
        hint = (
            f"use --scale-bits {s} or lower"
            if s is not None
            else "even scale 0 overflows: scale the gradient down before sending"
        )
        raise FixedPointOverflow(
            f"fixed-point overflow: max |g| = {float(np.max(np.abs(g))):.6g} gives "
            f"max |q| = {peak:.0f} at scale 2^{scale_bits}, above the bound "
            f"(2^31-1)//{num_workers} = {bound} for {num_workers} workers; {hint}"
        )
    return q.astype(np.int32)


def dequantize(q: np.ndarray, scale_bits: int, dtype: type = np.float32) -> np.ndarray:
    """``q / 2**scale_bits`` (computed in float64, then cast to ``dtype``)."""
    out = np.asarray(q).astype(np.float64) / math.ldexp(1.0, scale_bits)
    return out.astype(dtype, copy=False)


def num_fragments(num_values: int) -> int:
    """Fragments (packets of ``INA_VALUES`` values) needed for ``num_values`` values."""
    return -(-num_values // INA_VALUES)


def pad_to_fragments(q: np.ndarray) -> np.ndarray:
    """``q`` flattened and zero-padded to a multiple of ``INA_VALUES`` (a new array)."""
    flat = np.asarray(q).ravel()
    out = np.zeros(num_fragments(flat.size) * INA_VALUES, dtype=flat.dtype)
    out[: flat.size] = flat
    return out
