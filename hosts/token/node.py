"""A training node of token-passing gradient broadcast (technique 5, docs/token.md).

One process per node, in its Mininet host, talking raw Ethernet (EtherType 0x88B5) to
its smart NIC (``p4src/nic.p4``) through one AF_PACKET socket. The steps of seed 004:

* formation (s120-s123): the initiator (the node holding model and data) broadcasts
  FORM_START; nodes answer FORM_REPLY; the initiator records the answers in order
  (sequence number = 1 + position) and, after ``--form-silence`` seconds without a new
  answer, broadcasts the roster (ROSTER frames, the last closes formation in every NIC);
  late nodes stay out;
* distribution (s110, s130): the initiator broadcasts the model's parameters (MODEL) and
  every member's shard (DATA tagged with the member's number; each node keeps only its
  own, plus the test set tagged 0), then DATA_DONE; nodes ack (DATA_ACK), missing pieces
  are re-sent;
* training (s131-s137, s160): node 1 creates the token. A holder whose gradient for the
  current batch is ready broadcasts it (GRAD frames, accumulated by every NIC) and passes
  the token (TOKEN names the next active member); one whose gradient is not ready waits
  at most ``--dwell`` seconds, then passes it on. When the gradients received cover
  ``--cutoff`` of the batch's data (item 38; 1.0 = all active members), the holder opens
  the next batch (TOKEN with batch + 1). Every node then reads the sums of the finished
  batch from its NIC (READ/READ_REPLY) and updates w <- w - lr * sum / n, n the number of
  gradients received;
* failures (s136, s310-s330): the host ticks its NIC every ``--tick`` seconds; the NIC
  answers RESEND_DUE when its host's last broadcast met silence for t (the host re-sends
  it, flag RESEND), and broadcasts NODE_LOST itself when the token holder stays silent
  d*t after the resend (d = position after the holder). Removed nodes stand by (keeping
  number and model) and rejoin at the next batch boundary (REJOIN_QUERY / REJOIN_REPLY /
  REJOIN + MODEL). Fewer than ``--min-nodes`` active members: the coordinator (smallest
  active number) broadcasts ABNORMAL, saves the model and everyone stops (exit 3).

Output: one JSON object per line on stdout (events), the last one the summary.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import select
import socket
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hosts.fixedpoint import FixedPointOverflow, max_abs_q, quantize
from hosts.packets import (
    TOKEN_ETHERTYPE,
    TOKEN_MAX_FRAGS,
    TOKEN_MAX_MEMBERS,
    TOKEN_VALUES,
    TokenDecodeError,
    TokenFlags,
    TokenHeader,
    TokenMsg,
    decode_token,
    encode_token,
    token_values,
)

BLOB_CHUNK = 1024  # raw payload bytes per MODEL/DATA frame
SOCK_BUF = 16 << 20
PACKET_IGNORE_OUTGOING = 23
EXIT_ABNORMAL = 3
EXIT_NOT_ADMITTED = 4


class TokenError(RuntimeError):
    """The protocol cannot go on (lost distribution, NIC not answering...)."""


# ----------------------------------------------------------------------------- link


class NicLink:
    """One reused AF_PACKET socket to the node's NIC, token frames only."""

    def __init__(self, iface: str) -> None:
        self.iface = iface
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(TOKEN_ETHERTYPE))
        for force, plain in ((33, socket.SO_RCVBUF), (32, socket.SO_SNDBUF)):
            try:
                s.setsockopt(socket.SOL_SOCKET, force, SOCK_BUF)
            except OSError:
                s.setsockopt(socket.SOL_SOCKET, plain, SOCK_BUF)
        with contextlib.suppress(OSError):
            s.setsockopt(263, PACKET_IGNORE_OUTGOING, 1)  # SOL_PACKET
        s.bind((iface, TOKEN_ETHERTYPE))
        self.sock = s
        self.mac = s.getsockname()[4][:6]
        self.sent = 0
        self.received = 0

    def send(self, frame: bytes) -> None:
        """Send one frame (retrying briefly when the kernel queue is full)."""
        for _ in range(100):
            try:
                self.sock.send(frame)
                self.sent += 1
                return
            except BlockingIOError:
                time.sleep(0.001)
            except OSError as e:
                if e.errno != 105:  # ENOBUFS
                    raise
                time.sleep(0.001)
        raise TokenError("cannot send to the NIC (queue full)")

    def recv(self, timeout: float) -> bytes | None:
        """One frame, or None after ``timeout`` seconds."""
        r, _, _ = select.select([self.sock], [], [], max(0.0, timeout))
        if not r:
            return None
        self.received += 1
        return self.sock.recv(65536)


# ----------------------------------------------------------------------------- model


def load_factory(spec: str) -> Any:
    """``module:function`` -> the callable (a user's model factory)."""
    import importlib

    mod, _, fn = spec.partition(":")
    return getattr(importlib.import_module(mod), fn or "make_model")


@dataclass
class Timing:
    """Where a node's time goes (seconds, summed over batches)."""

    compute: float = 0.0
    token_wait: float = 0.0    # gradient ready -> token in hand
    broadcast: float = 0.0     # sending GRAD frames
    accumulate: float = 0.0    # NIC read-out and update
    batches: int = 0


