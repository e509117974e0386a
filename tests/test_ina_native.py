"""The INA agents' native datagram paths (hosts/ina/native.py, dgram.c, batched.py): the
C header codec against wire/ina.py, exact sums through the native path and through the
forced Python path (``GRADNET_INA_NATIVE=0``), and malformed, short, oversized and
forged datagrams counted exactly as the Python path counts them, on real loopback
sockets; and ``python -m bench ina-agents``, which runs both paths side by side."""

from __future__ import annotations

import contextlib
import socket
import threading

import numpy as np
import pytest

from bench import ina_agents_bench
from hosts.ina import native
from hosts.ina.agent import InaTimeoutError
from hosts.ina.native import Slots
from hosts.ina.ps import ParameterServer
from hosts.ina.worker import Policy, Worker
from tests.ina_loopback import PORT, _check_exact, _grads, _run, net
from wire.fixedpoint import num_fragments
from wire.ina import (
    INA_HEADER,
    INA_HEADER_LEN,
    INA_VALUES,
    InaFlags,
    MsgType,
    decode_ina,
    encode_ina,
    ina_packet_len,
)

__all__ = ["net"]  # the fixture, imported

lib = native.library()
needs_native = pytest.mark.skipif(lib is None, reason="no C compiler: the native path is off")


@pytest.fixture(params=["native", "python"])
def path(request, monkeypatch):
    """Each test once on the native path and once on the forced Python path."""
    if request.param == "native" and lib is None:
        pytest.skip("no C compiler: the native path is off")
    monkeypatch.setenv(native.ENV, "1" if request.param == "native" else "0")
    return request.param


@needs_native
def test_c_header_parse_agrees_with_wire():
    rng = np.random.default_rng(3)
    out = np.zeros(11, dtype=np.int64)
    for _ in range(200):
        f = [int(rng.integers(0, 256)), int(rng.integers(0, 256)), int(rng.integers(0, 2**16)),
             int(rng.integers(0, 2**32)), int(rng.integers(0, 2**16)), int(rng.integers(0, 2**16)),
             int(rng.integers(0, 2**63)) << int(rng.integers(0, 193)), int(rng.integers(0, 2**16)),
             int(rng.integers(0, 2**16)), int(rng.integers(0, 256)), int(rng.integers(0, 2**16)),
             int(rng.integers(0, 256))]
        data = INA_HEADER.pack(*f)
        assert lib.ina_parse_header(data, len(data), native.addr_of(out)) == 0
        mt, job, wid, frag, tag, origin, _bm, cnt, fanin, flags, sdf, mx = INA_HEADER.unpack_from(data)
        assert out.tolist() == [mt, job, wid, frag, tag, origin, cnt, fanin, flags, sdf, mx]
    assert lib.ina_parse_header(bytes(51), 51, native.addr_of(out)) == -1  # short: refused


@needs_native
def test_c_built_grads_are_the_wire_codecs_bytes(net):
    """The worker's C-built GRADs, read off a plain socket, are byte for byte what
    ``wire.ina.encode_ina`` makes of the same fields."""
    n = 3 * INA_VALUES
    ps_ip, w_ip = net(1), net(2)
    pol = Policy.ps_only(7, ps_ip, [w_ip, net(3)], num_fragments(n))
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind((ps_ip, PORT))
    rx.settimeout(5)
    q = np.arange(n, dtype=np.int32) * 1000 - 7

    def run(w: Worker) -> None:
        with contextlib.suppress(InaTimeoutError):  # nobody answers: the worker gives up
            w.allreduce_fixed(q)

    with Worker.from_policy(pol, 1, window=8, timeout=0.5, max_time=1) as w:
        t = threading.Thread(target=run, args=(w,))
        t.start()
        got = [rx.recv(4096) for _ in range(3)]
        t.join(10)
    rx.close()
    for f, data in enumerate(sorted(got, key=lambda d: decode_ina(d)[0].fragment)):
        vals = q[f * INA_VALUES:(f + 1) * INA_VALUES]
        assert data == encode_ina(MsgType.GRAD, 7, 1, f, 0, 0, 1 << 1, 1, 0, 0, 0, values=vals)


