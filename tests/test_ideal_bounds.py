"""The harness's ideal bound (experiments/ideal.py) against hand-computed traffic, the
fidelity verdict, the training window and the reference pick; offline, no network."""

from __future__ import annotations

import os
import time
from types import SimpleNamespace

import pytest

from experiments import train as harness
from experiments.fidelity import EMULATOR_BOUND, LINK_BOUND, cpu_share, judge, verdict
from experiments.harness_records import HarnessError, RunRecord, Setting
from experiments.harness_report import pick_reference
from experiments.ideal import HOP_LATENCY_S, _ndn_sizes, ideal_sync
from topologies.spec import parse_topology

BW = 5.0
P = 640  # 10 INA fragments of 64 values, 4 ring chunks of 160 on 4 ranks
GRAD = 14 + 28 + 52 + 4 * 64  # an INA packet on the wire: 350 bytes
SEG = 66  # TCP/IP/Ethernet headers of one segment, and one delayed ACK


def _setting(spec: str, workers: int, ps: bool = True) -> Setting:
    topo = parse_topology(spec)
    for _, _, d in topo.graph.edges(data=True):
        d["capacity"] = BW
    hosts = topo.hosts()
    if not ps:
        return Setting(topo, None, hosts[:workers], BW)
    return Setting(topo, hosts[0], hosts[1:workers + 1], BW)


def _ina_job(st: Setting, budget: int = 0, aggregate: bool = True):
    from controller.ina import InaJob

    return InaJob.plan(st.topo, st.ps, st.workers, budget, 1000.0, P, aggregate=aggregate)


def _at_rate(nbytes: float) -> float:
    return nbytes * 8 / (BW * 1e6)


def test_ps_on_a_star_every_gradient_into_the_ps_and_every_result_out() -> None:
    st = _setting("star:5", 4)
    ideal = ideal_sync("ps", st, P, _ina_job(st, aggregate=False))
    assert ideal.link_bytes["s1->h1"] == ideal.link_bytes["h1->s1"] == 4 * 10 * GRAD
    assert ideal.link_bytes["h2->s1"] == ideal.link_bytes["s1->h2"] == 10 * GRAD
    assert ideal.steps == 2
    assert ideal.bound_s == pytest.approx(_at_rate(14000) + 2 * HOP_LATENCY_S)


def test_ina_on_a_star_one_partial_per_fragment_reaches_the_ps() -> None:
    st = _setting("star:5", 4)
    ideal = ideal_sync("ina", st, P, _ina_job(st))
    for h in ("h1", "h2", "h3", "h4", "h5"):
        assert ideal.link_bytes[f"{h}->s1"] == ideal.link_bytes[f"s1->{h}"] == 10 * GRAD
    assert ideal.busiest()[1] == 3500


def test_ring_and_gloo_on_a_star() -> None:
    st = _setting("star:5", 4)
    # ring: 6 chunk steps of 160 values, each in 4 messages with a 16-byte header, one
    # segment each; the link out of a rank also carries its ACKs of the previous rank
    ring = ideal_sync("ring", st, P)
    data = 6 * (4 * 160 + 4 * 16) + 24 * SEG
    assert ring.link_bytes["h2->s1"] == data + 12 * SEG == 6600
    assert ring.steps == 2 * 3 * 1
    gloo = ideal_sync("gloo", st, P)  # 6 messages of 640 bytes, no framing of its own
    assert gloo.link_bytes["h3->s1"] == 6 * 640 + 6 * SEG + 3 * SEG
    assert "h1->s1" not in gloo.link_bytes  # the PS host takes no part


def test_gloo_on_a_linear_topology_routes_through_the_middle() -> None:
    st = _setting("linear:3", 3, ps=False)  # h1 -> h2 -> h3 -> h1 over s1 - s2 - s3
    ideal = ideal_sync("gloo", st, 600)
    d, a = 4 * 800 + 4 * SEG, 2 * SEG
    for link in ("s1->s2", "s2->s3", "s2->s1", "s3->s2"):
        assert ideal.link_bytes[link] == d + a
    assert ideal.steps == 2 * 2 * 3  # 2(N-1) steps, the longest neighbour path 3 switches