@dataclass
class Node:
    """The state of one training node (network thread) plus its compute thread."""

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
        "gradients_accumulated": 0})

    def __post_init__(self) -> None:
        self.t0 = time.monotonic()
        self.model: Any = None
        self.like: list[np.ndarray] = []
        self.nvalues = 0
        self.nfrags = 0
        self.x = self.y = None
        self.test: tuple[Any, Any] | None = None
        self.batches_per_epoch = 0
        self.total_batches = 0
        self.ready: tuple[int, list[int], float] | None = None   # (batch, quantized, t_ready)
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

    # ------------------------------------------------------------------ output
    def log(self, event: str, **kw: Any) -> None:
        """One JSON event line on stdout."""
        rec = {"event": event, "t": round(time.monotonic() - self.t0, 4), "node": self.seq, **kw}
        print(json.dumps(rec), flush=True)

    # ------------------------------------------------------------------ frames
    def header(self, msg: TokenMsg, **kw: Any) -> TokenHeader:
        return TokenHeader(msg_type=int(msg), sender=self.seq, **kw)

    def send(self, hdr: TokenHeader, values: Any = None, payload: bytes = b"") -> bytes:
        frame = encode_token(hdr, self.link.mac, values=values, payload=payload)
        self.link.send(frame)
        return frame

    def next_frame(self, timeout: float) -> tuple[TokenHeader, bytes, memoryview] | None:
        """The next token frame (pending ones first), or None on timeout; ticks the NIC."""
        if self.pending:
            return self.pending.popleft()
        deadline = time.monotonic() + timeout
        while True:
            self.maybe_tick()
            left = deadline - time.monotonic()
            frame = self.link.recv(min(max(left, 0.0), self.args.tick))
            if frame is not None:
                try:
                    _dst, src, hdr, rest = decode_token(frame)
                except TokenDecodeError:
                    continue
                return hdr, src, rest
            if time.monotonic() >= deadline:
                return None

    def maybe_tick(self) -> None:
        """Periodic TICK: the NIC evaluates its timeouts on it (s310-s320)."""
        now = time.monotonic()
        if self.seq and not self.standby and now - self.last_tick >= self.args.tick:
            self.last_tick = now
            self.send(self.header(TokenMsg.TICK, pass_no=self.last_pass, batch=self.batch),
                      payload=b"")

    # ------------------------------------------------------------------ formation
    def configure_nic(self) -> None:
        t_us = int(self.args.wait_unit * 1e6)
        self.send(TokenHeader(msg_type=int(TokenMsg.CONFIG), aux=t_us))

    def form_as_initiator(self) -> None:
        """s121-s123: open formation, record answers in order, close on silence."""
        self.seq = 1
        order = [self.link.mac]
        start = last = time.monotonic()
        self.send(self.header(TokenMsg.FORM_START))
        expect = self.args.expect
        while True:
            now = time.monotonic()
            quiet = now - last
            if quiet >= self.args.form_silence or (expect and len(order) >= expect and quiet >= 0.3):
                break
            if now - start > self.args.form_max:
                break
            got = self.next_frame(0.05)
            if got is None:
                continue
            hdr, src, _ = got
            if hdr.msg_type == TokenMsg.FORM_REPLY and src not in order:
                if len(order) >= TOKEN_MAX_MEMBERS:
                    continue
                order.append(bytes(src))
                last = time.monotonic()
        n = len(order)
        for i, mac in enumerate(order, start=1):
            flags = int(TokenFlags.LAST) if i == n else 0
            self.send(self.header(TokenMsg.ROSTER, member=i, mac=mac, count=n, flags=flags))
        self.roster = {i: m for i, m in enumerate(order, start=1)}
        self.active = set(self.roster)
        self.log("formed", members=n, roster={i: m.hex(":") for i, m in self.roster.items()})

    def form_as_member(self) -> None:
        """Answer FORM_START (and announce once at start); learn the roster."""
        deadline = time.monotonic() + self.args.join_timeout
        self.send(self.header(TokenMsg.FORM_REPLY))
        answered = False
        roster: dict[int, bytes] = {}
        while time.monotonic() < deadline:
            got = self.next_frame(0.2)
            if got is None:
                continue
            hdr, _src, _ = got
            if hdr.msg_type == TokenMsg.FORM_START and not answered:
                self.send(self.header(TokenMsg.FORM_REPLY))
                answered = True
            elif hdr.msg_type == TokenMsg.ROSTER:
                roster[hdr.member] = bytes(hdr.mac)
                if hdr.flags & TokenFlags.LAST:
                    if len(roster) != hdr.count:
                        raise TokenError(f"roster incomplete: {len(roster)} of {hdr.count}")
                    me = [i for i, m in roster.items() if m == self.link.mac]
                    if not me:
                        break
                    self.seq = me[0]
                    self.roster = roster
                    self.active = set(roster)
                    self.log("formed", members=len(roster))
                    return
        self.log("not_admitted", reason="formation closed without this node")
        self.exit_code = EXIT_NOT_ADMITTED
        self.done = True

    # ------------------------------------------------------------------ distribution
    def send_blob(self, msg: TokenMsg, member: int, data: bytes, batch: int = 0,
                  flags: int = 0) -> None:
        n = max(1, -(-len(data) // BLOB_CHUNK))
        for i in range(n):
            chunk = data[i * BLOB_CHUNK:(i + 1) * BLOB_CHUNK]
            self.send(self.header(msg, member=member, frag=i, nfrags=n, aux=len(data),
                                  batch=batch, flags=flags), payload=chunk)
            if i % 16 == 15:
                time.sleep(0.002)  # let the NICs' pipelines keep up

    def distribute(self, params: bytes, shards: dict[int, bytes], test: bytes, m_train: int) -> None:
        """s110/s130: model, then each member's shard, then DATA_DONE; re-send on NACK."""
        for attempt in range(4):
            flags = int(TokenFlags.RESEND) if attempt else 0
            self.send_blob(TokenMsg.MODEL, 0, params, flags=flags)
            for s, blob in shards.items():
                if s != self.seq:
                    self.send_blob(TokenMsg.DATA, s, blob, flags=flags)
            self.send_blob(TokenMsg.DATA, 0, test, flags=flags)
            self.send(self.header(TokenMsg.DATA_DONE, aux=m_train, count=len(self.roster)))
            acks: dict[int, int] = {}
            deadline = time.monotonic() + self.args.ack_timeout
            while time.monotonic() < deadline and len(acks) < len(self.roster) - 1:
                got = self.next_frame(0.1)
                if got and got[0].msg_type == TokenMsg.DATA_ACK:
                    acks[got[0].sender] = got[0].aux
            missing = [s for s in self.roster if s != self.seq and acks.get(s, 1) != 0]
            self.log("distributed", attempt=attempt, bytes=len(params) + sum(map(len, shards.values())),
                     missing=missing)
            if not missing:
                return
        raise TokenError(f"members {missing} never got the model and data")

    def receive_distribution(self) -> tuple[bytes, bytes, bytes, int]:
        """Collect MODEL, own DATA and the test set until DATA_DONE; ack."""
        blobs: dict[tuple[int, int], dict[int, bytes]] = {}
        sizes: dict[tuple[int, int], tuple[int, int]] = {}
        deadline = time.monotonic() + self.args.join_timeout
        while time.monotonic() < deadline:
            got = self.next_frame(0.5)
            if got is None:
                continue
            hdr, _src, rest = got
            if hdr.msg_type in (TokenMsg.MODEL, TokenMsg.DATA):
                key = (hdr.msg_type, hdr.member)
                if hdr.msg_type == TokenMsg.DATA and hdr.member not in (0, self.seq):
                    continue  # s130: keep only the data of my own sequence number
                blobs.setdefault(key, {})[hdr.frag] = bytes(rest)
                sizes[key] = (hdr.nfrags, hdr.aux)
            elif hdr.msg_type == TokenMsg.DATA_DONE:
                want = [(TokenMsg.MODEL, 0), (TokenMsg.DATA, self.seq), (TokenMsg.DATA, 0)]
                missing = 0
                out = []
                for key in want:
                    nf, total = sizes.get(key, (1, -1))
                    have = blobs.get(key, {})
                    missing += sum(1 for i in range(nf) if i not in have)
                    if total >= 0 and not missing:
                        out.append(b"".join(have[i] for i in range(nf))[:total])
                if not missing and len(out) == 3:
                    return out[0], out[1], out[2], hdr.aux  # acked once the model is built
                self.send(self.header(TokenMsg.DATA_ACK, aux=max(1, missing)))
            elif hdr.msg_type == TokenMsg.TOKEN:
                self.pending.append(got)
                raise TokenError("training started before this node got its data")
        raise TokenError("no model/data from the initiator")

    # ------------------------------------------------------------------ training setup
    def setup_training(self, params: bytes, data: bytes, test: bytes, m_train: int) -> None:
        import torch

        from hosts import training as tr

        torch.set_num_threads(1)
        self.model = load_factory(self.args.model)()
        self.worker_model = load_factory(self.args.model)()
        self.like = tr.parameter_arrays(self.model)
        vec = np.frombuffer(params, dtype=np.float32)
        tr.set_parameters(self.model, tr.unflatten(vec.copy(), self.like))
        self.nvalues = int(vec.size)
        self.nfrags = -(-self.nvalues // TOKEN_VALUES)
        if self.nfrags > TOKEN_MAX_FRAGS:
            raise TokenError(f"{self.nvalues} parameters need {self.nfrags} fragments, the NIC "
                             f"holds {TOKEN_MAX_FRAGS} x {TOKEN_VALUES}")
        self.x, self.y = decode_examples(data)
        self.test = decode_examples(test)
        world = len(self.roster)
        per_node = m_train // world
        self.batches_per_epoch = max(1, per_node // self.args.batch_size)
        self.total_batches = self.batches_per_epoch * self.args.epochs
        if self.args.batches:
            self.total_batches = min(self.total_batches, self.args.batches)
        self.log("ready", examples=len(self.y), values=self.nvalues, frags=self.nfrags,
                 batches_per_epoch=self.batches_per_epoch)

    def start_compute(self) -> None:
        self.compute_thread = threading.Thread(target=self.compute_loop, daemon=True)
        self.compute_thread.start()

    def compute_loop(self) -> None:
        """Compute thread: gradient of the latest batch it is told, quantized (s140).

        It works on its own copy of the model, taken under the lock the updates hold, so
        an update of the network thread never races a backward pass."""
        from hosts import training as tr

        while True:
            b = self.work.get()
            while not self.work.empty():  # only the newest batch matters
                b = self.work.get()
            if b is None:
                return
            if b != self.batch:
                continue
            t = time.monotonic()
            with self.model_lock:
                tr.set_parameters(self.worker_model, tr.parameter_arrays(self.model))
            epoch, i = divmod(b, self.batches_per_epoch)
            if self.args.gradient:  # a given gradient (experiments.compare)
                vec = np.load(self.args.gradient).astype(np.float32)
                if vec.size != self.nvalues:
                    raise TokenError(f"--gradient has {vec.size} values, the model {self.nvalues}")
                grads = tr.unflatten(vec, self.like)
            else:
                xb, yb = tr.batches(self.x, self.y, self.args.batch_size, epoch, seed=self.seq)[i]
                grads = tr.compute_gradients(self.worker_model, xb, yb)
                vec = tr.flatten(grads)
            spent = time.monotonic() - t
            if self.args.compute_fixed > 0:
                time.sleep(max(0.0, self.args.compute_fixed * self.args.slowdown - spent))
            elif self.args.slowdown > 1:
                time.sleep(spent * (self.args.slowdown - 1))
            q = self.quantize(vec)
            if self.args.grad_json:
                write_json_gradients(Path(self.args.grad_json) / f"grad-b{b}-s{self.seq}.json",
                                     b, self.seq, grads)
            with self.ready_lock:
                self.timing.compute += time.monotonic() - t
                if b == self.batch:
                    self.ready = (b, q, time.monotonic())
                    self.ready_event.set()

    def quantize(self, vec: np.ndarray) -> Any:
        world = max(1, len(self.roster))
        try:
            return quantize(vec, self.args.scale_bits, world)
        except FixedPointOverflow:
            bound = max_abs_q(world) / 2.0**self.args.scale_bits
            self.stats["clipped"] += int(np.count_nonzero(np.abs(vec) > bound))
            return quantize(np.clip(vec, -bound, bound), self.args.scale_bits, world)

    # ------------------------------------------------------------------ batch end
    def read_nic(self, batch: int) -> tuple[np.ndarray, list[int]]:
        """READ every fragment of ``batch`` from the NIC: sums (int64) and bitmaps."""
        sums = np.zeros(self.nfrags * TOKEN_VALUES, dtype=np.int64)
        bitmaps = [-1] * self.nfrags
        for attempt in range(5):
            todo = [f for f in range(self.nfrags) if bitmaps[f] < 0]
            if not todo:
                break
            for f in todo:
                last = int(TokenFlags.LAST) if f == self.nfrags - 1 else 0
                self.send(self.header(TokenMsg.READ, batch=batch, frag=f, nfrags=self.nfrags,
                                      flags=last))
            deadline = time.monotonic() + 1.0 + attempt
            while any(bitmaps[f] < 0 for f in todo) and time.monotonic() < deadline:
                frame = self.link.recv(0.2)
                if frame is None:
                    continue
                try:
                    _d, src, hdr, rest = decode_token(frame)
                except TokenDecodeError:
                    continue
                if hdr.msg_type == TokenMsg.READ_REPLY and hdr.batch == batch:
                    if 0 <= hdr.frag < self.nfrags:
                        sums[hdr.frag * TOKEN_VALUES:(hdr.frag + 1) * TOKEN_VALUES] = token_values(rest)
                        bitmaps[hdr.frag] = hdr.bitmap
                else:
                    self.pending.append((hdr, src, rest))
        if any(b < 0 for b in bitmaps):
            raise TokenError(f"the NIC did not answer the read-out of batch {batch}")
        return sums, bitmaps

    def finish_batch(self, final_bitmap: int) -> None:
        """s160: read the sums of the current batch, w <- w - lr * sum / n; next batch."""
        from hosts import training as tr

        t = time.monotonic()
        b = self.batch
        sums, bitmaps = self.read_nic(b)
        counts = np.repeat([bin(m).count("1") for m in bitmaps], TOKEN_VALUES)
        n = bin(final_bitmap).count("1")
        self.stats["incomplete_frags"] += sum(1 for m in bitmaps if m != final_bitmap)
        if self.args.dump:
            d = Path(self.args.dump)
            np.save(d / f"sum-b{b}-s{self.seq}.npy", sums[: self.nvalues])
            (d / f"bitmap-b{b}-s{self.seq}.json").write_text(json.dumps(bitmaps))
        scale = 2.0 ** -self.args.scale_bits
        with np.errstate(divide="ignore", invalid="ignore"):
            mean = np.where(counts > 0, sums * scale / np.maximum(counts, 1), 0.0)
        update = tr.unflatten(mean[: self.nvalues].astype(np.float32), self.like)
        if self.args.grad_json:
            write_json_gradients(Path(self.args.grad_json) / f"mean-b{b}-s{self.seq}.json",
                                 b, self.seq, update, n=n)
        with self.model_lock:
            tr.apply_gradients(self.model, update, lr=self.args.lr)
        self.stats["batches"] += 1
        self.stats["gradients_accumulated"] += n
        self.timing.accumulate += time.monotonic() - t
        self.timing.batches += 1
        rec: dict[str, Any] = {"batch": b, "n": n, "contributors": bitmap_members(final_bitmap),
                               "active": sorted(self.active)}
        with self.ready_lock:
            self.batch = b + 1
            self.ready = None
            self.ready_event.clear()
        self.bitmap = 0
        if (b + 1) % self.batches_per_epoch == 0:
            rec["epoch"] = (b + 1) // self.batches_per_epoch
            rec["accuracy"] = self.evaluate()
        self.log("batch", **rec)
        if self.batch < self.total_batches and not self.standby:
            self.work.put(self.batch)

    def evaluate(self) -> float:
        import torch

        assert self.test is not None
        with torch.no_grad():
            pred = self.model(self.test[0]).argmax(1)
        return round(float((pred == self.test[1]).float().mean()), 4)

    # ------------------------------------------------------------------ token
    def next_active(self, after: int) -> int:
        order = sorted(self.active)
        later = [s for s in order if s > after]
        return later[0] if later else order[0]

    def coverage(self, bitmap: int) -> float:
        act = [s for s in self.active]
        return sum(1 for s in act if bitmap >> s & 1) / max(1, len(act))

    def broadcast_gradient(self, q: Any) -> None:
        """s134: the gradient, TOKEN_VALUES per GRAD frame; the own NIC adds it too."""
        t = time.monotonic()
        if self.args.dump:
            np.save(Path(self.args.dump) / f"sent-b{self.batch}-s{self.seq}.npy", q)
        padded = np.zeros(self.nfrags * TOKEN_VALUES, dtype=np.int32)
        padded[: len(q)] = q
        for f in range(self.nfrags):
            self.send(self.header(TokenMsg.GRAD, batch=self.batch, frag=f, nfrags=self.nfrags,
                                  aux=self.args.batch_size),
                      values=padded[f * TOKEN_VALUES:(f + 1) * TOKEN_VALUES])
            if f % 32 == 31:
                time.sleep(0.001)
        self.bitmap |= 1 << self.seq
        self.stats["grads_sent"] += 1
        self.stats["grad_frames"] += self.nfrags
        self.timing.broadcast += time.monotonic() - t
        self.log("grad", batch=self.batch, frames=self.nfrags)

    def hold_token(self) -> None:
        """s133-s135: broadcast if the gradient is ready, then pass the token on."""
        self.holder = False
        sent = False
        if not (self.bitmap >> self.seq & 1):
            if self.ready is None:
                self.ready_event.wait(self.args.dwell)
            with self.ready_lock:
                ready = self.ready if self.ready and self.ready[0] == self.batch else None
            if ready is not None:
                self.timing.token_wait += time.monotonic() - ready[2]
                self.broadcast_gradient(ready[1])
                sent = True
        self.log("hold", pass_no=self.acted_pass, batch=self.batch, sent=sent)
        bitmap = self.bitmap
        if self.coverage(bitmap) >= self.args.cutoff - 1e-9:
            self.end_batch_as_holder(bitmap)
            return
        self.pass_token(self.batch, bitmap, aux=0)

    def pass_token(self, batch: int, bitmap: int, aux: int) -> None:
        nxt = self.next_active(self.seq)
        self.last_pass += 1
        hdr = self.header(TokenMsg.TOKEN, next_holder=nxt, batch=batch, pass_no=self.last_pass,
                          bitmap=bitmap, aux=aux)
        self.last_broadcast = self.send(hdr)
        self.stats["tokens_passed"] += 1
        if nxt == self.seq:  # alone: hold it again
            self.holder = True

    def end_batch_as_holder(self, bitmap: int) -> None:
        """The gradients cover the cutoff: finish the batch, let standby nodes rejoin,
        then open the next batch (or stop after the last)."""
        self.finish_batch(bitmap)
        if self.batch >= self.total_batches:
            self.send(self.header(TokenMsg.STOP, batch=self.batch, bitmap=bitmap))
            self.stop("finished")
            return
        if len(self.active) < len(self.roster) and self.batch >= self.next_rejoin_query:
            self.rejoin_round(bitmap)
        self.pass_token(self.batch, 0, aux=bitmap)

    def rejoin_round(self, final_bitmap: int) -> None:
        """After a batch: standby members answer REJOIN_QUERY, get REJOIN and the model."""
        from hosts import training as tr

        self.send(self.header(TokenMsg.REJOIN_QUERY, batch=self.batch, aux=final_bitmap))
        self.next_rejoin_query = self.batch + self.args.rejoin_every
        repliers: list[int] = []
        deadline = time.monotonic() + self.args.rejoin_window
        while time.monotonic() < deadline:
            got = self.next_frame(0.05)
            if got is None:
                continue
            if got[0].msg_type == TokenMsg.REJOIN_REPLY:
                if got[0].sender not in self.active and got[0].sender in self.roster:
                    repliers.append(got[0].sender)
            else:
                self.pending.append(got)
        if not repliers:
            return
        self.next_rejoin_query = self.batch + 1
        params = tr.flatten(tr.parameter_arrays(self.model)).tobytes()
        for s in sorted(set(repliers)):
            self.send(self.header(TokenMsg.REJOIN, member=s, batch=self.batch))
            self.active.add(s)
            self.log("rejoin", member=s, batch=self.batch)
        self.send_blob(TokenMsg.MODEL, 0, params, batch=self.batch, flags=int(TokenFlags.RESEND))
        # the token moves on only once the rejoined nodes' NICs accept this batch
        waiting = set(repliers)
        deadline = time.monotonic() + 3.0
        while waiting and time.monotonic() < deadline:
            got = self.next_frame(0.05)
            if got is None:
                continue
            if got[0].msg_type == TokenMsg.DATA_ACK and got[0].batch == self.batch:
                waiting.discard(got[0].sender)
            elif got[0].msg_type != TokenMsg.DATA_ACK:
                self.pending.append(got)

    def stop(self, reason: str) -> None:
        self.done = True
        if reason == "finished" and self.active and self.seq == min(self.active):
            self.save_model()
        self.work.put(None)
        self.log("stop", reason=reason, batch=self.batch)

    def save_model(self) -> str | None:
        if not self.args.save:
            return None
        import torch

        torch.save(self.model.state_dict(), self.args.save)
        return self.args.save

    # ------------------------------------------------------------------ frame handling
    def on_frame(self, hdr: TokenHeader, src: bytes, rest: memoryview) -> None:
        m = hdr.msg_type
        if m == TokenMsg.TOKEN:
            if self.standby or hdr.pass_no < self.last_pass:
                return
            # a resend of the last pass (s136): act only if it names me and I have not yet
            if hdr.pass_no == self.last_pass and (hdr.next_holder != self.seq
                                                  or self.acted_pass == hdr.pass_no):
                return
            self.last_pass = hdr.pass_no
            if hdr.batch > self.batch + 1:
                # a whole batch went by without this node (it froze): its NIC dropped that
                # batch's gradients, so its model cannot follow; stand by and rejoin
                self.standby = True
                self.holder = False
                self.log("standby", batch=self.batch, reason=f"behind: token at batch {hdr.batch}")
                return
            if hdr.batch > self.batch:
                self.finish_batch(hdr.aux)
            if hdr.batch == self.batch:
                self.bitmap = hdr.bitmap
            if hdr.next_holder == self.seq:
                self.acted_pass = hdr.pass_no
                self.holder = True
        elif m == TokenMsg.NODE_LOST:
            self.stats["lost_seen"] += 1
            lost = hdr.member
            self.active.discard(lost)
            self.last_pass = max(self.last_pass, hdr.pass_no)
            declared_by_me = hdr.sender == self.seq
            if declared_by_me:
                self.stats["lost_declared"] += 1
            self.log("lost", member=lost, by=hdr.sender, silence_s=hdr.aux / 1e6, batch=self.batch)
            if lost == self.seq:
                self.standby = True
                self.holder = False
                self.log("standby", batch=self.batch)
                return
            if len(self.active) < self.args.min_nodes and self.seq == min(self.active):
                self.send(self.header(TokenMsg.ABNORMAL, batch=self.batch, count=len(self.active)))
                path = self.save_model()
                self.log("abnormal", active=sorted(self.active), saved=path,
                         message=f"too many nodes left: {len(self.active)} active, fewer than "
                                 f"--min-nodes {self.args.min_nodes}; model saved, training stopped")
                self.exit_code = EXIT_ABNORMAL
                self.stop("abnormal")
                return
            if hdr.next_holder == self.seq:
                self.holder = True
        elif m == TokenMsg.RESEND_DUE:
            if self.last_broadcast is not None and not self.standby:
                b = bytearray(self.last_broadcast)
                b[14 + 1] |= int(TokenFlags.RESEND)
                self.link.send(bytes(b))
                self.stats["resends"] += 1
                self.log("resend", pass_no=self.last_pass)
        elif m == TokenMsg.REJOIN_QUERY:
            self.next_rejoin_query = hdr.batch + self.args.rejoin_every
            if self.standby:
                self.send(self.header(TokenMsg.REJOIN_REPLY, batch=self.batch))
            elif hdr.batch > self.batch:
                # the batch ended at the holder: finish it here too
                self.finish_batch(hdr.aux)
        elif m == TokenMsg.DATA_DONE:
            self.send(self.header(TokenMsg.DATA_ACK, aux=0))  # an initiator re-sending
        elif m == TokenMsg.REJOIN:
            self.active.add(hdr.member)
            if hdr.member == self.seq and self.standby:
                self.rejoin_model(hdr.batch)
        elif m == TokenMsg.ABNORMAL:
            self.log("abnormal", by=hdr.sender, active=hdr.count,
                     message="the coordinator reported too many departures; training stopped")
            self.exit_code = EXIT_ABNORMAL
            self.stop("abnormal")
        elif m == TokenMsg.STOP:
            if not self.standby and hdr.batch > self.batch:
                self.finish_batch(hdr.bitmap)
            self.stop("finished")

    def rejoin_model(self, batch: int) -> None:
        """Standby node taken back: adopt the broadcast model and the current batch."""
        from hosts import training as tr

        chunks: dict[int, bytes] = {}
        total = nf = -1
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and (nf < 0 or len(chunks) < nf):
            frame = self.link.recv(0.2)
            if frame is None:
                continue
            try:
                _d, src, hdr, rest = decode_token(frame)
            except TokenDecodeError:
                continue
            if hdr.msg_type == TokenMsg.MODEL:
                chunks[hdr.frag] = bytes(rest)
                nf, total = hdr.nfrags, hdr.aux
            else:
                self.pending.append((hdr, src, rest))
        if nf < 0 or len(chunks) < nf:
            self.log("rejoin_failed", reason="model not received")
            return
        vec = np.frombuffer(b"".join(chunks[i] for i in range(nf))[:total], dtype=np.float32)
        with self.model_lock:
            tr.set_parameters(self.model, tr.unflatten(vec.copy(), self.like))
        # move the NIC's accumulation window to this batch (READ ... LAST of batch - 1)
        if batch > 0:
            self.send(self.header(TokenMsg.READ, batch=batch - 1, frag=0, flags=int(TokenFlags.LAST)))
        with self.ready_lock:
            self.batch = batch
            self.ready = None
            self.ready_event.clear()
        self.bitmap = 0
        self.standby = False
        self.active.add(self.seq)
        self.stats["rejoined"] += 1
        self.send(self.header(TokenMsg.DATA_ACK, batch=batch))
        self.log("rejoined", batch=batch)
        self.work.put(batch)

    # ------------------------------------------------------------------ main loop
    def train(self) -> None:
        self.start_compute()
        if self.batch < self.total_batches:
            self.work.put(self.batch)
        if self.seq == 1 and self.args.start_signal:
            # a harness measuring the training alone starts it when its counters are read
            # (frames keep being served meanwhile); bounded by --max-time
            go = Path(self.args.start_signal)
            limit = time.monotonic() + self.args.max_time
            while not go.exists() and time.monotonic() < limit:
                got = self.next_frame(self.args.tick)
                if got is not None:
                    self.on_frame(*got)
        if self.seq == 1:
            self.holder = True  # s131: node 1 creates the token
            self.acted_pass = 0
        deadline = time.monotonic() + self.args.max_time
        while not self.done:
            if time.monotonic() > deadline:
                self.log("timeout", batch=self.batch)
                self.exit_code = 5
                self.stop("max-time")
                break
            if self.holder and not self.standby:
                self.hold_token()
                continue
            got = self.next_frame(self.args.tick)
            if got is not None:
                self.on_frame(*got)


def write_json_gradients(path: Path, batch: int, seq: int, arrays: list[np.ndarray],
                         n: int | None = None) -> None:
    """The seed's JSON gradient interface (s140, item 37): one file per batch and node,
    ``{"batch", "node", ["n",] "gradients": [{"shape", "values"}, ...]}`` in
    ``model.parameters()`` order (own gradients ``grad-*``, averaged sums ``mean-*``)."""
    doc: dict[str, Any] = {"batch": batch, "node": seq,
                           "gradients": [{"shape": list(a.shape), "values": a.ravel().tolist()}
                                         for a in arrays]}
    if n is not None:
        doc["n"] = n
    path.write_text(json.dumps(doc))


def read_json_gradients(path: str | Path) -> list[np.ndarray]:
    """Arrays back from a file of :func:`write_json_gradients`."""
    doc = json.loads(Path(path).read_text())
    return [np.asarray(g["values"], dtype=np.float32).reshape(g["shape"]) for g in doc["gradients"]]


def bitmap_members(bitmap: int) -> list[int]:
    """Sequence numbers whose bit is set."""
    return [i for i in range(32) if bitmap >> i & 1]


def encode_examples(x: Any, y: Any) -> bytes:
    """Digits examples -> bytes: 64 pixel levels (0..16) + label per example, uint8."""
    xs = np.rint(np.asarray(x).reshape(len(y), -1) * 16).astype(np.uint8)
    return np.concatenate([xs, np.asarray(y, dtype=np.uint8)[:, None]], axis=1).tobytes()


def decode_examples(data: bytes) -> tuple[Any, Any]:
    """Inverse of :func:`encode_examples`: tensors (N, 1, 8, 8) float in [0, 1], labels."""
    import torch

    a = np.frombuffer(data, dtype=np.uint8).reshape(-1, 65)
    x = torch.from_numpy(a[:, :64].astype(np.float32).reshape(-1, 1, 8, 8) / 16.0)
    y = torch.from_numpy(a[:, 64].astype(np.int64))
    return x, y


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
        data = tr.load_digits_split(seed=args.seed)
        model = load_factory(args.model)()
        params = tr.flatten(tr.parameter_arrays(model)).tobytes()
        world = len(node.roster)
        shards = {s: encode_examples(*tr.worker_shard(data, s - 1, world)) for s in node.roster}
        test = encode_examples(data.x_test, data.y_test)
        node.distribute(params, shards, test, len(data.y_train))
        node.setup_training(params, shards[1], test, len(data.y_train))
    else:
        node.form_as_member()
        if node.done:
            summary(node)
            return node.exit_code
        params, mine, test, m_train = node.receive_distribution()
        node.setup_training(params, mine, test, m_train)
        node.send(node.header(TokenMsg.DATA_ACK, aux=0))
    node.train()
    node.work.put(None)
    node.compute_thread.join(timeout=10)
    summary(node)
    return node.exit_code


def summary(node: Node) -> None:
    """The last stdout line: counters and timing."""
    t = node.timing
    print(json.dumps({"event": "summary", "node": node.seq, "exit": node.exit_code,
                      "batch": node.batch, "active": sorted(node.active),
                      "standby": node.standby, "stats": node.stats,
                      "timing": {"compute": t.compute, "token_wait": t.token_wait,
                                 "broadcast": t.broadcast, "accumulate": t.accumulate,
                                 "batches": t.batches},
                      "frames_sent": node.link.sent, "frames_received": node.link.received,
                      "accuracy": node.evaluate() if node.model is not None and node.test else None}),
          flush=True)


def run_intruder(args: argparse.Namespace) -> int:
    """Send forged protocol frames from a non-member MAC (tests the NICs' s61 filter)."""
    link = NicLink(args.iface)
    rng = np.random.default_rng(7)
    sent = 0
    end = time.monotonic() + args.duration
    while time.monotonic() < end and sent < args.count:
        for sender in range(1, 5):
            for batch in range(0, 4):
                vals = rng.integers(-1000, 1000, TOKEN_VALUES).astype(np.int32)
                link.send(encode_token(TokenHeader(int(TokenMsg.GRAD), sender=sender, batch=batch,
                                                   frag=0, nfrags=1), link.mac, values=vals))
                sent += 1
        link.send(encode_token(TokenHeader(int(TokenMsg.TOKEN), sender=1, next_holder=2,
                                           batch=0, pass_no=10**6), link.mac))
        sent += 1
        time.sleep(0.05)
    print(json.dumps({"event": "intruder", "sent": sent}), flush=True)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """Command line of a node."""
    p = argparse.ArgumentParser(prog="python -m hosts.token.node", description=__doc__.split("\n\n")[0])
    p.add_argument("--iface", required=True, help="the interface toward the node's NIC")
    p.add_argument("--initiator", action="store_true", help="this node holds model and data (s110)")
    p.add_argument("--intrude", action="store_true",
                   help="not a node: send forged GRAD/TOKEN frames (tests)")
    p.add_argument("--count", type=int, default=200, help="--intrude: frames at most")
    p.add_argument("--duration", type=float, default=5.0, help="--intrude: seconds at most")
    p.add_argument("--expect", type=int, default=0, help="initiator: close formation once this "
                   "many nodes (itself included) are in and 0.3 s passed quietly")
    p.add_argument("--form-silence", type=float, default=2.0, help="silence that closes formation (s)")
    p.add_argument("--form-max", type=float, default=20.0, help="formation lasts at most (s)")
    p.add_argument("--join-timeout", type=float, default=60.0, help="member: wait for roster/data (s)")
    p.add_argument("--ack-timeout", type=float, default=5.0)
    p.add_argument("--model", default="hosts.training:make_model",
                   help="module:factory of the model (its parameters are what is trained)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--batches", type=int, default=0, help="stop after this many batches (0: epochs)")
    p.add_argument("--lr", type=float, default=0.3)
    p.add_argument("--scale-bits", type=int, default=16, help="fixed point: q = round(g * 2^S)")
    p.add_argument("--cutoff", type=float, default=0.9,
                   help="end a batch once gradients cover this fraction of its data (item 38)")
    p.add_argument("--dwell", type=float, default=0.02,
                   help="a holder without a gradient waits at most this long before passing (s)")
    p.add_argument("--wait-unit", type=float, default=1.0, help="t of the staggered timeouts (s)")
    p.add_argument("--tick", type=float, default=0.05, help="TICK period to the NIC (s)")
    p.add_argument("--rejoin-window", type=float, default=0.3,
                   help="how long a REJOIN_QUERY waits for standby nodes (s)")
    p.add_argument("--rejoin-every", type=int, default=5,
                   help="batches between two REJOIN_QUERYs that nobody answered")
    p.add_argument("--min-nodes", type=int, default=2,
                   help="fewer active members: abnormal state, save the model, stop")
    p.add_argument("--slowdown", type=float, default=1.0, help="compute this many times slower")
    p.add_argument("--compute-fixed", type=float, default=0.0,
                   help="hold compute at this many seconds per batch (bench; x slowdown)")
    p.add_argument("--max-time", type=float, default=600.0)
    p.add_argument("--start-signal", default="", metavar="FILE",
                   help="node 1 creates the token only once FILE exists (for harnesses that "
                        "measure the training alone)")
    p.add_argument("--save", default="", help="where the coordinator saves the model on ABNORMAL/finish")
    p.add_argument("--grad-json", default="", metavar="DIR",
                   help="also write every own gradient and every averaged sum as JSON (the "
                        "seed's gradient files)")
    p.add_argument("--gradient", default="", metavar="FILE",
                   help="send this float32 .npy (the model's size) as every batch's gradient "
                        "instead of computing one")
    p.add_argument("--dump", default="", help="directory: sent gradients and NIC sums per batch (tests)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    args = build_parser().parse_args(argv)
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