def test_exact_sums(net, path):
    n_w, n = 4, INA_VALUES * 300 + 5
    pol = Policy.ps_only(2, net(1), [net(2 + r) for r in range(n_w)], num_fragments(n))
    grads = _grads(n_w, n, seed=4)
    rep, ps, out = _run([pol], {2: grads})
    _check_exact(pol, grads, ps, out)
    assert rep.complete
    assert all(st.native == (path == "native") for _, st in out.values())


def test_exact_sums_256_values_aimd(net, path):
    n_w, n = 3, 256 * 90
    pol = Policy.ps_only(3, net(1), [net(2 + r) for r in range(n_w)], num_fragments(n, 256),
                         values_per_packet=256)
    grads = _grads(n_w, n, seed=5)
    _, ps, out = _run([pol], {3: grads}, worker_kw={"congestion": "aimd"})
    _check_exact(pol, grads, ps, out)
    assert all(st.native == (path == "native") for _, st in out.values())


def _noise(job: int, vals: np.ndarray, st: int) -> list[bytes]:
    """Datagrams a worker must count as ignored and drop (``st``: the job's stamp)."""
    good = encode_ina(MsgType.RESULT, job, st, 0, 0, 0, 1, 1, values=vals)
    return [
        b"",  # empty
        b"\x03\x05",  # short
        good[:INA_HEADER_LEN],  # a header-only RESULT
        good[:-1],  # one value byte short
        good + bytes(4000),  # oversized (truncated at the receive slot)
        encode_ina(MsgType.RESULT, job + 1, st, 0, 0, 0, 1, 1, values=vals),  # other job
        encode_ina(MsgType.RESULT, job, st, 99, 0, 0, 1, 1, values=vals),  # out of range
        encode_ina(MsgType.RESULT, job, st, 0, 0, 0, 3, 2, values=vals),  # bad bitmap
        encode_ina(MsgType.GRAD, job, st, 0, 0, 0, 1, 1, values=vals),  # not a RESULT
        encode_ina(MsgType.NACK, job, 0, 0, 0, 0, 2, 1),  # a NACK for another rank
    ]


def test_malformed_and_forged_datagrams_counted(net, path):
    """A worker (window 1) and a scripted PS on real sockets: before each RESULT, noise
    from the PS's address; forged RESULTs from another address, and from the PS's
    address without the job's admission stamp; a stale one. Counted exactly, the same on
    both paths, and the sums still exact."""
    stamp = 0x5A5A
    pol = Policy.ps_only(5, net(1), [net(2)], 4, stamp=stamp)
    with Worker.from_policy(pol, 0, window=1, timeout=0.5, max_time=8) as w:
        ps = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        ps.bind((net(1), PORT))
        forger = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        forger.bind((net(9), PORT))
        me = (net(2), PORT)
        box: dict = {}
        t = threading.Thread(target=lambda: box.setdefault("r", w.allreduce_fixed(
            np.arange(4 * INA_VALUES, dtype=np.int32))))
        t.start()
        ps.settimeout(3)
        noise = 0
        for frag in range(4):
            hdr, vals = decode_ina(ps.recv(2048))
            assert (hdr.msg_type, hdr.fragment) == (MsgType.GRAD, frag)
            for d in _noise(5, vals, stamp):
                ps.sendto(d, me)
                noise += 1
            forger.sendto(encode_ina(MsgType.RESULT, 5, stamp, frag, 0, 0, 1, 1, values=vals), me)
            ps.sendto(encode_ina(MsgType.RESULT, 5, 0x1111, frag, 0, 0, 1, 1, values=vals), me)
            if frag == 1:  # a RESULT for a fragment not sent yet: stale
                ps.sendto(encode_ina(MsgType.RESULT, 5, stamp, 3, 0, 0, 1, 1, values=vals), me)
            ps.sendto(encode_ina(MsgType.RESULT, 5, stamp, frag, 0, 0, 1, 1, values=vals * 3), me)
        t.join(10)
        ps.close()
        forger.close()
    res, st = box["r"]
    assert res.tolist() == (np.arange(4 * INA_VALUES) * 3).tolist()
    assert st.native == (path == "native")
    assert st.refused_source == 4 and st.refused_stamp == 4
    assert st.stale_results == 1 and st.results == 4
    assert st.ignored == noise and st.nacks_in == 0 and st.duplicate_results == 0


