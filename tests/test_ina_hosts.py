"""INA host agents (hosts/packets.py, fixedpoint.py, ina_worker.py, ina_ps.py) on loopback.

The PS and the workers run as threads (one CLI test as processes) on 127.x.y.z
addresses: the subnet is derived from the pid and a per-test counter, so concurrent
test runs never share an address:port. Without switches the policy is the PS baseline
(tag 0 everywhere), except in the test that runs a Python model of the switch side.
Every end-to-end test checks each element of the result against the exact integer sum
of the workers' fixed-point values.
"""

from __future__ import annotations

import itertools
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from hosts import packets
from hosts.fixedpoint import (
    FixedPointOverflow,
    dequantize,
    max_abs_q,
    max_scale_bits,
    num_fragments,
    pad_to_fragments,
    quantize,
)
from hosts.ina_ps import ParameterServer, PSReport
from hosts.ina_worker import (
    FaultInjection,
    InaTimeoutError,
    Policy,
    PolicyError,
    SwitchRef,
    Worker,
)
from hosts.packets import (
    INA_HEADER,
    INA_PACKET_LEN,
    InaDecodeError,
    InaFlags,
    MsgType,
    decode_ina,
    encode_ina,
)

ROOT = Path(__file__).resolve().parent.parent
PORT = packets.INA_UDP_PORT
S = 16

_subnet = itertools.count(1)


@pytest.fixture
def net():
    """``net(z)`` -> a fresh loopback address 127.a.b.z for this test."""
    pid = os.getpid()
    a, b = 100 + pid % 150, (pid // 150 + next(_subnet) * 7) % 250 + 1
    return lambda z: f"127.{a}.{b}.{z}"


def _grads(n_workers: int, n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(n) * 3).astype(np.float32) for _ in range(n_workers)]


def _exact(grads: list[np.ndarray], n_workers: int) -> np.ndarray:
    return np.sum([quantize(g, S, n_workers).astype(np.int64) for g in grads], axis=0)


