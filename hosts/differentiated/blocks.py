"""Blocks of gradient tensors: split, contribution, classification, reconstruction.

A model's gradient is a list of float32 tensors (one per parameter, in
``model.parameters()`` order). :class:`BlockLayout` numbers their blocks globally in
order: a convolution weight ``(out, in, kh, kw)`` gives one block per kernel (output
filter, ``in*kh*kw`` values); any other tensor is cut into blocks of
``block_size`` values, the last one possibly shorter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from wire.differentiated import DIFF_LEVEL_IMPORTANT, DiffBlockHeader


@dataclass(frozen=True)
class BlockSpec:
    """Where one block lies: the header's six location fields plus its value count."""

    tensor_index: int
    block_index: int
    first_block: int
    last_block: int
    tensor_bytes: int
    position: int  # byte offset in the tensor
    count: int  # float32 values

    @property
    def start(self) -> int:
        """Offset of the block's first value in its (flattened) tensor."""
        return self.position // 4

    def header(self, iteration: int, worker: int, level: int) -> DiffBlockHeader:
        """The wire header of this block for one iteration and sender."""
        return DiffBlockHeader(self.tensor_index, self.block_index, self.first_block, self.last_block,
                               self.tensor_bytes, self.position, iteration, worker, level, 0, self.count)


