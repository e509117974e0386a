"""INA host agents end to end on loopback: the PS baseline, BFP, loss, AIMD, duplicates,
two jobs, malformed packets and the PS bitmap (rig: ``tests/ina_loopback.py``).
Every test checks each element against the exact integer sum of the workers' values.
"""

from __future__ import annotations

import socket

import numpy as np
import pytest

from hosts.ina.ps import ParameterServer
from hosts.ina.worker import (
    FaultInjection,
    Policy,
    SwitchRef,
    Worker,
)
from tests.ina_loopback import (
    PORT,
    S,
    _check_exact,
    _grads,
    _run,
    net,
)
from wire.fixedpoint import (
    BFP_LOOKAHEAD,
    FixedPointOverflow,
    bfp_dequantize,
    bfp_error_bound,
    bfp_quantize,
    block_exponents,
    max_scale_bits,
    num_fragments,
    quantize,
)
from wire.ina import (
    INA_HEADER,
    INA_PACKET_LEN,
    INA_VALUES,
    InaFlags,
    MsgType,
    decode_ina,
    encode_ina,
)

__all__ = ["net"]  # the fixture, imported

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
    # packets_in > accepted only by spurious re-sends (a loaded machine); the workers'
    # requests for RESULTs are no contributions (requests_in)
    assert st.packets_in == st.accepted_grad + st.duplicates + st.late
    assert st.packets_in - st.accepted_grad == sum(o[1].resend_nack for o in out.values())
    assert st.requests_in <= sum(o[1].request_fast + o[1].request_probe + o[1].request_timer
                                 for o in out.values())
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