def _run(
    policies: list[Policy],
    grads: dict[int, list[np.ndarray]],
    ps_kw: dict | None = None,
    worker_kw: dict | None = None,
) -> tuple[PSReport, ParameterServer, dict[tuple[int, int], tuple]]:
    """PS (all ``policies``) + every job's workers as threads; returns the PS report,
    the PS and {(job, rank): (int result, stats)}."""
    ps_kw = {"linger": 0.3, "max_time": 20.0, **(ps_kw or {})}
    worker_kw = {"timeout": 0.05, "max_backoff": 0.2, "max_time": 20.0, **(worker_kw or {})}
    ps = ParameterServer.from_policies(policies, **ps_kw)
    box: dict = {}
    errors: list[BaseException] = []

    def serve() -> None:
        try:
            box["report"] = ps.run()
        except BaseException as e:  # surfaced below
            errors.append(e)

    out: dict[tuple[int, int], tuple] = {}

    def work(pol: Policy, rank: int) -> None:
        try:
            kw = dict(worker_kw)
            if callable(kw.get("faults")):
                kw["faults"] = kw["faults"]()
            with Worker.from_policy(pol, rank, **kw) as w:
                out[pol.job, rank] = w.allreduce(grads[pol.job][rank])
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=serve)]
    threads += [
        threading.Thread(target=work, args=(p, r)) for p in policies for r in range(p.num_workers)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    ps.close()
    if errors:
        raise errors[0]
    return box["report"], ps, out


def _check_exact(pol: Policy, grads: list[np.ndarray], ps: ParameterServer, out: dict) -> None:
    exp = _exact(grads, pol.num_workers)
    assert np.abs(exp).max() < 2**31
    n = exp.size
    for r in range(pol.num_workers):
        res, st = out[pol.job, r]
        assert res.dtype == np.int32 and res.shape == (n,)
        assert np.array_equal(res.astype(np.int64), exp)
        fl = dequantize(res, S)
        assert np.array_equal(fl, (exp / 2.0**S).astype(np.float32))
        assert st.results == st.fragments == num_fragments(n)
    assert np.array_equal(ps.result(pol.job)[:n].astype(np.int64), exp)


# ============================================================================ codec


def _random_fields(rng: np.random.Generator) -> dict:
    return {
        "msg_type": int(rng.integers(1, 5)),
        "job_id": int(rng.integers(0, 256)),
        "worker_id": int(rng.integers(0, 32)),
        "fragment": int(rng.integers(0, 2**32)),
        "tag": int(rng.integers(0, 2**16)),
        "origin": int(rng.integers(0, 2**16)),
        "bitmap": int(rng.integers(0, 2**32)),
        "count": int(rng.integers(0, 256)),
        "fanin": int(rng.integers(0, 256)),
        "flags": int(rng.integers(0, 2)),
    }


def test_scapy_and_fast_codec_agree_byte_for_byte():
    from scapy.layers.inet import IP, UDP

    rng = np.random.default_rng(1)
    for _ in range(50):
        fields = _random_fields(rng)
        vals = rng.integers(-(2**31), 2**31, size=32, dtype=np.int64).astype(np.int32)
        vals[:2] = [-(2**31), 2**31 - 1]
        fast = encode_ina(**fields, values=vals)
        sc = bytes(packets.INA(**fields) / packets.INAValues(values=[int(v) for v in vals]))
        assert fast == sc and len(fast) == INA_PACKET_LEN == 148
        hdr, dv = decode_ina(sc)
        assert hdr._asdict() == fields
        assert dv.dtype == np.int32 and np.array_equal(dv, vals)
        # scapy dissects what the fast codec wrote, through UDP dport 40000
        pkt = IP(bytes(IP(dst="10.0.0.1") / UDP(sport=PORT, dport=PORT) / fast))
        assert pkt.haslayer(packets.INA)
        ina = pkt[packets.INA]
        assert {k: int(ina.getfieldval(k)) for k in fields} == fields
        assert [int(v) for v in pkt[packets.INAValues].values] == vals.tolist()


def test_codec_edges():
    assert packets.INA_HEADER_LEN == 20 and len(packets.INA()) == 20
    assert encode_ina(MsgType.CLEAR, 3, tag=5) == INA_HEADER.pack(4, 3, 0, 0, 5, 0, 0, 0, 0, 0) + bytes(128)
    raw = bytes(range(128))
    assert encode_ina(1, 1, values=raw)[20:] == raw
    with pytest.raises(InaDecodeError):
        decode_ina(bytes(147))
    hdr, _ = decode_ina(encode_ina(1, 2) + b"\x00" * 6)  # trailing padding is ignored
    assert hdr.job_id == 2
    with pytest.raises(ValueError):
        encode_ina(1, 1, values=np.zeros(31, np.int32))
    with pytest.raises(ValueError):
        encode_ina(1, 1, values=np.zeros(32, np.float32))
    with pytest.raises(ValueError):
        bytes(packets.INAValues(values=[1, 2, 3]))
    assert packets.INA(flags="RETX").flags == InaFlags.RETX


# ============================================================================ fixed point


def test_fixed_point_roundtrip_and_padding():
    g = np.array([0.5, -0.25, 1e-6, -3.0, 2.0**-17, 3 * 2.0**-17], dtype=np.float32)
    q = quantize(g, S, 4)
    assert q.dtype == np.int32
    assert q.tolist() == [32768, -16384, 0, -196608, 0, 2]  # ties to even
    assert np.array_equal(dequantize(q, S), (q / 65536).astype(np.float32))
    p = pad_to_fragments(q)
    assert p.size == 32 and p[:6].tolist() == q.tolist() and not p[6:].any()
    assert num_fragments(0) == 0 and num_fragments(32) == 1 and num_fragments(33) == 2


def test_fixed_point_overflow_names_the_scale():
    n = 8
    bound = max_abs_q(n)
    assert bound == (2**31 - 1) // 8
    ok = np.array([bound / 2.0**S], dtype=np.float64).astype(np.float32)
    ok = np.nextafter(ok, np.float32(0)) if abs(quantize(ok.astype(np.float64), S, n)[0]) > bound else ok
    quantize(ok, S, n)  # at the bound: fine
    g = np.array([0.1, -5000.0], dtype=np.float32)
    with pytest.raises(FixedPointOverflow) as e:
        quantize(g, S, n)
    s = max_scale_bits(g, n)
    assert s == 15 and f"--scale-bits {s}" in str(e.value) and "8 workers" in str(e.value)
    quantize(g, s, n)
    with pytest.raises(FixedPointOverflow, match="even scale 0"):
        quantize(np.array([3e38], np.float32), 0, 2)
    with pytest.raises(ValueError, match="non-finite"):
        quantize(np.array([0.0, np.nan], np.float32), S, 2)
    with pytest.raises(ValueError, match="floating"):
        quantize(np.array([1, 2]), S, 2)


def test_worker_overflow_sends_nothing(net):
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind((net(1), PORT))
    sink.settimeout(0.2)
    with Worker(0, 4, 1, net(1), bind_ip=net(2), scale_bits=S) as w, pytest.raises(
        FixedPointOverflow, match="--scale-bits"
    ):
        w.allreduce(np.array([1e5], dtype=np.float32))
    with pytest.raises(TimeoutError):
        sink.recv(2048)
    sink.close()


# ============================================================================ policy


def test_policy_roundtrip_and_derived_tables():
    d = {
        "job": 3, "ps": "10.0.0.1", "workers": ["10.0.0.2", "10.0.0.3", "10.0.0.4"],
        "num_fragments": 4, "tags": [[5, 17, 0, 5], [5, 17, 0, 0], 0],
        "fanin": {"17": [0, 3, 0, 0]}, "sd": {"id": 17}, "partial_tags": {"5": [17, 0, 0, 0]},
    }
    p = Policy.from_dict(d)
    assert p.switch_ips == {5: "10.255.0.5", 17: "10.255.0.17"} and p.sd == SwitchRef(17, "10.255.0.17")
    assert p.fanin[5].tolist() == [2, 0, 0, 1]  # derived: workers tagging (5, f)
    r0 = p.for_worker(0)
    assert r0.tags.tolist() == [5, 17, 0, 5] and r0.fanin.tolist() == [2, 0, 0, 1]
    assert p.for_worker(2).fanin.tolist() == [0, 0, 0, 0]
    assert {s: f.tolist() for s, f in p.clear_targets().items()} == {5: [0, 3]}
    again = Policy.from_dict(json.loads(json.dumps(p.to_dict())))
    assert again.to_dict() == p.to_dict() and again.to_dict()["tags"][2] == 0
    assert Policy.from_dict({**d, "sd": None}).clear_targets()[17].tolist() == [1]


@pytest.mark.parametrize(
    ("patch", "msg"),
    [
        ({"workers": ["10.0.0.2", "nope"]}, r"workers\[1\]"),
        ({"tags": [[0, 0, 0], 0]}, "num_fragments = 4"),
        ({"tags": [[5, 5, 0, 0], [5, 0, 0, 0]], "fanin": {"5": [1, 1, 0, 0]}}, r"fanin\[5\]\[0\] = 1"),
        ({"fanin": {"5": 300}}, "outside 0..255"),
        ({"job": 256}, "job"),
        ({"version": 2}, "version"),
        ({"workers": []}, "workers"),
    ],
)
def test_policy_errors(patch, msg):
    d = {"job": 1, "ps": "10.0.0.1", "workers": ["10.0.0.2", "10.0.0.3"], "num_fragments": 4}
    with pytest.raises(PolicyError, match=msg):
        Policy.from_dict({**d, **patch})


# ============================================================================ end to end


def test_ps_baseline_exact_sum(net):
    n_w, n = 4, 32 * 200 + 7  # not a multiple of 32: the last fragment is padded
    pol = Policy.ps_only(1, net(1), [net(2 + r) for r in range(n_w)], num_fragments(n))
    grads = _grads(n_w, n)
    rep, ps, out = _run([pol], {1: grads})
    _check_exact(pol, grads, ps, out)
    st = rep.jobs[1]
    assert rep.complete and st.completed == pol.num_fragments
    assert st.accepted_grad == st.packets_in == n_w * pol.num_fragments
    assert st.bytes_in == st.packets_in * INA_PACKET_LEN
    assert st.duplicates == st.overlaps == st.partial_in == 0
    assert st.results_sent == n_w * pol.num_fragments and st.clears_sent == 0
    assert all(o[1].retransmissions == 0 for o in out.values())


def test_loss_both_directions_exact(net):
    n_w, n = 3, 32 * 150
    pol = Policy.ps_only(2, net(1), [net(2 + r) for r in range(n_w)], num_fragments(n))
    grads = _grads(n_w, n, seed=2)
    ps_faults = FaultInjection(drop_every=5)  # loses RESULTs: workers must retransmit
    rep, ps, out = _run(
        [pol], {2: grads}, ps_kw={"faults": ps_faults, "linger": 0.6},
        worker_kw={"faults": lambda: FaultInjection(drop_every=7)},
    )
    _check_exact(pol, grads, ps, out)
    st = rep.jobs[2]
    assert ps_faults.dropped > 0 and st.result_resends > 0 and st.retx_in > 0
    assert all(o[1].fault_drops > 0 and o[1].retransmissions > 0 for o in out.values())
    assert st.contributions == n_w * pol.num_fragments  # each value summed exactly once


def test_duplicates_exact(net):
    n_w, n = 3, 32 * 100
    pol = Policy.ps_only(3, net(1), [net(2 + r) for r in range(n_w)], num_fragments(n))
    grads = _grads(n_w, n, seed=3)
    rep, ps, out = _run(
        [pol], {3: grads}, ps_kw={"faults": FaultInjection(send_twice=True)},
        worker_kw={"faults": lambda: FaultInjection(send_twice=True)},
    )
    _check_exact(pol, grads, ps, out)
    st = rep.jobs[3]
    assert st.accepted_grad == n_w * pol.num_fragments
    # every second copy is a duplicate, or late once the fragment is finished
    assert st.duplicates + st.late == n_w * pol.num_fragments
    assert sum(o[1].duplicate_results for o in out.values()) == n_w * pol.num_fragments


def test_two_jobs_on_one_ps_do_not_mix(net):
    n = 32 * 120
    p1 = Policy.ps_only(10, net(1), [net(2), net(3)], num_fragments(n))
    p2 = Policy.ps_only(11, net(1), [net(4), net(5), net(6)], num_fragments(n))
    g1, g2 = _grads(2, n, seed=10), _grads(3, n, seed=11)
    rep, ps, out = _run([p1, p2], {10: g1, 11: g2})
    _check_exact(p1, g1, ps, out)
    _check_exact(p2, g2, ps, out)
    assert not np.array_equal(out[10, 0][0], out[11, 0][0])
    assert rep.jobs[10].contributions == 2 * p1.num_fragments
    assert rep.jobs[11].contributions == 3 * p2.num_fragments


def test_malformed_packets_are_counted_and_ignored(net):
    n_w, n = 2, 32 * 20
    pol = Policy.ps_only(4, net(1), [net(2), net(3)], num_fragments(n))
    ps = ParameterServer.from_policies([pol], linger=0.3, max_time=20)
    bad = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    bad.bind((net(9), 0))
    v = np.arange(32, dtype=np.int32)
    junk = [
        b"", b"\x01", bytes(147), os.urandom(500),  # short (500 random bytes: whatever)
        encode_ina(MsgType.RESULT, 4, 0, 0, 0, 0, 1, 1, values=v),  # wrong type
        encode_ina(MsgType.CLEAR, 4, 0, 0, values=v),
        encode_ina(99, 4, 0, 0, 0, 0, 1, 1, values=v),
        encode_ina(MsgType.GRAD, 77, 0, 0, 0, 0, 1, 1, values=v),  # unknown job
        encode_ina(MsgType.GRAD, 4, 0, pol.num_fragments, 0, 0, 1, 1, values=v),  # out of range
        encode_ina(MsgType.GRAD, 4, 0, 2**32 - 1, 0, 0, 1, 1, values=v),
        encode_ina(MsgType.GRAD, 4, 1, 0, 0, 0, 1, 1, values=v),  # bitmap != 1 << worker_id
        encode_ina(MsgType.PARTIAL, 4, 0, 0, 5, 0, 0b100, 1, values=v),  # rank 2 of 2 workers
        encode_ina(MsgType.PARTIAL, 4, 0, 0, 5, 0, 0, 0, values=v),  # empty bitmap
    ]
    for pkt in junk:
        bad.sendto(pkt, (net(1), PORT))
    grads = _grads(n_w, n, seed=4)
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("rep", ps.run()))
    t.start()
    out = {}
    for r in range(n_w):  # sequential: the PS is already busy with the junk
        th = threading.Thread(
            target=lambda r=r: out.setdefault(
                (4, r), Worker.from_policy(pol, r, timeout=0.05, max_time=10).allreduce(grads[r])
            )
        )
        th.start()
        th.join(15)
    t.join(20)
    ps.close()
    bad.close()
    _check_exact(pol, grads, ps, out)
    c = box["rep"].counters
    short = sum(len(p) < INA_PACKET_LEN for p in junk)
    assert c.datagrams == len(junk) + n_w * pol.num_fragments
    # the 500 random bytes are counted under one of the reasons, whichever it hits
    counted = c.short + c.bad_type + c.unknown_job + c.out_of_range + c.bad_bitmap
    assert counted == len(junk) or (counted == len(junk) - 1 and box["rep"].jobs[4].late >= 0)
    assert c.short >= short - 1 and c.bad_type >= 3 and c.unknown_job >= 1
    assert c.out_of_range >= 2 and c.bad_bitmap >= 3
    assert box["rep"].jobs[4].contributions == n_w * pol.num_fragments


