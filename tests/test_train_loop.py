"""The one training loop (hosts/loop.py): every harness scheme's rank goes through it with
its own Sync, a Sync may answer with the sum or with the new parameters, and the hooks."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from controller import registry
from hosts.loop import (
    SYNCS,
    LoopConfig,
    ModelWork,
    Sync,
    SyncResult,
    TrainLoop,
    sync_class,
)


def test_every_harness_scheme_gives_the_loop_a_sync() -> None:
    # no scheme trains in a loop of its own (token included)
    assert set(SYNCS) == set(registry.SCHEMES)
    import hosts.loop

    assert not getattr(hosts.loop, "OWN_LOOP", None)
    for scheme in SYNCS:
        assert issubclass(sync_class(scheme), Sync), scheme


def test_the_trainers_schemes_are_the_tables() -> None:
    from hosts.trainer import BACKENDS

    builtin = {s for s, m in registry.SCHEMES.items() if m is None}
    assert set(BACKENDS) == builtin
    for scheme, cls in BACKENDS.items():
        assert sync_class(scheme) is cls


def _work(seed: int = 0) -> ModelWork:
    from hosts import training as tr

    data = tr.load_data("synthetic", seed)
    return ModelWork(tr.build_model("digits", seed), data, tr.worker_shard(data, 0, 1), 16, seed,
                     heldout=tr.heldout_set(data, seed))


class _Sum(Sync):
    def sync(self, grad: np.ndarray) -> SyncResult:
        return SyncResult(sum=grad.copy())


class _Ps(Sync):
    """A parameter server in process: it applies the update and answers with parameters."""

    def __init__(self, lr: float) -> None:
        self.work, self.lr = _work(), lr

    def sync(self, grad: np.ndarray) -> SyncResult:
        from hosts import training as tr

        self.work.apply(SyncResult(sum=grad), self.lr, 1)
        return SyncResult(params=tr.flatten(tr.parameter_arrays(self.work.model)))

    def stats(self) -> dict[str, Any]:
        return {"version": 1}


def _lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in out.splitlines() if x.startswith("{")]


def test_a_sum_and_the_parameters_train_the_same_model(capsys: pytest.CaptureFixture[str]) -> None:
    cfg = LoopConfig(rank=0, world=1, epochs=2, steps=3, lr=0.5, eval_every=2)
    assert TrainLoop(cfg, _work(), _Sum()).run() == 0
    by_sum = _lines(capsys.readouterr().out)
    assert TrainLoop(cfg, _work(), _Ps(cfg.lr)).run() == 0
    by_params = _lines(capsys.readouterr().out)
    # evaluations at step 0, every 2 steps and each epoch's end (3, 6), once each
    assert [r["step"] for r in by_sum[:-1]] == [0, 2, 3, 4, 6]
    assert [r["epoch"] for r in by_sum[:-1]] == [0, 1, 1, 2, 2]
    assert [(r["step"], r["weights"], r["accuracy"]) for r in by_sum[:-1]] == \
        [(r["step"], r["weights"], r["accuracy"]) for r in by_params[:-1]]
    s, p = by_sum[-1], by_params[-1]
    assert s["done"] and s["steps"] == 6 and s["steps_per_epoch"] == 3 and s["weights"] == p["weights"]
    assert p["version"] == 1 and {"t", "eval_s", "compute_s", "sync_s", "cpu_s", "parameters"} <= set(s)


class _Hooks(Sync):
    def __init__(self, stop_at: int = 0, fail_at: int = 0) -> None:
        self.n, self.stop_at, self.fail_at = 0, stop_at, fail_at
        self.started = self.closed = False
        self.summary: dict[str, Any] = {}

    def start(self, loop: TrainLoop) -> None:
        self.started = True

    def sync(self, grad: np.ndarray) -> SyncResult:
        self.n += 1
        if self.n == self.fail_at:
            raise ConnectionError("peer gone")
        return SyncResult(sum=np.zeros_like(grad), stop=self.n == self.stop_at)

    def record(self, rec: dict[str, Any]) -> dict[str, Any] | None:
        return None   # this scheme prints no evaluation records

    def finish(self, summary: dict[str, Any]) -> None:
        self.summary = summary

    def close(self) -> None:
        self.closed = True


def test_hooks_stop_fail_and_records(capsys: pytest.CaptureFixture[str]) -> None:
    cfg = LoopConfig(rank=1, world=2, epochs=3, steps=2, lr=0.1, eval_every=0)
    h = _Hooks(stop_at=3)
    assert TrainLoop(cfg, _work(), h).run() == 0
    lines = _lines(capsys.readouterr().out)
    assert h.started and h.closed and len(lines) == 1        # the summary alone
    assert lines[0] == h.summary and lines[0]["steps"] == 3 and not lines[0]["done"]
    h = _Hooks(fail_at=2)
    assert TrainLoop(cfg, _work(), h).run() == 1
    lines = _lines(capsys.readouterr().out)
    assert lines[0] == {"rank": 1, "error": "ConnectionError: peer gone"}
    assert lines[1]["done"] is False and lines[1]["steps"] == 1 and h.closed


class _Pieces(Sync):
    """Computes its own gradients (a compute hook) until it has no more work, and prints
    its own summary line."""

    def __init__(self, work: ModelWork, batches: int) -> None:
        self.work, self.left, self.seen = work, batches, 0

    def compute(self, loop: TrainLoop, epoch: int, i: int) -> np.ndarray | None:
        if self.left == 0:
            return None
        self.left -= 1
        return loop.compute(epoch, i)

    def sync(self, grad: np.ndarray) -> SyncResult:
        self.seen += 1
        return SyncResult(sum=grad.copy())

    def summary_line(self, summary: dict[str, Any]) -> dict[str, Any] | None:
        return {"event": "summary", "steps": summary["steps"], "synced": self.seen}


def test_a_compute_hook_ends_the_training_and_a_summary_line_replaces_the_loops(
        capsys: pytest.CaptureFixture[str]) -> None:
    cfg = LoopConfig(rank=0, world=1, epochs=2, steps=3, lr=0.5, eval_every=None)
    work = _work()
    s = _Pieces(work, batches=3)
    assert TrainLoop(cfg, work, s).run() == 0
    lines = _lines(capsys.readouterr().out)
    assert lines == [{"event": "summary", "steps": 3, "synced": 3}]
    # the same three steps as a loop that computes itself
    ref = _work()
    TrainLoop(LoopConfig(rank=0, world=1, epochs=1, steps=3, lr=0.5, eval_every=None), ref,
              _Sum()).run()
    capsys.readouterr()
    assert work.weights() == ref.weights()


class _FakeTokenNode:
    """What TokenSync drives of a token node, without a NIC: the 'protocol' takes each
    offered gradient as its batch's sum (w <- w - lr * g), stands by after batch 1 and
    rejoins at batch 3 with a model of its own, then stops after batch 4."""

    def __init__(self) -> None:
        import queue
        import threading

        from hosts import training as tr

        self.tr, self.work, self.model_lock = tr, queue.Queue(), threading.Lock()
        self.model, self.worker_model = tr.build_model("digits", 0), tr.build_model("digits", 0)
        self.like = tr.parameter_arrays(self.model)
        self.batch, self.done, self.seq, self.roster = 0, False, 1, {1: b""}
        self.offered: list[int] = []
        self.got = threading.Event()
        self.args = type("A", (), {"epochs": 1, "lr": 0.1})()
        self.batches_per_epoch = 6

    def compute_step(self, b: int) -> tuple[Any, int, Any, float]:
        vec = np.full(sum(a.size for a in self.like), 0.01 * (b + 1), dtype=np.float32)
        return None, 16, vec, 0.0

    def offer(self, b: int, q: Any, examples: int, vec: Any, t: float) -> None:
        self.offered.append(b)
        self.last = vec
        self.got.set()

    def _end(self, update: np.ndarray) -> None:
        with self.model_lock:
            flat = self.tr.flatten(self.tr.parameter_arrays(self.model)) - update
            self.tr.set_parameters(self.model, self.tr.unflatten(flat, self.like))

    def train(self) -> None:
        self.work.put(0)
        for b in (0, 1):
            assert self.got.wait(10)
            self.got.clear()
            self._end(0.1 * self.last)
            self.batch = b + 1
            if b == 0:
                self.work.put(1)
        # standby through batch 2; rejoin at 3 with the adopted model (here: all zeros)
        with self.model_lock:
            for p in self.model.parameters():
                p.data.zero_()
        self.batch = 3
        self.work.put(3)
        assert self.got.wait(10)
        self._end(0.1 * self.last)
        self.batch, self.done = 4, True
        self.work.put(None)


def test_token_sync_blocks_through_a_standby_and_answers_the_nodes_model(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from hosts import training as tr
    from hosts.token import sync as ts

    assert sync_class("token") is ts.TokenSync
    node = _FakeTokenNode()
    monkeypatch.setattr(ts, "summary_record", lambda n: {"event": "summary", "batch": n.batch})
    s = ts.TokenSync(node)
    assert TrainLoop(s.config(), s.work(), s).run() == 0
    assert node.offered == [0, 1, 3]          # batch 2 skipped on standby
    assert _lines(capsys.readouterr().out) == [{"event": "summary", "batch": 4}]
    # the loop's model is the node's: zeros (adopted) minus the last update
    want = -0.1 * np.full(sum(a.size for a in node.like), 0.04, dtype=np.float32)
    got = tr.flatten(tr.parameter_arrays(node.worker_model))
    assert np.array_equal(got, tr.flatten(tr.parameter_arrays(node.model)))
    assert np.allclose(got, want)
