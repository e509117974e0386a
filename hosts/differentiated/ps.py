"""Parameter server of differentiated gradient transmission.

    python -m hosts.differentiated.ps --world W --mode M [--epochs E ...]       # training
    python -m hosts.differentiated.ps --world W --gradient G.npz --iterations K \\
        --out-dir DIR                                                              # fixed tensors

Listens on TCP and UDP port DIFF_TCP_PORT/DIFF_UDP_PORT. Each iteration it waits until
every important block of every worker is in (plus ``--grace`` seconds for unreliable
blocks, less when all arrive), rebuilds each worker's gradient with zeros in place of the
missing blocks, adds the late blocks of earlier iterations (delayed update), takes one
SGD step on the sum and sends the new parameters to every worker over TCP. With
``--error-feedback`` it first sends each worker an ACK, the bitmap of its blocks that went
into the step, and folds no late block in (the worker re-sends them as its residual). Evaluates
test accuracy after every epoch. Prints one JSON summary; with ``--out-dir`` (fixed
tensors) saves each worker's reconstruction ``recon-w<rank>-it<i>.npz`` and the
received-block lists.

``--members IP,IP,...`` (rank order: worker r sends from the r-th address) makes the
receiver accept connections, datagrams and blocks only from the job's workers; refused
ones are counted in the summary's ``refused``. Without it any source is accepted (for
runs over loopback, where every worker has the same address).

With the harness's shared options (``--model``, ``--data``, ``--max-steps``, see the
worker) it trains the same model; ``--no-eval`` leaves the per-epoch evaluation to the
workers (rank 0's records). The summary adds the CPU seconds, the TCP retransmissions of
this namespace and the hash of the final weights.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import socket
import sys
import time
from pathlib import Path

import numpy as np

from hosts.net import net_dev, udp_socket
from wire import argtypes
from wire.argtypes import described
from wire.differentiated import DIFF_LEVEL_IMPORTANT, Kind, ack_body, frame, params_body

from .blocks import BlockLayout
from .receiver import LATE_BINS, Receiver
from .worker import (
    add_common_args,
    check_common_args,
    cpu_seconds,
    load_tensors,
    load_training,
    tcp_retransmissions,
    training_steps,
)


def _nic_counters() -> dict[str, int]:
    """rx bytes/packets of every non-loopback interface of this namespace."""
    nics = [c for name, c in net_dev().items() if name != "lo"]
    return {"rx_bytes": sum(c.rx_bytes for c in nics), "rx_packets": sum(c.rx_packets for c in nics)}


def _parser() -> argparse.ArgumentParser:
    """The PS's command line."""
    p = argtypes.Parser(prog="python -m hosts.differentiated.ps", description=described(__doc__))
    add_common_args(p)
    p.add_argument("--bind", default="0.0.0.0", help="address to listen on")
    p.add_argument("--grace", type=argtypes.nonnegative, default=0.01,
                   help="seconds to wait for unreliable blocks once the important ones are in")
    p.add_argument("--staleness", type=argtypes.natural, default=1,
                   help="late blocks up to this many iterations old are applied (delayed update; "
                        "0 with --error-feedback, whose residual re-sends them)")
    p.add_argument("--linger", type=argtypes.nonnegative, default=0.5, help="seconds to count late datagrams at the end")
    p.add_argument("--out-dir", default=None, help="save reconstructions here (fixed tensors)")
    p.add_argument("--members", default=None, metavar="IP,IP,...",
                   help="source address of each worker, in rank order: refuse and count every other "
                        "source (default: accept any)")
    p.add_argument("--clip", type=argtypes.nonnegative, default=0.0,
                   help="cap the L2 norm of the averaged gradient (sum / world) at this value before "
                        "the SGD step (0, default: no cap; see docs/differentiated.md, 'Stability')")
    p.add_argument("--no-eval", action="store_true",
                   help="no test accuracy per epoch here (the workers evaluate)")
    return p


def _members(p: argparse.ArgumentParser, args: argparse.Namespace) -> list[str] | None:
    """Check the options; ``--members`` as a list (None: accept any source)."""
    check_common_args(p, args)
    if args.clip < 0:
        p.error("--clip must be >= 0")
    members = None
    if args.members is not None:
        members = [m.strip() for m in args.members.split(",")]
        if len(members) != args.world:
            p.error(f"--members names {len(members)} addresses for --world {args.world}")
        for m in members:
            try:
                socket.inet_aton(m)
            except OSError:
                p.error(f"--members: {m!r} is not an IPv4 address")
    return members