def test_ps_bitmap_accounting_partials_and_clears(net):
    """PARTIALs as a switch sends them: disjoint accepted, subset = duplicate, partial
    overlap ignored; RESULT goes to s_d with its tag; CLEAR to the other switch."""
    n_w = 4
    tags = np.array([[5, 0], [5, 0], [9, 0], [9, 0]])
    pol = Policy(job=6, ps=net(1), workers=tuple(net(2 + r) for r in range(n_w)), num_fragments=2,
                 tags=tags, switch_ips={5: net(50), 9: net(90)}, sd=SwitchRef(9, net(90)))
    ps = ParameterServer.from_policies([pol], linger=0.0, max_time=5)
    sw5 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sw5.bind((net(50), PORT))
    sd = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sd.bind((net(90), PORT))
    for s in (sw5, sd):
        s.settimeout(2)
    v = [np.full(32, 1 << r, dtype=np.int32) for r in range(n_w)]
    addr = (net(50), PORT)

    def pkt(mt, bm, wid=0, frag=0, flags=0):
        vals = sum(v[r] for r in range(n_w) if bm >> r & 1)
        return encode_ina(mt, 6, wid, frag, 5, 0, bm, bin(bm).count("1"), 0, flags, vals), addr

    P, G = MsgType.PARTIAL, MsgType.GRAD
    seq = [
        pkt(P, 0b0011),  # accepted
        pkt(P, 0b0001),  # subset: duplicate
        pkt(P, 0b0110),  # partial overlap: ignored
        pkt(G, 0b0100, wid=2),  # accepted
        pkt(G, 0b0100, wid=2, flags=InaFlags.RETX),  # duplicate (a RETX)
        pkt(G, 0b1000, wid=3),  # accepted -> complete
        pkt(G, 0b1000, wid=3, flags=InaFlags.RETX),  # late RETX: RESULT again by unicast
    ]
    for data, a in seq:
        ps._handle(data, a, 0.0)
    st = ps.jobs[6].stats
    assert (st.accepted_partial, st.accepted_grad, st.duplicates, st.overlaps, st.late) == (1, 2, 2, 1, 1)
    assert st.completed == 1 and st.contributions == 4 and st.result_resends == 1
    assert ps.result(6)[:32].tolist() == [15] * 32
    hdr, vals = decode_ina(sd.recv(2048))  # the one RESULT, to s_d with its tag
    assert (hdr.msg_type, hdr.tag, hdr.bitmap, hdr.count, hdr.fragment) == (3, 9, 0b1111, 4, 0)
    assert vals.tolist() == [15] * 32
    got = [decode_ina(sw5.recv(2048))[0] for _ in range(2)]  # CLEAR + unicast RESULT (RETX)
    kinds = sorted((h.msg_type, h.tag, h.flags) for h in got)
    assert kinds == [(MsgType.RESULT, 0, InaFlags.RETX), (MsgType.CLEAR, 5, 0)]
    ps.close()
    sw5.close()
    sd.close()


