"""float32 <-> int32 fixed point for in-network aggregation (docs/ina.md, "Fixed point"
and "Block floating point").

A worker sends ``q = round(g * 2**S)`` as int32; switches and the PS add the integers;
the result is ``sum(q) / 2**S``. The sum of N workers is exact (no wraparound) when every
worker keeps ``max |q| <= (2**31 - 1) // N``, which :func:`quantize` enforces: it never
clips, it raises :class:`FixedPointOverflow` naming the largest scale that would fit.
Rounding is to nearest, ties to even (``numpy.rint``).

The packet size ``V`` (values per fragment: 64, 128 or 256, the job's
``values_per_packet``) is a keyword of every function that cuts values into fragments;
it defaults to 64 (``INA_VALUES``).

Block floating point (``bfp_*``): every block of ``V`` values (one fragment's) gets its own
scale from a shared exponent, the max over the workers of each one's block exponent
(:func:`block_exponents`), agreed in the network before the values are summed. With
``h = ceil(log2 N)`` headroom bits a block whose agreed exponent is ``E`` (every value
below ``2^E`` in magnitude) is sent as ``q = round(g * 2^(30 - h - E))``, so that
``|q| <= 2^(30-h)`` and no sum of N workers can leave int32: nothing is ever refused.
"""

from __future__ import annotations

import math

import numpy as np

from wire.ina import INA_MAX_WORKERS, INA_VALUES, check_values_per_packet

__all__ = [
    "BFP_EXP_BIAS",
    "BFP_LOOKAHEAD",
    "DEFAULT_SCALE_BITS",
    "NUMBER_FORMATS",
    "bfp_dequantize",
    "bfp_error_bound",
    "bfp_fragments",
    "bfp_quantize",
    "bfp_reference",
    "bfp_scale_bits",
    "block_exponents",
    "headroom_bits",
    "FixedPointOverflow",
    "dequantize",
    "max_abs_q",
    "max_scale_bits",
    "num_fragments",
    "pad_to_fragments",
    "quantize",
]

DEFAULT_SCALE_BITS = 16
#: the job's number formats (policy key "format"): one fixed scale, or block floating point
NUMBER_FORMATS = ("fixed", "bfp")
#: exponent ``e`` goes on the wire as ``e + 127`` in 8 bits (``max_exp``): 1..255 is
#: ``2^-126 .. 2^128``, and 0 (an all-zero block) is below every real exponent.
BFP_EXP_BIAS = 127
#: fragments by which a block's exponent proposal runs ahead of its values
#: (docs/ina.md, "Block floating point"): at most this many blocks are in flight.
BFP_LOOKAHEAD = 32
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


