"""INA host agents with a Python model of the switches, timeouts, the CLI processes,
back-to-back rounds and job isolation (rig: ``tests/ina_loopback.py``).
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from hosts.ina.ps import ParameterServer
from hosts.ina.worker import (
    FaultInjection,
    InaTimeoutError,
    Policy,
    SwitchRef,
    Worker,
    open_ina_socket,
)
from tests.ina_loopback import (
    PORT,
    ROOT,
    S,
    _check_exact,
    _exact,
    _grads,
    _run,
    net,
)
from wire.fixedpoint import (
    num_fragments,
)
from wire.ina import (
    INA_HEADER_LEN,
    INA_VALUES,
    InaFlags,
    MsgType,
    decode_ina,
    encode_ina,
)

__all__ = ["net"]  # the fixture, imported


class _ModelSwitches(threading.Thread):
    """A Python model of the switch side of docs/ina.md for the end-to-end test:
    aggregating switches (no busy aggregators), VIA_SD merging at s_d and s_d's RESULT
    multicast."""

    def __init__(self, pol: Policy, ps_addr: tuple[str, int]) -> None:
        super().__init__(daemon=True)
        self.pol, self.ps_addr = pol, ps_addr
        self.socks = {}
        for s, ip in pol.switch_ips.items():
            self.socks[s] = open_ina_socket(ip, PORT)  # large buffer: bursts of windows
        self.aggs: dict[tuple[int, int, int], list] = {}  # (switch, job, frag) -> [bm, n, vals]
        self.partials = self.clears = self.multicast = self.via_sd = self.flushes = 0
        self.stop = threading.Event()

    def run(self) -> None:
        by_sock = {sk: s for s, sk in self.socks.items()}
        while not self.stop.is_set():
            ready, _, _ = select.select(list(by_sock), [], [], 0.05)
            for sk in ready:
                s = by_sock[sk]
                data = sk.recv(2048)
                v = self.pol.values_per_packet  # the "program" of these switches
                h, vals = decode_ina(data, v)
                key = (s, h.job_id, h.fragment)
                if h.msg_type == MsgType.GRAD and h.tag == s:
                    a = self.aggs.setdefault(key, [0, 0, np.zeros(v, np.int32)])
                    if not a[0] & h.bitmap:
                        a[0] |= h.bitmap
                        a[1] += h.count
                        a[2] += vals
                    if a[1] >= h.fanin and h.flags & InaFlags.VIA_SD:  # merge again at s_d
                        sd = self.pol.sd
                        sk.sendto(encode_ina(MsgType.GRAD, h.job_id, 0, h.fragment, sd.id, 0,
                                             a[0], a[1], h.sd_fanin, values=a[2]), (sd.ip, PORT))
                        self.via_sd += 1
                    elif a[1] >= h.fanin:  # complete (again): send the partial on
                        sk.sendto(encode_ina(MsgType.PARTIAL, h.job_id, 0, h.fragment, s, 0,
                                             a[0], a[1], values=a[2]), self.ps_addr)
                        self.partials += 1
                elif h.msg_type == MsgType.CLEAR and h.tag == s:
                    self.aggs.pop(key, None)
                    self.clears += 1
                elif h.msg_type == MsgType.NACK and h.tag == s and key in self.aggs:
                    a = self.aggs[key]  # flush: what it holds, complete or not
                    sk.sendto(encode_ina(MsgType.PARTIAL, h.job_id, 0, h.fragment, s, 0,
                                         a[0], a[1], flags=InaFlags.RETX, values=a[2]),
                              self.ps_addr)
                    self.flushes += 1
                elif h.msg_type == MsgType.RESULT and self.pol.sd and h.tag == s == self.pol.sd.id:
                    self.aggs.pop(key, None)
                    for w in self.pol.workers:
                        sk.sendto(data, (w, PORT))
                        self.multicast += 1

    def close(self) -> None:
        self.stop.set()
        self.join(2)
        for sk in self.socks.values():
            sk.close()


@pytest.mark.parametrize("vpp", [64, 256])
def test_switch_tags_partials_sd_multicast_exact(net, vpp):
    """Tags from a policy: fragments go to a model switch 5, to s_d (9) or to the PS;
    some of 5's aggregates are merged again at s_d (VIA_SD); partials, RESULT through
    s_d and CLEARs complete the job exactly and free every model aggregator. Worker 3
    loses packets (retransmitted to the PS). With 64 and with 256 values a packet."""
    n_w, n_f = 4, 60
    f = np.arange(n_f)
    row01 = np.where(f % 3 == 0, 5, np.where(f % 3 == 1, 9, 0))
    row23 = np.where(f % 2 == 0, 5, 0)
    tags = np.stack([row01, row01, row23, row23])
    partial5 = np.where((f % 4 == 0) & (f % 3 != 1), 9, 0)  # where 5 aggregates f
    pol = Policy(job=8, ps=net(1), workers=tuple(net(2 + r) for r in range(n_w)),
                 num_fragments=n_f, tags=tags, switch_ips={5: net(50), 9: net(90)},
                 sd=SwitchRef(9, net(90)), partial_tags={5: partial5}, values_per_packet=vpp)
    assert pol.fanin[9][0] == 4 and pol.fanin[9][1] == 2  # merged workers count at s_d
    model = _ModelSwitches(pol, (net(1), PORT))
    model.start()
    grads = _grads(n_w, n_f * vpp - 3, seed=8)
    try:
        faults = iter([None, None, None, FaultInjection(drop_every=4)])
        # timeout well above the model's reaction time: a retransmission that overtakes
        # a slow switch leaves a stale aggregator behind (see the note in docs/ina_policy.md)
        rep, ps, out = _run([pol], {8: grads}, ps_kw={"linger": 0.5},
                            worker_kw={"faults": lambda: next(faults), "timeout": 0.3})
    finally:
        model.close()
    _check_exact(pol, grads, ps, out)
    st = rep.jobs[8]
    assert st.accepted_partial > 0 and model.partials > 0 and model.via_sd > 0
    assert st.results_sent == n_f  # one RESULT per fragment, to s_d
    assert model.multicast >= n_f * n_w
    # one CLEAR per (fragment, switch) the policy names; a PARTIAL that reaches the PS
    # after its fragment finished gets one more, to the switch's default address
    assert model.clears == sum(len(v) for v in pol.clear_targets().values()) <= st.clears_sent
    assert model.aggs == {}


def test_worker_times_out_with_clear_error(net):
    with Worker(0, 2, 1, net(1), bind_ip=net(2), timeout=0.02, max_time=0.3) as w, pytest.raises(
        InaTimeoutError, match=r"64 of 64 fragments still have no RESULT"
    ) as e:
        w.allreduce(np.zeros(64 * INA_VALUES, np.float32))
    assert e.value.report.retransmissions > 0


def test_worker_ignores_foreign_and_stale_results(net):
    pol = Policy.ps_only(5, net(1), [net(2)], 4)
    with Worker.from_policy(pol, 0, window=1, timeout=0.5, max_time=5) as w:
        ps = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        ps.bind((net(1), PORT))
        me = (net(2), PORT)
        box = {}
        t = threading.Thread(target=lambda: box.setdefault("r", w.allreduce_fixed(
            np.arange(4 * INA_VALUES, dtype=np.int32))))
        t.start()
        ps.settimeout(2)
        for frag in range(4):
            hdr, vals = decode_ina(ps.recv(2048))
            assert (hdr.msg_type, hdr.fragment, hdr.bitmap, hdr.count) == (1, frag, 1, 1)
            if frag == 0:  # noise first: other job, stale fragment, bad bitmap, short
                ps.sendto(encode_ina(3, 6, 0, 0, 0, 0, 1, 1, values=vals), me)
                ps.sendto(encode_ina(3, 5, 0, 3, 0, 0, 1, 1, values=vals), me)
                ps.sendto(encode_ina(3, 5, 0, 0, 0, 0, 3, 2, values=vals), me)
                ps.sendto(b"\x03\x05", me)
            ps.sendto(encode_ina(3, 5, 0, frag, 0, 0, 1, 1, values=vals * 2), me)
        t.join(5)
        ps.close()
    res, st = box["r"]
    assert res.tolist() == (np.arange(4 * INA_VALUES) * 2).tolist()
    assert st.ignored == 3 and st.stale_results == 1 and st.retransmissions == 0


def test_cli_processes(net, tmp_path):
    n_w, n = 2, INA_VALUES * 50
    pol = Policy.ps_only(9, net(1), [net(2), net(3)], num_fragments(n))
    pol.dump(tmp_path / "p.json")
    grads = _grads(n_w, n, seed=9)
    for r, g in enumerate(grads):
        np.save(tmp_path / f"g{r}.npy", g)
    py = [sys.executable, "-m"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    ps = subprocess.Popen([*py, "hosts.ina.ps", "--policy", str(tmp_path / "p.json"), "--json",
                           "--linger", "0.3", "--max-time", "20"],
                          cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    ws = [
        subprocess.Popen([*py, "hosts.ina.worker", "--policy", str(tmp_path / "p.json"),
                          "--rank", str(r), "--gradient", str(tmp_path / f"g{r}.npy"),
                          "--out", str(tmp_path / f"out{r}.npy"), "--json", "--timeout", "0.1"],
                         cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        for r in range(n_w)
    ]
    summaries = [json.loads(w.communicate(timeout=30)[0]) for w in ws]
    ps_out = json.loads(ps.communicate(timeout=30)[0])
    assert all(w.returncode == 0 for w in ws) and ps.returncode == 0
    exp = _exact(grads, n_w)
    for r, s in enumerate(summaries):
        assert s["ok"] and s["fragments"] == pol.num_fragments and s["packets_sent"] >= s["fragments"]
        assert np.array_equal(np.load(tmp_path / f"out{r}.npy"), (exp / 2.0**S).astype(np.float32))
    assert summaries[0]["result_sha256_16"] == summaries[1]["result_sha256_16"]
    assert ps_out["complete"] and ps_out["jobs"]["9"]["contributions"] == n_w * pol.num_fragments
    bad = subprocess.run([*py, "hosts.ina.worker", "--policy", str(tmp_path / "nope.json"),
                          "--rank", "0", "--json"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=30)
    assert bad.returncode == 2 and json.loads(bad.stdout)["ok"] is False


def _rounds(net, pol: Policy, rounds: int, ps_kw: dict, worker_kw: dict) -> tuple:
    """``rounds`` back-to-back allreduces (worker offsets r·F) against one PS."""
    n = pol.num_fragments * INA_VALUES
    grads = [_grads(pol.num_workers, n, seed=10 + r) for r in range(rounds)]
    ps = ParameterServer.from_policies([pol], **{"linger": 0.6, "max_time": 30.0, **ps_kw})
    box: dict = {}
    errors: list[BaseException] = []
    out: dict[tuple[int, int], np.ndarray] = {}

    def serve() -> None:
        try:
            box["report"] = ps.run()
        except BaseException as e:
            errors.append(e)

    def work(rank: int) -> None:
        try:
            kw = dict(worker_kw)
            if callable(kw.get("faults")):
                kw["faults"] = kw["faults"]()
            with Worker.from_policy(pol, rank, **kw) as w:
                for r in range(rounds):
                    out[r, rank] = w.allreduce(grads[r][rank], r * pol.num_fragments)[0]
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=serve)] + [
        threading.Thread(target=work, args=(k,)) for k in range(pol.num_workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    ps.close()
    if errors:
        raise errors[0]
    for r in range(rounds):
        exp = _exact(grads[r], pol.num_workers)
        for k in range(pol.num_workers):
            assert np.array_equal(out[r, k].astype(np.int64), exp), (r, k)
    return box["report"], ps


def test_ps_serves_rounds_back_to_back_exactly_with_loss(net):
    """DDP-style use: one PS, many allreduces; lost RESULTs of a finished round are
    resent from the previous round's results while the others have moved on."""
    pol = Policy.ps_only(5, net(1), [net(2 + r) for r in range(3)], 20)
    rep, ps = _rounds(net, pol, 4, {"rounds": 4, "faults": FaultInjection(drop_every=9)},
                      {"timeout": 0.05, "max_backoff": 0.2, "max_time": 30.0,
                       "faults": lambda: FaultInjection(drop_every=11)})
    st = rep.jobs[5]
    assert rep.complete and st.completed == st.fragments == 4 * 20
    assert st.contributions == 3 * 4 * 20  # every value of every round summed exactly once
    assert st.result_resends > 0