class _ModelSwitches(threading.Thread):
    """A Python model of the switch side of docs/ina.md for the end-to-end test:
    aggregating switches (no busy aggregators) and s_d's RESULT multicast."""

    def __init__(self, pol: Policy, ps_addr: tuple[str, int]) -> None:
        super().__init__(daemon=True)
        self.pol, self.ps_addr = pol, ps_addr
        self.socks = {}
        for s, ip in pol.switch_ips.items():
            sk = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sk.bind((ip, PORT))
            sk.settimeout(0.05)
            self.socks[s] = sk
        self.aggs: dict[tuple[int, int, int], list] = {}  # (switch, job, frag) -> [bm, n, vals]
        self.partials = self.clears = self.multicast = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            for s, sk in self.socks.items():
                try:
                    data = sk.recv(2048)
                except TimeoutError:
                    continue
                h, vals = decode_ina(data)
                key = (s, h.job_id, h.fragment)
                if h.msg_type == MsgType.GRAD and h.tag == s:
                    a = self.aggs.setdefault(key, [0, 0, np.zeros(32, np.int32)])
                    if not a[0] & h.bitmap:
                        a[0] |= h.bitmap
                        a[1] += h.count
                        a[2] += vals
                    if a[1] >= h.fanin:  # complete (again): send the partial on
                        sk.sendto(encode_ina(MsgType.PARTIAL, h.job_id, 0, h.fragment, s, 0,
                                             a[0], a[1], 0, 0, a[2]), self.ps_addr)
                        self.partials += 1
                elif h.msg_type == MsgType.CLEAR and h.tag == s:
                    self.aggs.pop(key, None)
                    self.clears += 1
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


