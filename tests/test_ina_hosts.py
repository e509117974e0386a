"""INA host agents (wire/ina.py, wire/fixedpoint.py, ina_worker.py, ina_ps.py) on loopback.

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
import select
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from hosts.ina.ps import ParameterServer, PSReport
from hosts.ina.worker import (
    FaultInjection,
    InaTimeoutError,
    Policy,
    PolicyError,
    SwitchRef,
    Worker,
    open_ina_socket,
)
from wire import scapy_layers
from wire.fixedpoint import (
    BFP_LOOKAHEAD,
    FixedPointOverflow,
    bfp_dequantize,
    bfp_error_bound,
    bfp_quantize,
    block_exponents,
    dequantize,
    max_abs_q,
    max_scale_bits,
    num_fragments,
    pad_to_fragments,
    quantize,
)
from wire.ina import (
    INA_HEADER,
    INA_HEADER_LEN,
    INA_PACKET_LEN,
    INA_UDP_PORT,
    INA_VALUES,
    InaDecodeError,
    InaFlags,
    MsgType,
    decode_ina,
    encode_ina,
)

ROOT = Path(__file__).resolve().parent.parent
PORT = INA_UDP_PORT
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
    before: Callable[[ParameterServer], None] | None = None,
) -> tuple[PSReport, ParameterServer, dict[tuple[int, int], tuple]]:
    """PS (all ``policies``) + every job's workers as threads; returns the PS report,
    the PS and {(job, rank): (int result, stats)}. ``before(ps)`` runs once the PS
    socket is bound, before anything starts."""
    ps_kw = {"linger": 0.3, "max_time": 20.0, **(ps_kw or {})}
    worker_kw = {"timeout": 0.05, "max_backoff": 0.2, "max_time": 20.0, **(worker_kw or {})}
    ps = ParameterServer.from_policies(policies, **ps_kw)
    if before is not None:
        before(ps)
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
    """Every rank's int32 result and the PS's sums equal the exact integer sums, element
    by element, in fragments of the policy's values per packet."""
    exp = _exact(grads, pol.num_workers)
    assert np.abs(exp).max() < 2**31
    n = exp.size
    for r in range(pol.num_workers):
        res, st = out[pol.job, r]
        assert res.dtype == np.int32 and res.shape == (n,)
        assert np.array_equal(res.astype(np.int64), exp)
        fl = dequantize(res, S)
        assert np.array_equal(fl, (exp / 2.0**S).astype(np.float32))
        assert st.results == st.fragments == num_fragments(n, pol.values_per_packet)
    assert np.array_equal(ps.result(pol.job)[:n].astype(np.int64), exp)


# ============================================================================ codec


def _random_fields(rng: np.random.Generator) -> dict:
    return {
        "msg_type": int(rng.integers(1, 4)),  # GRAD, PARTIAL, RESULT: with values
        "job_id": int(rng.integers(0, 256)),
        "worker_id": int(rng.integers(0, 256)),
        "fragment": int(rng.integers(0, 2**32)),
        "tag": int(rng.integers(0, 2**16)),
        "origin": int(rng.integers(0, 2**16)),
        "bitmap": int.from_bytes(rng.bytes(32), "big"),  # 256 contributors
        "count": int(rng.integers(0, 2**16)),
        "fanin": int(rng.integers(0, 2**16)),
        "flags": int(rng.integers(0, 4)),
        "sd_fanin": int(rng.integers(0, 2**16)),
        "max_exp": int(rng.integers(0, 256)),
    }


