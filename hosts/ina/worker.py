"""In-network-aggregation worker agent (docs/ina.md) and the routing-policy file
(docs/ina_policy.md).

A :class:`Worker` fragments one gradient into packets of V int32 fixed-point values (the
policy's ``values_per_packet``: 64, 128 or 256), sends fragment ``f`` as ``GRAD`` to the
switch its policy tags ``f`` with (or to the PS for tag 0), keeps at most ``window``
fragments outstanding, re-sends a fragment straight to the PS (tag 0, ``RETX``) when the
PS's NACK asks for it, asks the PS for a RESULT that later RESULTs show missing or that
its timer finds late (docs/ina.md, "Loss recovery"; hosts/ina/transfer.py) and collects
the ``RESULT`` values. One non-blocking UDP socket (port 40000), ``select``; the hot path
is plain ``struct`` + ``bytes`` slicing (no scapy, no per-packet numpy).

CLI (one line of JSON on stdout with ``--json``)::

    python -m hosts.ina.worker --policy policy.json --rank 0 \\
        [--gradient g.npy | --size N --seed S] --out result.npy --json
        [--rounds K --round-cycle R --reuse-after SECONDS]

``--rounds K`` runs K allreduces back to back, as a training job does; their fragment
numbers come from ``hosts.ina.rounds.FragmentCycle`` (bounded, reused every R rounds).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hosts.ina.agent import (
    FaultInjection,
    InaTimeoutError,
    add_worker_test_options,
    open_ina_socket,
    progress_bar,
    worker_faults,
)
from hosts.ina.congestion import CONGESTION_MODES, RttEstimator, rto_ceiling
from hosts.ina.rounds import DEFAULT_REUSE_AFTER_S, FragmentCycle
from hosts.ina.stamp import policy_stamp
from hosts.ina.transfer import FragmentTransfer, WorkerStats
from hosts.net import peak_rss_mib
from wire import argtypes
from wire.fixedpoint import (
    BFP_LOOKAHEAD,
    DEFAULT_SCALE_BITS,
    NUMBER_FORMATS,
    FixedPointOverflow,
    bfp_dequantize,
    bfp_scale_bits,
    block_exponents,
    dequantize,
    num_fragments,
    pad_to_fragments,
    quantize,
)
from wire.ina import INA_MAX_WORKERS, INA_UDP_PORT, INA_VALUES, check_values_per_packet
from wire.ina_policy import FragmentRouting, Policy, PolicyError, SwitchRef, _ip, default_switch_ip

__all__ = [
    "FaultInjection",
    "FragmentRouting",
    "InaTimeoutError",
    "Policy",
    "PolicyError",
    "SwitchRef",
    "Worker",
    "WorkerStats",
    "default_switch_ip",
    "main",
    "open_ina_socket",
]


# ============================================================================ worker


class Worker:
    """One rank of one job (docs/ina.md, "Worker").

    Args:
        rank: this worker's rank (bit ``rank`` of the contributor bitmap), 0..255.
        num_workers: workers in the job (for the fixed-point bound and the RESULT bitmap).
        job_id: INA job id, 0..255.
        ps_ip: the parameter server's address (retransmissions and tag 0 go there).
        policy: this worker's tags and fan-ins (``Policy.for_worker``); None = all tag 0.
        switch_ips: switch id -> IP for the tags in ``policy`` (default 10.255.x.y).
        window: most fragments outstanding (sent, no RESULT yet) at a time.
        timeout: the floor of the retransmission timer (and its value until the first
            round-trip sample); the timer follows the measured round trips (RFC 6298)
            and doubles per expiry up to ``max_backoff`` (``fixed``) or
            ``MAX_RTO_FACTOR`` x ``timeout`` (``aimd``).
        scale_bits: fixed-point scale ``S`` (q = round(g * 2**S)).
        port: UDP port (the same on every agent and switch).
        bind_ip: local address to bind (the worker's IP; "" = all).
        max_time: bound on one ``allreduce``; past it ``InaTimeoutError``.
        max_backoff: upper bound of the retransmission timer (``fixed``).
        faults: TEST ONLY fault injection on sends.
        progress: called as ``progress(done, total)`` at most every 0.1 s.
        result_sources: the addresses a RESULT may come from (default: ``ps_ip``;
            ``from_policy`` adds ``s_d``); any other source is refused and counted.
        stamp: the job's admission stamp (``from_policy``: the policy's); a RESULT
            whose ``worker_id`` is not it is refused and counted (hosts/ina/stamp.py).
        number_format: "fixed" (``scale_bits`` for every value) or "bfp" (block
            floating point: ``allreduce`` agrees a shared exponent per block in the
            network first; docs/ina.md). Every worker of a job must use the same.
        congestion: "fixed" (always ``window`` fragments outstanding, ``timeout``
            fixed) or "aimd" (a congestion window up to ``window``: slow start from 2,
            halved once per window of sends on a retransmission timeout, then +1 per
            window of RESULTs; and a retransmission timeout from the measured RTT as
            TCP's, never below ``timeout``; docs/ina.md, "Congestion window"). Under
            incast (many workers to one PS) a fixed window overflows the PS's port
            and a fixed timeout fires while packets still wait in its queue.
        values_per_packet: V, the values per fragment (64, 128 or 256; the policy's):
            every switch on the way must run the ina.p4 compiled for V, and block
            floating point has one exponent per V values.
    """

    def __init__(
        self,
        rank: int,
        num_workers: int,
        job_id: int,
        ps_ip: str,
        policy: FragmentRouting | None = None,
        switch_ips: Mapping[int, str] | None = None,
        window: int = 64,
        timeout: float = 0.2,
        scale_bits: int = DEFAULT_SCALE_BITS,
        port: int = INA_UDP_PORT,
        *,
        bind_ip: str = "",
        max_time: float = 60.0,
        max_backoff: float = 1.0,
        faults: FaultInjection | None = None,
        progress: Callable[[int, int], None] | None = None,
        result_sources: Iterable[str] | None = None,
        number_format: str = "fixed",
        congestion: str = "fixed",
        values_per_packet: int = INA_VALUES,
        stamp: int = 0,
    ) -> None:
        self.values_per_packet = check_values_per_packet(values_per_packet)
        if not 1 <= num_workers <= INA_MAX_WORKERS:
            raise ValueError(f"num_workers must be in 1..{INA_MAX_WORKERS}, got {num_workers}")
        if not 0 <= rank < num_workers:
            raise ValueError(f"rank must be in 0..{num_workers - 1}, got {rank}")
        if not 0 <= job_id <= 255:
            raise ValueError(f"job_id must be in 0..255, got {job_id}")
        if window < 1 or timeout <= 0 or max_time <= 0:
            raise ValueError("window must be >= 1, timeout and max_time > 0")
        if congestion not in CONGESTION_MODES:
            raise ValueError(f"congestion must be one of {CONGESTION_MODES}, got {congestion!r}")
        self.congestion = congestion
        if number_format not in NUMBER_FORMATS:
            raise ValueError(f"number_format must be one of {NUMBER_FORMATS}, got {number_format!r}")
        self.number_format = number_format
        #: of the last block-floating-point allreduce: the int32 sums and the agreed
        #: biased exponent of each block (``bfp_dequantize`` turns them into floats)
        self.last_bfp: tuple[np.ndarray, np.ndarray] | None = None
        self.rank, self.num_workers, self.job_id = rank, num_workers, job_id
        self.ps_addr = (_ip(ps_ip, "ps_ip"), port)
        self.stamp = stamp  # the job's admission stamp (hosts/ina/stamp.py); 0: unchecked
        self.result_sources = frozenset(
            _ip(a, "result source") for a in (result_sources or ())) | {self.ps_addr[0]}
        self.policy = policy
        self.switch_ips = dict(switch_ips or {})
        self.window, self.timeout, self.max_time = window, timeout, max_time
        self.max_backoff = max(max_backoff, timeout)
        self.scale_bits, self.port = scale_bits, port
        self.faults, self.progress = faults, progress
        self.stats = WorkerStats(rank, job_id)  # of the last allreduce
        #: round trips measured across this worker's allreduces (the timer's timeout)
        self.rtt = RttEstimator(timeout, rto_ceiling(congestion, timeout, self.max_backoff))
        self.sock = open_ina_socket(bind_ip, port)

    @classmethod
    def from_policy(cls, policy: Policy, rank: int, **kw: Any) -> Worker:
        """A worker for ``rank`` of ``policy``, bound to its address in the policy."""
        kw.setdefault("bind_ip", policy.workers[rank])
        kw.setdefault("scale_bits", policy.scale_bits)
        kw.setdefault("number_format", policy.number_format)
        kw.setdefault("values_per_packet", policy.values_per_packet)
        # s_d multicasts the PS's RESULT keeping the PS's address; s_d's own is allowed too
        kw.setdefault("result_sources", [policy.sd.ip] if policy.sd is not None else [])
        kw.setdefault("stamp", policy_stamp(policy))
        return cls(
            rank, policy.num_workers, policy.job, policy.ps, policy.for_worker(rank),
            policy.switch_ips, port=policy.port, **kw,
        )

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- API

    def quantize(self, gradient: np.ndarray) -> np.ndarray:
        """The gradient as int32 fixed point (raises ``FixedPointOverflow``)."""
        return quantize(gradient, self.scale_bits, self.num_workers)

    def to_float(self, result: np.ndarray) -> np.ndarray:
        """An int32 result as float32: ``sum / 2**S``."""
        return dequantize(result, self.scale_bits)

    def allreduce(
        self, gradient: np.ndarray, fragment_offset: int = 0
    ) -> tuple[np.ndarray, WorkerStats]:
        """Aggregate a float gradient: returns (sum of all workers' int32 fixed-point
        values, flat, same length as ``gradient``; stats). Nothing is sent when the
        overflow check fails. With block floating point the int32 sums are per block
        at its own scale (``last_bfp`` has the exponents; ``allreduce_float`` gives
        floats)."""
        if self.number_format == "bfp":
            self.allreduce_bfp(gradient, fragment_offset)
            assert self.last_bfp is not None
            return self.last_bfp[0][: np.size(gradient)], self.stats
        return self.allreduce_fixed(self.quantize(gradient), fragment_offset)

    def allreduce_float(
        self, gradient: np.ndarray, fragment_offset: int = 0
    ) -> tuple[np.ndarray, WorkerStats]:
        """The float32 sum over all workers of ``gradient``, in the job's number format."""
        if self.number_format == "bfp":
            return self.allreduce_bfp(gradient, fragment_offset)
        q, st = self.allreduce_fixed(self.quantize(gradient), fragment_offset)
        return self.to_float(q), st

    def wire_fragments(self, num_values: int) -> int:
        """Fragments one allreduce of ``num_values`` values sends (block floating point
        adds ``min(BFP_LOOKAHEAD, blocks)`` exponent-only ones)."""
        n_b = num_fragments(num_values, self.values_per_packet)
        return n_b + min(BFP_LOOKAHEAD, n_b) if self.number_format == "bfp" else n_b

    def allreduce_bfp(
        self, gradient: np.ndarray, fragment_offset: int = 0
    ) -> tuple[np.ndarray, WorkerStats]:
        """Block floating point (docs/ina.md): the float32 sum of ``gradient`` over all
        workers, flat. Wire fragment ``g`` proposes block ``g``'s exponent in
        ``max_exp`` (the switches and the PS keep the max, and the RESULT carries it
        back) and carries block ``g - L``'s values, scaled by the exponent agreed in
        ``g - L``'s RESULT; ``L = min(BFP_LOOKAHEAD, blocks)``. Fragment ``g`` is sent
        only once ``g - L`` has its RESULT, and everything else (window, retransmission
        to the PS, exactly once) is as in fixed point."""
        g = np.asarray(gradient)
        n = g.size
        v = self.values_per_packet
        own = block_exponents(g, v)  # validates (float, finite)
        n_b = own.size
        if n_b == 0:
            self.last_bfp = (np.zeros(0, np.int32), np.zeros(0, np.uint8))
            return np.zeros(0, dtype=np.float32), WorkerStats(self.rank, self.job_id)
        look = min(BFP_LOOKAHEAD, n_b)
        n_f = n_b + look
        routing = self._routing(n_f, f"{n} values in block floating point ({n_b} blocks + "
                                     f"{look} exponent fragments)")
        self._check_offset(fragment_offset, n_f)
        vl = 4 * v
        payload = bytearray(n_f * vl)  # the first L fragments carry no values
        exps = own.tolist() + [0] * look
        agreed = [0] * n_b
        nw = self.num_workers

        blocks = g.ravel().astype(np.float64)
        blocks = np.pad(blocks, (0, n_b * v - n)).reshape(n_b, v)

        def on_result(f: int, max_exp: int) -> None:
            # block f's shared exponent is in: its values go out in fragment f + L
            if f < n_b:
                if max_exp < own[f]:  # no honest PS or switch lowers a max
                    raise ValueError(f"fragment {f}: agreed exponent {max_exp} is below this "
                                     f"worker's {own[f]}: the sum could overflow")
                agreed[f] = max_exp
                q = np.rint(np.ldexp(blocks[f], int(bfp_scale_bits(np.array([max_exp]), nw)[0])))
                payload[(f + look) * vl:(f + look + 1) * vl] = q.astype(">i4").tobytes()

        result = self._run(bytes(payload), n_f, routing, fragment_offset, exps=exps,
                           lookahead=look, on_result=on_result, mutable_payload=payload)
        sums = np.frombuffer(result, dtype=">i4")[look * v:].astype(np.int32)
        e = np.array(agreed, dtype=np.uint8)
        self.last_bfp = (sums, e)
        self.stats.elements = n
        return bfp_dequantize(sums, e, nw, values_per_packet=v)[:n], self.stats

    def allreduce_fixed(
        self, q: np.ndarray, fragment_offset: int = 0
    ) -> tuple[np.ndarray, WorkerStats]:
        """Aggregate already quantized int32 values (see ``allreduce``).

        ``fragment_offset`` is added to every fragment number on the wire: consecutive
        allreduces of one job should use disjoint ranges (e.g. ``iteration * F``) so
        a late packet of an earlier round never mixes into a later one. ``q`` may hold
        fewer values than the job (``F * V``): then only its own ``ceil(size / V)``
        fragments are sent, the policy's first ones."""
        q = np.asarray(q)
        if q.dtype != np.int32:
            raise ValueError(f"fixed-point values must be int32, got {q.dtype}")
        n = q.size
        n_f = num_fragments(n, self.values_per_packet)
        if n_f == 0:
            return np.zeros(0, dtype=np.int32), WorkerStats(self.rank, self.job_id)
        routing = self._routing(n_f, f"gradient of {n} values")
        self._check_offset(fragment_offset, n_f)
        payload = pad_to_fragments(q, self.values_per_packet).astype(">i4").tobytes()
        result = self._run(payload, n_f, routing, fragment_offset)
        out = np.frombuffer(result, dtype=">i4")[:n].astype(np.int32)
        self.stats.elements = n
        return out, self.stats

    # ---------------------------------------------------------------- engine

    def _routing(self, n_f: int, what: str) -> FragmentRouting:
        """The policy's first ``n_f`` fragments (a short allreduce, e.g. a DDP bucket
        smaller than the job, sends only those, routed and fanned in as planned)."""
        routing = self.policy or FragmentRouting.ps_only(n_f)
        v = self.values_per_packet
        if routing.tags.size < n_f:
            raise ValueError(
                f"{what} needs {n_f} fragments but the policy has {routing.tags.size}; "
                f"use a gradient of {routing.tags.size * v} values at most in fixed "
                f"point (padded to a multiple of {v}), fewer in block floating point"
            )
        return routing.prefix(n_f) if routing.tags.size > n_f else routing

    @staticmethod
    def _check_offset(fragment_offset: int, n_f: int) -> None:
        if not (fragment_offset >= 0 and fragment_offset + n_f <= 2**32):
            raise ValueError(f"fragment_offset {fragment_offset} + {n_f} fragments do not fit 32 bits")

    def _destinations(self, routing: FragmentRouting) -> list[tuple[str, int]]:
        addr: dict[int, tuple[str, int]] = {0: self.ps_addr}
        for t in np.unique(routing.tags):
            t = int(t)
            if t not in addr:
                ip = self.switch_ips.get(t) or default_switch_ip(t)
                addr[t] = (ip, self.port)
        return [addr[t] for t in routing.tags.tolist()]

    def _run(self, payload: bytes, n_f: int, routing: FragmentRouting, offset: int, *,
             exps: list[int] | None = None, lookahead: int = 0,
             on_result: Callable[[int, int], None] | None = None,
             mutable_payload: bytearray | None = None) -> bytearray:
        """Send ``n_f`` fragments of ``payload`` and collect their RESULTs (the values of
        each, concatenated; ``FragmentTransfer``). Block floating point: ``exps`` is each
        fragment's ``max_exp``; fragment ``f >= lookahead`` goes out only once fragment
        ``f - lookahead`` has its RESULT, and ``on_result(f, max_exp)`` (called on each
        RESULT) has written its values into ``mutable_payload`` by then."""
        st = self.stats = WorkerStats(self.rank, self.job_id, fragments=n_f)
        transfer = FragmentTransfer(
            self, st, payload if mutable_payload is None else mutable_payload, n_f, routing,
            offset, exps=exps, lookahead=lookahead, on_result=on_result)
        return transfer.run()


# ============================================================================ CLI


def _digest(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a, dtype="<i4").tobytes()).hexdigest()[:16]


def _load_gradient(args: argparse.Namespace, n_default: int) -> np.ndarray:
    if args.gradient:
        g = np.load(args.gradient)
        return np.asarray(g, dtype=np.float32).ravel()
    n = args.size if args.size is not None else n_default
    rng = np.random.default_rng([args.seed, args.rank])  # distinct per rank
    return rng.standard_normal(n).astype(np.float32)


def round_gradient(seed: int, rank: int, k: int, n: int) -> np.ndarray:
    """``--rounds``' random gradient of ``rank`` in round ``k >= 1`` (round 0 is the
    single-run gradient): distinct per round and rank, reproducible by a checker."""
    return np.random.default_rng([seed, rank, k]).standard_normal(n).astype(np.float32)


def _parser() -> argparse.ArgumentParser:
    """The worker's command line."""
    ap = argtypes.Parser(
        prog="python -m hosts.ina.worker", description="INA worker: allreduce one gradient."
    )
    ap.add_argument("--policy", required=True, help="policy JSON (docs/ina_policy.md)")
    ap.add_argument("--rank", type=argtypes.natural, required=True)
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--gradient", help=".npy file with the float gradient")
    src.add_argument("--size", type=argtypes.values, help="random gradient of N values (default: "
                     "num_fragments * the policy's values_per_packet)")
    ap.add_argument("--seed", type=argtypes.natural, default=0, help="seed of the random gradient "
                    "(mixed with the rank)")
    ap.add_argument("--out", help="write the aggregated float32 gradient (.npy)")
    ap.add_argument("--out-int", help="write the int32 fixed-point sum (.npy)")
    ap.add_argument("--scale-bits", type=argtypes.integer(0, 62), help="override the policy's scale_bits")
    ap.add_argument("--format", choices=NUMBER_FORMATS, help="override the policy's number "
                    "format: fixed (--scale-bits) or bfp (block floating point)")
    ap.add_argument("--out-exp", help="block floating point: write each block's agreed "
                    "biased exponent (.npy, uint8; one row per round with --rounds)")
    ap.add_argument("--window", type=argtypes.count, default=64,
                    help="most fragments outstanding (with --congestion aimd: the cap)")
    ap.add_argument("--congestion", choices=CONGESTION_MODES, default="fixed",
                    help="fixed: always --window outstanding; aimd: a congestion window "
                    "(slow start, halved on a timeout) up to --window (default fixed)")
    ap.add_argument("--timeout", type=argtypes.positive, default=0.2,
                    help="floor of the retransmission timer, which follows the measured round "
                    "trips (s; default 0.2)")
    ap.add_argument("--max-backoff", type=argtypes.positive, default=1.0,
                    help="ceiling of the retransmission timer with --congestion fixed (s)")
    ap.add_argument("--max-time", type=argtypes.positive, default=60.0, help="bound on the whole run (s)")
    ap.add_argument("--fragment-offset", type=argtypes.natural, default=0)
    ap.add_argument("--rounds", type=argtypes.count, default=1,
                    help="allreduces back to back (a new random gradient each, unless "
                         "--gradient); the PS needs the same --rounds (default 1)")
    ap.add_argument("--round-cycle", type=argtypes.natural, default=0,
                    help="with --rounds: rounds before the fragment numbers repeat (>= 2; "
                         "default 0: as many as fit 32 bits); the PS needs the same")
    ap.add_argument("--reuse-after", type=argtypes.nonnegative, default=DEFAULT_REUSE_AFTER_S,
                    help="with --rounds: seconds to wait before reusing fragment numbers; "
                         "more than 4x the switches' aggregator timeout plus the longest a "
                         f"packet stays in the network (default {DEFAULT_REUSE_AFTER_S:g})")
    ap.add_argument("--bind", help="local address (default: the rank's address in the policy)")
    ap.add_argument("--json", action="store_true", help="print one JSON summary line")
    ap.add_argument("--no-progress", action="store_true")
    add_worker_test_options(ap)
    ap.add_argument("--ready-go", action="store_true",
                    help="set up, print 'ready' on stdout, then start when a line arrives on "
                    "stdin: a launcher starts every worker at once and times the "
                    "synchronization, not Python's start-up")
    return ap


_TOTALS = ("packets_sent", "retransmissions", "resend_nack", "request_fast", "spurious_requests",
           "request_timer", "request_probe", "spurious_probes", "nacks_in", "stale_nacks", "bytes_sent", "results",
           "window_decreases", "duplicate_results", "stale_results", "ignored", "duration_s")


@dataclass
class _Rounds:
    """What ``--rounds`` allreduces returned: per round, and the stats summed."""

    results: list[np.ndarray] = field(default_factory=list)
    floats: list[np.ndarray] = field(default_factory=list)
    exps: list[np.ndarray] = field(default_factory=list)
    totals: dict[str, Any] = field(default_factory=dict)
    last: WorkerStats | None = None
    gen_cpu_s: float = 0.0  # drawing the next rounds' random gradients: no synchronization
    end: tuple[float, float] = (0.0, 0.0)  # CPU and system time at the last round's end


class WorkerCommand:
    """One run of the CLI: load the policy and the gradient, build the ``Worker``, run
    ``--rounds`` allreduces, write the outputs and print the summary."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args

    def fail(self, msg: str, code: int = 2) -> int:
        """Report an error (as JSON too with ``--json``); returns the exit status."""
        if self.args.json:
            print(json.dumps({"rank": self.args.rank, "ok": False, "error": msg}), flush=True)
        print(f"ina_worker: error: {msg}", file=sys.stderr)
        return code

    def setup(self) -> np.ndarray:
        """Build ``self.worker`` and ``self.cycle``; returns the first gradient."""
        args = self.args
        policy = Policy.load(args.policy)
        grad = _load_gradient(args, policy.num_fragments * policy.values_per_packet)
        kw: dict[str, Any] = {
            "window": args.window, "timeout": args.timeout, "max_time": args.max_time,
            "max_backoff": args.max_backoff, "congestion": args.congestion,
        }
        if args.scale_bits is not None:
            kw["scale_bits"] = args.scale_bits
        if args.format is not None:
            kw["number_format"] = args.format
        if args.bind is not None:
            kw["bind_ip"] = args.bind
        kw["faults"] = worker_faults(args)
        if args.rounds < 1:
            raise ValueError(f"--rounds must be >= 1, got {args.rounds}")
        self.cycle = FragmentCycle(policy.num_fragments, args.fragment_offset, args.round_cycle,
                                   args.reuse_after)
        self.worker = Worker.from_policy(policy, args.rank, **kw)
        return grad

    def run(self) -> int:
        """The exit status: 0, 1 on a timeout, 2 on bad input."""
        args = self.args
        try:
            grad = self.setup()
        except (PolicyError, OSError, ValueError) as e:
            return self.fail(str(e))
        worker = self.worker
        prog, update = progress_bar(sys.stderr.isatty() and not args.no_progress)
        worker.progress = update
        if args.ready_go:
            print("ready", flush=True)
            if not sys.stdin.readline():
                worker.close()
                return self.fail("--ready-go: stdin closed before the start signal")
        if args.lag > 0:
            time.sleep(args.lag)
        cpu0, self.sys0 = time.process_time(), os.times().system
        try:
            if prog is not None:
                prog.start()
            rounds = self.allreduce_rounds(grad)
            t_end = time.time()  # wall clock: comparable across the emulated hosts
        except FixedPointOverflow as e:
            return self.fail(str(e))
        except InaTimeoutError as e:
            return self.fail(str(e), 1)
        except (ValueError, OSError) as e:
            return self.fail(str(e))
        finally:
            if prog is not None:
                prog.stop()
            worker.close()
        self.report(rounds, cpu0, t_end)
        return 0

    def allreduce_rounds(self, grad: np.ndarray) -> _Rounds:
        """``--rounds`` allreduces back to back (a new random gradient each, unless
        ``--gradient``)."""
        args, worker, out = self.args, self.worker, _Rounds()
        for k in range(args.rounds):
            if k and not args.gradient:
                c = time.process_time()
                grad = round_gradient(args.seed, args.rank, k, grad.size)
                out.gen_cpu_s += time.process_time() - c
            res, st = worker.allreduce(grad, self.cycle.begin())
            self.cycle.end()
            out.results.append(res)
            if worker.last_bfp is not None and worker.number_format == "bfp":
                out.exps.append(worker.last_bfp[1])
                out.floats.append(bfp_dequantize(
                    worker.last_bfp[0], out.exps[-1], worker.num_workers,
                    values_per_packet=worker.values_per_packet)[: res.size])
            else:
                out.floats.append(worker.to_float(res))
            for name in _TOTALS:
                out.totals[name] = out.totals.get(name, 0) + getattr(st, name)
            out.last = st
        out.end = (time.process_time(), os.times().system)
        return out

    def report(self, rounds: _Rounds, cpu0: float, t_end: float) -> None:
        """Write ``--out``, ``--out-int``, ``--out-exp`` and print the summary."""
        args, worker, st = self.args, self.worker, rounds.last
        res, fres = rounds.results[-1], rounds.floats[0]
        if args.rounds > 1:  # one row per round
            res, fres = np.stack(rounds.results), np.stack(rounds.floats)
            st.fragments *= args.rounds
            for name, value in rounds.totals.items():
                setattr(st, name, value)
        if args.out:
            np.save(args.out, fres)
        if args.out_int:
            np.save(args.out_int, res)
        if args.out_exp and rounds.exps:
            np.save(args.out_exp, rounds.exps[0] if args.rounds == 1 else np.stack(rounds.exps))
        summary = {"ok": True, **st.to_dict(), "scale_bits": worker.scale_bits,
                   "format": worker.number_format, "values_per_packet": worker.values_per_packet,
                   "rounds": args.rounds, "reuse_wait_s": round(self.cycle.waited_s, 3),
                   "result_sha256_16": _digest(res),
                   # cpu_s: the whole process, start-up included; sync_cpu_s: the allreduce
                   "cpu_s": round(time.process_time(), 3),
                   "sync_cpu_s": round(rounds.end[0] - cpu0 - rounds.gen_cpu_s, 3), "t_end": t_end,
                   "sync_sys_s": round(rounds.end[1] - self.sys0, 3),  # of it, the kernel's
                   "max_rss_mib": round(peak_rss_mib(), 1)}
        if args.json:
            print(json.dumps(summary), flush=True)
        else:
            print(f"rank {st.rank}: {st.fragments} fragments in {st.duration_s:.3f} s, "
                  f"{st.packets_sent} sent, re-sends {st.resend_nack} nack / requests "
                  f"{st.request_fast} fast {st.request_probe} probe {st.request_timer} timer, "
                  f"{st.pps:.0f} pkt/s")


def main(argv: Iterable[str] | None = None) -> int:
    """``python -m hosts.ina.worker``: parse, then run a ``WorkerCommand``."""
    args = _parser().parse_args(list(argv) if argv is not None else None)
    return WorkerCommand(args).run()

if __name__ == "__main__":
    sys.exit(main())
