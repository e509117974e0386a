"""``gradctl net pcap DIR LINK`` on a running network: a known packet (the reachability
probe h1 -> h2 over linear:2) appears in the capture of the fabric link s1-s2, read
back with scapy (on the embedded target both switches share a process, so the link
runs in memory until the capture moves it to its veth); bad links are one-line errors."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from scapy.all import IP, rdpcap

from tests.netenv import TARGET, net_skip_reason

ROOT = Path(__file__).resolve().parent.parent
GRADCTL = [sys.executable, "-m", "controller.cli"]
pytestmark = [pytest.mark.net, pytest.mark.skipif(net_skip_reason("forward") is not None,
                                                  reason=net_skip_reason("forward") or "")]


def gradctl(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    # both switches in one process: on the embedded target their link runs in memory,
    # and the capture must move it back to its veth to see anything
    env = dict(os.environ, GRADNET_SWITCH_PROCESSES="1")
    return subprocess.run([*GRADCTL, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL, env=env)


@pytest.mark.long  # a tool for reading traces, not a sum
def test_pcap_of_a_fabric_link(tmp_path: Path) -> None:
    r = gradctl("net", "up", "linear:2", "--target", TARGET)
    assert r.returncode == 0, r.stderr
    run_dir = r.stdout.strip().splitlines()[-1]
    try:
        out = tmp_path / "s1-s2.pcap"
        got: list[subprocess.CompletedProcess[str]] = []
        cap = threading.Thread(target=lambda: got.append(gradctl(
            "net", "pcap", run_dir, "s1-s2", "-o", str(out), "--duration", "8", "--count", "200")))
        cap.start()
        # probes until the capture ends (it opens after gradctl's start-up, which the
        # machine's load can stretch past one probe's run)
        runs = []
        while cap.is_alive() or not runs:
            runs.append(gradctl("net", "exec", run_dir, "h1", "--", sys.executable, "-m", "hosts.reach",
                                "--targets", "10.0.0.2", "--count", "20", "--timeout", "6"))
        cap.join()
        assert all(r.returncode == 0 for r in runs), runs[-1].stderr
        assert got[0].returncode == 0, got[0].stderr
        pkts = rdpcap(str(out))
        assert any(IP in p and p[IP].src == "10.0.0.1" and p[IP].dst == "10.0.0.2" for p in pkts), got[0].stdout
        for bad in ("s1-s9", "s1:99", "nonsense"):
            r = gradctl("net", "pcap", run_dir, bad, "--duration", "1")
            assert r.returncode == 2 and "\n" not in r.stderr.strip(), r.stderr
    finally:
        gradctl("net", "down", run_dir)
