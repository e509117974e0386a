"""NDN GPU worker (ndn; protocol in docs/ndn.md).

The GPU's side of every step of the method (PS ``P``, training ``T``, GPU ``G``):

2.2  answers the task-assignment Interest ``/G/P/T`` with Data "accept", or "decline"
     when busy (``--busy``), and then takes no work.
3.1  fetches the model initialisation ``/P/T/G/seg=i``.
4.1  subscribes with ``/*insert*/P/T/G`` until the ``/*distribute*/P/T/G`` ack arrives
     (``subscribe_s``: how long that took), re-sends it every ``--refresh`` s while it
     trains (the switches' subscriptions are soft state) and sends
     ``/*unsubscribe*/P/T/G`` when it is done.
5.2  answers the collection Interest ``/G/P/T/v=r/seg=i`` at once when gradient r is
     ready, or holds it and answers when the computation finishes.
5.3.1 synchronous: after sending gradient r it starts a probe timer set from its past
     send-to-update delays (``--probe-factor`` × the largest of the last five updates that
     came by distribution, within ``--probe-min`` .. ``--probe-max``).
6    takes the update ``/*distribute*/P/T/v=r+1/seg=i`` the switches replicate to it.
9    when the probe timer fires before the whole update is in, fetches the missing
     segments with ordinary Interests ``/P/T/v=r+1/seg=i`` (lost-update recovery).
async: computes its next gradient on the newest complete parameters it holds, right
     after sending one, and never waits for an update.

Gradients come from :func:`hosts.ndn.harness.synthetic_gradient` (deterministic in the
parameters, the GPU and the step) after ``--compute-time`` seconds, or with
``--model digits`` from the digits CNN on shard ``--gpu-index`` of ``--world``. Prints
one JSON line.

``--train-model NAME`` (synchronous only) trains the time-to-accuracy harness's work
(``experiments/train_ndn.py``) as rank ``--gpu-index`` of ``--world``: the one training
loop of every scheme (:mod:`hosts.loop`) with this agent as its Sync (:class:`NdnSync`):
the model's gradient of round r's batch of its shard (real time, ``--slow F`` times
longer, or ``--compute-time S`` fixed, the rest spent serving packets), the PS's new
parameters back by distribution; the first computation starts when the PS first asks for
gradient 0 (the training's start). It prints a JSON line with its weights' hash at the
PS's evaluation points (version 0, every ``--eval-every`` and every
``--steps-per-epoch``) before the summary.
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

from hosts.loop import LoopConfig, ModelWork, Sync, SyncResult, TrainLoop
from hosts.ndn.faces import TRANSPORTS, TcpFace, make_face
from hosts.ndn.harness import (
    DigitsTrainer,
    add_harness_args,
    synthetic_gradient,
)
from hosts.ndn.requester import Requester
from hosts.ndn.timers import probe_timeout
from hosts.net import nic_counters
from wire import argtypes
from wire.argtypes import described
from wire.ndn import (
    UNSUBSCRIBE_MARKER,
    NameBoundsError,
    Packet,
    comp_str,
    data_packet,
    interest_packet,
    join_segments,
    marker,
    n_segments,
    name_of,
    seg_of,
    segments,
    version_of,
)


class Gpu:
    """The GPU agent: one event loop over one face."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.a = args
        hosts = json.loads(args.hosts) if args.hosts else {}
        self.face = make_face(args.transport, args.iface, hosts, me=args.me, ps=args.ps,
                                 group=args.group)
        self.req = Requester(self.face, timeout=args.timeout, adaptive=args.transport != "tcp")
        self.me, self.ps, self.train = args.me, args.ps, args.train
        # --train-model: the one training loop (NdnSync) computes and hands each gradient in
        self.driven = bool(args.train_model)
        self.go = False                # driven: the PS has asked for gradient 0
        self.pending: np.ndarray | None = None
        self.nseg = n_segments(args.values)
        self.state = "idle"        # idle -> init -> subscribe -> train -> done | declined
        self.params: np.ndarray | None = None
        self.version = 0
        self.init_parts: dict[int, bytes] = {}
        self.updates: dict[int, dict[int, bytes]] = {}   # version -> segments
        self.recovered: dict[int, set[int]] = {}         # version -> segments fetched by probe
        self.step = 0                                    # next gradient to compute
        self.ready: dict[int, list[bytes]] = {}          # step -> gradient segments
        self.sent: dict[int, set[int]] = {}              # step -> segments answered
        self.held: dict[tuple[int, int], Any] = {}       # collection Interests waiting
        self.compute_until: float | None = None
        self.sent_at: dict[int, float] = {}              # step -> time fully sent
        self.delays: list[float] = []
        self.probe_at: float | None = None
        self.probe_version = 0
        self.probes_fired = 0
        self.nic_at_train: Any = None
        self.asked: set[tuple[int, int]] = set()   # recovery Interests expressed: (version, segment)
        self.update_rx_at = 0.0                          # last update segment by distribution
        self.via_distribute = 0
        self.sent_sum = np.zeros(args.values, dtype=np.float64)
        self.gradients_sent = 0
        self.declined_at: float | None = None
        self.final = args.rounds if args.mode == "sync" else args.final_version
        self.subscribe_t0: float | None = None     # first subscribe Interest sent
        self.subscribe_s: float | None = None      # ... to its ack (subscription latency)
        self.next_refresh: float | None = None     # soft state: the next refresh Interest
        self.refreshes = 0
        self.version_at: dict[int, float] = {}      # version -> monotonic time it was complete
        self.trainer: DigitsTrainer | None = None   # digits: made when a task is accepted

    def n(self, *parts: str | bytes) -> list[bytes]:
        return name_of(*parts)

    # ------------------------------------------------------------------ loop
    def run(self) -> dict[str, Any]:
        """The agent's own loop until done (declined: after ``--linger``); the summary."""
        self.pump(lambda: self.state == "done", time.monotonic() + self.a.max_time)
        self.end()
        return self.summary()

    def pump(self, until: Any, deadline: float) -> bool:
        """Serve packets and timers until ``until()`` or ``deadline``; whether ``until()``
        (False also when a declined GPU has lingered long enough)."""
        while time.monotonic() < deadline and not until():
            wait = min(self.req.tick(), 0.02)
            for p in self.face.recv(wait):
                self.handle(p)
            now = time.monotonic()
            if self.compute_until is not None and now >= self.compute_until:
                self.finish_compute()
            if self.probe_at is not None and now >= self.probe_at:
                self.probe()
            if self.next_refresh is not None and now >= self.next_refresh and self.state == "train":
                self.refresh()
            if self.state == "declined" and self.declined_at and now - self.declined_at > self.a.linger:
                return False
        return until()

    def end(self) -> None:
        """Unsubscribe, and hand what a TCP face still queues to the kernel."""
        if self.subscribe_s is not None:
            # the subscription ends now, not when its soft state expires in the switches
            self.face.send(interest_packet(self.n(UNSUBSCRIBE_MARKER, self.ps, self.train, self.me)),
                           kind="unsubscribe")
        if isinstance(self.face, TcpFace):
            self.face.close()              # hand what is queued to the kernel first

    def refresh(self) -> None:
        """Soft state: re-send the subscribe Interest (fresh nonce), which renews this
        GPU's port in every switch's persistent PIT on the way to the PS, or rebuilds it
        after a switch restart. The PS acks it; the ack is ignored."""
        self.face.send(interest_packet(self.n(b"*insert*", self.ps, self.train, self.me)), kind="refresh")
        self.refreshes += 1
        self.next_refresh = time.monotonic() + self.a.refresh

    # ------------------------------------------------------------------ packets
    def handle(self, p: Packet) -> None:
        name = p.name
        mk = marker(name)
        if p.kind == "interest":
            if len(name) == 3 and comp_str(name[0]) == self.me:       # step 2.2
                busy = self.a.busy or self.state not in ("idle", "init", "subscribe", "train")
                accept = not busy
                self.face.send(data_packet(name, b"accept" if accept else b"decline"),
                               dest=p.source, kind="assign")
                if accept and self.state == "idle":
                    if self.a.model == "digits":
                        self.trainer = DigitsTrainer(self.a.gpu_index, self.a.world, self.a.seed)
                    self.state = "init"
                    for seg in range(self.nseg):                           # step 3.1
                        self.req.express(self.n(self.ps, self.train, self.me, f"seg={seg}"), "content", flow="content")
                elif not accept and self.declined_at is None:
                    self.state = "declined" if self.state == "idle" else self.state
                    self.declined_at = time.monotonic()
                elif not accept:
                    self.declined_at = time.monotonic()
            elif len(name) == 5 and comp_str(name[0]) == self.me:     # step 5.2
                k, seg = version_of(name[3]), seg_of(name)
                if k in self.ready and 0 <= seg < self.nseg:
                    self.answer(k, seg, name, p.source)
                elif k >= self.step - 1:
                    self.held[(k, seg)] = p.source
                    if self.driven and k == 0 and self.state == "train" and not self.go:
                        self.go = True             # the training starts: gradient 0
                        self.begin_compute()
            return
        # Data
        if mk == "distribute":
            if len(name) == 4 and comp_str(name[3]) == self.me and self.state == "subscribe":
                self.req.satisfied(self.n(b"*insert*", self.ps, self.train, self.me))
                if self.subscribe_t0 is not None:
                    self.subscribe_s = time.monotonic() - self.subscribe_t0
                if self.a.refresh > 0:
                    self.next_refresh = time.monotonic() + self.a.refresh
                self.start_training()
            elif len(name) == 5 and self.state == "train":
                self.on_update(version_of(name[3]), seg_of(name), p.content, probe=False)
            return
        if len(name) == 4 and comp_str(name[0]) == self.ps and self.req.satisfied(name):
            third = name[2]
            if Component.get_type(third) == Component.TYPE_GENERIC:    # step 3.2 answer
                self.init_parts[seg_of(name)] = p.content
                if len(self.init_parts) == self.nseg and self.state == "init":
                    self.params = join_segments(self.init_parts, self.a.values)
                    self.state = "subscribe"                                # step 4.1
                    self.subscribe_t0 = time.monotonic()
                    self.req.express(self.n(b"*insert*", self.ps, self.train, self.me), "insert")
            else:                                                            # step 9 answer
                self.on_update(version_of(third), seg_of(name), p.content, probe=True)

    # ------------------------------------------------------------------ training
    def start_training(self) -> None:
        self.state = "train"
        # the NIC's counters from here on count the training alone (the distribution's
        # share of this GPU's link: docs/ndn.md, "Collection")
        self.nic_at_train = nic_counters(self.a.iface) if self.a.iface else None
        if not self.driven:
            self.begin_compute()
        elif any(k == 0 for k, _ in self.held):      # the PS asked before the ack came
            self.go = True

    def begin_compute(self) -> None:
        if self.driven:      # the loop computes the gradient and hands it in (NdnSync.sync)
            return
        self.compute_until = time.monotonic() + self.a.compute_time

    def finish_compute(self) -> None:
        """The gradient of ``step`` is ready: answer held collection Interests."""
        self.compute_until = None
        assert self.params is not None
        k = self.step
        if self.driven:
            assert self.pending is not None
            g, self.pending = self.pending, None
        elif self.trainer is not None:
            g = self.trainer.gradient(self.params, k)
        elif self.a.gradient_dir:  # a given gradient (experiments.compare)
            g = np.load(Path(self.a.gradient_dir) / f"grad-{self.a.gpu_index}.npy").astype(np.float32)
        else:
            g = synthetic_gradient(self.params, self.a.gpu_index, k, self.a.seed)
        self.ready[k] = segments(g)
        self.sent[k] = set()
        self.sent_sum += g
        self.gradients_sent += 1
        self.step = k + 1
        for old in [s for s in self.ready if s < k - 2]:
            del self.ready[old]
        for (hk, seg), src in list(self.held.items()):
            if hk == k:
                del self.held[(hk, seg)]
                self.answer(k, seg, self.n(self.me, self.ps, self.train, f"v={k}", f"seg={seg}"), src)

    def answer(self, k: int, seg: int, name: list[bytes], dest: Any) -> None:
        self.face.send(data_packet(name, self.ready[k][seg], self.nseg - 1), dest=dest, kind="gradient")
        sent = self.sent[k]
        if seg in sent:
            return
        sent.add(seg)
        if len(sent) < self.nseg:
            return
        now = time.monotonic()
        self.sent_at[k] = now
        if self.a.mode == "sync":
            # Step 5.3.1: the probe timer, from past send-to-update delays.
            timeout = probe_timeout(self.delays, self.a.probe_factor, self.a.probe_min,
                                       self.a.probe_max, self.a.probe_init)
            self.probe_at = now + timeout
            self.probe_version = k + 1
        elif self.step < self.a.steps:
            self.begin_compute()
        else:
            # Last gradient sent: wait for the final version, probing if it is lost.
            self.probe_at = now + self.a.probe_init
            self.probe_version = self.final

    def on_update(self, v: int, seg: int, content: bytes, probe: bool) -> None:
        if v <= self.version or not 0 <= seg < self.nseg:
            return
        parts = self.updates.setdefault(v, {})
        if seg in parts:
            return
        parts[seg] = content
        if probe:
            self.recovered.setdefault(v, set()).add(seg)
        else:
            self.update_rx_at = time.monotonic()
        if len(parts) < self.nseg:
            return
        # A complete version: the newest one wins (async versions may arrive out of order).
        self.params = join_segments(parts, self.a.values)
        self.version = v
        self.version_at[v] = time.monotonic()   # when this GPU had the whole version
        for old in [x for x in self.updates if x <= v]:
            del self.updates[old]
        # forget the recovery Interests of this version and older ones: only those asked
        # (every segment of every version up to v made v x segments names, ~0.1-0.5 s at
        # the mlp's 360 segments, on the critical path of every round)
        for x, seg_ in sorted(a for a in self.asked if a[0] <= v):
            self.req.satisfied(self.n(self.ps, self.train, f"v={x}", f"seg={seg_}"))
            self.asked.discard((x, seg_))
        if v not in self.recovered:
            self.via_distribute += 1
        if self.a.mode == "sync":
            sent = self.sent_at.get(v - 1)
            if sent is not None and v not in self.recovered:
                # only updates that came by distribution: a recovered one's delay is the
                # probe timer itself, which would make the next timer grow every loss
                self.delays.append(time.monotonic() - sent)
            if v == self.probe_version:
                self.probe_at = None
            if v >= self.final:
                self.state = "done"
            else:
                self.begin_compute()
        elif v >= self.final:
            self.state = "done"
            self.probe_at = None

    def probe(self) -> None:
        """Step 9: the probe timer fired before the update arrived: fetch it."""
        self.probe_at = None
        v = self.probe_version
        if v <= self.version:
            return
        have = self.updates.get(v, {})
        gap = self.a.probe_gap
        if gap > 0 and have and time.monotonic() - self.update_rx_at < gap:
            # the update is still arriving (a segment came less than --probe-gap ago):
            # fetch only what is still missing once it has been quiet that long
            self.probe_at = self.update_rx_at + gap
            return
        self.probes_fired += 1
        for seg in range(self.nseg):
            if seg not in have:
                self.asked.add((v, seg))
                self.req.express(self.n(self.ps, self.train, f"v={v}", f"seg={seg}"), "probe", flow="probe")

    # ------------------------------------------------------------------ report
    def summary(self) -> dict[str, Any]:
        if self.a.out and self.params is not None:
            out = Path(self.a.out)
            out.parent.mkdir(parents=True, exist_ok=True)
            np.save(out, self.params)
            np.save(out.with_name(out.stem + "-sent-sum.npy"), self.sent_sum)
        st = self.face.stats
        return {
            "role": "gpu", "me": self.me, "state": self.state, "version": self.version,
            "accepted": self.state not in ("idle", "declined"),
            "gradients_sent": self.gradients_sent,
            "updates_via_distribute": self.via_distribute,
            "updates_recovered_by_probe": len(self.recovered),
            "segments_recovered": sum(len(s) for s in self.recovered.values()),
            "probes_fired": self.probes_fired, "delays": self.delays,
            "subscribe_s": self.subscribe_s, "refreshes": self.refreshes,
            "version_at": self.version_at,
            "retransmissions": self.req.retransmissions,
            "tx_bytes": st.tx_bytes, "rx_bytes": st.rx_bytes,
            "window": self.req.summary(), "nic_train_rx_bytes": self._nic_train_rx(),
        }

    def _nic_train_rx(self) -> int | None:
        """Bytes this GPU's NIC received since training started (interface counters)."""
        if not self.a.iface or self.nic_at_train is None:
            return None
        return nic_counters(self.a.iface).rx_bytes - self.nic_at_train.rx_bytes


