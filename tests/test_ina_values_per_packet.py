"""Values per packet (docs/ina.md, "Values per packet"): a job carries 64, 128 or 256
int32 values a packet, chosen in its policy (``values_per_packet``), and every part
follows it: the codec, fixed point and block floating point, the worker, the PS, the
DDP hook's capacity, the controller's plan and program choice, and the ns-3 model's
inputs. Loopback runs check the sums element by element; the network test (embedded
target) runs one job through the ina.p4 compiled for 256 values.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hosts.ina.agent import FaultInjection
from hosts.ina.ps import ParameterServer
from hosts.ina.worker import Worker
from tests.ina_loopback import _check_exact, _grads, _run, net  # noqa: F401 (fixture)
from wire import ina, scapy_layers
from wire.fixedpoint import (
    bfp_dequantize,
    bfp_error_bound,
    bfp_fragments,
    bfp_reference,
    block_exponents,
    num_fragments,
    pad_to_fragments,
)
from wire.ina import (
    INA_HEADER_LEN,
    INA_VALUE_SIZES,
    InaDecodeError,
    MsgType,
    decode_ina,
    encode_ina,
    ina_packet_len,
)
from wire.ina_policy import Policy, PolicyError

ROOT = Path(__file__).resolve().parent.parent
SIZES = list(INA_VALUE_SIZES)


# ============================================================================ codec


def test_sizes_and_packet_lengths() -> None:
    assert INA_VALUE_SIZES == (64, 128, 256) and ina.INA_VALUES == 64
    assert [ina_packet_len(v) for v in SIZES] == [308, 564, 1076]
    assert ina_packet_len() == ina.INA_PACKET_LEN
    # a 256-value frame (+ UDP 8, IPv4 20, Ethernet 14) fits a 1500-byte MTU
    assert ina_packet_len(256) + 8 + 20 < 1500
    for bad in (0, 32, 100, 512, True, 128.5, "128"):
        with pytest.raises(ValueError, match="values per packet"):
            ina.check_values_per_packet(bad)


@pytest.mark.parametrize("v", SIZES)
def test_codec_round_trip_and_scapy(v: int) -> None:
    rng = np.random.default_rng(v)
    vals = rng.integers(-(2**31), 2**31, size=v, dtype=np.int64).astype(np.int32)
    fields = dict(msg_type=1, job_id=3, worker_id=2, fragment=77, tag=5, origin=0,
                  bitmap=0b101, count=2, fanin=2, flags=0, sd_fanin=0, max_exp=130)
    fast = encode_ina(**fields, values=vals)
    assert len(fast) == ina_packet_len(v)
    assert encode_ina(**fields, values=vals, values_per_packet=v) == fast
    assert encode_ina(**fields, values=vals.astype(">i4").tobytes()) == fast
    h, got = decode_ina(fast, v)
    assert h._asdict() == fields and got.tolist() == vals.tolist()
    # scapy: built and dissected with as many values as the payload holds
    sc = bytes(scapy_layers.INA(**fields) / scapy_layers.INAValues(values=[int(x) for x in vals]))
    assert sc == fast
    assert [int(x) for x in scapy_layers.INA(fast)[scapy_layers.INAValues].values] == vals.tolist()
    if v > 64:  # decoding as another size: too short for a bigger one, a prefix never
        with pytest.raises(InaDecodeError, match=f"expected {ina_packet_len(256)}"):
            decode_ina(encode_ina(**fields, values=vals[:64]), 256)
    zeros = encode_ina(1, 1, values_per_packet=v)
    assert len(zeros) == ina_packet_len(v) and not any(zeros[INA_HEADER_LEN:])


def test_codec_refuses_other_lengths() -> None:
    with pytest.raises(ValueError, match="shape"):
        encode_ina(1, 1, values=np.zeros(96, np.int32))
    with pytest.raises(ValueError, match="shape"):
        encode_ina(1, 1, values=np.zeros(64, np.int32), values_per_packet=128)
    with pytest.raises(ValueError, match="bytes"):
        encode_ina(1, 1, values=bytes(4 * 100))
    with pytest.raises(ValueError, match="values per packet"):
        encode_ina(1, 1, values_per_packet=100)
    with pytest.raises(ValueError, match="INAValues needs 64 or 128 or 256"):
        bytes(scapy_layers.INAValues(values=[0] * 65))
    # a CLEAR is the header alone whatever the size
    assert len(encode_ina(MsgType.CLEAR, 1)) == INA_HEADER_LEN


# ============================================================================ number formats


@pytest.mark.parametrize("v", SIZES)
def test_fragments_and_blocks_follow_the_size(v: int) -> None:
    assert num_fragments(0, v) == 0 and num_fragments(v, v) == 1 and num_fragments(v + 1, v) == 2
    p = pad_to_fragments(np.arange(v + 3, dtype=np.int32), v)
    assert p.size == 2 * v and p[: v + 3].tolist() == list(range(v + 3)) and not p[v + 3:].any()
    g = np.zeros(3 * v, np.float32)
    g[v - 1], g[v], g[2 * v + 5] = 1.5, -0.25, 3.0  # one largest value per block
    assert block_exponents(g, v).tolist() == [127 + 1, 127 - 1, 127 + 2]
    assert bfp_fragments(3 * v, v) == 6 and bfp_fragments(100 * v, v) == 100 + 32


def test_a_block_is_one_packet_and_the_bound_holds_for_each_size() -> None:
    """A BFP block is one fragment's values: with 256 values one exponent covers four
    times as many as with 64. The normwise bound per block (relative to the block's
    largest magnitude) holds at every size; elements far below their block's largest
    lose relative precision as blocks grow (measured: bench/ina_bfp_bench.py)."""
    n_w, n = 6, 4096
    rng = np.random.default_rng(3)
    mag = 2.0 ** rng.uniform(-12, 4, n)  # 16 octaves within every block of any size
    grads = [(mag * rng.standard_normal(n)).astype(np.float32) for _ in range(n_w)]
    exact = np.sum([g.astype(np.float64) for g in grads], axis=0)
    small = np.abs(exact) < np.quantile(np.abs(exact), 0.1)
    rel_small = {}
    for v in SIZES:
        sums, e = bfp_reference(grads, n_w, v)
        assert e.size == n // v and np.abs(sums).max() < 2**31
        got = bfp_dequantize(sums.astype(np.int32), e, n_w, values_per_packet=v)[:n]
        err = np.abs(got - exact).reshape(-1, v).max(axis=1)
        peak = np.max([np.abs(g).reshape(-1, v).max(axis=1) for g in grads], axis=0)
        assert (err / peak).max() <= bfp_error_bound(n_w)
        rel_small[v] = float(np.median(np.abs(got - exact)[small] / np.abs(exact)[small]))
    assert rel_small[64] <= rel_small[256]  # coarser blocks: no better for small values


# ============================================================================ policy


def test_policy_values_per_packet() -> None:
    d = {"job": 1, "ps": "10.0.0.1", "workers": ["10.0.0.2", "10.0.0.3"], "num_fragments": 4}
    assert Policy.from_dict(d).values_per_packet == 64  # older files: the default
    for v in SIZES:
        pol = Policy.from_dict({**d, "values_per_packet": v})
        assert pol.values_per_packet == v and pol.to_dict()["values_per_packet"] == v
        assert Policy.from_dict(json.loads(json.dumps(pol.to_dict()))).values_per_packet == v
    for bad in (32, 100, "256", True, None):
        with pytest.raises(PolicyError, match="values_per_packet"):
            Policy.from_dict({**d, "values_per_packet": bad})


def test_plan_writes_the_size_and_the_deployment_picks_its_program() -> None:
    from controller.ina import INA_PROGRAM, InaDeployment, InaJob, ina_program_path
    from controller.p4runtime import DeployError
    from topologies import fat_tree

    assert ina_program_path() == INA_PROGRAM == ROOT / "p4src/build/ina.json"
    assert ina_program_path(128).name == "ina_v128.json"
    assert ina_program_path(256) == ROOT / "p4src/build/ina_v256.json"
    with pytest.raises(DeployError, match="values per packet"):
        ina_program_path(96)
    topo = fat_tree(4, bw=10)
    workers = ["h3", "h4", "h5"]
    jobs = {}
    for v in SIZES:
        job = InaJob.plan(topo, "h1", workers, 1, 1000.0, 1000, values_per_packet=v)
        assert job.values_per_packet == v and job.num_fragments == -(-1000 // v)
        pol = Policy.from_dict(job.policy_dict())
        assert pol.values_per_packet == v and pol.num_fragments == job.num_fragments
        jobs[v] = job
    bfp = InaJob.plan(topo, "h1", workers, 0, 1000.0, 4096, number_format="bfp",
                      values_per_packet=256, aggregate=False)
    assert bfp.num_fragments == 16 + 16
    with pytest.raises(DeployError, match="values per packet"):
        InaJob.plan(topo, "h1", workers, 1, 1000.0, 1000, values_per_packet=100)
    addresses = {s: "127.0.0.1:1" for s in topo.switches()}  # nothing is contacted
    for v, job in jobs.items():
        dep = InaDeployment(topo, addresses, [job])
        assert dep.values_per_packet == v
        assert {p.json_path for p in dep.programs.values()} == {ina_program_path(v)}
    other = InaJob.plan(topo, "h1", ["h6"], 0, 1000.0, 1000, job_id=2, aggregate=False,
                        values_per_packet=128)
    with pytest.raises(DeployError, match="same values per packet"):
        InaDeployment(topo, addresses, [jobs[256], other])


def test_command_lines_take_the_size() -> None:
    from controller.cli import build_parser
    from experiments.ina import build_parser as ina_parser

    args = ina_parser().parse_args(["--values-per-packet", "256"])
    assert args.values_per_packet == 256
    assert ina_parser().parse_args([]).values_per_packet == 64
    with pytest.raises(SystemExit):
        ina_parser().parse_args(["--values-per-packet", "100"])
    dep = ["ina", "deploy", "fat-tree:4", "--addresses", "a.yaml", "--ps", "h1", "--values", "9"]
    assert build_parser().parse_args(dep).values_per_packet == 64
    assert build_parser().parse_args([*dep, "--values-per-packet", "128"]).values_per_packet == 128
    with pytest.raises(SystemExit):
        build_parser().parse_args([*dep, "--values-per-packet", "96"])


# ============================================================================ loopback


@pytest.mark.parametrize("v", [128, 256])
def test_fixed_point_exact_under_loss(net, v: int) -> None:  # noqa: F811
    """PS baseline on loopback with V values a packet, GRADs and RESULTs lost."""
    n_w, n = 3, v * 40 + 7  # the last fragment padded
    pol = Policy.ps_only(4, net(1), [net(2 + r) for r in range(n_w)], num_fragments(n, v),
                         values_per_packet=v)
    grads = _grads(n_w, n, seed=v)
    rep, ps, out = _run([pol], {4: grads}, ps_kw={"faults": FaultInjection(drop_every=11)},
                        worker_kw={"faults": lambda: FaultInjection(drop_every=13)})
    _check_exact(pol, grads, ps, out)
    st = rep.jobs[4]
    assert st.contributions == n_w * pol.num_fragments and st.wrong_size == 0
    assert st.bytes_in == st.packets_in * ina_packet_len(v)
    assert sum(o[1].retransmissions for o in out.values()) > 0
    for _, ws in out.values():  # GRADs, and the header-only requests for RESULTs
        asked = ws.request_fast + ws.request_probe + ws.request_timer
        assert ws.bytes_sent == ws.packets_sent * ina_packet_len(v) + asked * INA_HEADER_LEN


def test_bfp_exact_with_256_values(net) -> None:  # noqa: F811
    """Block floating point with 256 values a block (one packet): the exact int sums at
    the agreed exponents, and the float result within the bound."""
    n_w, v = 4, 256
    rng = np.random.default_rng(5)
    blocks = 12
    mag = np.repeat(2.0 ** np.linspace(-20, 20, blocks), v)
    grads = [(mag * rng.uniform(-1, 1, mag.size)).astype(np.float32)[:-9] for _ in range(n_w)]
    n = grads[0].size
    pol = Policy.ps_only(5, net(1), [net(2 + r) for r in range(n_w)], bfp_fragments(n, v),
                         number_format="bfp", values_per_packet=v)
    rep, ps, out = _run([pol], {5: grads}, worker_kw={"faults": lambda: FaultInjection(drop_every=7)})
    sums, e = bfp_reference(grads, n_w, v)
    assert e.size == blocks
    for r in range(n_w):
        res, st = out[5, r]
        assert np.array_equal(res.astype(np.int64), sums[:n])
        assert st.fragments == blocks + blocks
    got = bfp_dequantize(sums.astype(np.int32), e, n_w, values_per_packet=v)[:n]
    exact = np.sum([g.astype(np.float64) for g in grads], axis=0)
    pad = blocks * v - n
    err = np.pad(np.abs(got - exact), (0, pad)).reshape(blocks, v).max(axis=1)
    peak = np.max([np.pad(np.abs(g), (0, pad)).reshape(blocks, v).max(axis=1) for g in grads],
                  axis=0)
    assert (err / peak).max() <= bfp_error_bound(n_w)


def test_ps_drops_packets_of_another_size(net) -> None:  # noqa: F811
    """A PS serving a 256-value job and a 64-value job counts a packet of the wrong size
    (``wrong_size``) and adds nothing of it; each job completes at its own size."""
    a = Policy.ps_only(1, net(1), [net(2)], 1, values_per_packet=256)
    b = Policy.ps_only(2, net(1), [net(3)], 1)
    with ParameterServer.from_policies([a, b], linger=0.1, max_time=5.0) as ps:
        ps._handle(encode_ina(MsgType.GRAD, 1, 0, 0, 0, 0, 1, 1, values=np.ones(64, np.int32)),
                   (net(2), 1), 0.0)
        ps._handle(encode_ina(MsgType.GRAD, 2, 0, 0, 0, 0, 1, 1, values=np.ones(256, np.int32)),
                   (net(3), 1), 0.0)
        assert ps.jobs[1].stats.wrong_size == ps.jobs[2].stats.wrong_size == 1
        assert not ps.result(1).any() and not ps.result(2).any()
        ps._handle(encode_ina(MsgType.GRAD, 1, 0, 0, 0, 0, 1, 1, values=np.full(256, 7, np.int32)),
                   (net(2), 1), 0.0)
        ps._handle(encode_ina(MsgType.GRAD, 2, 0, 0, 0, 0, 1, 1, values=np.full(64, 9, np.int32)),
                   (net(3), 1), 0.0)
        assert ps.result(1).tolist() == [7] * 256 and ps.result(2).tolist() == [9] * 64
        assert ps.jobs[1].stats.completed == ps.jobs[2].stats.completed == 1


def test_worker_follows_the_policy(net) -> None:  # noqa: F811
    pol = Policy.ps_only(1, net(1), [net(2), net(3)], 3, values_per_packet=128)
    with Worker.from_policy(pol, 0) as w:
        assert w.values_per_packet == 128 and w.wire_fragments(3 * 128) == 3
        with pytest.raises(ValueError, match="384 values at most"):
            w.allreduce_fixed(np.zeros(3 * 128 + 1, np.int32))
    with pytest.raises(ValueError, match="values per packet"):
        Worker(0, 1, 1, net(1), bind_ip=net(4), values_per_packet=100)


def test_ddp_hook_capacity_follows_the_policy() -> None:
    pytest.importorskip("torch")
    from hosts.ina.ddp_hook import InaHookState

    for v in SIZES:
        pol = Policy.ps_only(1, "127.0.0.1", ["127.0.0.2", "127.0.0.3"], 2, values_per_packet=v)
        state = InaHookState.from_policy(pol, 0)
        try:
            assert state.capacity == 2 * v
            with pytest.raises(ValueError, match=rf"\(2 fragments x {v}\)"):
                state.allreduce_mean(np.zeros(2 * v + 1, dtype=np.float32))
        finally:
            state.close()


# ============================================================================ ns-3 inputs


def test_sim_policy_follows_the_size() -> None:
    from sim.core import SimError, _check_policy
    from sim.plan import policy_dict
    from sim.scale import INA_WIRE_BYTES, ina_wire_bytes
    from topologies import fat_tree

    topo = fat_tree(4, bw=10)
    for v in SIZES:
        d = policy_dict(topo, "h1", ["h2", "h3"], 0, 1000.0, 1000, aggregate=False,
                        values_per_packet=v)
        assert d["values_per_packet"] == v and d["num_fragments"] == -(-1000 // v)
        assert _check_policy(topo, d)["values_per_packet"] == v
        # the emulator's policy file is the same object (the agents read it too)
        assert Policy.from_dict(d).values_per_packet == v
    assert ina_wire_bytes(64) == INA_WIRE_BYTES and ina_wire_bytes(256) - ina_wire_bytes(64) == 768
    with pytest.raises(SimError, match="values_per_packet"):
        _check_policy(topo, {**d, "values_per_packet": 100})


# ============================================================================ switch


@pytest.mark.parametrize("v", SIZES)
def test_embedded_switch_sums_its_size_and_refuses_others(v: int) -> None:
    """The ina.p4 compiled for V values on the embedded target: two ranks' GRADs of V
    values are summed lane by lane (every one of the V registers holds the exact sum,
    and the complete aggregate leaves as a PARTIAL); a GRAD of any other size is
    consumed whole (``ina_drops`` reason 5, wrong size) and changes no register: a
    prefix is never summed, and its worker's retransmission to the PS is."""
    from scapy.all import IP, UDP, Ether

    from controller.ina import ina_program_path
    from tests.ina_probe import aggregating_switch, aggregator_index

    sw, prog = aggregating_switch(ina_program_path(v).read_bytes())
    a = "MyIngress.aggregator."

    def send(frag: int, rank: int, vals: np.ndarray) -> None:
        pl = encode_ina(MsgType.GRAD, 1, rank, frag, 1, 0, 1 << rank, 1, 2, values=vals)
        sw.process(1, bytes(Ether() / IP(src="10.0.0.2", dst="10.255.0.1")
                            / UDP(sport=40000, dport=40000) / pl))

    def lanes(frag: int) -> list[int]:
        i = aggregator_index(1, frag)  # lanes agg_value_00..99, 100..255
        return [prog.registers[f"{a}agg_value_{k:02d}"].read(i) for k in range(v)]

    def reason(k: int) -> int:
        return prog.counters[a + "ina_drops"].read(k)[0]

    assert sum(r.startswith(a + "agg_value_") for r in prog.registers) == v
    rng = np.random.default_rng(v)
    x = [rng.integers(-(2**30), 2**30, v).astype(np.int32) for _ in range(2)]
    send(7, 0, x[0])
    assert reason(1) == 1  # absorbed, waiting for the second rank
    send(7, 1, x[1])
    want = (x[0].astype(np.int64) + x[1]).astype(np.int32).view(np.uint32).tolist()
    assert lanes(7) == want  # every lane, no more
    assert prog.counters[a + "ina_events"].read(1)[0] == 1  # the PARTIAL left
    for other in SIZES:
        if other == v:
            continue
        before = reason(5)
        send(8, 0, np.ones(other, np.int32))
        assert reason(5) == before + 1
        assert not any(lanes(8)) and prog.registers[a + "agg_bitmap"].read(
            aggregator_index(1, 8)) == 0


