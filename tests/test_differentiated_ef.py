"""Differentiated transmission's error feedback and block selection variants, without a
network: the ACK's wire format, the residual's bookkeeping (delivered + residual = the
gradients computed, element by element), top-k selection, and the agents over loopback
with error feedback (every ACK settles the worker's residual)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hosts.differentiated.blocks import (
    BlockLayout,
    Contribution,
    ErrorFeedback,
    block_norms,
    classify,
    classify_topk,
)
from wire.differentiated import DiffDecodeError, Kind, ack_body, frame, parse_ack

ROOT = Path(__file__).resolve().parent.parent


# ----------------------------------------------------------------------------- wire


def test_ack_round_trip_and_bit_order() -> None:
    mask = np.array([1, 0, 0, 0, 0, 0, 0, 1, 1, 0, 1], dtype=bool)
    body = ack_body(7, mask)
    # iteration, block count, then the bitmap MSB first: 1000_0001, 1010_0000
    assert body == bytes.fromhex("00000007" "0000000b") + bytes([0b10000001, 0b10100000])
    it, got = parse_ack(body)
    assert it == 7 and got.dtype == bool and np.array_equal(got, mask)
    for n in (0, 1, 8, 67, 1000):  # every length, random bits
        m = np.random.default_rng(n).random(n) < 0.5
        assert np.array_equal(parse_ack(ack_body(n, m))[1], m)
    assert frame(Kind.ACK, body)[:1] == b"A"


def test_ack_decode_errors() -> None:
    body = ack_body(1, np.ones(20, dtype=bool))
    for bad in (b"", body[:7], body[:-1], body + b"\x00"):
        with pytest.raises(DiffDecodeError):
            parse_ack(bad)


# ----------------------------------------------------------------------------- residual


def _layout() -> BlockLayout:
    return BlockLayout([(4, 2, 3, 3), (4,), (150,)], block_size=64)  # 4 kernels, 1 bias, 3 blocks


def test_error_feedback_conserves_the_gradient_element_by_element() -> None:
    """Over many steps with random deliveries: every delivered block carries exactly what
    was pending (new gradient + residual), the others become the residual, and the sum
    of what was delivered plus the final residual equals the sum of the gradients."""
    layout = _layout()
    ef = ErrorFeedback(layout)
    n = sum(layout.sizes)
    rng = np.random.default_rng(3)
    computed = np.zeros(n, dtype=np.float64)
    delivered = np.zeros(n, dtype=np.float64)
    offsets = np.cumsum([0, *layout.sizes])
    for step in range(40):
        g = rng.standard_normal(n).astype(np.float32)
        before = ef.residual.copy()
        pending = ef.pending(g)
        assert np.array_equal(pending, g + before)  # exactly the float32 sum
        mask = rng.random(len(layout)) < 0.4 if step < 39 else np.zeros(len(layout), dtype=bool)
        ef.settle(mask)
        for j, b in enumerate(layout.blocks):
            sl = slice(offsets[b.tensor_index] + b.start, offsets[b.tensor_index] + b.start + b.count)
            if mask[j]:
                delivered[sl] += pending[sl]
                assert not ef.residual[sl].any()  # delivered: nothing left
            else:
                assert np.array_equal(ef.residual[sl], pending[sl])  # kept whole, bit for bit
        computed += g
    assert ef.residual.any()  # the last step delivered nothing: the check is not empty
    np.testing.assert_allclose(delivered + ef.residual, computed, rtol=0, atol=1e-4)
    # and the blocks of the layout cover every value once
    assert sum(b.count for b in layout.blocks) == n


def test_error_feedback_all_delivered_is_plain_sgd_and_misuse_is_refused() -> None:
    layout = _layout()
    ef = ErrorFeedback(layout)
    g = np.arange(sum(layout.sizes), dtype=np.float32)
    for _ in range(3):
        assert np.array_equal(ef.pending(g), g)  # nothing ever left behind
        ef.settle(np.ones(len(layout), dtype=bool))
    with pytest.raises(RuntimeError):
        ef.settle(np.ones(len(layout), dtype=bool))  # no pending() before
    ef.pending(g)
    with pytest.raises(RuntimeError):
        ef.pending(g)  # the previous one unsettled
    with pytest.raises(ValueError):
        ef.settle(np.ones(len(layout) + 1, dtype=bool))
    with pytest.raises(ValueError):
        ErrorFeedback(layout).pending(g[:-1])


# ----------------------------------------------------------------------------- selection


def test_topk_takes_the_largest_norms_not_the_largest_means() -> None:
    """Top-k ranks blocks by L2 norm (a block's magnitude), SANE by mean absolute value:
    a long block of small values and a short block of large ones rank differently."""
    layout = BlockLayout([(2,), (100,)], block_size=100)  # a 2-value block, a 100-value block
    blocks = [np.array([3.0, 3.0], dtype=np.float32), np.full(100, 1.0, dtype=np.float32)]
    norms = block_norms(blocks)
    np.testing.assert_allclose(norms, [np.sqrt(18), 10.0])
    assert classify_topk(norms, 1, 1).tolist() == [1, 0]  # the long block is the larger
    sane = Contribution(len(layout), alpha=0.0).update(blocks)
    assert classify(sane, 0.5, 1).tolist() == [0, 1]  # SANE: the short block's mean is larger


def test_topk_counts_and_grades_the_rest() -> None:
    scores = np.array([5.0, 1.0, 9.0, 3.0, 7.0, 2.0, 8.0, 0.5])
    lv = classify_topk(scores, 3, 2)
    assert set(np.flatnonzero(lv == 0).tolist()) == {2, 6, 4}  # 9, 8, 7
    assert set(np.flatnonzero(lv == 1).tolist()) == {0, 3, 5}  # 5, 3, 2: the larger half
    assert set(np.flatnonzero(lv == 2).tolist()) == {1, 7}
    assert classify_topk(np.ones(4), 2, 1).tolist() == [0, 0, 1, 1]  # ties: lower index first
    assert (classify_topk(scores, 0, 3) > 0).all() and (classify_topk(scores, 8, 3) == 0).all()
    with pytest.raises(ValueError):
        classify_topk(scores, 9, 1)


# ----------------------------------------------------------------------------- agents


def test_worker_refuses_bad_option_combinations() -> None:
    for argv in (["--residual-out", "x.npz"], ["--importance", "topk", "--share", "0.5"]):
        r = subprocess.run([sys.executable, "-m", "hosts.differentiated.worker", "--ps", "127.0.0.1",
                            "--rank", "0", "--world", "1", *argv], cwd=ROOT, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 2 and "error:" in r.stderr and "Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize("importance", ["sane", "topk"])
def test_error_feedback_over_loopback(tmp_path: Path, importance: str) -> None:
    """PS and two workers over loopback with fixed tensors and error feedback, the
    unimportant blocks never sent (``--mode important``): every ACK names exactly the
    blocks the PS rebuilt, and each worker's final residual is what the replay of its
    pending values leaves (bit for bit)."""
    from tests.test_differentiated import _free_port

    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal((4, 2, 3, 3)).astype(np.float32), rng.standard_normal(300).astype(np.float32)]
    np.savez(tmp_path / "g.npz", *arrays)
    port, its = str(_free_port()), 4
    common = ["--world", "2", "--mode", "important", "--gradient", str(tmp_path / "g.npz"), "--iterations",
              str(its), "--port", port, "--max-time", "60", "--error-feedback"]
    ps = subprocess.Popen([sys.executable, "-m", "hosts.differentiated.ps", *common, "--bind", "127.0.0.1",
                           "--linger", "0.1", "--out-dir", str(tmp_path / "ps")], cwd=ROOT,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    workers: list[subprocess.Popen] = []
    try:
        for _ in range(50):
            line = ps.stderr.readline()
            if not line or b"listening" in line:
                break
        workers = [subprocess.Popen([sys.executable, "-m", "hosts.differentiated.worker", "--ps", "127.0.0.1",
                                     "--rank", str(r), *common, "--quantile", "0.6", "--alpha", "0",
                                     "--importance", importance,
                                     "--residual-out", str(tmp_path / f"res{r}.npz")],
                                    cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for r in range(2)]
        outs = [w.communicate(timeout=90) for w in workers]
        out, err = ps.communicate(timeout=60)
    finally:
        for p in (ps, *workers):
            if p.poll() is None:
                p.kill()
                p.wait()
    assert ps.returncode == 0, err.decode()[-800:]
    assert all(w.returncode == 0 for w in workers), [o[1].decode()[-400:] for o in outs]
    layout = BlockLayout.of(arrays, 64)
    for r in range(2):
        summary = json.loads(outs[r][0].decode().strip().splitlines()[-1])
        residual = replay(layout, arrays, tmp_path / "ps", r, its, importance, 0.6, only_important=True)
        with np.load(tmp_path / f"res{r}.npz") as z:
            saved = np.concatenate([z[f"arr_{i}"].ravel() for i in range(len(arrays))])
        assert np.array_equal(saved.view(np.uint32), residual.view(np.uint32))
        assert summary["delivered_blocks"] == sum(
            len(np.load(tmp_path / "ps" / f"received-w{r}-it{i}.npy")) for i in range(its))
        assert residual.any()  # the unimportant blocks were never sent: they pile up


def replay(layout: BlockLayout, arrays: list[np.ndarray], ps_dir: Path, rank: int, its: int,
           importance: str, quantile: float, only_important: bool) -> np.ndarray:
    """Replay one worker's error feedback (fixed tensors ``arrays`` every iteration, alpha
    0) against what the PS rebuilt (``--out-dir``): each iteration the PS got every
    important block of what was pending (``only_important``: exactly those), every
    block it got is the pending values bit for bit, the others zero; returns the final
    residual."""
    g = np.concatenate([a.ravel() for a in arrays])
    ef = ErrorFeedback(layout)
    contrib = Contribution(len(layout), alpha=0.0)
    n_imp = int((classify(np.arange(len(layout), dtype=np.float64), quantile, 3) == 0).sum())
    for it in range(its):
        pending = ef.pending(g)
        blocks = layout.split([pending[o:o + a.size].reshape(a.shape) for o, a in
                               zip(np.cumsum([0, *[a.size for a in arrays]]), arrays, strict=False)])
        if importance == "topk":
            lv = classify_topk(block_norms(blocks), n_imp, 3)
        else:
            lv = classify(contrib.update(blocks), quantile, 3)
        got = set(np.load(ps_dir / f"received-w{rank}-it{it}.npy").tolist())
        important = set(np.flatnonzero(lv == 0).tolist())
        assert got == important if only_important else important <= got, (rank, it)
        with np.load(ps_dir / f"recon-w{rank}-it{it}.npz") as z:
            recon = np.concatenate([z[f"arr_{i}"].ravel() for i in range(len(arrays))])
        mask = np.array([j in got for j in range(len(layout))])
        kept = np.concatenate([np.full(b.count, mask[b.block_index]) for b in layout.blocks])
        assert np.array_equal(recon[kept].view(np.uint32), pending[kept].view(np.uint32))
        assert not recon[~kept].any()
        ef.settle(mask)
    return ef.residual
