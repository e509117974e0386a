"""Token broadcast of gradients longer than a NIC holds (docs/token.md, "Chunks").

A NIC sums at most 256 fragments x 128 = 32,768 values per step; a longer gradient goes
one chunk per token round. One ``token_lan(3)`` network (embedded target unless TARGET
says otherwise) serves both tests: a flat model of 70,000 values (3 chunks: 256, 256 and
35 fragments) whose gradients are given (``--gradient``), checked element by element
against the fixed-point sum computed here, and the harness's ``mlp`` (126,090 values,
4 chunks) trained for a few batches, every NIC sum checked against the gradients its
contributors sent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from controller.token import TokenDeployment, token_lan
from experiments.token import TokenRun, run_token
from tests.netenv import started_network
from wire.fixedpoint import quantize

HOSTS = ["h1", "h2", "h3"]
SCALE_BITS = 16

pytestmark = [pytest.mark.net, pytest.mark.slow]


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[object, object, Path]]:
    with started_network(tmp_path_factory, "token_chunks_net",
                         token_lan(3, bw=1000), "nic", "lan", limit_bw=False) as n:
        yield n


def _run(net: tuple, name: str, common: list[str], **kw: object) -> tuple[TokenRun, Path]:
    network, topo, base = net
    out = base / name
    out.mkdir(exist_ok=True)
    dep = TokenDeployment(topo, network.grpc_addresses())
    dep.deploy()
    run = run_token(network, topo, out / "logs", common, hosts=HOSTS, timeout=150, **kw)
    run.counters = dep.read_counters()
    for h in HOSTS:
        r = run.node(h)
        assert r.returncode == 0, f"{h} exited {r.returncode}: {r.stderr[-800:]}"
    return run, out


def _rounds(run: TokenRun) -> dict[tuple[int, int], set[int]]:
    """(batch, chunk) -> the nodes that broadcast in that step."""
    sent: dict[tuple[int, int], set[int]] = {}
    for _h, e in run.events("grad"):
        sent.setdefault((e["batch"], e["chunk"]), set()).add(e["node"])
    return sent


def _no_stale_or_duplicate(run: TokenRun) -> None:
    c = run.counters
    assert c is not None
    assert c.total("acc", "drops", "stale") == 0
    assert c.total("acc", "drops", "duplicate") == 0


def test_flat_70000_values_sum_exactly_in_three_chunks(net) -> None:  # noqa: ANN001
    out = net[2] / "flat"
    gdir, dump = out / "gradients", out / "dump"
    gdir.mkdir(parents=True)
    rng = np.random.default_rng(11)
    grads = [(rng.standard_normal(70_000) * 0.05).astype(np.float32) for _ in HOSTS]
    grads[0][-1] = 3.25  # the last value of the partial last fragment
    per_host = {}
    for i, h in enumerate(HOSTS):
        np.save(gdir / f"g{i}.npy", grads[i])
        per_host[h] = ["--gradient", str(gdir / f"g{i}.npy")]
    common = ["--epochs", "1", "--batches", "2", "--batch-size", "32", "--cutoff", "1.0",
              "--model", "hosts.training:flat_70000", "--scale-bits", str(SCALE_BITS),
              "--dump", str(dump), "--max-time", "120"]
    run, _ = _run(net, "flat", common, per_host=per_host)
    ready = [e for _h, e in run.events("ready")]
    assert all(e["chunks"] == 3 and e["frags"] == 547 for e in ready)
    # the sum computed here, independently of the nodes: every node's gradient quantized
    want = sum(quantize(g, SCALE_BITS, len(grads)).astype(np.int64) for g in grads)
    sums = sorted(dump.glob("sum-b*-s*.npy"))
    assert len(sums) == 3 * 2  # 3 nodes x 2 batches
    for f in sums:
        got = np.load(f)
        assert got.shape == (70_000,)
        assert np.array_equal(got, want), f"{f.name}: {np.count_nonzero(got != want)} values differ"
        bitmaps = json.loads((dump / f.name.replace("sum-", "bitmap-").replace(".npy", ".json")).read_text())
        assert len(bitmaps) == 547 and set(bitmaps) == {0b1110}
    # one token round per chunk, every node broadcasting its slice of the gradient
    rounds = _rounds(run)
    assert sorted(rounds) == [(b, c) for b in (0, 1) for c in (0, 1, 2)]
    assert all(s == {1, 2, 3} for s in rounds.values())
    frames = {(e["chunk"], e["frames"]) for _h, e in run.events("grad")}
    assert frames == {(0, 256), (1, 256), (2, 35)}
    # one update per batch, the same on every node
    batches = [e for _h, e in run.events("batch")]
    assert sorted((e["node"], e["batch"], e["n"]) for e in batches) == [
        (s, b, 3) for s in (1, 2, 3) for b in (0, 1)]
    summaries = [run.node(h).summary for h in HOSTS]
    assert len({s["weights"] for s in summaries}) == 1
    assert all(s["batch"] == 2 and s["stats"]["batches"] == 2 for s in summaries)
    assert all(s["stats"]["grads_sent"] == 2 and s["stats"]["grad_frames"] == 2 * 547 for s in summaries)
    _no_stale_or_duplicate(run)


@pytest.mark.long  # the chunked exact sums: test_flat_70000_values_sum_exactly_in_three_chunks
def test_mlp_trains_in_four_chunks_with_exact_sums(net) -> None:  # noqa: ANN001
    dump = net[2] / "mlp-dump"
    common = ["--epochs", "1", "--batches", "3", "--batch-size", "32", "--cutoff", "1.0",
              "--model", "mlp", "--seed", "1", "--batch-seed", "1", "--lr", "0.2",
              "--dump", str(dump), "--max-time", "120"]
    run, _ = _run(net, "mlp", common)
    assert all(e["chunks"] == 4 and e["values"] == 126_090 for _h, e in run.events("ready"))
    # every NIC sum equals, element by element, the exact int32 sum of what its
    # contributors sent (their own quantized gradients, dumped before sending)
    sent = {}
    for f in dump.glob("sent-b*-s*.npy"):
        b, s = (int(x) for x in f.stem[len("sent-b"):].split("-s"))
        sent[b, s] = np.load(f).astype(np.int64)
    assert sorted(sent) == [(b, s) for b in range(3) for s in (1, 2, 3)]
    sums = sorted(dump.glob("sum-b*-s*.npy"))
    assert len(sums) == 3 * 3
    for f in sums:
        b, s = (int(x) for x in f.stem[len("sum-b"):].split("-s"))
        want = sent[b, 1] + sent[b, 2] + sent[b, 3]
        want = (want + 2**31) % 2**32 - 2**31
        got = np.load(f)
        assert got.shape == (126_090,) and np.array_equal(got, want), f"batch {b} node {s}"
    assert sorted(_rounds(run)) == [(b, c) for b in range(3) for c in range(4)]
    summaries = [run.node(h).summary for h in HOSTS]
    assert len({s["weights"] for s in summaries}) == 1  # bit-identical models
    assert all(s["stats"]["batches"] == 3 and s["stats"]["incomplete_frags"] == 0 for s in summaries)
    _no_stale_or_duplicate(run)