def test_switch_tags_partials_sd_multicast_exact(net):
    """Tags from a policy: fragments go to a model switch 5, to s_d (9) or to the PS;
    partials, RESULT through s_d and CLEARs complete the job exactly; every model
    aggregator is freed at the end. Worker 3 loses packets (retransmitted to the PS)."""
    n_w, n_f = 4, 60
    f = np.arange(n_f)
    row01 = np.where(f % 3 == 0, 5, np.where(f % 3 == 1, 9, 0))
    row23 = np.where(f % 2 == 0, 5, 0)
    tags = np.stack([row01, row01, row23, row23])
    pol = Policy(job=8, ps=net(1), workers=tuple(net(2 + r) for r in range(n_w)),
                 num_fragments=n_f, tags=tags, switch_ips={5: net(50), 9: net(90)},
                 sd=SwitchRef(9, net(90)))
    model = _ModelSwitches(pol, (net(1), PORT))
    model.start()
    grads = _grads(n_w, n_f * 32, seed=8)
    try:
        faults = iter([None, None, None, FaultInjection(drop_every=4)])
        rep, ps, out = _run([pol], {8: grads}, worker_kw={"faults": lambda: next(faults)},
                            ps_kw={"linger": 0.5})
    finally:
        model.close()
    _check_exact(pol, grads, ps, out)
    st = rep.jobs[8]
    assert st.accepted_partial > 0 and model.partials > 0
    assert st.results_sent == n_f  # one RESULT per fragment, to s_d
    assert model.multicast >= n_f * n_w
    assert st.clears_sent == model.clears == sum(len(v) for v in pol.clear_targets().values())
    assert model.aggs == {}