def test_ps_open_ended_rounds_stop_when_idle(net):
    pol = Policy.ps_only(6, net(1), [net(2 + r) for r in range(2)], 8)
    rep, ps = _rounds(net, pol, 3, {"rounds": 0, "idle_exit": 1.0},
                      {"timeout": 0.05, "max_backoff": 0.2, "max_time": 30.0})
    assert rep.complete and rep.jobs[6].completed == 3 * 8
    # a packet beyond the current round is out of range, not added anywhere
    assert rep.counters.out_of_range == 0


def test_agents_and_p4_program_agree_on_the_packet() -> None:
    """The committed ina.json's headers are the agents' format: a 52-byte INA header and
    INA_VALUES values of 32 bits (p4src/include/config.p4 and wire/ina.py)."""
    root = Path(__file__).resolve().parent.parent
    spec = json.loads((root / "p4src" / "build" / "ina.json").read_text())
    types = {t["name"]: t["fields"] for t in spec["header_types"]}
    assert sum(f[1] for f in types["ina_t"]) == 8 * INA_HEADER_LEN
    assert [f[1] for f in types["ina_values_t"]] == [32] * INA_VALUES


def test_ps_refuses_contributions_from_outside_the_job(net):
    """docs/trust.md: a GRAD counts only from the worker whose bit it carries (or from
    one of the job's switches), a PARTIAL only from a job switch; the rest is refused
    and counted, and the sums stay exact."""
    tags = np.array([[5], [5]])
    pol = Policy(job=7, ps=net(1), workers=(net(2), net(3)), num_fragments=1, tags=tags,
                 switch_ips={5: net(50)}, sd=SwitchRef(5, net(50)))
    ps = ParameterServer.from_policies([pol], linger=0.0, max_time=5)
    v = np.full(INA_VALUES, 1000, dtype=np.int32)

    def pkt(mt, bm, wid=0):
        return encode_ina(mt, 7, wid, 0, 5, 0, bm, bin(bm).count("1"), 0, 0, values=v)

    P, G = MsgType.PARTIAL, MsgType.GRAD
    forged = [
        (pkt(G, 0b01), net(9)),  # an outsider's GRAD with rank 0's bit
        (pkt(G, 0b10, wid=1), net(2)),  # worker 0 sends rank 1's bit
        (pkt(G, 0b11), net(2)),  # a worker sends an aggregate
        (pkt(P, 0b11), net(3)),  # a worker sends a PARTIAL
        (pkt(P, 0b11), net(9)),  # an outsider's PARTIAL
    ]
    for data, src in forged:
        ps._handle(data, (src, PORT), 0.0)
    st = ps.jobs[7].stats
    assert st.refused_source == len(forged) and st.packets_in == 0 and not any(ps.jobs[7].have)
    ps._handle(pkt(G, 0b01), (net(2), PORT), 0.0)  # the real contributions
    ps._handle(pkt(G, 0b10, wid=1), (net(50), PORT), 0.0)  # via a job switch
    assert st.completed == 1 and ps.result(7).tolist() == [2000] * INA_VALUES
    ps.close()


