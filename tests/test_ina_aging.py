"""No leaked aggregators (docs/trust.md, "INA: no leaked aggregators"; docs/ina.md, "Aging").

Network tests (a star: one switch, s_d, aggregates everything), on the embedded target
unless TARGET says otherwise:

* fragments nobody completes hold every one of the switch's 1,024 aggregators: a real
  job falls back to the PS while the timeout has not passed, and aggregates in the
  switch again, with exact sums, once it has (the controller shortens the timeout);
* an abandoned fragment with the very numbers of a real job (a crashed earlier run of
  worker 0, other values) is taken over, not added to: the sums stay exact;
* 1,000 rounds of a small job whose PS loses every 7th RESULT (each loss leaves an
  aggregator behind), with the fragment numbers reused every 50 rounds: every round's
  sum is exact, the left-behind aggregators were taken over, and the switch's capacity
  (aggregators a fan-in-1 probe gets, ``tests/ina_probe.py``) is what it was at the start.

Unit tests: the bounded fragment-number schedule (``hosts/ina/rounds.py``) and the PS's
mapping of reused numbers to rounds.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from hosts.ina.ps import ParameterServer
from hosts.ina.rounds import FragmentCycle, max_round_cycle
from tests.ina_probe import (
    NUM_AGGREGATORS,
    aggregator_index,
    covering_fragments,
    probe_counts,
    run_tool,
)
from tests.netenv import started_network
from wire.ina import INA_HEADER, INA_VALUES, MsgType
from wire.ina_policy import Policy

ROOT = Path(__file__).resolve().parent.parent

# ----------------------------------------------------------------------------- unit


class _Clock:
    def __init__(self) -> None:
        self.t = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.t += s


def test_fragment_cycle_reuses_numbers_only_after_reuse_after() -> None:
    clk = _Clock()
    cyc = FragmentCycle(4, offset=8, cycle=3, reuse_after=2.0, sleep=clk.sleep, clock=clk)
    offsets = []
    for _ in range(7):
        offsets.append(cyc.begin())
        clk.t += 0.5  # the round takes 0.5 s
        cyc.end()
    assert offsets == [8, 12, 16, 8, 12, 16, 8]
    # a wait before each reuse (rounds 3 and 6), from the end of the round before it
    assert clk.slept == [2.0, 2.0]
    assert cyc.waited_s == 4.0
    # slow rounds need no wait
    slow = FragmentCycle(1, cycle=2, reuse_after=1.0, sleep=clk.sleep, clock=clk)
    clk.slept.clear()
    for _ in range(4):
        slow.begin()
        clk.t += 0.1
        slow.end()
        clk.t += 5.0  # e.g. the backward pass between two buckets
    assert clk.slept == []


def test_fragment_cycle_bounds() -> None:
    assert max_round_cycle(1) == 2**32
    assert FragmentCycle(1000).cycle == 2**32 // 1000  # default: as many as fit
    cyc = FragmentCycle(1000)
    assert cyc.offset_of(cyc.cycle - 1) + 1000 <= 2**32 and cyc.offset_of(cyc.cycle) == 0
    for bad in ({"cycle": 1}, {"cycle": 2**32}, {"reuse_after": -1.0}):
        with pytest.raises(ValueError):
            FragmentCycle(1000, **bad)  # type: ignore[arg-type]


def test_failed_round_waits_from_now() -> None:
    clk = _Clock()
    cyc = FragmentCycle(1, cycle=2, reuse_after=1.0, sleep=clk.sleep, clock=clk)
    cyc.begin()
    cyc.end()
    cyc.begin()  # this round fails: no end(); its packets may be out until the retry
    clk.t += 10.0
    cyc.begin()
    assert clk.slept == [1.0]


def _grad(frag: int, rank: int, value: int) -> bytes:
    vals = np.full(INA_VALUES, value, dtype=">i4").tobytes()
    return INA_HEADER.pack(int(MsgType.GRAD), 1, rank, frag, 0, 0, 1 << rank, 1, 0, 0, 0) + vals


def test_ps_maps_reused_fragment_numbers_to_rounds() -> None:
    pol = Policy.ps_only(1, "127.0.0.1", ["127.0.0.2", "127.0.0.3"], 1)
    with ParameterServer(1, 2, 1, pol, bind_ip="127.0.0.1", port=0, rounds=0, cycle=3) as ps:
        jb = ps.jobs[1]
        w0, w1 = ("127.0.0.2", 1), ("127.0.0.3", 1)  # each rank from its own address (admission)
        for k in range(7):  # wire numbers 0, 1, 2, 0, 1, 2, 0
            ps._handle(_grad(k % 3, 0, k), w0, 0.0)
            if k:
                # the previous round's number is a late packet, not this round's
                ps._handle(_grad((k - 1) % 3, 1, 1000), w1, 0.0)
                assert jb.stats.late == k
            # the next round's number is refused (only a forger can be ahead)
            before = ps.counters.out_of_range
            ps._handle(_grad((k + 1) % 3, 1, 1000), w1, 0.0)
            assert ps.counters.out_of_range == before + 1
            assert jb.round == k and jb.have[0] == 1
            ps._handle(_grad(k % 3, 1, 10 * k), w1, 0.0)
            assert jb.round == k + 1
            assert (np.frombuffer(jb.prev_results[0], ">i4") == 11 * k).all()


def test_embedded_switch_takes_over_idle_aggregators() -> None:
    """ina.p4 on the embedded target, its clock (``ingress_global_timestamp``, us) set
    by the test: an aggregator is taken over by another fragment only once idle past
    ``ina_aging``'s timeout, by its own key only past 4x it (a lagging rank adds to its
    round, and a flush still reads it), and never with the timeout 0."""
    from scapy.all import IP, UDP, Ether

    from tests.ina_probe import aggregating_switch

    # port 1 faces another switch: admission lets its GRADs (each a rank's own) through
    sw, prog = aggregating_switch((ROOT / "p4src" / "build" / "ina.json").read_bytes())
    a = "MyIngress.aggregator."
    now = [10_000_000]
    sw._now_us = lambda: now[0]  # type: ignore[method-assign]

    def aging(timeout_us: int) -> None:
        prog.tables[a + "ina_aging"].set_default(prog.action_call(
            a + "ina_aging", a + "set_aggregator_timeout", (timeout_us,)))

    def send(frag: int, bit: int, value: int) -> None:
        vals = np.full(INA_VALUES, value, dtype=">i4").tobytes()
        pl = INA_HEADER.pack(int(MsgType.GRAD), 1, bit, frag, 1, 0, 1 << bit, 1, 2, 0, 0) + vals
        sw.process(1, bytes(Ether() / IP(src="10.0.0.2", dst="10.255.0.1")
                            / UDP(sport=40000, dport=40000) / pl))

    def state(frag: int) -> tuple[int, ...]:
        """bitmap, count, last contribution (us), first value's running sum"""
        i = aggregator_index(1, frag)
        return tuple(prog.registers[a + n].read(i)
                     for n in ("agg_bitmap", "agg_count", "agg_time", "agg_value_00"))

    def events() -> dict[str, int]:
        cells = prog.counters[a + "ina_events"]
        return {n: cells.read(k)[0] for k, n in ((1, "partial"), (2, "passed_on"), (5, "taken_over"))}

    def flush(frag: int) -> None:
        """the PS's flush (a NACK tagged with the switch): a PARTIAL of what it holds"""
        pl = INA_HEADER.pack(int(MsgType.NACK), 1, 0, frag, 1, 0, 2, 1, 0, 0, 0)
        sw.process(1, bytes(Ether() / IP(src="10.0.0.2", dst="10.255.0.1")
                            / UDP(sport=40000, dport=40000) / pl))

    def nack_empty() -> int:
        return prog.counters[a + "ina_drops"].read(6)[0]

    send(7, 0, 5)
    assert state(7) == (1, 1, 10_000_000, 5)  # held, stamped in microseconds
    now[0] += 1_000_000  # exactly the default timeout (1 s): not past it
    send(7, 1, 6)
    assert state(7) == (3, 2, now[0], 11) and events() == {"partial": 1, "passed_on": 0,
                                                             "taken_over": 0}
    # a rank lagging its round by more than the timeout (within 4x) adds to it
    send(8, 0, 5)
    now[0] += 2_500_000
    flush(8)  # held past the timeout: still flushed (a PARTIAL of the one contribution)
    assert events()["partial"] == 2 and nack_empty() == 0
    send(8, 1, 6)
    assert state(8) == (3, 2, now[0], 11) and events() == {"partial": 3, "passed_on": 0,
                                                             "taken_over": 0}
    now[0] += 1_500_000  # fragment 7 idle exactly 4x the timeout: not past it
    send(7, 0, 9)  # its own key, a contributor already in: the complete PARTIAL again
    assert state(7)[:2] == (3, 2) and events()["partial"] == 4
    now[0] += 1
    flush(7)  # past 4x: left behind by an earlier use of the number, not flushed
    assert events()["partial"] == 4 and nack_empty() == 1
    send(7, 0, 9)  # past it: taken over, the old sums dropped
    assert state(7) == (1, 1, now[0], 9) and events()["taken_over"] == 1
    other = next(f for f in range(9, 100_000) if aggregator_index(1, f) == aggregator_index(1, 7))
    aging(0)  # never
    now[0] += 10**9
    send(other, 0, 1)  # busy: passed on, unaggregated, to the PS
    assert state(7)[:2] == (1, 1) and events() == {"partial": 4, "passed_on": 1, "taken_over": 1}
    aging(50)
    now[0] += 51
    send(other, 0, 1)  # another fragment's, past the timeout: taken over
    assert state(other) == (1, 1, now[0], 1) and events()["taken_over"] == 2
    send(other, 1, 2)
    assert state(other)[:2] == (3, 2) and state(other)[3] == 3 and events()["partial"] == 5


