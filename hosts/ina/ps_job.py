"""The INA parameter server's state of one job (docs/ina.md, "PS"): its counters
(``JobStats``; ``PSCounters`` and ``PSReport`` for the whole PS) and, per fragment, the contributors summed so far, the sums, the agreed
exponent and the finished RESULTs of this round and the last (``JobState``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from hosts.ina.recovery import JobRecovery
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
    result_resends: int = 0  # RESULT again (held) for a request or a RETX of a finished fragment
    clears_sent: int = 0
    # loss recovery (docs/ina.md, "Loss recovery")
    requests_in: int = 0  # workers' header-only NACKs: a RESULT missing
    nacks_sent: int = 0  # NACKs to workers: re-send a fragment
    flushes_sent: int = 0  # NACKs to switches: send what you hold
    flush_replies: int = 0  # PARTIALs of flushed fragments from the flushed switches
    delta_partials: int = 0  # ... added as the difference from what a flush brought
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
    recovery: JobRecovery | None = None  # loss recovery (None: a plain one is made)
    worker_ips: list[str] = field(default_factory=list)  # rank -> address (NACKs)
    switch_addrs: dict[int, tuple[str, int]] = field(default_factory=dict)  # flushes
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
        if self.recovery is None:
            self.recovery = JobRecovery(self.num_workers, self.num_fragments, None)

    def wire_fragment(self, f: int) -> int:
        """The wire number of fragment ``f`` of the current round."""
        return self.offset + (self.round % self.cycle) * self.num_fragments + f

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

    def add_sums(self, f: int, bm: int, sums: np.ndarray, mx: int) -> int:
        """Add int32 ``sums`` (already decoded) for contributors ``bm``; the new bitmap."""
        row = self.acc[f]
        row += sums  # wraps mod 2^32
        self.have[f] |= bm
        if mx > self.max_exp[f]:
            self.max_exp[f] = mx
        return self.have[f]

    def next_round(self) -> None:
        """Keep this round's results for late retransmissions; start the next."""
        self.prev_results, self.results = self.results, {}
        self.prev_max_exp = self.max_exp
        self.acc[:] = 0
        self.have = [0] * self.num_fragments
        self.max_exp = [0] * self.num_fragments
        self.round += 1
        self.round_done = 0
        assert self.recovery is not None
        self.recovery.reset()


@dataclass
class PSCounters:
    """Datagrams that belong to no job: counted and dropped."""

    datagrams: int = 0
    bytes_in: int = 0  # every datagram's UDP payload bytes
    short: int = 0
    bad_type: int = 0  # RESULT, CLEAR or unknown msg_type
    unknown_job: int = 0
    out_of_range: int = 0  # fragment not in this job's range
    bad_bitmap: int = 0  # empty, or names a rank >= num_workers
    send_errors: int = 0
    fault_drops: int = 0  # TEST ONLY


@dataclass
class PSReport:
    """What a ``run`` did (``to_dict`` is the CLI's JSON)."""

    complete: bool
    duration_s: float
    jobs: dict[int, JobStats]
    counters: PSCounters
    nic_rx_bytes: int | None = None
    nic_rx_packets: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "complete": self.complete,
            "duration_s": round(self.duration_s, 6),
            "jobs": {str(j): asdict(s) for j, s in self.jobs.items()},
            **asdict(self.counters),
            "nic_rx_bytes": self.nic_rx_bytes,
            "nic_rx_packets": self.nic_rx_packets,
        }
