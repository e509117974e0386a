"""PyTorch DDP communication hook: gradients averaged by gradnet INA.

An unchanged ``DistributedDataParallel`` training script gets in-network aggregation by
registering one hook::

    from hosts.ina.ddp_hook import InaHookState, ina_allreduce_hook

    dist.init_process_group("gloo", ...)          # control: rendezvous, broadcasts
    model = DDP(model)
    model.register_comm_hook(InaHookState.from_policy("job.policy.json", rank), ina_allreduce_hook)

DDP hands the hook each gradient bucket (a flat tensor); the hook converts it to int32
fixed point, runs one INA allreduce through the emulated network (``hosts.ina.worker``:
the aggregating switches of the job's policy, then the PS, which must run with
``--rounds 0`` and the hook's ``--round-cycle``), and returns the sum divided by the
world size, as DDP's default all-reduce hook does.

- **Sized to the bucket.** A bucket of ``B`` values sends ``ceil(B/V)`` fragments (``V``
  the policy's values per packet, 64 by default), the
  policy's first ones, not the job's ``F`` (the job is planned for the largest bucket,
  the whole model at most); the PS ends such a short round when the next one starts.
- **Bounded, reused fragment numbers.** Round ``r`` (one bucket) uses the numbers
  ``(r mod cycle)·F ...`` (``hosts.ina.rounds.FragmentCycle``), so every
  ``cycle`` rounds the numbers, and the switch aggregators they hash to, are used
  again; ``cycle`` (default ``HOOK_ROUND_CYCLE``) bounds the numbers by ``cycle·F``.
  Before they repeat, the hook waits until whatever the earlier rounds may have left in
  a switch has aged out (``reuse_after``; docs/ina.md, "Aging"), so a late packet of
  one bucket never mixes into a later one.
- **Overlapped with the backward pass.** The allreduces run on one background thread,
  in DDP's bucket order (the same on every rank); the hook returns at once with a
  future, so autograd goes on computing the next bucket's gradients meanwhile.
  ``asynchronous=False`` runs them inside the hook instead.

A bucket larger than the job (``InaHookState.capacity`` values) is refused with a clear
error, never truncated. The policy's number format decides how values travel:

- ``"bfp"`` (block floating point, what ``experiments/ddp.py`` plans): every block of ``V``
  values gets a shared exponent agreed in the network one step ahead, so no gradient is
  ever refused and nobody picks a scale; a bucket of ``B`` values then sends
  ``ceil(B/V) + min(32, ceil(B/V))`` fragments (the exponent ones first). The error
  per block is at most ``wire.fixedpoint.bfp_error_bound(N)`` times the block's
  largest magnitude (docs/ina.md, "Block floating point");
- ``"fixed"``: one scale ``2^S`` from the policy; the sum is exact in fixed point, and
  the only difference from gloo's float sum is the rounding of each value to a
  multiple of ``2^-S``; a bucket whose sum could overflow int32 is refused.

``CommTimer``/``timed_hook`` wrap any hook (this one, or gloo's ``allreduce_hook``) and
record when each bucket's communication ran, for the overlap measurement of
``hosts/ina/ddp_train.py``.
"""

# No ``from __future__ import annotations``: DDP checks the hook's annotations as objects.
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from hosts.ina.rounds import DEFAULT_REUSE_AFTER_S, FragmentCycle
from hosts.ina.worker import Worker, WorkerStats
from wire.fixedpoint import BFP_LOOKAHEAD, dequantize, quantize
from wire.ina_policy import Policy

#: Rounds (buckets) before the hook's fragment numbers repeat. At a few buckets per
#: step and tens of milliseconds a step, 1,024 rounds last far longer than
#: ``reuse_after``, so the wait before reuse is rare; numbers stay below 1,024·F.
HOOK_ROUND_CYCLE = 1024


