"""Run one synchronization scheme's agents on a live network and check the sum.

The plans come from :mod:`controller.bcube` (BML on a BCube; ring, single PS and sharded
PS on a fat-tree; k concurrent rings or sharded PSs on a k-rail network); this module starts ``AGENTS[scheme]`` on every server with the plan,
waits for them, checks each server's result against the exact sum and reads the NIC and
switch-port byte counters. Used by ``--mode bcube`` and ``--mode compare``.
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

from controller.bcube import AGENTS, exact_sum, line_rate_model
from experiments.runner import spawn
from hosts.net import parse_net_dev
from topologies.base import Topology


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


def _dev_bytes(node: Any, prefix: str, field: str) -> int:
    """Sum of one counter (``rx_bytes``, ``tx_bytes``, ...) over ``node``'s interfaces
    named ``prefix*`` (``/proc/net/dev`` read inside its namespace)."""
    nics = parse_net_dev(node.cmd("cat /proc/net/dev"))
    return sum(getattr(c, field) for name, c in nics.items() if name.startswith(prefix))


def switch_port_bytes(net: Any, topo: Topology) -> dict[str, int]:
    """``{switch: bytes received on all its data ports}`` (kernel interface counters, plus
    what its in-memory links carried)."""
    from experiments.accounting import memlink_counters

    return {sw: _dev_bytes(net.switch(sw), f"{sw}-eth", "rx_bytes")
            + sum(c["rx_bytes"] for c in memlink_counters(net.switch(sw)).values())
            for sw in topo.switches()}


def host_sent_bytes(net: Any, hosts: list[str]) -> dict[str, int]:
    """``{host: bytes sent on all its NICs}`` (kernel interface counters)."""
    return {h: _dev_bytes(net.host(h), f"{h}-eth", "tx_bytes") for h in hosts}


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
                                               plan.get("n", 0), plan.get("k", plan.get("rails", 0))))
    procs = []
    for s, host in enumerate(plan["hosts"]):
        gpath = d / f"grad-{s}.npy"
        np.save(gpath, grads[s])
        procs.append(spawn(net.host(host), d / f"agent-{s}", [
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

