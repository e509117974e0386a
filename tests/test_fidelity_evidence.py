"""The emulator-bound verdict from real runs: real datagrams through an embedded switch,
the training window's scheduler counters read from ``/proc`` (experiments/fidelity.py).

A run here is one host sending UDP datagrams at a fixed rate through the switch to
another, which marks its first and last datagram as the harness's evaluator marks its
training (``"step":`` lines); its time over its line-rate bound is the run's x bound.
Starved on purpose (the switch pinned to one core beside busy loops, the Python
backend, more datagrams a second than it then forwards) the run is flagged; paced well below what
the switch and the links carry, it is above its bound too (the sender's own pace) but
the CPU had room: link-bound.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from experiments.accounting import TrainingWindow
from experiments.fidelity import CPU_SATURATED, EMULATOR_BOUND, LINK_BOUND, judge
from experiments.harness_records import RunRecord
from tests.netenv import TARGET, net_skip_reason

reason = net_skip_reason("forward")
pytestmark = [pytest.mark.net,
              pytest.mark.skipif(reason is not None or TARGET == "bmv2",
                                 reason=reason or "the embedded target's switch process is pinned")]

PORT = 9419
HEADERS = 8 + 20 + 14  # UDP, IPv4, Ethernet

# the receiver marks its first and last datagram as the window's "step" records; it
# stops 0.3 s after the last one (or after 12 s)
RECEIVER = f"""
import json, socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("0.0.0.0", {PORT}))
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
print("ready", flush=True)
s.settimeout(12.0); got = 0; first = last = None
while True:
    try:
        s.recv(2048)
    except socket.timeout:
        break
    last = time.monotonic(); got += 1
    if first is None:
        first = last; s.settimeout(0.3); print(json.dumps({{"step": 0}}), flush=True)
print(json.dumps({{"step": 1}}), flush=True)
print(json.dumps({{"got": got, "elapsed": (last - first) if got else 0.0}}), flush=True)
"""

# COUNT datagrams of SIZE bytes at RATE a second, in bursts of 1/100 s
SENDER = f"""
import socket, sys, time
dst, rate, count, size = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); data = bytes(size)
t0 = time.monotonic(); sent = 0
while sent < count:
    due = min(count, int((time.monotonic() - t0) * rate) + 1)
    while sent < due:
        try:
            s.sendto(data, (dst, {PORT}))
        except OSError:
            pass
        sent += 1
    time.sleep(0.01)
"""


def _pin_switch_with_burners(pid: int, seconds: float, n: int = 1) -> list[subprocess.Popen]:
    """Every thread of the switch process on CPU 0, and ``n`` busy loops (``seconds``
    long) there too, each in a session of its own at nice -19, 7.5 times the weight of the
    switches' session (the scheduler shares a core between sessions first, and the
    network raises its switches' session to nice -10): the switch gets about an eighth
    of a core."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        os.sched_setaffinity(int(tid), {0})
    burners = []
    for _ in range(n):
        b = subprocess.Popen([sys.executable, "-c", f"import time\nt=time.monotonic()+{seconds}\n"
                              "while time.monotonic()<t: pass"], start_new_session=True)
        os.sched_setaffinity(b.pid, {0})
        Path(f"/proc/{b.pid}/autogroup").write_text("-19")
        burners.append(b)
    return burners


