"""The command lines that start an INA job's agents on its hosts.

:func:`host_setup` (static ARP entries for the aggregating switches' addresses),
:func:`ina_commands` (the PS and the workers, or PyTorch DDP ranks) and
:func:`job_script` (all of it as a shell script for a network of ``gradctl net up``):
what ``gradctl ina deploy`` prints and writes.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from controller.ina.aggregator import switch_ip
from controller.routing import port_mac
from topologies import Topology

__all__ = ["host_setup", "ina_commands", "job_script"]


def host_setup(topo: Topology, hosts: Sequence[str], switches: Sequence[str]) -> dict[str, str]:
    """Per host, the static ARP entries for the aggregating switches' addresses (they lie
    in the hosts' subnet; the MAC is the host's own switch port, which routes by IP)."""
    out = {}
    for h in hosts:
        iface = topo.iface(h)
        sw = iface["switch"]
        mac = port_mac(topo.device_id(sw), topo.port(sw, h))
        out[h] = "; ".join(
            f"ip neigh replace {switch_ip(topo.device_id(s))} lladdr {mac} dev {iface['name']} "
            "nud permanent" for s in switches)
    return out


def ina_commands(job: Any, policy_path: str | Path, values: int,
                 ddp: bool = False) -> dict[str, str]:
    """``{host: command}`` that starts the job's agents: the PS first, then the workers
    in rank order (the dict keeps that order). ``ddp``: the workers are PyTorch DDP ranks
    (``hosts.ina.ddp_train --hook ina``) and the PS serves rounds until they go quiet
    (``--rounds 0``); their gloo rendezvous is rank 0's address (gloo's interface,
    ``GLOO_SOCKET_IFNAME``, is set by ``gradctl net exec``)."""
    py = shlex.quote(sys.executable)
    pol = shlex.quote(str(policy_path))
    topo = job.topology
    ps = f"{py} -m hosts.ina.ps --policy {pol} --iface {topo.iface(job.ps)['name']}"
    out = {job.ps: ps + (" --rounds 0 --idle-exit 20" if ddp else "")}
    master = topo.host_ip(job.workers[0])
    for rank, w in enumerate(job.workers):
        if ddp:
            out[w] = (f"{py} -m hosts.ina.ddp_train --rank {rank} --world {len(job.workers)} "
                      f"--master-addr {master} --hook ina --policy {pol}")
        else:
            out[w] = f"{py} -m hosts.ina.worker --policy {pol} --rank {rank} --size {values}"
    return out


def job_script(run_dir: str, job: Any, setup: dict[str, str], commands: dict[str, str],
               prog: str = "gradctl") -> str:
    """A POSIX shell script running a job's printed commands on a held network: the hosts'
    ARP entries, the PS in the background, the workers in parallel; it waits for every
    agent and fails if one did (``prog``: the command line tool, ``gradctl``)."""
    d = shlex.quote(run_dir)
    lines = ["#!/bin/sh", f"# INA job {job.job_id} on {run_dir} (written by {prog} ina deploy)",
             "set -e"]
    lines += [f"{prog} net exec {d} {h} -- sh -c {shlex.quote(cmd)}" for h, cmd in setup.items()]
    lines += [f"{prog} net exec {d} {job.ps} -- {commands[job.ps]} &", "ps_pid=$!",
              "sleep 1  # the PS binds its socket", "pids="]
    for h, cmd in commands.items():
        if h != job.ps:
            lines += [f"{prog} net exec {d} {h} -- {cmd} &", 'pids="$pids $!"']
    lines += ["fail=0", "for p in $pids; do wait $p || fail=1; done",
              "wait $ps_pid || fail=1", 'exit "$fail"', ""]
    return "\n".join(lines)