def test_probe_covers_every_aggregator() -> None:
    frags = covering_fragments(2, 1 << 30)
    assert sorted(aggregator_index(2, f) for f in frags) == list(range(NUM_AGGREGATORS))
    cfg = (ROOT / "p4src" / "include" / "config.p4").read_text()
    assert f"#define NUM_AGGREGATORS {NUM_AGGREGATORS}" in cfg


# ----------------------------------------------------------------------------- network

JOB_VALUES = 512  # 8 fragments


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[object, object, Path]]:
    from topologies import star
    with started_network(tmp_path_factory, "ina_aging",
                         star(6, bw=100), "ina", neighbors=True) as n:
        yield n


def _jobs(topo):  # noqa: ANN001, ANN202
    """Job 1 (PS h1, workers h2 h3) and the probe's job 2 (PS h4, worker h5)."""
    from controller.ina import InaJob

    job = InaJob.plan(topo, "h1", ["h2", "h3"], 0, 1000.0, JOB_VALUES, job_id=1)
    probe = InaJob.plan(topo, "h4", ["h5"], 0, 1000.0, INA_VALUES, job_id=2)
    assert job.aggregating_switches == ["s1"] == probe.aggregating_switches
    return job, probe


def _deploy(network, topo, jobs, timeout_us: int | None):  # noqa: ANN001, ANN202
    from controller.ina import InaDeployment

    dep = InaDeployment(topo, network.grpc_addresses(), list(jobs),
                        aggregator_timeout_us=timeout_us)
    dep.deploy()
    return dep