def _run(net: Any, topo: Any, d: Path, bw: float, rate: float, count: int, size: int,
         starve: bool = False) -> RunRecord:
    """One run: ``count`` datagrams of ``size`` bytes at ``rate`` a second from h1 to h2
    (links of ``bw`` Mbit/s); the record judged
    from the receiver's time over the line-rate bound of what it got, and the window."""
    d.mkdir(parents=True)
    h1, h2 = net.host("h1"), net.host("h2")
    rx = h2.popen([sys.executable, "-c", RECEIVER], stdout=open(d / "rx.out", "w"),  # noqa: SIM115
                  stderr=subprocess.DEVNULL)
    burners: list[subprocess.Popen] = []
    try:
        deadline = time.monotonic() + 10
        while not (d / "rx.out").read_text().startswith("ready") and time.monotonic() < deadline:
            time.sleep(0.05)
        with TrainingWindow(net, d, period=0.05) as window:
            if starve:
                (pid,) = {sw.proc.pid for sw in net.net.switches}
                burners = _pin_switch_with_burners(pid, 15)
            tx = h1.popen([sys.executable, "-c", SENDER, topo.host_ip("h2"), str(rate), str(count), str(size)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            tx.wait(timeout=30)
            rx.wait(timeout=30)
    finally:
        if starve:  # the switch back on every core
            (pid,) = {sw.proc.pid for sw in net.net.switches}
            for tid in os.listdir(f"/proc/{pid}/task"):
                os.sched_setaffinity(int(tid), range(os.cpu_count() or 1))
        for p in (*burners, rx):
            if p.poll() is None:
                p.kill()
                p.wait()
    res = json.loads((d / "rx.out").read_text().splitlines()[-1])
    assert res["got"] > 0.1 * count, res  # the datagrams crossed the switch
    w = window.result()
    assert w is not None
    rec = RunRecord("udp", 0, ok=True, cores=os.cpu_count() or 1, window_s=w["window_s"],
                    window_switch_cpu_s=w["switch_cpu_s"],
                    window_busiest_switch_cpu_s=w["busiest_switch_cpu_s"],
                    window_switch_wait_s=w["switch_wait_s"],
                    window_busiest_switch_wanted_s=w["busiest_switch_wanted_s"],
                    window_agent_cpu_s=w["agent_cpu_window_s"], window_agent_wait_s=w["agent_wait_s"],
                    machine_busy=w["machine_busy"], rx_drops=w["rx_drops"],
                    sync_s_per_iter=res["elapsed"], ideal_bound_s=res["got"] * (size + HEADERS) * 8 / (bw * 1e6))
    judge(rec)
    return rec


def test_a_starved_switch_is_emulator_bound_a_paced_run_is_not(tmp_path: Path, monkeypatch) -> None:
    from controller.deploy import deploy
    from topologies import star
    from topologies.network import Network

    monkeypatch.setenv("GRADNET_BACKEND", "python")  # the reference backend: the slower one
    bw = 80.0
    topo = star(2, bw=bw)
    with Network(topo, target="embedded", run_dir=str(tmp_path / "net")) as net:
        deploy(topo, net.grpc_addresses())
        # 0.3 s at 40,000 datagrams a second (77 Mbit/s: the links' pace): more than the
        # Python switch forwards on an eighth of a core
        hot = _run(net, topo, tmp_path / "hot", bw, 40000, 12000, 200, starve=True)
        # 1 s at 200 a second (1.7 Mbit/s): the sender's pace, far below the links'
        cool = _run(net, topo, tmp_path / "cool", bw, 200, 200, 1000)
    assert hot.x_bound is not None and hot.x_bound > 1.5, hot
    assert hot.fidelity == EMULATOR_BOUND, hot
    # by the scheduler's evidence: the switch process ran or waited to run all along (one
    # switch saturated), or, on a busy machine, its threads waited (starved)
    assert {"one switch saturated", "starved"} & set(hot.pace.split(", ")), hot
    # the switch waited for its core: starved by the busy loop, not busy itself, so the
    # CPU it used alone would not have flagged the run
    assert hot.window_switch_wait_s is not None and hot.window_switch_wait_s > 0.5 * hot.window_s, hot
    assert hot.cpu_share is not None and hot.cpu_share < CPU_SATURATED, hot
    # the receiver was found as an agent (its standard output is the run's rx.out)
    assert hot.window_agent_cpu_s is not None and hot.window_agent_cpu_s > 0, hot
    assert hot.machine_busy is not None and 0 < hot.machine_busy <= 1, hot
    assert cool.x_bound is not None and cool.x_bound > 1.5, cool  # paced: above its bound
    assert cool.fidelity == LINK_BOUND and not cool.pace, cool
    assert cool.busiest_switch_share is not None and cool.busiest_switch_share < 0.5, cool
