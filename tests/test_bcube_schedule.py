"""BML schedule (split, aggregation, distribution), message header and line-rate models: no network."""

from __future__ import annotations

import numpy as np
import pytest

from controller.bcube import (
    baseline_fat_tree,
    bcube_plan,
    choose_scale_bits,
    exact_sum,
    fat_tree_plan,
    gradients,
    line_rate_model,
)
from topologies import bcube
from wire.bcube import (
    BCUBE_HEADER_LEN,
    BcubeDecodeError,
    BcubeMsg,
    decode_bcube_header,
    encode_bcube_header,
)
from wire.bcube_schedule import BcubeSchedule, ScheduleError, cut, simulate

# (N, k, values): powers of two and not (9, 27, 25, 36 servers), tiny and uneven lengths
SIZES = [(2, 2, 64), (3, 2, 1000), (2, 3, 77), (4, 2, 4096), (3, 3, 1001), (5, 2, 7),
         (6, 2, 360), (2, 4, 33), (3, 2, 1)]


def _ints(servers: int, values: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(-(2**20), 2**20, values) for _ in range(servers)]


@pytest.mark.parametrize(("n", "k", "values"), SIZES)
@pytest.mark.parametrize("pipeline", [1, 3])
def test_every_server_gets_the_full_sum(n: int, k: int, values: int, pipeline: int) -> None:
    sched = BcubeSchedule(n, k, values)
    grads = _ints(sched.servers, values, n * 100 + k)
    expected = np.sum(grads, axis=0)
    for s, got in enumerate(simulate(sched, grads, pipeline)):
        assert np.array_equal(got, expected), f"server {s} of BCube({n},{k}) differs"


@pytest.mark.parametrize(("n", "k", "values"), SIZES)
def test_aggregation_splits_each_level_result_into_n_slices(n: int, k: int, values: int) -> None:
    """Aggregation: at stage i the servers of one switch share the stage's range, and each
    reduces a different 1/N of it; distribution reverses the level order."""
    sched = BcubeSchedule(n, k, values)
    for j in range(k):
        assert sched.level_order(j)[0] == j  # thread j starts at level j
        for s in range(sched.servers):
            ex = sched.exchanges(s, j)
            assert [e.phase for e in ex] == ["reduce"] * k + ["gather"] * k
            assert [e.level for e in ex[k:]] == [e.level for e in ex[:k]][::-1]
            assert [e.stage for e in ex] == list(range(2 * k))
            prev = sched.parameter_set(j)
            for e in ex[:k]:
                assert (e.slices[0][0], e.slices[-1][1]) == prev  # slices tile the range
                assert all(a[1] == b[0] for a, b in zip(e.slices, e.slices[1:], strict=False))
                sizes = [b - a for a, b in e.slices]
                assert max(sizes) - min(sizes) <= 1
                for d, p in enumerate(e.peers):  # the peers' ranges agree (same switch)
                    pe = sched.exchanges(p, j)[e.stage]
                    assert pe.slices == e.slices and pe.own == d and pe.level == e.level
                prev = e.slices[e.own]
            assert sched.reduced_range(s, j) == prev
        # the fully reduced slices of all servers tile the parameter set exactly once
        finals = sorted(sched.reduced_range(s, j) for s in range(sched.servers))
        assert finals[0][0] == sched.parameter_set(j)[0]
        assert finals[-1][1] == sched.parameter_set(j)[1]
        assert all(a[1] == b[0] for a, b in zip(finals, finals[1:], strict=False))


@pytest.mark.parametrize(("n", "k"), [(2, 2), (3, 2), (2, 3), (4, 2), (3, 3)])
def test_threads_use_distinct_levels_and_peers_share_a_switch(n: int, k: int) -> None:
    sched = BcubeSchedule(n, k, 100)
    topo = bcube(n, k)
    for stage in range(2 * k):
        levels = [sched.exchanges(0, j)[stage].level for j in range(k)]
        assert sorted(levels) == list(range(k))  # the k threads keep k NICs busy
    for s in range(sched.servers):
        host = f"h{s + 1}"
        assert tuple(topo.node(host)["digits"]) == sched.digits(s)
        for lvl in range(k):
            switch = topo.iface(host, lvl)["switch"]
            members = {f"h{p + 1}" for p in sched.peers(s, lvl)}
            assert members == {h for h in topo.ports(switch).values()}  # one hop apart


def test_owner_table_and_nic_load() -> None:
    sched = BcubeSchedule(3, 2, 900)
    rows = sched.owner_table(0)
    assert [len(r) for r in rows] == [9, 9]
    assert sorted(b - a for _, (a, b) in rows[1]) == [50] * 9  # 450 / 9 each
    # every NIC carries 2 M (1 - 1/S) / k: BML's 1/k claim in bytes
    load = sched.nic_bytes()
    assert load.shape == (9, 2)
    assert (load == 2 * 900 * 4 * (1 - 1 / 9) / 2).all()
    assert sched.stage_bytes(0) == [4 * 300, 4 * 100, 4 * 100, 4 * 300]


@pytest.mark.parametrize(("args", "match"), [
    ((1, 2, 10), "N must be >= 2"), ((3, 1, 10), "k must be >= 2"), ((3, 0, 10), "k must be"),
    ((2.0, 2, 10), "N must be an integer"), ((True, 2, 10), "N must be an integer"),
    ((2, 2, 0), "values must be >= 1"), ((2, 17, 10), "more than"), ((255, 3, 10), "more than"),
])
def test_bad_sizes_are_rejected(args: tuple, match: str) -> None:
    with pytest.raises(ScheduleError, match=match):
        BcubeSchedule(*args)


