"""Technique 4: BML on a live BCube, and its fat-tree baselines (docs/bcube.md).

* :func:`bcube_plan` / :func:`fat_tree_plan` -- the JSON plan every agent of a run reads
  (scheme, size, every server's addresses and interfaces per level, gradient length,
  fixed-point scale);
* :func:`line_rate_model` -- the time each scheme needs when its busiest NIC runs at line
  rate (exact byte counts from the schedule, TCP/IP/Ethernet overhead included);
* :func:`run_scheme` -- run one scheme on a running :class:`topologies.network.Network`:
  start one agent per server, release them together, check every server's result
  element by element against the exact fixed-point sum, read switch port counters;
* :func:`bcube_network_topology` / :func:`baseline_fat_tree` -- the two networks.

BCube needs no BCube-specific data plane: ``forward.p4`` with
:func:`controller.routing.compute_routes` gives every switch a /32 route to each NIC on
it and nothing else (no switch-to-switch links exist), so every packet crosses exactly
one switch. Loss is the egress ``LinkEmulation`` stage (``loss={(switch, port): p}``).
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from controller.p4runtime import REPO_ROOT
from hosts.bml.schedule import BcubeSchedule, ScheduleError, cut
from hosts.fixedpoint import max_scale_bits, quantize
from hosts.packets import BCUBE_HEADER_LEN, BCUBE_TCP_PORT
from topologies import bcube, fat_tree
from topologies.base import Topology

__all__ = [
    "AGENTS",
    "SCHEMES",
    "WIRE_PER_PAYLOAD",
    "SchemeResult",
    "baseline_fat_tree",
    "bcube_network_topology",
    "bcube_plan",
    "choose_scale_bits",
    "exact_sum",
    "fat_tree_plan",
    "gradients",
    "host_sent_bytes",
    "line_rate_model",
    "nic_payload_bytes",
    "run_scheme",
    "switch_port_bytes",
]

#: Agent module per scheme.
AGENTS = {"bml": "hosts.bml", "sharded_ps": "hosts.bml.baselines",
          "ring": "hosts.bml.baselines", "ps": "hosts.bml.baselines"}
SCHEMES = tuple(AGENTS)
#: Wire bytes per payload byte on a loaded link direction: a full TCP segment carries
#: 1448 payload bytes in a 1514-byte frame (14 Ethernet + 20 IP + 32 TCP with
#: timestamps; htb counts the Ethernet header, not preamble/FCS), and the delayed ACKs
#: of the opposite direction's data (66 bytes per two segments) share the link.
WIRE_PER_PAYLOAD = (1514 + 33) / 1448
#: Highest fixed-point scale used (more precision than float32 has is useless).
MAX_SCALE_BITS = 30


# ----------------------------------------------------------------------------- networks
def bcube_network_topology(n: int, k: int, bw: float) -> Topology:
    """BCube(``n``, ``k``) with ``bw`` Mbit/s links; bad sizes raise ScheduleError."""
    BcubeSchedule(n, k, 1)  # the seed's constraints (N, k >= 2), one clear error
    if n**k > 16 * 16:
        raise ScheduleError(f"BCube({n}, {k}) has {n**k} servers: too many for this machine")
    return bcube(n, k, bw=bw)


def baseline_fat_tree(servers: int, bw: float, fabric_x: float = 4.0) -> Topology:
    """The smallest fat-tree with ``servers`` hosts; host links ``bw`` Mbit/s, switch-to-
    switch links ``fabric_x * bw`` (an ideal non-blocking fabric, the BML paper's
    assumption: ECMP hash collisions would otherwise make the baselines slower than
    any host-link model)."""
    k = 4
    while k**3 // 4 < servers:
        k += 2
    topo = fat_tree(k, bw=bw)
    for u, v, data in topo.graph.edges(data=True):
        if topo.is_switch(u) and topo.is_switch(v):
            data["capacity"] = float(bw * fabric_x)
    return topo


# ----------------------------------------------------------------------------- plans
def gradients(servers: int, values: int, seed: int) -> list[np.ndarray]:
    """Gradient-like float32 vectors: mostly small, a few larger."""
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(values) * 0.01).astype(np.float32) for _ in range(servers)]


def choose_scale_bits(grads: list[np.ndarray]) -> int:
    """The largest scale (<= 30) at which every gradient's fixed-point sum fits int32."""
    bits = [max_scale_bits(g, len(grads)) for g in grads]
    if any(b is None for b in bits):
        raise ValueError("a gradient is too large for int32 fixed point even at scale 0")
    return min(MAX_SCALE_BITS, *(b for b in bits if b is not None))


def exact_sum(grads: list[np.ndarray], scale_bits: int) -> np.ndarray:
    """The exact fixed-point sum every server must end with (int64)."""
    return sum(quantize(g, scale_bits, len(grads)).astype(np.int64) for g in grads)


