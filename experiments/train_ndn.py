"""The NDN parameter server (ndn, ``hosts/ndn/``, ``ndn.p4``) in the time-to-accuracy
harness (``experiments/train.py``, "Plugins").

The same work as every other scheme: the PS and the GPUs run with ``--train-model``
(:class:`hosts.ndn.harness.HarnessWork`), so the PS holds ``hosts.training.build_model(
--model, seed)`` and sends its initial parameters to every GPU (the training content,
step 3); GPU ``i`` (``i`` = its place in the shared topology's training hosts) computes the
gradient of round r's batch of shard ``i`` of ``load_data(--data, seed)``, per-rank batch
``--batch``, batch order ``hosts.training.batches`` cut to the plan's steps per epoch,
``--slow`` and ``--compute-time`` as ``hosts/trainer.py`` applies them; the PS collects
every gradient (step 5), sums them in rank order in float32, applies ``w <- w - lr * sum
/ n`` with ``hosts.training.apply_gradients`` and sends the new parameters once as
distribution Data (step 6) that the switches replicate along the persistent PIT. The
parameters travel as little-endian float32 segments, so every GPU ends each round with the
PS's exact parameters (bit for bit; the hashes of the PS's and every GPU's weights are
compared at every evaluation and at the end).

The PS evaluates the new parameters before distributing them (at version 0, every
``plan.eval_every`` versions and at each epoch's end); the GPUs wait meanwhile, as the
trainer's ranks wait for rank 0's evaluation, and the evaluation time is left out of the
training clock ``t``. The clock starts when every GPU has its initial parameters and has
subscribed (the trainer's starts after its rendezvous); a GPU computes gradient 0 when the
PS first asks for it.

Synchronous only, and no ``--kill``: the synchronous PS waits for every GPU's gradient,
so a lost GPU stops the training (``KILL_SUPPORTED = False``). The topology is the shared
one (PS = ``shared.ps``, GPUs = ``shared.workers``); ndn.p4's transient PIT records in-ports
1..8 only, so a path between the PS and a GPU through a switch port above 8 is refused.
Each run (seed ``S``) trains under its own name ``/<PS>/t<S>`` with the persistent-PIT
manager running for the run's length.

Record: ``curve`` from the PS's evaluations, ``iterations`` = versions the PS made,
``compute_s_per_iter`` = GPU 0's compute (slow-down and fixed compute included) per
round, ``sync_s_per_iter`` = the rest of the PS's training clock per round,
``retransmissions`` = Interest retransmissions of every agent + updates the GPUs
recovered by probe, ``ps_rx_bytes`` = what the PS's NIC received during the run,
``agent_cpu_s`` = CPU of the PS and the GPUs from the training's start.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.runner import finish, json_lines, last_line, spawn
from experiments.runner import log as _log
from experiments.train import HarnessError, Plan, RunRecord, Setting

P4 = "ndn.p4"
KILL_SUPPORTED = False
#: NDN's IP baselines, the same agents and work over another transport: harness scheme ->
#: (``--transport`` of the agents, P4 programs)
BASELINES = {"ndn-ipmc": ("ipmc", "forward.p4 + multicast tree"), "ndn-tcp": ("tcp", "forward.p4")}
#: the PS serves recovery Interests this long after the last version (GPU probe timers are <= 2 s)
PS_LINGER_S = 3.0


def training_name(seed: int) -> str:
    """The NDN training name ``T`` of seed ``seed``'s run (one per run)."""
    return f"t{seed}"


def path_ports(topo: Any, routes: dict[str, dict[str, int]], a: str, b: str) -> list[tuple[str, int]]:
    """``(switch, in-port)`` of every switch on the FIB path (``controller.ndn.fib_routes``)
    from host ``a`` to host ``b``."""
    sw = topo.iface(a)["switch"]
    port = topo.port(sw, a)
    out = []
    for _ in range(len(routes) + 1):
        out.append((sw, port))
        nxt = routes[sw][b]
        node, nport = topo.peer(sw, nxt)
        if topo.is_host(node):
            return out
        sw, port = node, nport
    raise HarnessError(f"ndn: no loop-free FIB path from {a} to {b}")