def test_bad_server_thread_range() -> None:
    sched = BcubeSchedule(2, 2, 10)
    for call, match in ((lambda: sched.exchanges(4, 0), "server must be in 0..3"),
                        (lambda: sched.exchanges(0, 2), "thread must be in 0..1"),
                        (lambda: sched.peers(0, 2), "level must be in 0..1"),
                        (lambda: sched.exchanges(0, 0, (5, 11)), "outside"),
                        (lambda: simulate(sched, [np.zeros(10)] * 3), "need 4 gradients"),
                        (lambda: simulate(sched, [np.zeros(9)] * 4), "must have 10 values")):
        with pytest.raises(ScheduleError, match=match):
            call()


def test_cut() -> None:
    assert cut((0, 10), 3) == [(0, 3), (3, 6), (6, 10)]
    assert cut((5, 6), 3) == [(5, 5), (5, 5), (5, 6)]


def test_header_roundtrip_and_errors() -> None:
    raw = encode_bcube_header(BcubeMsg.REDUCE, thread=3, stage=2, level=1, sender=513,
                              offset=70000, count=12)
    assert len(raw) == BCUBE_HEADER_LEN == 16
    h = decode_bcube_header(raw)
    assert (h.msg_type, h.thread, h.stage, h.level, h.sender, h.offset, h.count) == (
        BcubeMsg.REDUCE, 3, 2, 1, 513, 70000, 12)
    with pytest.raises(BcubeDecodeError, match="expected 16"):
        decode_bcube_header(raw[:10])
    with pytest.raises(BcubeDecodeError, match="magic"):
        decode_bcube_header(b"\x00\x01" + raw[2:])
    with pytest.raises(BcubeDecodeError, match="msg_type"):
        decode_bcube_header(raw[:2] + b"\x63" + raw[3:])


def test_models_give_the_1_over_k_claim() -> None:
    for n, k in ((3, 2), (2, 3), (4, 2)):
        s = n**k
        bml = line_rate_model("bml", s, 2**17, 2.0, n, k)
        for other in ("sharded_ps", "ring"):
            ratio = bml / line_rate_model(other, s, 2**17, 2.0)
            assert abs(ratio - 1 / k) < 0.01, (n, k, other, ratio)
        assert line_rate_model("ps", s, 2**17, 2.0) > (s - 1) * bml
    # 2 M (1 - 1/S) / (k B) plus TCP/IP/Ethernet overhead: 512 kB, BCube(3,2), 2 Mbit/s
    assert line_rate_model("bml", 9, 2**17, 2.0, 3, 2) == pytest.approx(
        2 * 2**19 * 8 / 9 / 2 * 8 / 2e6 * 1547 / 1448, rel=1e-3)


def test_plans_and_fixed_point() -> None:
    topo = bcube(3, 2)
    grads = gradients(9, 100, 1)
    bits = choose_scale_bits(grads)
    plan = bcube_plan(topo, 3, 2, 100, bits)
    assert plan["ips"][4] == ["10.0.0.5", "10.1.0.5"]
    assert plan["ifaces"][4] == ["h5-eth0", "h5-eth1"]
    total = exact_sum(grads, bits)
    assert np.abs(total).max() <= 2**31 - 1
    # fixed point is exact; the float32 sum is only close (the reason for fixed point)
    assert np.allclose(total / 2.0**bits, np.sum(grads, axis=0, dtype=np.float64), atol=9 * 2.0**-bits)
    ft = baseline_fat_tree(9, 2.0)
    assert len(ft.hosts()) == 16
    assert ft.capacity("h1", ft.iface("h1")["switch"]) == 2.0
    assert all(ln.capacity == 8.0 for ln in ft.links() if ft.is_switch(ln.a) and ft.is_switch(ln.b))
    assert fat_tree_plan(ft, "ring", 9, 100, bits)["ips"][8] == ["10.0.0.9"]
    with pytest.raises(ValueError, match="unknown baseline"):
        fat_tree_plan(ft, "bml", 9, 100, bits)
    with pytest.raises(ScheduleError, match="has 9 hosts"):
        bcube_plan(topo, 2, 3, 100, bits)


def test_gradctl_bcube(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from controller.cli import main

    assert main(["bcube", "schedule", "--n", "3", "--k", "2", "--values", "90", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [t["levels"] for t in data["threads"]] == [[0, 1], [1, 0]]
    assert data["threads"][0]["reduces"][1][4] == [4, [20, 25]]  # server 4, stage 1
    assert main(["bcube", "schedule", "--n", "2", "--k", "2", "--values", "16", "--server", "1"]) == 0
    assert "gather" in capsys.readouterr().out
    assert main(["bcube", "model", "--n", "3", "--k", "2", "--bw", "2"]) == 0
    assert "sharded_ps" in capsys.readouterr().out
    assert main(["bcube", "schedule", "--n", "1", "--k", "2"]) == 2
    assert "N must be >= 2" in capsys.readouterr().err
    assert main(["bcube", "schedule", "--n", "2", "--k", "2", "--server", "4"]) == 2


def test_scapy_view_matches_the_codec() -> None:
    from wire.bcube import encode_bcube_values
    from wire.scapy_layers import bcube_layer

    bcube_pkt = bcube_layer()
    vals = np.array([1, -2, 2**31 - 1, -(2**31)], dtype=np.int32)
    raw = encode_bcube_header(BcubeMsg.GATHER, 1, 3, 1, 7, 100, 4) + encode_bcube_values(vals)
    assert bytes(bcube_pkt(msg_type=3, thread=1, stage=3, level=1, sender=7, offset=100,
                           values=[int(v) for v in vals])) == raw
    p = bcube_pkt(raw)
    assert (p.msg_type, p.sender, p.offset, p.count, p.values) == (3, 7, 100, 4, vals.tolist())
