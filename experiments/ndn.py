"""``python -m experiments --mode ndn``: the NDN parameter server, end to end.

On a fat-tree (default k=4, 20 P4 switches, 16 hosts):

1. NDN: ``ndn.p4`` on every switch (FIB, transient PIT, persistent PIT), subscriptions
   taken by the switches (``--subscriptions controller``: by the persistent-PIT manager
   from packet-ins); PS on ``h1``, GPUs on the other hosts
   (``--busy`` ones decline); synchronous rounds; the PS sends each update once and the
   switches replicate it; optional loss on one GPU's link, recovered by its probe timer;
2. IP baselines (``--baselines``, default all three): ``forward.p4`` on every switch, the
   same agents with the same gradients over UDP, the PS sending each update once per GPU
   (IP unicast); over UDP to an IP multicast group whose tree the controller installs
   (IP multicast, lost updates fetched by unicast after the probe timer); over one TCP
   connection per GPU (TCP PS);
3. NDN asynchronous run (the PS updates per received gradient);
4. checks: every GPU's parameters bit-exact with the PS's, the PS's equal to an
   independent replay of the training, async applies each gradient exactly once;
5. tables: PS egress bytes per round (distribution and total), round times, probe
   recoveries; per scheme the round time including distribution with its line-rate
   bound and the bytes every link carried (switch port counters); JSON and a plot in
   ``results/ndn-<time>/``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
from rich.table import Table

from controller import argtypes
from controller.deploy import DeployError, check_loss
from controller.deploy import deploy as deploy_forward
from controller.ndn import NdnDeployment, NdnJob, read_switch_state
from controller.output import TableConsole
from experiments import options as opts
from experiments.accounting import memlink_bytes
from experiments.ndn_results import (
    NdnRunResult,
    pit_table,
    plot_ndn_vs_ip,
    round_tables,
    runs_table,
)
from experiments.ndn_results import ratios_table as ratios_table  # bench/ndn_bench.py
from experiments.runner import log as _log
from experiments.runner import spawn
from topologies import TopologyError, fat_tree, leaf_spine
from topologies.base import Topology
from wire.argtypes import described

console = TableConsole()


def _finish(proc: Any, base: Path, timeout: float) -> tuple[int, dict[str, Any] | None, str]:
    try:
        proc.wait(timeout=timeout)
    except Exception:
        proc.kill()
        proc.wait()
    out = base.with_suffix(".out").read_text(errors="replace").strip().splitlines()
    err = base.with_suffix(".err").read_text(errors="replace")
    summary = None
    if out:
        with contextlib.suppress(json.JSONDecodeError):
            summary = json.loads(out[-1])
    return proc.returncode, summary, err


def expected_sync(values: int, seed: int, lr: float, gpus: list[str], indexes: dict[str, int],
                  rounds: int) -> list[np.ndarray]:
    """An independent replay of synchronous training: the parameters of every version."""
    from hosts.ndn.harness import initial_params, sgd_step, synthetic_gradient

    params = [initial_params(values, seed)]
    for r in range(rounds):
        p = params[-1]
        params.append(sgd_step(p, [synthetic_gradient(p, indexes[g], r, seed) for g in gpus], lr))
    return params


def _hold_until_ready(psp: Any, base: Path, hold: Path, max_time: float, on_start: Any) -> None:
    """Once the PS says ``ready_to_train`` (every GPU subscribed), call ``on_start``; then
    let the PS start (``hold``)."""
    out = base.with_suffix(".out")
    end = time.monotonic() + max_time
    while time.monotonic() < end and psp.poll() is None:
        if b"ready_to_train" in out.read_bytes():
            on_start()
            break
        time.sleep(0.02)
    hold.touch()


def run_agents(net: Any, topo: Topology, run_dir: Path, *, transport: str, ps: str,
               gpus: list[str], busy: tuple[str, ...] = (), mode: str = "sync", rounds: int = 3,
               steps: int = 3, values: int = 3818, seed: int = 0, lr: float = 0.1,
               compute_time: float = 0.2, late: dict[str, float] | None = None,
               max_time: float = 120.0, timeout: float = 0.5, model: str = "synthetic",
               gradient_dir: Path | None = None, group: str = "", probe: float | None = None,
               probe_gap: float = 0.0, on_start: Any = None, ps_args: tuple[str, ...] = ()) -> NdnRunResult:
    """Start the PS and the GPUs in their hosts, wait, and check the results.

    ``late`` delays some GPUs' start (seconds), e.g. to subscribe after the others.
    ``gradient_dir``: GPU ``i`` sends ``grad-<i>.npy`` from there as every gradient (no
    replay check then: the caller checks the PS's parameters against those gradients).
    ``transport``: ``ndn``, ``ip``, ``ipmc`` (updates to the multicast ``group``) or
    ``tcp``. ``probe``: the GPUs' probe timer (initial and maximum, s; default the
    agents' 2 s); ``probe_gap``: the GPUs' ``--probe-gap`` (0: off). ``on_start``: called once every GPU has subscribed, just before the
    first round (the PS waits for it), e.g. to read the switches' counters. ``ps_args``:
    more options of the PS (``--window``, ``--window-max``).
    """
    import sys as _sys

    run_dir.mkdir(parents=True, exist_ok=True)
    hosts = {h: topo.host_ip(h) for h in topo.hosts()}
    indexes = {g: i for i, g in enumerate(gpus)}
    common = ["--train", "train", "--transport", transport, "--hosts", json.dumps(hosts),
              "--mode", mode, "--rounds", str(rounds), "--steps", str(steps),
              "--values", str(values), "--seed", str(seed), "--max-time", str(max_time),
              "--timeout", str(timeout), "--model", model, *(["--group", group] if group else [])]
    n_accept = len([g for g in gpus if g not in busy])
    common_gpu = ["--world", str(n_accept),
                  *(["--gradient-dir", str(gradient_dir)] if gradient_dir else []),
                  *(["--probe-init", str(probe), "--probe-max", str(probe)] if probe else []),
                  *(["--probe-gap", str(probe_gap)] if probe_gap else [])]
    hold = run_dir / "start-training"
    hold.unlink(missing_ok=True)
    py = _sys.executable
    procs: dict[str, Any] = {}
    late = late or {}
    t0 = time.monotonic()
    gpu_argv = {g: [
        py, "-m", "hosts.ndn.gpu", "--me", g, "--gpu-index", str(indexes[g]), "--ps", ps,
        "--iface", topo.iface(g)["name"], "--compute-time", str(compute_time),
        "--final-version", str(n_accept * steps), "--out", str(run_dir / f"params-{g}.npy"),
        *(["--busy"] if g in busy else []), *common, *common_gpu] for g in gpus}
    for g in gpus:
        if g in late:
            continue
        procs[g] = spawn(net.host(g), run_dir / f"gpu-{g}", gpu_argv[g])
    time.sleep(0.3)
    psp = spawn(net.host(ps), run_dir / "ps", [
        py, "-m", "hosts.ndn.ps", "--me", ps, "--gpus", ",".join(gpus), "--iface",
        topo.iface(ps)["name"], "--lr", str(lr), "--out", str(run_dir / "ps"),
        "--assign-timeout", str(max(15.0, max(late.values(), default=0) + 10)), *common,
        *(["--hold-start", str(hold)] if on_start else []), *ps_args])
    for g, delay in sorted(late.items(), key=lambda kv: kv[1]):
        time.sleep(max(0.0, t0 + delay - time.monotonic()))
        procs[g] = spawn(net.host(g), run_dir / f"gpu-{g}", gpu_argv[g])
    if on_start:
        _hold_until_ready(psp, run_dir / "ps", hold, max_time, on_start)
    results: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    rc, ps_sum, err = _finish(psp, run_dir / "ps", max_time + 30)
    seconds = time.monotonic() - t0
    if rc != 0 or ps_sum is None:
        problems.append(f"PS {ps}: exit {rc}: {err[-400:]}")
        ps_sum = ps_sum or {}
    for g, p in procs.items():
        rc, s, err = _finish(p, run_dir / f"gpu-{g}", 30)
        if rc != 0 or s is None:
            problems.append(f"GPU {g}: exit {rc}: {err[-300:]}")
        results[g] = s or {}
    res = NdnRunResult(transport, mode, seconds, ps_sum, results, problems=problems)
    _check(res, run_dir, values, seed, lr, gpus, indexes, rounds, steps, busy,
           replay=model == "synthetic" and gradient_dir is None)
    return res


def _check(res: NdnRunResult, run_dir: Path, values: int, seed: int, lr: float, gpus: list[str],
           indexes: dict[str, int], rounds: int, steps: int, busy: tuple[str, ...],
           replay: bool = True) -> None:
    """Bit-exact parameters everywhere, equal to a replay of the training (sync,
    synthetic gradients), every gradient applied once (async)."""
    problems = res.problems
    accepted = res.accepted
    if sorted(accepted) != sorted(g for g in gpus if g not in busy):
        problems.append(f"accepted {accepted}, expected every GPU but {list(busy)}")
    final_v = res.ps.get("version", 0)
    ps_final_path = run_dir / "ps" / f"params-v{final_v}.npy"
    if not ps_final_path.exists():
        problems.append("PS wrote no parameters")
        return
    ps_final = np.load(ps_final_path)
    if res.mode == "sync":
        if final_v != rounds:
            problems.append(f"PS reached version {final_v}, not {rounds}")
        elif replay:
            want = expected_sync(values, seed, lr, accepted, indexes, rounds)[-1]
            if not np.array_equal(ps_final, want):
                problems.append(f"PS parameters differ from the replay in {int(np.sum(ps_final != want))} values")
    else:
        applied = [tuple(x) for x in res.ps.get("applied", [])]
        want = sorted((g, k) for g in accepted for k in range(steps))
        if sorted(applied) != want:
            problems.append(f"async: applied {len(applied)} gradients, expected each of {len(want)} once")
        sent = sum(np.load(run_dir / f"params-{g}-sent-sum.npy") for g in accepted
                   if (run_dir / f"params-{g}-sent-sum.npy").exists())
        applied_sum = np.load(run_dir / "ps" / "applied-sum.npy")
        if not np.allclose(sent, applied_sum, rtol=1e-6, atol=1e-6):
            problems.append("async: the sum of applied gradients differs from the sum sent")
    for g in accepted:
        p = run_dir / f"params-{g}.npy"
        if not p.exists() or not np.array_equal(np.load(p), ps_final):
            problems.append(f"GPU {g}: final parameters are not the PS's (bit-exact)")
    for g in busy:
        s = res.gpus.get(g, {})
        if s.get("gradients_sent"):
            problems.append(f"busy GPU {g} got work")
    res.exact = not problems


# ----------------------------------------------------------------------------- main


def loss_on_gpu_link(topo: Topology, gpu: str, p: float) -> dict[tuple[str, int], float]:
    """Emulated loss on the edge-switch port toward ``gpu`` (what the GPU receives)."""
    sw = topo.iface(gpu)["switch"]
    return {(sw, topo.port(sw, gpu)): p}


def loss_on_fabric_link(topo: Topology, ps: str, gpu: str, p: float) -> dict[tuple[str, int], float]:
    """Emulated loss on both directions of the first switch-to-switch link on the FIB
    path from ``gpu`` to ``ps`` (subscriptions, gradients, updates and recoveries cross it)."""
    from controller.ndn import fib_routes

    routes = fib_routes(topo)
    sw = topo.iface(gpu)["switch"]
    for _ in range(len(routes)):
        port = routes[sw][ps]
        peer, pport = topo.peer(sw, port)
        if topo.is_host(peer):
            break
        return {(sw, port): p, (peer, pport): p}
    raise DeployError(f"{gpu} and {ps} share a switch: no fabric link between them")


def run_ndn(net: Any, topo: Topology, run_dir: Path, loss: dict[tuple[str, int], float],
            subscriptions: str = "switch", **kw: Any) -> NdnRunResult:
    """Deploy ndn.p4 and run the agents over NDN. ``subscriptions``: ``switch`` (the data
    plane keeps them) or ``controller`` (the persistent-PIT manager runs for the run).
    Guarded: only ``kw["gpus"]`` may subscribe under ``/<ps>/train`` (docs/trust.md)."""
    jobs = [NdnJob(kw["ps"], tuple(kw["gpus"]))] if "ps" in kw and "gpus" in kw else None
    dep = NdnDeployment(topo, net.grpc_addresses(), loss=loss, subscriptions=subscriptions, jobs=jobs)
    rep = dep.deploy()
    _log(f"ndn.p4 deployed ({subscriptions} subscriptions): {rep}")
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        if subscriptions == "controller":
            dep.start_manager(run_dir / "persistent-pit.json")
        res = run_agents(net, topo, run_dir, transport="ndn", **kw)
    finally:
        dep.stop_manager()
    if dep.manager and dep.manager.errors:
        res.problems.append(f"persistent-PIT manager: {dep.manager.errors[:3]}")
        res.exact = False
    res.switches = read_switch_state(topo, net.grpc_addresses())
    return res


def run_ip(net: Any, topo: Topology, run_dir: Path, loss: dict[tuple[str, int], float],
           **kw: Any) -> NdnRunResult:
    """Deploy forward.p4 and run the same agents over UDP/IP (the unicast PS baseline)."""
    rep = deploy_forward(topo, net.grpc_addresses(), loss=loss)
    _log(f"forward.p4 deployed: {rep}")
    return run_agents(net, topo, run_dir, transport="ip", **kw)


def switch_port_bytes(net: Any, topo: Topology) -> dict[tuple[str, int], tuple[int, int]]:
    """``{(switch, port): (tx bytes, rx bytes)}`` of every switch port: the interface
    counters in each switch's namespace (what the switch sent on and received from each
    link; a frame the link's queue dropped is not counted as sent)."""
    out: dict[tuple[str, int], tuple[int, int]] = {}
    for sw in topo.switches():
        text = net.switch(sw).cmd("ip -j -s link show 2>/dev/null")
        try:
            links = json.loads(text)
        except ValueError:
            continue
        for ln in links:
            name = ln.get("ifname", "").split("@")[0]
            if not name.startswith(f"{sw}-eth") or "stats64" not in ln:
                continue
            st = ln["stats64"]
            out[sw, int(name[len(sw) + 4:])] = (int(st["tx"]["bytes"]), int(st["rx"]["bytes"]))
        for name, (tx, rx) in memlink_bytes(net.switch(sw)).items():  # links in memory
            port = int(name[len(sw) + 4:])
            t0, r0 = out.get((sw, port), (0, 0))
            out[sw, port] = (t0 + tx, r0 + rx)
    return out


def link_bytes(topo: Topology, before: dict[tuple[str, int], tuple[int, int]],
               after: dict[tuple[str, int], tuple[int, int]]) -> dict[str, int]:
    """Bytes per directed link ``a->b`` between two :func:`switch_port_bytes` readings:
    a switch's sent bytes on its port, or for a host's uplink what the switch's port
    received."""
    def delta(sw: str, port: int, i: int) -> int:
        return after.get((sw, port), (0, 0))[i] - before.get((sw, port), (0, 0))[i]

    out: dict[str, int] = {}
    for ln in topo.links():
        for a, pa, b, pb in ((ln.a, ln.port_a, ln.b, ln.port_b), (ln.b, ln.port_b, ln.a, ln.port_a)):
            sent = delta(a, pa, 0) if topo.is_switch(a) else delta(b, pb, 1)
            if sent > 0:
                out[f"{a}->{b}"] = sent
    return out


#: the schemes of the baseline comparison, in table order
SCHEMES = {"ndn": "NDN (persistent PIT)", "ip": "IP unicast UDP", "ipmc": "IP multicast UDP",
           "tcp": "TCP PS"}


def run_ipmc(net: Any, topo: Topology, run_dir: Path, loss: dict[tuple[str, int], float],
             group: str = "", **kw: Any) -> NdnRunResult:
    """The IP-multicast PS baseline: ``forward.p4`` with the controller's multicast tree
    from the PS to the GPUs that will subscribe (``controller/ip_multicast.py``), the same
    agents over UDP, each update sent once to the group; lost updates fetched by unicast
    recovery Interests after the probe timer (step 9, as NDN)."""
    from controller.ip_multicast import DEFAULT_GROUP, deploy_multicast

    group = group or DEFAULT_GROUP
    members = [g for g in kw["gpus"] if g not in kw.get("busy", ())]
    rep, tree = deploy_multicast(topo, net.grpc_addresses(), kw["ps"], members, group=group, loss=loss)
    _log(f"forward.p4 deployed with multicast group {group} ({len(tree)} switches on its tree): {rep}")
    return run_agents(net, topo, run_dir, transport="ipmc", group=group, **kw)


def run_tcp(net: Any, topo: Topology, run_dir: Path, loss: dict[tuple[str, int], float],
            **kw: Any) -> NdnRunResult:
    """The TCP PS baseline: ``forward.p4``, the same agents over one kernel TCP connection
    per GPU, each update sent once per GPU. TCP repairs losses, so the agents' own
    retransmission and probe timers are set beyond the run (nothing is sent twice by them)."""
    from experiments.runner import prepare_hosts

    rep = deploy_forward(topo, net.grpc_addresses(), loss=loss)
    _log(f"forward.p4 deployed: {rep}")
    prepare_hosts(net, [kw["ps"], *kw["gpus"]])
    kw = {**kw, "timeout": 1e6, "probe": 1e6}
    return run_agents(net, topo, run_dir, transport="tcp", **kw)


def run_scheme(net: Any, topo: Topology, run_dir: Path, scheme: str,
               loss: dict[tuple[str, int], float], **kw: Any) -> NdnRunResult:
    """Run one scheme of :data:`SCHEMES` and measure the bytes every link carried during
    the training (:attr:`NdnRunResult.link_bytes`, from the switches' port counters)."""
    snap: dict[str, Any] = {}

    def on_start() -> None:
        snap["before"] = switch_port_bytes(net, topo)

    fn = {"ndn": run_ndn, "ip": run_ip, "ipmc": run_ipmc, "tcp": run_tcp}[scheme]
    res = fn(net, topo, run_dir, loss, on_start=on_start, **kw)
    if "before" in snap:
        res.link_bytes = link_bytes(topo, snap["before"], switch_port_bytes(net, topo))
    return res


def scheme_bound(scheme: str, n_gpus: int, values: int, bw_mbps: float, compute_time: float) -> float:
    """A synchronous round's line-rate bound (s) for ``scheme``: the compute step, every
    GPU's gradient into the PS over its access link, then the update out of it: once
    (NDN, IP multicast: the switches replicate) or once per GPU (IP unicast, TCP).
    Payload bytes only (float32 values), so every scheme's real time is above it."""
    copies = 1 if scheme in ("ndn", "ipmc") else n_gpus
    return compute_time + (n_gpus + copies) * values * 4 / (bw_mbps * 1e6 / 8)


def probe_for(n_gpus: int, values: int, bw_mbps: float) -> float:
    """The GPUs' probe timer for a model of ``values`` (s): twice the time the PS's link
    needs for a unicast round (every gradient in, every copy out), at least the agents'
    default of 2 s, so that a large update still on its way is not fetched again."""
    return max(2.0, 1.0 + 2 * 2 * n_gpus * values * 4 * 8 / (bw_mbps * 1e6))


def interest_timeout(n_gpus: int, bw_mbps: float) -> float:
    """The Interest retransmission timeout: long enough for every GPU's window of 64
    segments to cross the PS's link (as ``experiments.compare.ndn_timeout``)."""
    from wire.ndn import SEGMENT_VALUES

    drain = n_gpus * 64 * SEGMENT_VALUES * 4 * 8 / (bw_mbps * 1e6)
    return min(3.5, max(0.5, 1.2 * drain))


def schemes_table(runs: dict[str, NdnRunResult], n: int, values: int, bw: float,
                  compute_time: float) -> Table:
    """One run per scheme: the round time including distribution with the scheme's
    line-rate bound, and the bytes the links carried per round (switch port counters)."""
    t = Table(title=f"NDN vs its baselines, one run each ({n} GPUs, {values:,} values, {bw:g} Mbit/s)")
    for col in ("scheme", "round s incl. distribution", "bound s", "all links B/round",
                "busiest link", "busiest B/round", "exact"):
        t.add_column(col, justify="left" if col in ("scheme", "busiest link") else "right")
    for key, r in runs.items():
        sc = key.split("-")[0]
        if not key.endswith("-sync") or sc not in SCHEMES:
            continue
        final = r.ps.get("version", 0) or 1
        link, busiest = r.busiest_link
        incl = r.round_seconds_incl
        t.add_row(SCHEMES[sc], f"{incl:.2f}" if incl is not None else "-",
                  f"{scheme_bound(sc, n, values, bw, compute_time):.2f}", f"{r.fabric_bytes / final:,.0f}",
                  link, f"{busiest / final:,.0f}", "yes" if r.exact else "NO")
    return t


def round_bound(n_gpus: int, values: int, bw_mbps: float, compute_time: float) -> float:
    """A sync round's line-rate bound (s), the same for every scheme: the compute step,
    then every GPU's gradient into the PS (payload bytes only) over the PS's access link
    at ``bw_mbps``, then at least one copy of the update back out before a GPU can start
    its next step."""
    return compute_time + (n_gpus + 1) * values * 4 / (bw_mbps * 1e6 / 8)


def build_parser() -> argparse.ArgumentParser:
    """Command-line options."""
    p = argtypes.Parser(prog="python -m experiments --mode ndn",
                                description=described(__doc__),
                                epilog="--workers: the GPUs (the PS is h1; default all: every other "
                                       "host); --gpu-loss puts loss on the first GPU's edge port, "
                                       "--loss on any switch port (both apply).")
    p.add_argument("--topo", default="fat-tree", choices=["fat-tree", "leaf-spine"],
                   help="fat-tree (k=--k) or leaf-spine 2 spines, 2 leaves, 3 hosts each")
    p.add_argument("--k", type=argtypes.integer(2), default=4, help="fat-tree arity (default 4)")
    p.add_argument("--busy", type=argtypes.natural, default=1, help="how many of the GPUs decline the task (default 1)")
    p.add_argument("--rounds", type=argtypes.count, default=5, help="synchronous rounds (default 5)")
    p.add_argument("--steps", type=argtypes.count, default=2, help="async: gradients per GPU (default 2)")
    p.add_argument("--values", type=argtypes.values, default=3818, help="model size (default: the digits CNN's 3,818)")
    p.add_argument("--compute-time", type=argtypes.nonnegative, default=0.3, help="seconds per gradient")
    p.add_argument("--model", choices=["synthetic", "digits"], default="synthetic",
                   help="synthetic gradients (checked against a replay) or the digits CNN "
                        "(real training, accuracy reported; --values is then 3818)")
    p.add_argument("--lr", type=argtypes.positive, default=0.1, help="learning rate (default 0.1)")
    p.add_argument("--gpu-loss", type=argtypes.probability, default=0.05, metavar="RATE",
                   help="loss rate on the first GPU's link, toward it (default 0.05; 0: none)")
    p.add_argument("--no-async", action="store_true", help="skip the asynchronous run")
    p.add_argument("--baselines", default="ip,ipmc,tcp", metavar="S,S,...",
                   help="baselines beside NDN: ip (unicast UDP, always run), ipmc (IP multicast), "
                        "tcp (TCP PS) (default all three)")
    p.add_argument("--subscriptions", choices=["switch", "controller"], default="switch",
                   help="who keeps the persistent PIT: the switches' data plane (default) or the "
                        "controller from packet-ins (the older way, to compare)")
    p.add_argument("--cli", action="store_true", help="open a Mininet CLI before teardown")
    opts.add_common(p, "ndn", takes={
        "--seed": {"default": 0}, "--workers": {"default": "all", "allow_all": True},
        "--bw": {"default": 10.0}, "--loss": {"legacy": ("--gpu-loss", "gpu_loss")},
        "--max-time": {"default": 180.0}, "--target": {}, "--out-dir": {}},
        rejects={"--seeds": "it runs one seed (--seed N); run it once per seed",
                 "--target-accuracy": "it runs a fixed number of rounds (time to accuracy: "
                                      "--mode train --scheme ndn)"})
    opts.add_alias(p, "--gpus", "--workers", "workers",
                   type=opts.workers_type(allow_all=True, zero_is_all=True))
    return p


def _run_schemes(args: argparse.Namespace, topo: Topology, run_dir: Path,
                 loss: dict[tuple[str, int], float], baselines: list[str],
                 kw: dict[str, Any]) -> dict[str, NdnRunResult]:
    """NDN and each baseline, synchronous, then NDN asynchronous, on one network."""
    from topologies.network import Network

    runs: dict[str, NdnRunResult] = {}
    with Network(topo, target=args.target, log=_log) as net:
        runs["ndn-sync"] = run_scheme(net, topo, run_dir / "ndn-sync", "ndn", loss, mode="sync",
                                      subscriptions=args.subscriptions, **kw)
        _log(f"NDN sync: {runs['ndn-sync'].seconds:.1f} s, exact: {runs['ndn-sync'].exact}")
        for b in ["ip", *[b for b in baselines if b != "ip"]]:
            runs[f"{b}-sync"] = run_scheme(net, topo, run_dir / f"{b}-sync", b, loss, mode="sync", **kw)
            _log(f"{SCHEMES[b]} sync: {runs[f'{b}-sync'].seconds:.1f} s, exact: {runs[f'{b}-sync'].exact}")
        if not args.no_async:
            runs["ndn-async"] = run_ndn(net, topo, run_dir / "ndn-async", loss, mode="async",
                                        subscriptions=args.subscriptions, **kw)
            _log(f"NDN async: {runs['ndn-async'].seconds:.1f} s, exact: {runs['ndn-async'].exact}")
        if args.cli:
            net.cli()
    return runs


def _check_options(args: argparse.Namespace) -> tuple[Any, ...]:
    """The topology, PS, GPUs, busy GPUs, loss and baselines the options ask for;
    OptionError (or the topology's, the loss's) when they cannot work together."""
    topo = fat_tree(args.k, bw=args.bw) if args.topo == "fat-tree" else leaf_spine(2, 2, 3, bw=args.bw)
    hosts = topo.hosts()
    ps = hosts[0]
    argtypes.check_at_most("--workers", args.workers, len(hosts) - 1,
                           f"{topo.name} has {len(hosts) - 1} hosts besides the PS")
    gpus = hosts[1:1 + args.workers] if args.workers else hosts[1:]
    argtypes.check_at_most("--busy", args.busy, len(gpus) - 1,
                           f"at least one of the {len(gpus)} GPUs must take the task")
    busy = tuple(gpus[-args.busy:]) if args.busy else ()
    loss = loss_on_gpu_link(topo, gpus[0], args.gpu_loss) if args.gpu_loss else {}
    loss |= check_loss(topo, opts.loss_dict(args.loss))
    baselines = [b for b in args.baselines.split(",") if b]
    if any(b not in ("ip", "ipmc", "tcp") for b in baselines):
        raise argtypes.OptionError(f"--baselines: choose from ip, ipmc, tcp, got {args.baselines!r}")
    return topo, ps, gpus, busy, loss, baselines


def main(argv: list[str]) -> int:
    """Entry point of ``--mode ndn``."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:  # every check before anything starts
        topo, ps, gpus, busy, loss, baselines = _check_options(args)
    except (argtypes.OptionError, DeployError, TopologyError) as e:
        argtypes.fail(parser, e)
    if os.geteuid() != 0:
        console.print("[red]the experiment needs root (network namespaces)[/red]")
        return 2
    lossy = gpus[0]
    run_dir = Path(args.out_dir).resolve() / time.strftime("ndn-%Y%m%d-%H%M%S")
    run_dir.mkdir(parents=True, exist_ok=True)
    console.save_to(run_dir)  # every table in full: tables.txt, tables.json, CSV
    values = 3818 if args.model == "digits" else args.values
    kw = dict(ps=ps, gpus=gpus, busy=busy, rounds=args.rounds, steps=args.steps, values=values,
              seed=args.seed, compute_time=args.compute_time, max_time=args.max_time,
              model=args.model, lr=args.lr)
    _log(f"{topo.name}: PS {ps}, {len(gpus)} GPUs ({len(busy)} busy: {', '.join(busy) or '-'}), "
         f"{args.model} model, {values} float32 values, {args.rounds} sync rounds, loss {args.gpu_loss:g} toward {lossy}"
         + (f"; port loss {', '.join(f'{sw}:{pt}={r:g}' for (sw, pt), r in loss.items())}" if args.loss else ""))
    runs = _run_schemes(args, topo, run_dir, loss, baselines, kw)
    n = len(gpus) - len(busy)
    for t in (*round_tables(runs["ndn-sync"], runs["ip-sync"], n), runs_table(runs), pit_table(runs["ndn-sync"])):
        console.print(t)
    summary = {"topology": topo.name, "ps": ps, "gpus": gpus, "busy": list(busy), "lossy_gpu": lossy,
               "gpu_loss": args.gpu_loss, "loss": {f"{sw}:{pt}": r for (sw, pt), r in loss.items()},
               "values": values, "model": args.model,
               "runs": {k: asdict(v) for k, v in runs.items()},
               "distribute_ratio": (runs["ndn-sync"].distribute_bytes_per_round
                                    / runs["ip-sync"].distribute_bytes_per_round
                                    if runs["ip-sync"].distribute_bytes_per_round else None),
               "round_time_ratio": (runs["ndn-sync"].round_seconds / runs["ip-sync"].round_seconds
                                    if runs["ip-sync"].round_seconds else None)}
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    console.print(schemes_table(runs, n, values, args.bw, args.compute_time))
    bound = round_bound(n, values, args.bw, args.compute_time)
    _log(f"line-rate bound per sync round (compute, then {n} gradients in and one update out "
         f"over the PS's {args.bw:g} Mbit/s link, payload only): {bound:.3f} s; measured NDN "
         f"{runs['ndn-sync'].round_seconds:.3f} s, IP {runs['ip-sync'].round_seconds:.3f} s")
    plot_ndn_vs_ip(run_dir / "ndn_vs_ip.png", runs["ndn-sync"], runs["ip-sync"], bound)
    console.print(f"results: {run_dir}/summary.json, {run_dir}/ndn_vs_ip.png")
    return 0 if all(r.exact for r in runs.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