def _switch_args(topo) -> list[str]:  # noqa: ANN001
    from controller.ina import switch_ip

    sid = topo.device_id("s1")
    return ["--switch-ip", switch_ip(sid), "--tag", str(sid)]


def _capacity(network, topo) -> dict:  # noqa: ANN001
    """Aggregators a job can get: job 2's worker h5 probes every index, its PS h4
    counts the answers (and frees what the probes took)."""
    return probe_counts(network, topo, "h4", "h5", *_switch_args(topo), "--job", "2")


def _grads(n: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(JOB_VALUES) * 0.05).astype(np.float32) for _ in range(n)]


def _events(dep) -> dict[str, int]:  # noqa: ANN001
    return dep.read_events()["s1"]


@pytest.mark.net
@pytest.mark.slow
def test_held_aggregators_are_taken_over_after_the_timeout(net) -> None:  # noqa: ANN001
    from experiments.ina import run_jobs

    network, topo, out = net
    job, probe = _jobs(topo)
    dep = _deploy(network, topo, (job, probe), timeout_us=60_000_000)  # 60 s: not yet
    assert _capacity(network, topo) == {"aggregated": NUM_AGGREGATORS, "passed_on": 0,
                                        "unanswered": 0}
    # worker 0's host (it passes any per-member check) fills every aggregator with
    # fragments that never complete: a crashed run, or a forger on a member's port
    run_tool(network, "h2", "occupy", *_switch_args(topo), "--job", "1", "--bit", "0")
    assert _capacity(network, topo) == {"aggregated": 0, "passed_on": NUM_AGGREGATORS,
                                        "unanswered": 0}
    grads = _grads(2, 1)
    (res,) = run_jobs(network, topo, [(job, grads)], out, "held", timeout=0.5)
    assert res.exact, f"{res.mismatches} elements differ from the exact sum"
    assert res.ps_packets["partial_in"] == 0  # every GRAD fell back to the PS
    assert _events(dep)["taken_over"] == 0
    # the controller shortens the timeout; the held aggregators are now past it
    dep.set_aggregator_timeout(100_000)
    time.sleep(0.5)
    (res,) = run_jobs(network, topo, [(job, grads)], out, "taken", timeout=0.5)
    assert res.exact, f"{res.mismatches} elements differ from the exact sum"
    assert res.ps_packets["partial_in"] == job.num_fragments  # aggregated in the switch
    assert res.ps_packets["grad_in"] == res.retransmissions
    ev = _events(dep)
    assert ev["taken_over"] >= job.num_fragments
    time.sleep(0.3)
    assert _capacity(network, topo)["aggregated"] == NUM_AGGREGATORS


