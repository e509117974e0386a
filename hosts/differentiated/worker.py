"""Worker agent of differentiated gradient transmission.

    python -m hosts.differentiated.worker --ps 10.0.0.1 --rank R --world W \\
        --mode differentiated|reliable|unreliable [--epochs E ...]     # real training
    python -m hosts.differentiated.worker ... --gradient G.npz --iterations K   # fixed tensors

Each iteration: compute the gradient (or take the fixed one), split it into blocks,
update the blocks' SANE contributions, classify them, send the manifest
and the important blocks on the reliable TCP channel (DSCP EF, highest queue) and the
others as UDP datagrams, one DSCP per level, then wait for the PS's new parameters.
Modes: ``reliable`` sends every block over TCP, ``unreliable`` every block over UDP
on one best-effort priority, ``differentiated`` as above, ``important`` (an ablation)
the important blocks over TCP and nothing else (no unreliable channel: the PS zero-fills
the rest). ``--importance random`` draws the important blocks at random (the same count
as the quantile's), ``--importance topk`` takes that many blocks of largest L2 norm,
``--share S`` replaces the fixed quantile by an adaptive threshold:
the fewest blocks that carry the share S of the total contribution. ``--error-feedback``
(worker and PS): the PS acknowledges which blocks went into its update, and the worker
adds every block it did not deliver to that block's next gradient (the residual); the
contribution and the selection are computed on what is pending. Prints one JSON summary.

Options for the time-to-accuracy harness (``experiments/train_differentiated.py``); none
of them changes anything when absent: ``--model``/``--data`` name the model and data set
of ``hosts.training`` (``build_model``, ``load_data``) instead of the digits CNN of
``--channels``; ``--max-steps`` caps the steps per epoch; ``--batch-seed`` sets the batch
order's seed (default ``seed * 1000 + rank``; the harness gives every rank ``--seed``, as
``hosts.trainer`` does); ``--slow F`` and ``--compute-time S`` slow or fix the compute per
batch; ``--eval-every K`` prints one JSON record per evaluation, every K steps and at each
epoch's end (K = 0: epoch ends only), in ``hosts.trainer``'s format: rank 0 adds the test
and held-out accuracy, every rank its weights hash, and ``t`` leaves out evaluation time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from hosts.differentiated.channel import recv_msg, set_dscp
from hosts.loop import LoopConfig, ModelWork, Sync, SyncResult, TrainLoop
from hosts.net import set_buffers
from wire import argtypes
from wire.argtypes import described
from wire.differentiated import (
    DIFF_LEVEL_IMPORTANT,
    DIFF_TCP_PORT,
    DSCP_LEVELS,
    DiffDecodeError,
    Kind,
    encode_diff_block,
    frame,
    level_dscp,
    manifest,
    pack_datagrams,
    parse_ack,
    parse_params,
)

from .blocks import (
    BlockLayout,
    Contribution,
    ErrorFeedback,
    block_norms,
    classify,
    classify_random,
    classify_topk,
    share_threshold,
)

MODES = ("differentiated", "reliable", "unreliable", "important")


def add_common_args(p: argparse.ArgumentParser) -> None:
    """Options the worker and the PS share (they must agree)."""
    p.add_argument("--world", type=argtypes.count, required=True, help="number of workers")
    p.add_argument("--mode", choices=MODES, default="differentiated", help="transport")
    p.add_argument("--gradient", default=None, metavar="NPZ",
                   help="fixed gradient tensors (np.savez(NPZ, *arrays)) instead of training")
    p.add_argument("--iterations", type=argtypes.count, default=1, help="rounds with --gradient (default 1)")
    p.add_argument("--epochs", type=argtypes.count, default=12, help="training epochs (default 12)")
    p.add_argument("--batch", type=argtypes.count, default=32, help="per-worker batch size (default 32)")
    p.add_argument("--lr", type=argtypes.positive, default=0.5, help="SGD learning rate (default 0.5)")
    p.add_argument("--seed", type=argtypes.natural, default=0, help="model, data split and shuffling seed")
    p.add_argument("--channels", type=argtypes.count, default=8, help="CNN width (default 8)")
    p.add_argument("--block-size", type=argtypes.count, default=64, help="values per block of non-conv tensors")
    p.add_argument("--max-time", type=argtypes.positive, default=300.0, help="give up after this many seconds")
    p.add_argument("--port", type=argtypes.port, default=DIFF_TCP_PORT,
                   help=f"PS port, TCP and UDP (default {DIFF_TCP_PORT})")
    p.add_argument("--model", default=None,
                   help="model name of hosts.training.build_model (default: the digits CNN of --channels)")
    p.add_argument("--data", default=None,
                   help="data set name of hosts.training.load_data (default: the digits split)")
    p.add_argument("--max-steps", type=argtypes.natural, default=0, help="cap on iterations per epoch (0: none)")
    p.add_argument("--error-feedback", action="store_true",
                   help="error feedback: the PS acknowledges each worker's blocks that went into its "
                        "update (and folds no late block in), the worker adds the others to their "
                        "next gradient (default: off, missing blocks are lost)")


def check_common_args(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Reject shared options out of range (argparse error, exit 2)."""
    for name in ("world", "iterations", "epochs", "batch", "channels", "block_size"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.max_steps < 0:
        p.error("--max-steps must be >= 0")


def load_training(args: argparse.Namespace) -> tuple[Any, Any]:
    """The (model, data) of the shared options: ``--model``/``--data`` by name
    (``hosts.training``), else the digits CNN of ``--channels`` and the digits split."""
    from hosts import training

    try:
        data = training.load_data(args.data, args.seed) if args.data else training.load_digits_split(args.seed)
        model = (training.build_model(args.model, args.seed) if args.model
                 else training.make_model(args.seed, args.channels))
    except ValueError as e:
        raise SystemExit(f"error: {e}") from None
    return model, data


def training_steps(args: argparse.Namespace, n_train: int) -> int:
    """Iterations per epoch: :func:`steps_per_epoch`, capped by ``--max-steps``."""
    steps = steps_per_epoch(n_train, args.world, args.batch)
    return min(steps, args.max_steps) if args.max_steps > 0 else steps


def cpu_seconds() -> float:
    """User + system CPU seconds of this process."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def tcp_retransmissions() -> int:
    """TCP segments retransmitted in this network namespace (``RetransSegs`` of
    ``/proc/net/snmp``; 0 if unreadable)."""
    try:
        lines = [ln.split() for ln in Path("/proc/net/snmp").read_text().splitlines() if ln.startswith("Tcp:")]
        return int(dict(zip(lines[0][1:], lines[1][1:], strict=True))["RetransSegs"])
    except (OSError, IndexError, KeyError, ValueError):
        return 0


def load_tensors(path: str) -> list[np.ndarray]:
    """The float32 tensors of an ``.npz`` (``np.savez(path, *arrays)``: arr_0, arr_1, ...),
    in the order of the numbers that end their names."""
    import re

    with np.load(path) as z:
        names = sorted(z.files, key=lambda n: int(re.sub(r"\D", "", n) or 0))
        return [z[n].astype(np.float32) for n in names]


def steps_per_epoch(n_train: int, world: int, batch: int) -> int:
    """Iterations per epoch: the smallest shard's full batches (same on every node)."""
    return max(1, (n_train // world) // batch)


def _connect(host: str, port: int, dscp: int, timeout: float, patience: float = 15.0) -> socket.socket:
    """TCP connection to the PS, retried while it starts (it loads the data first). The
    DSCP is set before connecting, so the handshake travels on the same queue."""
    deadline = time.monotonic() + patience
    while True:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        set_dscp(s, dscp)
        s.settimeout(timeout)
        try:
            s.connect((host, port))
            return s
        except (ConnectionRefusedError, TimeoutError):
            s.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _parser() -> argparse.ArgumentParser:
    """The worker's command line."""
    p = argtypes.Parser(prog="python -m hosts.differentiated.worker", description=described(__doc__))
    p.add_argument("--ps", required=True, help="PS address (IPv4)")
    p.add_argument("--rank", type=argtypes.natural, required=True, help="this worker's rank (0..world-1)")
    add_common_args(p)
    p.add_argument("--alpha", type=argtypes.probability, default=0.5, help="SANE smoothing factor (default 0.5)")
    p.add_argument("--quantile", type=argtypes.probability, default=0.5,
                   help="threshold = this quantile of the contributions (default 0.5: half the blocks important)")
    p.add_argument("--levels", type=argtypes.count, default=3, help="unreliable levels (default 3)")
    p.add_argument("--importance", choices=("sane", "random", "topk"), default="sane",
                   help="which blocks are important: SANE's largest (default), random ones (as many "
                        "as the quantile gives; seeded by --seed and --rank) or topk, as many of the "
                        "largest L2 norm of what is pending (no smoothing)")
    p.add_argument("--share", type=argtypes.probability, default=0.0,
                   help="adaptive threshold: the blocks carrying this share of the total "
                        "contribution are important (0, default: the fixed --quantile)")
    p.add_argument("--residual-out", default=None, metavar="NPZ",
                   help="with --error-feedback: save the final residual here (np.savez, one array a tensor; "
                        "{rank} in the name becomes the rank)")
    p.add_argument("--udp-pps", type=argtypes.nonnegative, default=0.0,
                   help="pace unreliable datagrams at this rate (default 0: as fast as possible)")
    p.add_argument("--batch-seed", type=int, default=None,
                   help="seed of the batch order (default: seed * 1000 + rank)")
    p.add_argument("--slow", type=argtypes.number(1.0), default=1.0, help="compute F times slower (F >= 1)")
    p.add_argument("--compute-time", type=argtypes.nonnegative, default=0.0,
                   help="fix each step's compute at S seconds (dilated time; 0: real)")
    p.add_argument("--eval-every", type=argtypes.natural, default=None,
                   help="print an evaluation record every K steps and at each epoch's end "
                        "(0: epoch ends only; default: none)")
    return p


def _check_args(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Reject options out of range (argparse error, exit 2)."""
    check_common_args(p, args)
    if args.slow < 1.0 or args.compute_time < 0:
        p.error("--slow must be >= 1 and --compute-time >= 0")
    if args.eval_every is not None and args.eval_every < 0:
        p.error("--eval-every must be >= 0")
    if not 0 <= args.rank < args.world:
        p.error(f"--rank {args.rank} out of range for --world {args.world}")
    if not 1 <= args.levels <= len(DSCP_LEVELS):
        p.error(f"--levels must be in 1..{len(DSCP_LEVELS)} (one DSCP per level)")
    if not 0.0 <= args.quantile <= 1.0 or not 0.0 <= args.alpha < 1.0:
        p.error("--quantile must be in [0, 1] and --alpha in [0, 1)")
    if not 0.0 <= args.share <= 1.0 or (args.share and args.importance != "sane"):
        p.error("--share must be in [0, 1] (0: the fixed quantile), and only with --importance sane")
    if args.residual_out and not args.error_feedback:
        p.error("--residual-out needs --error-feedback")


class DiffWorker(Sync):
    """One worker rank, as a :class:`hosts.loop.Sync` of the one training loop: classify
    the gradient's blocks, send them on the reliable and unreliable channels, answer with
    the PS's parameters (and its stop flag); the loop computes, evaluates and applies."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.model = self.data = self.shard = self.heldout = None
        self.udps: dict[int, socket.socket] = {}
        self.sent_datagrams = [0] * (args.levels + 1)
        self.sent_blocks = [0] * (args.levels + 1)
        self.tcp_bytes = self.udp_bytes = 0
        self.sync_times: list[float] = []
        self.delivered = 0  # blocks the PS acknowledged (error feedback)
        self.it = 0

    def load(self) -> None:
        """The model and data (or the fixed tensors), the block layout and the classifiers."""
        from hosts import training

        args = self.args
        if args.gradient:
            self.fixed = load_tensors(args.gradient)
            self.like = self.fixed
            self.total = args.iterations
            self.steps = self.total
            self.work = ModelWork(fixed=training.flatten(self.fixed))
        else:
            import torch

            torch.set_num_threads(1)
            self.model, self.data = load_training(args)
            self.shard = training.worker_shard(self.data, args.rank, args.world)
            self.like = training.parameter_arrays(self.model)
            self.steps = training_steps(args, len(self.data.y_train))
            self.total = self.steps * args.epochs
            if args.eval_every is not None and args.rank == 0:
                self.heldout = training.heldout_set(self.data, args.seed)
        self.batch_seed = args.seed * 1000 + args.rank if args.batch_seed is None else args.batch_seed
        if self.model is not None:
            self.work = ModelWork(self.model, self.data, self.shard, args.batch, self.batch_seed,
                                  heldout=self.heldout)
        shapes = [a.shape for a in self.like]
        self.layout = BlockLayout(shapes, args.block_size)
        self.contrib = Contribution(len(self.layout), args.alpha)
        self.ef = ErrorFeedback(self.layout) if args.error_feedback else None
        self.pick_rng = np.random.default_rng([args.seed, args.rank, 0xD1FF])
        self.send_rng = np.random.default_rng([args.seed, args.rank, 0x5E4D])
        self.n_random = int(np.sum(classify(np.arange(len(self.layout), dtype=np.float64), args.quantile,
                                            args.levels) == DIFF_LEVEL_IMPORTANT))  # the quantile's count

    def connect(self) -> None:
        """The reliable channel to the PS, and HELLO on it."""
        args = self.args
        self.tcp = _connect(args.ps, args.port, level_dscp(0, args.mode), args.max_time)
        self.tcp.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.f = self.tcp.makefile("rb", buffering=1 << 16)
        self.tcp.sendall(frame(Kind.HELLO, args.rank.to_bytes(2, "big") + args.world.to_bytes(2, "big")))

    def udp_for(self, level: int) -> socket.socket:
        """The unreliable channel of ``level`` (one socket per DSCP)."""
        if level not in self.udps:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            set_buffers(s, rcvbuf=None, sndbuf=4 << 20, force=False)
            set_dscp(s, level_dscp(level, self.args.mode))
            s.connect((self.args.ps, self.args.port))
            self.udps[level] = s
        return self.udps[level]

    def run(self) -> int:
        """Load, then the one loop (connect, every iteration, BYE); 0, 1 when the PS went away."""
        args = self.args
        self.load()
        eval_every = args.eval_every if self.model is not None else None
        cfg = LoopConfig(args.rank, args.world, 1 if args.gradient else args.epochs, self.steps,
                         args.lr, eval_every, args.slow, args.compute_time)
        return TrainLoop(cfg, self.work, self).run()

    # ------------------------------------------------------------------ the loop's hooks
    def start(self, loop: TrainLoop) -> None:
        """Connect (HELLO), then the training clock starts."""
        self.connect()
        self.retrans0 = tcp_retransmissions()
        self.t_start = time.monotonic()
        self.deadline = self.t_start + self.args.max_time

    def should_stop(self, loop: TrainLoop) -> bool:
        """``--max-time`` is over."""
        return time.monotonic() >= self.deadline

    def levels(self, c: np.ndarray, blocks: list[np.ndarray]) -> np.ndarray:
        """Each block's level (0: important) by the mode, the contributions ``c`` and
        (top-k) the blocks' norms."""
        args, n = self.args, len(self.layout)
        if args.mode == "reliable":
            return np.zeros(n, dtype=np.int64)
        if args.mode == "unreliable":
            return np.ones(n, dtype=np.int64)
        if args.importance == "random":
            return classify_random(n, self.n_random, args.levels, self.pick_rng)
        if args.importance == "topk":
            return classify_topk(block_norms(blocks), self.n_random, args.levels)
        return classify(c, args.quantile, args.levels,
                        cut=share_threshold(c, args.share) if args.share else None)

    def sync(self, grad: np.ndarray) -> SyncResult:
        """Classify, send, receive the parameters and the PS's stop flag; ConnectionError
        when the PS closed the connection."""
        from hosts import training

        pending = self.ef.pending(grad) if self.ef else grad  # error feedback: + the residual
        blocks = self.layout.split(training.unflatten(pending, self.like))
        levels = self.levels(self.contrib.update(blocks), blocks)
        t0 = time.monotonic()
        self.send(self.it, blocks, levels)
        msg = recv_msg(self.f)
        if self.ef is not None:
            msg = self.settle(msg)
        if msg is None or msg[0] != Kind.PARAMS:
            raise ConnectionError(f"PS closed the connection at iteration {self.it}")
        _p_it, stop, values = parse_params(msg[1])
        self.sync_times.append(time.monotonic() - t0)
        self.it += 1
        return SyncResult(params=values, stop=bool(stop))

    def settle(self, msg: tuple[bytes, bytes] | None) -> tuple[bytes, bytes] | None:
        """Error feedback: the PS's ACK of this iteration settles the residual; returns
        the next message (the parameters). ConnectionError on anything else."""
        if msg is None or msg[0] != Kind.ACK:
            raise ConnectionError(f"no ACK from the PS at iteration {self.it} (is it running --error-feedback?)")
        try:
            it, mask = parse_ack(msg[1])
        except DiffDecodeError as e:
            raise ConnectionError(f"bad ACK at iteration {self.it}: {e}") from None
        if it != self.it or mask.size != len(self.layout):
            raise ConnectionError(f"ACK of iteration {it} for {mask.size} blocks at iteration {self.it}")
        self.ef.settle(mask)
        self.delivered += int(mask.sum())
        return recv_msg(self.f)

    def send(self, it: int, blocks: list[np.ndarray], levels: np.ndarray) -> None:
        """The manifest and the important blocks over TCP, the others as datagrams."""
        args = self.args
        per_level: dict[int, list[bytes]] = {}
        important: list[bytes] = []
        for spec, values, lv in zip(self.layout.blocks, blocks, levels, strict=True):
            msg = encode_diff_block(spec.header(it, args.rank, int(lv)), values)
            if lv == DIFF_LEVEL_IMPORTANT:
                important.append(frame(Kind.BLOCK, msg))
            else:
                per_level.setdefault(int(lv), []).append(msg)
            if lv == DIFF_LEVEL_IMPORTANT or args.mode != "important":  # "important" sends no others
                self.sent_blocks[int(lv)] += 1
        if args.mode == "important":  # the ablation: no unreliable channel at all
            per_level = {}
        dgrams = {lv: pack_datagrams(msgs) for lv, msgs in sorted(per_level.items())}
        counts = [len(dgrams.get(lv, [])) for lv in range(1, args.levels + 1)]
        out = frame(Kind.MANIFEST, manifest(it, len(important), counts, [int(x) for x in levels])) + b"".join(important)
        self.tcp.sendall(out)
        self.tcp_bytes += len(out)
        self.send_datagrams(dgrams)

    def send_datagrams(self, dgrams: dict[int, list[bytes]]) -> None:
        """Round-robin over the levels, so that only the switch's priorities decide which
        level loses datagrams when the bottleneck overflows. Each round takes the levels
        in a fresh random order: with a fixed order and paced senders, the same level
        would always meet the queue at the same phase, and a FIFO would drop by level."""
        gap = 1.0 / self.args.udp_pps if self.args.udp_pps > 0 else 0.0
        nxt = time.monotonic()
        queues = [list(reversed(d)) for _, d in sorted(dgrams.items())]
        lv_of = sorted(dgrams)
        while any(queues):
            for qi in self.send_rng.permutation(len(queues)).tolist():
                q = queues[qi]
                if not q:
                    continue
                d = q.pop()
                if gap:
                    nxt += gap
                    delay = nxt - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                try:
                    self.udp_for(lv_of[qi]).send(d)
                    self.sent_datagrams[lv_of[qi]] += 1
                    self.udp_bytes += len(d)
                except OSError:
                    pass  # a full host queue is one more loss of the unreliable channel

    def stats(self) -> dict[str, Any]:
        """The worker's own summary fields (besides the loop's)."""
        sync = self.sync_times
        return {
            "mode": self.args.mode, "iterations": self.it, "seconds": time.monotonic() - self.t_start,
            "sync_mean_s": float(np.mean(sync)) if sync else None,
            "sync_median_s": float(np.median(sync)) if sync else None,
            "sent_blocks": self.sent_blocks, "sent_datagrams": self.sent_datagrams,
            "tcp_bytes": self.tcp_bytes, "udp_bytes": self.udp_bytes,
            "retransmissions": tcp_retransmissions() - self.retrans0,
            "error_feedback": self.ef is not None, "importance": self.args.importance,
            **self.ef_stats(),
        }

    def ef_stats(self) -> dict[str, Any]:
        """Error feedback's fields: blocks delivered (acknowledged) and the final
        residual's L2 norm; ``--residual-out`` gets the residual itself."""
        if self.ef is None:
            return {}
        res = self.ef.residual
        if self.args.residual_out:
            from hosts import training

            np.savez(self.args.residual_out.replace("{rank}", str(self.args.rank)),
                     *training.unflatten(res, self.like))
        return {"delivered_blocks": self.delivered,
                "residual_norm": float(np.sqrt(np.sum(np.square(res, dtype=np.float64))))}

    def finish(self, summary: dict[str, Any]) -> None:
        """The summary goes to the PS with BYE (the loop prints it next)."""
        try:
            self.tcp.sendall(frame(Kind.BYE, json.dumps(summary).encode()))
            self.tcp.shutdown(socket.SHUT_WR)
            # wait for the PS to close: its last message may still be on the way
            self.tcp.settimeout(10)
            while recv_msg(self.f) is not None:
                pass
        except OSError:
            pass


def main(argv: list[str] | None = None) -> int:
    """Entry point of the worker agent."""
    p = _parser()
    args = p.parse_args(argv)
    _check_args(p, args)
    return DiffWorker(args).run()

if __name__ == "__main__":
    rc = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip the interpreter's teardown (seconds with torch loaded on a busy machine): the
    # summary is out and the kernel closes the sockets.
    os._exit(rc)