@dataclass
class BucketRecord:
    """One bucket's allreduce: its size and what went on the wire (first sends and
    retransmissions)."""

    round: int
    values: int
    fragments: int
    first_fragment: int  # wire number of its first fragment
    packets_sent: int  # GRAD datagrams: first sends and re-sends on a NACK
    retransmissions: int  # re-sends on a NACK and header-only requests for a RESULT
    bytes_sent: int
    grad_resends: int = 0  # GRADs re-sent on a NACK: packets_sent - grad_resends = first sends


@dataclass
class InaHookState:
    """One rank's INA worker and the job's round counter (the hook's ``state``)."""

    worker: Worker
    num_fragments: int
    world_size: int
    cycle: FragmentCycle | None = None  # None: HOOK_ROUND_CYCLE rounds, reuse after 5 s
    asynchronous: bool = True
    stats: list[WorkerStats] = field(default_factory=list)
    buckets: list[BucketRecord] = field(default_factory=list)
    bytes_sent: int = 0
    _pool: ThreadPoolExecutor | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.cycle is None:
            self.cycle = FragmentCycle(self.num_fragments,
                                       cycle=min(HOOK_ROUND_CYCLE, 2**32 // self.num_fragments))
        elif self.cycle.num_fragments != self.num_fragments:
            raise ValueError(f"the fragment cycle is for {self.cycle.num_fragments} fragments, "
                             f"the job has {self.num_fragments}")
        if self.cycle.cycle < 3:
            # the PS ends a short round on the next round's first packet, which it must
            # tell from a late packet of the previous round (docs/ina.md)
            raise ValueError(f"the DDP hook needs a round cycle >= 3, got {self.cycle.cycle}")
        if self.asynchronous:
            # one thread: the rounds go out in DDP's bucket order, the same on every rank
            self._pool = ThreadPoolExecutor(1, thread_name_prefix=f"ina-hook-{self.worker.rank}")

    @classmethod
    def from_policy(cls, policy: str | Path | Policy, rank: int, *, window: int = 64,
                    timeout: float = 0.2, max_time: float = 120.0,
                    round_cycle: int = HOOK_ROUND_CYCLE,
                    reuse_after: float = DEFAULT_REUSE_AFTER_S,
                    asynchronous: bool = True) -> "InaHookState":
        """The state for ``rank`` of the job in ``policy`` (a policy file or object).
        ``round_cycle``/``reuse_after``: see ``FragmentCycle`` (the PS needs the same
        cycle: ``--round-cycle``); 0 = as many rounds as fit 32 bits."""
        pol = policy if isinstance(policy, Policy) else Policy.load(policy)
        cycle = FragmentCycle(pol.num_fragments, cycle=round_cycle, reuse_after=reuse_after)
        worker = Worker.from_policy(pol, rank, window=window, timeout=timeout,
                                    max_time=max_time)
        return cls(worker, pol.num_fragments, pol.num_workers, cycle, asynchronous)

    @property
    def round(self) -> int:
        """Allreduces begun."""
        assert self.cycle is not None
        return self.cycle.round

    @property
    def capacity(self) -> int:
        """Most values one bucket may hold (block floating point: the blocks and the
        exponent fragments ahead of them must fit the job's ``F``)."""
        if self.worker.number_format == "bfp":
            f = self.num_fragments
            blocks = f - BFP_LOOKAHEAD if f >= 2 * BFP_LOOKAHEAD else f // 2
            return blocks * self.worker.values_per_packet
        return self.num_fragments * self.worker.values_per_packet

    @property
    def fragment_space(self) -> int:
        """Wire fragment numbers stay below this (``cycle · F``)."""
        assert self.cycle is not None
        return self.cycle.offset + self.cycle.cycle * self.num_fragments

    def allreduce_sum(self, flat: np.ndarray) -> np.ndarray:
        """The sum over all ranks of ``flat`` (float32, at most ``capacity`` values), the
        same on every rank (the RESULT is one multicast). Sends ``ceil(n/V)``
        fragments; runs on the caller's thread."""
        n = flat.size
        if n > self.capacity:
            raise ValueError(
                f"gradient bucket of {n} values exceeds the INA job's {self.capacity} "
                f"({self.num_fragments} fragments x {self.worker.values_per_packet}"
                f"{' less the exponent fragments' if self.worker.number_format == 'bfp' else ''}"
                f"): plan the job with --values >= {n} or lower DDP's bucket_cap_mb")
        if n == 0:
            return np.zeros(0, dtype=np.float32)
        g = np.asarray(flat, dtype=np.float32)
        bfp = self.worker.number_format == "bfp"
        q = None if bfp else quantize(g, self.worker.scale_bits, self.world_size)
        assert self.cycle is not None
        k = self.round
        first = self.cycle.begin()
        if bfp:
            out, st = self.worker.allreduce_bfp(g, first)
        else:
            assert q is not None
            total, st = self.worker.allreduce_fixed(q, first)
            out = dequantize(total, self.worker.scale_bits)
        self.cycle.end()
        self.stats.append(st)
        self.buckets.append(BucketRecord(k, n, st.fragments, first,
                                         st.packets_sent, st.retransmissions, st.bytes_sent,
                                         st.resend_nack))
        self.bytes_sent += st.bytes_sent
        return out

    def allreduce_mean(self, flat: np.ndarray) -> np.ndarray:
        """The mean over all ranks of ``flat`` (float32, at most ``capacity`` values)."""
        return self.allreduce_sum(flat) / np.float32(self.world_size)

    def close(self) -> None:
        """Wait for the allreduces under way, then close the socket."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        self.worker.close()


def _bucket_mean(state: InaHookState, buf: torch.Tensor) -> torch.Tensor:
    mean = state.allreduce_mean(buf.detach().cpu().numpy().astype(np.float32, copy=False).ravel())
    return torch.from_numpy(mean).to(dtype=buf.dtype, device=buf.device).view_as(buf)


def ina_allreduce_hook(state: InaHookState,
                       bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook: average the bucket's gradients through INA (on the
    state's background thread unless it is synchronous)."""
    buf = bucket.buffer()
    fut: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    if state._pool is None:
        fut.set_result(_bucket_mean(state, buf))
        return fut
    # DDP reuses the bucket's buffer only after the future completes: no copy needed
    job = state._pool.submit(_bucket_mean, state, buf)

    def _done(j: Any) -> None:
        e = j.exception()
        if e is None:
            fut.set_result(j.result())
        else:
            fut.set_exception(e)

    job.add_done_callback(_done)
    return fut


# ------------------------------------------------------------------ timing


@dataclass
class CommTimer:
    """When each bucket's communication ran: (hook called, result ready), monotonic."""

    spans: list[tuple[float, float]] = field(default_factory=list)
    _open: dict[int, float] = field(default_factory=dict)
    _next: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def start(self) -> int:
        with self._lock:
            i, self._next = self._next, self._next + 1
            self._open[i] = time.monotonic()
            return i

    def finish(self, i: int) -> None:
        t = time.monotonic()
        with self._lock:
            self.spans.append((self._open.pop(i), t))

    def take(self) -> list[tuple[float, float]]:
        """The spans finished since the last ``take``."""
        with self._lock:
            out, self.spans = self.spans, []
            return out


@dataclass
class TimedState:
    """State of ``timed_hook``: the wrapped hook, its state, and the timer."""

    hook: Callable[[Any, dist.GradBucket], torch.futures.Future[torch.Tensor]]
    inner: Any
    timer: CommTimer = field(default_factory=CommTimer)


def timed_hook(state: TimedState,
               bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook: ``state.hook``, with its span recorded in ``state.timer``."""
    i = state.timer.start()
    fut = state.hook(state.inner, bucket)

    def _done(f: torch.futures.Future[torch.Tensor]) -> torch.Tensor:
        state.timer.finish(i)
        return f.value()

    return fut.then(_done)


def span_length(spans: list[tuple[float, float]], lo: float = -math.inf,
                hi: float = math.inf) -> float:
    """Length of the union of ``spans`` clipped to ``[lo, hi]``."""
    total, end = 0.0, -math.inf
    for a, b in sorted(spans):
        a, b = max(a, lo, end), min(b, hi)
        if b > a:
            total += b - a
        end = max(end, b)
    return total
