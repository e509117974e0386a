"""``python -m experiments --mode token``: token-passing broadcast training.

Builds :func:`controller.token.token_lan` (N hosts, each behind its own smart NIC running
``nic.p4``, one LAN switch running ``lan.p4``), deploys the programs, starts one
``hosts.token.node`` per host (``h1`` holds model and data and opens formation), trains
the digits CNN and prints per-epoch time and accuracy, tokens passed, gradients
accumulated and node removals, with the NICs' counters. ``--kill h3@4`` kills a node
4 s into training (after formation and distribution); the others declare it lost and go on. Results (JSON and a plot of
accuracy vs time with removals marked) go to ``<--out-dir>/token-<time>/``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.table import Table

from controller import argtypes
from controller.output import TableConsole
from controller.token import TokenCounters, TokenDeployment, token_lan
from experiments import options as opts
from experiments.runner import log as _log
from experiments.runner import spawn
from topologies import TopologyError

console = TableConsole()


@dataclass
class NodeResult:
    """What one node printed: its events and its summary."""

    host: str
    returncode: int | None
    events: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    stderr: str = ""


@dataclass
class TokenRun:
    """One run: every node's result, the kill times and the NIC counters."""

    nodes: dict[str, NodeResult]
    kills: dict[str, float] = field(default_factory=dict)       # host -> seconds after start
    # host -> seconds after start of a kill that found the node already exited (it had
    # finished training): it is not a kill, and the node counts as a survivor
    kills_after_exit: dict[str, float] = field(default_factory=dict)
    start: float = 0.0
    counters: TokenCounters | None = None
    wall_s: float = 0.0

    def events(self, name: str) -> list[tuple[str, dict[str, Any]]]:
        """Every ``(host, event)`` of one kind, over all nodes."""
        return [(h, e) for h, r in self.nodes.items() for e in r.events if e.get("event") == name]

    def node(self, host: str) -> NodeResult:
        """One node's result."""
        return self.nodes[host]


# GRAD frames back to back per 1 ms on BMv2: at 32 a 256-frame chunk overflowed its
# 64-frame egress queues (1 to 60 of 547 fragments lost a contribution), at 8 none did
BMV2_BURST = 8


# BMv2's egress queues hold 64 frames; a switch thread that the other processes keep off
# the 2 cores for ~8 ms overflowed them even with paced senders (a GRAD frame lost is
# never resent), so token networks on BMv2 get deeper ones
BMV2_QUEUE_DEPTH = 1024


def deepen_bmv2_queues(net: Any, topo: Any) -> None:
    """On BMv2, every switch's egress queues :data:`BMV2_QUEUE_DEPTH` frames deep (once
    per network; the embedded target's switch thread serves its queues itself)."""
    if getattr(net, "target", "") != "bmv2" or getattr(net, "_token_queues_deep", False):
        return
    from controller.qos import EgressQueues

    for s in topo.switches():
        EgressQueues.of(net.run_dir, s).set_depth(BMV2_QUEUE_DEPTH)
    net._token_queues_deep = True


def await_listening(procs: Mapping[str, Any], bases: Mapping[str, Path], timeout: float = 120.0) -> None:
    """Wait until every member node in ``procs`` logged "listening" (its NIC socket is
    open, torch imported) or exited: the initiator's formation closes on silence, so a
    member still starting on a loaded machine would be left out of the roster."""
    deadline = time.monotonic() + timeout
    waiting = dict(procs)
    while waiting and time.monotonic() < deadline:
        for h, p in list(waiting.items()):
            out = bases[h].with_suffix(".out")
            if p.poll() is not None or (out.exists() and '"event": "listening"' in out.read_text(errors="replace")):
                del waiting[h]
        if waiting:
            time.sleep(0.05)


