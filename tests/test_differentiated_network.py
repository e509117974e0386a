"""Differentiated transmission through a congested P4 switch (either target).

One star network (PS h1 and three workers on s1, eight priority queues per port) serves
every test. The controller deploys forward.p4 with the DSCP -> priority map and gives
s1's port to the PS a line rate below the offered load: shared by the queues in strict
priority on the embedded target, cut into a static partition of per-queue rates on BMv2
(``TARGET=bmv2``), which has no shared port rate. A second star on real BMv2 (skipped
when BMv2 is not installed) checks the static partition there whatever ``TARGET`` is. Workers send fixed gradient
tensors (real blocks, real TCP and UDP through the switch); the PS saves what it
rebuilt, which is checked element by element. Then a short real training of the digits
CNN runs over the same network with each transport, and ``gradctl qos`` reads the
switch.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from controller.qos.deployment import UNUSED_QUEUE_PPS
from experiments.differentiated import PS_HOST, SWITCH, QosSetup, configure, run_transport
from hosts.differentiated.blocks import BlockLayout, Contribution, classify
from tests.netenv import net_skip_reason, started_network
from topologies import star
from wire.differentiated import NB_QUEUES, level_priority

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.net]

LEVELS = 3
QUANTILE = 0.9
BLOCK = 300  # values per block of the flat tensor: one block message per datagram


def _skip_reason() -> str | None:
    return net_skip_reason("forward")


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[object, object, Path]]:
    with started_network(tmp_path_factory, "diff_net",
                         star(4, bw=20), "forward", priority_queues=NB_QUEUES) as n:
        yield n


@pytest.fixture(scope="module")
def bmv2_net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[object, object, Path]]:
    """The same star on real BMv2 (simple_switch_grpc --priority-queues 8, queues set
    with simple_switch_CLI), whatever TARGET says."""
    import shutil

    from targets.launch import bmv2_available
    from topologies.network import Network

    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    if not bmv2_available() or shutil.which("simple_switch_CLI") is None:
        pytest.skip("BMv2 (simple_switch_grpc and simple_switch_CLI, built with Thrift) is not installed")
    topo = star(4, bw=20)
    network = Network(topo, target="bmv2", run_dir=str(tmp_path_factory.mktemp("diff_bmv2")),
                      priority_queues=NB_QUEUES)
    network.start()
    try:
        yield network, topo, tmp_path_factory.mktemp("diff_bmv2_runs")
    finally:
        network.stop()


def _gradient(path: Path) -> list[np.ndarray]:
    """A conv weight (8 kernels) and a flat tensor of 96 blocks whose magnitudes grow
    with the block number, so the contribution ranking is known."""
    rng = np.random.default_rng(7)
    conv = (rng.standard_normal((8, 2, 3, 3)) * 1e-3).astype(np.float32)
    scale = np.repeat(np.arange(1, 97, dtype=np.float32), BLOCK)
    flat = (np.sign(rng.standard_normal(96 * BLOCK)) * scale * (1 + 0.1 * rng.random(96 * BLOCK))).astype(np.float32)
    arrays = [conv, flat]
    np.savez(path, *arrays)
    return arrays


def _run(net, tmp: Path, name: str, setup: QosSetup, iterations: int = 2):  # noqa: ANN001, ANN202
    network, topo, out = net
    eq = configure(network, topo, setup)
    d = out / name
    d.mkdir()
    arrays = _gradient(d / "grad.npz")
    common = ["--gradient", str(d / "grad.npz"), "--iterations", str(iterations), "--block-size", str(BLOCK)]
    wargs = ["--alpha", "0", "--quantile", str(QUANTILE), "--levels", str(LEVELS), "--udp-pps", "150"]
    pargs = ["--grace", "1.0", "--linger", "1.0", "--out-dir", str(d / "ps-out")]
    run = run_transport(network, topo, eq, d, "differentiated", common, wargs, pargs, max_time=120)
    assert run.ok, run.error
    return run, arrays, d / "ps-out"


def _levels(arrays: list[np.ndarray]) -> tuple[BlockLayout, np.ndarray]:
    layout = BlockLayout.of(arrays, BLOCK)
    c = Contribution(len(layout), alpha=0.0).update(layout.split(arrays))
    return layout, classify(c, QUANTILE, LEVELS)


def _check_reconstruction(arrays: list[np.ndarray], out: Path, workers: int, iterations: int) -> None:
    """Important blocks all there and bit-exact; every received block bit-exact at its
    position; every missing block zero."""
    layout, levels = _levels(arrays)
    important = set(np.flatnonzero(levels == 0).tolist())
    for w in range(workers):
        for it in range(iterations):
            received = set(np.load(out / f"received-w{w}-it{it}.npy").tolist())
            assert important <= received, f"worker {w} it {it}: important blocks missing"
            with np.load(out / f"recon-w{w}-it{it}.npz") as z:
                recon = [z[f"arr_{i}"] for i in range(len(arrays))]
            masks = layout.missing_mask(dict.fromkeys(received))
            for a, r, m in zip(arrays, recon, masks, strict=True):
                assert r.dtype == np.float32
                assert np.array_equal(r[~m].view(np.uint32), a[~m].view(np.uint32))  # bit-exact
                assert not r[m].any()  # zero-filled


def test_priorities_drop_lowest_levels_first(net, tmp_path: Path) -> None:  # noqa: ANN001
    """Strict priority under a shared port rate (embedded target; on BMv2 configure
    falls back to the static partition, which grades the levels too)."""
    setup = QosSetup(port_rate=250, depth=8, top_depth=64, levels=LEVELS)
    run, arrays, out = _run(net, tmp_path, "prio", setup)
    assert run.ps["incomplete"] == 0
    _check_reconstruction(arrays, out, 3, 2)
    sent = run.sent_datagrams()
    recv = {int(k): v for k, v in run.ps["received_datagrams"].items()}
    lost = {lv: sent[lv] - recv.get(lv, 0) for lv in range(1, LEVELS + 1)}
    frac = {lv: lost[lv] / sent[lv] for lv in lost}
    assert sum(lost.values()) > 0, "the bottleneck was not congested"
    # strict priority: the lowest level loses most, the highest least
    assert frac[1] <= frac[2] <= frac[3], frac
    assert frac[3] - frac[1] > 0.3, frac
    if net[0].target == "bmv2":
        assert setup.queueing == "partition" and not run.queues  # no counters on BMv2
        return
    # the switch's per-queue counters agree with the receiver, level by level
    for lv in range(1, LEVELS + 1):
        q = run.queues[level_priority(lv, LEVELS)]
        assert q["enqueued"] == recv.get(lv, 0), (lv, q, recv)
        assert q["dropped"] == lost[lv], (lv, q, lost)
    # the reliable channel (highest queue) lost nothing at the switch
    assert run.queues[NB_QUEUES - 1]["dropped"] == 0


def test_without_priorities_drops_spread_evenly(net, tmp_path: Path) -> None:  # noqa: ANN001
    """The control: every DSCP on one queue, same load: no level is protected."""
    setup = QosSetup(port_rate=250, depth=8, top_depth=8, levels=LEVELS, priorities=False)
    run, arrays, out = _run(net, tmp_path, "fifo", setup, iterations=3)
    assert run.ps["incomplete"] == 0
    _check_reconstruction(arrays, out, 3, 3)  # TCP still delivers every important block
    sent = run.sent_datagrams()
    recv = {int(k): v for k, v in run.ps["received_datagrams"].items()}
    lost = {lv: sent[lv] - recv.get(lv, 0) for lv in range(1, LEVELS + 1)}
    frac = {lv: lost[lv] / sent[lv] for lv in lost}
    assert sum(lost.values()) / sum(sent[lv] for lv in lost) > 0.2, frac  # congested
    assert min(frac.values()) > 0.1, frac  # every level loses: none is protected
    assert max(frac.values()) - min(frac.values()) < 0.25, frac
    if net[0].target == "bmv2":  # one used priority: the partition gives it the whole rate
        assert setup.rates[0] == 250 - (NB_QUEUES - 1) * UNUSED_QUEUE_PPS
        return
    used = {p for p, c in run.queues.items() if c["enqueued"] or c["dropped"]}
    assert used == {0}  # a single queue carried everything


def test_gradctl_qos_show_and_set(net, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    from controller.cli import main as gradctl

    network, topo, _ = net
    if network.target == "bmv2":
        pytest.skip("gradctl qos show reads per-queue counters and the shared port rate, embedded-target "
                    "extensions that BMv2's runtime CLI does not have")
    configure(network, topo, QosSetup(port_rate=250, depth=8, levels=LEVELS))
    port = topo.port(SWITCH, PS_HOST)
    assert gradctl(["qos", "set", "star:4", "--run-dir", str(network.run_dir), "-s", "s1", "--port", str(port),
                    "--priority", "6", "--rate", "123", "--depth", "9", "--dscp", "40=5"]) == 0
    capsys.readouterr()
    assert gradctl(["qos", "show", "star:4", "--run-dir", str(network.run_dir), "--port", str(port),
                    "--json"]) == 0
    data = json.loads(capsys.readouterr().out)["s1"]
    assert data["priority_queues"] == NB_QUEUES
    assert data["dscp_priority"]["40"] == 5 and data["dscp_priority"]["46"] == 7
    q = {d["priority"]: d for d in data["queues"]}
    assert (q[6]["rate_pps"], q[6]["depth"], q[6]["port_rate_pps"]) == (123, 9, 250)
    assert q[7]["rate_pps"] is None and q[0]["depth"] == 8
    assert gradctl(["qos", "set", "star:4", "--run-dir", str(network.run_dir), "-s", "s1", "--port", "9",
                    "--rate", "1"]) == 2
    assert "no port 9" in capsys.readouterr().err


def _check_partition(net, tmp_path: Path, name: str) -> None:  # noqa: ANN001
    """The bottleneck cut into a static partition (important queue 123 pkt/s, levels 70,
    35, 17): every important block arrives, bit-exact, while the levels lose datagrams,
    the lowest the most; counted at the hosts (and at the switch where it counts)."""
    setup = QosSetup(port_rate=250, depth=8, top_depth=64, levels=LEVELS, queueing="partition")
    run, arrays, out = _run(net, tmp_path, name, setup)
    assert setup.queueing == "partition"
    rates = setup.rates
    assert sum(rates.values()) <= 250 and rates[NB_QUEUES - 1] == 123, rates  # half of 250 - 4 unused
    lv_rates = [rates[level_priority(lv, LEVELS)] for lv in range(1, LEVELS + 1)]
    assert lv_rates == sorted(lv_rates, reverse=True) and lv_rates[-1] > UNUSED_QUEUE_PPS, rates
    assert run.ps["incomplete"] == 0
    _check_reconstruction(arrays, out, 3, 2)
    # important blocks: every one the workers sent arrived (real counts, both ends)
    sent_important = sum(w["sent_blocks"][0] for w in run.workers)
    assert sent_important > 0
    assert run.ps["received_blocks"]["0"] == sent_important
    assert run.ps["missing_blocks"].get("0", 0) == 0
    sent = run.sent_datagrams()
    recv = {int(k): v for k, v in run.ps["received_datagrams"].items()}
    lost = {lv: sent[lv] - recv.get(lv, 0) for lv in range(1, LEVELS + 1)}
    frac = {lv: lost[lv] / sent[lv] for lv in lost}
    assert all(lost[lv] > 0 for lv in lost), (sent, recv)  # every level's queue overflowed
    assert frac[1] <= frac[2] <= frac[3], frac
    assert recv.get(1, 0) > recv.get(3, 0), recv  # level 1's larger share got more through
    if run.queues:  # embedded: the switch's own counters agree, queue by queue
        for lv in range(1, LEVELS + 1):
            q = run.queues[level_priority(lv, LEVELS)]
            assert (q["enqueued"], q["dropped"]) == (recv.get(lv, 0), lost[lv]), (lv, q)
        assert run.queues[NB_QUEUES - 1]["dropped"] == 0


def test_static_partition_protects_important_blocks(net, tmp_path: Path) -> None:  # noqa: ANN001
    """The static partition on this run's target (the embedded target's per-queue rates
    behave as BMv2's: no queue borrows another's idle share)."""
    _check_partition(net, tmp_path, "partition")


@pytest.mark.bmv2
def test_bmv2_priority_queues_protect_important_blocks(bmv2_net, tmp_path: Path) -> None:  # noqa: ANN001
    """Real BMv2 1.15 (--priority-queues 8, set_queue_rate/set_queue_depth per priority
    over simple_switch_CLI): important blocks all delivered, unimportant levels dropped."""
    _check_partition(bmv2_net, tmp_path, "partition-bmv2")


# the priority queues are checked packet by packet above (test_priorities_..., the static
# partition) and training over the switch in test_clipped_training_matches_an_offline_replay
@pytest.mark.long
@pytest.mark.slow
def test_training_over_the_congested_switch(net) -> None:  # noqa: ANN001
    """One epoch of real training per transport over the bottleneck: every run
    completes, learns, and the differentiated one never misses an important block."""
    network, topo, out = net
    eq = configure(network, topo, QosSetup(port_rate=300, depth=64, levels=LEVELS))
    runs = {}
    for mode in ("reliable", "unreliable", "differentiated"):
        runs[mode] = run_transport(network, topo, eq, out / "train", mode, ["--epochs", "1", "--batch", "64"],
                                   ["--quantile", "0.5"], ["--grace", "0.01"], max_time=120)
        assert runs[mode].ok, runs[mode].error
    steps = (1348 // 3) // 64
    for mode, r in runs.items():
        assert r.ps["iterations"] == steps and r.ps["incomplete"] == 0, mode
    rel, diff = runs["reliable"], runs["differentiated"]
    assert rel.accuracy > rel.ps["epochs"][0]["accuracy"] + 0.1
    assert diff.accuracy > diff.ps["epochs"][0]["accuracy"] + 0.1
    assert rel.ps["missing_blocks"] == {} and rel.ps["udp_bytes"] == 0
    assert "0" not in diff.ps["missing_blocks"]  # important blocks never missing
    assert runs["unreliable"].ps["tcp_bytes"] < rel.ps["tcp_bytes"] / 10


# ----------------------------------------------------------------------------- ablations


def _run_variant(net, name: str, mode: str, extra: list[str]):  # noqa: ANN001, ANN202
    """The fixed gradient sent by 3 workers in ``mode`` with worker options ``extra``,
    through the shared strict-priority bottleneck; the PS saves what it rebuilt."""
    network, topo, out = net
    eq = configure(network, topo, QosSetup(port_rate=250, depth=8, top_depth=64, levels=LEVELS))
    d = out / name
    d.mkdir()
    arrays = _gradient(d / "grad.npz")
    common = ["--gradient", str(d / "grad.npz"), "--iterations", "2", "--block-size", str(BLOCK)]
    wargs = ["--alpha", "0", "--quantile", str(QUANTILE), "--levels", str(LEVELS), "--udp-pps", "150", *extra]
    pargs = ["--grace", "0.3", "--linger", "0.5", "--out-dir", str(d / "ps-out")]
    run = run_transport(network, topo, eq, d, mode, common, wargs, pargs, max_time=120)
    assert run.ok, run.error
    assert run.ps["incomplete"] == 0
    return run, arrays, d / "ps-out"


def _check_blocks(arrays: list[np.ndarray], out: Path, expected: dict[tuple[int, int], set[int]],
                  exact: bool) -> None:
    """Per (worker, iteration): the expected important blocks all received (``exact``: and
    nothing else), every received block bit-exact, every other one zero."""
    layout = BlockLayout.of(arrays, BLOCK)
    for (w, it), important in expected.items():
        received = set(np.load(out / f"received-w{w}-it{it}.npy").tolist())
        assert important <= received, (w, it, sorted(important - received))
        if exact:
            assert received == important, (w, it, sorted(received - important))
        with np.load(out / f"recon-w{w}-it{it}.npz") as z:
            recon = [z[f"arr_{i}"] for i in range(len(arrays))]
        for a, r, m in zip(arrays, recon, layout.missing_mask(dict.fromkeys(received)), strict=True):
            assert np.array_equal(r[~m].view(np.uint32), a[~m].view(np.uint32))
            assert not r[m].any()


@pytest.mark.long  # an ablation of python -m bench differentiated-ablation
def test_important_only_sends_nothing_else(net) -> None:  # noqa: ANN001
    """Ablation "important only": the important blocks over TCP, no datagram at all; the
    PS rebuilds exactly those blocks, the others zero."""
    run, arrays, out = _run_variant(net, "important-only", "important", [])
    _, levels = _levels(arrays)
    important = set(np.flatnonzero(levels == 0).tolist())
    _check_blocks(arrays, out, {(w, it): important for w in range(3) for it in range(2)}, exact=True)
    assert sum(run.sent_datagrams()) == 0 and run.ps["udp_bytes"] == 0
    assert all(w["sent_blocks"] == [2 * len(important), 0, 0, 0] for w in run.workers)  # 2 iterations


@pytest.mark.long  # an ablation of python -m bench differentiated-ablation
def test_random_importance_and_adaptive_share(net) -> None:  # noqa: ANN001
    """Ablations "random importance" (as many important blocks as the quantile gives,
    drawn by each worker's seeded generator) and "adaptive share" (the fewest blocks
    carrying the share of the total contribution): the PS gets exactly those blocks
    reliably, bit-exact, every iteration."""
    from hosts.differentiated.blocks import classify_random, share_threshold

    layout, levels = _levels(arrays := _gradient(net[2] / "ref.npz"))
    n = int((levels == 0).sum())
    _, arrays, out = _run_variant(net, "random", "differentiated", ["--importance", "random"])
    expected = {}
    for w in range(3):
        rng = np.random.default_rng([0, w, 0xD1FF])  # the worker's: --seed 0, its rank
        for it in range(2):
            lv = classify_random(len(layout), n, LEVELS, rng)
            expected[(w, it)] = set(np.flatnonzero(lv == 0).tolist())
            assert len(expected[(w, it)]) == n
    assert expected[(0, 0)] != expected[(1, 0)]  # really drawn per worker
    _check_blocks(arrays, out, expected, exact=False)

    run, arrays, out = _run_variant(net, "share", "differentiated", ["--share", "0.5"])
    c = Contribution(len(layout), alpha=0.0).update(layout.split(arrays))
    important = set(np.flatnonzero(classify(c, QUANTILE, LEVELS, cut=share_threshold(c, 0.5)) == 0).tolist())
    assert c[sorted(important)].sum() >= 0.5 * c.sum() > c[sorted(important)[1:]].sum()  # the fewest
    _check_blocks(arrays, out, {(w, it): important for w in range(3) for it in range(2)}, exact=False)
    assert run.ps["received_blocks"]["0"] == 3 * 2 * len(important)


def test_clipped_training_matches_an_offline_replay(net) -> None:  # noqa: ANN001
    """The stability fix (PS ``--clip``): two steps of real all-reliable training through
    the switch end with exactly the model of an offline replay of the same gradients,
    averaged and capped at the clip norm (weights hash equal, bit for bit)."""
    import torch

    from hosts import training as tr
    from hosts.differentiated.ps import _norm
    from hosts.trainer import weights_hash

    network, topo, out = net
    eq = configure(network, topo, QosSetup(port_rate=300, depth=64, levels=LEVELS))
    clip, lr, steps, batch = 0.05, 0.5, 2, 64
    run = run_transport(network, topo, eq, out / "clip", "reliable",
                        ["--epochs", "1", "--batch", str(batch), "--max-steps", str(steps), "--lr", str(lr)],
                        [], ["--grace", "0.01", "--clip", str(clip), "--no-eval"], max_time=120)
    assert run.ok, run.error
    torch.set_num_threads(1)
    data, model = tr.load_digits_split(0), tr.make_model(0, 8)
    layout = BlockLayout.of(tr.parameter_arrays(model), 64)
    shards = [tr.worker_shard(data, r, 3) for r in range(3)]
    order = [tr.batches(*shards[r], batch, 0, seed=r) for r in range(3)]  # seed * 1000 + rank
    factors = []
    for step in range(steps):
        agg = [np.zeros(s, dtype=np.float32) for s in layout.shapes]
        for r in range(3):
            g = tr.compute_gradients(model, *order[r][step])
            for a, x in zip(agg, layout.reconstruct(dict(enumerate(layout.split(g)))), strict=True):
                a += x
        total = _norm(agg)
        assert total / 3 > clip  # the cap really acts
        factors.append(clip / total * 3)
        tr.apply_gradients(model, agg, lr, clip / total)
    assert run.ps["weights"] == weights_hash(model)
    assert [round(f, 6) for f in factors] == [u[4] for u in run.ps["update_norms"]]


def test_error_feedback_conserves_the_gradient_under_loss(net) -> None:  # noqa: ANN001
    """Error feedback through the congested switch with 20 % loss on the port to the PS:
    for every worker, over 4 iterations, the blocks the PS rebuilt carry exactly what was
    pending (gradient + residual), the ACKs settle the residual to the rest (the worker's
    final residual equals the replay's bit for bit), and delivered + residual equals the
    sum of the computed gradients element by element. Late blocks are not folded in."""
    from tests.test_differentiated_ef import replay

    network, topo, out = net
    port = topo.port(SWITCH, PS_HOST)
    eq = configure(network, topo, QosSetup(port_rate=250, depth=8, top_depth=64, levels=LEVELS),
                   loss={(SWITCH, port): 0.2})
    d, its = out / "ef-loss", 4
    d.mkdir()
    arrays = _gradient(d / "grad.npz")
    run = run_transport(network, topo, eq, d, "differentiated",
                        ["--gradient", str(d / "grad.npz"), "--iterations", str(its), "--block-size", str(BLOCK),
                         "--error-feedback"],
                        ["--alpha", "0", "--quantile", str(QUANTILE), "--levels", str(LEVELS), "--udp-pps", "150",
                         "--residual-out", str(d / "res-{rank}.npz")],
                        ["--grace", "0.2", "--linger", "0.5", "--out-dir", str(d / "ps-out")], max_time=120)
    configure(network, topo, QosSetup(port_rate=300, depth=64, levels=LEVELS))  # the loss off again
    assert run.ok, run.error
    assert run.ps["late_blocks"] == 0  # error feedback: nothing folded in late
    layout = BlockLayout.of(arrays, BLOCK)
    g = np.concatenate([a.ravel() for a in arrays]).astype(np.float64)
    resent = 0
    for w in range(3):
        residual = replay(layout, arrays, d / "ps-out", w, its, "sane", QUANTILE, only_important=False)
        with np.load(d / f"res-{w}.npz") as z:
            saved = np.concatenate([z[f"arr_{i}"].ravel() for i in range(len(arrays))])
        assert np.array_equal(saved.view(np.uint32), residual.view(np.uint32))
        delivered = np.zeros_like(g)
        got = []
        for it in range(its):
            with np.load(d / "ps-out" / f"recon-w{w}-it{it}.npz") as z:
                delivered += np.concatenate([z[f"arr_{i}"].ravel() for i in range(len(arrays))])
            got.append(set(np.load(d / "ps-out" / f"received-w{w}-it{it}.npy").tolist()))
        np.testing.assert_allclose(delivered + residual, its * g, rtol=1e-5, atol=1e-6)
        assert len(got[0]) < len(layout), "the loss and the bottleneck dropped nothing"
        # a block missed once and delivered later carries its residual: more than one gradient
        resent += sum(1 for j in set().union(*got[1:]) - got[0])
    assert resent > 0