@needs_native
def test_recv_batch_bounds_lengths(net):
    """The raw batched receive: an oversized datagram is cut at the slot, an empty one
    has length 0, and sources are reported."""
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind((net(1), 0))
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx.bind((net(2), 0))
    sizes = [0, 1, 52, 308, native.SLOT, native.SLOT + 1, 9000]
    for n in sizes:
        tx.sendto(bytes([n % 251]) * n, rx.getsockname())
    s = Slots()
    k = lib.ina_recv_batch(rx.fileno(), s.p_slots, native.BATCH, s.p_lens, s.p_srcs, s.p_ports)
    assert k == len(sizes)
    assert s.lens[:k].tolist() == [min(n, native.SLOT) for n in sizes]
    assert {s.source(i) for i in range(k)} == {net(2)}
    assert set(s.ports[:k].tolist()) == {tx.getsockname()[1]}
    assert lib.ina_recv_batch(rx.fileno(), s.p_slots, native.BATCH, s.p_lens, s.p_srcs, s.p_ports) == 0
    rx.close()
    tx.close()


def test_no_compiler_keeps_the_python_path(net, monkeypatch, tmp_path, caplog):
    """Without a C compiler the agents log one line and run the Python path, exact."""
    monkeypatch.setattr(native, "_state", {})
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no cc, gcc or clang on it
    monkeypatch.setenv(native.ENV, "1")
    with caplog.at_level("WARNING", logger="hosts.ina.native"):
        assert native.library() is None
        assert native.library() is None  # once
    assert [r.getMessage() for r in caplog.records] == [
        "INA agents: no C compiler (cc, gcc or clang): the Python packet path"]
    n_w, n = 2, INA_VALUES * 40
    pol = Policy.ps_only(4, net(1), [net(2), net(3)], num_fragments(n))
    grads = _grads(n_w, n, seed=6)
    _, ps, out = _run([pol], {4: grads})
    _check_exact(pol, grads, ps, out)
    assert not any(st.native for _, st in out.values())


def test_failing_compiler_keeps_the_python_path(monkeypatch, tmp_path, caplog):
    """A compiler that fails (here ``false``): one log line, the Python path."""
    monkeypatch.setattr(native, "_state", {})
    monkeypatch.setenv("CC", "false")
    monkeypatch.setenv("GRADNET_NATIVE_CACHE", str(tmp_path))  # nothing built there yet
    monkeypatch.setenv(native.ENV, "1")
    with caplog.at_level("WARNING", logger="hosts.ina.native"):
        assert native.library() is None
    assert len(caplog.records) == 1
    assert "native datagram paths not built" in caplog.records[0].getMessage()


def test_bad_coalescing_value_is_off(monkeypatch, caplog):
    monkeypatch.setenv(native.COALESCE_ENV, "lots")
    with caplog.at_level("WARNING", logger="hosts.ina.native"):
        assert native.coalesce_us() == 0.0
    assert "not 0..100000" in caplog.text
    monkeypatch.setenv(native.COALESCE_ENV, "250")
    assert native.coalesce_us() == 250.0


