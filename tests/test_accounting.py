"""Line-rate bound and CPU accounting (experiments/accounting.py) on known numbers."""

from __future__ import annotations

import os

from experiments.accounting import Snapshot, process_cpu_seconds, time_split
from topologies import star


def test_bound_is_the_busiest_directed_link() -> None:
    topo = star(2, bw=8)  # h1 - s1 - h2, 8 Mbit/s = 1 MB/s
    before = Snapshot(tx={"h1": {"h1-eth0": 100}, "s1": {"s1-eth1": 0, "s1-eth2": 50}},
                      cpu={"s1": 1.0})
    after = Snapshot(tx={"h1": {"h1-eth0": 100 + 2_000_000},
                         "s1": {"s1-eth1": 500_000, "s1-eth2": 50 + 1_000_000}},
                     cpu={"s1": 3.5})
    sp = time_split(topo, before, after, {"workers": 1.25})
    assert sp.busiest_link == "h1->s1" and sp.busiest_bytes == 2_000_000
    assert abs(sp.bound_s - 2.0) < 1e-9  # 2 MB at 1 MB/s
    assert sp.link_bytes == {"h1->s1": 2_000_000, "s1->h1": 500_000, "s1->h2": 1_000_000}
    assert sp.switch_cpu_s == {"s1": 2.5}
    d = sp.to_dict()
    assert d["busiest_switch"] == "s1" and d["agent_cpu_s"] == {"workers": 1.25}


def test_no_traffic_no_bound() -> None:
    topo = star(2)
    snap = Snapshot(tx={"h1": {"h1-eth0": 5}}, cpu={})
    sp = time_split(topo, snap, snap)
    assert sp.bound_s == 0.0 and sp.busiest_link == "-" and sp.link_bytes == {}


def test_process_cpu_seconds() -> None:
    assert (process_cpu_seconds(os.getpid()) or 0.0) > 0.0
    assert process_cpu_seconds(2**22 + 12345) is None