def bcube_plan(topo: Topology, n: int, k: int, values: int, scale_bits: int,
               port: int = BCUBE_TCP_PORT, pipeline: int = 1) -> dict[str, Any]:
    """The BML plan: server ``s`` is host ``h{s+1}``, its level-``l`` NIC is ``eth{l}``;
    ``pipeline`` pieces per parameter set (:func:`hosts.bml.agent.run_bml`)."""
    BcubeSchedule(n, k, values)
    hosts = topo.hosts()
    if len(hosts) != n**k:
        raise ScheduleError(f"topology {topo.name} has {len(hosts)} hosts, BCube({n}, {k}) {n**k}")
    return {
        "scheme": "bml", "n": n, "k": k, "servers": n**k, "values": values, "pipeline": pipeline,
        "scale_bits": scale_bits, "port": port, "hosts": hosts,
        "ips": [[topo.host_ip(h, lvl) for lvl in range(k)] for h in hosts],
        "ifaces": [[topo.iface(h, lvl)["name"] for lvl in range(k)] for h in hosts],
    }


def fat_tree_plan(topo: Topology, scheme: str, servers: int, values: int, scale_bits: int,
                  port: int = BCUBE_TCP_PORT, pieces: int | None = None) -> dict[str, Any]:
    """A baseline plan on the first ``servers`` hosts of a fat-tree (NIC 0 each);
    ``pieces`` per shard (sharded PS, default 8) or per chunk (ring, default 4)."""
    if scheme not in SCHEMES or scheme == "bml":
        raise ValueError(f"unknown baseline {scheme!r} (choose from sharded_ps, ring, ps)")
    hosts = topo.hosts()[:servers]
    if len(hosts) < servers or servers < 2:
        raise ValueError(f"{topo.name} cannot host {servers} servers")
    return {
        "scheme": scheme, "servers": servers, "values": values, "scale_bits": scale_bits,
        "port": port, "hosts": hosts,
        "pieces": pieces or (8 if scheme == "sharded_ps" else 4),
        "ips": [[topo.host_ip(h, 0)] for h in hosts],
        "ifaces": [[topo.iface(h, 0)["name"]] for h in hosts],
    }


# ----------------------------------------------------------------------------- model
def nic_payload_bytes(scheme: str, servers: int, values: int, n: int = 0, k: int = 0) -> int:
    """Bytes (message headers included) the busiest NIC must carry one after the other:
    the larger of its two directions when they overlap, their sum for the single PS."""
    h = BCUBE_HEADER_LEN
    if scheme == "bml":
        sched = BcubeSchedule(n, k, values)
        # headers: one message per peer per stage per thread on each level's NIC
        msgs = 2 * (n - 1) * k  # 2k stages per thread, k threads spread over k NICs
        return int(sched.nic_bytes().max()) + msgs * h
    shards = [b - a for a, b in cut((0, values), servers)]
    if scheme in ("sharded_ps", "ring"):
        # push (S-1) shards out and pull (S-1) sums in; ring: 2(S-1) chunk steps
        return 2 * (servers - 1) * (4 * max(shards) + h)
    if scheme == "ps":
        return 2 * (servers - 1) * (4 * values + h)
    raise ValueError(f"unknown scheme {scheme!r}")


def line_rate_model(scheme: str, servers: int, values: int, bw_mbit: float,
                    n: int = 0, k: int = 0) -> float:
    """Seconds when the busiest NIC direction runs at ``bw_mbit`` Mbit/s (docs/bcube.md).

    BML: the k threads use the k NICs in parallel, each NIC carries ``2 M (1 - 1/S) / k``;
    sharded PS and ring: ``2 M (1 - 1/S)`` on the one NIC; single PS: its NIC receives
    ``(S - 1) M`` then sends ``(S - 1) M`` (the sends wait for the whole sum).
    """
    payload = nic_payload_bytes(scheme, servers, values, n, k)
    return payload * WIRE_PER_PAYLOAD * 8 / (bw_mbit * 1e6)


# ----------------------------------------------------------------------------- running
@dataclass
class SchemeResult:
    """One synchronization run of one scheme."""

    scheme: str
    topology: str
    servers: int
    values: int
    bw_mbit: float
    seconds: float = 0.0
    model_s: float = 0.0
    exact: bool = False
    mismatches: int = 0
    #: per server: {iface: [rx_bytes, tx_bytes]} NIC counters over the run
    nic: list[dict[str, list[int]]] = field(default_factory=list)
    #: per server: {level: payload bytes sent}
    tx_payload: list[dict[str, int]] = field(default_factory=list)
    #: bytes that entered switch ports / bytes the servers sent (1.0: one switch per packet)
    switch_hops: float = 0.0
    start: float = 0.0
    reports: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        """Measured / line-rate model."""
        return self.seconds / self.model_s if self.model_s else math.nan

    def max_nic_tx(self) -> int:
        """Most bytes any one NIC sent."""
        return max((v[1] for srv in self.nic for v in srv.values()), default=0)

    def level_tx(self) -> list[int]:
        """Mean bytes sent per NIC, by level (NIC index)."""
        if not self.nic:
            return []
        levels = max(len(srv) for srv in self.nic)
        out = []
        for lvl in range(levels):
            vals = [list(srv.values())[lvl][1] for srv in self.nic if len(srv) > lvl]
            out.append(int(sum(vals) / len(vals)))
        return out


