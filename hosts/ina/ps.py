"""In-network-aggregation parameter server (docs/ina.md, "PS").

Global aggregation with exactly-once accounting: per (job, fragment) the PS keeps the
bitmap of contributors it has summed. A packet is added only if its bitmap is disjoint
from that; a subset is a duplicate, a partial overlap is ignored (its missing
contributors come again as retransmissions); both are counted. When every worker is
in, the PS sends ``RESULT`` (through ``s_d`` when the policy has one, else by unicast to
every worker) and ``CLEAR`` to every other switch the policy names for the fragment;
a ``RETX`` ``GRAD`` for a finished fragment gets its ``RESULT`` again by unicast.

Several jobs share one PS socket: all state is keyed by job id, the packet size (values
per packet, the policy's ``values_per_packet``) included. Malformed input (short,
unknown type, unknown job, fragment out of range, bad bitmap) is counted and dropped, and
so is a contribution from an address that is neither the job's worker whose bit it
carries nor one of the job's aggregating switches (docs/trust.md, "INA: admission").

CLI::

    python -m hosts.ina.ps --policy policy.json [--policy job2.json] [--json]
        [--linger 1.0] [--max-time 300] [--iface ps-eth0] [--out-int sums.npz]
        [--rounds N] [--round-cycle R]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from hosts.ina.agent import (
    FaultInjection,
    InaTimeoutError,
    add_drop_options,
    open_ina_socket,
    parse_fault_spec,
)
from hosts.ina.fastpath import rare_gc
from hosts.ina.ps_io import ps_io
from hosts.ina.ps_job import JobState, JobStats, PSCounters, PSReport
from hosts.ina.recovery import JobRecovery, PsRecovery
from hosts.ina.stamp import admitted, policy_stamp
from hosts.net import net_dev, peak_rss_mib, wait_readable
from wire import argtypes
from wire.ina import (
    INA_HEADER,
    INA_HEADER_LEN,
    INA_MAX_WORKERS,
    INA_PACKET_LEN,
    INA_UDP_PORT,
    INA_VALUES,
    InaFlags,
    MsgType,
)
from wire.ina_policy import Policy, PolicyError, default_switch_ip

__all__ = ["JobStats", "PSCounters", "PSReport", "ParameterServer", "main"]

_BE_I32 = np.dtype(">i4")
# plain ints: comparing with IntEnum members costs more on the per-packet path
_GRAD, _PARTIAL = int(MsgType.GRAD), int(MsgType.PARTIAL)
_RESULT, _CLEAR = int(MsgType.RESULT), int(MsgType.CLEAR)
_RETX = int(InaFlags.RETX)
_NACK = int(MsgType.NACK)


def _read_nic(iface: str) -> tuple[int, int] | None:
    c = net_dev().get(iface)
    return None if c is None else (c.rx_bytes, c.rx_packets)


class ParameterServer(PsRecovery):
    """The PS of one or more jobs (``add_job``) on one UDP socket.

    Args:
        job_id, num_workers, num_fragments: the first job (checked against ``policy``).
        policy: its routing policy; None = PS-only baseline, RESULT by unicast to
            ``worker_ips`` (rank order).
        bind_ip: local address (default: the policy's ``ps``; "" = all addresses).
        port: UDP port.
        linger: after every job is complete, keep answering retransmissions until no
            datagram has come for this many seconds.
        max_time: bound on ``run``; past it ``InaTimeoutError`` (with ``.report``).
        iface: NIC whose rx_bytes/rx_packets delta goes into the report.
        fragment_offset: first fragment number on the wire (see ``Worker``).
        rounds: allreduces to serve per job, back to back (round r uses the fragment
            numbers ``offset + (r mod cycle)·F ...``, as ``hosts.ina.rounds.FragmentCycle``
            gives the workers); 0 = no limit: ``run`` then ends after ``idle_exit`` quiet
            seconds between rounds, once a round has finished (or at ``max_time``).
            A round may send fewer than F fragments, its first ones (a DDP bucket
            smaller than the job): the first packet of the next round ends it. That
            needs ``cycle`` >= 3 (with 2 the next round's numbers are the previous
            round's), and ``rounds`` 0 or a full-size last round (nothing ends it).
        cycle: rounds before the fragment numbers repeat (the workers' ``FragmentCycle``
            cycle); 0 = as many as fit 32 bits.
        idle_exit: see ``rounds``.
        faults: TEST ONLY fault injection on sends.
    """

    def __init__(
        self,
        job_id: int,
        num_workers: int,
        num_fragments: int,
        policy: Policy | None = None,
        *,
        worker_ips: Sequence[str] | None = None,
        bind_ip: str | None = None,
        port: int | None = None,
        linger: float = 1.0,
        max_time: float = 300.0,
        iface: str | None = None,
        fragment_offset: int = 0,
        rounds: int = 1,
        idle_exit: float = 30.0,
        cycle: int = 0,
        faults: FaultInjection | None = None,
    ) -> None:
        if rounds < 0:
            raise ValueError(f"rounds must be >= 0, got {rounds}")
        self.cycle = cycle
        self.jobs: dict[int, JobState] = {}
        self.counters = PSCounters()
        self.linger, self.max_time, self.iface = linger, max_time, iface
        self.rounds, self.idle_exit = rounds, idle_exit
        self.faults = faults
        self.pending: list[tuple[bytes, tuple[str, int]]] | None = None
        port = port if port is not None else (policy.port if policy else INA_UDP_PORT)
        if bind_ip is None:
            bind_ip = policy.ps if policy is not None else ""
        self.sock = open_ina_socket(bind_ip, port)
        # the port bound (port 0: the kernel's pick): every agent of a job shares one
        # port, and RESULTs and NACKs go to the workers on it (with port 0 kept here they
        # went to port 0, lost: each RESULT came only on the worker's timer request)
        self.port = self.sock.getsockname()[1]
        try:
            self.add_job(job_id, num_workers, num_fragments, policy, worker_ips=worker_ips,
                         fragment_offset=fragment_offset)
        except BaseException:
            self.sock.close()
            raise

    @classmethod
    def from_policies(cls, policies: Sequence[Policy], **kw: Any) -> ParameterServer:
        """One PS serving every job in ``policies`` (distinct job ids)."""
        if not policies:
            raise ValueError("no policy given")
        first, *rest = policies
        ps = cls(first.job, first.num_workers, first.num_fragments, first, **kw)
        for p in rest:
            ps.add_job(p.job, p.num_workers, p.num_fragments, p,
                       fragment_offset=kw.get("fragment_offset", 0),
                       values_per_packet=p.values_per_packet)
        return ps

    def add_job(
        self,
        job_id: int,
        num_workers: int,
        num_fragments: int,
        policy: Policy | None = None,
        *,
        worker_ips: Sequence[str] | None = None,
        fragment_offset: int = 0,
        values_per_packet: int | None = None,
    ) -> None:
        """Serve one more job (before ``run``). ``values_per_packet``: the job's packet
        size (default: the policy's, else 64)."""
        if job_id in self.jobs:
            raise ValueError(f"job {job_id} is already served by this PS")
        if policy is not None:
            if (policy.job, policy.num_workers, policy.num_fragments) != (
                job_id, num_workers, num_fragments,
            ):
                raise PolicyError(
                    f"job {job_id}: arguments (job, workers, fragments) = "
                    f"{(job_id, num_workers, num_fragments)} disagree with the policy "
                    f"{(policy.job, policy.num_workers, policy.num_fragments)}"
                )
            worker_ips = policy.workers
            if values_per_packet is not None and values_per_packet != policy.values_per_packet:
                raise PolicyError(f"job {job_id}: {values_per_packet} values per packet, the "
                                  f"policy says {policy.values_per_packet}")
            values_per_packet = policy.values_per_packet
        if worker_ips is None or len(worker_ips) != num_workers:
            raise ValueError(f"job {job_id}: need {num_workers} worker addresses")
        if not 0 <= job_id <= 255 or not 1 <= num_workers <= INA_MAX_WORKERS or num_fragments < 1:
            raise ValueError(f"job_id 0..255, num_workers 1..{INA_MAX_WORKERS}, num_fragments >= 1")
        port = self.port
        if policy is not None and policy.sd is not None:
            # one copy to s_d, which multicasts it to the workers and frees its aggregator
            dsts = [((policy.sd.ip, port), policy.sd.id)]
        else:
            dsts = [((ip, port), 0) for ip in worker_ips]
        clears: list[list[tuple[int, tuple[str, int]]]] = [[] for _ in range(num_fragments)]
        if policy is not None:
            for s, frags in policy.clear_targets().items():
                addr = (policy.switch_ips[s], port)
                for f in frags.tolist():
                    clears[f].append((s, addr))
        total = num_fragments * self.rounds if self.rounds else num_fragments
        worker_bits: dict[str, int] = {}
        for r, ip in enumerate(worker_ips):
            worker_bits[ip] = worker_bits.get(ip, 0) | 1 << r  # one address, several ranks: tests
        switches = frozenset(policy.switch_ips.values()) if policy is not None else frozenset()
        addrs = {s: (ip, port) for s, ip in policy.switch_ips.items()} if policy else {}
        if policy is not None and policy.sd is not None:
            switches |= {policy.sd.ip}
            addrs[policy.sd.id] = (policy.sd.ip, port)
        rec = JobRecovery(num_workers, num_fragments, policy.tags if policy else None,
                          policy.partial_tags if policy else None,
                          policy.sd.id if policy is not None and policy.sd else 0)
        self.jobs[job_id] = JobState(
            job_id, num_workers, num_fragments, fragment_offset, (1 << num_workers) - 1,
            dsts, worker_bits, switches, clears, JobStats(job_id, num_workers, total),
            self.rounds, self.cycle, values_per_packet=values_per_packet or INA_VALUES,
            stamp=policy_stamp(policy),
            recovery=rec, worker_ips=list(worker_ips), switch_addrs=addrs,
        )

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> ParameterServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def complete(self) -> bool:
        return all(j.done for j in self.jobs.values())

    @property
    def between_rounds(self) -> bool:
        """No round has a fragment in progress (every job finished its last round or
        has not received anything of its next one)."""
        return all(j.done or not j.in_progress for j in self.jobs.values())

    def result(self, job_id: int) -> np.ndarray:
        """The job's aggregated int32 values, flat (``num_fragments * V``)."""
        return self.jobs[job_id].acc.ravel().copy()

    # ---------------------------------------------------------------- engine

    def _send(self, data: bytes, addr: tuple[str, int]) -> None:
        if self.pending is not None:  # a native batch: sent together after it (ps_io.py)
            self.pending.append((data, addr))
            return
        try:
            if self.faults is None:
                self.sock.sendto(data, addr)
            else:
                self.faults.send(self.sock, data, addr)
        except OSError:  # full buffer, no route: the worker will retransmit
            self.counters.send_errors += 1

    def _finish(self, jb: JobState, f: int, frag: int) -> None:
        st = jb.stats
        st.completed += 1
        values = jb.acc[f].astype(_BE_I32).tobytes()
        mx = jb.max_exp[f]
        pack = INA_HEADER.pack
        # a recovered fragment's RESULT is flagged: the workers take no RTT sample from it
        fl = _RETX if f in jb.recovery.level else 0
        for addr, tag in jb.result_dsts:
            pkt = pack(_RESULT, jb.job, 0, frag, tag, 0, jb.full, jb.num_workers, 0, fl, 0, mx)
            self._send(pkt + values, addr)
            st.results_sent += 1
        for s, addr in jb.clears[f]:
            pkt = pack(_CLEAR, jb.job, 0, frag, s, 0, jb.full, jb.num_workers, 0, 0, 0)
            self._send(pkt, addr)  # header only (docs/ina.md): no values to carry
            st.clears_sent += 1
        jb.results[f] = values  # for RETX of a finished fragment (RESULT lost)

    def _handle(self, data: bytes, addr: tuple[str, int], now: float) -> None:
        c = self.counters
        if len(data) < INA_PACKET_LEN:  # shorter than any job's packets (64 values)
            if len(data) >= INA_HEADER_LEN and data[0] == _NACK:  # a worker's request
                self._on_request(data, addr)
            elif len(data) >= INA_HEADER_LEN and data[0] == _CLEAR:  # header-only, not ours
                c.bad_type += 1
            else:
                c.short += 1
            return
        mt, job, wid, frag, tag, origin, bm, cnt, _fanin, flags, _sdf, mx = \
            INA_HEADER.unpack_from(data)
        placed = self._place(mt, job, frag, bm, flags, len(data))
        if placed is None:
            return
        jb, r, f = placed
        st = jb.stats
        if not admitted(jb.stamp, wid):  # never admitted by a switch of the job
            st.refused_stamp += 1
            return
        src = addr[0]
        # A contribution comes from one of the job's switches (an aggregate, a PARTIAL, a
        # GRAD passed on keeps its worker's address), or from the worker whose bit it is.
        if src not in jb.switch_srcs and (mt != _GRAD or bm & ~jb.worker_bits.get(src, 0)):
            st.refused_source += 1
            return
        st.packets_in += 1
        st.bytes_in += len(data)
        if st.first_packet_s is None:
            st.first_packet_s = now
        if mt == _GRAD:
            st.grad_in += 1
            if origin:
                st.forwarded_in += 1
            if bm & (bm - 1):
                st.merged_grad_in += 1
        else:
            st.partial_in += 1
        retx = flags & _RETX
        if retx:
            st.retx_in += 1
        values = jb.finished_values(f, r)
        if values is not None:  # already finished (this round's fragment, or an older round)
            self._late(jb, r, f, frag, mt, tag, origin, retx, values, addr)
            return
        flushed = jb.recovery.flushed.get(f) if mt == _PARTIAL else None
        if flushed and tag in flushed:
            bm, sums = self._partial_in(jb, f, tag, bm, data, mx, flags)
            if bm:
                self._accumulate(jb, f, frag, mt, bm, bm.bit_count(), mx, data, now, sums)
            if f not in jb.results:
                self._after_flush_reply(jb, f, tag)
            return
        self._accumulate(jb, f, frag, mt, bm, cnt, mx, data, now)

    def _place(self, mt: int, job: int, frag: int, bm: int, flags: int,
               size: int) -> tuple[JobState, int, int] | None:
        """(job, round, fragment index) of a GRAD/PARTIAL, or None (counted) when it is
        of no job, the wrong size, out of range or has a bad bitmap. A packet of the next
        round ends a short round first."""
        c = self.counters
        if mt != _GRAD and mt != _PARTIAL and mt != _NACK:
            c.bad_type += 1
            return None
        jb = self.jobs.get(job)
        if jb is None:
            c.unknown_job += 1
            return None
        if size != jb.packet_len and mt != _NACK:  # not the job's values per packet: never add part
            jb.stats.wrong_size += 1
            return None
        w, f = divmod(frag - jb.offset, jb.num_fragments)
        if not 0 <= w < jb.cycle:
            c.out_of_range += 1
            return None
        r = jb.round_of(w)
        if r == jb.round + 1 and jb.short_round_over:
            # a short round (a DDP bucket of fewer than F fragments) has no last fragment
            # to end it: the first packet of the next one does
            jb.stats.short_rounds += 1
            jb.next_round()
        if r < 0 or r > jb.round or r < jb.round - 1 and (mt == _NACK or mt == _GRAD and flags & _RETX):
            # before the job's range, a future round, or a retransmission two rounds old
            # (impossible for a live worker: every round needs every worker)
            c.out_of_range += 1
            return None
        # a GRAD may carry several contributors: a VIA_SD aggregate that a busy s_d
        # passed on to the PS; so the bitmap, not worker_id, says who is inside
        if bm == 0 or bm & ~jb.full:
            c.bad_bitmap += 1
            return None
        return jb, r, f

    def _late(self, jb: JobState, r: int, f: int, frag: int, mt: int, tag: int, origin: int,
              retx: int, values: bytes, addr: tuple[str, int]) -> None:
        """A packet for a fragment already finished in round ``r``."""
        st = jb.stats
        st.late += 1
        if retx and mt == _GRAD:  # its RESULT was lost: unicast it again
            hdr = INA_HEADER.pack(_RESULT, jb.job, 0, frag, 0, 0, jb.full, jb.num_workers, 0,
                                  _RETX, 0, jb.finished_exp(f, r))
            self._send(hdr + values, addr)
            st.result_resends += 1
        elif mt == _PARTIAL and tag:
            # A switch completed an aggregate after the fragment was finished (a late
            # duplicate refilled a freed aggregator): free it again, or it would hold
            # that aggregator for good.
            owner = origin or tag
            pkt = INA_HEADER.pack(_CLEAR, jb.job, 0, frag, owner, 0, jb.full, jb.num_workers,
                                  0, 0, 0)
            self._send(pkt, (default_switch_ip(owner), self.port))
            st.clears_sent += 1

    def _accumulate(self, jb: JobState, f: int, frag: int, mt: int, bm: int, cnt: int,
                    mx: int, data: bytes, now: float, sums: np.ndarray | None = None) -> None:
        """Sum a contribution unless some of its contributors are in already; finish the
        fragment (and the round) when every worker is. ``sums``: the values to add in
        place of the packet's (the part of a flushed aggregate not yet in)."""
        st = jb.stats
        have = jb.have[f]
        if bm & have:
            if bm & have == bm:
                st.duplicates += 1
            else:
                st.overlaps += 1
            return
        n = bm.bit_count()
        if cnt != n:
            st.count_mismatch += 1
        if sums is None:
            have = jb.add(f, bm, data, mx)
        else:
            have = jb.add_sums(f, bm, sums, mx)
            st.delta_partials += 1
        st.contributions += n
        if mt == _GRAD:
            st.accepted_grad += 1
        else:
            st.accepted_partial += 1
        if have == jb.full:
            self._completed(jb, f, frag, now)

    def _completed(self, jb: JobState, f: int, frag: int, now: float) -> None:
        """Fragment ``f`` (wire number ``frag``) has every worker: its RESULT and
        CLEARs, recovery's bookkeeping, and the round's end when it was the last."""
        self._finish(jb, f, frag)
        self._on_complete(jb, f)
        jb.round_done += 1
        if jb.round_done == jb.num_fragments:
            if jb.done:
                jb.stats.complete_s = now
            else:
                jb.next_round()

    def run(self) -> PSReport:
        """Serve until every job is complete and ``linger`` seconds pass without a
        datagram; raises ``InaTimeoutError`` (``.report`` attached) after ``max_time``."""
        nic0 = _read_nic(self.iface) if self.iface else None
        sock, io = self.sock, ps_io(self)  # hosts/ina/ps_io.py: batched when native
        t0 = time.monotonic()
        deadline = t0 + self.max_time
        last_rx = t0
        done_at: float | None = None
        while True:
            got = io.drain(self, t0)
            now = time.monotonic()
            if got:
                last_rx = now
            if done_at is None and self.complete:
                done_at = now
            if done_at is not None and now - max(last_rx, done_at) >= self.linger:
                break
            if (self.rounds == 0 and now - last_rx >= self.idle_exit and self.between_rounds
                    and any(j.round for j in self.jobs.values())):
                break  # open-ended: the workers have stopped (after at least one round)
            if now >= deadline:
                if done_at is not None:
                    break
                report = self._report(False, now - t0, nic0)
                missing = {
                    j: jb.stats.fragments - jb.stats.completed
                    for j, jb in self.jobs.items()
                    if not jb.done
                }
                raise InaTimeoutError(
                    f"PS: jobs not complete after {self.max_time:g} s "
                    f"(fragments missing per job: {missing})",
                    report,
                )
            if not got:
                wait = deadline - now
                if done_at is not None:
                    wait = min(wait, max(last_rx, done_at) + self.linger - now)
                wait_readable(sock, min(wait, 0.5))
        return self._report(True, time.monotonic() - t0, nic0)

    def _report(self, complete: bool, duration: float, nic0: tuple[int, int] | None) -> PSReport:
        self.counters.fault_drops = self.faults.dropped if self.faults else 0
        for jb in self.jobs.values():
            jb.stats.rounds = jb.round + (1 if jb.round_done or any(jb.have) else 0)
        rep = PSReport(complete, duration, {j: jb.stats for j, jb in self.jobs.items()},
                       self.counters)
        if nic0 is not None and self.iface and (nic1 := _read_nic(self.iface)):
            rep.nic_rx_bytes, rep.nic_rx_packets = nic1[0] - nic0[0], nic1[1] - nic0[1]
        return rep


# ============================================================================ CLI


def _parser() -> argparse.ArgumentParser:
    """The PS's command line."""
    ap = argtypes.Parser(
        prog="python -m hosts.ina.ps", description="INA parameter server (one or more jobs)."
    )
    ap.add_argument("--policy", action="append", required=True,
                    help="policy JSON of a job (docs/ina_policy.md); repeat for more jobs")
    ap.add_argument("--json", action="store_true", help="print one JSON summary line")
    ap.add_argument("--linger", type=argtypes.nonnegative, default=1.0,
                    help="quiet seconds to wait for late retransmissions once complete")
    ap.add_argument("--max-time", type=argtypes.positive, default=300.0)
    ap.add_argument("--iface", help="NIC to read rx_bytes/rx_packets from")
    ap.add_argument("--bind", help="local address (default: the policy's ps)")
    ap.add_argument("--fragment-offset", type=argtypes.natural, default=0)
    ap.add_argument("--rounds", type=argtypes.natural, default=1,
                    help="allreduces to serve back to back (worker offsets r*F); 0: until "
                         "--idle-exit quiet seconds between rounds (default 1)")
    ap.add_argument("--round-cycle", type=argtypes.natural, default=0,
                    help="rounds before the fragment numbers repeat, as the workers' (default "
                         "0: as many as fit 32 bits)")
    ap.add_argument("--drop-every", type=argtypes.natural, default=0,
                    help="TESTING: drop every K-th datagram this PS sends (lost RESULTs)")
    add_drop_options(ap, "PS", sent="RESULT, CLEAR, NACK", received="GRAD, PARTIAL, NACK")
    ap.add_argument("--idle-exit", type=argtypes.positive, default=30.0,
                    help="with --rounds 0: stop after this many quiet seconds between rounds, "
                         "once a round has finished (default 30)")
    ap.add_argument("--out-int", help="write the int32 sums as .npz (key job_<id>)")
    ap.add_argument("--ready", action="store_true",
                    help="print 'ready' on stdout once the socket is bound (for launchers)")
    return ap


class PSCommand:
    """One run of the CLI: build the ``ParameterServer`` from the policies, serve, write
    ``--out-int`` and print the summary."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args

    def emit(self, d: dict[str, Any]) -> None:
        """Print ``d`` as one JSON line with ``--json``."""
        if self.args.json:
            print(json.dumps(d), flush=True)

    def run(self) -> int:
        """The exit status: 0, 1 when a job did not complete, 2 on bad input, 130 on ^C."""
        args = self.args
        try:
            policies = [Policy.load(p) for p in args.policy]
            ps = ParameterServer.from_policies(
                policies, linger=args.linger, max_time=args.max_time, iface=args.iface,
                bind_ip=args.bind, fragment_offset=args.fragment_offset, rounds=args.rounds,
                idle_exit=args.idle_exit, cycle=args.round_cycle,
                faults=FaultInjection(
                    drop_every=args.drop_every, drop_sent=parse_fault_spec(args.drop_sent),
                    drop_received=parse_fault_spec(args.drop_received),
                ) if args.drop_every > 0 or args.drop_sent or args.drop_received else None,
            )
        except (PolicyError, ValueError, OSError) as e:
            self.emit({"complete": False, "error": str(e)})
            print(f"ina_ps: error: {e}", file=sys.stderr)
            return 2
        if args.ready:
            print("ready", flush=True)
        cpu0, self.sys0 = time.process_time(), os.times().system
        try:
            with rare_gc():  # hosts/ina/fastpath.py: a collection every 700 tuples cost CPU
                report = ps.run()
            rc = 0
        except InaTimeoutError as e:
            report, rc = e.report, 1
            print(f"ina_ps: error: {e}", file=sys.stderr)
        except KeyboardInterrupt:
            return 130
        finally:
            ps.close()
        self.report(ps, report, cpu0)
        return rc

    def report(self, ps: ParameterServer, report: PSReport, cpu0: float) -> None:
        """Write ``--out-int``; print the JSON line or one line per job."""
        args = self.args
        if args.out_int:
            np.savez(args.out_int, **{f"job_{j}": ps.result(j) for j in ps.jobs})
        # cpu_s: the whole process; sync_cpu_s: serving only (start-up excluded)
        self.emit({**report.to_dict(), "cpu_s": round(time.process_time(), 3),
                   "sync_cpu_s": round(time.process_time() - cpu0, 3),
                   "sync_sys_s": round(os.times().system - self.sys0, 3),  # of it, the kernel's
                   "max_rss_mib": round(peak_rss_mib(), 1)})
        if not args.json:
            for j, st in report.jobs.items():
                print(f"job {j}: {st.completed}/{st.fragments} fragments, {st.packets_in} "
                      f"packets in ({st.partial_in} partial, {st.grad_in} raw), "
                      f"{st.duplicates} duplicates, {st.overlaps} overlaps")


def main(argv: Iterable[str] | None = None) -> int:
    """``python -m hosts.ina.ps``: parse, then run a ``PSCommand``."""
    return PSCommand(_parser().parse_args(list(argv) if argv is not None else None)).run()

if __name__ == "__main__":
    sys.exit(main())
