"""Networks side by side on one machine: nothing one network names is another's.

Two held networks of the same topology (``gradctl net up linear:2`` twice, at the same
time, from two processes: the same node and interface names in both) and a third,
in-process network beside them (as a test beside a run) all reach every host pair;
no interface of theirs appears in the root namespace; stopping one leaves the others
working. The offline part checks the run directory's lock: one network per directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from controller.netctl import NetState
from tests.netenv import TARGET, net_skip_reason
from topologies import linear

ROOT = Path(__file__).resolve().parent.parent
GRADCTL = [sys.executable, "-m", "controller.cli"]
reason = net_skip_reason("forward")
needs_net = pytest.mark.skipif(reason is not None, reason=reason or "")


def gradctl(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GRADCTL, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def root_links() -> set[str]:
    """Interface names in the root namespace (this process's)."""
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line}


def held_unreachable(run_dir: str) -> list[tuple[str, str]]:
    """Every (host, address) pair of a held network that got no echo reply."""
    topo = linear(2)
    failed = []
    for h in topo.hosts():
        ips = [topo.host_ip(o) for o in topo.hosts() if o != h]
        r = gradctl("net", "exec", run_dir, h, "--", sys.executable, "-m", "hosts.reach",
                    "--targets", ",".join(ips), "--count", "2", "--timeout", "3")
        got = json.loads(r.stdout)["received"] if r.returncode == 0 else {}
        failed += [(h, ip) for ip in ips if not got.get(ip)]
    return failed


# ----------------------------------------------------------------------------- offline


def test_a_run_directory_holds_one_network(tmp_path: Path) -> None:
    from topologies.network import NetworkError, claim_run_dir

    fd = claim_run_dir(tmp_path)
    try:
        with pytest.raises(NetworkError, match="belongs to a running network"):
            claim_run_dir(tmp_path)
    finally:
        os.close(fd)
    os.close(claim_run_dir(tmp_path))  # free again once the first closed


# ----------------------------------------------------------------------------- net


@pytest.mark.net
@pytest.mark.timeout(600)
@needs_net
def test_networks_side_by_side(tmp_path: Path) -> None:
    from tests.test_deploy import unreachable_pairs
    from topologies.network import Network

    topo = linear(2)
    names = {f"{n}-eth{p}" for n in topo.graph.nodes for p in range(0, 4)}
    before = root_links()
    ups = [subprocess.Popen([*GRADCTL, "net", "up", "linear:2", "--target", TARGET],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in ups]
    dirs = [out.strip().splitlines()[-1] for out, _ in outs if out.strip()]
    try:
        assert [p.returncode for p in ups] == [0, 0], [err[-2000:] for _, err in outs]
        assert len(set(dirs)) == 2
        for d in dirs:  # every socket of a network lies in its own run directory
            for addr, _ in NetState.load(d).grpc.values():
                assert Path(addr[5:]).parent == Path(d)
        # a third network of the same names in this process, one process per switch
        with Network(topo, target=TARGET, run_dir=str(tmp_path), switch_processes=0) as net:
            from controller.deploy import deploy

            deploy(topo, net.grpc_addresses())
            assert unreachable_pairs(net, topo) == []
            assert [held_unreachable(d) for d in dirs] == [[], []]
            assert not (root_links() - before) & names  # no interface in the root namespace
        # stopping one held network leaves the other working
        r = gradctl("net", "down", dirs[0])
        assert r.returncode == 0, r.stderr
        assert held_unreachable(dirs[1]) == []
    finally:
        for d in dirs:
            gradctl("net", "down", d)
    assert not (root_links() - before) & names