def setting(args: argparse.Namespace, shared: Setting) -> Setting:
    """The shared topology itself: PS ``shared.ps``, GPUs ``shared.workers``; HarnessError
    when ndn.p4 cannot carry the training there (PIT in-ports, name bounds)."""
    from controller.ndn import fib_routes
    from controller.ndn.pit import PIT_PORTS
    from wire.ndn import NameBoundsError, check_name, name_of

    if shared.ps is None:
        raise HarnessError("ndn: the topology has no PS host")
    topo = shared.topo
    routes = fib_routes(topo)
    for w in shared.workers:
        for a, b in ((w, shared.ps), (shared.ps, w)):
            for sw, port in path_ports(topo, routes, a, b):
                if not 1 <= port <= PIT_PORTS:
                    raise HarnessError(f"ndn: the path {a} -> {b} enters {sw} on port {port}; ndn.p4's "
                                       f"PIT records in-ports 1..{PIT_PORTS} only (use a topology whose "
                                       f"switches have at most {PIT_PORTS} ports on the training paths)")
        try:   # the longest names of a run (version and segment numbers of 4 bytes)
            check_name(name_of(w, shared.ps, training_name(args.seed + args.seeds), f"v={2**31}",
                               f"seg={2**31}"))
            check_name(name_of(b"*distribute*", shared.ps, training_name(args.seed + args.seeds),
                               f"v={2**31}", f"seg={2**31}"))
        except NameBoundsError as e:
            raise HarnessError(f"ndn: {e}") from None
    return shared


def deploy(net: Any, setting: Setting, args: argparse.Namespace, plan: Plan) -> None:
    """``ndn.p4`` on every switch (FIB, PIT groups, the plan's emulated loss), subscriptions
    guarded: only the GPUs may subscribe, to one training name per seed (docs/trust.md)."""
    from controller.ndn import NdnDeployment, NdnJob

    assert setting.ps is not None
    jobs = [NdnJob(setting.ps, tuple(setting.workers), training_name(s))
            for s in range(args.seed, args.seed + args.seeds)]
    rep = NdnDeployment(setting.topo, net.grpc_addresses(), loss=plan.loss, jobs=jobs).deploy()
    _log(f"ndn.p4 deployed: {rep}")


def baseline_setting(args: argparse.Namespace, shared: Setting) -> Setting:
    """The IP baselines (:data:`BASELINES`): the shared topology; the
    agents still name their packets as NDN does, so only the name bounds apply."""
    from wire.ndn import NameBoundsError, check_name, name_of

    if shared.ps is None:
        raise HarnessError("ndn baselines: the topology has no PS host")
    for w in shared.workers:
        try:
            check_name(name_of(w, shared.ps, training_name(args.seed + args.seeds), f"v={2**31}",
                               f"seg={2**31}"))
        except NameBoundsError as e:
            raise HarnessError(f"ndn baselines: {e}") from None
    return shared


def deploy_baseline(transport: str, net: Any, setting: Setting, plan: Plan) -> None:
    """``forward.p4`` for an IP baseline: with the multicast tree from the PS to every
    GPU (``ipmc``), or plain (``tcp``)."""
    from controller.deploy import deploy as deploy_forward
    from experiments.runner import prepare_hosts

    assert setting.ps is not None
    if transport == "ipmc":
        from controller.ip_multicast import deploy_multicast

        rep, tree = deploy_multicast(setting.topo, net.grpc_addresses(), setting.ps,
                                     list(setting.workers), loss=plan.loss)
        _log(f"forward.p4 deployed with the multicast tree ({len(tree)} switches): {rep}")
    else:
        rep = deploy_forward(setting.topo, net.grpc_addresses(), loss=plan.loss)
        _log(f"forward.p4 deployed: {rep}")
    prepare_hosts(net, [setting.ps])