class BlockLayout:
    """The blocks of a list of tensor shapes (same on every worker and on the PS)."""

    def __init__(self, shapes: Sequence[Sequence[int]], block_size: int = 64,
                 conv_by_kernel: bool = True) -> None:
        if block_size < 1:
            raise ValueError(f"block size must be >= 1, got {block_size}")
        self.shapes = [tuple(int(d) for d in s) for s in shapes]
        self.block_size = block_size
        self.blocks: list[BlockSpec] = []
        for t, shape in enumerate(self.shapes):
            n = int(np.prod(shape)) if shape else 1
            if conv_by_kernel and len(shape) == 4 and shape[0] > 0:
                step = n // shape[0]  # one output filter: in * kh * kw values
            else:
                step = block_size
            starts = list(range(0, n, step)) or [0]
            first = len(self.blocks)
            last = first + len(starts) - 1
            for i, s in enumerate(starts):
                self.blocks.append(BlockSpec(t, first + i, first, last, 4 * n, 4 * s, min(step, n - s)))
        self.sizes = [int(np.prod(s)) if s else 1 for s in self.shapes]

    def __len__(self) -> int:
        return len(self.blocks)

    @classmethod
    def of(cls, arrays: Sequence[np.ndarray], block_size: int = 64, conv_by_kernel: bool = True) -> BlockLayout:
        """The layout of these arrays' shapes."""
        return cls([a.shape for a in arrays], block_size, conv_by_kernel)

    def split(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Every block's float32 values (views into flattened copies of ``arrays``)."""
        if len(arrays) != len(self.shapes):
            raise ValueError(f"{len(arrays)} tensors for a layout of {len(self.shapes)}")
        flat = []
        for a, shape in zip(arrays, self.shapes, strict=True):
            if tuple(np.shape(a)) != shape:
                raise ValueError(f"tensor of shape {np.shape(a)} where the layout has {shape}")
            flat.append(np.asarray(a, dtype=np.float32).ravel())
        return [flat[b.tensor_index][b.start:b.start + b.count] for b in self.blocks]

    def reconstruct(self, received: Mapping[int, np.ndarray]) -> list[np.ndarray]:
        """Tensors from ``{block_index: values}``; blocks not received are zero.

        Every block is placed by its position; a block of the wrong size is an error."""
        flat = [np.zeros(n, dtype=np.float32) for n in self.sizes]
        for j, values in received.items():
            if not 0 <= j < len(self.blocks):
                raise ValueError(f"block {j} is not in this layout ({len(self.blocks)} blocks)")
            b = self.blocks[j]
            if np.size(values) != b.count:
                raise ValueError(f"block {j} has {np.size(values)} values, expected {b.count}")
            flat[b.tensor_index][b.start:b.start + b.count] = values
        return [f.reshape(s) for f, s in zip(flat, self.shapes, strict=True)]

    def missing_mask(self, received: Mapping[int, object]) -> list[np.ndarray]:
        """Boolean tensors, True where a value's block was not received."""
        masks = [np.zeros(n, dtype=bool) for n in self.sizes]
        for b in self.blocks:
            if b.block_index not in received:
                masks[b.tensor_index][b.start:b.start + b.count] = True
        return [m.reshape(s) for m, s in zip(masks, self.shapes, strict=True)]


class Contribution:
    """SANE contribution of every block on one worker.

    c_j(τ) = α·c_j(τ−1) + (1−α)·(1/n_j)·Σ_i |g_i|, the mean absolute gradient of block j
    smoothed exponentially over iterations, with c_j(0) = 0. (The specification gives the
    formula in words only; this is our reading: α is the smoothing factor, n the number of
    values in the block, g_i its values.)
    """

    def __init__(self, n_blocks: int, alpha: float = 0.5) -> None:
        if not 0.0 <= alpha < 1.0:
            raise ValueError(f"alpha must be in [0, 1), got {alpha}")
        self.alpha = alpha
        self.values = np.zeros(n_blocks, dtype=np.float64)

    def update(self, blocks: Sequence[np.ndarray]) -> np.ndarray:
        """Fold one iteration's blocks in; returns the new contributions."""
        if len(blocks) != self.values.size:
            raise ValueError(f"{len(blocks)} blocks for {self.values.size} contributions")
        mean_abs = np.array([float(np.mean(np.abs(b))) if np.size(b) else 0.0 for b in blocks])
        self.values = self.alpha * self.values + (1.0 - self.alpha) * mean_abs
        return self.values.copy()


def threshold(contrib: np.ndarray, quantile: float) -> float:
    """Classification threshold: the ``quantile`` of the contributions (e.g. 0.7:
    the top ~30 % of blocks lie above it)."""
    if not 0.0 <= quantile <= 1.0:
        raise ValueError(f"quantile must be in [0, 1], got {quantile}")
    return float(np.quantile(contrib, quantile)) if np.size(contrib) else 0.0


def share_threshold(contrib: np.ndarray, share: float) -> float:
    """Adaptive threshold (an ablation beside the fixed quantile): the contribution of the
    smallest block among the fewest largest ones that carry ``share`` of the total
    contribution; blocks at or above it are important. Returns a value just below that
    block's, so :func:`classify`'s strict ``>`` keeps it."""
    if not 0.0 < share <= 1.0:
        raise ValueError(f"share must be in (0, 1], got {share}")
    c = np.sort(np.asarray(contrib, dtype=np.float64))[::-1]
    total = float(c.sum())
    if c.size == 0 or total <= 0.0:
        return 0.0
    k = int(np.searchsorted(np.cumsum(c), share * total - 1e-12 * total))  # index of the last one kept
    k = min(k, c.size - 1)
    return float(np.nextafter(c[k], -np.inf))


def classify(contrib: np.ndarray, quantile: float = 0.7, levels: int = 3,
             cut: float | None = None) -> np.ndarray:
    """Level of every block: 0 (important) when its contribution is
    above the threshold, else 1..``levels`` by contribution, 1 the largest, in groups
    of (nearly) equal size. ``quantile`` 0 makes every block but the smallest
    important (1.0: none). ``cut`` replaces the quantile's threshold (e.g.
    :func:`share_threshold`)."""
    if levels < 1:
        raise ValueError(f"levels must be >= 1, got {levels}")
    c = np.asarray(contrib, dtype=np.float64)
    out = np.zeros(c.size, dtype=np.int64)
    important = c > (threshold(c, quantile) if cut is None else cut)
    rest = np.flatnonzero(~important)
    # rank the unimportant blocks by contribution (largest first) into equal groups
    order = rest[np.argsort(-c[rest], kind="stable")]
    for rank, j in enumerate(order):
        out[j] = 1 + rank * levels // max(1, order.size)
    out[important] = DIFF_LEVEL_IMPORTANT
    return out


def classify_random(n_blocks: int, important: int, levels: int, rng: np.random.Generator) -> np.ndarray:
    """The ablation "is SANE doing anything?": ``important`` blocks drawn at random
    (level 0), the others spread at random over the levels 1..``levels``."""
    if not 0 <= important <= n_blocks:
        raise ValueError(f"{important} important blocks of {n_blocks}")
    order = rng.permutation(n_blocks)
    out = np.empty(n_blocks, dtype=np.int64)
    out[order[:important]] = DIFF_LEVEL_IMPORTANT
    rest = order[important:]
    for rank, j in enumerate(rest):
        out[j] = 1 + rank * levels // max(1, rest.size)
    return out


def block_norms(blocks: Sequence[np.ndarray]) -> np.ndarray:
    """Every block's L2 norm (its magnitude for top-k selection)."""
    return np.array([float(np.sqrt(np.sum(np.square(b, dtype=np.float64)))) for b in blocks])


def classify_topk(scores: np.ndarray, important: int, levels: int) -> np.ndarray:
    """Top-k selection: the ``important`` blocks of largest ``scores`` (e.g. :func:`block_norms`
    of what is pending) are level 0, the others ranked by score into ``levels`` equal
    groups, 1 the largest. Ties go to the lower block index."""
    s = np.asarray(scores, dtype=np.float64)
    if not 0 <= important <= s.size:
        raise ValueError(f"{important} important blocks of {s.size}")
    order = np.argsort(-s, kind="stable")
    out = np.empty(s.size, dtype=np.int64)
    out[order[:important]] = DIFF_LEVEL_IMPORTANT
    rest = order[important:]
    for rank, j in enumerate(rest):
        out[j] = 1 + rank * levels // max(1, rest.size)
    return out


class ErrorFeedback:
    """A worker's error-feedback state: the residual of every block it did not deliver.

    Each iteration :meth:`pending` adds the residual to the new gradient (what is pending
    is what gets classified and sent); once the PS says which blocks went into its
    update, :meth:`settle` keeps the values of the others as the next residual. Delivered
    plus residual is therefore always the sum of the gradients computed so far (up to
    float32 rounding of the additions)."""

    def __init__(self, layout: BlockLayout) -> None:
        self.layout = layout
        sizes = np.cumsum([0, *layout.sizes])
        # each block's (offset, count) in the flattened gradient (tensors in order)
        self.spans = [(int(sizes[b.tensor_index]) + b.start, b.count) for b in layout.blocks]
        self.residual = np.zeros(int(sizes[-1]), dtype=np.float32)
        self.last: np.ndarray | None = None

    def pending(self, grad: np.ndarray) -> np.ndarray:
        """The new gradient (flat float32) plus the residual: what this iteration sends."""
        g = np.asarray(grad, dtype=np.float32).ravel()
        if g.size != self.residual.size:
            raise ValueError(f"gradient of {g.size} values for a layout of {self.residual.size}")
        if self.last is not None:
            raise RuntimeError("pending() twice without settle(): the previous iteration is unsettled")
        self.last = g + self.residual
        return self.last

    def settle(self, delivered: np.ndarray) -> None:
        """The PS used the blocks where ``delivered`` is True: the residual becomes the
        pending values of the others (zero for the delivered ones)."""
        mask = np.asarray(delivered, dtype=bool).ravel()
        if self.last is None:
            raise RuntimeError("settle() without pending()")
        if mask.size != len(self.spans):
            raise ValueError(f"{mask.size} delivery bits for {len(self.spans)} blocks")
        res = self.last.copy()
        for (off, n), ok in zip(self.spans, mask, strict=True):
            if ok:
                res[off:off + n] = 0.0
        self.residual, self.last = res, None