def _spawn(host: Any, base: Path, argv: list[str]) -> Any:
    with open(base.with_suffix(".out"), "wb") as out, open(base.with_suffix(".err"), "wb") as err:
        return host.popen(argv, cwd=str(REPO_ROOT), stdout=out, stderr=err)


def _dev_bytes(node: Any, prefix: str, column: int) -> int:
    """Sum of one ``/proc/net/dev`` column over ``node``'s interfaces named ``prefix*``
    (read inside its namespace; column 0 is rx bytes, 8 is tx bytes)."""
    total = 0
    for line in node.cmd("cat /proc/net/dev").splitlines()[2:]:
        name, _, rest = line.partition(":")
        if name.strip().startswith(prefix):
            total += int(rest.split()[column])
    return total


def switch_port_bytes(net: Any, topo: Topology) -> dict[str, int]:
    """``{switch: bytes received on all its data ports}`` (kernel interface counters)."""
    return {sw: _dev_bytes(net.switch(sw), f"{sw}-eth", 0) for sw in topo.switches()}


def host_sent_bytes(net: Any, hosts: list[str]) -> dict[str, int]:
    """``{host: bytes sent on all its NICs}`` (kernel interface counters)."""
    return {h: _dev_bytes(net.host(h), f"{h}-eth", 8) for h in hosts}


def run_scheme(net: Any, topo: Topology, plan: dict[str, Any], grads: list[np.ndarray],
               run_dir: Path, bw_mbit: float, max_time: float = 300.0,
               log: Any = None) -> SchemeResult:
    """Run ``plan`` on the live network and check every server's sum (see module doc)."""
    scheme = plan["scheme"]
    s_count = plan["servers"]
    d = run_dir / scheme
    d.mkdir(parents=True, exist_ok=True)
    for f in d.glob("ready-*"):
        f.unlink()
    go = d / "go.json"
    go.unlink(missing_ok=True)
    plan_path = d / "plan.json"
    plan_path.write_text(json.dumps(plan))
    res = SchemeResult(scheme, topo.name, s_count, plan["values"], bw_mbit,
                       model_s=line_rate_model(scheme, s_count, plan["values"], bw_mbit,
                                               plan.get("n", 0), plan.get("k", 0)))
    procs = []
    for s, host in enumerate(plan["hosts"]):
        gpath = d / f"grad-{s}.npy"
        np.save(gpath, grads[s])
        procs.append(_spawn(net.host(host), d / f"agent-{s}", [
            sys.executable, "-m", AGENTS[scheme], "--plan", str(plan_path), "--server", str(s),
            "--gradient", str(gpath), "--out", str(d / f"out-{s}.npy"), "--ready-dir", str(d),
            "--go", str(go), "--max-time", str(max_time),
            # a loaded 2-core machine needs tens of seconds to start 16 agents and open
            # S(S-1)/2 connections: generous, the sync time is measured from "go" anyway
            "--connect-timeout", "150"]))
    try:
        deadline = time.monotonic() + 180
        while len(list(d.glob("ready-*"))) < s_count:
            dead = [s for s, p in enumerate(procs) if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                errs = {s: (d / f"agent-{s}.err").read_text()[-400:] for s in dead}
                raise RuntimeError(f"{scheme}: agents not ready (exited: {dead}) {errs}")
            time.sleep(0.05)
        before = switch_port_bytes(net, topo)
        sent_before = host_sent_bytes(net, plan["hosts"])
        res.start = time.time() + 0.3
        tmp = d / "go.tmp"
        tmp.write_text(json.dumps({"start": res.start}))
        tmp.rename(go)  # atomic: agents never read half a file
        failed = []
        for s, p in enumerate(procs):
            try:
                p.wait(timeout=max_time + 60)
            except Exception:  # noqa: BLE001 (a hung agent is a failure, reported below)
                p.kill()
                p.wait()
            if p.returncode != 0:
                failed.append(f"server {s}: exit {p.returncode}: "
                              f"{(d / f'agent-{s}.err').read_text()[-600:]}")
        if failed:
            raise RuntimeError(f"{scheme} failed:\n" + "\n".join(failed))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    after = switch_port_bytes(net, topo)
    sent = sum(host_sent_bytes(net, plan["hosts"]).values()) - sum(sent_before.values())
    expected = exact_sum(grads, plan["scale_bits"])
    for s in range(s_count):
        rep = json.loads((d / f"agent-{s}.out").read_text().strip().splitlines()[-1])
        res.reports.append(rep)
        got = np.load(d / f"out-{s}.npy").astype(np.int64)
        res.mismatches += int(np.count_nonzero(got != expected))
        res.nic.append(rep["nic"])
        res.tx_payload.append(rep["tx_payload"])
    res.exact = res.mismatches == 0
    res.seconds = max(r["end"] for r in res.reports) - res.start
    switch_rx = sum(after.values()) - sum(before.values())
    res.switch_hops = switch_rx / sent if sent else math.nan
    if log:
        log(f"{scheme} on {topo.name}: {res.seconds:.2f} s (model {res.model_s:.2f} s), "
            f"exact: {res.exact}, switch hops per byte {res.switch_hops:.3f}")
    return res

