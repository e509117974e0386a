"""The INA parameter server's state of one job (docs/ina.md, "PS"): its counters
(``JobStats``) and, per fragment, the contributors summed so far, the sums, the agreed
exponent and the finished RESULTs of this round and the last (``JobState``)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hosts.ina.rounds import max_round_cycle
from wire.ina import BE_I32, INA_HEADER_LEN, INA_VALUES, check_values_per_packet


@dataclass
class JobStats:
    """Per-job counters."""

    job: int
    num_workers: int
    fragments: int
    completed: int = 0
    packets_in: int = 0  # well-formed GRAD/PARTIAL datagrams of this job
    bytes_in: int = 0  # their UDP payload bytes
    grad_in: int = 0  # GRAD packets: raw (single contributor) ...
    merged_grad_in: int = 0  # ... except these: a VIA_SD aggregate passed on by a busy s_d
    partial_in: int = 0  # switch partial aggregates
    retx_in: int = 0  # GRAD with the RETX flag
    forwarded_in: int = 0  # GRAD passed on unaggregated by a busy switch (origin != 0)
    accepted_grad: int = 0
    accepted_partial: int = 0
    contributions: int = 0  # worker values summed (popcount of accepted bitmaps)
    duplicates: int = 0  # bitmap a subset of what the fragment has
    overlaps: int = 0  # bitmap overlaps it only in part: ignored
    late: int = 0  # for an already finished fragment
    count_mismatch: int = 0  # count field != popcount(bitmap) (accepted by bitmap)
    wrong_size: int = 0  # not this job's packet size (another values per packet): dropped
    refused_source: int = 0  # from no worker of the job (for its bit) and no job switch
    refused_stamp: int = 0  # without the job's admission stamp (hosts/ina/stamp.py)
    results_sent: int = 0
    result_resends: int = 0  # RESULT again for a RETX of a finished fragment
    clears_sent: int = 0
    rounds: int = 0  # rounds begun (one a DDP bucket), set by the report
    short_rounds: int = 0  # rounds of fewer than F fragments, ended by the next round
    first_packet_s: float | None = None  # since the PS started
    complete_s: float | None = None


@dataclass
class JobState:
    """Aggregation state of one job: per fragment, the bitmap summed so far, the sums
    and the agreed exponent; the finished fragments of this round and the last."""

    job: int
    num_workers: int
    num_fragments: int
    offset: int  # fragment number on the wire = offset + index
    full: int  # bitmap of all workers
    result_dsts: list[tuple[tuple[str, int], int]]  # (address, tag) for each RESULT copy
    worker_bits: dict[str, int]  # worker address -> the bit its own GRADs carry
    switch_srcs: frozenset[str]  # the job's aggregating switches: any aggregate may come
    clears: list[list[tuple[int, tuple[str, int]]]]  # per fragment: (switch id, address)
    stats: JobStats
    rounds: int = 1  # allreduces of F fragments each, back to back; 0 = no limit
    cycle: int = 0  # rounds before the wire numbers repeat (hosts/ina/rounds.py); 0 = most
    round: int = 0  # the round being aggregated: wire fragment =
    #                 offset + (round mod cycle)·F + index
    round_done: int = 0  # fragments of this round finished
    values_per_packet: int = INA_VALUES  # V: values a fragment carries
    stamp: int = 0  # the job's admission stamp (hosts/ina/stamp.py); 0: unchecked
    acc: np.ndarray = field(init=False)  # (F, V) int32, wraps mod 2^32 like the switches
    packet_len: int = field(init=False)  # UDP payload bytes of a GRAD/PARTIAL: header + 4V
    zero_values: bytes = field(init=False)  # 4V zero bytes
    have: list[int] = field(init=False)  # per fragment: bitmap summed so far
    # per fragment: max of the accepted packets' max_exp (block floating point)
    max_exp: list[int] = field(init=False)
    results: dict[int, bytes] = field(default_factory=dict)  # finished fragment -> values
    # the previous round's results: a worker whose RESULT was lost retransmits while the
    # others have moved on (no worker can be two rounds behind: each round needs all)
    prev_results: dict[int, bytes] = field(default_factory=dict)
    prev_max_exp: list[int] = field(default_factory=list)  # the previous round's max_exp

    def __post_init__(self) -> None:
        most = max_round_cycle(self.num_fragments, self.offset)
        self.cycle = self.cycle or most
        if not 2 <= self.cycle <= most:
            raise ValueError(f"job {self.job}: round cycle must be within 2..{most}, got "
                             f"{self.cycle}")
        v = self.values_per_packet = check_values_per_packet(self.values_per_packet)
        self.acc = np.zeros((self.num_fragments, v), dtype=np.int32)
        self.packet_len = INA_HEADER_LEN + 4 * v
        self.zero_values = bytes(4 * v)
        self.have = [0] * self.num_fragments
        self.max_exp = [0] * self.num_fragments

    @property
    def done(self) -> bool:
        return self.rounds > 0 and self.round == self.rounds - 1 and \
            self.round_done == self.num_fragments

    @property
    def in_progress(self) -> bool:
        """Some fragment of this round has contributions but is not finished."""
        full = self.full
        return any(h and h != full for h in self.have)

    @property
    def short_round_over(self) -> bool:
        """The round sent fewer than F fragments and all of them are finished: a packet
        of the next round ends it (only a worker with every RESULT moves on)."""
        return (0 < self.round_done < self.num_fragments and not self.in_progress
                and (self.rounds == 0 or self.round < self.rounds - 1))

    def round_of(self, w: int) -> int:
        """The round the wire number's cycle position ``w`` stands for: the current one,
        an earlier one, or (only one behind the numbers' reuse) the next."""
        d = (self.round - w) % self.cycle
        return self.round + 1 if d == self.cycle - 1 and self.cycle > 2 else self.round - d

    def finished_values(self, f: int, r: int) -> bytes | None:
        """Fragment ``f``'s RESULT values when it is finished in round ``r`` (zeros for a
        round older than the last: only a stale packet asks), else None."""
        zero = self.zero_values
        return self.results.get(f) if r == self.round else (
            self.prev_results.get(f, zero) if r == self.round - 1 else zero)

    def finished_exp(self, f: int, r: int) -> int:
        """The agreed ``max_exp`` of fragment ``f`` finished in round ``r``."""
        if r == self.round:
            return self.max_exp[f]
        return self.prev_max_exp[f] if r == self.round - 1 and self.prev_max_exp else 0

    def add(self, f: int, bm: int, data: bytes, mx: int) -> int:
        """Sum one packet's values into fragment ``f``; returns its new bitmap."""
        row = self.acc[f]
        row += np.frombuffer(data, BE_I32, self.values_per_packet, INA_HEADER_LEN)  # wraps mod 2^32
        have = self.have[f] | bm
        self.have[f] = have
        if mx > self.max_exp[f]:
            self.max_exp[f] = mx
        return have

    def next_round(self) -> None:
        """Keep this round's results for late retransmissions; start the next."""
        self.prev_results, self.results = self.results, {}
        self.prev_max_exp = self.max_exp
        self.acc[:] = 0
        self.have = [0] * self.num_fragments
        self.max_exp = [0] * self.num_fragments
        self.round += 1
        self.round_done = 0
