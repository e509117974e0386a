"""The token protocol of a node (token: formation, token passing, failures).

:class:`TokenProtocol`, the node's network-thread state machine:

* formation: the initiator opens it (FORM_START), records the answers in
  order and broadcasts the roster; members answer and learn their number;
* token passing: node 1 creates the token; a holder broadcasts its ready
  gradient (GRAD frames) or waits at most ``--dwell``, then passes the token to the next
  active member, or closes the batch once the gradients cover ``--cutoff``;
  a gradient longer than the NIC holds goes one chunk per token round: the protocol's
  ``batch`` is then a step (batch x chunks + chunk, :mod:`hosts.token.training`);
* failures: re-sending the last broadcast on RESEND_DUE, NODE_LOST
  (standby when it names this node), the rejoin round at a batch boundary
  (REJOIN_QUERY / REJOIN_REPLY / REJOIN + MODEL), ABNORMAL below ``--min-nodes``, STOP.

The per-frame handling is :meth:`TokenProtocol.on_frame`, the network thread's loop
:meth:`TokenProtocol.train` (the training loop's :class:`hosts.token.sync.TokenSync`
runs it beside the compute steps).
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hosts.token.data import write_json_gradients
from hosts.token.link import FrameIO
from wire.token import (
    TOKEN_MAX_MEMBERS,
    TOKEN_VALUES,
    TokenDecodeError,
    TokenFlags,
    TokenHeader,
    TokenMsg,
    decode_token,
)

if TYPE_CHECKING:
    from hosts.token.training import Timing

EXIT_ABNORMAL = 3
EXIT_NOT_ADMITTED = 4
ROSTER_REPEATS = 3      # the roster (and STOP, ABNORMAL) go out this often: lost frames
LINGER_S = 1.5         # after STOP: answer late NACKs until this long without one ...
LINGER_MAX_S = 6.0     # ... at most this long
REPAIR_KEEP = 4         # steps whose own broadcast a node keeps for re-sends (NACK)


class TokenProtocol(FrameIO):
    """Mixin of :class:`hosts.token.node.Node`: formation, token, failures, main loop.

    Owns ``seq``, ``roster``, ``active``, ``standby``, ``holder``, ``bitmap``,
    ``last_pass``, ``acted_pass``, ``last_broadcast``, ``next_rejoin_query``, ``done``,
    ``exit_code``. Relies on the node's other parts: ``finish_batch``, ``save_model``,
    ``parameters_blob``, ``adopt_parameters`` and the compute step's
    ``work``/``ready`` (:class:`hosts.token.training.Training`), ``send_blob``
    (:class:`hosts.token.data.Distribution`)."""

    roster: dict[int, bytes]
    active: set[int]
    holder: bool
    bitmap: int
    acted_pass: int
    last_broadcast: bytes | None
    next_rejoin_query: int
    done: bool
    exit_code: int
    stats: dict[str, int]
    timing: Timing
    train_t0: float
    train_cpu0: float
    nfrags: int
    chunks: int
    total_batches: int
    total_steps: int
    ready: tuple[int, Any, float] | None
    ready_lock: threading.Lock
    ready_event: threading.Event
    work: queue.Queue

    # ------------------------------------------------------------------ formation
    def configure_nic(self) -> None:
        t_us = int(self.args.wait_unit * 1e6)
        # member: how often the NIC asks for a re-send of a silent pass before the others'
        # wait for NODE_LOST (docs/token.md, "Watchdog"; 0 would mean the NIC's default, 3)
        self.send(TokenHeader(msg_type=int(TokenMsg.CONFIG), aux=t_us, member=self.args.resends))

    def form_as_initiator(self) -> None:
        """Formation: open it, record answers in order, close on silence."""
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
        for _ in range(ROSTER_REPEATS):  # repeats: a lost ROSTER frame would leave a NIC short
            for i, mac in enumerate(order, start=1):
                flags = int(TokenFlags.LAST) if i == n else 0
                self.send(self.header(TokenMsg.ROSTER, member=i, mac=mac, count=n, flags=flags))
            time.sleep(0.02)
        self.roster = {i: m for i, m in enumerate(order, start=1)}
        self.active = set(self.roster)
        self.log("formed", members=n, roster={i: m.hex(":") for i, m in self.roster.items()})

    def form_as_member(self) -> None:
        """Answer FORM_START (and announce once at start); learn the roster."""
        deadline = time.monotonic() + self.args.join_timeout
        self.send(self.header(TokenMsg.FORM_REPLY))
        answered = False
        roster: dict[int, bytes] = {}
        last_reply = time.monotonic()
        while time.monotonic() < deadline:
            got = self.next_frame(0.2)
            if not roster and time.monotonic() - last_reply > 0.5:
                # a lost answer would leave this node out: answer again until the roster
                self.send(self.header(TokenMsg.FORM_REPLY))
                last_reply = time.monotonic()
            if got is None:
                continue
            hdr, _src, _ = got
            if hdr.msg_type == TokenMsg.FORM_START and not answered:
                self.send(self.header(TokenMsg.FORM_REPLY))
                answered = True
            elif hdr.msg_type == TokenMsg.ROSTER:
                roster[hdr.member] = bytes(hdr.mac)
                if hdr.flags & TokenFlags.LAST:
                    if len(roster) < hdr.count:
                        continue  # a ROSTER frame was lost: the initiator repeats the roster
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

    # ------------------------------------------------------------------ token
    def next_active(self, after: int) -> int:
        order = sorted(self.active)
        later = [s for s in order if s > after]
        return later[0] if later else order[0]

    def coverage(self, examples: int) -> float:
        """The cutoff: the share of the batch's data in the gradients so far: examples
        covered (the token's count) over every active member's batch."""
        return examples / max(1, self.args.batch_size * len(self.active))

    def broadcast_gradient(self, q: Any, examples: int) -> None:
        """The gradient (the current chunk of it), TOKEN_VALUES per GRAD frame; the
        own NIC adds it too."""
        t = time.monotonic()
        chunk = self.batch % self.chunks
        if self.args.dump and chunk == 0:
            np.save(Path(self.args.dump) / f"sent-b{self.batch // self.chunks}-s{self.seq}.npy", q)
        f0, f1 = self.chunk_frags(chunk)
        nfrags = f1 - f0
        padded = np.zeros(nfrags * TOKEN_VALUES, dtype=np.int32)
        part = q[f0 * TOKEN_VALUES:f1 * TOKEN_VALUES]
        padded[: len(part)] = part
        for f in range(nfrags):
            self.send(self.header(TokenMsg.GRAD, batch=self.batch, frag=f, nfrags=nfrags,
                                  aux=examples),
                      values=padded[f * TOKEN_VALUES:(f + 1) * TOKEN_VALUES])
            if f % self.args.burst == self.args.burst - 1:
                time.sleep(0.001)  # no NIC or LAN queue overflows (lost frames cost re-sends)
        self.sent_steps[self.batch] = (padded, examples)  # for NACKs (loss recovery)
        for old in [b for b in self.sent_steps if b < self.batch - REPAIR_KEEP]:
            del self.sent_steps[old]
        self.bitmap |= 1 << self.seq
        self.examples += examples
        if chunk == 0:
            self.stats["grads_sent"] += 1
        self.stats["grad_frames"] += nfrags
        self.timing.broadcast += time.monotonic() - t
        self.log("grad", **self.where(), frames=nfrags)

    def hold_token(self) -> None:
        """Broadcast if the gradient is ready, then pass the token on."""
        self.holder = False
        sent = False
        partial = False
        if not (self.bitmap >> self.seq & 1) and self.contributes():
            if self.ready is None:
                self.ready_event.wait(self.args.dwell)
            with self.ready_lock:
                ready = self.ready if self.ready and self.ready[0] == self.batch else None
                part = self.partial if self.partial and self.partial[0] == self.batch else None
            if ready is None and part is not None and self.batch % self.chunks == 0 \
                    and self.coverage(self.examples + part[3]) >= self.args.cutoff - 1e-9:
                # the cutoff: this node's examples so far complete the cutoff's share of the
                # batch; the rest of its batch is dropped (not waited for)
                ready, partial = part, True
            if ready is not None:
                self.timing.token_wait += time.monotonic() - ready[2]
                if self.batch % self.chunks == 0:
                    self.batch_grad = ready  # the later chunks send the same vector
                if partial:
                    self.stats["partial_grads"] += 1
                    if self.args.grad_json:
                        from hosts import training as tr

                        tb = self.batch // self.chunks
                        write_json_gradients(Path(self.args.grad_json) / f"grad-b{tb}-s{self.seq}.json",
                                             tb, self.seq, tr.unflatten(ready[4], self.like))
                self.broadcast_gradient(ready[1], ready[3])
                sent = True
        self.log("hold", pass_no=self.acted_pass, **self.where(), sent=sent,
                 **({"partial": True} if partial else {}))
        bitmap = self.bitmap
        if self.step_complete(bitmap):
            self.end_batch_as_holder(bitmap)
            return
        self.pass_token(self.batch, bitmap, aux=0)

    def pass_token(self, batch: int, bitmap: int, aux: int, opening: bool = False) -> None:
        """Tell the NIC to pass the token (PASS); the NIC names the next
        active member from its roster registers and broadcasts the TOKEN (also back to
        this host, which takes it again when alone). ``nfrags``: the fragments this node
        broadcast in the step the TOKEN closes (the NICs check they got them all)."""
        self.last_pass += 1
        step = batch - 1 if opening else batch
        nfrags = self.frags_of(step) if step in self.sent_steps else 0
        examples = 0 if opening else self.examples
        hdr = self.header(TokenMsg.PASS, batch=batch, pass_no=self.last_pass, bitmap=bitmap, aux=aux,
                          nfrags=nfrags, mac=examples.to_bytes(6, "big"),
                          flags=int(TokenFlags.PREV) if opening else 0)
        self.last_broadcast = self.send(hdr)
        self.stats["tokens_passed"] += 1

    def frags_of(self, step: int) -> int:
        """Fragments of this node's broadcast in ``step`` (its chunk's size)."""
        f0, f1 = self.chunk_frags(step % self.chunks)
        return f1 - f0

    def on_nack(self, hdr: TokenHeader) -> None:
        """A NIC missed fragments [frag, nfrags) of this node's broadcast in step
        ``batch`` (its NIC saw a gap, or fewer than the TOKEN announced, or a host found
        them missing at read-out): re-send them, flag RESEND."""
        if hdr.member != self.seq or hdr.batch not in self.sent_steps:
            return
        padded, examples = self.sent_steps[hdr.batch]
        n = len(padded) // TOKEN_VALUES
        hi = min(hdr.nfrags, n)
        for i, f in enumerate(range(hdr.frag, hi)):
            self.send(self.header(TokenMsg.GRAD, batch=hdr.batch, frag=f, nfrags=n, aux=examples,
                                  flags=int(TokenFlags.RESEND)),
                      values=padded[f * TOKEN_VALUES:(f + 1) * TOKEN_VALUES])
            if i % self.args.burst == self.args.burst - 1:
                time.sleep(0.001)
        self.stats["repair_frames"] += max(0, hi - hdr.frag)

    def end_batch_as_holder(self, bitmap: int) -> None:
        """The gradients cover the cutoff: finish the batch (the step), let standby nodes
        rejoin (between batches only), then open the next step (or stop after the last)."""
        self.finish_batch(bitmap)
        if self.batch >= self.total_steps:
            # nfrags (of batch - 1, flag PREV): the NICs check the last broadcast's tail
            nfrags = self.frags_of(self.batch - 1) if self.batch - 1 in self.sent_steps else 0
            for _ in range(ROSTER_REPEATS):
                self.send(self.header(TokenMsg.STOP, batch=self.batch, bitmap=bitmap, nfrags=nfrags,
                                      flags=int(TokenFlags.PREV)))
            self.stop("finished")
            return
        if (len(self.active) < len(self.roster) and self.batch >= self.next_rejoin_query
                and self.batch % self.chunks == 0):
            self.rejoin_round(bitmap)
        self.pass_token(self.batch, 0, aux=bitmap, opening=True)

    def rejoin_round(self, final_bitmap: int) -> None:
        """After a batch: standby members answer REJOIN_QUERY, get REJOIN and the model."""
        self.send(self.header(TokenMsg.REJOIN_QUERY, batch=self.batch, aux=final_bitmap))
        self.next_rejoin_query = self.batch + self.args.rejoin_every * self.chunks
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
        self.next_rejoin_query = self.batch + self.chunks
        params = self.parameters_blob()
        for s in sorted(set(repliers)):
            self.send(self.header(TokenMsg.REJOIN, member=s, batch=self.batch))
            self.active.add(s)
            self.log("rejoin", member=s, **self.where())
        for _ in range(2):  # twice: a frame lost on the way would fail the rejoin
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

    def redistribute(self) -> None:
        """Redistribution (initiator, after a batch): the data of nodes declared lost goes again to
        the others (DATA tagged with the lost node's number, twice: lost frames); each
        active node adds every K-th example (K active nodes, its rank in them) to its
        shard. Batches per epoch stay as they are: the shards grow, the count does not."""
        for m in sorted(self.redistribute_due):
            if m in self.active or m not in self.shards:
                continue  # it came back meanwhile
            for _ in range(2):
                self.send_blob(TokenMsg.DATA, m, self.shards[m], batch=self.batch,
                               flags=int(TokenFlags.RESEND))
            self.adopt_lost_data(m, self.shards[m])
        self.redistribute_due.clear()

    def adopt_lost_data(self, member: int, blob: bytes) -> None:
        """Take this node's slice of a lost node's shard (redistribution)."""
        import torch

        from hosts.token.data import decode_examples, exact_encoding

        if member in self.redistributed or self.standby:
            return
        self.redistributed.add(member)
        order = sorted(self.active)
        if self.seq not in order:
            return
        x, y = decode_examples(blob, exact_encoding(self.args.data))
        k, n = order.index(self.seq), len(order)
        xs, ys = x[k::n], y[k::n]
        with self.ready_lock:
            self.x = torch.cat([self.x, xs])
            self.y = torch.cat([self.y, ys])
        self.log("redistributed", member=member, examples=len(ys), shard=len(self.y), **self.where())

    def on_data(self, hdr: TokenHeader, rest: memoryview) -> None:
        """A DATA frame during training: a piece of a lost node's shard (redistribution)."""
        m = hdr.member
        if m == 0 or m == self.seq or m in self.active or m in self.redistributed:
            return
        parts = self.redist_parts.setdefault(m, {})
        parts[hdr.frag] = bytes(rest)
        if len(parts) == hdr.nfrags:
            blob = b"".join(parts[i] for i in range(hdr.nfrags))[:hdr.aux]
            del self.redist_parts[m]
            self.adopt_lost_data(m, blob)

    def abnormal_standby(self) -> bool:
        """ABNORMAL: training stops; this node finishes its current data (the gradient its
        compute step is on, bounded by 2 t) and stands by. True if it finished."""
        finished = self.ready is not None or self.ready_event.wait(max(1.0, 2 * self.args.wait_unit))
        self.holder = False
        self.standby = True
        self.log("standby", reason="abnormal", finished_data=bool(finished), **self.where())
        return bool(finished)

    def stop(self, reason: str) -> None:
        self.done = True
        if reason == "finished" and self.active and self.seq == min(self.active):
            self.save_model()
        self.work.put(None)
        self.log("stop", reason=reason, **self.where())

    # ------------------------------------------------------------------ frame handling
    def on_token(self, hdr: TokenHeader) -> None:
        """The token passed on: follow its batch, take it when it names this node."""
        if self.standby or hdr.pass_no < self.last_pass:
            return
        # a resend of the last pass: act only if it names me and I have not yet
        if hdr.pass_no == self.last_pass and (hdr.next_holder != self.seq
                                              or self.acted_pass == hdr.pass_no):
            return
        self.last_pass = hdr.pass_no
        if hdr.batch > self.batch + 1:
            # a whole batch went by without this node (it froze): its NIC dropped that
            # batch's gradients, so its model cannot follow; stand by and rejoin
            self.standby = True
            self.holder = False
            self.log("standby", **self.where(), reason=f"behind: token at batch {hdr.batch}")
            return
        if hdr.batch > self.batch:
            self.finish_batch(hdr.aux)
        if hdr.batch == self.batch:
            self.bitmap = hdr.bitmap
            self.examples = int.from_bytes(bytes(hdr.mac), "big")
        if hdr.next_holder == self.seq:
            self.acted_pass = hdr.pass_no
            self.holder = True

    def on_node_lost(self, hdr: TokenHeader) -> None:
        """A node was declared lost: drop it from the roster; stand by if it is this one;
        stop the training when too few are left."""
        self.stats["lost_seen"] += 1
        lost = hdr.member
        again = lost not in self.active and lost != self.seq
        self.active.discard(lost)
        if again and hdr.sender != self.seq and self.holder:
            # tie-break: the NICs passed a second declaration of the same node only
            # because its declarer is nearer after it; it holds the token, not this node
            self.holder = False
            self.log("lost_tie", member=lost, winner=hdr.sender, **self.where())
        self.last_pass = max(self.last_pass, hdr.pass_no)
        declared_by_me = hdr.sender == self.seq
        if declared_by_me:
            self.stats["lost_declared"] += 1
        self.log("lost", member=lost, by=hdr.sender, silence_s=hdr.aux / 1e6, **self.where())
        if self.shards and lost in self.shards and lost != self.seq and not self.standby:
            self.redistribute_due.add(lost)
        if lost == self.seq:
            self.standby = True
            self.holder = False
            self.log("standby", **self.where())
            return
        if len(self.active) < self.args.min_nodes and self.seq == min(self.active):
            for _ in range(ROSTER_REPEATS):
                self.send(self.header(TokenMsg.ABNORMAL, batch=self.batch, count=len(self.active)))
            self.abnormal_standby()
            path = self.save_model()
            self.log("abnormal", active=sorted(self.active), saved=path,
                     message=f"too many nodes left: {len(self.active)} active, fewer than "
                             f"--min-nodes {self.args.min_nodes}; model saved, training stopped")
            self.exit_code = EXIT_ABNORMAL
            self.stop("abnormal")
            return
        if hdr.next_holder == self.seq:
            self.holder = True

    def on_frame(self, hdr: TokenHeader, src: bytes, rest: memoryview) -> None:
        """Dispatch one frame from the NIC by its message type."""
        m = hdr.msg_type
        if m == TokenMsg.TOKEN:
            self.on_token(hdr)
        elif m == TokenMsg.NODE_LOST:
            self.on_node_lost(hdr)
        elif m == TokenMsg.RESEND_DUE:
            if self.last_broadcast is not None and not self.standby:
                b = bytearray(self.last_broadcast)
                b[14 + 1] |= int(TokenFlags.RESEND)
                self.link.send(bytes(b))
                self.stats["resends"] += 1
                self.log("resend", pass_no=self.last_pass)
        elif m == TokenMsg.REJOIN_QUERY:
            self.next_rejoin_query = hdr.batch + self.args.rejoin_every * self.chunks
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
        elif m == TokenMsg.DATA:
            self.on_data(hdr, rest)
        elif m == TokenMsg.ABNORMAL:
            if self.done:
                return
            self.abnormal_standby()
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
        self.adopt_parameters(vec)
        # move the NIC's accumulation window to this batch (READ ... LAST of batch - 1)
        if batch > 0:
            self.send(self.header(TokenMsg.READ, batch=batch - 1, frag=0, flags=int(TokenFlags.LAST)))
        with self.ready_lock:
            self.batch = batch
            self.ready = None
            self.ready_event.clear()
        self.bitmap = 0
        self.examples = 0
        self.partial = None
        self.standby = False
        self.active.add(self.seq)
        self.stats["rejoined"] += 1
        self.send(self.header(TokenMsg.DATA_ACK, batch=batch))
        self.log("rejoined", **self.where())
        self.work.put(batch)

    # ------------------------------------------------------------------ main loop
    def train(self) -> None:
        import resource

        ru = resource.getrusage(resource.RUSAGE_SELF)
        self.train_cpu0 = ru.ru_utime + ru.ru_stime
        self.train_t0 = time.monotonic()
        if self.args.evals:
            self.log("train_start", cpu_s=round(self.train_cpu0, 3))
            self.emit_eval(0, 0)
        # the one training loop (hosts.token.sync) computes the steps put in ``work``
        if self.batch < self.total_steps:
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
            self.holder = True  # node 1 creates the token
            self.acted_pass = 0
        deadline = time.monotonic() + self.args.max_time
        while not self.done:
            if time.monotonic() > deadline:
                # why it hangs, said plainly: a NIC that restarted lost its roster and
                # sums (registers die with the process), so nothing reaches this host
                quiet = time.monotonic() - getattr(self, "last_frame_at", deadline - self.args.max_time)
                self.log("timeout", quiet_s=round(quiet, 2), **self.where())
                print(f"token node {self.seq}: --max-time {self.args.max_time:g} s reached at step "
                      f"{self.batch}; no token frame for {quiet:.1f} s"
                      + (" (its NIC or the LAN switch restarted and lost its state, or the host is cut "
                         "off: docs/faults.md)" if quiet > 2 * self.args.wait_unit else ""),
                      file=sys.stderr, flush=True)
                self.exit_code = 5
                self.stop("max-time")
                break
            if self.holder and not self.standby:
                self.hold_token()
                continue
            got = self.next_frame(self.args.tick)
            if got is not None:
                self.on_frame(*got)
        # a node still repairing the last batch NACKs the others' fragments: stay a while
        # to answer (next_frame answers NACKs; anything else is over)
        now = time.monotonic()
        quiet_until, hard = now + LINGER_S, now + LINGER_MAX_S
        while self.exit_code == 0 and time.monotonic() < min(quiet_until, hard):
            answered = self.stats["repair_frames"]
            self.next_frame(0.05)
            if self.stats["repair_frames"] != answered:  # someone is still repairing
                quiet_until = time.monotonic() + LINGER_S
