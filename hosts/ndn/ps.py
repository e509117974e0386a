"""NDN parameter server (ndn; protocol in docs/ndn.md).

Every step of the method, from the PS's side, names with PS ``P``, training
``T`` and GPU ``G``:

2.1  task assignment: Interest ``/G/P/T`` to every GPU; the Data says accept/decline.
3.2  training content: answers ``/P/T/G/seg=i`` with the initial parameters.
4.3  subscription: answers ``/*insert*/P/T/G`` with an empty ``/*distribute*/P/T/G``.
5.1  collection: Interests ``/G/P/T/v=r/seg=i`` when its estimate of G's finishing time
     says so (EWMA of G's past compute times; the GPU holds an early Interest), every
     GPU's under one AIMD window served round-robin (``--window``, ``--window-max``).
6    synchronous: once every accepting GPU's gradient r is in, ``params -= lr·mean``
     and the new parameters go out ONCE as ``/*distribute*/P/T/v=r+1/seg=i``, which the
     switches replicate along the persistent PIT (``--distribute stream``: each segment
     as soon as every GPU's segment is in); asynchronous: one update per received
     gradient, versions counted by the PS.
9    lost-update recovery: answers ordinary ``/P/T/v=k/seg=i`` Interests from the stored
     versions (holding those for a version not computed yet).

With ``--transport ip`` the same agent is the IP-unicast baseline: NDN packets in UDP,
and each update sent once per subscribed GPU. ``--transport ipmc``: the IP-multicast
baseline, the same over UDP but each update sent ONCE to the IP multicast group
``--group``, which ``forward.p4`` replicates along the tree the controller installed
(``controller/ip_multicast.py``); lost updates are fetched by unicast recovery Interests
(step 9) as in the other two. ``--transport tcp``: the TCP baseline, the same packets over
one kernel TCP connection per GPU, each update sent once per GPU.
Prints one JSON summary line; ``--out DIR`` keeps the parameters of every version.

``--train-model NAME`` (synchronous only) trains the time-to-accuracy harness's work
(:class:`hosts.ndn.harness.HarnessWork`, ``experiments/train_ndn.py``): the PS holds
``hosts.training.build_model(NAME, --seed)``, needs every GPU to accept (GPU ``i`` of
``--gpus`` trains shard ``i``), sums the gradients in ``--gpus`` order, applies
``w <- w - lr * sum / n`` with ``hosts.training.apply_gradients``, and evaluates the new
parameters *before* distributing them at version 0, every ``--eval-every`` versions and
every ``--steps-per-epoch``: one JSON line each (``t`` training seconds without evaluation
time, ``accuracy``, ``heldout``, ``epoch``, ``step``, ``weights``), before the summary.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from ndn.encoding import Component

from hosts.ndn.faces import TRANSPORTS, TcpFace, make_face
from hosts.ndn.harness import (
    DigitsTrainer,
    HarnessWork,
    add_harness_args,
    cpu_seconds,
    initial_params,
    sgd_step,
)
from hosts.ndn.requester import Requester
from hosts.ndn.timers import finish_estimate
from hosts.net import nic_counters
from wire import argtypes
from wire.argtypes import described
from wire.ndn import (
    NDN_UDP_PORT,
    SEGMENT_VALUES,
    NameBoundsError,
    Packet,
    check_name,
    comp_str,
    data_packet,
    join_segments,
    marker,
    n_segments,
    name_of,
    seg_of,
    segments,
    version_of,
)


class ParameterServer:
    """The PS agent: one event loop over one face."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.a = args
        hosts = json.loads(args.hosts) if args.hosts else {}
        self.face = make_face(args.transport, args.iface, hosts, me=args.me, ps=args.me,
                                 group=args.group)
        self.gpus: list[str] = [g for g in args.gpus.split(",") if g]
        # One window over every GPU's collection Interests, served round-robin: at most
        # that many gradient segments queue at the PS's port (docs/ndn.md, "Collection").
        self.req = Requester(self.face, timeout=args.timeout,
                             # TCP repairs losses itself: no RTO of ours over it
                             adaptive=args.window == "aimd" and args.transport != "tcp",
                             window=args.window_max or max(64, 16 * len(self.gpus)))
        self.me, self.train = args.me, args.train
        self.work: HarnessWork | None = None
        self.error = ""
        if args.train_model:
            if args.mode != "sync":
                raise ValueError("--train-model trains synchronously (--mode sync)")
            self.work = HarnessWork(args.train_model, args.data, args.seed, args.batch,
                                       args.steps_per_epoch, args.eval_every)
            args.values = self.work.values
            self.params = self.work.params()
        elif args.model == "digits":
            self.params = DigitsTrainer.initial(args.seed)
            if args.values != self.params.size:
                raise ValueError(f"--model digits has {self.params.size} values, not --values {args.values}")
        else:
            self.params = initial_params(args.values, args.seed)
        self.history: dict[int, np.ndarray] = {0: self.params}
        self.version = 0
        self.nseg = n_segments(args.values)
        self.accepted: list[str] = []
        self.declined: list[str] = []
        self.answered: set[str] = set()
        self.subscribers: dict[str, Any] = {}          # gpu -> return address (ip mode)
        self.held: dict[tuple[int, int], list[Any]] = {}  # recovery Interests for future versions
        self.est: dict[str, float] = {}                # estimated compute time per GPU
        self.grads: dict[str, dict[int, bytes]] = {}   # this round's segments per GPU
        self.step: dict[str, int] = {}                 # gradient sequence number per GPU
        self.collect_at: dict[str, float] = {}
        self.collecting: set[str] = set()
        self.asked_at: dict[str, float] = {}
        self.first_at: dict[str, float] = {}
        self.prev_done: dict[str, float] = {}
        self.rtt = float("inf")                        # smallest ask-to-first-segment time
        self.collected = (0.0, 0.0)                    # this round's first and last segment
        self.streamed: set[int] = set()                # segments of the next version already sent
        self.streamed_total = 0
        self.next_params: np.ndarray | None = None     # the next version, as its segments go out
        self.rounds: list[dict[str, Any]] = []
        self.applied: list[tuple[str, int]] = []
        self.applied_sum = np.zeros(args.values, dtype=np.float64)
        self.round_start = 0.0
        self.train_start: float | None = None           # monotonic: training started
        self.bytes_at_round = dict(self.face.stats.by_kind)
        self.recovery_answers = 0
        self.seg_cache: dict[int, list[bytes]] = {}    # version -> its segments (few kept)
        self.recovery_deferred = 0                      # ipmc: recovery asks for a future version
        self.out = Path(args.out) if args.out else None
        self.train_t0 = 0.0                             # --train-model: the training clock
        self.eval_s = 0.0
        self.train_s: float | None = None
        self.cpu0 = 0.0

    # ------------------------------------------------------------------ names
    def n(self, *parts: str | bytes) -> list[bytes]:
        return name_of(*parts)

    def send_data(self, name: list[bytes], content: bytes, dest: Any, kind: str,
                  final: int | None = None) -> None:
        self.face.send(data_packet(name, content, final), dest=dest, kind=kind)

    # ------------------------------------------------------------------ run
    def run(self) -> dict[str, Any]:
        deadline = time.monotonic() + self.a.max_time
        for g in self.gpus:                                   # step 2.1
            self.req.express(self.n(g, self.me, self.train), kind="assign")
        assign_deadline = time.monotonic() + self.a.assign_timeout
        started = False
        while time.monotonic() < deadline:
            wait = min(self.req.tick(), 0.05)
            for p in self.face.recv(wait):
                self.handle(p)
            now = time.monotonic()
            if not started:
                if self.work is not None and (self.declined or (now > assign_deadline
                                                                and len(self.answered) < len(self.gpus))):
                    # the harness's work is sharded over every GPU: one missing, no training
                    self.error = (f"--train-model needs every GPU: declined {self.declined}, "
                                  f"answered {sorted(self.answered)} of {self.gpus}")
                    break
                if len(self.answered) == len(self.gpus) or now > assign_deadline:
                    missing = [g for g in self.gpus if g not in self.answered]
                    for g in missing:     # no answer: treated as unavailable
                        self.req.satisfied(self.n(g, self.me, self.train))
                    if self.accepted and all(g in self.subscribers for g in self.accepted):
                        started = True
                        self.hold_start()
                        self.start_training()
                    elif not self.accepted and len(self.answered) == len(self.gpus):
                        break
                continue
            for g in list(self.collect_at):
                if g not in self.collecting and self.collect_at[g] <= now:
                    self.collect(g)
            if self.finished():
                break
        # Linger: GPUs whose last update was lost fetch it now (step 9); leave after
        # ``linger`` quiet seconds.
        quiet_since = time.monotonic()
        while time.monotonic() - quiet_since < self.a.linger and time.monotonic() < deadline + self.a.linger:
            for p in self.face.recv(0.05):
                self.handle(p)
                quiet_since = time.monotonic()
        if isinstance(self.face, TcpFace):
            self.face.close(linger=60.0)   # hand the last update to the kernel before leaving
        return self.summary()

    def finished(self) -> bool:
        if self.a.mode == "sync":
            return self.version >= self.a.rounds
        return all(self.step[g] >= self.a.steps for g in self.accepted) and not self.collecting

    # ------------------------------------------------------------------ packets
    def handle(self, p: Packet) -> None:
        name = p.name
        mk = marker(name)
        if p.kind == "interest":
            if mk == "unsubscribe" and len(name) == 4:
                self.subscribers.pop(bytes(Component.get_value(name[3])).decode(), None)
            elif mk == "insert" and len(name) == 4:           # step 4.3
                gpu = bytes(Component.get_value(name[3])).decode()
                self.subscribers[gpu] = p.source
                self.send_data(self.n(b"*distribute*", self.me, self.train, gpu.encode()), b"",
                               p.source, "ack")
            elif len(name) == 4 and comp_str(name[0]) == self.me:
                third = name[2]
                if Component.get_type(third) == Component.TYPE_GENERIC:   # step 3.2
                    seg = seg_of(name)
                    if 0 <= seg < self.nseg:
                        self.send_data(name, self.segment(0, seg), p.source, "content",
                                       final=self.nseg - 1)
                else:                                         # step 9: recovery
                    v, seg = version_of(third), seg_of(name)
                    if v in self.history and 0 <= seg < self.nseg:
                        self.recovery_answers += 1
                        self.send_data(name, self.segment(v, seg), p.source,
                                       "recovery", final=self.nseg - 1)
                    elif v > self.version and self.a.transport == "ipmc":
                        # IP multicast: the update is about to go to the whole group; a
                        # unicast copy now would double it (a GPU whose probe timer fired
                        # early). Its Interest is retransmitted and answered once the
                        # version is out, for the segments it then still misses.
                        self.recovery_deferred += 1
                    elif v > self.version:
                        held = self.held.setdefault((v, seg), [])
                        # NDN: one Data answers every GPU the switches' PITs aggregated
                        if self.a.transport != "ndn" or not held:
                            held.append(p.source)
        else:
            if len(name) == 3 and comp_str(name[1]) == self.me:   # step 2.2 answer
                g = comp_str(name[0])
                if self.req.satisfied(name):
                    self.answered.add(g)
                    (self.accepted if p.content == b"accept" else self.declined).append(g)
            elif len(name) == 5 and comp_str(name[1]) == self.me:  # step 5.2 answer
                self.on_gradient(comp_str(name[0]), version_of(name[3]), seg_of(name),
                                 p.content, name)

    def segment(self, v: int, seg: int) -> bytes:
        """Segment ``seg`` of version ``v``'s parameters. The segments of the versions
        asked for are cut once and kept (cutting a 1M-value model for every Interest
        made the PS fall behind its GPUs' Interests)."""
        segs = self.seg_cache.get(v)
        if segs is None:
            segs = self.seg_cache[v] = segments(self.history[v])
            while len(self.seg_cache) > 3:              # version 0 and the newest ones
                del self.seg_cache[next(k for k in self.seg_cache if k not in (0, v))]
        return segs[seg]

    # ------------------------------------------------------------------ training
    def hold_start(self) -> None:
        """``--hold-start PATH``: say so on stdout and serve packets until PATH exists (the
        experiment reads the switches' counters in between, so that they count the
        training alone, not the set-up)."""
        if not self.a.hold_start:
            return
        print(json.dumps({"event": "ready_to_train"}), flush=True)
        end = time.monotonic() + 60.0
        while not Path(self.a.hold_start).exists() and time.monotonic() < end:
            for p in self.face.recv(0.01):
                self.handle(p)

    def start_training(self) -> None:
        now = time.monotonic()
        if self.work is not None:     # rank order: the sum's order, whoever answered first
            self.accepted.sort(key=self.gpus.index)
            self.train_t0, self.cpu0 = now, cpu_seconds()
            self.evaluate(0)
            now = time.monotonic()
        self.round_start = now
        self.train_start = now
        self.bytes_at_round = dict(self.face.stats.by_kind)
        for g in self.accepted:
            self.step[g] = 0
            self.collect_at[g] = now

    def collect(self, g: str) -> None:
        """Step 5.1: ask ``g`` for its gradient ``step[g]``, every segment."""
        k = self.step[g]
        self.collecting.add(g)
        self.asked_at[g] = time.monotonic()
        self.grads[g] = {}
        for seg in range(self.nseg):
            self.req.express(self.n(g, self.me, self.train, f"v={k}", f"seg={seg}"), kind="collect", flow=g)

    def on_gradient(self, g: str, k: int, seg: int, content: bytes, name: list[bytes]) -> None:
        if not self.req.satisfied(name) or g not in self.collecting or k != self.step.get(g):
            return
        parts = self.grads[g]
        if not parts:
            self.first_at[g] = time.monotonic()
        parts[seg] = content
        if self.a.mode == "sync" and self.a.distribute == "stream":
            self.stream(seg)
        if len(parts) < self.nseg:
            return
        now = time.monotonic()
        self.collecting.discard(g)
        # Finishing-time estimate (step 5.1), from when the FIRST segment came (the last
        # one includes every GPU's queueing on the PS's link). A GPU that held the
        # Interest answered when it finished: that time is a measurement. One that answered
        # at once was done before we asked: we asked too late, so the estimate shrinks.
        base = self.round_start if self.a.mode == "sync" else self.prev_done.get(g, self.asked_at[g])
        took = self.first_at[g] - base
        # ``wait`` from when g's first Interest went out (it may have queued behind the
        # window), and an answer counts as immediate within the measured round trip and
        # its deviation: the queue at the PS's port must not read as compute time, or
        # the estimate grows round by round and the PS asks ever later (idle link)
        wait = self.first_at[g] - max(self.asked_at[g], self.req.started.get(g, 0.0))
        self.rtt = min(self.rtt, wait)
        self.est[g] = finish_estimate(self.est.get(g), took, wait,
                                      max(self.rtt, self.req.quick_answer() or 0.0))
        self.prev_done[g] = now
        grad = join_segments(parts, self.a.values)
        if self.a.mode == "async":
            self.params = (self.params - np.float32(self.a.lr) * grad).astype(np.float32)
            self.applied.append((g, k))
            self.applied_sum += grad
            self.step[g] = k + 1
            self.new_version(now)
            if self.step[g] < self.a.steps:
                self.collect_at[g] = now + 0.8 * self.est[g]
            else:
                self.collect_at.pop(g, None)
            return
        self.step[g] = k + 1
        self.collect_at.pop(g, None)
        if all(self.step[x] == self.version + 1 for x in self.accepted):
            self.collected = (min(self.first_at[x] for x in self.accepted) - self.round_start,
                              now - self.round_start)
            grads = [join_segments(self.grads[x], self.a.values) for x in self.accepted]
            if self.next_params is not None:    # streamed: every segment already computed
                self.params, self.next_params = self.next_params, None
                if self.work is not None:
                    self.work.load(self.params)
            elif self.work is not None:
                self.params = self.work.apply(grads, self.a.lr)
                if self.work.is_eval_point(self.version + 1):
                    self.evaluate(self.version + 1)   # before the GPUs get it: they wait, as in the trainer
                    now = time.monotonic()
            else:
                self.params = sgd_step(self.params, grads, self.a.lr)
            self.new_version(now)
            if self.work is not None and self.version >= self.a.rounds:
                self.train_s = round(time.monotonic() - self.train_t0 - self.eval_s, 4)
            if self.version < self.a.rounds:
                self.round_start = now
                for x in self.accepted:   # collect when each GPU should be done
                    self.collect_at[x] = now + 0.8 * self.est.get(x, 0.0)

    def stream(self, seg: int) -> None:
        """``--distribute stream``: once segment ``seg`` of every GPU's gradient is in,
        compute that segment of the next version (the SGD step is element-wise) and
        distribute it at once, so the update leaves on the PS's uplink while the other
        segments still arrive on its downlink. Not before a version the harness
        evaluates (the PS evaluates before the GPUs get it)."""
        v = self.version + 1
        if seg in self.streamed or (self.work is not None and self.work.is_eval_point(v)):
            return
        for x in self.accepted:
            if seg not in self.grads.get(x, {}) or not (
                    self.step[x] == v or (x in self.collecting and self.step[x] == self.version)):
                return
        lo, hi = seg * SEGMENT_VALUES, min(self.a.values, (seg + 1) * SEGMENT_VALUES)
        grads = [np.frombuffer(self.grads[x][seg], dtype="<f4") for x in self.accepted]
        if self.next_params is None:
            self.next_params = self.params.copy()
        new = (self.work.apply_slice(self.params[lo:hi], grads, self.a.lr) if self.work is not None
               else sgd_step(self.params[lo:hi], grads, self.a.lr))
        self.next_params[lo:hi] = new
        self.streamed.add(seg)
        self.streamed_total += 1
        pkt = data_packet(self.n(b"*distribute*", self.me, self.train, f"v={v}", f"seg={seg}"),
                          segments(new)[0], self.nseg - 1)
        for d in self.dests():
            self.face.send(pkt, dest=d, kind="distribute")

    def dests(self) -> list[Any]:
        """Where an update goes: once into the NDN network or to the IP group, or once
        per subscribed GPU (IP unicast, TCP)."""
        if self.a.transport == "ndn":
            return [None]
        if self.a.transport == "ipmc":     # once, to the group: the switches replicate
            return [(self.a.group, NDN_UDP_PORT)]
        return list(self.subscribers.values())

    def new_version(self, now: float) -> None:
        """Store the new parameters and distribute them (step 6)."""
        self.version += 1
        v = self.version
        self.history[v] = self.params
        segs = self.seg_cache[v] = segments(self.params)
        while len(self.seg_cache) > 3:                  # version 0 and the newest ones
            del self.seg_cache[next(k for k in self.seg_cache if k not in (0, v))]
        dests = self.dests()
        for seg, content in enumerate(segs):
            if seg not in self.streamed:            # streamed segments went out already
                pkt = data_packet(self.n(b"*distribute*", self.me, self.train, f"v={v}", f"seg={seg}"),
                                  content, self.nseg - 1)
                for d in dests:
                    self.face.send(pkt, dest=d, kind="distribute")
            for src in self.held.pop((v, seg), []):
                self.send_data(self.n(self.me, self.train, f"v={v}", f"seg={seg}"), content, src,
                               "recovery", final=self.nseg - 1)
        self.streamed = set()
        if self.a.mode == "sync":
            by = self.face.stats.by_kind
            delta = {k: by.get(k, 0) - self.bytes_at_round.get(k, 0) for k in by}
            # when the first and the last gradient segment of the round came (s after its start)
            first, last = self.collected
            self.rounds.append({"version": v, "seconds": now - self.round_start, "sent_at": now,
                                "first_segment_s": round(first, 4), "last_segment_s": round(last, 4),
                                "tx_bytes": {k: d for k, d in delta.items() if d},
                                "distribute_bytes": delta.get("distribute", 0),
                                "tx_total": sum(delta.values())})
            self.bytes_at_round = dict(by)

    def evaluate(self, version: int) -> None:
        """``--train-model``: one evaluation record of the parameters of ``version``
        (its time is left out of the training clock, as in ``hosts/trainer.py``)."""
        assert self.work is not None
        t0 = time.monotonic()
        accs = self.work.evaluate()
        rec = {"role": "ps", "epoch": self.work.epoch_of(version), "step": version,
               "t": round(t0 - self.train_t0 - self.eval_s, 4), "accuracy": round(accs["test"], 4),
               "heldout": round(accs["heldout"], 4), "weights": self.work.weights()}
        self.eval_s += time.monotonic() - t0
        print(json.dumps(rec), flush=True)

    # ------------------------------------------------------------------ report
    def summary(self) -> dict[str, Any]:
        st = self.face.stats
        rx, rxp, tx, txp = nic_counters(self.a.iface) if self.a.iface else (0, 0, 0, 0)
        if self.out is not None:
            self.out.mkdir(parents=True, exist_ok=True)
            for v, arr in self.history.items():
                np.save(self.out / f"params-v{v}.npy", arr)
            np.save(self.out / "applied-sum.npy", self.applied_sum)
        acc = {}
        if self.a.model == "digits":
            t = DigitsTrainer(0, 0, self.a.seed)
            acc = {"accuracy_initial": t.accuracy(self.history[0]), "accuracy": t.accuracy(self.params)}
        if self.work is not None:
            acc = {"train_s": self.train_s, "eval_s": round(self.eval_s, 4), "error": self.error,
                   "cpu_s": round(cpu_seconds() - self.cpu0, 3) if self.train_t0 else 0.0,
                   "weights": self.work.weights(), "parameters": self.work.values}
        return {
            **acc,
            "role": "ps", "me": self.me, "mode": self.a.mode, "transport": self.a.transport,
            "accepted": self.accepted, "declined": self.declined,
            "unanswered": [g for g in self.gpus if g not in self.answered],
            "subscribed": sorted(self.subscribers), "version": self.version,
            "segments": self.nseg, "rounds": self.rounds, "applied": self.applied,
            "estimates": self.est, "retransmissions": self.req.retransmissions,
            "window": self.req.summary(), "streamed_segments": self.streamed_total,
            "train_start": self.train_start,
            "recovery_answers": self.recovery_answers, "recovery_deferred": self.recovery_deferred,
            "tx_bytes": st.tx_bytes, "tx_packets": st.tx_packets, "tx_by_kind": st.by_kind,
            "tx_packets_by_kind": st.packets_by_kind,
            "nic_tx_bytes": tx, "nic_tx_packets": txp, "nic_rx_bytes": rx, "nic_rx_packets": rxp,
        }