@dataclass(frozen=True)
class IpBaseline:
    """The plugin of one IP baseline (``ndn-ipmc``: UDP, updates once to the multicast
    tree; ``ndn-tcp``: one TCP connection per GPU): this module's training, another
    transport, ``forward.p4``. Synchronous only, no ``--kill``."""

    scheme: str
    transport: str
    P4: str
    KILL_SUPPORTED: bool = False

    def setting(self, args: argparse.Namespace, shared: Setting) -> Setting:
        """The shared topology (name bounds checked)."""
        return baseline_setting(args, shared)

    def deploy(self, net: Any, setting: Setting, args: argparse.Namespace, plan: Plan) -> None:
        """``forward.p4`` for this baseline."""
        deploy_baseline(self.transport, net, setting, plan)

    def run(self, net: Any, args: argparse.Namespace, plan: Plan, setting: Setting, seed: int,
            d: Path) -> RunRecord:
        """One synchronous training run."""
        return run(net, args, plan, setting, seed, d, transport=self.transport, scheme=self.scheme)


def plugin(scheme: str) -> Any:
    """The plugin of harness scheme ``scheme``: this module for ``ndn``, an
    :class:`IpBaseline` for the names of :data:`BASELINES`."""
    if scheme == "ndn":
        return sys.modules[__name__]
    transport, p4 = BASELINES[scheme]
    return IpBaseline(scheme, transport, p4)


def _nic_rx_bytes(net: Any, host: str, iface: str) -> int:
    from hosts.net import NicCounters, parse_net_dev

    return parse_net_dev(net.host(host).cmd("cat /proc/net/dev")).get(iface, NicCounters()).rx_bytes


def run(net: Any, args: argparse.Namespace, plan: Plan, setting: Setting, seed: int, d: Path,
        transport: str = "ndn", scheme: str = "ndn") -> RunRecord:
    """One synchronous training run of the NDN PS and its GPUs (see the module doc);
    ``transport`` ``ipmc`` or ``tcp``: the same agents as an IP baseline (``scheme``)."""
    import json

    from controller.ip_multicast import DEFAULT_GROUP
    from controller.ndn import NdnDeployment

    rec = RunRecord(scheme, seed)
    topo, ps, gpus = setting.topo, setting.ps, list(setting.workers)
    assert ps is not None
    rounds = args.epochs * plan.steps_per_epoch
    name = training_name(seed)
    bound = args.max_time + 30     # the agents' own bound; finish() kills at max_time + 60
    ip = {"--hosts": json.dumps({h: topo.host_ip(h) for h in topo.hosts()})} if transport != "ndn" else {}
    if transport == "ipmc":
        ip["--group"] = DEFAULT_GROUP
    if transport == "tcp":        # TCP repairs losses: no application retransmission
        ip["--timeout"] = "1000000"
    gpu_timers = ["--probe-init", "1000000", "--probe-max", "1000000"] if transport == "tcp" else []
    common = ["--train", name, "--transport", transport, *[x for kv in ip.items() for x in kv],
              "--mode", "sync", "--rounds", str(rounds),
              "--values", str(plan.parameters), "--seed", str(seed), "--max-time", repr(bound),
              "--train-model", args.model, "--data", args.data, "--batch", str(plan.batch),
              "--steps-per-epoch", str(plan.steps_per_epoch), "--eval-every", str(plan.eval_every)]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    py = sys.executable
    dep = NdnDeployment(topo, net.grpc_addresses())
    if transport == "ndn":
        dep.start_manager(d / "persistent-pit.json")
    t0 = time.monotonic()
    deadline = t0 + args.max_time + 60
    try:
        rx0 = _nic_rx_bytes(net, ps, topo.iface(ps)["name"])
        procs = [spawn(net.host(g), d / f"gpu{rank}", [
            py, "-m", "hosts.ndn.gpu", "--me", g, "--gpu-index", str(rank), "--ps", ps,
            "--iface", topo.iface(g)["name"], "--world", str(len(gpus)),
            "--slow", repr(plan.slow.get(g, 1.0)), "--compute-time", repr(args.compute_time), *common,
            *gpu_timers],
            env=env) for rank, g in enumerate(gpus)]
        time.sleep(0.3)
        psp = spawn(net.host(ps), d / "ps", [
            py, "-m", "hosts.ndn.ps", "--me", ps, "--gpus", ",".join(gpus), "--iface", topo.iface(ps)["name"],
            "--lr", repr(plan.lr), "--assign-timeout", repr(min(60.0, bound)),
            "--linger", repr(PS_LINGER_S), *common], env=env)
        rc, out, err = finish(psp, d / "ps", max(1.0, deadline - time.monotonic()))
        ps_lines = json_lines(out)
        if rc != 0:
            rec.error = f"PS exited {rc}: {last_line(err)}"
        gpu_lines = []
        for rank, p in enumerate(procs):
            grc, gout, gerr = finish(p, d / f"gpu{rank}", max(1.0, deadline - time.monotonic()))
            gpu_lines.append(json_lines(gout))
            if grc != 0 and not rec.error:
                rec.error = f"GPU {gpus[rank]} (rank {rank}) exited {grc}: {last_line(gerr)}"
        rec.ps_rx_bytes = _nic_rx_bytes(net, ps, topo.iface(ps)["name"]) - rx0
    finally:
        dep.stop_manager()
    if dep.manager is not None and dep.manager.errors and not rec.error:
        rec.error = f"persistent-PIT manager: {dep.manager.errors[:3]}"
    fill(rec, ps_lines, gpu_lines, rounds, plan)
    return rec