def test_ndn_collects_by_unicast_and_distributes_once() -> None:
    st = _setting("star:5", 4)
    collect, dist, interest, seg = _ndn_sizes()
    assert 0 < collect < dist < 100 and 0 < interest < 100 and seg == 350
    segs = 2  # 640 values: 350 + 290
    ndn = ideal_sync("ndn", st, P)
    assert ndn.link_bytes["s1->h1"] == 4 * (4 * P + segs * (collect + 14))
    assert ndn.link_bytes["h1->s1"] == 4 * segs * (interest + 14) + 4 * P + segs * (dist + 14)
    assert ndn.link_bytes["s1->h2"] == segs * (interest + 14) + 4 * P + segs * (dist + 14)
    ipmc = ideal_sync("ndn-ipmc", st, P)
    assert ipmc.link_bytes["s1->h1"] == 4 * (4 * P + segs * (collect + 14 + 28))
    tcp = ideal_sync("ndn-tcp", st, P)  # the distribution once per GPU
    assert tcp.link_bytes["h1->s1"] > 4 * (4 * P)


def test_differentiated_every_block_once_and_the_parameters_back() -> None:
    st = _setting("star:5", 4)
    ideal = ideal_sync("differentiated", st, P)
    up = 4 * P + 2 * (34 + 28 + 14)  # 2,560 bytes in two datagrams of at most 1,400
    down = 4 * P + 2 * SEG  # the parameters over TCP, two segments
    assert ideal.link_bytes["s1->h1"] == 4 * (up + SEG)
    assert ideal.link_bytes["h1->s1"] == 4 * down
    assert ideal.busiest() == ("s1->h1", 4 * (up + SEG))


def test_token_every_gradient_crosses_the_lan_once() -> None:
    from controller.token import token_lan

    topo = token_lan(4, BW)
    ideal = ideal_sync("token", Setting(topo, None, topo.hosts(), BW), P)
    grad = 4 * P + 5 * (14 + 32)  # 5 fragments of 128 values
    assert ideal.link_bytes["h1->nic1"] == grad + 46  # its broadcast, the token to h2
    assert ideal.link_bytes["lan->nic2"] == 3 * grad + 46  # the others', h1's token
    assert ideal.steps == 4 * 3