def num_fragments(num_values: int, values_per_packet: int = INA_VALUES) -> int:
    """Fragments (packets of ``values_per_packet`` values) needed for ``num_values`` values."""
    return -(-num_values // check_values_per_packet(values_per_packet))


def pad_to_fragments(q: np.ndarray, values_per_packet: int = INA_VALUES) -> np.ndarray:
    """``q`` flattened and zero-padded to a multiple of ``values_per_packet`` (a new array)."""
    flat = np.asarray(q).ravel()
    out = np.zeros(num_fragments(flat.size, values_per_packet) * values_per_packet,
                   dtype=flat.dtype)
    out[: flat.size] = flat
    return out


# ------------------------------------------------------------------ block floating point


def headroom_bits(num_workers: int) -> int:
    """``ceil(log2 N)``: the bits a sum of N values may grow beyond one value."""
    if not 1 <= num_workers <= INA_MAX_WORKERS:
        raise ValueError(f"num_workers must be in 1..{INA_MAX_WORKERS}, got {num_workers}")
    return (num_workers - 1).bit_length()


def _blocks(g: np.ndarray, values_per_packet: int = INA_VALUES) -> np.ndarray:
    """``g`` flat, float64, zero-padded to whole blocks, shape (blocks, values_per_packet)."""
    a = np.asarray(g)
    if a.dtype.kind != "f":
        raise ValueError(f"gradient must be floating point, got dtype {a.dtype}")
    flat = a.ravel().astype(np.float64)
    if flat.size and not np.isfinite(flat).all():
        bad = int(np.flatnonzero(~np.isfinite(flat))[0])
        raise ValueError(f"gradient has a non-finite value at element {bad}")
    out = np.zeros((num_fragments(flat.size, values_per_packet), values_per_packet))
    out.ravel()[: flat.size] = flat
    return out


def block_exponents(gradient: np.ndarray, values_per_packet: int = INA_VALUES) -> np.ndarray:
    """Each block's (``values_per_packet`` values) biased exponent (uint8): ``e + 127``
    for the smallest ``e`` with every ``|g| < 2^e`` (clamped to 1..255), 0 for an
    all-zero block. The max of the workers' values is the block's shared exponent."""
    peak = (np.abs(_blocks(gradient, values_per_packet)).max(axis=1) if np.size(gradient)
            else np.zeros(0))
    _, e = np.frexp(peak)  # peak = m * 2^e, 0.5 <= m < 1: peak < 2^e
    biased = np.clip(e.astype(np.int64) + BFP_EXP_BIAS, 1, 255)
    return np.where(peak > 0, biased, 0).astype(np.uint8)


def bfp_scale_bits(exponents: np.ndarray, num_workers: int) -> np.ndarray:
    """Per block, the scale ``S = 30 - h - E`` (int64) for agreed biased exponents
    ``exponents`` (0: an all-zero block, scale 0)."""
    e = np.asarray(exponents, dtype=np.int64)
    s = 30 - headroom_bits(num_workers) - (e - BFP_EXP_BIAS)
    return np.where(e > 0, s, 0)


def bfp_quantize(gradient: np.ndarray, exponents: np.ndarray, num_workers: int,
                 values_per_packet: int = INA_VALUES) -> np.ndarray:
    """The blocks of ``gradient`` as int32 at the agreed ``exponents`` (one per block of
    ``values_per_packet`` values, each at least the block's own, see
    :func:`block_exponents`): shape (blocks * values_per_packet,), zero-padded. Raises
    ``ValueError`` if an exponent is below the block's own (the sum could overflow),
    for NaN/inf and for a non-float input."""
    b = _blocks(gradient, values_per_packet)
    e = np.asarray(exponents, dtype=np.int64)
    if e.shape != (b.shape[0],):
        raise ValueError(f"need one exponent per block ({b.shape[0]}), got shape {e.shape}")
    own = block_exponents(gradient, values_per_packet).astype(np.int64)
    low = np.flatnonzero(e < own)
    if low.size:
        k = int(low[0])
        raise ValueError(f"block {k}: agreed exponent {e[k]} is below its own {own[k]}")
    q = np.rint(np.ldexp(b, bfp_scale_bits(e, num_workers)[:, None]))
    return q.astype(np.int32).ravel()


def bfp_dequantize(q: np.ndarray, exponents: np.ndarray, num_workers: int,
                   dtype: type = np.float32, values_per_packet: int = INA_VALUES) -> np.ndarray:
    """Summed blocks ``q`` (int32, ``len(exponents) * values_per_packet`` values) as
    floats: ``q * 2^-S`` per block (float64, then cast to ``dtype``)."""
    s = bfp_scale_bits(exponents, num_workers)
    blocks = np.asarray(q).astype(np.float64).reshape(s.size, values_per_packet)
    return np.ldexp(blocks, -s[:, None]).ravel().astype(dtype, copy=False)


def bfp_error_bound(num_workers: int) -> float:
    """The normwise bound, per block, of a block-floating-point sum of N workers'
    float32 values against the exact sum, relative to ``M``, the largest magnitude any
    worker has in the block: ``max_i |sum_i - exact_i| <= bound * M`` (docs/ina.md,
    "Block floating point"). Each worker rounds to half a step ``2^(E-30+h)`` with
    ``M >= 2^(E-1)`` (``N * 2^(h-30)`` in all), plus the float32 result's own rounding
    (``|sum| <= N*M``: ``N * 2^-24``). It holds for any block size (values per
    packet); a larger block only makes ``M`` the largest of more values."""
    n = num_workers
    return n * 2.0 ** (headroom_bits(n) - 30) + n * 2.0**-24


def bfp_reference(gradients: list[np.ndarray], num_workers: int,
                  values_per_packet: int = INA_VALUES) -> tuple[np.ndarray, np.ndarray]:
    """What a block-floating-point allreduce of ``gradients`` (one per rank) returns
    exactly: the int32 sums (int64 array, zero-padded to whole blocks) at the agreed
    exponents, and those exponents (the max over the ranks of each block's)."""
    v = values_per_packet
    e = np.max([block_exponents(g, v) for g in gradients], axis=0)
    sums = np.sum([bfp_quantize(g, e, num_workers, v).astype(np.int64) for g in gradients],
                  axis=0)
    return sums, e


def bfp_fragments(num_values: int, values_per_packet: int = INA_VALUES) -> int:
    """Fragments a block-floating-point allreduce of ``num_values`` values sends: the
    blocks (of ``values_per_packet`` values) plus ``min(BFP_LOOKAHEAD, blocks)``
    exponent-only ones ahead of them."""
    n_b = num_fragments(num_values, values_per_packet)
    return n_b + min(BFP_LOOKAHEAD, n_b)