def test_scapy_and_fast_codec_agree_byte_for_byte():
    from scapy.layers.inet import IP, UDP

    rng = np.random.default_rng(1)
    for _ in range(50):
        fields = _random_fields(rng)
        vals = rng.integers(-(2**31), 2**31, size=INA_VALUES, dtype=np.int64).astype(np.int32)
        vals[:2] = [-(2**31), 2**31 - 1]
        fast = encode_ina(**fields, values=vals)
        sc = bytes(scapy_layers.INA(**fields) / scapy_layers.INAValues(values=[int(v) for v in vals]))
        assert fast == sc and len(fast) == INA_PACKET_LEN == 308
        hdr, dv = decode_ina(sc)
        assert hdr._asdict() == fields
        assert dv.dtype == np.int32 and np.array_equal(dv, vals)
        # scapy dissects what the fast codec wrote
        ina = scapy_layers.INA(fast)
        assert {k: int(ina.getfieldval(k)) for k in fields} == fields
        assert [int(v) for v in ina[scapy_layers.INAValues].values] == vals.tolist()
        # the same header as a CLEAR: no values on either side
        fields["msg_type"] = int(MsgType.CLEAR)
        clear = encode_ina(**fields)
        assert clear == bytes(scapy_layers.INA(**fields)) and len(clear) == 52
        assert scapy_layers.INAValues not in scapy_layers.INA(clear)
    # UDP()/INA() gets dport 40000 from the binding (dissection by port is not checked:
    # tests/p4/packets.py binds a test header to the same port in the same session)
    udp = UDP(bytes(IP(dst="10.0.0.1") / UDP(sport=1234) / scapy_layers.INA())[20:28])
    assert udp.dport == PORT


def test_codec_edges():
    assert INA_HEADER_LEN == 52 and len(scapy_layers.INA()) == 52
    # a CLEAR is the header alone (the P4 parser extracts no values for it)
    clear = encode_ina(MsgType.CLEAR, 3, tag=5)
    assert clear == INA_HEADER.pack(4, 3, 0, 0, 5, 0, 0, 0, 0, 0, 0)
    hdr, vals = decode_ina(clear)
    assert (hdr.msg_type, hdr.tag) == (MsgType.CLEAR, 5) and not vals.any()
    with pytest.raises(ValueError):
        encode_ina(MsgType.CLEAR, 3, values=np.zeros(INA_VALUES, np.int32))
    with pytest.raises(InaDecodeError):  # only a CLEAR may be that short
        decode_ina(INA_HEADER.pack(1, 3, 0, 0, 5, 0, 0, 0, 0, 0, 0))
    raw = bytes(range(256))
    assert encode_ina(1, 1, values=raw)[52:] == raw
    with pytest.raises(InaDecodeError):
        decode_ina(bytes(INA_PACKET_LEN - 1))
    hdr, _ = decode_ina(encode_ina(1, 2) + b"\x00" * 6)  # trailing padding is ignored
    assert hdr.job_id == 2
    with pytest.raises(ValueError):
        encode_ina(1, 1, values=np.zeros(INA_VALUES - 1, np.int32))
    with pytest.raises(ValueError):
        encode_ina(1, 1, values=np.zeros(INA_VALUES, np.float32))
    with pytest.raises(ValueError):
        bytes(scapy_layers.INAValues(values=[1, 2, 3]))
    assert scapy_layers.INA(flags="RETX+VIA_SD").flags == InaFlags.RETX | InaFlags.VIA_SD
    # flags, sd_fanin (16 bits), max_exp end the header
    assert bytes(scapy_layers.INA(flags="VIA_SD", sd_fanin=7, max_exp=9))[48:52] == b"\x02\x00\x07\x09"
    with pytest.raises(struct.error):  # rank 256 has no bit
        INA_HEADER.pack(1, 1, 0, 0, 0, 0, 1 << 256, 1, 0, 0, 0)


# ============================================================================ fixed point


def test_fixed_point_roundtrip_and_padding():
    g = np.array([0.5, -0.25, 1e-6, -3.0, 2.0**-17, 3 * 2.0**-17], dtype=np.float32)
    q = quantize(g, S, 4)
    assert q.dtype == np.int32
    assert q.tolist() == [32768, -16384, 0, -196608, 0, 2]  # ties to even
    assert np.array_equal(dequantize(q, S), (q / 65536).astype(np.float32))
    p = pad_to_fragments(q)
    assert p.size == INA_VALUES and p[:6].tolist() == q.tolist() and not p[6:].any()
    assert num_fragments(0) == 0 and num_fragments(INA_VALUES) == 1 and num_fragments(INA_VALUES + 1) == 2