def test_bml_and_the_rails_on_their_networks() -> None:
    from controller.bcube import baseline_rails, bcube_network_topology

    bt = bcube_network_topology(2, 2, BW)
    bml = ideal_sync("bml", Setting(bt, None, bt.hosts(), 2 * BW), P)
    # each NIC sends 480 values a synchronization in 4 messages, and ACKs the 4 it gets
    nic = 4 * 480 + 4 * 16 + 4 * SEG + 4 * SEG
    assert set(bml.link_bytes.values()) == {nic}
    assert bml.steps == 4
    rt = baseline_rails(4, 2, BW)
    rr = ideal_sync("rail_ring", Setting(rt, None, rt.hosts()[:4], 2 * BW), P)
    one = ideal_sync("ring", Setting(rt, None, rt.hosts()[:4], BW), P // 2)
    assert rr.busiest()[1] == one.busiest()[1]  # half the gradient on each rail
    sharded = ideal_sync("rail_sharded_ps", Setting(rt, None, rt.hosts()[:4], 2 * BW), P)
    assert sharded.busiest()[1] > 0 and sharded.steps >= 2


def test_fat_tree_ps_splits_over_equal_cost_uplinks() -> None:
    st = _setting("fat-tree:4", 3)  # PS h1 and h2 on s7; h3, h4 on s8 (same pod)
    ideal = ideal_sync("ps", st, P, _ina_job(st, aggregate=False))
    assert ideal.link_bytes["s7->h1"] == 3 * 10 * GRAD
    assert ideal.link_bytes["s8->s5"] == ideal.link_bytes["s8->s6"] == 2 * 10 * GRAD / 2
    ina = ideal_sync("ina", st, P, _ina_job(st))
    assert ina.link_bytes["s7->h1"] == 10 * GRAD  # one partial per fragment into the PS
    assert ina.busiest()[1] <= 2 * 10 * GRAD


def test_ideal_bound_keeps_injected_resends_apart() -> None:
    plan = harness.make_plan(harness.build_parser().parse_args(
        ["--target", "embedded", "--scheme", "ps,ina"]))
    args = SimpleNamespace(max_time=300.0, budget=0)
    rec = RunRecord("ps", 0, ok=True, models_identical=True, iterations=10, sync_s_per_iter=0.2,
                    ideal_bound_s=0.15, line_rate_bound_s=9.0, retransmissions=37428,
                    window_s=5.0, window_switch_cpu_s=1.0, agent_cpu_s=1.0, cores=2)
    harness.derive(rec, plan, args)
    assert rec.ideal_bound_s == 0.15  # the re-sends do not move it
    assert rec.x_bound == pytest.approx(0.2 / 0.15, rel=1e-3)
    assert rec.resent_bytes == 37428 * GRAD
    assert rec.fidelity == LINK_BOUND and not rec.cpu_bound
    old = RunRecord("ps", 0, ok=True, models_identical=True, iterations=10, sync_s_per_iter=0.2)
    harness.derive(old, plan, args)  # a record from before: its ideal bound is computed
    assert old.ideal_bound_s and old.ideal_bound_s > 0


def test_a_starved_run_is_emulator_bound_and_its_ratio_gives_no_verdict() -> None:
    # the user's INA run: 11.9 s of switch CPU in 6.1 s of training on 2 cores
    share = cpu_share(11.9, 0.6, 6.1, 2)
    assert share is not None and share > 1.0
    assert verdict(3.0, share) == EMULATOR_BOUND
    assert verdict(3.0, cpu_share(1.0, 0.5, 6.1, 2)) == LINK_BOUND  # CPU to spare
    # one switch process (one data-plane thread) busy all along, the second core idle
    assert verdict(3.0, cpu_share(5.8, 0.2, 6.1, 2, busiest_switch_cpu_s=5.8)) == EMULATOR_BOUND
    assert verdict(1.2, share) == LINK_BOUND  # the links explain the time
    assert verdict(None, share) == "unknown"
    from experiments.harness_report import summarize

    st = _setting("star:5", 4)
    plan = SimpleNamespace(schemes=["gloo", "ina"], settings={"gloo": st, "ina": st})
    recs = []
    for s, starved in (("gloo", False), ("ina", True)):
        r = RunRecord(s, 0, ok=True, iterations=10, sync_s_per_iter=0.3, ideal_bound_s=0.1,
                      time_to_target_s=3.0, window_s=6.1, window_switch_cpu_s=11.9 if starved else 0.5,
                      agent_cpu_s=0.6, cores=2)
        judge(r)
        recs.append(r)
    rows = {r["scheme"]: r for r in summarize(recs, plan, "gloo")}
    assert rows["ina"]["cpu_bound_runs"] == 1 and not rows["ina"]["verdict"]
    assert rows["ina"]["fidelity"] == {EMULATOR_BOUND: 1}
    assert rows["gloo"]["verdict"]


def test_an_emulator_bound_run_outside_the_paired_ratio_leaves_its_verdict() -> None:
    """The reference's emulator-bound run on a seed that missed the target is in no
    paired ratio, so the link-bound schemes' ratios keep their verdict; an emulator-bound
    run on a seed both reached takes it away."""
    from experiments.harness_report import summarize

    st = _setting("star:5", 4)
    plan = SimpleNamespace(schemes=["gloo", "ps", "ina"], settings={s: st for s in ("gloo", "ps", "ina")})
    recs = []
    # (scheme, seed): (time to target or None, starved)
    runs = {("gloo", 0): (1.0, False), ("gloo", 1): (1.2, False), ("gloo", 2): (None, True),
            ("ps", 0): (2.0, False), ("ps", 1): (2.6, False), ("ps", 2): (2.2, False),
            ("ina", 0): (1.5, True), ("ina", 1): (1.4, False), ("ina", 2): (1.3, False)}
    for (s, seed), (tt, starved) in runs.items():
        r = RunRecord(s, seed, ok=True, iterations=10, sync_s_per_iter=0.3, ideal_bound_s=0.1,
                      time_to_target_s=tt, window_s=6.1, window_switch_cpu_s=11.9 if starved else 0.5,
                      agent_cpu_s=0.6, cores=2)
        judge(r)
        assert r.cpu_bound == starved
        recs.append(r)
    rows = {r["scheme"]: r for r in summarize(recs, plan, "gloo")}
    assert rows["ps"]["verdict"]  # gloo's seed 2 (emulator-bound) missed: no ratio uses it
    assert rows["ps"]["ratio_to_reference"]["n"] == 2
    assert rows["ps"]["ratio_to_reference"]["mean"] == pytest.approx((2.0 / 1.0 + 2.6 / 1.2) / 2)
    assert not rows["ina"]["verdict"]  # its seed 0 is paired and emulator-bound


def test_training_window_leaves_start_up_cpu_out(tmp_path) -> None:
    """CPU burnt before the first evaluation record (start-up) is not the window's."""
    from experiments.accounting import TrainingWindow, process_cpu_seconds

    sw = SimpleNamespace(name="s1", proc=SimpleNamespace(pid=os.getpid()), group=None)
    net = SimpleNamespace(net=SimpleNamespace(switches=[sw]))
    out = tmp_path / "rank0.out"
    out.write_text("ready\n")
    cpu0 = process_cpu_seconds(os.getpid()) or 0.0
    with TrainingWindow(net, tmp_path, period=0.05) as w:
        end = time.monotonic() + 0.3
        while time.monotonic() < end:  # busy start-up: this process stands in for a switch
            pass
        out.write_text(out.read_text() + '{"step": 0, "t": 0}\n')
        time.sleep(0.5)  # training, idle
        out.write_text(out.read_text() + '{"step": 6, "t": 0.5}\n')
        time.sleep(0.2)  # teardown
    spent = (process_cpu_seconds(os.getpid()) or 0.0) - cpu0
    res = w.result()
    assert res is not None and res["window_s"] >= 0.3
    assert res["busiest_switch_cpu_s"] == res["switch_cpu_s"]  # one process
    assert res["switch_cpu_s"] < 0.5 * spent  # the busy start-up stayed out


def test_the_reference_is_picked_among_the_schemes_asked_for() -> None:
    assert pick_reference(["ps", "ina"], None) == "ps"
    assert pick_reference(["ps", "ring", "gloo"], None) == "gloo"
    assert pick_reference(["ina", "ring"], None) == "ring"
    assert pick_reference(["ina", "ring"], "ina") == "ina"
    with pytest.raises(HarnessError, match="--reference gloo: not among the schemes run"):
        pick_reference(["ina", "ps"], "gloo")
    args = harness.build_parser().parse_args(["--target", "embedded", "--scheme", "ps,ina"])
    harness.make_plan(args)
    assert args.reference == "ps" and args.reference_picked


def test_the_pace_rules_on_window_evidence() -> None:
    """experiments/fidelity.py's rules: saturated, one switch saturated, starved (on a
    busy machine), dropped; none of them on a run that had CPU to spare."""
    base = dict(ok=True, sync_s_per_iter=0.3, ideal_bound_s=0.1, window_s=4.0, cores=2,
                window_switch_cpu_s=0.4, window_busiest_switch_cpu_s=0.4, agent_cpu_s=0.2,
                window_switch_wait_s=0.1, window_busiest_switch_wanted_s=0.5,
                window_agent_cpu_s=0.2, window_agent_wait_s=0.1, machine_busy=0.5, rx_drops=0)
    cases = [({}, ""),
             ({"window_agent_cpu_s": 5.0, "window_agent_wait_s": 2.0}, "saturated"),
             ({"window_busiest_switch_wanted_s": 3.5}, "one switch saturated"),
             # the switches waited 3 s for a core on a busy machine while using little
             ({"window_switch_wait_s": 3.0, "machine_busy": 0.95}, "starved"),
             ({"window_switch_wait_s": 3.0}, ""),  # the cores were not busy: not starved
             ({"rx_drops": 12}, "dropped")]
    for change, pace in cases:
        rec = RunRecord("ina", 0, **{**base, **change})
        judge(rec)
        assert rec.pace == pace, (change, rec)
        assert rec.fidelity == (EMULATOR_BOUND if pace else LINK_BOUND)
        assert rec.cpu_share is not None and rec.cpu_share < 0.8  # CPU used alone: not flagged
    rec = RunRecord("ina", 0, **{**base, "sync_s_per_iter": 0.12, "window_switch_wait_s": 3.0,
                                 "machine_busy": 0.95})
    judge(rec)
    assert rec.fidelity == LINK_BOUND and not rec.pace  # within 1.5x its bound: the links'
