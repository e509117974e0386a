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
``--rounds 0`` or ``--rounds`` = the number of buckets reduced), and returns the sum
divided by the world size, as DDP's default all-reduce hook does. Round ``r`` of the job
uses the fragment numbers ``(r mod cycle)·F ...`` (F = the policy's fragments;
``hosts.ina.rounds.FragmentCycle``), so a late packet of one bucket never mixes into the
next, and the numbers stay within 32 bits however long the training runs: before they
repeat, the hook waits until the switches' aggregators the earlier rounds may have left
behind have aged out (``reuse_after``; docs/ina.md, "Aging").

Every bucket must fit the job: at most ``F·INA_VALUES`` values (``InaHookState.capacity``);
a larger one is refused with a clear error, never truncated. The sum is exact in fixed
point (scale ``2^S``, from the policy); the only difference from gloo's float sum is the
rounding of each value to a multiple of ``2^-S``.
"""

# No ``from __future__ import annotations``: DDP checks the hook's annotations as objects.
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from hosts.fixedpoint import dequantize, quantize
from hosts.ina.policy import Policy
from hosts.ina.rounds import DEFAULT_REUSE_AFTER_S, FragmentCycle
from hosts.ina.worker import Worker, WorkerStats
from hosts.packets import INA_VALUES


@dataclass
class InaHookState:
    """One rank's INA worker and the job's round counter (the hook's ``state``)."""

    worker: Worker
    num_fragments: int
    world_size: int
    cycle: FragmentCycle | None = None  # None: every 32-bit round, reuse after 2 s
    stats: list[WorkerStats] = field(default_factory=list)
    bytes_sent: int = 0

    def __post_init__(self) -> None:
        if self.cycle is None:
            self.cycle = FragmentCycle(self.num_fragments)
        elif self.cycle.num_fragments != self.num_fragments:
            raise ValueError(f"the fragment cycle is for {self.cycle.num_fragments} fragments, "
                             f"the job has {self.num_fragments}")

    @classmethod
    def from_policy(cls, policy: str | Path | Policy, rank: int, *, window: int = 64,
                    timeout: float = 0.2, max_time: float = 120.0, round_cycle: int = 0,
                    reuse_after: float = DEFAULT_REUSE_AFTER_S) -> "InaHookState":
        """The state for ``rank`` of the job in ``policy`` (a policy file or object).
        ``round_cycle``/``reuse_after``: see ``FragmentCycle`` (the PS needs the same
        cycle)."""
        pol = policy if isinstance(policy, Policy) else Policy.load(policy)
        cycle = FragmentCycle(pol.num_fragments, cycle=round_cycle, reuse_after=reuse_after)
        worker = Worker.from_policy(pol, rank, window=window, timeout=timeout,
                                    max_time=max_time)
        return cls(worker, pol.num_fragments, pol.num_workers, cycle)

    @property
    def round(self) -> int:
        """Allreduces begun."""
        assert self.cycle is not None
        return self.cycle.round

    @property
    def capacity(self) -> int:
        """Most values one bucket may hold."""
        return self.num_fragments * INA_VALUES

    def allreduce_sum(self, flat: np.ndarray) -> np.ndarray:
        """The sum over all ranks of ``flat`` (float32, at most ``capacity`` values), the
        same on every rank (the RESULT is one multicast)."""
        n = flat.size
        if n > self.capacity:
            raise ValueError(
                f"gradient bucket of {n} values exceeds the INA job's {self.capacity} "
                f"({self.num_fragments} fragments x {INA_VALUES}): plan the job with --values >= {n} "
                "or lower DDP's bucket_cap_mb")
        padded = np.zeros(self.capacity, dtype=np.float32)
        padded[:n] = flat
        q = quantize(padded, self.worker.scale_bits, self.world_size)
        assert self.cycle is not None
        total, st = self.worker.allreduce_fixed(q, self.cycle.begin())
        self.cycle.end()
        self.stats.append(st)
        self.bytes_sent += st.bytes_sent
        return dequantize(total[:n], self.worker.scale_bits)

    def allreduce_mean(self, flat: np.ndarray) -> np.ndarray:
        """The mean over all ranks of ``flat`` (float32, at most ``capacity`` values)."""
        return self.allreduce_sum(flat) / np.float32(self.world_size)

    def close(self) -> None:
        self.worker.close()


def ina_allreduce_hook(state: InaHookState,
                       bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook: average the bucket's gradients through INA."""
    buf = bucket.buffer()
    mean = state.allreduce_mean(buf.detach().cpu().numpy().astype(np.float32, copy=False).ravel())
    fut: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    fut.set_result(torch.from_numpy(mean).to(dtype=buf.dtype, device=buf.device).view_as(buf))
    return fut