def test_fixed_point_overflow_names_the_scale():
    n = 8
    bound = max_abs_q(n)
    assert bound == (2**31 - 1) // 8
    edge = np.float32(bound - 15)  # float32 steps are 16 apart here: the largest below
    assert quantize(np.array([edge, -edge]), 0, n).tolist() == [bound - 15, 15 - bound]
    with pytest.raises(FixedPointOverflow, match="even scale 0"):
        quantize(np.array([np.float32(bound + 1)]), 0, n)
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
        "fanin": {"17": [2, 3, 0, 0]}, "sd": {"id": 17}, "partial_tags": {"5": [17, 0, 0, 0]},
    }
    p = Policy.from_dict(d)
    assert p.switch_ips == {5: "10.255.0.5", 17: "10.255.0.17"} and p.sd == SwitchRef(17, "10.255.0.17")
    assert p.fanin[5].tolist() == [2, 0, 0, 1]  # derived: workers tagging (5, f)
    r0 = p.for_worker(0)
    assert r0.tags.tolist() == [5, 17, 0, 5] and r0.fanin.tolist() == [2, 3, 0, 1]
    # fragment 0: switch 5's aggregate is merged again at s_d, which expects 2
    assert r0.flags.tolist() == [InaFlags.VIA_SD, 0, 0, 0] and r0.sd_fanin.tolist() == [2, 0, 0, 0]
    with pytest.raises(PolicyError, match=r"fanin\[17\]\[0\] = 1 but switch 17 gets 2"):
        Policy.from_dict({**d, "fanin": {"17": [1, 3, 0, 0]}})
    with pytest.raises(PolicyError, match=r"partial_tags\[5\]\[1\] = 6"):
        Policy.from_dict({**d, "partial_tags": {"5": [17, 6, 0, 0]}})
    assert Policy.from_dict({**d, "fanin": {}}).fanin[17].tolist() == [2, 2, 0, 0]  # derived
    assert p.for_worker(2).fanin.tolist() == [0, 0, 0, 0]
    assert {s: f.tolist() for s, f in p.clear_targets().items()} == {5: [0, 3]}
    again = Policy.from_dict(json.loads(json.dumps(p.to_dict())))
    assert again.to_dict() == p.to_dict() and again.to_dict()["tags"][2] == 0
    no_sd = Policy.from_dict({**d, "sd": None, "partial_tags": None})
    assert no_sd.clear_targets()[17].tolist() == [1] and not no_sd.for_worker(0).flags.any()


