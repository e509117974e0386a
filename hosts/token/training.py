"""Training on a token node (token: compute step, batch end).

* :func:`load_factory` / :func:`model_factory` -- the user's model factory (``--model
  module:function``) or a named model of :data:`hosts.training.MODELS` (``--model NAME``:
  ``build_model(NAME, --seed)``, the harness's initial weights);
* :class:`Timing` -- where a node's time goes;
* :class:`Training` -- the model built from the distributed parameters and shard, the
  compute step (gradient of the current batch on a private copy of the model, quantized
  to fixed point; run by the one training loop, :mod:`hosts.token.sync`), the batch end (read the sums from the NIC, update
  ``w <- w - lr * sum / n``), evaluation and saving;
* chunks: a gradient longer than the NIC holds (``TOKEN_MAX_FRAGS`` x ``TOKEN_VALUES``
  = 32,768 values) goes in ``chunks`` pieces of at most that, one token round (one
  protocol *step*, the ``batch`` field on the wire) per chunk: step ``s`` is chunk
  ``s % chunks`` of training batch ``s // chunks``. Every step ends like a batch (read
  that chunk's sums from the NIC, which moves its window on); only the last chunk's end
  updates the model. With one chunk a step is a batch, exactly as before;
* the time-to-accuracy harness's evaluation records (``--evals``, :meth:`Training.emit_eval`):
  at the start, every ``--eval-every`` batches and at each epoch's end, every node logs
  an ``eval`` event with the hash of its weights; the evaluating node (node 1, or the
  smallest active number once node 1 is gone) adds the test and held-out accuracy. ``t``
  there is training time without evaluation time (see ``hosts/trainer.py``).

The gradient arithmetic itself (forward/backward, flatten, apply) is :mod:`hosts.training`.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hosts.token.data import decode_examples, exact_encoding, write_json_gradients
from hosts.token.link import FrameIO, TokenError
from wire.fixedpoint import FixedPointOverflow, max_abs_q, quantize
from wire.token import (
    TOKEN_MAX_FRAGS,
    TOKEN_VALUES,
    TokenDecodeError,
    TokenFlags,
    TokenMsg,
    decode_token,
    token_values,
)

READ_RETRY_S = 0.5  # a READ unanswered this long is sent again
REPAIR_ROUNDS = 8   # read-out: NACK what is still missing at most this often
REPAIR_WAIT_S = 0.1  # ... and wait this long (times the round) for the re-sends


def load_factory(spec: str) -> Any:
    """``module:function`` -> the callable (a user's model factory)."""
    import importlib

    mod, _, fn = spec.partition(":")
    return getattr(importlib.import_module(mod), fn or "make_model")


def model_factory(spec: str, seed: int) -> Any:
    """The model factory of ``--model``: a name of :data:`hosts.training.MODELS` gives
    ``build_model(name, seed)`` (the initial weights every scheme of the harness trains
    from); anything else is a ``module:function`` (:func:`load_factory`)."""
    from hosts import training as tr

    if ":" not in spec and spec in tr.MODELS:
        return lambda: tr.build_model(spec, seed)
    return load_factory(spec)


@dataclass
class Timing:
    """Where a node's time goes (seconds, summed over batches)."""

    compute: float = 0.0
    token_wait: float = 0.0    # gradient ready -> token in hand
    broadcast: float = 0.0     # sending GRAD frames
    accumulate: float = 0.0    # NIC read-out and update
    batches: int = 0


def bitmap_members(bitmap: int) -> list[int]:
    """Sequence numbers whose bit is set."""
    return [i for i in range(32) if bitmap >> i & 1]


class Training(FrameIO):
    """Mixin of :class:`hosts.token.node.Node`: model, compute step, batch end.

    Owns ``model``/``worker_model`` (under ``model_lock``), ``like``, ``nvalues``,
    ``nfrags``, ``chunks``, ``x``/``y``/``test``, the batch counts, the compute step's
    ``work`` queue (the steps to compute, None: stop) and its result ``ready`` (under ``ready_lock``, signalled by
    ``ready_event``), the sums of the current batch's chunks read so far; reads the
    protocol's ``roster``/``active``/``standby``, advances ``batch`` (the step: batch x
    chunks + chunk) and clears ``bitmap`` at a step's end."""

    roster: dict[int, bytes]
    active: set[int]
    bitmap: int
    timing: Timing
    stats: dict[str, int]
    model: Any
    worker_model: Any
    model_lock: threading.Lock
    like: list[np.ndarray]
    nvalues: int
    nfrags: int
    chunks: int
    batch_members: int
    chunk_sums: np.ndarray
    chunk_bitmaps: list[int]
    x: Any
    y: Any
    test: tuple[Any, Any] | None
    batches_per_epoch: int
    total_batches: int
    total_steps: int
    ready: tuple[int, Any, float, int, Any] | None  # (step, quantized, t_ready, examples, float vector)
    partial: tuple[int, Any, float, int, Any] | None
    examples: int
    batch_grad: tuple[int, Any, float, int, Any] | None
    redistribute_due: set[int]
    ready_lock: threading.Lock
    ready_event: threading.Event
    work: queue.Queue
    train_t0: float
    eval_s: float
    train_s: float
    heldout: Any

    def setup_training(self, params: bytes, data: bytes, test: bytes, m_train: int) -> None:
        import torch

        from hosts import training as tr

        torch.set_num_threads(1)
        factory = model_factory(self.args.model, self.args.seed)
        self.model = factory()
        self.worker_model = factory()
        self.like = tr.parameter_arrays(self.model)
        vec = np.frombuffer(params, dtype=np.float32)
        tr.set_parameters(self.model, tr.unflatten(vec.copy(), self.like))
        self.nvalues = int(vec.size)
        self.nfrags = -(-self.nvalues // TOKEN_VALUES)
        # more than the NIC holds (TOKEN_MAX_FRAGS fragments): one token round per chunk
        self.chunks = max(1, -(-self.nfrags // TOKEN_MAX_FRAGS))
        exact = exact_encoding(self.args.data)
        self.x, self.y = decode_examples(data, exact)
        self.test = decode_examples(test, exact)
        world = len(self.roster)
        per_node = m_train // world
        self.batches_per_epoch = max(1, per_node // self.args.batch_size)
        if self.args.max_steps > 0:
            self.batches_per_epoch = min(self.batches_per_epoch, self.args.max_steps)
        self.total_batches = self.batches_per_epoch * self.args.epochs
        if self.args.batches:
            self.total_batches = min(self.total_batches, self.args.batches)
        self.total_steps = self.total_batches * self.chunks
        if self.total_steps >= 1 << 32:
            raise TokenError(f"{self.total_batches} batches of {self.chunks} chunks do not fit the "
                             f"32-bit batch field")
        extra = {"chunks": self.chunks} if self.chunks > 1 else {}
        self.log("ready", examples=len(self.y), values=self.nvalues, frags=self.nfrags,
                 batches_per_epoch=self.batches_per_epoch, **extra)

    # ------------------------------------------------------------------ chunks
    def chunk_frags(self, chunk: int) -> tuple[int, int]:
        """Fragments ``[first, end)`` of the whole gradient that ``chunk`` carries."""
        first = chunk * TOKEN_MAX_FRAGS
        return first, min(self.nfrags, first + TOKEN_MAX_FRAGS)

    def where(self) -> dict[str, int]:
        """The current step for an event: ``batch`` (and ``chunk`` when there are several)."""
        if self.chunks <= 1:
            return {"batch": self.batch}
        tb, c = divmod(self.batch, self.chunks)
        return {"batch": tb, "chunk": c}

    def contributes(self) -> bool:
        """Whether this node sends in the current step: always in a batch's first chunk;
        in a later chunk only if its gradient is in the first (a gradient dropped by the
        cutoff stays out of the whole batch)."""
        return self.batch % self.chunks == 0 or bool(self.batch_members >> self.seq & 1)

    def step_complete(self, bitmap: int) -> bool:
        """Whether the current step may end: a batch's first chunk once the gradients cover
        ``--cutoff``; a later chunk once every active member of the first chunk's
        contributors has sent it too."""
        if self.batch % self.chunks == 0:
            return self.coverage(self.examples) >= self.args.cutoff - 1e-9
        want = sum(1 << s for s in self.active if self.batch_members >> s & 1)
        return want & ~bitmap == 0

    def parameters_blob(self) -> bytes:
        """The model's parameters as float32 bytes (what MODEL frames carry)."""
        from hosts import training as tr

        return tr.flatten(tr.parameter_arrays(self.model)).tobytes()

    def adopt_parameters(self, vec: np.ndarray) -> None:
        """Set the model's parameters from a flat float32 vector (a rejoin's MODEL)."""
        from hosts import training as tr

        with self.model_lock:
            tr.set_parameters(self.model, tr.unflatten(vec.copy(), self.like))

    def compute_step(self, b: int) -> tuple[Any, int, Any, float] | None:
        """The gradient of step ``b`` (a batch's first step), quantized: ``(q,
        examples, vec, t_start)``, or None when the batch ended during a piecewise
        computation (the cutoff went on without this node). The loop's compute step
        (:class:`hosts.token.sync.TokenSync`) calls it; :meth:`offer` hands the result
        to the protocol.

        It works on its own copy of the model (``worker_model``), taken under the lock
        the updates hold, so an update of the network thread never races a backward pass."""
        from hosts import training as tr

        t = time.monotonic()
        with self.model_lock:
            tr.set_parameters(self.worker_model, tr.parameter_arrays(self.model))
        tb = b // self.chunks  # b is a batch's first step
        epoch, i = divmod(tb, self.batches_per_epoch)
        if self.args.gradient:  # a given gradient (experiments.compare)
            vec = np.load(self.args.gradient).astype(np.float32)
            if vec.size != self.nvalues:
                raise TokenError(f"--gradient has {vec.size} values, the model {self.nvalues}")
            grads = tr.unflatten(vec, self.like)
            examples = self.args.batch_size
            pieces = 1
        else:
            seed = self.args.batch_seed if self.args.batch_seed >= 0 else self.seq
            with self.ready_lock:  # a redistribution may grow the shard
                x, y = self.x, self.y
            xb, yb = tr.batches(x, y, self.args.batch_size, epoch, seed=seed)[i]
            examples = len(yb)
            pieces = min(self.args.pieces, examples) if self.args.cutoff < 1.0 else 1
            if pieces > 1:
                vec = self.compute_in_pieces(b, xb, yb, pieces, t)
                if vec is None:
                    return None  # the batch ended without this node
                grads = tr.unflatten(vec, self.like)
            else:
                grads = tr.compute_gradients(self.worker_model, xb, yb)
                vec = tr.flatten(grads)
        spent = time.monotonic() - t
        slowdown = self.slowdown()
        if pieces > 1:
            pass  # slowed down piece by piece already
        elif self.args.compute_fixed > 0:
            time.sleep(max(0.0, self.args.compute_fixed * slowdown - spent))
        elif slowdown > 1:
            time.sleep(spent * (slowdown - 1))
        q = self.quantize(vec)
        path = Path(self.args.grad_json or ".") / f"grad-b{tb}-s{self.seq}.json"
        if self.args.grad_json and not path.exists():  # a partial one sent may be there
            write_json_gradients(path, tb, self.seq, grads)
        return q, examples, vec, t

    def offer(self, b: int, q: Any, examples: int, vec: Any, t: float) -> None:
        """Hand the gradient of step ``b`` to the protocol (``ready``), unless the batch
        moved on meanwhile."""
        with self.ready_lock:
            self.timing.compute += time.monotonic() - t
            if b == self.batch:
                self.ready = (b, q, time.monotonic(), examples, vec)
                self.ready_event.set()

    def compute_in_pieces(self, b: int, xb: Any, yb: Any, pieces: int, t0: float) -> Any:
        """The cutoff with partial gradients: the batch's gradient piece by piece; after each
        piece the mean over the examples done so far is offered (``partial``), so a slow
        node whose token comes early can send the examples it has (the cutoff counts
        examples). The slowdown is spread over the pieces. None if the batch moved on."""
        from hosts import training as tr

        n = len(yb)
        bounds = np.linspace(0, n, pieces + 1).astype(int)
        acc: Any = None
        done = 0
        slowdown = self.slowdown()
        for k in range(pieces):
            if b != self.batch:
                return None
            t = time.monotonic()
            lo, hi = int(bounds[k]), int(bounds[k + 1])
            g = tr.flatten(tr.compute_gradients(self.worker_model, xb[lo:hi], yb[lo:hi]))
            acc = g * (hi - lo) if acc is None else acc + g * (hi - lo)
            done = hi
            spent = time.monotonic() - t
            if self.args.compute_fixed > 0:
                time.sleep(max(0.0, self.args.compute_fixed * slowdown * (hi - lo) / n - spent))
            elif slowdown > 1:
                time.sleep(spent * (slowdown - 1))
            if k < pieces - 1:
                mean = (acc / done).astype(np.float32)
                with self.ready_lock:
                    if b == self.batch:
                        self.partial = (b, self.quantize(mean), time.monotonic(), done, mean)
        return (acc / n).astype(np.float32)

    def slowdown(self) -> float:
        """This node's compute factor: its entry of ``--slowdowns`` (by sequence number,
        known after formation) if given, else ``--slowdown``."""
        if self.args.slowdowns:
            factors = [float(f) for f in self.args.slowdowns.split(",")]
            if 1 <= self.seq <= len(factors):
                return factors[self.seq - 1]
        return float(self.args.slowdown)

    def quantize(self, vec: np.ndarray) -> Any:
        world = max(1, len(self.roster))
        try:
            return quantize(vec, self.args.scale_bits, world)
        except FixedPointOverflow:
            bound = max_abs_q(world) / 2.0**self.args.scale_bits
            self.stats["clipped"] += int(np.count_nonzero(np.abs(vec) > bound))
            return quantize(np.clip(vec, -bound, bound), self.args.scale_bits, world)

    # ------------------------------------------------------------------ batch end
    def read_nic(self, batch: int, nfrags: int | None = None, want: int = 0
                 ) -> tuple[np.ndarray, list[int]]:
        """READ fragments ``0..nfrags-1`` (default all) of step ``batch`` from the NIC:
        sums (int64) and bitmaps; the last READ (flag LAST) moves the NIC's window on.

        Loss recovery: a fragment whose bitmap lacks a contributor (``want``: the batch's
        final bitmap, or anyone seen in another fragment) that is still active is asked for
        again (NACK through the NIC, member = the contributor), and read again, at most
        ``REPAIR_ROUNDS`` times; only then the LAST READ closes the step in the NIC."""
        nfrags = self.nfrags if nfrags is None else nfrags
        sums = np.zeros(nfrags * TOKEN_VALUES, dtype=np.int64)
        bitmaps = [0] * nfrags
        todo = list(range(nfrags))
        active = sum(1 << s for s in self.active)
        t0 = time.monotonic()
        rounds = 0
        for rnd in range(REPAIR_ROUNDS + 1):
            self.read_frags(batch, todo, nfrags, sums, bitmaps)
            seen = want
            for m in bitmaps:
                seen |= m
            target = seen & (active | (1 << self.seq))
            todo = [f for f in range(nfrags) if target & ~bitmaps[f]]
            if not todo or rnd == REPAIR_ROUNDS:
                break
            for s in range(1, 32):
                fr = [f for f in todo if (target & ~bitmaps[f]) >> s & 1]
                if fr and s != self.seq:
                    self.send(self.header(TokenMsg.NACK, member=s, batch=batch, frag=fr[0],
                                          nfrags=fr[-1] + 1))
                    self.stats["repair_nacks"] += 1
            self.stats["repair_rounds"] += 1
            rounds += 1
            end = time.monotonic() + REPAIR_WAIT_S * (rnd + 1)
            while time.monotonic() < end:
                got = self.recv_frame(0.02)
                if got is not None:
                    self.pending.append(got)
        self.read_frags(batch, [nfrags - 1], nfrags, sums, bitmaps, last=True)
        if rounds:
            self.log("repair", step=batch, rounds=rounds, missing=len(todo),
                     s=round(time.monotonic() - t0, 3))
        return sums, bitmaps

    def recv_frame(self, timeout: float) -> tuple[Any, bytes, memoryview] | None:
        """One decoded frame straight from the socket (NACKs answered here), or None."""
        frame = self.link.recv(timeout)
        if frame is None:
            return None
        try:
            _d, src, hdr, rest = decode_token(frame)
        except TokenDecodeError:
            return None
        if hdr.msg_type == TokenMsg.NACK:
            self.on_nack(hdr)
            return None
        return hdr, src, rest

    def read_frags(self, batch: int, frags: list[int], nfrags: int, sums: np.ndarray,
                   bitmaps: list[int], last: bool = False) -> None:
        """READ ``frags`` of step ``batch`` into ``sums``/``bitmaps`` (``last``: with flag
        LAST, which moves the NIC's window on). At most ``--burst`` READs are outstanding
        (each reply is a full frame, and a burst of them overflowed BMv2's 64-frame egress
        queue); one unanswered for ``READ_RETRY_S`` is sent again (reads are idempotent),
        five times at most."""
        todo = deque(frags)
        want = set(frags)
        sent: dict[int, float] = {}
        tries = [0] * nfrags
        while want:
            while todo and len(sent) < self.args.burst:
                f = todo.popleft()
                if tries[f] == 5:
                    raise TokenError(f"the NIC did not answer the read-out of batch {batch} "
                                     f"(fragment {f}, 5 READs)")
                tries[f] += 1
                flags = int(TokenFlags.LAST) if last else 0
                self.send(self.header(TokenMsg.READ, batch=batch, frag=f, nfrags=nfrags, flags=flags))
                sent[f] = time.monotonic()
            got = self.recv_frame(0.05)
            if got is not None:
                hdr, src, rest = got
                if hdr.msg_type == TokenMsg.READ_REPLY and hdr.batch == batch:
                    if hdr.frag in want:
                        sums[hdr.frag * TOKEN_VALUES:(hdr.frag + 1) * TOKEN_VALUES] = token_values(rest)
                        bitmaps[hdr.frag] = hdr.bitmap
                        want.discard(hdr.frag)
                        sent.pop(hdr.frag, None)
                elif hdr.msg_type != TokenMsg.READ_REPLY:
                    self.pending.append((hdr, src, rest))
            now = time.monotonic()
            for f in [f for f, t in sent.items() if now - t > READ_RETRY_S]:
                del sent[f]
                todo.appendleft(f)

    def finish_chunk(self, final_bitmap: int) -> bool:
        """End of a step that is not its batch's last chunk: read that chunk's sums, keep
        them, move on to the next chunk (this node's gradient stays ready for it).
        False (nothing done) for a batch's last chunk."""
        step = self.batch
        c = step % self.chunks
        if c == self.chunks - 1:
            return False
        t = time.monotonic()
        f0, f1 = self.chunk_frags(c)
        sums, bitmaps = self.read_nic(step, f1 - f0, want=final_bitmap if c == 0 else self.batch_members)
        if c == 0:
            self.batch_members = final_bitmap
            self.chunk_sums = np.zeros(self.nfrags * TOKEN_VALUES, dtype=np.int64)
            self.chunk_bitmaps = []
        self.chunk_sums[f0 * TOKEN_VALUES:f1 * TOKEN_VALUES] = sums
        self.chunk_bitmaps += bitmaps
        self.stats["incomplete_frags"] += sum(1 for m in bitmaps if m != final_bitmap)
        with self.ready_lock:
            self.batch = step + 1
            sent = self.batch_grad
            if sent is not None and sent[0] == step - c and self.batch_members >> self.seq & 1:
                # the later chunks carry the same vector as the first (a partial one too)
                self.ready = (step + 1, *sent[1:])
            else:
                self.ready = None
                self.ready_event.clear()
            self.partial = None
        self.bitmap = 0
        self.examples = 0
        self.timing.accumulate += time.monotonic() - t
        return True

    def finish_batch(self, final_bitmap: int) -> None:
        """Batch end: read the sums of the current batch, w <- w - lr * sum / n; next batch.

        With several chunks this ends the current step: a chunk before the last only
        reads its sums (:meth:`finish_chunk`); the last one reads its own and updates
        with all of them (``n``: the first chunk's contributors)."""
        from hosts import training as tr

        if self.finish_chunk(final_bitmap):
            return
        t = time.monotonic()
        step = self.batch
        b = step // self.chunks
        if self.chunks == 1:
            sums, bitmaps = self.read_nic(step, want=final_bitmap)
        else:
            f0, f1 = self.chunk_frags(self.chunks - 1)
            last, last_maps = self.read_nic(step, f1 - f0, want=self.batch_members)
            self.stats["incomplete_frags"] += sum(1 for m in last_maps if m != final_bitmap)
            sums = self.chunk_sums
            sums[f0 * TOKEN_VALUES:f1 * TOKEN_VALUES] = last
            bitmaps = self.chunk_bitmaps + last_maps
            final_bitmap = self.batch_members
        counts = np.repeat([bin(m).count("1") for m in bitmaps], TOKEN_VALUES)
        n = bin(final_bitmap).count("1")
        if self.chunks == 1:
            self.stats["incomplete_frags"] += sum(1 for m in bitmaps if m != final_bitmap)
        if self.args.dump:
            d = Path(self.args.dump)
            np.save(d / f"sum-b{b}-s{self.seq}.npy", sums[: self.nvalues])
            (d / f"bitmap-b{b}-s{self.seq}.json").write_text(json.dumps(bitmaps))
        scale = 2.0 ** -self.args.scale_bits
        with np.errstate(divide="ignore", invalid="ignore"):
            mean = np.where(counts > 0, sums * scale / np.maximum(counts, 1), 0.0)
        update = tr.unflatten(mean[: self.nvalues].astype(np.float32), self.like)
        if self.args.grad_json:
            write_json_gradients(Path(self.args.grad_json) / f"mean-b{b}-s{self.seq}.json",
                                 b, self.seq, update, n=n)
        with self.model_lock:
            tr.apply_gradients(self.model, update, lr=self.args.lr)
        self.stats["batches"] += 1
        self.stats["gradients_accumulated"] += n
        self.timing.accumulate += time.monotonic() - t
        self.timing.batches += 1
        rec: dict[str, Any] = {"batch": b, "n": n, "contributors": bitmap_members(final_bitmap),
                               "active": sorted(self.active)}
        with self.ready_lock:
            self.batch = step + 1
            self.ready = None
            self.partial = None
            self.ready_event.clear()
        self.bitmap = 0
        self.examples = 0
        done = b + 1
        if done % self.batches_per_epoch == 0:
            rec["epoch"] = done // self.batches_per_epoch
            if not self.args.evals:
                rec["accuracy"] = self.evaluate()
        if self.args.evals:
            self.train_s = time.monotonic() - self.train_t0 - self.eval_s
            every = self.args.eval_every
            if (every and done % every == 0) or done % self.batches_per_epoch == 0:
                # hosts/trainer.py's points: every K steps and each epoch's end, once
                self.emit_eval(b // self.batches_per_epoch + 1, done)
        self.log("batch", **rec)
        if self.redistribute_due:
            self.redistribute()  # after the batch
        if self.batch < self.total_steps and not self.standby:
            self.work.put(self.batch)

    def emit_eval(self, epoch: int, step: int) -> None:
        """One harness evaluation record (``eval`` event): training time without
        evaluation time, the weights' hash and, on the evaluating node, the test and
        held-out accuracy; its own duration is left out of the training clock."""
        t0 = time.monotonic()
        from hosts import training as tr
        from hosts.trainer import weights_hash

        rec: dict[str, Any] = {"epoch": epoch, "step": step,
                               "t": round(t0 - self.train_t0 - self.eval_s, 4)}
        with self.model_lock:
            rec["weights"] = weights_hash(self.model)
            if self.test is not None and self.active and self.seq == min(self.active):
                data = tr.DigitsData(self.x, self.y, self.test[0], self.test[1],
                                     source=self.args.data or "digits")
                if self.heldout is None:
                    self.heldout = tr.heldout_set(data, self.args.seed)
                accs = tr.evaluate_sets(self.model, data, self.heldout)
                rec.update(accuracy=round(accs["test"], 4), heldout=round(accs["heldout"], 4))
        self.eval_s += time.monotonic() - t0
        self.log("eval", **rec)

    def evaluate(self) -> float:
        import torch

        assert self.test is not None
        with torch.no_grad():
            pred = self.model(self.test[0]).argmax(1)
        return round(float((pred == self.test[1]).float().mean()), 4)

    def save_model(self) -> str | None:
        if not self.args.save:
            return None
        import torch

        torch.save(self.model.state_dict(), self.args.save)
        return self.args.save
