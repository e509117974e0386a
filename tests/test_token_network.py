"""Token-passing broadcast end to end: real training over NICs running nic.p4.

One ``token_lan(5)`` network (embedded target unless TARGET says otherwise) serves every
test: h1..h4 train (h1 holds model and data), h5 plays the intruder and the late node.
Each test redeploys the programs (fresh NIC registers) and runs ``hosts.token_node`` in
the hosts; the checks use what the nodes logged, what they dumped (every gradient they
sent and every sum they read from their NIC) and the NICs' counters.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from controller.token import TokenDeployment, token_lan
from controller.token_experiment import TokenRun, run_token

ROOT = Path(__file__).resolve().parent.parent
TRAIN = ["h1", "h2", "h3", "h4"]
T = 1.0  # wait unit t of the staggered timeouts

pytestmark = [pytest.mark.net, pytest.mark.slow]


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    if shutil.which("mnexec") is None:
        return "needs mnexec (Debian package mininet)"
    if not (ROOT / "p4src" / "build" / "nic.json").exists():
        return "p4src/build/nic.json missing (make p4)"
    return None


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[object, object, Path]]:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    from topologies.network import Network

    topo = token_lan(5, bw=1000)
    network = Network(topo, run_dir=str(tmp_path_factory.mktemp("token_net")), limit_bw=False)
    network.start()
    try:
        yield network, topo, tmp_path_factory.mktemp("token_runs")
    finally:
        network.stop()


def _common(out: Path, *extra: str, epochs: int = 1) -> list[str]:
    return ["--epochs", str(epochs), "--batch-size", "32", "--wait-unit", str(T), "--form-silence", "3",
            "--max-time", "150", "--save", str(out / "model.pt"), *extra]


def _run(net: tuple, name: str, *extra: str, epochs: int = 1, **kw: object) -> tuple[TokenRun, Path, object]:
    network, topo, base = net
    out = base / name
    out.mkdir()
    dep = TokenDeployment(topo, network.grpc_addresses())
    dep.deploy()
    run = run_token(network, topo, out, _common(out, *extra, epochs=epochs), hosts=TRAIN, timeout=200, **kw)
    run.counters = dep.read_counters()
    return run, out, dep


def _ok(run: TokenRun, hosts: list[str]) -> None:
    for h in hosts:
        r = run.node(h)
        assert r.returncode == 0, f"{h} exited {r.returncode}: {r.stderr[-800:]}"


def test_training_exact_sums_token_order_and_intruder(net) -> None:  # noqa: ANN001
    dump = net[2] / "exact-dump"
    late = ("h5", 0.5, ["--join-timeout", "8"])
    intruder = ("h5", 1.0, ["--intrude", "--duration", "4", "--count", "300"])
    run, _out, _dep = _run(net, "exact", "--dump", str(dump), "--cutoff", "1.0", epochs=2,
                           after_formation=[late, intruder])
    _ok(run, TRAIN)
    late_node = next(r for h, r in run.nodes.items() if h.startswith("h5-") and r.summary)
    assert late_node.returncode == 4  # the late node stays out of the formed network
    # every NIC's sum of every batch equals, element by element, the exact sum of the
    # fixed-point gradients its contributors sent
    assert _check_dump(dump) == 4 * 20  # 4 NICs x 20 batches (2 epochs of 10)
    seqs = {h: run.node(h).summary["node"] for h in TRAIN}
    assert sorted(seqs.values()) == [1, 2, 3, 4]
    # the token visits the members in order, and only the holder broadcasts
    holds = sorted((e["pass_no"], e["node"], e["sent"]) for _h, e in run.events("hold"))
    assert holds[0][:2] == (0, 1)  # s131: node 1 creates the token
    for (_p, a, _s), (_q, b, _t) in zip(holds, holds[1:], strict=False):
        assert b == a % 4 + 1
    assert len(run.events("grad")) == sum(1 for h in holds if h[2]) == 4 * 20
    # every batch had all four gradients, and the model learned
    assert all(e["n"] == 4 for _h, e in run.events("batch"))
    acc = [e["accuracy"] for h, e in run.events("batch") if h == "h1" and "accuracy" in e]
    assert acc[-1] > 0.5
    # the intruder's forged GRADs and TOKENs were dropped by the NICs (the sums above
    # are exact), and the late node's answers too
    c = run.counters
    assert c is not None
    assert c.total("member", "drops", "non_member") > 0
    assert c.total("member", "drops", "formation_closed") > 0


def _check_dump(d: Path) -> int:
    """Compare every dumped NIC sum with the exact sum of what its contributors sent."""
    sent = {}
    for f in d.glob("sent-b*-s*.npy"):
        b, s = (int(x) for x in f.stem[len("sent-b"):].split("-s"))
        sent[b, s] = np.load(f).astype(np.int64)
    n = 0
    for f in sorted(d.glob("sum-b*-s*.npy")):
        b, s = (int(x) for x in f.stem[len("sum-b"):].split("-s"))
        got = np.load(f)
        bitmaps = json.loads((d / f"bitmap-b{b}-s{s}.json").read_text())
        assert all(m == bitmaps[0] for m in bitmaps), f"batch {b} node {s}: fragments differ"
        contributors = [i for i in range(32) if bitmaps[0] >> i & 1]
        want = sum(sent[b, c] for c in contributors)
        want = ((want + 2**31) % 2**32 - 2**31)
        assert np.array_equal(got, want), f"batch {b} node {s}: sum differs"
        n += 1
    return n