@needs_native
@pytest.mark.parametrize("faults", ["drop", "twice", "hold"])
def test_native_workers_recover_exactly(net, faults):
    """Workers on the native path (the C loop), the PS losing, duplicating or
    reordering what it sends (its fault injection, so the PS on the Python path): the
    workers' recovery (requests on the timer and on evidence, the tail probe, NACKs,
    duplicates) runs from the C loop's returns, and every sum is exact."""
    from hosts.ina.agent import FaultInjection

    n_w, n = 3, INA_VALUES * 150
    pol = Policy.ps_only(6, net(1), [net(2 + r) for r in range(n_w)], num_fragments(n))
    grads = _grads(n_w, n, seed=7)
    ps_faults = {"drop": FaultInjection(drop_every=5), "twice": FaultInjection(send_twice=True),
                 "hold": FaultInjection(hold_sent={int(MsgType.RESULT): (10, 12)})}[faults]
    rep, ps, out = _run([pol], {6: grads}, ps_kw={"faults": ps_faults, "linger": 0.6})
    _check_exact(pol, grads, ps, out)
    stats = [st for _, st in out.values()]
    assert all(st.native for st in stats)
    assert rep.jobs[6].contributions == n_w * pol.num_fragments  # each value summed once
    if faults == "drop":
        assert all(st.retransmissions > 0 for st in stats)
    elif faults == "twice":
        assert sum(st.duplicate_results for st in stats) > 0
    else:  # the 10th RESULT went out 12 datagrams late: out of order at rank 0, taken
        assert not ps_faults._held and out[6, 0][1].results == pol.num_fragments


@needs_native
def test_native_workers_bfp_exact_under_loss(net):
    """Block floating point on the native path (the lookahead gate in C, the RESULTs
    handed to Python a batch at a time for the next blocks' values), the PS losing a
    RESULT in 7: the exact integer sums at the agreed exponents."""
    from hosts.ina.agent import FaultInjection
    from tests.test_ina_hosts_e2e import bfp_reference, spanning_grads
    from wire.fixedpoint import BFP_LOOKAHEAD

    n_w, blocks = 4, 41
    n = blocks * INA_VALUES - 5
    grads = [g[:n] for g in spanning_grads(n_w, blocks, 12)]
    look = min(BFP_LOOKAHEAD, blocks)
    pol = Policy.ps_only(8, net(1), [net(2 + r) for r in range(n_w)], blocks + look,
                         number_format="bfp")
    rep, _, out = _run([pol], {8: grads}, ps_kw={"faults": FaultInjection(drop_every=7),
                                                 "linger": 0.6})
    sums, _e = bfp_reference(grads, n_w)
    for r in range(n_w):
        res, st = out[8, r]
        assert st.native and np.array_equal(res.astype(np.int64), sums[:n])
        assert st.results == st.fragments == blocks + look
    assert rep.jobs[8].contributions == n_w * (blocks + look)


def test_bench_small_run_both_paths_exact(capsys):
    """``python -m bench ina-agents``: both packet paths side by side, exact on every rank."""
    rc = ina_agents_bench.main(["--values", "4096", "--rounds", "2", "--workers", "2",
                                "--vpp", "64", "--reps", "1", "--paths", "native,python"])
    out = capsys.readouterr().out
    assert rc == 0  # every rank's sums exact in every run
    assert "native" in out and "python" in out and "NO" not in out


@pytest.mark.parametrize("argv", [["--paths", "gpu"], ["--paths", "native,native"],
                                  ["--vpp", "100"], ["--coalesce-us", "-1"]])
def test_bench_bad_options_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as e:
        ina_agents_bench.main(argv)
    assert e.value.code == 2
    assert "error" in capsys.readouterr().err