def test_worker_refuses_results_from_outside_the_job(net):
    """A RESULT counts only from the job's PS (or s_d): a forged one from another address,
    sent first, is refused and counted; the real one then completes the fragment."""
    pol = Policy.ps_only(5, net(1), [net(2)], 2)
    with Worker.from_policy(pol, 0, window=2, timeout=0.5, max_time=5) as w:
        ps = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        ps.bind((net(1), PORT))
        intruder = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        intruder.bind((net(9), PORT))
        me = (net(2), PORT)
        box = {}
        t = threading.Thread(target=lambda: box.setdefault("r", w.allreduce_fixed(
            np.arange(2 * INA_VALUES, dtype=np.int32))))
        t.start()
        ps.settimeout(2)
        got = [decode_ina(ps.recv(2048)) for _ in range(2)]
        for hdr, vals in got:  # forged first, from the intruder, then the real RESULT
            intruder.sendto(encode_ina(3, 5, 0, hdr.fragment, 0, 0, 1, 1, values=vals * 7), me)
        time.sleep(0.1)  # ordering only: the forged RESULTs arrive first
        for hdr, vals in got:
            ps.sendto(encode_ina(3, 5, 0, hdr.fragment, 0, 0, 1, 1, values=vals), me)
        t.join(5)
        ps.close()
        intruder.close()
    res, st = box["r"]
    assert res.tolist() == np.arange(2 * INA_VALUES).tolist()
    assert st.refused_source == 2 and st.results == 2
