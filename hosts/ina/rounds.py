"""Fragment numbers of a job's back-to-back allreduces, from a bounded space
(docs/ina.md, "Rounds and fragment numbers").

Round ``k`` of a job of ``F`` fragments puts ``offset + (k mod cycle)·F + f`` on the wire,
so the numbers never outgrow the 32-bit field: after ``cycle`` rounds they repeat. Reuse
is safe once nothing of the round that last used them can still match: switch
aggregators it left behind (a lost RESULT or CLEAR, a late duplicate) are taken over
by a packet of their own key once they have been idle for 4x the switches' aggregator
timeout (``ina_aging``; within that, a packet of the same key is a rank lagging its
round, and adds to it), and a packet older than that is gone from the network. So
before a cycle starts again, :meth:`FragmentCycle.begin` waits until ``reuse_after``
seconds (more than 4x the aggregator timeout plus the longest a packet can stay in the
network) have passed since the previous round ended: every round of the previous cycle
ended no later than that.
The PS maps the numbers back with the same ``cycle`` (``ParameterServer(cycle=...)``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["DEFAULT_REUSE_AFTER_S", "FragmentCycle", "max_round_cycle"]

#: Above 4x the switches' default aggregator timeout (1 s, ``INA_AGGREGATOR_TIMEOUT_US``;
#: ``INA_SAME_KEY_AGING_SHIFT``: the same key is taken over only past 4 s) plus a second
#: for packets still queued somewhere.
DEFAULT_REUSE_AFTER_S = 5.0
_SPACE = 1 << 32  # the header's fragment field


def max_round_cycle(num_fragments: int, offset: int = 0) -> int:
    """The most rounds of ``num_fragments`` whose numbers fit 32 bits after ``offset``."""
    if num_fragments < 1 or not 0 <= offset < _SPACE:
        raise ValueError(f"need num_fragments >= 1 and offset within 0..2^32-1, got "
                         f"{num_fragments}, {offset}")
    return (_SPACE - offset) // num_fragments


@dataclass
class FragmentCycle:
    """Per-round fragment offsets of one job (see the module docstring).

    Args:
        num_fragments: ``F``, fragments per round.
        offset: wire number of round 0's first fragment.
        cycle: rounds before the numbers repeat (>= 2); 0 = as many as fit 32 bits.
        reuse_after: seconds between the end of a cycle's last round and the start of
            the next cycle.
        sleep, clock: for tests of the schedule itself.
    """

    num_fragments: int
    offset: int = 0
    cycle: int = 0
    reuse_after: float = DEFAULT_REUSE_AFTER_S
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)
    round: int = 0  # rounds begun
    waited_s: float = 0.0  # total time begin() spent waiting before reuse
    _last_end: float | None = field(default=None, repr=False)
    _open: bool = field(default=False, repr=False)  # begun, not ended (e.g. it failed)

    def __post_init__(self) -> None:
        most = max_round_cycle(self.num_fragments, self.offset)
        if self.cycle == 0:
            self.cycle = most
        if not 2 <= self.cycle <= most:
            raise ValueError(f"round cycle must be within 2..{most} (rounds of "
                             f"{self.num_fragments} fragments after offset {self.offset} "
                             f"that fit 32 bits), got {self.cycle}")
        if self.reuse_after < 0:
            raise ValueError(f"reuse_after must be >= 0, got {self.reuse_after}")

    def offset_of(self, k: int) -> int:
        """Wire number of round ``k``'s first fragment."""
        return self.offset + (k % self.cycle) * self.num_fragments

    def begin(self) -> int:
        """Start the next round: its first fragment number (waits first when the round
        reuses numbers and the previous round ended less than ``reuse_after`` ago)."""
        k = self.round
        if k and k % self.cycle == 0:
            # a round that never ended may have packets out until now
            ref = self.clock() if self._open or self._last_end is None else self._last_end
            wait = ref + self.reuse_after - self.clock()
            if wait > 0:
                self.sleep(wait)
                self.waited_s += wait
        self.round = k + 1
        self._open = True
        return self.offset_of(k)

    def end(self) -> None:
        """The round begun last has its result."""
        self._last_end = self.clock()
        self._open = False
