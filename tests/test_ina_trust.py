"""INA admission (docs/trust.md, "INA: admission"): hosts outside a job, and hosts that
spoof a member's addresses, change no result.

One fat-tree k=4 network (embedded target unless TARGET says otherwise). The job's PS is
``h1``, its workers ``h3..h10``; ``h2`` (under the PS's switch, ``s_d``) and ``h12``
(under a switch with no member) are intruders. They send forged frames built with the
scapy classes of ``wire/scapy_layers.py`` from inside their namespaces (``tests/ina_forge.py``):
GRADs before the workers send (with their own address, spoofing a worker's MAC and IP,
empty, multi-contributor), and RESULTs and CLEARs while the job runs; RESULTs and GRADs
with an IPv4 option or as IP fragments (which the switches never parse as INA: dropped
and counted in ``ingress_drops``). Every element of every worker's result must equal the
exact integer sum, and the drop counters of the intruders' first switches must show
every forged frame under its reason.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from controller.ina import ADMISSION_DROPS, REFUSED_DROPS, InaDeployment, InaJob, switch_ip
from controller.routing import port_mac
from experiments.ina import run_jobs
from tests.netenv import started_network
from topologies import fat_tree
from wire.ina import INA_VALUES, MsgType

ROOT = Path(__file__).resolve().parent.parent
PS, WORKERS, INTRUDERS = "h1", [f"h{i}" for i in range(3, 11)], ("h2", "h12")
VALUES = 1024  # 16 fragments
FORGED = [12345] * INA_VALUES  # what a forgery would add: never in an exact sum

pytestmark = [pytest.mark.net, pytest.mark.slow]


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any, Path]]:
    with started_network(tmp_path_factory, "ina_trust",
                         fat_tree(4, bw=50), "ina", neighbors=True) as n:
        yield n


def _grads(n: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(VALUES) * 0.05).astype(np.float32) for _ in range(n)]


def _edge(topo: Any, host: str) -> str:
    return topo.iface(host)["switch"]


def _frame(topo: Any, sender: str, dst_ip: str, ina: dict[str, int], *, as_host: str | None = None,
           values: list[int] | None = FORGED) -> dict[str, Any]:
    """A frame ``sender`` puts on its link, with the addresses of ``as_host`` (spoofing)
    or its own, to the MAC of its switch port (the switch routes it by IP)."""
    sw = _edge(topo, sender)
    src = as_host or sender
    return {"src_mac": topo.host_mac(src), "src_ip": topo.host_ip(src),
            "dst_mac": port_mac(topo.device_id(sw), topo.port(sw, sender)), "dst_ip": dst_ip,
            "ina": ina, "values": values}


def _grad(job: InaJob, rank: int, frag: int, **over: int) -> tuple[str, dict[str, int]]:
    """(destination, INA fields) of rank ``rank``'s GRAD for ``frag`` as its policy
    routes it; ``over`` changes fields (bitmap, count, worker_id)."""
    pol = job.policy_dict()
    tag = pol["tags"][rank][frag] if isinstance(pol["tags"], list) else 0
    fanin = pol["fanin"][str(tag)][frag] if tag else 0
    dst = pol["switch_ips"][str(tag)] if tag else pol["ps"]
    ina = {"msg_type": int(MsgType.GRAD), "job_id": job.job_id, "worker_id": rank,
           "fragment": frag, "tag": tag, "bitmap": 1 << rank, "count": 1, "fanin": fanin}
    return dst, {**ina, **over}


def _forger(network: Any, host: str, frames: list[dict[str, Any]], path: Path,
            until_eof: bool = False) -> Any:
    """Start ``tests/ina_forge.py`` in ``host`` with ``frames`` (written to ``path``)."""
    path.write_text(json.dumps(frames))
    argv = [sys.executable, "-m", "tests.ina_forge", "--iface", f"{host}-eth0",
            "--frames", str(path)]
    if until_eof:
        argv.append("--until-eof")
    return network.host(host).popen(argv, cwd=str(ROOT), stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _finish(proc: Any) -> int:
    """Close the forger's stdin (its stop signal), wait; the frames it sent."""
    try:
        out, err = proc.communicate(input=b"", timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err.decode(errors="replace")[-500:]
    return int(json.loads(out.decode().strip().splitlines()[-1])["sent"])


def _check_drops(dep: InaDeployment, expected: Counter) -> None:
    """Every admission counter (and ``ip_options``, ``ip_fragment``, ``src_spoof``...) of every switch equals
    ``expected[(switch, reason)]``."""
    got = dep.read_admission()
    names = (*ADMISSION_DROPS.values(), *REFUSED_DROPS)
    want = {s: {n: expected.get((s, n), 0) for n in names} for s in got}
    # not_ipv4 also counts the root namespace's own frames on BMv2's switch-side veths
    # (IPv6 neighbour discovery): the tests here forge none
    assert {s: {n: v for n, v in c.items() if n != "not_ipv4"} for s, c in got.items()} == \
        {s: {n: v for n, v in c.items() if n != "not_ipv4"} for s, c in want.items()}


@pytest.mark.parametrize("aggregate", [True, pytest.param(False, marks=pytest.mark.long)],
                         ids=["ina", "ps-baseline"])  # ps-baseline: the same forgeries at the PS host
def test_forged_grads_change_no_sum(net, aggregate: bool) -> None:  # noqa: ANN001
    """(a) an outsider's GRAD with its own address, (b) a GRAD spoofing a worker's MAC and
    IP from another port, an empty GRAD, an aggregate from a host, and a member's GRAD
    with another rank's bit: all sent once the PS listens and before the workers send
    (without admission the aggregators, or the PS, take the first copy of a
    contribution and the real one is a duplicate), all dropped at the sender's first
    switch, the sums exact."""
    network, topo, out = net
    job = InaJob.plan(topo, PS, WORKERS, 2, 1000.0, VALUES, job_id=3, aggregate=aggregate)
    dep = InaDeployment(topo, network.grpc_addresses(), [job])
    dep.deploy()
    frags = range(job.num_fragments)
    plan: dict[str, list[tuple[dict[str, Any], str]]] = {"h12": [], "h2": [], "h3": []}
    for f in frags:
        dst, ina = _grad(job, 0, f)  # (a) rank 0's contribution, h12's own address
        plan["h12"].append((_frame(topo, "h12", dst, ina), "not_member"))
        dst, ina = _grad(job, 0, f, bitmap=0b11, count=2)  # an "aggregate" from a host
        plan["h12"].append((_frame(topo, "h12", dst, ina), "host_aggregate"))
        dst, ina = _grad(job, 1, f)  # (b) h4 (rank 1) spoofed from h2's port
        plan["h2"].append((_frame(topo, "h2", dst, ina, as_host="h4"), "not_member"))
        dst, ina = _grad(job, 0, f, bitmap=0, count=0)  # empty, spoofing h3
        plan["h2"].append((_frame(topo, "h2", dst, ina, as_host="h3"), "empty"))
        dst, ina = _grad(job, 0, f, bitmap=0b10)  # h3 (rank 0) claims rank 1's bit
        plan["h3"].append((_frame(topo, "h3", dst, ina), "wrong_bit"))
    expected: Counter = Counter()

    def forge() -> None:  # every agent is up (the PS listens), no worker has sent yet
        for host, frames in plan.items():
            proc = _forger(network, host, [fr for fr, _ in frames],
                           out / f"grad-{aggregate}-{host}.json")
            assert _finish(proc) == len(frames)
            for _, reason in frames:
                expected[_edge(topo, host), reason] += 1

    (res,) = run_jobs(network, topo, [(job, _grads(len(WORKERS), 11))], out,
                      f"forged-grads-{aggregate}", before_go=forge)
    assert res.exact, f"{res.mismatches} elements differ from the exact sum"
    _check_drops(dep, expected)


def test_forged_results_and_clears_change_no_sum(net) -> None:  # noqa: ANN001
    """(c) RESULTs to every worker and to s_d and (d) CLEARs to every aggregating switch,
    spoofing the PS (from h2, beside it) and with an outsider's own address (h12),
    repeated while the job runs: all dropped at the sender's first switch."""
    network, topo, out = net
    job = InaJob.plan(topo, PS, WORKERS, 2, 1000.0, VALUES, job_id=4)
    assert job.sd is not None
    dep = InaDeployment(topo, network.grpc_addresses(), [job])
    dep.deploy()
    n_w = len(WORKERS)
    full = (1 << n_w) - 1
    sd_id = topo.device_id(job.sd)

    def forged(sender: str, as_host: str | None) -> list[dict[str, Any]]:
        frames = []
        for f in range(job.num_fragments):
            res = {"msg_type": int(MsgType.RESULT), "job_id": job.job_id, "fragment": f,
                   "bitmap": full, "count": n_w}
            frames += [_frame(topo, sender, topo.host_ip(w), res, as_host=as_host) for w in WORKERS]
            frames.append(_frame(topo, sender, switch_ip(sd_id), {**res, "tag": sd_id},
                                 as_host=as_host))
            for s in job.aggregating_switches:
                if s != job.sd:
                    sid = topo.device_id(s)
                    clr = {**res, "msg_type": int(MsgType.CLEAR), "tag": sid}
                    frames.append(_frame(topo, sender, switch_ip(sid), clr, as_host=as_host,
                                         values=None))
        return frames

    procs = {h: _forger(network, h, forged(h, PS if h == "h2" else None),
                        out / f"result-{h}.json", until_eof=True) for h in INTRUDERS}
    try:
        (res,) = run_jobs(network, topo, [(job, _grads(n_w, 12))], out, "forged-results")
    finally:
        sent = {h: _finish(p) for h, p in procs.items()}
    assert res.exact, f"{res.mismatches} elements differ from the exact sum"
    assert all(n > 0 for n in sent.values())
    _check_drops(dep, Counter({(_edge(topo, h), "not_server"): n for h, n in sent.items()}))


def test_forged_with_ip_options_or_as_fragments_change_no_sum(net) -> None:  # noqa: ANN001
    """RESULTs to every worker and GRADs to the PS spoofing rank 0 (whose bit they carry),
    all spoofing the agents' only check, the source address: from h2 with a 4-byte IPv4
    option (a receiving kernel strips it), from h12 as IP fragments (a kernel reassembles
    them). Neither is parsed as INA by a switch, so admission never sees them; every one
    is dropped at the sender's first switch, counted as ``ip_options`` or ``ip_fragment``,
    repeated while the job runs, and the sums stay exact."""
    network, topo, out = net
    job = InaJob.plan(topo, PS, WORKERS, 2, 1000.0, VALUES, job_id=5)
    dep = InaDeployment(topo, network.grpc_addresses(), [job])
    dep.deploy()
    n_w = len(WORKERS)
    ps_ip = topo.host_ip(PS)

    def forged(sender: str, how: dict[str, Any]) -> list[dict[str, Any]]:
        frames = []
        for f in range(job.num_fragments):
            res = {"msg_type": int(MsgType.RESULT), "job_id": job.job_id, "fragment": f,
                   "bitmap": (1 << n_w) - 1, "count": n_w}
            frames += [{**_frame(topo, sender, topo.host_ip(w), res, as_host=PS), **how}
                       for w in WORKERS]
            _, grad = _grad(job, 0, f, tag=0, fanin=0)
            frames.append({**_frame(topo, sender, ps_ip, grad, as_host=WORKERS[0]), **how})
        return frames

    how = {"h2": ({"ip_options": "01010101"}, "ip_options"), "h12": ({"fragsize": 128}, "ip_fragment")}
    procs = {h: _forger(network, h, forged(h, extra), out / f"unparsed-{h}.json", until_eof=True)
             for h, (extra, _) in how.items()}
    try:
        (res,) = run_jobs(network, topo, [(job, _grads(n_w, 13))], out, "forged-unparsed")
    finally:
        sent = {h: _finish(p) for h, p in procs.items()}
    assert res.exact, f"{res.mismatches} elements differ from the exact sum"
    assert all(n > 0 for n in sent.values())
    _check_drops(dep, Counter({(_edge(topo, h), how[h][1]): n for h, n in sent.items()}))
