"""The INA parameter server's loss recovery of one job (docs/ina.md, "Loss recovery").

The PS knows, per fragment, exactly whose contributions it has (the bitmap), and the
policy says where each worker's contribution to each fragment goes (a switch, or the PS
itself). So it asks for exactly what is missing, on evidence:

- **Evidence.** When a fragment completes, every fragment below it still incomplete
  that took the same path (the same switches) has one more later completion against
  it: completions through different switches are reordered by dozens (make run's
  fat-tree), one path's are not. Workers send fragments in order, so at
  ``REORDER_ALLOWANCE`` later completions every worker has sent it (level 1); at
  ``ESCALATE_AFTER`` later completions it is still incomplete (level 2), but not
  before what level 1 sent has had two round trips to be answered (flush round trips,
  measured like a timer's samples: completions come in bursts, faster than a switch
  or a worker answers). A worker's
  request for a fragment it contributed to (``hosts/ina/transfer.py``: its timer or
  later RESULTs) is evidence too: the first request raises the fragment to level 1,
  a second request of the same worker to level 2.
- **Level 1.** A missing worker whose contribution goes straight to the PS (tag 0)
  gets a NACK: "re-send this fragment to me". A switch that aggregates missing workers
  gets a flush (a NACK tagged with it): it answers with a PARTIAL of what it holds,
  complete or not (ina_aggregator.p4). A complete one is a lost PARTIAL sent again; an
  incomplete one says exactly whose GRAD is missing, and those workers get a NACK.
- **Level 2.** Every missing worker gets a NACK (the switch held nothing: its
  aggregator was taken over, or every GRAD to it was lost; or a NACK or re-send was
  lost too), again on a worker's repeated request, at most once per two flush round
  trips.
- **RESULTs of recovered fragments** carry ``RETX``: their round trip says nothing about
  the network (Karn's rule), so the workers take no sample from them.
- **A flushed aggregate that completes later** (the missing GRAD was late, not lost)
  reaches the PS as a PARTIAL that overlaps what the flush brought. The PS keeps the
  flushed sums per (fragment, switch) and adds the difference (the sums are linear and
  wrap mod 2^32 alike; ``max_exp`` is a max, so the later one holds): the late
  contributor is counted once, and in-network aggregation is not lost to a flush.

Every rule keeps exactly once: a contribution is added only when its bitmap is disjoint
from what the fragment has.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hosts.ina.transfer import REORDER_ALLOWANCE
from wire.ina import BE_I32, INA_HEADER, INA_HEADER_LEN, InaFlags, MsgType
from wire.ina_policy import result_paths

__all__ = ["ESCALATE_AFTER", "JobRecovery", "PsRecovery", "REORDER_ALLOWANCE"]

_NACK, _RESULT, _RETX = int(MsgType.NACK), int(MsgType.RESULT), int(InaFlags.RETX)

#: later completions after which every worker still missing is asked (level 2)
ESCALATE_AFTER = 3 * REORDER_ALLOWANCE
#: the flush round trip assumed before the first is measured (s)
_FIRST_FLUSH_RTT_S = 0.05


@dataclass
class Actions:
    """What the PS must send for one fragment: NACKs to ranks, flushes to switches."""

    f: int
    nack: int = 0  # bitmap of ranks to NACK
    flush: list[int] = field(default_factory=list)  # switch ids


class JobRecovery:
    """One job's recovery state for the current round (``reset`` on a new round).

    Args:
        num_workers, num_fragments: the job's.
        tags: (W, F) switch id each worker's contribution to each fragment goes to (0 =
            the PS); None = all 0 (the PS-only baseline).
        via_sd: switch id -> (F,) s_d's id where that switch's aggregate of the fragment
            is merged again at s_d (the policy's ``partial_tags``).
        sd: s_d's switch id, or 0.
    """

    def __init__(self, num_workers: int, num_fragments: int, tags: np.ndarray | None,
                 via_sd: dict[int, np.ndarray] | None = None, sd: int = 0) -> None:
        self.num_workers, self.num_fragments = num_workers, num_fragments
        self.tags = None if tags is None or not tags.any() else tags.astype(np.int64)
        self.via_sd = {s: np.asarray(v) for s, v in (via_sd or {}).items()}
        self.sd = sd
        self.path = result_paths(self.tags, self.via_sd, num_fragments)
        self.flush_rtt = _FIRST_FLUSH_RTT_S  # smoothed flush -> reply time
        self.reset()

    def reset(self) -> None:
        """A new round: nothing is missing yet."""
        self.holes: dict[int, int] = {}  # incomplete fragment -> later completions
        self.hi = -1  # highest completed fragment
        self.level: dict[int, int] = {}  # fragment -> recovery level reached (1, 2)
        self.nacked: dict[int, int] = {}  # fragment -> ranks NACKed
        # fragment -> askers to NACK if the next flush reply of their switch lacks them
        self.pending: dict[int, int] = {}
        # fragment -> askers that asked while a flush was out: its reply may predate
        # their GRAD at the switch, so a reply lacking them flushes again
        self.refresh: dict[int, int] = {}
        self.askers: dict[int, int] = {}  # fragment -> ranks that asked for its RESULT
        self.nacked_at: dict[int, float] = {}  # fragment -> when all its missing were NACKed
        self.flushed: dict[int, set[int]] = {}  # fragment -> switches flushed
        self.flushed_at: dict[int, float] = {}  # fragment -> when its flush went out
        self.answered: dict[int, set[int]] = {}  # fragment -> switches that answered
        self.acted_at: dict[int, float] = {}  # fragment -> when its last level began
        # (fragment, switch) -> (bitmap, sums, max_exp) of what the switch last sent
        self.held: dict[tuple[int, int], tuple[int, np.ndarray, int]] = {}

    # ------------------------------------------------------------------ evidence

    def on_complete(self, f: int, finished: dict[int, bytes], now: float) -> list[int]:
        """Fragment ``f`` completed (``finished``: this round's finished fragments) at
        ``now``: the fragments below it whose recovery is due (``escalate`` each)."""
        holes = self.holes
        holes.pop(f, None)
        self.level.pop(f, None)
        if f > self.hi:
            for g in range(self.hi + 1, f):
                if g not in finished:
                    holes[g] = 0
            self.hi = f
        if not holes:
            return []
        due = []
        path = self.path
        for g in [g for g in holes if g < f and path[g] == path[f]]:
            n = holes[g] = holes[g] + 1
            if n == REORDER_ALLOWANCE:
                due.append(g)
            elif n >= ESCALATE_AFTER:
                t = self.acted_at.get(g)
                if t is None or now - t >= 2 * self.flush_rtt:
                    due.append(g)
                    del holes[g]
        return due

    def escalate(self, f: int, missing: int, now: float,
                 level: int | None = None) -> Actions | None:
        """Raise fragment ``f`` one level (or to ``level``) given the ranks it still
        lacks, at ``now``; the NACKs and flushes to send, or None when it is there."""
        cur = self.level.get(f, 0)
        new = min(2, cur + 1) if level is None else level
        if new <= cur or not missing:
            return None
        self.level[f] = new
        self.acted_at[f] = now
        act = Actions(f)
        if new == 1 and self.tags is not None:
            switches: set[int] = set()
            r, m = 0, missing
            while m:
                if m & 1:
                    t = int(self.tags[r, f])
                    if t == 0:
                        act.nack |= 1 << r
                    else:
                        switches.add(t)
                        if t in self.via_sd and int(self.via_sd[t][f]) == self.sd and self.sd:
                            switches.add(self.sd)
                m >>= 1
                r += 1
            act.flush = sorted(switches)
            self.flushed.setdefault(f, set()).update(switches)
            if switches:
                self.flushed_at[f] = now
        else:  # level 2, or no switch aggregates: ask every missing worker
            act.nack = missing
            self.nacked[f] = self.nacked.get(f, 0) | missing
            self.nacked_at[f] = now
        return act

    def on_request(self, f: int, rank_bits: int, missing: int, now: float) -> Actions | None:
        """A worker (``rank_bits``) asks for the RESULT of incomplete fragment ``f``.
        A first request raises a fragment with no recovery yet to level 1; after that,
        an asker that is itself missing is asked for again (``ask``), and a second
        request of the same worker asks for every worker still missing, at most once per
        two flush round trips (level 2). Anything else is already being recovered.
        (NACKs go only to workers with evidence against them: ``PsRecovery._act``.)"""
        again = self.askers.get(f, 0) & rank_bits
        self.askers[f] = self.askers.get(f, 0) | rank_bits
        if self.level.get(f, 0) == 0:
            return self.escalate(f, missing, now, 1)
        if rank_bits & missing:
            return self.ask(f, rank_bits & missing, now)
        if not again or not missing or now - self.nacked_at.get(f, -1e9) < 2 * self.flush_rtt:
            return None
        self.level[f] = 2
        self.nacked_at[f] = now
        return self.ask(f, missing, now)

    def ask(self, f: int, ranks: int, now: float) -> Actions | None:
        """The PS lacks ``ranks``' contributions to fragment ``f``, and has evidence that
        they were sent. A rank that sends straight to the PS gets a NACK. A rank whose
        contribution goes to a switch: the switch is flushed again (a reply already in
        may predate its GRAD there: the rank sent it, then asked; a rank lagging the
        others leaves their contributions waiting in the aggregate, which they are not
        missing from), and the reply NACKs it if it still lacks it
        (``PsRecovery._after_flush_reply``); a flush out less than two flush round trips
        ago is waited for; one out longer without a reply (the flush or its reply lost,
        the switch out of reach) NACKs it at once."""
        act, r, m = Actions(f), 0, ranks
        flushed, answered = self.flushed.setdefault(f, set()), self.answered.get(f, set())
        in_flight = now - self.flushed_at.get(f, -1e9) < 2 * self.flush_rtt
        while m:
            if m & 1:
                bit = 1 << r
                t = 0 if self.tags is None else int(self.tags[r, f])
                if t == 0:
                    act.nack |= bit
                elif t in flushed and t not in answered:
                    if in_flight:  # a flush is out: its reply may predate this GRAD there
                        self.refresh[f] = self.refresh.get(f, 0) | bit
                    else:
                        act.nack |= bit  # waited two flush round trips for its reply
                else:
                    self.pending[f] = self.pending.get(f, 0) | bit
                    if t not in act.flush:
                        act.flush.append(t)
                        if t in self.via_sd and int(self.via_sd[t][f]) == self.sd and self.sd:
                            act.flush.append(self.sd)
            m >>= 1
            r += 1
        if act.flush:
            flushed.update(act.flush)
            answered.difference_update(act.flush)
            self.flushed_at[f] = now
        if act.nack:
            self.nacked[f] = self.nacked.get(f, 0) | act.nack
        return act if act.nack or act.flush else None

    def group(self, f: int, switch: int) -> int:
        """The ranks whose contribution to fragment ``f`` the switch aggregates (s_d:
        also those merged at s_d from ``VIA_SD`` switches)."""
        if self.tags is None:
            return 0
        col = self.tags[:, f]
        bits = 0
        for r in range(self.num_workers):
            t = int(col[r])
            if t == switch or (switch == self.sd and t in self.via_sd
                               and int(self.via_sd[t][f]) == self.sd):
                bits |= 1 << r
        return bits

    # ------------------------------------------------------------ flushed sums

    def flush_answered(self, f: int, switch: int, now: float) -> None:
        """A flushed switch answered for fragment ``f``: one flush round-trip sample."""
        self.answered.setdefault(f, set()).add(switch)
        t = self.flushed_at.get(f)
        if t is not None:
            self.flush_rtt = 0.875 * self.flush_rtt + 0.125 * (now - t)

    def partial_delta(self, f: int, switch: int, bm: int, data: bytes, mx: int,
                      values_per_packet: int) -> tuple[int, np.ndarray | None]:
        """A PARTIAL from ``switch`` for flushed fragment ``f``: (bitmap, sums) to add
        instead of the packet's own, and remember the packet as what the switch holds.
        (bm, None): add the packet as it is; (0, None): nothing to add beyond what an
        earlier PARTIAL of the switch brought."""
        vals = np.frombuffer(data, BE_I32, values_per_packet, INA_HEADER_LEN).astype(np.int32)
        old = self.held.get((f, switch))
        self.held[(f, switch)] = (bm, vals, mx)
        if old is None:
            return bm, None
        obm, ovals, _ = old
        if bm & obm != obm:  # not a superset: an unrelated aggregate (taken over)
            return bm, None
        delta = bm & ~obm
        if not delta:
            return 0, None
        with np.errstate(over="ignore"):
            return delta, (vals - ovals).astype(np.int32)  # wraps mod 2^32


#: how far past a fragment ``_eligible`` looks for a worker's later contribution (more
#: than any worker's window: a worker sends nothing that far ahead of a fragment it lacks)
_PROGRESS_SCAN = 256


def _eligible(jb: Any, f: int, cand: int) -> int:
    """Of the ranks ``cand``, those with evidence that their contribution to fragment
    ``f`` was lost: they asked for its RESULT, or the PS has their contribution to a
    later fragment that took the same path (the same switch, or straight to the PS):
    packets of one path arrive in order, so that one was sent after, and arrived
    before, this one. A later fragment through another switch proves nothing (paths
    queue differently: make run's fat-tree reorders completions by dozens)."""
    rec = jb.recovery
    out = cand & rec.askers.get(f, 0)
    tags, have, m, r = rec.tags, jb.have, cand & ~out, 0
    end = min(jb.num_fragments, f + 1 + _PROGRESS_SCAN)
    while m:
        if m & 1:
            bit = 1 << r
            t = 0 if tags is None else int(tags[r, f])
            for g in range(f + 1, end):
                if have[g] & bit and (tags is None or int(tags[r, g]) == t):
                    out |= bit
                    break
        m >>= 1
        r += 1
    return out


class PsRecovery:
    """The ``ParameterServer``'s side of recovery (mixed into it): requests from workers,
    NACKs and flushes out, flushed PARTIALs in. Uses the PS's ``_send``, ``_place``,
    ``port`` and ``counters``."""

    port: int

    def _send(self, data: bytes, addr: tuple[str, int]) -> None:  # the PS's
        raise NotImplementedError

    def _act(self, jb: Any, act: Actions | None) -> None:
        """Send one fragment's NACKs (one per rank, to its address) and flushes. A NACK
        goes only to a worker with evidence against it: it contributed to a later
        fragment (so it sent this one), or it asked for this fragment's RESULT. A worker
        that has not got this far (a straggler, a rank still computing) is not asked
        for what it has not sent yet, nor for what is still on its way."""
        if act is None:
            return
        if act.nack:
            act.nack = _eligible(jb, act.f, act.nack)
        st, frag = jb.stats, jb.wire_fragment(act.f)
        pack = INA_HEADER.pack
        for s in act.flush:
            addr = jb.switch_addrs.get(s)
            if addr is None:
                continue
            missing = jb.full & ~jb.have[act.f]
            self._send(pack(_NACK, jb.job, 0, frag, s, 0, missing, missing.bit_count(), 0, 0, 0),
                       addr)
            st.flushes_sent += 1
        m, r = act.nack, 0
        while m:
            if m & 1:
                self._send(pack(_NACK, jb.job, 0, frag, 0, 0, 1 << r, 1, 0, 0, 0),
                           (jb.worker_ips[r], self.port))
                st.nacks_sent += 1
            m >>= 1
            r += 1

    def _on_complete(self, jb: Any, f: int) -> None:
        rec, now = jb.recovery, time.monotonic()
        for g in rec.on_complete(f, jb.results, now):
            self._act(jb, rec.escalate(g, jb.full & ~jb.have[g], now))

    def _on_request(self, data: bytes, addr: tuple[str, int]) -> None:
        """A worker's header-only NACK: it lacks a fragment's RESULT."""
        mt, job, _w, frag, _t, _o, bm, _c, _fi, flags, _s, _mx = INA_HEADER.unpack_from(data)
        placed = self._place(mt, job, frag, bm, flags, len(data))  # type: ignore[attr-defined]
        if placed is None:
            return
        jb, r, f = placed
        st = jb.stats
        if bm & ~jb.worker_bits.get(addr[0], 0):  # only a worker asks, for itself
            st.refused_source += 1
            return
        st.requests_in += 1
        values = jb.finished_values(f, r)
        if values is not None:  # finished: the RESULT it holds, by unicast
            hdr = INA_HEADER.pack(_RESULT, jb.job, 0, frag, 0, 0, jb.full, jb.num_workers, 0,
                                  _RETX, 0, jb.finished_exp(f, r))
            self._send(hdr + values, addr)
            st.result_resends += 1
        elif r == jb.round:
            self._act(jb, jb.recovery.on_request(f, bm, jb.full & ~jb.have[f], time.monotonic()))

    def _partial_in(self, jb: Any, f: int, tag: int, bm: int, data: bytes, mx: int,
                    flags: int) -> tuple[int, Any]:
        """A PARTIAL of a flushed fragment from a flushed switch (a flush reply, flagged
        ``RETX``, or its aggregate completing later): (bitmap, sums or None) to add
        (``JobRecovery.partial_delta``)."""
        if flags & _RETX:
            jb.stats.flush_replies += 1
            jb.recovery.flush_answered(f, tag, time.monotonic())
        return jb.recovery.partial_delta(f, tag, bm, data, mx, jb.values_per_packet)

    def _after_flush_reply(self, jb: Any, f: int, tag: int) -> None:
        """The switch's aggregate is in: NACK whoever of its group the PS still lacks
        and has evidence against (not NACKed yet, or asked for again since)."""
        rec = jb.recovery
        group = rec.group(f, tag)
        pend, fresh = rec.pending.get(f, 0), rec.refresh.get(f, 0) & group
        rec.pending[f] = pend & ~group
        rec.refresh[f] = rec.refresh.get(f, 0) & ~group
        lacking = jb.full & ~jb.have[f] & group
        if lacking & fresh:  # they asked after this flush went out: ask the switch again
            self._act(jb, rec.ask(f, lacking & fresh, time.monotonic()))
        missing = lacking & ~fresh & (~rec.nacked.get(f, 0) | pend)
        nack = _eligible(jb, f, missing) if missing else 0
        if nack:
            rec.nacked[f] = rec.nacked.get(f, 0) | nack
            self._act(jb, Actions(f, nack=nack))
