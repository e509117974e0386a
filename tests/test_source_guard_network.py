"""Source addresses bound to host ports, through an emulated network (either target,
``TARGET=bmv2`` for BMv2; docs/trust.md, "IP: source addresses bound to ports").

One star (PS h1, workers h2..h4 on s1) running ``forward.p4`` as ``gradctl deploy`` and
the differentiated experiment deploy it. Real frames from a host's namespace
(``tests/spoof_tools.py``): a host spoofing another host's addresses, and a job member
spoofing another member's address with forged differentiated blocks during a job, are
dropped at s1 and counted ``src_spoof``; the job's reconstruction stays bit-exact. With
the bindings left out (``bind_sources=False``) the same frames get through.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from controller.deploy import deploy, read_counters
from controller.routing import port_mac
from experiments.differentiated import PS_HOST, SWITCH, QosSetup, configure, run_transport
from hosts.differentiated.blocks import BlockLayout
from tests.netenv import started_network
from tests.test_differentiated_network import (
    BLOCK,
    LEVELS,
    _check_reconstruction,
    _gradient,
    _levels,
)
from topologies import star
from wire.differentiated import DIFF_UDP_PORT, NB_QUEUES, encode_diff_block, level_dscp

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.net]
SPOOFER, VICTIM = "h4", "h2"  # h4 is worker rank 2, h2 rank 0
FORGED = np.float32(7777.0)
PROBE_PORT = 40009


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any, Path]]:
    with started_network(tmp_path_factory, "guard_net",
                         star(4, bw=20), "forward", priority_queues=NB_QUEUES) as n:
        yield n


def _eth(topo: Any, src_mac: str) -> Ether:
    """An Ethernet header from h4's link to s1's port MAC."""
    return Ether(src=src_mac, dst=port_mac(topo.device_id(SWITCH), topo.port(SWITCH, SPOOFER)))


def _spoofs(network: Any, topo: Any) -> int:
    return read_counters(topo, network.grpc_addresses())[SWITCH]["ingress_drops"].get("src_spoof", 0)


def _sender(network: Any, frames: list[bytes], path: Path, **bounds: float) -> Any:
    path.write_text(json.dumps([f.hex() for f in frames]))
    argv = [sys.executable, "-m", "tests.spoof_tools", "send", "--iface", f"{SPOOFER}-eth0",
            "--frames", str(path), *(x for k, v in bounds.items() for x in (f"--{k}", str(v)))]
    return network.host(SPOOFER).popen(argv, cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _result(proc: Any, timeout: float = 60) -> dict[str, Any]:
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err.decode(errors="replace")[-500:]
    return json.loads(out.decode().strip().splitlines()[-1])


@pytest.mark.parametrize("bound", [True, False], ids=["bound", "open"])
def test_a_host_spoofing_another_hosts_addresses_is_dropped_and_counted(net, tmp_path: Path,
                                                                        bound: bool) -> None:  # noqa: ANN001
    """h4, in no job, sends 40 UDP datagrams to h1 with its own addresses, 40 with h2's MAC
    and IP, 40 with an address no host has: h1 receives h4's only, s1 counts the 80 others
    as `src_spoof`. Open, h1 receives the spoofed ones too."""
    network, topo, _ = net
    deploy(topo, network.grpc_addresses(), bind_sources=bound)
    own = topo.host_ip(SPOOFER)
    udp = UDP(sport=PROBE_PORT, dport=PROBE_PORT) / (b"x" * 32)
    dst = topo.host_ip(PS_HOST)
    frames = [bytes(_eth(topo, topo.host_mac(SPOOFER)) / IP(src=own, dst=dst) / udp),
              bytes(_eth(topo, topo.host_mac(VICTIM)) / IP(src=topo.host_ip(VICTIM), dst=dst) / udp),
              bytes(_eth(topo, topo.host_mac(SPOOFER)) / IP(src="10.0.9.9", dst=dst) / udp)]
    recv = network.host(PS_HOST).popen(
        [sys.executable, "-m", "tests.spoof_tools", "recv", "--port", str(PROBE_PORT), "--seconds", "8"],
        cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert recv.stdout.readline().strip() == b"listening"
    before = _spoofs(network, topo)
    assert _result(_sender(network, frames, tmp_path / "frames.json", count=120, pps=100))["sent"] == 120
    got = _result(recv)["from"]
    if bound:
        assert got == {own: 40}
        assert _spoofs(network, topo) - before == 80
    else:
        assert got == {own: 40, topo.host_ip(VICTIM): 40, "10.0.9.9": 40}
        assert _spoofs(network, topo) == before == 0


def _forged_blocks(topo: Any, arrays: list[np.ndarray], iterations: int) -> list[bytes]:
    """UDP block datagrams to the PS from h4's link with h2's MAC and IP, as rank 0's
    unreliable blocks (every value FORGED), for every iteration."""
    layout = BlockLayout.of(arrays, BLOCK)
    _, levels = _levels(arrays)
    out = []
    for it in range(iterations):
        for b in layout.blocks:
            level = int(levels[b.block_index])
            if level == 0:
                continue  # important blocks travel over TCP, which a spoofer cannot enter
            msg = encode_diff_block(b.header(it, 0, level), np.full(b.count, FORGED, np.float32))
            ip = IP(src=topo.host_ip(VICTIM), dst=topo.host_ip(PS_HOST), tos=level_dscp(level, "differentiated") << 2)
            out.append(bytes(_eth(topo, topo.host_mac(VICTIM)) / ip
                             / UDP(sport=DIFF_UDP_PORT, dport=DIFF_UDP_PORT) / msg))
    return out


@pytest.mark.parametrize("bound", [True, False], ids=["bound", "open"])
def test_a_member_spoofing_another_member_during_a_job_changes_nothing(net, tmp_path: Path,
                                                                       bound: bool) -> None:  # noqa: ANN001
    """While a differentiated job runs (3 workers, 2 iterations), its member h4 (rank 2)
    sends rank 0's unreliable blocks with every value forged, from h2's MAC and IP: s1
    drops every one (`src_spoof`), the PS refuses nothing (none arrives) and every
    worker's reconstruction is bit-exact. Open, the PS takes forged values as rank 0's."""
    network, topo, out = net
    eq = configure(network, topo, QosSetup(port_rate=3000, depth=64, levels=LEVELS), bind_sources=bound)
    d = out / f"member-{bound}"
    d.mkdir()
    arrays = _gradient(d / "grad.npz")
    frames = _forged_blocks(topo, arrays, 2)
    before = _spoofs(network, topo)
    forger = _sender(network, frames, tmp_path / "blocks.json", count=3000, pps=300, seconds=10)
    common = ["--gradient", str(d / "grad.npz"), "--iterations", "2", "--block-size", str(BLOCK)]
    wargs = ["--alpha", "0", "--quantile", "0.9", "--levels", str(LEVELS), "--udp-pps", "150"]
    pargs = ["--grace", "1.0", "--linger", "1.0", "--out-dir", str(d / "ps-out")]
    run = run_transport(network, topo, eq, d, "differentiated", common, wargs, pargs, max_time=120)
    sent = _result(forger)["sent"]
    assert run.ok, run.error
    assert sent > len(frames)
    if bound:
        assert _spoofs(network, topo) - before == sent
        assert run.ps["refused"] == {"connections": 0, "datagrams": 0, "blocks": 0}
        _check_reconstruction(arrays, d / "ps-out", 3, 2)
        return
    assert _spoofs(network, topo) == 0
    with np.load(d / "ps-out" / "recon-w0-it0.npz") as z:
        assert np.any(z["arr_1"] == FORGED)  # rank 0's blocks, as the spoofer wrote them
