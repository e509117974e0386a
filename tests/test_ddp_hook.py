"""The PyTorch DDP communication hook through INA (hosts/ina/ddp_hook.py).

The network test runs an unchanged DDP script (hosts/ina/ddp_train.py) on two ranks in
Mininet hosts, once with gloo's all-reduce and once with the INA hook (with and without
an aggregating switch), and checks: the hook's averaged gradients equal gloo's on the
same inputs up to the fixed-point rounding, every rank ends with the same weights, the
accuracy matches gloo's, the bytes at the PS drop to 1/N with aggregation, and each
bucket sends its own ceil(B/64) fragments. A second network test drives the hook's
allreduces directly (tests/ddp_rounds_tool.py): exact sums element by element, bucket
sizing, fragment numbers bounded and reused, the switch's aggregator capacity unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from experiments.ddp import main  # noqa: E402
from hosts.ina.ddp_hook import HOOK_ROUND_CYCLE, InaHookState, span_length  # noqa: E402
from tests.netenv import TARGET, net_skip_reason  # noqa: E402
from wire.ina import INA_VALUES  # noqa: E402
from wire.ina_policy import Policy  # noqa: E402


def test_bucket_larger_than_the_job_is_refused() -> None:
    pol = Policy.ps_only(1, "127.0.0.1", ["127.0.0.2", "127.0.0.3"], 2)
    state = InaHookState.from_policy(pol, 0)
    try:
        assert state.capacity == 2 * INA_VALUES == 128
        with pytest.raises(ValueError, match=r"exceeds the INA job's 128 \(2 fragments x 64\)"):
            state.allreduce_mean(np.zeros(129, dtype=np.float32))
    finally:
        state.close()


def test_rounds_number_fragments_from_a_bounded_cycle() -> None:
    pol = Policy.ps_only(1, "127.0.0.1", ["127.0.0.2", "127.0.0.3"], 2)
    state = InaHookState.from_policy(pol, 0)
    try:  # default: 1,024 rounds, then the numbers (and aggregators) are reused
        assert state.cycle is not None and state.cycle.cycle == HOOK_ROUND_CYCLE == 1024
        assert state.fragment_space == 1024 * 2 and state.round == 0
    finally:
        state.close()
    with pytest.raises(ValueError, match="round cycle >= 3"):
        InaHookState.from_policy(pol, 0, round_cycle=2)
    state = InaHookState.from_policy(pol, 0, round_cycle=3, reuse_after=0.0)
    try:
        assert state.cycle is not None
        offsets = []
        for _ in range(4):
            offsets.append(state.cycle.begin())
            state.cycle.end()
        assert offsets == [0, 2, 4, 0] and state.round == 4
    finally:
        state.close()



def _allreduce_through_hooks(states: list, grads: list[list[np.ndarray]],
                             run_ps: Callable[[], object]) -> list[list[np.ndarray]]:
    """Run the PS (``run_ps``) and every rank's gradients through its hook's thread, as
    DDP's buckets are; close the hooks; return each rank's sums in order."""
    import threading

    out: list[list[np.ndarray]] = [[] for _ in states]
    t = threading.Thread(target=run_ps)
    t.start()

    def rank(r: int) -> None:
        for g in grads[r]:
            out[r].append(states[r]._pool.submit(states[r].allreduce_sum, g).result())

    ths = [threading.Thread(target=rank, args=(r,)) for r in range(len(states))]
    for x in ths:
        x.start()
    for x in ths:
        x.join()
    t.join()
    for st in states:
        st.close()
    return out


def test_short_rounds_on_loopback_are_exact_and_sized() -> None:
    """Two ranks and the PS on loopback (no switch): buckets of 1..4 fragments of a
    4-fragment job, numbers reused every 3 rounds; the hook's background thread."""

    from hosts.ina.ps import ParameterServer
    from wire.fixedpoint import dequantize, quantize

    pol = Policy.ps_only(1, "127.0.0.1", ["127.0.0.2", "127.0.0.3"], 4)
    sizes = [1, 64, 65, 130, 256, 3, 200] * 3
    rep: dict = {}
    with ParameterServer(1, 2, 4, pol, bind_ip="127.0.0.1", port=0, rounds=0, cycle=3,
                         idle_exit=0.5, linger=0.2, max_time=30) as ps:
        pol = Policy.ps_only(1, "127.0.0.1", ["127.0.0.2", "127.0.0.3"], 4,
                             port=ps.sock.getsockname()[1])
        states = [InaHookState.from_policy(pol, r, round_cycle=3, reuse_after=0.0)
                  for r in range(2)]
        grads = [[np.random.default_rng([7, r, k]).standard_normal(n).astype(np.float32)
                  for k, n in enumerate(sizes)] for r in range(2)]
        out = _allreduce_through_hooks(states, grads, lambda: rep.setdefault("ps", ps.run()))
    for k in range(len(sizes)):
        want = dequantize(quantize(grads[0][k], 16, 2) + quantize(grads[1][k], 16, 2), 16)
        assert np.array_equal(out[0][k], want) and np.array_equal(out[1][k], want), k
    for s in states:
        assert [b.fragments for b in s.buckets] == [-(-n // INA_VALUES) for n in sizes]
        # GRAD datagrams: each fragment once, plus what a NACK asked for (requests for a
        # RESULT are header-only and not among them, though counted as re-sends)
        assert all(b.packets_sent - b.grad_resends == b.fragments for b in s.buckets)
        assert max(b.first_fragment + b.fragments for b in s.buckets) <= 3 * 4
    st = rep["ps"].jobs[1]
    assert st.rounds == len(sizes) and st.completed == sum(-(-n // INA_VALUES) for n in sizes)
    assert rep["ps"].counters.out_of_range == 0
    # the PS bound port 0 (the kernel's pick) and sends its RESULTs to the workers on the
    # port it got: once they went to port 0, and only the timers' requests brought them
    assert rep["ps"].counters.send_errors == 0 and st.results_sent == 2 * st.completed


def test_bfp_hook_short_rounds_on_loopback() -> None:
    """The hook in block floating point (the policy's format): buckets of 1..3 blocks of
    a job of 4 blocks + 4 exponent fragments, each sum the exact integer sums at the
    agreed exponents, values far beyond what fixed point 2^-16 holds included."""

    from hosts.ina.ps import ParameterServer
    from wire.fixedpoint import bfp_dequantize, bfp_reference

    ips = ["127.0.0.2", "127.0.0.3"]
    with ParameterServer(1, 2, 8, Policy.ps_only(1, "127.0.0.1", ips, 8), bind_ip="127.0.0.1",
                         port=0, rounds=0, cycle=3, idle_exit=0.5, linger=0.2,
                         max_time=30) as ps:
        pol = Policy.ps_only(1, "127.0.0.1", ips, 8, port=ps.sock.getsockname()[1],
                             number_format="bfp")
        states = [InaHookState.from_policy(pol, r, round_cycle=3, reuse_after=0.0)
                  for r in range(2)]
        assert states[0].capacity == 4 * INA_VALUES
        sizes = [1, 64, 65, 200, 256]
        grads = [[(np.random.default_rng([8, r, k]).standard_normal(n) * 10.0 ** (k * 3 - 6))
                  .astype(np.float32) for k, n in enumerate(sizes)] for r in range(2)]
        out = _allreduce_through_hooks(states, grads, ps.run)
    for k, n in enumerate(sizes):
        sums, e = bfp_reference([grads[0][k], grads[1][k]], 2)
        want = bfp_dequantize(sums.astype(np.int32), e, 2)[:n]
        assert np.array_equal(out[0][k], want) and np.array_equal(out[1][k], want), k
    blocks = [-(-n // INA_VALUES) for n in sizes]
    assert [b.fragments for b in states[0].buckets] == [2 * b for b in blocks]


def test_bfp_error_on_training_gradients_within_bound() -> None:
    """docs/ina.md's bound, measured on real digits-CNN gradients against the exact sum
    (``python -m bench ina-bfp`` runs more ranks and steps): BFP stays within it and
    within a float32 all-reduce's own error, where fixed point 2^-16 loses percents."""
    from bench.ina_bfp_bench import measure

    for n, steps in ((4, 3), (64, 2)):
        r = measure(n, steps)
        assert r.bfp <= r.bound, (n, r)
        assert r.bfp <= 2 * r.float32 + r.bound, (n, r)
        assert r.fixed is not None and r.fixed > 100 * r.bound


def test_span_length_is_the_union() -> None:
    assert span_length([(0.0, 2.0), (1.0, 3.0), (5.0, 6.0)]) == 4.0
    assert span_length([(0.0, 2.0), (1.0, 3.0), (5.0, 6.0)], hi=1.5) == 1.5


def _skip_reason() -> str | None:
    return net_skip_reason("ina")


@pytest.mark.long  # the hook's sums: loopback tests above and test_buckets_... through the switch
@pytest.mark.net
@pytest.mark.slow
@pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or "")
def test_ddp_through_ina_matches_gloo(tmp_path: Path) -> None:
    rc = main(["--topo", "star:3", "--workers", "2", "--epochs", "1", "--max-steps", "6",
               "--target", TARGET, "--out-dir", str(tmp_path)])
    assert rc == 0
    (path,) = tmp_path.glob("ddp-*/summary.json")
    runs = {r["run"]: r for r in json.loads(path.read_text())["runs"]}
    assert set(runs) == {"gloo", "ina-ps", "ina"}
    for name in ("ina-ps", "ina"):
        r = runs[name]
        assert r["ranks_agree"]
        # block floating point (the default): each block rounded at 2^-30 of its largest
        # magnitude with one headroom bit, far below what fixed point 2^-16 loses
        assert r["grad_max_abs_diff_vs_gloo"] <= 2.0**-20
        assert abs(r["accuracy"] - runs["gloo"]["accuracy"]) <= 0.03
        # DDP's first step is one bucket; it then rebuilds them: 3 a step (--bucket-cap-mb)
        assert r["ps_rounds"] == r["ina_rounds"] == 1 + 5 * 3
        # 2570, 1152, 96 values: their blocks, plus as many exponent fragments (up to 32)
        assert [b["fragments"] for b in r["ina_buckets"]] == [41 + 32, 18 + 18, 2 + 2]
        assert r["ps_fragments"] == 92 + 5 * 113  # the first step: 60 blocks + 32
        assert r["ina_max_fragment"] < r["ina_fragment_space"] == 1024 * 92
    assert runs["gloo"]["ranks_agree"]
    for r in runs.values():  # the timing table's inputs, for every rank
        assert all(t["steps"] == 6 and t["comm_s"] > 0 and 0 <= t["overlap"] <= 1
                   for t in r["timing"])
    ratio = runs["ina"]["ps_rx_bytes"] / runs["ina-ps"]["ps_rx_bytes"]
    assert 0.4 <= ratio <= 0.6  # 1/N for N = 2, plus the acks


# ------------------------------------------------- bucket sizing and slot reuse, networked

SIZES = (1000, 65, 1, 300)  # a bucket as large as the job (16 fragments), and short ones
ITERATIONS, CYCLE = 40, 5  # 160 rounds: the numbers are reused 31 times


def _assert_bucket_results(tmp_path: Path, reports: list[dict], st: dict, num_fragments: int) -> None:
    """Every rank's sums exact, each bucket's first sends its own fragments, the wire
    numbers bounded by the cycle, and the PS's counts (``st``) per iteration."""
    import math

    from tests.ddp_rounds_tool import bucket
    from wire.fixedpoint import dequantize, quantize

    rounds = ITERATIONS * len(SIZES)
    # every sum, element by element (both ranks get the same multicast RESULT)
    for r in range(2):
        got = np.load(tmp_path / f"sums{r}.npz")
        assert len(got.files) == rounds
        for i in range(ITERATIONS):
            for b, n in enumerate(SIZES):
                q = sum(quantize(bucket(3, k, i, b, n), 16, 2) for k in range(2))
                a = got[f"arr_{i * len(SIZES) + b}"]
                assert np.array_equal(a, dequantize(q, 16)), f"rank {r} iteration {i} bucket {b}"
    for rep in reports:
        assert rep["rounds"] == rounds
        for values, frags, sent, resent in rep["buckets"]:
            assert frags == math.ceil(values / INA_VALUES)
            # first sends: the bucket's own fragments only (header-only requests for a
            # RESULT, a busy CPU's timer, are no GRADs and not in either count)
            assert sent - resent == frags
        assert rep["max_fragment"] < CYCLE * num_fragments == rep["fragment_space"]
        assert rep["reuse_wait_s"] > 0  # the numbers were reused, after the aging wait
    per_iter = sum(math.ceil(n / INA_VALUES) for n in SIZES)
    assert st["completed"] == ITERATIONS * per_iter  # not rounds x 16
    assert st["rounds"] == rounds and st["short_rounds"] >= ITERATIONS * 3 - 1
    assert st["partial_in"] >= st["completed"] // 2  # mostly aggregated in the switch


@pytest.mark.net
@pytest.mark.slow
@pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or "")
def test_buckets_send_their_own_fragments_and_reuse_bounded_numbers(tmp_path: Path) -> None:
    """Two ranks reduce buckets of 1,000, 65, 1 and 300 values, 40 iterations, through
    the switch s_d of a star (embedded target unless TARGET says otherwise), with the
    fragment numbers reused every 5 rounds: every sum exact element by element, each
    bucket's first sends are ceil(B/64) fragments, the wire numbers stay below 5·F,
    and the switch's aggregator capacity is what it was at the start."""
    import sys

    from experiments.ina import switch_neighbors
    from experiments.runner import finish, spawn
    from tests.ina_probe import NUM_AGGREGATORS
    from tests.test_ina_aging import _capacity, _deploy, _events, _jobs
    from topologies import star
    from topologies.network import Network

    topo = star(6, bw=100)
    with Network(topo, target=TARGET, run_dir=str(tmp_path / "net")) as network:
        switch_neighbors(network, topo, topo.switches())
        _, probe = _jobs(topo)
        from controller.ina import InaJob

        job = InaJob.plan(topo, "h1", ["h2", "h3"], 0, 1000.0, max(SIZES), job_id=1)
        assert job.num_fragments == 16 and job.aggregating_switches == ["s1"]
        dep = _deploy(network, topo, (job, probe), timeout_us=100_000)
        start = _capacity(network, topo)
        assert start["aggregated"] == NUM_AGGREGATORS
        policy = job.write_policy(tmp_path / "policy.json")
        ps = spawn(network.host("h1"), tmp_path / "ps",
                   [sys.executable, "-m", "hosts.ina.ps", "--policy", str(policy), "--json",
                    "--rounds", "0", "--round-cycle", str(CYCLE), "--idle-exit", "1",
                    "--linger", "0.5", "--max-time", "120"])
        import time
        time.sleep(0.5)
        ranks = [spawn(network.host(h), tmp_path / f"rank{r}",
                       [sys.executable, "-m", "tests.ddp_rounds_tool", "--policy", str(policy),
                        "--rank", str(r), "--sizes", ",".join(map(str, SIZES)),
                        "--iterations", str(ITERATIONS), "--round-cycle", str(CYCLE),
                        "--reuse-after", "0.5", "--seed", "3",
                        "--out", str(tmp_path / f"sums{r}.npz")])
                 for r, h in enumerate(job.workers)]
        reports = []
        for r, p in enumerate(ranks):
            rc, o, e = finish(p, tmp_path / f"rank{r}", 120)
            assert rc == 0, e[-800:]
            reports.append(json.loads(o.strip().splitlines()[-1]))
        rc, o, e = finish(ps, tmp_path / "ps", 60)
        assert rc == 0, e[-800:]
        st = json.loads(o.strip().splitlines()[-1])["jobs"]["1"]
        ev = _events(dep)
        time.sleep(0.3)  # past the timeout: whatever the last rounds left is reclaimable
        end = _capacity(network, topo)

    _assert_bucket_results(tmp_path, reports, st, job.num_fragments)
    assert ev["taken_over"] >= 0
    assert end == start