@pytest.mark.net
@pytest.mark.slow
def test_abandoned_fragment_with_the_same_numbers_is_not_added_to(net) -> None:  # noqa: ANN001
    from experiments.ina import run_jobs

    network, topo, out = net
    job, probe = _jobs(topo)
    dep = _deploy(network, topo, (job, probe), timeout_us=100_000)
    # an earlier run of worker 0 left the job's own fragment numbers behind, with other
    # values: added to, they would put those values into the sums
    run_tool(network, "h2", "occupy", *_switch_args(topo), "--job", "1", "--bit", "0",
          "--fragments", f"0:{job.num_fragments}", "--seed", "7")
    time.sleep(0.7)  # past 4x the timeout: the same key takes them over
    (res,) = run_jobs(network, topo, [(job, _grads(2, 2))], out, "abandoned", timeout=0.5)
    assert res.exact, f"{res.mismatches} elements differ from the exact sum"
    assert res.ps_packets["partial_in"] == job.num_fragments
    assert _events(dep)["taken_over"] >= job.num_fragments


ROUNDS, CYCLE = 1000, 50


@pytest.mark.long  # a soak: test_ddp_hook's buckets test reuses the numbers 31 times, capacity checked
@pytest.mark.net
@pytest.mark.slow
def test_thousand_rounds_leave_capacity_unchanged(net) -> None:  # noqa: ANN001
    from controller.ina import InaJob
    from experiments.runner import await_ready, finish, spawn
    from hosts.ina.worker import round_gradient
    from wire.fixedpoint import quantize

    network, topo, out = net
    _, probe = _jobs(topo)
    job = InaJob.plan(topo, "h1", ["h2", "h3"], 0, 1000.0, INA_VALUES, job_id=1)  # 1 fragment
    dep = _deploy(network, topo, (job, probe), timeout_us=100_000)
    start = _capacity(network, topo)
    assert start["aggregated"] == NUM_AGGREGATORS
    jdir = out / "rounds"
    jdir.mkdir()
    policy = job.write_policy(jdir / "policy.json")
    common = ["--rounds", str(ROUNDS), "--round-cycle", str(CYCLE)]
    # the PS loses every 7th datagram it sends: RESULTs to s_d among them, each of which
    # leaves s_d's aggregator holding a finished fragment (the workers get their RESULT
    # again from the PS by unicast, which frees nothing)
    ps = spawn(network.host("h1"), jdir / "ps",
               [sys.executable, "-m", "hosts.ina.ps", "--policy", str(policy), "--json",
                "--ready", "--linger", "2", "--max-time", "400", "--drop-every", "7", *common])
    workers = [spawn(network.host(h), jdir / f"worker-{r}",
                     [sys.executable, "-m", "hosts.ina.worker", "--policy", str(policy),
                      "--rank", str(r), "--size", str(INA_VALUES), "--seed", "5",
                      "--out-int", str(jdir / f"out-{r}.npy"), "--timeout", "0.05",
                      "--max-backoff", "0.2", "--reuse-after", "0.5", "--max-time", "60",
                      "--json", "--no-progress", "--ready-go", *common], stdin=True)
               for r, h in enumerate(job.workers)]
    await_ready([(ps, jdir / "ps")] + [(p, jdir / f"worker-{r}") for r, p in enumerate(workers)])
    for p in workers:
        p.stdin.write(b"go\n")
        p.stdin.flush()
    summaries = []
    for r, p in enumerate(workers):
        rc, o, e = finish(p, jdir / f"worker-{r}", 400)
        assert rc == 0, e[-800:]
        summaries.append(json.loads(o.strip().splitlines()[-1]))
    rc, o, e = finish(ps, jdir / "ps", 60)
    assert rc == 0, e[-800:]
    st = json.loads(o.strip().splitlines()[-1])["jobs"]["1"]
    assert st["completed"] == ROUNDS
    # every round's sum, element by element
    grads = [[np.random.default_rng([5, r]).standard_normal(INA_VALUES).astype(np.float32)]
             + [round_gradient(5, r, k, INA_VALUES) for k in range(1, ROUNDS)] for r in range(2)]
    expected = np.stack([quantize(grads[0][k], 16, 2) + quantize(grads[1][k], 16, 2)
                         for k in range(ROUNDS)])
    for r in range(2):
        got = np.load(jdir / f"out-{r}.npy")
        assert got.shape == (ROUNDS, INA_VALUES)
        assert np.array_equal(got, expected), f"rank {r}: {np.sum(got != expected)} differ"
    assert all(s["rounds"] == ROUNDS and s["reuse_wait_s"] > 0 for s in summaries)
    ev = _events(dep)
    assert ev["taken_over"] > 0  # aggregators were left behind, and were taken back
    assert st["partial_in"] >= ROUNDS // 2  # most rounds were aggregated in the switch
    time.sleep(0.3)  # past the timeout: whatever the last rounds left is reclaimable
    assert _capacity(network, topo) == start
