"""A training node of token-passing gradient broadcast (token, docs/token.md).

One process per node, in its Mininet host, talking raw Ethernet (EtherType 0x88B5) to
its smart NIC (``p4src/nic.p4``) through one AF_PACKET socket. The steps:

* formation: the initiator (the node holding model and data) broadcasts
  FORM_START; nodes answer FORM_REPLY; the initiator records the answers in order
  (sequence number = 1 + position) and, after ``--form-silence`` seconds without a new
  answer, broadcasts the roster (ROSTER frames, the last closes formation in every NIC);
  late nodes stay out;
* distribution: the initiator broadcasts the model's parameters (MODEL) and
  every member's shard (DATA tagged with the member's number; each node keeps only its
  own, plus the test set tagged 0), then DATA_DONE; nodes ack (DATA_ACK), missing pieces
  are re-sent;
* training: node 1 creates the token. A holder whose gradient for the
  current batch is ready broadcasts it (GRAD frames, accumulated by every NIC) and passes
  the token (TOKEN names the next active member); one whose gradient is not ready waits
  at most ``--dwell`` seconds, then passes it on. When the gradients received cover
  ``--cutoff`` of the batch's data (1.0 = all active members), the holder opens
  the next batch (TOKEN with batch + 1). Every node then reads the sums of the finished
  batch from its NIC (READ/READ_REPLY) and updates w <- w - lr * sum / n, n the number of
  gradients received. A gradient longer than the NIC holds (32,768 values) goes in
  chunks, one token round each (docs/token.md, "Chunks");
* failures: the host ticks its NIC every ``--tick`` seconds; the NIC
  answers RESEND_DUE when its host's last broadcast met silence for t (the host re-sends
  it, flag RESEND), and broadcasts NODE_LOST itself when the token holder stays silent
  d*t after the resend (d = position after the holder). Removed nodes stand by (keeping
  number and model) and rejoin at the next batch boundary (REJOIN_QUERY / REJOIN_REPLY /
  REJOIN + MODEL). Fewer than ``--min-nodes`` active members: the coordinator (smallest
  active number) broadcasts ABNORMAL, saves the model and everyone stops (exit 3).

The parts of a node, mixins of :class:`Node` (one state, on one object):

* :mod:`hosts.token.link` -- the AF_PACKET socket to the NIC and the frame I/O;
* :mod:`hosts.token.protocol` -- formation, token passing, failures, the main loop;
* :mod:`hosts.token.data` -- distribution of model and data, example and gradient files;
* :mod:`hosts.token.training` -- model, compute step, batch end;
* :mod:`hosts.token.sync` -- the node as a Sync of the one training loop
  (:mod:`hosts.loop`): the loop computes, the protocol runs in a network thread.

This module ties them together (:class:`Node`) and holds the command line.

Output: one JSON object per line on stdout (events), the last one the summary.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hosts.loop import TrainLoop
from hosts.token.data import Distribution, encode_examples, exact_encoding
from hosts.token.link import NicLink, TokenError
from hosts.token.protocol import TokenProtocol
from hosts.token.sync import TokenSync, summary_record
from hosts.token.training import Timing, Training, model_factory
from wire import argtypes
from wire.token import TOKEN_VALUES, TokenHeader, TokenMsg, encode_token


@dataclass
class Node(TokenProtocol, Distribution, Training):
    """The state of one training node (network thread and the loop's compute steps)."""

    args: argparse.Namespace
    link: NicLink
    seq: int = 0
    roster: dict[int, bytes] = field(default_factory=dict)
    active: set[int] = field(default_factory=set)
    standby: bool = False
    batch: int = 0
    bitmap: int = 0
    last_pass: int = 0
    holder: bool = False
    last_broadcast: bytes | None = None
    pending: deque = field(default_factory=deque)
    timing: Timing = field(default_factory=Timing)
    stats: dict[str, int] = field(default_factory=lambda: {
        "tokens_passed": 0, "grads_sent": 0, "grad_frames": 0, "resends": 0, "lost_declared": 0,
        "lost_seen": 0, "rejoined": 0, "clipped": 0, "incomplete_frags": 0, "batches": 0,
        "gradients_accumulated": 0, "partial_grads": 0, "repair_frames": 0, "repair_nacks": 0,
        "repair_rounds": 0})

    def __post_init__(self) -> None:
        self.t0 = time.monotonic()
        self.model: Any = None
        self.like: list[np.ndarray] = []
        self.nvalues = 0
        self.nfrags = 0
        self.chunks = 1               # token rounds per batch (gradient / NIC capacity)
        self.batch_members = 0        # contributors of the current batch's first chunk
        self.chunk_sums = np.zeros(0, dtype=np.int64)
        self.chunk_bitmaps: list[int] = []
        self.x = self.y = None
        self.test: tuple[Any, Any] | None = None
        self.batches_per_epoch = 0
        self.total_batches = 0
        self.total_steps = 0          # total_batches x chunks
        self.ready: tuple[int, Any, float, int] | None = None   # (step, quantized, t_ready, examples)
        self.partial: tuple[int, Any, float, int] | None = None  # the same, over part of the batch
        self.examples = 0             # examples covered in the current step (the token's count)
        self.sent_steps: dict[int, tuple[Any, int]] = {}  # own broadcasts kept for NACKs
        self.batch_grad: tuple[int, Any, float, int, Any] | None = None  # sent in chunk 0
        self.shards: dict[int, bytes] = {}       # initiator: every member's data (redistribution)
        self.redistribute_due: set[int] = set()  # initiator: lost members' data to send
        self.redistributed: set[int] = set()     # lost members whose data this node took
        self.redist_parts: dict[int, dict[int, bytes]] = {}
        self.ready_lock = threading.Lock()
        self.work: queue.Queue = queue.Queue()
        self.ready_event = threading.Event()
        self.last_tick = 0.0
        self.done = False
        self.exit_code = 0
        self.acted_pass = -1
        self.next_rejoin_query = 0
        self.model_lock = threading.Lock()
        self.worker_model: Any = None
        self.train_t0 = self.t0     # training starts (train()); evaluation time is left out
        self.train_cpu0 = 0.0       # this process's CPU seconds then
        self.eval_s = 0.0
        self.train_s = 0.0
        self.heldout: Any = None


# ----------------------------------------------------------------------------- modes


def run_node(args: argparse.Namespace) -> int:
    """Formation, distribution, training; returns the exit status."""
    import torch  # noqa: F401  (seconds on a loaded machine: before formation, not after)

    from hosts import training  # noqa: F401

    for d in (args.dump, args.grad_json):
        if d:
            Path(d).mkdir(parents=True, exist_ok=True)
    link = NicLink(args.iface)
    node = Node(args, link)
    node.configure_nic()
    time.sleep(0.05)
    if args.initiator:
        from hosts import training as tr

        node.form_as_initiator()
        data = tr.load_data(args.data, args.seed) if args.data else tr.load_digits_split(seed=args.seed)
        model = model_factory(args.model, args.seed)()
        params = tr.flatten(tr.parameter_arrays(model)).tobytes()
        world = len(node.roster)
        exact = exact_encoding(args.data)
        shards = {s: encode_examples(*tr.worker_shard(data, s - 1, world), exact=exact)
                  for s in node.roster}
        test = encode_examples(data.x_test, data.y_test, exact=exact)
        node.distribute(params, shards, test, len(data.y_train))
        node.shards = shards
        node.setup_training(params, shards[1], test, len(data.y_train))
    else:
        node.log("listening")  # the harness opens formation only once every member is here
        node.form_as_member()
        if node.done:
            summary(node)
            return node.exit_code
        params, mine, test, m_train = node.receive_distribution()
        node.setup_training(params, mine, test, m_train)
        node.send(node.header(TokenMsg.DATA_ACK, aux=0))
    # the one training loop: its compute steps here, the protocol in its network thread
    sync = TokenSync(node)
    rc = TrainLoop(sync.config(), sync.work(), sync).run()
    if sync.error is not None:
        raise sync.error
    return node.exit_code if rc == 0 else (node.exit_code or 2)


def summary(node: Node) -> None:
    """Print the summary line (:func:`summary_record`)."""
    print(json.dumps(summary_record(node)), flush=True)


def run_intruder(args: argparse.Namespace) -> int:
    """Send forged protocol frames from a non-member MAC (tests the NICs' s61 filter);
    with ``--intrude-tags`` behind those VLAN tags, and a forged STOP among them."""
    link = NicLink(args.iface)
    rng = np.random.default_rng(7)
    tags = bytes.fromhex(args.intrude_tags) if args.intrude_tags else b""

    def send(frame: bytes) -> None:
        link.send(frame[:12] + tags + frame[12:])  # the tags go after the two MACs

    sent = 0
    end = time.monotonic() + args.duration
    while time.monotonic() < end and sent < args.count:
        for sender in range(1, 5):
            for batch in range(0, 4):
                vals = rng.integers(-1000, 1000, TOKEN_VALUES).astype(np.int32)
                send(encode_token(TokenHeader(int(TokenMsg.GRAD), sender=sender, batch=batch,
                                              frag=0, nfrags=1), link.mac, values=vals))
                sent += 1
        send(encode_token(TokenHeader(int(TokenMsg.TOKEN), sender=1, next_holder=2,
                                      batch=0, pass_no=10**6), link.mac))
        sent += 1
        if tags:  # a STOP a node would obey (the NIC must never bridge it)
            send(encode_token(TokenHeader(int(TokenMsg.STOP), sender=1, batch=10**6), link.mac))
            sent += 1
        time.sleep(0.05)
    print(json.dumps({"event": "intruder", "sent": sent}), flush=True)
    return 0


def _hex_tags(s: str) -> str:
    """``--intrude-tags``: whole 4-byte tags in hex."""
    try:
        if len(bytes.fromhex(s)) % 4:
            raise ValueError
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected hex of 4-byte VLAN tags, got {s!r}") from None
    return s


def _intruder_args(p: argparse.ArgumentParser) -> None:
    """The options of ``--intrude`` (tests: not a node)."""
    p.add_argument("--intrude", action="store_true",
                   help="not a node: send forged GRAD/TOKEN frames (tests)")
    p.add_argument("--count", type=argtypes.count, default=200, help="--intrude: frames at most")
    p.add_argument("--intrude-tags", type=_hex_tags, default="",
                   help="--intrude: send every forged frame behind these VLAN tags (hex, 4 bytes "
                        "a tag, e.g. 81000000), and a forged STOP among them (tests)")
    p.add_argument("--duration", type=argtypes.positive, default=5.0, help="--intrude: seconds at most")


def build_parser() -> argparse.ArgumentParser:
    """Command line of a node."""
    p = argtypes.Parser(prog="python -m hosts.token.node", description=__doc__.split("\n\n")[0])
    p.add_argument("--iface", required=True, help="the interface toward the node's NIC")
    p.add_argument("--initiator", action="store_true", help="this node holds model and data")
    _intruder_args(p)
    p.add_argument("--expect", type=argtypes.natural, default=0, help="initiator: close formation once this "
                   "many nodes (itself included) are in and 0.3 s passed quietly")
    p.add_argument("--form-silence", type=argtypes.positive, default=2.0, help="silence that closes formation (s)")
    p.add_argument("--form-max", type=argtypes.positive, default=20.0, help="formation lasts at most (s)")
    p.add_argument("--join-timeout", type=argtypes.positive, default=60.0, help="member: wait for roster/data (s)")
    p.add_argument("--ack-timeout", type=argtypes.positive, default=5.0)
    p.add_argument("--burst", type=argtypes.count, default=32,
                   help="GRAD frames sent back to back before a 1 ms pause, and READs of the "
                        "sums outstanding at once (default 32; BMv2, whose egress queues hold "
                        "64 frames and whose threads share the cores with the hosts, needs 8: "
                        "experiments.token passes it)")
    p.add_argument("--model", default="hosts.training:make_model",
                   help="module:factory of the model (its parameters are what is trained), or "
                        "a name of hosts.training.MODELS: build_model(NAME, --seed)")
    p.add_argument("--data", default="",
                   help="a data set of hosts.training (load_data(NAME, --seed)); examples travel "
                        "exactly (float32; the digits as their pixel levels). Default: the digits "
                        "split of --seed")
    p.add_argument("--seed", type=argtypes.natural, default=0)
    p.add_argument("--epochs", type=argtypes.count, default=2)
    p.add_argument("--batch-size", type=argtypes.count, default=32)
    p.add_argument("--batches", type=argtypes.natural, default=0, help="stop after this many batches (0: epochs)")
    p.add_argument("--max-steps", type=argtypes.natural, default=0, help="cap on batches per epoch (0: none)")
    p.add_argument("--batch-seed", type=int, default=-1,
                   help="batch order of hosts.training.batches(..., seed=N) on every node "
                        "(default: each node's sequence number)")
    p.add_argument("--evals", action="store_true",
                   help="log the harness's evaluation records (eval events: weights hash, and "
                        "test/held-out accuracy on the evaluating node) at the start, every "
                        "--eval-every batches and each epoch's end")
    p.add_argument("--eval-every", type=argtypes.natural, default=0, help="--evals: every K batches too (0: epochs)")
    p.add_argument("--lr", type=argtypes.positive, default=0.3)
    p.add_argument("--scale-bits", type=argtypes.integer(0, 62), default=16, help="fixed point: q = round(g * 2^S)")
    p.add_argument("--cutoff", type=argtypes.number(above=0.0, hi=1.0), default=0.9,
                   help="end a batch once gradients cover this fraction of its data")
    p.add_argument("--pieces", type=argtypes.count, default=8,
                   help="with --cutoff < 1: compute a batch in this many pieces, so a slow node "
                        "can send the examples it has done (the cutoff counts examples)")
    p.add_argument("--dwell", type=argtypes.nonnegative, default=0.02,
                   help="a holder without a gradient waits at most this long before passing (s)")
    p.add_argument("--wait-unit", type=argtypes.positive, default=1.0, help="t of the staggered timeouts (s)")
    p.add_argument("--tick", type=argtypes.positive, default=0.05, help="TICK period to the NIC (s)")
    p.add_argument("--resends", type=argtypes.integer(1, 255), default=3,
                   help="re-sends of a silent pass before the next nodes wait for NODE_LOST "
                        "(default 3, robust to a lossy LAN; 1: the method's single re-send)")
    p.add_argument("--rejoin-window", type=argtypes.nonnegative, default=0.3,
                   help="how long a REJOIN_QUERY waits for standby nodes (s)")
    p.add_argument("--rejoin-every", type=argtypes.count, default=5,
                   help="batches between two REJOIN_QUERYs that nobody answered")
    p.add_argument("--min-nodes", type=argtypes.count, default=2,
                   help="fewer active members: abnormal state, save the model, stop")
    p.add_argument("--slowdown", type=argtypes.number(1.0), default=1.0, help="compute this many times slower")
    p.add_argument("--slowdowns", default="", metavar="F1,F2,...",
                   help="compute factor per sequence number (node I takes the I-th; the "
                        "roster decides the numbers, so every node gets the whole list)")
    p.add_argument("--compute-fixed", type=argtypes.nonnegative, default=0.0,
                   help="hold compute at this many seconds per batch (bench; x slowdown)")
    p.add_argument("--max-time", type=argtypes.positive, default=600.0)
    p.add_argument("--start-signal", default="", metavar="FILE",
                   help="node 1 creates the token only once FILE exists (for harnesses that "
                        "measure the training alone)")
    p.add_argument("--save", default="", help="where the coordinator saves the model on ABNORMAL/finish")
    p.add_argument("--grad-json", default="", metavar="DIR",
                   help="also write every own gradient and every averaged sum as JSON (one "
                        "file per batch and node)")
    p.add_argument("--gradient", default="", metavar="FILE",
                   help="send this float32 .npy (the model's size) as every batch's gradient "
                        "instead of computing one")
    p.add_argument("--dump", default="", help="directory: sent gradients and NIC sums per batch (tests)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.burst < 1:
        parser.error(f"--burst must be at least 1, not {args.burst}")
    if args.intrude:
        return run_intruder(args)
    try:
        return run_node(args)
    except TokenError as e:
        print(json.dumps({"event": "error", "message": str(e)}), flush=True)
        print(f"token_node: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # no interpreter teardown: torch may abort ("terminate called...") while a thread of
    # its pool is still alive, which would turn a finished run into a crash
    os._exit(code)