def test_worker_times_out_with_clear_error(net):
    with Worker(0, 2, 1, net(1), bind_ip=net(2), timeout=0.02, max_time=0.3) as w, pytest.raises(
        InaTimeoutError, match=r"64 of 64 fragments still have no RESULT"
    ) as e:
        w.allreduce(np.zeros(64 * 32, np.float32))
    assert e.value.report.retransmissions > 0


def test_worker_ignores_foreign_and_stale_results(net):
    pol = Policy.ps_only(5, net(1), [net(2)], 4)
    with Worker.from_policy(pol, 0, window=1, timeout=0.5, max_time=5) as w:
        ps = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        ps.bind((net(1), PORT))
        me = (net(2), PORT)
        box = {}
        t = threading.Thread(target=lambda: box.setdefault("r", w.allreduce_fixed(
            np.arange(128, dtype=np.int32))))
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
    assert res.tolist() == (np.arange(128) * 2).tolist()
    assert st.ignored == 3 and st.stale_results == 1 and st.retransmissions == 0


def test_cli_processes(net, tmp_path):
    n_w, n = 2, 32 * 50
    pol = Policy.ps_only(9, net(1), [net(2), net(3)], num_fragments(n))
    pol.dump(tmp_path / "p.json")
    grads = _grads(n_w, n, seed=9)
    for r, g in enumerate(grads):
        np.save(tmp_path / f"g{r}.npy", g)
    py = [sys.executable, "-m"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    ps = subprocess.Popen([*py, "hosts.ina_ps", "--policy", str(tmp_path / "p.json"), "--json",
                           "--linger", "0.3", "--max-time", "20"],
                          cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    ws = [
        subprocess.Popen([*py, "hosts.ina_worker", "--policy", str(tmp_path / "p.json"),
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
    bad = subprocess.run([*py, "hosts.ina_worker", "--policy", str(tmp_path / "nope.json"),
                          "--rank", "0", "--json"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=30)
    assert bad.returncode == 2 and json.loads(bad.stdout)["ok"] is False