@pytest.mark.parametrize(
    ("patch", "msg"),
    [
        ({"workers": ["10.0.0.2", "nope"]}, r"workers\[1\]"),
        ({"tags": [[0, 0, 0], 0]}, "num_fragments = 4"),
        ({"tags": [[5, 5, 0, 0], [5, 0, 0, 0]], "fanin": {"5": [1, 1, 0, 0]}}, r"fanin\[5\]\[0\] = 1"),
        ({"partial_tags": {"5": 9}}, r"partial_tags\[5\]\[0\] = 9"),  # no s_d configured
        ({"fanin": {"5": 300}}, "outside 0..256"),
        ({"format": "float"}, "format"),
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
    n_w, n = 4, INA_VALUES * 200 + 7  # not a multiple of INA_VALUES: the last fragment is padded
    pol = Policy.ps_only(1, net(1), [net(2 + r) for r in range(n_w)], num_fragments(n))
    grads = _grads(n_w, n)
    rep, ps, out = _run([pol], {1: grads})
    _check_exact(pol, grads, ps, out)
    st = rep.jobs[1]
    assert rep.complete and st.completed == pol.num_fragments
    assert st.accepted_grad == st.contributions == n_w * pol.num_fragments
    assert st.bytes_in == st.packets_in * INA_PACKET_LEN
    # packets_in > accepted only by spurious retransmissions (a loaded machine)
    assert st.packets_in == st.accepted_grad + st.duplicates + st.late
    assert st.packets_in - st.accepted_grad == sum(o[1].retransmissions for o in out.values())
    assert st.overlaps == st.partial_in == st.clears_sent == 0
    assert st.results_sent == n_w * pol.num_fragments


def spanning_grads(n_w: int, blocks: int, seed: int) -> list[np.ndarray]:
    """Gradients whose blocks range from 2^-20 to 2^20 in magnitude (block ``b`` around
    ``2^(b*40/(blocks-1) - 20)``), each value within 2^-4 of its block's largest too."""
    rng = np.random.default_rng(seed)
    mag = np.repeat(2.0 ** np.linspace(-20, 20, blocks), INA_VALUES)
    return [(mag * rng.choice([-1, 1], mag.size) * rng.uniform(2**-4, 1, mag.size))
            .astype(np.float32) for _ in range(n_w)]


def bfp_reference(grads: list[np.ndarray], n_w: int) -> tuple[np.ndarray, np.ndarray]:
    """What a block-floating-point allreduce must return: the exact int sums at the
    exponents every worker agrees on (the max of each block's), and those exponents."""
    e = np.max([block_exponents(g) for g in grads], axis=0)
    sums = np.sum([bfp_quantize(g, e, n_w).astype(np.int64) for g in grads], axis=0)
    assert np.abs(sums).max() < 2**31  # the headroom bits: never an overflow
    return sums, e


def check_bfp_bound(grads: list[np.ndarray], got: np.ndarray, n_w: int) -> float:
    """The per-block normwise error of ``got`` against the exact float64 sum, relative to
    the block's largest input magnitude; asserts the documented bound and returns it."""
    exact = np.sum([g.astype(np.float64) for g in grads], axis=0)
    n_b = num_fragments(exact.size)
    pad = n_b * INA_VALUES - exact.size
    err = np.abs(np.pad(got.astype(np.float64) - exact, (0, pad))).reshape(n_b, INA_VALUES)
    peak = np.max([np.abs(np.pad(g, (0, pad))).reshape(n_b, INA_VALUES).max(axis=1)
                   for g in grads], axis=0)
    rel = (err.max(axis=1) / np.where(peak > 0, peak, 1)).max()
    assert rel <= bfp_error_bound(n_w), (rel, bfp_error_bound(n_w))
    return float(rel)


def test_bfp_spanning_range_exact_under_loss(net):
    """Block floating point on loopback, RESULTs and GRADs lost: values from 2^-20 to
    2^20, which no single fixed-point scale holds for 5 workers, come back as the exact
    integer sums at the agreed exponents and within the documented error bound."""
    n_w, blocks = 5, 41
    n = blocks * INA_VALUES - 5
    grads = [g[:n] for g in spanning_grads(n_w, blocks, 11)]
    with pytest.raises(FixedPointOverflow):  # plain fixed point must refuse at S = 16 ...
        quantize(grads[0], S, n_w)
    assert max_scale_bits(grads[0], n_w) < 10  # ... and any scale that fits loses 2^-20
    look = min(BFP_LOOKAHEAD, blocks)
    pol = Policy.ps_only(3, net(1), [net(2 + r) for r in range(n_w)], blocks + look,
                         number_format="bfp")
    ps_faults = FaultInjection(drop_every=7)
    rep, ps, out = _run([pol], {3: grads}, ps_kw={"faults": ps_faults, "linger": 0.6},
                        worker_kw={"faults": lambda: FaultInjection(drop_every=9)})
    sums, e = bfp_reference(grads, n_w)
    for r in range(n_w):
        res, st = out[3, r]
        assert np.array_equal(res.astype(np.int64), sums[:n])
        assert st.results == st.fragments == blocks + look and st.retransmissions > 0
    assert rep.jobs[3].contributions == n_w * (blocks + look)  # each exactly once
    got = bfp_dequantize(sums.astype(np.int32), e, n_w)[:n]
    check_bfp_bound(grads, got, n_w)
    # the exponent fragments' RESULTs carried every block's max, as the reference says
    assert e.min() >= 127 - 25 and e.max() <= 127 + 21


def test_more_than_32_workers_exact(net):
    """40 ranks: bitmap bits 32..39 are summed exactly once like the others."""
    n_w, n = 40, INA_VALUES * 3
    pol = Policy.ps_only(4, net(1), [net(2 + r) for r in range(n_w)], num_fragments(n))
    grads = _grads(n_w, n, seed=4)
    rep, ps, out = _run([pol], {4: grads}, worker_kw={"faults": lambda: FaultInjection(
        drop_every=5)})
    _check_exact(pol, grads, ps, out)
    assert rep.jobs[4].contributions == n_w * pol.num_fragments


def test_loss_both_directions_exact(net):
    n_w, n = 3, INA_VALUES * 150
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


def test_aimd_window_exact_under_loss(net):
    """Congestion "aimd": the window starts at 2, halves at most once per window of
    sends on a timeout, and the sums stay exact. A timeout means loss or waiting for
    another rank's lost fragment, so the loss-free worker may halve too."""
    n_w, n = 3, INA_VALUES * 120
    pol = Policy.ps_only(5, net(1), [net(2 + r) for r in range(n_w)], num_fragments(n))
    grads = _grads(n_w, n, seed=5)
    faults = iter([FaultInjection(drop_every=6), FaultInjection(drop_every=6), None])
    rep, ps, out = _run([pol], {5: grads}, worker_kw={
        "faults": lambda: next(faults), "congestion": "aimd", "window": 16})
    _check_exact(pol, grads, ps, out)
    lossy = [out[5, r][1] for r in range(n_w) if out[5, r][1].fault_drops]
    clean = [out[5, r][1] for r in range(n_w) if not out[5, r][1].fault_drops]
    assert len(lossy) == 2 and len(clean) == 1
    # one decrease per window of sends at most: fewer decreases than losses
    assert all(0 < st.window_decreases < st.fault_drops for st in lossy)
    assert all(st.window_decreases <= st.retransmissions for st in lossy + clean)
    assert all(st.rto_s >= 0.05 for st in lossy + clean)  # from RTT samples, never below --timeout
    with pytest.raises(ValueError, match="congestion"):
        Worker(0, 1, 1, "127.0.0.1", congestion="cubic")


def test_duplicates_exact(net):
    n_w, n = 3, INA_VALUES * 100
    pol = Policy.ps_only(3, net(1), [net(2 + r) for r in range(n_w)], num_fragments(n))
    grads = _grads(n_w, n, seed=3)
    rep, ps, out = _run(
        [pol], {3: grads}, ps_kw={"faults": FaultInjection(send_twice=True)},
        worker_kw={"faults": lambda: FaultInjection(send_twice=True)},
    )
    _check_exact(pol, grads, ps, out)
    st = rep.jobs[3]
    assert st.accepted_grad == n_w * pol.num_fragments
    # every packet is summed once; each second copy is a duplicate (or late, once the
    # fragment is finished); spurious retransmissions only add to the latter
    assert st.packets_in == st.accepted_grad + st.duplicates + st.late
    assert st.duplicates + st.late >= n_w * pol.num_fragments and st.overlaps == 0
    # a worker stops reading at its last RESULT, so the last second copies go unread
    assert all(o[1].duplicate_results >= pol.num_fragments // 2 for o in out.values())


def test_two_jobs_on_one_ps_do_not_mix(net):
    n = INA_VALUES * 120
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
    n_w, n = 2, INA_VALUES * 20
    pol = Policy.ps_only(4, net(1), [net(2), net(3)], num_fragments(n))
    v = np.arange(INA_VALUES, dtype=np.int32)
    junk = {
        "short": [b"", b"\x01", bytes(INA_PACKET_LEN - 1)],
        "bad_type": [
            encode_ina(MsgType.RESULT, 4, 0, 0, 0, 0, 1, 1, values=v),
            encode_ina(MsgType.CLEAR, 4, 0, 0),
            INA_HEADER.pack(4, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0) + bytes(INA_PACKET_LEN - 52),  # a full-size CLEAR
            encode_ina(99, 4, 0, 0, 0, 0, 1, 1, values=v),
            b"\xff" * 500,
        ],
        "unknown_job": [encode_ina(MsgType.GRAD, 77, 0, 0, 0, 0, 1, 1, values=v)],
        "out_of_range": [
            encode_ina(MsgType.GRAD, 4, 0, pol.num_fragments, 0, 0, 1, 1, values=v),
            encode_ina(MsgType.GRAD, 4, 0, 2**32 - 1, 0, 0, 1, 1, values=v),
        ],
        "bad_bitmap": [
            encode_ina(MsgType.GRAD, 4, 1, 0, 0, 0, 0b111, 3, values=v),  # rank 2 of 2
            encode_ina(MsgType.PARTIAL, 4, 0, 0, 5, 0, 0b100, 1, values=v),
            encode_ina(MsgType.PARTIAL, 4, 0, 0, 5, 0, 0, 0, values=v),  # empty
        ],
    }

    def send_junk(_ps: ParameterServer) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as bad:
            bad.bind((net(9), 0))
            for pkts in junk.values():
                for p in pkts:
                    bad.sendto(p, (net(1), PORT))

    grads = _grads(n_w, n, seed=4)
    rep, ps, out = _run([pol], {4: grads}, before=send_junk)
    _check_exact(pol, grads, ps, out)
    c = rep.counters
    for reason, pkts in junk.items():
        assert getattr(c, reason) == len(pkts), reason
    st = rep.jobs[4]
    assert c.datagrams == sum(map(len, junk.values())) + st.packets_in
    assert st.accepted_grad == n_w * pol.num_fragments  # (+ spurious RETX under load)


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
    v = [np.full(INA_VALUES, 1 << r, dtype=np.int32) for r in range(n_w)]
    addr = (net(50), PORT)

    def pkt(mt, bm, wid=0, frag=0, flags=0, origin=0):
        vals = sum(v[r] for r in range(n_w) if bm >> r & 1)
        n = bin(bm).count("1")
        return encode_ina(mt, 6, wid, frag, 5, origin, bm, n, 0, flags, values=vals), addr

    P, G = MsgType.PARTIAL, MsgType.GRAD
    seq = [
        pkt(P, 0b0011),  # accepted
        pkt(P, 0b0001),  # subset: duplicate
        pkt(P, 0b0110),  # partial overlap: ignored
        pkt(G, 0b0100, wid=2),  # accepted
        pkt(G, 0b0100, wid=2, flags=InaFlags.RETX),  # duplicate (a RETX)
        pkt(G, 0b1000, wid=3),  # accepted -> complete
        pkt(G, 0b1000, wid=3, flags=InaFlags.RETX),  # late RETX: RESULT again by unicast
        # fragment 1: a GRAD with several contributors (a VIA_SD aggregate that a busy
        # s_d passed on to the PS) counts by its bitmap
        pkt(G, 0b0111, frag=1, origin=9),
        pkt(G, 0b1000, wid=3, frag=1),
    ]
    for data, a in seq:
        ps._handle(data, a, 0.0)
    st = ps.jobs[6].stats
    assert (st.accepted_partial, st.accepted_grad, st.duplicates, st.overlaps, st.late) == (1, 4, 2, 1, 1)
    assert st.completed == 2 and st.contributions == 8 and st.result_resends == 1
    assert (st.merged_grad_in, st.forwarded_in) == (1, 1)
    assert ps.result(6).tolist() == [15] * (2 * INA_VALUES)
    for frag in (0, 1):  # one RESULT per fragment, to s_d with its tag
        hdr, vals = decode_ina(sd.recv(2048))
        assert (hdr.msg_type, hdr.tag, hdr.bitmap, hdr.count, hdr.fragment) == (3, 9, 0b1111, 4, frag)
        assert vals.tolist() == [15] * INA_VALUES
    got = [decode_ina(sw5.recv(2048))[0] for _ in range(2)]  # CLEAR + unicast RESULT (RETX)
    kinds = sorted((h.msg_type, h.tag, h.flags, h.fragment) for h in got)
    assert kinds == [(MsgType.RESULT, 0, InaFlags.RETX, 0), (MsgType.CLEAR, 5, 0, 0)]
    ps.close()
    sw5.close()
    sd.close()


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
        self.partials = self.clears = self.multicast = self.via_sd = 0
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
    assert st.clears_sent == model.clears == sum(len(v) for v in pol.clear_targets().values())
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