class NdnSync(Sync):
    """``--train-model``: the GPU as a :class:`hosts.loop.Sync` of the one training loop.
    The loop computes each gradient (its dilated compute spent serving packets,
    :meth:`idle`); :meth:`sync` hands it to the agent, which answers the PS's collection
    Interests, and returns the PS's next parameters as they arrive by distribution (or by
    probe): a :class:`hosts.loop.SyncResult` with ``params``. The PS evaluates; this rank's
    records are its weights' hash at the PS's evaluation points."""

    def __init__(self, args: argparse.Namespace) -> None:
        from hosts import training as tr

        if args.mode != "sync":
            raise ValueError("--train-model trains synchronously (--mode sync)")
        if args.slow < 1.0 or args.compute_time < 0:
            raise ValueError("--slow must be >= 1 and --compute-time >= 0")
        if args.batch < 1 or args.steps_per_epoch < 1 or args.eval_every < 0:
            raise ValueError("--batch and --steps-per-epoch must be >= 1, --eval-every >= 0")
        import torch

        torch.set_num_threads(1)   # many agents share few cores
        data = tr.load_data(args.data, args.seed)   # loaded now: the PS's clock has not started
        shard = tr.worker_shard(data, args.gpu_index, args.world)
        if len(shard[1]) // args.batch < args.steps_per_epoch:
            raise ValueError(f"rank {args.gpu_index}'s shard has {len(shard[1]) // args.batch} full "
                             f"batches of {args.batch}, fewer than --steps-per-epoch {args.steps_per_epoch}")
        self.work = ModelWork(tr.build_model(args.train_model, args.seed), data, shard, args.batch, args.seed)
        args.values = self.work.parameters()
        self.cfg = LoopConfig(args.gpu_index, args.world, -(-args.rounds // args.steps_per_epoch),
                              args.steps_per_epoch, 0.0, args.eval_every, args.slow, args.compute_time,
                              evaluate_accuracy=False)
        self.gpu = Gpu(args)
        self.deadline = 0.0

    def run(self) -> int:
        """The one loop over this GPU; its exit status."""
        return TrainLoop(self.cfg, self.work, self).run()

    def start(self, loop: TrainLoop) -> None:
        """Accept, fetch the initial parameters, subscribe, wait for the PS's first ask."""
        g = self.gpu
        self.deadline = time.monotonic() + g.a.max_time
        if not g.pump(lambda: g.go, self.deadline):
            raise TimeoutError(f"no training started (state {g.state})")
        assert g.params is not None
        loop.work.apply(SyncResult(params=g.params), 0.0, 1)

    def idle(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        self.gpu.pump(lambda: time.monotonic() >= end, end)

    def sync(self, grad: np.ndarray) -> SyncResult:
        g = self.gpu
        k = g.step
        g.pending = grad
        g.finish_compute()
        if not g.pump(lambda: g.version > k or g.state == "done", self.deadline):
            raise TimeoutError(f"version {k + 1} did not arrive (--max-time)")
        assert g.params is not None
        return SyncResult(params=g.params)

    def should_stop(self, loop: TrainLoop) -> bool:
        return self.gpu.state == "done" or self.gpu.version >= self.gpu.final

    def record(self, rec: dict[str, Any]) -> dict[str, Any] | None:
        return {"role": "gpu", "rank": rec["rank"], "epoch": rec["epoch"], "step": rec["step"],
                "weights": rec["weights"]}

    def stats(self) -> dict[str, Any]:
        return self.gpu.summary()

    def close(self) -> None:
        self.gpu.end()


def build_parser() -> argparse.ArgumentParser:
    """Command-line options."""
    p = argtypes.Parser(prog="python -m hosts.ndn.gpu", description=described(__doc__))
    p.add_argument("--me", required=True, help="this GPU's name (its host name)")
    p.add_argument("--gpu-index", type=argtypes.natural, default=0, help="index for the synthetic gradient")
    p.add_argument("--ps", required=True, help="the PS's name")
    p.add_argument("--train", default="train")
    p.add_argument("--transport", choices=list(TRANSPORTS), default="ndn",
                   help="ndn (ndn.p4), ip (UDP unicast), ipmc (UDP; updates come to --group), tcp")
    p.add_argument("--group", default="", help="ipmc: the IP multicast group to join")
    p.add_argument("--iface", default="")
    p.add_argument("--hosts", default="", help="JSON {host: ip} (ip transport)")
    p.add_argument("--mode", choices=["sync", "async"], default="sync")
    p.add_argument("--rounds", type=argtypes.count, default=3, help="sync: rounds (the last version)")
    p.add_argument("--steps", type=argtypes.count, default=3, help="async: gradients this GPU sends")
    p.add_argument("--final-version", type=argtypes.natural, default=0, help="async: the PS's last version")
    p.add_argument("--values", type=argtypes.values, default=3818)
    p.add_argument("--model", choices=["synthetic", "digits"], default="synthetic",
                   help="synthetic gradients, or the digits CNN of hosts/training.py (3,818 values)")
    p.add_argument("--world", type=argtypes.natural, default=1,
                   help="digits: accepting GPUs (shards; 0 when every GPU declines)")
    p.add_argument("--seed", type=argtypes.natural, default=0)
    p.add_argument("--gradient-dir", default="", metavar="DIR",
                   help="send DIR/grad-<gpu-index>.npy (float32, --values long) as every gradient "
                        "instead of the synthetic one")
    p.add_argument("--compute-time", type=argtypes.nonnegative, default=0.2, help="seconds per gradient")
    p.add_argument("--busy", action="store_true", help="decline the task (step 2.2)")
    p.add_argument("--timeout", type=argtypes.positive, default=0.5, help="Interest retransmission timeout (s)")
    p.add_argument("--probe-init", type=argtypes.positive, default=2.0, help="probe timer before any delay is known (s)")
    p.add_argument("--probe-factor", type=argtypes.positive, default=1.5)
    p.add_argument("--probe-min", type=argtypes.positive, default=0.3)
    p.add_argument("--probe-max", type=argtypes.positive, default=2.0)
    p.add_argument("--probe-gap", type=argtypes.nonnegative, default=0.0, metavar="S",
                   help="when the probe timer fires while the update is still arriving (a "
                        "segment less than S s ago), wait until it has been quiet for S s "
                        "before fetching the missing segments (0: fetch at once, the default)")
    p.add_argument("--linger", type=argtypes.nonnegative, default=5.0, help="declined: exit after this quiet time")
    p.add_argument("--refresh", type=argtypes.nonnegative, default=2.0,
                   help="re-send the subscribe Interest every S seconds while training (soft state; "
                        "the switches' subscription lifetime is 6 s by default; 0: never)")
    p.add_argument("--max-time", type=argtypes.positive, default=120.0)
    p.add_argument("--out", default="", help="final parameters (.npy)")
    h = add_harness_args(p, "gpu")
    h.add_argument("--slow", type=argtypes.number(1.0), default=1.0,
                   help="--train-model: compute F times slower (real or fixed compute)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the GPU; prints its JSON summary."""
    args = build_parser().parse_args(argv)
    try:
        if args.train_model:
            driven = NdnSync(args)
        else:
            gpu = Gpu(args)
    except (NameBoundsError, OSError, ValueError) as e:
        print(f"ndn_gpu: error: {e}", file=sys.stderr)
        return 2
    if args.train_model:
        return driven.run()
    summary = gpu.run()
    print(json.dumps(summary))
    return 0 if gpu.state in ("done", "declined") else 1


if __name__ == "__main__":
    sys.exit(main())