def fill(rec: RunRecord, ps_lines: list[dict[str, Any]], gpu_lines: list[list[dict[str, Any]]],
         rounds: int, plan: Plan) -> None:
    """The record's figures from the agents' JSON lines (evaluations, then a summary)."""
    evals = [x for x in ps_lines if "accuracy" in x and "step" in x]
    ps_sum = next((x for x in reversed(ps_lines) if "version" in x), {})
    gpu_sums = [next((x for x in reversed(lines) if "version" in x), {}) for lines in gpu_lines]
    rec.curve = [{"t": x["t"], "accuracy": x["accuracy"], "heldout": x.get("heldout"),
                  "epoch": x["epoch"], "step": x["step"]} for x in evals]
    rec.iterations = int(ps_sum.get("version", 0))
    rec.parameters = int(ps_sum.get("parameters", plan.parameters))
    rec.train_s = float(ps_sum.get("train_s") or (evals[-1]["t"] if evals else 0.0))
    compute0 = float(gpu_sums[0].get("compute_s", 0.0)) if gpu_sums else 0.0
    if rec.iterations:
        rec.compute_s_per_iter = compute0 / rec.iterations
        rec.sync_s_per_iter = max(0.0, rec.train_s - compute0) / rec.iterations
    rec.agent_cpu_s = round(float(ps_sum.get("cpu_s", 0.0) or 0.0)
                            + sum(float(s.get("cpu_s", 0.0) or 0.0) for s in gpu_sums), 3)
    rec.retransmissions = (int(ps_sum.get("retransmissions", 0))
                           + sum(int(s.get("retransmissions", 0)) for s in gpu_sums)
                           + sum(int(s.get("updates_recovered_by_probe", 0)) for s in gpu_sums))
    # the PS's weights at every evaluation, and every GPU's at the same versions, and at the end
    ps_hashes = [(x["step"], x["weights"]) for x in evals]
    gpu_hashes = [[(x["step"], x["weights"]) for x in lines if x.get("role") == "gpu" and "step" in x]
                  for lines in gpu_lines]
    rec.models_identical = (bool(ps_hashes) and all(h == ps_hashes for h in gpu_hashes)
                            and bool(ps_sum.get("weights"))
                            and all(s.get("weights") == ps_sum["weights"] for s in gpu_sums))
    rec.final_weights = str(ps_sum.get("weights") or "")
    if not rec.error:
        if ps_sum.get("error"):
            rec.error = str(ps_sum["error"])
        elif rec.iterations != rounds:
            rec.error = f"the PS reached version {rec.iterations} of {rounds} (max time?)"
        elif not all(s.get("state") == "done" for s in gpu_sums):
            rec.error = "a GPU did not finish: " + ", ".join(
                f"{s.get('me', '?')}: {s.get('state', 'no summary')}" for s in gpu_sums if s.get("state") != "done")
    rec.ok = not rec.error
