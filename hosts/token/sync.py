"""A token node's training through the one training loop (:mod:`hosts.loop`).

:class:`TokenSync` is the :class:`hosts.loop.Sync` of a token node
(:class:`hosts.token.node.Node`, formed and given its model and shard). The token
protocol runs as before in its network thread (:meth:`TokenProtocol.train
<hosts.token.protocol.TokenProtocol.train>`: token passing, broadcasts, NIC read-out,
re-sends, lost nodes, rejoin, redistribution of a departed node's data); the protocol
says which step to compute next through the node's ``work`` queue (a step number, or
None: the training is over). The loop's thread is the compute:

* :meth:`TokenSync.compute` (the loop's compute step, a hook): takes the newest step the
  protocol put, computes that batch's gradient on the node's current model and shard
  (:meth:`Training.compute_step <hosts.token.training.Training.compute_step>`; under a
  ``--cutoff`` the gradient piece by piece, each partial mean offered to the protocol as
  it is done; the node's own slowdown); a step the protocol left meanwhile is dropped
  and the next one taken, as the compute thread did;
* :meth:`TokenSync.sync`: hands the gradient to the protocol (``ready``) and blocks
  until the protocol puts the next step: the batch has ended (every chunk read from the
  NIC, ``w <- w - lr * sum / n`` applied by the network thread, n the contributors of
  each fragment, the arithmetic of :meth:`Training.finish_batch
  <hosts.token.training.Training.finish_batch>`), or the node stood by and rejoined
  (the adopted model). It answers with those parameters (``params``), ``stop`` when
  the protocol is done.

The evaluation records and the summary are the node's events (``eval`` at its batch
ends, ``summary``: what ``experiments/train_token.py`` reads): the loop's own are
switched off (``eval_every`` None, :meth:`TokenSync.summary_line`).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from hosts.loop import LoopConfig, ModelWork, Sync, SyncResult, TrainLoop

__all__ = ["TokenSync", "summary_record"]


class TokenSync(Sync):
    """The token protocol of ``node`` as the loop's Sync (module docstring)."""

    def __init__(self, node: Any) -> None:
        self.node = node  # a hosts.token.node.Node (which imports this module)
        self.thread: threading.Thread | None = None
        self.error: BaseException | None = None   # the network thread's failure
        self.queued: list[int | None] = []         # a step taken while waiting in sync()
        self.current: tuple[int, tuple[Any, int, Any, float]] | None = None

    # ------------------------------------------------------------------ the loop's parts
    def config(self) -> LoopConfig:
        """The loop's numbers: no records of its own (the node's ``eval`` events)."""
        n = self.node
        return LoopConfig(rank=n.seq - 1, world=len(n.roster), epochs=n.args.epochs,
                          steps=n.batches_per_epoch, lr=n.args.lr, eval_every=None,
                          evaluate_accuracy=False)

    def work(self) -> ModelWork:
        """The loop's model: the node's compute copy (``worker_model``)."""
        return ModelWork(self.node.worker_model)

    # ------------------------------------------------------------------ hooks
    def start(self, loop: TrainLoop) -> None:
        """Start the protocol's network thread (it puts the first step)."""
        self.thread = threading.Thread(target=self._protocol, name="token-protocol", daemon=True)
        self.thread.start()

    def _protocol(self) -> None:
        node = self.node
        try:
            node.train()
        except BaseException as e:  # noqa: BLE001 (re-raised by run_node in the main thread)
            self.error = e
            node.done = True
            node.work.put(None)  # the compute must not wait for a step that never comes

    def take(self) -> int | None:
        """The newest step the protocol put (blocking); None: training over."""
        b = self.queued.pop() if self.queued else self.node.work.get()
        while not self.node.work.empty():  # only the newest step matters
            b = self.node.work.get()
        return b

    def compute(self, loop: TrainLoop, epoch: int, i: int) -> np.ndarray | None:
        """The gradient of the step the protocol is on (the loop's ``epoch``/``i`` are
        not the node's: a standby node skips batches); None once the protocol is done."""
        node = self.node
        while True:
            b = self.take()
            if b is None:
                return None
            if b != node.batch:
                continue
            got = node.compute_step(b)
            if got is None:
                continue  # the batch ended without this node (cutoff)
            self.current = (b, got)
            return got[2]

    def sync(self, grad: np.ndarray) -> SyncResult:
        """Offer the gradient; wait for the batch's end (or a rejoin); the node's model."""
        from hosts import training as tr

        node = self.node
        assert self.current is not None
        b, (q, examples, vec, t) = self.current
        self.current = None
        node.offer(b, q, examples, vec, t)
        nxt = self.take()
        self.queued.append(nxt)
        with node.model_lock:
            params = tr.flatten(tr.parameter_arrays(node.model))
        return SyncResult(params=params, stop=nxt is None)

    def finish(self, summary: dict[str, Any]) -> None:
        """Wait for the network thread (it lingers for late re-send requests)."""
        if self.thread is not None:
            self.thread.join()

    def summary_line(self, summary: dict[str, Any]) -> dict[str, Any] | None:
        """The node's ``summary`` event instead of the loop's; none after a failure of
        the protocol (its error is the last line)."""
        return None if self.error is not None else summary_record(self.node)


def summary_record(node: Any) -> dict[str, Any]:
    """A node's last stdout line: counters and timing (``cpu_s``: this process's CPU seconds
    since training started, ``cpu_total_s`` since it started;
    ``train_s``: training time up to the last batch, without evaluation time; ``weights``:
    the final weights' hash)."""
    import resource

    from hosts.trainer import weights_hash

    t = node.timing
    ru = resource.getrusage(resource.RUSAGE_SELF)
    cpu = ru.ru_utime + ru.ru_stime
    return {"event": "summary", "node": node.seq, "exit": node.exit_code,
            "cpu_s": round(cpu - node.train_cpu0, 3), "cpu_total_s": round(cpu, 3),
            "train_s": round(node.train_s, 4),
            "eval_s": round(node.eval_s, 4),
            "weights": weights_hash(node.model) if node.model is not None else None,
            "batch": node.batch // node.chunks, "active": sorted(node.active),
            "standby": node.standby, "stats": node.stats,
            "timing": {"compute": t.compute, "token_wait": t.token_wait,
                       "broadcast": t.broadcast, "accumulate": t.accumulate,
                       "batches": t.batches},
            "frames_sent": node.link.sent, "frames_received": node.link.received,
            "accuracy": node.evaluate() if node.model is not None and node.test else None}
