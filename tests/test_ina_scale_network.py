"""INA at scale, end to end (docs/ina.md, "Workers per job" and "Block floating point").

One leaf-spine network (2 spines, 3 leaves of 14 hosts: 42 hosts; embedded target unless
TARGET says otherwise) serves both tests:

- 40 workers, more than the old 32-bit bitmap held, with 5 % loss on every port of the
  workers' leaves: every element of every worker's result equals the exact integer sum;
- block floating point with the same loss: a gradient whose blocks span 2^-20 to 2^20
  (no single fixed-point scale holds it) comes back as the exact integer sums at the
  agreed exponents, within the documented normwise error bound of the float sum.

The long tier (``make test-long``) adds the 64-worker run (``python -m bench
ina-scale``: 64 worker processes are too many for the suite's time) and the k=8
fat-tree preset (``make run-scale``: 80 switches, 127 workers).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from controller.ina import InaDeployment, InaJob
from experiments.ina import run_jobs
from tests.netenv import net_skip_reason, started_network
from topologies import leaf_spine
from wire.fixedpoint import (
    FixedPointOverflow,
    bfp_dequantize,
    bfp_error_bound,
    bfp_reference,
    num_fragments,
    quantize,
)
from wire.ina import INA_VALUES

pytestmark = [pytest.mark.net, pytest.mark.slow]


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[object, object, Path]]:
    with started_network(tmp_path_factory, "ina_scale",
                         leaf_spine(2, 3, 14, bw=50), "ina", neighbors=True) as n:
        yield n


def _lossy_leaves(topo, workers: list[str]) -> dict[tuple[str, int], float]:  # noqa: ANN001
    """5 % loss on every port of the workers' leaf switches: GRADs up, RESULTs down."""
    leaves = {topo.iface(w)["switch"] for w in workers}
    return {(s, p): 0.05 for s in leaves for p in topo.ports(s)}


def spanning_gradients(n_w: int, blocks: int, seed: int) -> list[np.ndarray]:
    """Block ``b`` around ``2^(40 b/(blocks-1) - 20)``: the gradient spans 2^-20..2^20."""
    rng = np.random.default_rng(seed)
    mag = np.repeat(2.0 ** np.linspace(-20, 20, blocks), INA_VALUES)
    return [(mag * rng.choice([-1, 1], mag.size) * rng.uniform(2**-4, 1, mag.size))
            .astype(np.float32) for _ in range(n_w)]


@pytest.mark.long  # a second size of the BFP test under loss
def test_40_workers_exact_under_loss(net) -> None:  # noqa: ANN001
    network, topo, out = net
    workers = [f"h{i}" for i in range(3, 43)]  # 40 ranks: bits 0..39
    assert len(workers) == 40
    values = 4 * INA_VALUES
    job = InaJob.plan(topo, "h1", workers, 2, 1000.0, values, job_id=1)
    assert job.placement is not None
    InaDeployment(topo, network.grpc_addresses(), [job],
                  loss=_lossy_leaves(topo, workers)).deploy()
    rng = np.random.default_rng(40)
    grads = [(rng.standard_normal(values) * 0.05).astype(np.float32) for _ in workers]
    (res,) = run_jobs(network, topo, [(job, grads)], out, "w40", timeout=0.5, window=8)
    assert res.exact, f"{res.mismatches} elements differ from the exact sum"
    assert res.retransmissions > 0  # the loss really happened and was repaired


@pytest.mark.long  # ~27 s; the suite keeps block floating point under loss on loopback (test_ina_native)
def test_bfp_spanning_range_under_loss(net) -> None:  # noqa: ANN001
    network, topo, out = net
    workers = [f"h{i}" for i in range(3, 15)] + [f"h{i}" for i in range(17, 29)]  # 2 leaves
    n_w, blocks = len(workers), 41
    grads = spanning_gradients(n_w, blocks, 7)
    with pytest.raises(FixedPointOverflow):  # plain fixed point at its default scale refuses
        quantize(grads[0], 16, n_w)
    job = InaJob.plan(topo, "h1", workers, 2, 1000.0, grads[0].size, job_id=2,
                      number_format="bfp")
    assert job.placement is not None and job.num_fragments == blocks + min(32, blocks)
    InaDeployment(topo, network.grpc_addresses(), [job],
                  loss=_lossy_leaves(topo, workers)).deploy()
    (res,) = run_jobs(network, topo, [(job, grads)], out, "bfp", timeout=0.5)
    # every worker's int sums equal the exact sums at the agreed exponents
    assert res.exact, f"{res.mismatches} elements differ from the exact BFP sums"
    assert res.retransmissions > 0
    sums, e = bfp_reference(grads, n_w)
    got = bfp_dequantize(sums.astype(np.int32), e, n_w)
    # and those are within the documented bound of the float sum, block by block
    exact = np.sum([g.astype(np.float64) for g in grads], axis=0)
    err = np.abs(got.astype(np.float64) - exact).reshape(num_fragments(exact.size), -1)
    peak = np.max([np.abs(g).reshape(err.shape).max(axis=1) for g in grads], axis=0)
    rel = err.max(axis=1) / peak
    assert rel.max() <= bfp_error_bound(n_w), rel.max()
    # the smallest blocks kept their precision (plain fixed point at S=16 would zero them)
    assert np.count_nonzero(got[:INA_VALUES]) == INA_VALUES
    # a worker's own --out-int file holds those sums, element by element
    w0 = np.load(out / "bfp-job2" / "out-0.npy")
    assert np.array_equal(w0, sums[: w0.size].astype(np.int32))


@pytest.mark.long
def test_64_workers_exact_under_loss_through_the_bench() -> None:
    """The issue's 64 workers, 5 % loss on every port of their leaves, fixed point and
    block floating point, each element checked against the exact sums (``run_jobs``):
    ``python -m bench ina-scale`` on its own 70-host leaf-spine (long tier: 64 worker
    processes)."""
    if net_skip_reason("ina"):
        pytest.skip(net_skip_reason("ina") or "")
    from bench.ina_scale_bench import main as scale_main

    assert scale_main(["--workers", "64", "--loss", "0.05", "--max-time", "300"]) == 0


@pytest.mark.long
def test_k8_fat_tree_preset(tmp_path: Path) -> None:
    """``make run-scale``: 80 switches, 128 hosts, INA with 127 workers and its PS
    baseline, both exact; the summary has both bounds and what the emulation cost."""
    import json

    if net_skip_reason("ina"):
        pytest.skip(net_skip_reason("ina") or "")
    from experiments.ina import main as ina_main

    assert ina_main(["--preset", "k8", "--out-dir", str(tmp_path)]) == 0
    (path,) = tmp_path.glob("ina-*/summary.json")
    s = json.loads(path.read_text())
    assert len(s["workers"]) == 127 and s["resources"]["switches"] == 80
    assert all(r["exact"] and r["split"]["line_rate_bound_s"] > 0 for r in s["runs"])
    assert s["resources"]["switch_processes"] >= 1 and s["resources"]["bring_up_s"] > 0