def node_argv(topo: Any, host: str, args: list[str], target: str = "embedded") -> list[str]:
    """The command line of ``hosts.token.node`` on ``host`` (``target``: the network's,
    which sets the send pacing unless ``args`` has ``--burst``)."""
    pace = ["--burst", str(BMV2_BURST)] if target == "bmv2" and "--burst" not in args else []
    return [sys.executable, "-m", "hosts.token.node", "--iface", topo.iface(host)["name"], *pace, *args]


def _spawn(net: Any, host: str, argv: list[str], base: Path) -> Any:
    """A token node: one BLAS thread (the nodes share the machine's cores), unbuffered."""
    return spawn(net.host(host), base, argv, env=dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1"))


def _parse(host: str, proc: Any, base: Path) -> NodeResult:
    res = NodeResult(host, proc.returncode)
    for line in base.with_suffix(".out").read_text(errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        res.events.append(rec)
        if rec.get("event") == "summary":
            res.summary = rec
    res.stderr = base.with_suffix(".err").read_text(errors="replace")[-2000:]
    return res


def _apply_due(timeline: list[tuple[float, str, str]], due: float, start: float,
               procs: dict[str, Any], done_kills: dict[str, float], late_kills: dict[str, float]) -> None:
    """Kill, stop or continue the nodes whose time has come (timeline times up to ``due``);
    kills are recorded in seconds after ``start``."""
    while timeline and timeline[0][0] <= due:
        _t, what, h = timeline.pop(0)
        if what == "kill":
            if procs[h].poll() is not None:  # it finished before the kill was due
                late_kills[h] = round(time.monotonic() - start, 2)
            else:
                procs[h].kill()
                done_kills[h] = time.monotonic() - start
        elif what == "stop":
            os.kill(procs[h].pid, signal.SIGSTOP)
        else:
            os.kill(procs[h].pid, signal.SIGCONT)


def run_token(net: Any, topo: Any, out: Path, common: list[str], *,
              hosts: list[str] | None = None, per_host: dict[str, list[str]] | None = None,
              kills: dict[str, float] | None = None, pauses: dict[str, tuple[float, float]] | None = None,
              after_formation: list[tuple[str, float, list[str]]] | None = None,
              from_training: bool = False, timeout: float = 240.0) -> TokenRun:
    """Run the nodes on ``hosts`` (default all; the first is the initiator), wait, parse.

    ``kills``: host -> seconds after the initiator starts (SIGKILL); ``pauses``: host ->
    (start, duration) of a SIGSTOP (the node freezes, is declared lost, then stands by);
    ``after_formation``: ``(host, delay, args)`` processes started ``delay`` seconds after
    the initiator closed formation (a late node, an intruder), named ``host-<i>``.
    ``from_training``: kill and pause times count from the initiator's "ready" (training starts).
    """
    out.mkdir(parents=True, exist_ok=True)
    deepen_bmv2_queues(net, topo)
    hosts = list(hosts or topo.hosts())
    per_host = per_host or {}
    kills, pauses = dict(kills or {}), dict(pauses or {})
    side = list(after_formation or [])
    procs: dict[str, Any] = {}
    bases = {h: out / h for h in hosts}
    first, rest = hosts[0], hosts[1:]
    done_kills: dict[str, float] = {}
    late_kills: dict[str, float] = {}
    start = time.monotonic()
    try:
        for h in rest:
            procs[h] = _spawn(net, h, node_argv(topo, h, [*common, *per_host.get(h, [])], net.target), bases[h])
        await_listening({h: procs[h] for h in rest}, bases)
        start = time.monotonic()
        procs[first] = _spawn(net, first, node_argv(
            topo, first, ["--initiator", "--expect", str(len(hosts)), *common,
                          *per_host.get(first, [])], net.target), bases[first])
        timeline = sorted([(t, "kill", h) for h, t in kills.items()]
                          + [(t, "stop", h) for h, (t, _d) in pauses.items()]
                          + [(t + d, "cont", h) for h, (t, d) in pauses.items()])
        formed_at: float | None = None
        ready_at: float | None = None
        deadline = start + timeout
        while time.monotonic() < deadline:
            now = time.monotonic() - start
            offset = (ready_at if ready_at is not None else timeout) if from_training else 0.0
            _apply_due(timeline, now - offset, start, procs, done_kills, late_kills)
            if (side or from_training) and (formed_at is None or ready_at is None):
                text = bases[first].with_suffix(".out").read_text()
                if formed_at is None and '"formed"' in text:
                    formed_at = now
                if ready_at is None and '"ready"' in text:
                    ready_at = now
            while side and formed_at is not None and now >= formed_at + side[0][1]:
                h, _d, extra = side.pop(0)
                name = f"{h}-{len(procs)}"
                bases[name] = out / name
                procs[name] = _spawn(net, h, node_argv(topo, h, extra, net.target), bases[name])
            if (not side and all(p.poll() is not None for p in procs.values())
                    and all(what == "kill" for _t, what, _h in timeline)):
                # every node exited: kills still due land after training
                for t, _w, h in timeline:
                    late_kills[h] = round(t + offset, 2)
                break
            time.sleep(0.05)
        wall = time.monotonic() - start
    finally:
        for p in procs.values():
            if p.poll() is None:
                try:
                    os.kill(p.pid, signal.SIGCONT)
                    p.kill()
                except ProcessLookupError:
                    pass
            p.wait()
    nodes = {h: _parse(h, procs[h], bases[h]) for h in procs}
    return TokenRun(nodes, kills=done_kills, kills_after_exit=late_kills, start=start, wall_s=wall)


# ----------------------------------------------------------------------------- report


def epoch_rows(run: TokenRun) -> list[dict[str, Any]]:
    """Per-epoch time and accuracy from the lowest-numbered node that reported it."""
    best: dict[int, dict[str, Any]] = {}
    for h, e in run.events("batch"):
        if "epoch" in e and (e["epoch"] not in best or e["node"] < best[e["epoch"]]["node"]):
            best[e["epoch"]] = {**e, "host": h}
    return [best[k] for k in sorted(best)]


def print_report(run: TokenRun) -> None:
    """Tables: epochs, nodes, removals, NIC counters."""
    t = Table(title="token broadcast: per epoch")
    for c in ("epoch", "time (s)", "accuracy", "gradients in last batch", "active"):
        t.add_column(c)
    for r in epoch_rows(run):
        t.add_row(str(r["epoch"]), f"{r['t']:.1f}", f"{r['accuracy']:.3f}", str(r["n"]),
                  ",".join(map(str, r["active"])))
    console.print(t)
    n = Table(title="nodes")
    for c in ("host", "seq", "exit", "batches", "tokens passed", "grads sent", "grads summed",
              "resends", "declared lost", "compute s", "token wait s", "broadcast s", "accumulate s"):
        n.add_column(c)
    for h, r in run.nodes.items():
        s = r.summary
        st, tm = s.get("stats", {}), s.get("timing", {})
        n.add_row(h, str(s.get("node", "-")), str(r.returncode), str(st.get("batches", "-")),
                  str(st.get("tokens_passed", "-")), str(st.get("grads_sent", "-")),
                  str(st.get("gradients_accumulated", "-")), str(st.get("resends", "-")),
                  str(st.get("lost_declared", "-")),
                  *(f"{tm.get(k, 0):.2f}" if tm else "-" for k in
                    ("compute", "token_wait", "broadcast", "accumulate")))
    console.print(n)
    lost = {}
    for _h, e in run.events("lost"):
        lost.setdefault(e["member"], e)
    for member, e in lost.items():
        console.print(f"node {member} removed at t={e['t']:.1f} s (declared by node {e['by']} after "
                      f"{e['silence_s']:.2f} s of silence)")
    for h, t in run.kills_after_exit.items():
        console.print(f"kill of {h} due at t={t:.1f} s landed after training: {h} had finished "
                      f"(exit {run.node(h).returncode}) and was never declared lost")
    if run.counters:
        c = run.counters
        console.print(
            f"NICs: {c.total('acc', 'events', 'added')} gradient fragments accumulated, "
            f"{c.total('acc', 'events', 'read')} read, {c.total('member', 'events', 'token')} "
            f"tokens seen, drops non-member {c.total('member', 'drops', 'non_member')}, "
            f"duplicate {c.total('acc', 'drops', 'duplicate')}, stale {c.total('acc', 'drops', 'stale')}, "
            f"not holder {c.total('acc', 'drops', 'not_holder')}; NACKs "
            f"{c.total('acc', 'events', 'nack_gap') + c.total('acc', 'events', 'nack_tail')}, "
            f"fragments repaired {c.total('acc', 'events', 'repaired')}")


def plot(run: TokenRun, path: Path) -> None:
    """Accuracy vs time (per epoch) with removals marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = epoch_rows(run)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot([r["t"] for r in rows], [r["accuracy"] for r in rows], "o-", label="test accuracy")
    seen = set()
    for _h, e in run.events("lost"):
        if e["member"] in seen:
            continue
        seen.add(e["member"])
        ax.axvline(e["t"], color="red", linestyle="--")
        ax.annotate(f"node {e['member']} removed", (e["t"], 0.05), rotation=90, color="red",
                    fontsize=8, xytext=(3, 0), textcoords="offset points")
    ax.set_xlabel("time since node 1 started (s)")
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    ax.set_title("token-passing broadcast training (digits CNN)")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


# ----------------------------------------------------------------------------- main


def _kill_spec(spec: str) -> tuple[str, float]:
    host, _, t = spec.partition("@")
    try:
        at = float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad --kill {spec!r}: expected HOST@SECONDS, e.g. h3@5") from None
    if not host or not 0 <= at < float("inf"):
        raise argparse.ArgumentTypeError(f"bad --kill {spec!r}: a host and a time >= 0 (got {t})")
    return host, at


def _slow_spec(spec: str) -> tuple[str, float]:
    host, _, f = spec.partition("=")
    try:
        factor = float(f)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad --slow {spec!r}: expected HOST=FACTOR, e.g. h2=3") from None
    if not host or not 1 <= factor < float("inf"):
        raise argparse.ArgumentTypeError(f"bad --slow {spec!r}: a host and a factor >= 1 (got {f})")
    return host, factor


def build_parser() -> argparse.ArgumentParser:
    """Options of the token experiment."""
    p = argtypes.Parser(prog="python -m experiments --mode token",
                                description=__doc__.split("\n\n")[0],
                                epilog="--workers: the training nodes h1..hN on the LAN (h1 holds "
                                       "model and data); --bw: every link of the LAN (1000: "
                                       "unshaped).")
    p.add_argument("--epochs", type=argtypes.count, default=8)
    p.add_argument("--batch-size", type=argtypes.count, default=32)
    p.add_argument("--lr", type=argtypes.positive, default=0.3)
    p.add_argument("--cutoff", type=argtypes.number(above=0.0, hi=1.0), default=0.9, help="a batch ends at this fraction of its data")
    p.add_argument("--wait-unit", type=argtypes.positive, default=1.0, help="t of the staggered timeouts (s)")
    p.add_argument("--resends", type=argtypes.integer(1, 255), default=3,
                   help="re-sends of a silent pass before a node is declared lost (default 3, "
                        "robust to a lossy LAN; 1: the method's single re-send)")
    p.add_argument("--kill", type=_kill_spec, action="append", default=[], metavar="HOST@T",
                   help="kill node HOST T seconds into training (repeatable)")
    p.add_argument("--slow", type=_slow_spec, action="append", default=[], metavar="HOST=F",
                   help="HOST computes F times slower (repeatable)")
    p.add_argument("--min-nodes", type=argtypes.count, default=2)
    opts.add_common(p, "token", takes={
        "--seed": {"default": 0}, "--workers": {"default": 4}, "--bw": {"default": 1000.0},
        "--max-time": {"default": 400.0}, "--target": {}, "--out-dir": {}},
        rejects={"--seeds": "it runs one seed (--seed N); run it once per seed",
                 "--target-accuracy": "it trains a fixed number of epochs (--epochs; time to "
                                      "accuracy: --mode train --scheme token)",
                 "--loss": "this mode has no loss option; nic.p4 and lan.p4 have per-port "
                           "emulated loss (TokenDeployment(loss=...)), which python -m bench "
                           "loss puts on a NIC-LAN link"})
    opts.add_alias(p, "--nodes", "--workers", "workers", type=opts.workers_type())
    opts.add_alias(p, "--out", "--out-dir", "out_dir",
                   note="results now go to a token-<time> directory under it")
    opts.add_alias(p, "--timeout", "--max-time", "max_time", type=argtypes.positive)
    return p


def main(argv: list[str]) -> int:
    """Run the experiment; 0 when training finished on every surviving node."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not 0 < args.bw <= 1000:
        parser.error(f"--bw must be in (0, 1000] Mbit/s, got {args.bw:g}")
    try:
        topo = token_lan(args.workers, bw=args.bw)
    except TopologyError as e:
        parser.error(f"--workers: {e}")
    try:
        argtypes.check_hosts(topo, "--kill", [h for h, _ in args.kill])
        argtypes.check_hosts(topo, "--slow", [h for h, _ in args.slow])
        argtypes.check_at_most("--min-nodes", args.min_nodes, args.workers,
                               f"the {args.workers} training nodes (--workers)")
    except argtypes.OptionError as e:
        argtypes.fail(parser, e)
    if os.geteuid() != 0:
        console.print("[red]the experiment needs root (network namespaces)[/red]")
        return 2
    from topologies.network import Network

    out = Path(args.out_dir).resolve() / time.strftime("token-%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    console.save_to(out)  # every table in full: tables.txt, tables.json, CSV
    common = ["--seed", str(args.seed), "--epochs", str(args.epochs), "--batch-size", str(args.batch_size), "--lr", str(args.lr),
              "--cutoff", str(args.cutoff), "--wait-unit", str(args.wait_unit),
              "--resends", str(args.resends), "--min-nodes", str(args.min_nodes), "--save", str(out / "model.pt")]
    per_host = {h: ["--slowdown", str(f)] for h, f in args.slow}
    with Network(topo, target=args.target, limit_bw=args.bw < 1000, log=_log) as net:
        dep = TokenDeployment(topo, net.grpc_addresses())
        rep = dep.deploy()
        _log(f"deployed nic.p4 on {len(dep.nics)} NICs and lan.p4 on the LAN switch: {rep}")
        run = run_token(net, topo, out / "logs", common, per_host=per_host,
                        kills=dict(args.kill), from_training=True, timeout=args.max_time)
        run.counters = dep.read_counters()
    print_report(run)
    for h, r in run.nodes.items():
        if r.returncode not in (0, None) and h not in run.kills:
            console.print(f"[red]{h} exited {r.returncode}[/red]: {r.stderr[-500:]}")
    plot(run, out / "token_accuracy.png")
    (out / "token_run.json").write_text(json.dumps({
        "epochs": epoch_rows(run), "kills": run.kills, "kills_after_exit": run.kills_after_exit,
        "wall_s": run.wall_s,
        "nodes": {h: r.summary for h, r in run.nodes.items()},
        "counters": run.counters.__dict__ if run.counters else None}, indent=1, default=str))
    console.print(f"results: {out / 'token_run.json'}, plot {out / 'token_accuracy.png'}")
    survivors = [r for h, r in run.nodes.items() if h not in run.kills]
    ok = all(r.returncode == 0 for r in survivors)
    return 0 if ok else 1