def _ps_script(net) -> tuple[Policy, list[tuple[str, bytes]]]:
    """A job of 4 workers and 2 fragments (switch 5 aggregates ranks 0 and 1 of
    fragment 0) and what arrives at its PS: (sender address, datagram), covering the
    C fast case and each way out of it."""
    st = 0x77
    tags = np.array([[5, 0], [5, 0], [0, 0], [0, 0]])
    pol = Policy(job=6, ps=net(1), workers=tuple(net(2 + r) for r in range(4)), num_fragments=2,
                 tags=tags, switch_ips={5: net(50)}, stamp=st)
    v = [np.arange(INA_VALUES, dtype=np.int32) * (r + 1) - 1000 * r for r in range(4)]

    def pkt(mt, bm, frag, wid=st, cnt=None, flags=0, origin=0, tag=0, mx=1):
        vals = sum(v[r] for r in range(4) if bm >> r & 1)
        n = bin(bm).count("1") if cnt is None else cnt
        return encode_ina(mt, 6, wid, frag, tag, origin, bm, n, 0, flags, values=vals, max_exp=mx)

    G, P, R = MsgType.GRAD, MsgType.PARTIAL, int(InaFlags.RETX)
    sw, w2, w3 = net(50), net(4), net(5)
    return pol, [
        (sw, pkt(P, 0b0011, 0, tag=5)),  # a switch's aggregate: Python's
        (w2, pkt(G, 0b0100, 0)),  # fast
        (w2, pkt(G, 0b0100, 0)),  # duplicate
        (w2, pkt(G, 0b1000, 0)),  # rank 3's bit from rank 2's address: refused
        (w3, pkt(G, 0b1000, 0, wid=0x12)),  # without the stamp: refused
        (w3, pkt(G, 0b1000, 0, cnt=2, mx=9)),  # fast, a count mismatch, completes fragment 0
        (w3, pkt(G, 0b1000, 0, flags=R)),  # late RETX: its RESULT again
        (sw, pkt(G, 0b0011, 1, origin=5, mx=7)),  # passed on by the switch: fast, merged
        (sw, pkt(G, 0b0110, 1)),  # overlaps what the switch passed on
        (w3, pkt(G, 0b1000, 1)),  # fast
        (w2, pkt(G, 0b0100, 1, flags=R)),  # a RETX: Python's, completes fragment 1
        (w2, b"\x01\x06" + bytes(400)),  # not the job's size: Python's
    ]


@pytest.mark.parametrize("mode", ["python", "native", "native-fast"])
def test_ps_fast_case_counts_as_python(net, monkeypatch, mode):
    """The same datagrams, over real sockets, to a PS on the Python path, on the native
    path without the C fast case, and with it: the same sums, counters and replies."""
    monkeypatch.setenv(native.ENV, "0" if mode == "python" else "1")
    monkeypatch.setenv("GRADNET_INA_PS_FAST", "1" if mode == "native-fast" else "0")
    if mode != "python" and lib is None:
        pytest.skip("no C compiler: the native path is off")
    pol, script = _ps_script(net)
    socks = {}
    for a in sorted({a for a, _ in script}):
        socks[a] = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        socks[a].bind((a, PORT))
        socks[a].settimeout(3)
    ps = ParameterServer.from_policies([pol], linger=0.3, max_time=5)
    box: dict = {}
    t = threading.Thread(target=lambda: box.setdefault("rep", ps.run()))
    t.start()
    for a, data in script:
        socks[a].sendto(data, (net(1), PORT))
    t.join(10)
    ps.close()
    replies = {a: [] for a in socks}
    for a, s in socks.items():
        s.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            while True:
                replies[a].append(s.recv(4096))
        s.close()
    rep = box["rep"]
    st = rep.jobs[6]
    exp = sum((np.arange(INA_VALUES, dtype=np.int64) * (r + 1) - 1000 * r) for r in range(4))
    assert ps.result(6).tolist() == np.tile(exp, 2).tolist()
    assert (st.completed, st.contributions, st.accepted_grad, st.accepted_partial) == (2, 8, 5, 1)
    assert (st.duplicates, st.overlaps, st.late, st.refused_source, st.refused_stamp) == (1, 1, 1, 1, 1)
    assert (st.count_mismatch, st.merged_grad_in, st.forwarded_in, st.retx_in) == (1, 2, 1, 2)
    assert (st.packets_in, st.grad_in, st.partial_in, st.result_resends) == (9, 8, 1, 1)
    assert st.bytes_in == 9 * ina_packet_len() and rep.counters.short == 0
    assert st.wrong_size == 1 and rep.counters.datagrams == len(script)
    assert ps.jobs[6].max_exp == [9, 7]  # the largest proposal of each fragment
    # RESULTs: 4 a fragment to the workers, 1 again to rank 3; a CLEAR to switch 5
    got = {a: sorted(decode_ina(d)[0].msg_type for d in ds) for a, ds in replies.items()}
    assert {(h.fragment, h.max_exp) for h in (decode_ina(d)[0] for d in replies[net(5)])} == {
        (0, 9), (1, 7)}
    assert got[net(5)] == [MsgType.RESULT] * 3 and got[net(4)] == [MsgType.RESULT] * 2
    assert got[net(50)] == [MsgType.CLEAR]