def build_parser() -> argparse.ArgumentParser:
    """Command-line options."""
    p = argtypes.Parser(prog="python -m hosts.ndn.ps", description=described(__doc__))
    p.add_argument("--me", required=True, help="this PS's name (its host name, e.g. h1)")
    p.add_argument("--gpus", required=True, help="comma-separated GPU names (host names)")
    p.add_argument("--train", default="train", help="training name (default train)")
    p.add_argument("--transport", choices=list(TRANSPORTS), default="ndn",
                   help="ndn (ndn.p4), ip (UDP unicast), ipmc (UDP, updates to --group), tcp")
    p.add_argument("--group", default="", help="ipmc: the IP multicast group of the updates")
    p.add_argument("--iface", default="", help="the host's interface (ndn transport, NIC counters)")
    p.add_argument("--hosts", default="", help="JSON {host: ip} (ip transport)")
    p.add_argument("--mode", choices=["sync", "async"], default="sync")
    p.add_argument("--rounds", type=argtypes.count, default=3, help="synchronous rounds")
    p.add_argument("--steps", type=argtypes.count, default=3, help="async: gradients per GPU")
    p.add_argument("--values", type=argtypes.values, default=3818, help="model size in float32 values")
    p.add_argument("--model", choices=["synthetic", "digits"], default="synthetic",
                   help="initial parameters: synthetic, or the digits CNN of hosts/training.py")
    p.add_argument("--lr", type=argtypes.positive, default=0.1)
    p.add_argument("--seed", type=argtypes.natural, default=0)
    p.add_argument("--timeout", type=argtypes.positive, default=0.5, help="Interest retransmission timeout (s)")
    p.add_argument("--window", choices=["aimd", "fixed"], default="aimd",
                   help="collection Interests outstanding: aimd (adaptive window, RTO from "
                        "measured round trips) or fixed (--window-max at once, --timeout)")
    p.add_argument("--window-max", type=argtypes.natural, default=0,
                   help="most collection Interests outstanding over all GPUs "
                        "(default 0: max(64, 16 per GPU))")
    p.add_argument("--distribute", choices=["stream", "version"], default="version",
                   help="sync: version (the whole update once every gradient is in) or stream "
                        "(each segment of the update as soon as every GPU's segment is in)")
    p.add_argument("--assign-timeout", type=argtypes.positive, default=15.0,
                   help="how long to wait for task-assignment answers (s)")
    p.add_argument("--linger", type=argtypes.nonnegative, default=4.0,
                   help="at the end, serve recovery Interests until this long without any (s)")
    p.add_argument("--max-time", type=argtypes.positive, default=120.0)
    p.add_argument("--out", default="", help="directory for params-v<k>.npy")
    p.add_argument("--hold-start", default="", metavar="PATH",
                   help="before the first round, print a ready_to_train line and wait until "
                        "PATH exists (at most 60 s)")
    add_harness_args(p, "ps")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the PS; prints its JSON summary."""
    args = build_parser().parse_args(argv)
    try:
        check_name(name_of(b"*distribute*", args.me, args.train, "v=1", "seg=1"))
        ps = ParameterServer(args)
    except (NameBoundsError, OSError, ValueError) as e:
        print(f"ndn_ps: error: {e}", file=sys.stderr)
        return 2
    summary = ps.run()
    print(json.dumps(summary))
    if ps.error:
        print(f"ndn_ps: error: {ps.error}", file=sys.stderr)
        return 1
    done = ps.finished() if ps.accepted else True
    return 0 if done else 1


if __name__ == "__main__":
    sys.exit(main())