class DiffPS:
    """The PS of one job: wait for each iteration's blocks, rebuild and sum the workers'
    gradients, take the SGD step, send the parameters back, report."""

    def __init__(self, args: argparse.Namespace, members: list[str] | None) -> None:
        self.args, self.members = args, members
        self.model = self.data = None
        self.missing: collections.Counter = collections.Counter()  # level -> blocks not there
        self.iter_times: list[float] = []
        self.grace_waited: list[float] = []
        self.epochs: list[dict] = []
        self.norms: list[list[float]] = []  # per iteration, see "update_norms" in the summary
        self.incomplete = 0

    def load(self) -> None:
        """The model and data (or the fixed tensors' shapes) and the block layout."""
        args = self.args
        if args.gradient:
            shapes = [a.shape for a in load_tensors(args.gradient)]
            self.total = self.steps = args.iterations
        else:
            import torch

            from hosts import training

            torch.set_num_threads(1)
            self.model, self.data = load_training(args)
            shapes = [a.shape for a in training.parameter_arrays(self.model)]
            self.steps = training_steps(args, len(self.data.y_train))
            self.total = self.steps * args.epochs
        self.layout = BlockLayout(shapes, args.block_size)

    def listen(self) -> None:
        """The TCP and UDP sockets and the receiver thread; ``--out-dir`` made."""
        args = self.args
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        tcp.bind((args.bind, args.port))
        tcp.listen(args.world + 4)
        udp = udp_socket(args.bind, args.port, rcvbuf=8 << 20, sndbuf=None, blocking=True)
        # error feedback: a late block is not folded in (stale), the worker's residual has it
        staleness = 0 if args.error_feedback else args.staleness
        self.rx = Receiver(self.layout, args.world, tcp, udp, staleness, self.members).start()
        print(json.dumps({"listening": args.port}), file=sys.stderr, flush=True)
        self.out_dir = Path(args.out_dir) if args.out_dir else None
        if self.out_dir:
            self.out_dir.mkdir(parents=True, exist_ok=True)

    def run(self) -> int:
        """Load, listen, serve every iteration, report; 0, 1 when one was incomplete."""
        args = self.args
        self.load()
        self.listen()
        self.rx.wait_workers(args.max_time)
        nic0 = _nic_counters()
        cpu0, retrans0 = cpu_seconds(), tcp_retransmissions()
        self.t_start = t_prev = time.monotonic()
        self.deadline = self.t_start + args.max_time
        acc0 = None if args.no_eval else training_eval(self.model, self.data)
        if acc0 is not None:
            self.epochs.append({"epoch": 0, "seconds": 0.0, "accuracy": acc0})
        it = 0
        while it < self.total:
            stop = self.iteration(it)
            if stop is None:
                break
            now = time.monotonic()
            self.iter_times.append(now - t_prev)
            t_prev = now
            it += 1
            if self.model is not None and not args.no_eval and it % self.steps == 0:
                self.epochs.append({"epoch": it // self.steps, "seconds": now - self.t_start,
                                    "accuracy": training_eval(self.model, self.data)})
            if stop:
                break
        self.report(it, nic0, cpu0, retrans0)
        return 0 if not self.incomplete else 1

    def iteration(self, it: int) -> bool | None:
        """Serve iteration ``it``: whether it is the last, None when its important blocks
        did not all come before ``--max-time``."""
        args, rx = self.args, self.rx
        ok, waited = rx.data.wait_ready(it, args.grace, max(0.0, self.deadline - time.monotonic()))
        if not ok:
            self.incomplete += 1
            print(json.dumps({"error": f"important blocks of iteration {it} incomplete at --max-time"}),
                  file=sys.stderr, flush=True)
            return None
        self.grace_waited.append(waited)
        blocks, carry, levels = rx.data.take(it)
        agg, zero_filled = self.reconstruct(it, blocks, levels)
        on_time = _norm(agg)
        late_norm = 0.0
        if carry:  # delayed update: late blocks of earlier iterations join this one
            late = self.layout.reconstruct({})
            for j, values in carry:
                b = self.layout.blocks[j]
                late[b.tensor_index].reshape(-1)[b.start:b.start + b.count] += values
            late_norm = _norm(late)
            for a, r in zip(agg, late, strict=True):
                a += r
        total_norm = _norm(agg)
        # the cap applies to the whole step, late blocks included: no iteration moves the
        # model by more than lr * clip, whatever arrived late or was zero-filled
        scale = 1.0 / args.world
        if args.clip and total_norm * scale > args.clip:
            scale = args.clip / total_norm
        self.norms.append([round(on_time, 6), round(late_norm, 6), len(carry), zero_filled,
                           round(scale * args.world, 6)])
        stop = it + 1 >= self.total or time.monotonic() > self.deadline
        if self.model is not None:
            from hosts import training

            training.apply_gradients(self.model, agg, args.lr, scale)
            values = training.flatten(training.parameter_arrays(self.model))
        else:
            values = np.zeros(0, dtype=np.float32)
        params = frame(Kind.PARAMS, params_body(it + 1, stop, values))
        if args.error_feedback:  # each worker its own ACK: the blocks of its that were used
            n = len(self.layout)
            for w in range(args.world):
                got = blocks.get(w, {})
                mask = np.fromiter((j in got for j in range(n)), dtype=bool, count=n)
                rx.send_to(w, frame(Kind.ACK, ack_body(it, mask)) + params)
        else:
            rx.send_all(params)
        return stop

    def reconstruct(self, it: int, blocks: dict, levels: dict) -> tuple[list[np.ndarray], int]:
        """The sum of the workers' gradients, zeros for missing blocks (counted per level),
        and how many blocks were zero-filled; ``--out-dir`` gets each reconstruction."""
        layout, out_dir = self.layout, self.out_dir
        agg = [np.zeros(s, dtype=np.float32) for s in layout.shapes]
        zero_filled = 0
        for w in range(self.args.world):
            got = blocks.get(w, {})
            lv = levels.get(w, b"")
            for j in range(len(layout)):
                if j not in got:
                    self.missing[lv[j] if j < len(lv) else -1] += 1
                    zero_filled += 1
            recon = layout.reconstruct(got)
            for a, r in zip(agg, recon, strict=True):
                a += r
            if out_dir:
                np.savez(out_dir / f"recon-w{w}-it{it}.npz", *recon)
                np.save(out_dir / f"received-w{w}-it{it}.npy", np.array(sorted(got), dtype=np.int64))
        return agg, zero_filled

    def report(self, it: int, nic0: dict[str, int], cpu0: float, retrans0: int) -> None:
        """Wait for the workers' BYEs and the late datagrams; print the summary."""
        args, rx, epochs = self.args, self.rx, self.epochs
        seconds = time.monotonic() - self.t_start
        rx.data.wait_byes(30.0)
        time.sleep(args.linger)  # count the datagrams still queued in the switch
        nic1 = _nic_counters()
        st = rx.data.stats
        summary = {
            "mode": args.mode, "world": args.world, "iterations": it, "seconds": seconds,
            "iteration_mean_s": float(np.mean(self.iter_times)) if self.iter_times else None,
            "grace_mean_s": float(np.mean(self.grace_waited)) if self.grace_waited else None,
            "incomplete": self.incomplete, "blocks_per_worker": len(self.layout),
            "missing_blocks": {str(k): v for k, v in sorted(self.missing.items())},
            "received_datagrams": {str(k): v for k, v in sorted(st.datagrams.items())},
            "received_blocks": {str(k): v for k, v in sorted(st.blocks.items())},
            "late_blocks": st.late_blocks, "stale_blocks": st.stale_blocks,
            # late and stale blocks by seconds after their iteration closed (bin upper bounds)
            "late_after_s": dict(zip([*map(str, LATE_BINS), "more"], st.late_after, strict=True)),
            "late_in_host": st.late_in_host,
            "bad_messages": st.bad_messages, "duplicates": st.duplicates, "refused": st.refused(),
            "tcp_bytes": st.tcp_bytes, "udp_bytes": st.udp_bytes,
            "nic_rx_bytes": nic1["rx_bytes"] - nic0["rx_bytes"],
            "nic_rx_packets": nic1["rx_packets"] - nic0["rx_packets"],
            "epochs": epochs, "final_accuracy": epochs[-1]["accuracy"] if epochs else None,
            "workers": {str(w): b for w, b in sorted(rx.data.byes.items())},
            "important_level": DIFF_LEVEL_IMPORTANT,
            "cpu_s": round(cpu_seconds() - cpu0, 3), "retransmissions": tcp_retransmissions() - retrans0,
            # per iteration: L2 norm of the on-time sum and of the late blocks folded in, the
            # late blocks' count, the blocks zero-filled and the factor --clip left (1: none);
            # the step is lr * factor / world times the sum
            "update_norms": self.norms,
        }
        if self.model is not None:
            from hosts.trainer import weights_hash

            summary["weights"] = weights_hash(self.model)
        rx.stop()
        print(json.dumps(summary), flush=True)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the PS agent."""
    p = _parser()
    args = p.parse_args(argv)
    members = _members(p, args)
    return DiffPS(args, members).run()

def _norm(arrays: list[np.ndarray]) -> float:
    """L2 norm of a list of tensors taken as one vector."""
    return float(np.sqrt(sum(float(np.sum(np.square(a, dtype=np.float64))) for a in arrays)))


def training_eval(model, data) -> float | None:  # noqa: ANN001
    """Test accuracy, or None without a model (fixed tensors)."""
    if model is None:
        return None
    from hosts import training

    return training.evaluate(model, data)


if __name__ == "__main__":
    rc = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip the interpreter's teardown (seconds with torch loaded on a busy machine): the
    # summary is out and the kernel closes the sockets.
    os._exit(rc)