# ============================================================================ network


@pytest.mark.long  # a second size: every INA network test runs 64 values; 256 are checked on the embedded switch above
@pytest.mark.net
@pytest.mark.slow
def test_256_values_per_packet_exact_through_switches(tmp_path: Path) -> None:
    """One job of 5 workers with 256 values a packet on a leaf-spine (2 spines, 3 leaves,
    2 hosts each; the embedded target unless TARGET says otherwise): every ina.p4 switch
    runs the program compiled for 256 values (p4src/build/ina_v256.json); every element
    of every worker's result is the exact integer sum, the switches aggregated every
    fragment (the PS got one PARTIAL per fragment, no raw GRAD), and 5 % loss on the
    workers' leaves is repaired exactly. On switches loaded with the 64-value program by
    mistake, the 256-value GRADs are consumed and counted (``wrong_size``), never
    summed in part, and the workers' retransmissions to the PS give the exact sums."""
    from controller.ina import InaDeployment, InaJob, ina_program_path
    from experiments.ina import run_jobs, switch_neighbors
    from tests.netenv import net_skip_reason
    from topologies import leaf_spine
    from topologies.network import Network

    reason = net_skip_reason("ina", "ina_v256")
    if reason:
        pytest.skip(reason)
    topo = leaf_spine(2, 3, 2, bw=50)
    workers = ["h2", "h3", "h4", "h5", "h6"]
    values = 256 * 24 - 5  # the last fragment padded
    rng = np.random.default_rng(256)
    grads = [(rng.standard_normal(values) * 0.05).astype(np.float32) for _ in workers]
    job = InaJob.plan(topo, "h1", workers, 1, 1000.0, values, values_per_packet=256)
    assert job.placement is not None and job.num_fragments == 24
    with Network(topo, run_dir=str(tmp_path / "net")) as network:
        switch_neighbors(network, topo, job.aggregating_switches)
        dep = InaDeployment(topo, network.grpc_addresses(), [job])
        assert {p.json_path.name for p in dep.programs.values()} == {"ina_v256.json"}
        dep.deploy()
        (res,) = run_jobs(network, topo, [(job, grads)], tmp_path, "v256", window=8)
        assert res.exact, f"{res.mismatches} elements differ from the exact sum"
        assert res.ps_packets["grad_in"] == 0 and res.ps_packets["partial_in"] == 24
        events = dep.read_events()
        assert sum(e["added"] for e in events.values()) >= len(workers) * 24
        # and under loss: retransmissions to the PS, still exact
        leaves = {topo.iface(w)["switch"] for w in workers}
        InaDeployment(topo, network.grpc_addresses(), [job],
                      loss={(s, p): 0.05 for s in leaves for p in topo.ports(s)}).deploy()
        (lossy,) = run_jobs(network, topo, [(job, grads)], tmp_path, "v256-loss", window=8,
                            timeout=0.5)
        assert lossy.exact, f"{lossy.mismatches} elements differ under loss"
        assert lossy.retransmissions > 0  # the loss happened and was repaired
        # misconfigured: the switches run the 64-value program; every GRAD of 256 values
        # is consumed there (counted wrong_size), and the retransmissions to the PS
        # still give the exact sums
        bad = InaDeployment(topo, network.grpc_addresses(), [job],
                            ina_program=ina_program_path(64))
        bad.deploy()
        (mixed,) = run_jobs(network, topo, [(job, grads)], tmp_path, "v256-on-64", window=24,
                            timeout=0.3)
        assert mixed.exact, f"{mixed.mismatches} elements differ on the wrong program"
        assert mixed.ps_packets["partial_in"] == 0
        assert sum(e["wrong_size"] for e in bad.read_events().values()) >= len(workers) * 24
    w0 = np.load(tmp_path / "v256-job1" / "out-0.npy")
    assert w0.shape == (values,)
