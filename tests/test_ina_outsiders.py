"""A host outside an INA job, through the emulated network (docs/trust.md).

One star network (``s1`` with ``h1..h6``; embedded target unless TARGET says otherwise):
job 1 (PS ``h1``, workers ``h2`` ``h3``, aggregated in ``s1``), the capacity probe's job
2 (PS ``h4``, worker ``h5``), and ``h6`` in no job. From ``h6``'s namespace:

* forged RESULTs (spoofing the PS) and GRADs (spoofing rank 0) in every other encoding
  a host's kernel might still deliver (``tests/ina_forge.py`` ``ENCODINGS``: VLAN tags,
  IPv6, zero or wrong checksums, cut frames, padding, trailing bytes, wrong IP total
  lengths), repeated while the job runs: every result exact, every frame counted at
  ``s1`` under its reason (``ingress_drops`` for what the parser did not read whole,
  admission for the rest);
* a flood of GRADs for every aggregator index and for the job's own fragments: none
  holds an aggregator (a fan-in-1 probe gets all 1,024), the job aggregates every
  fragment in the switch, exactly;
* with admission broken on purpose (``h6``'s port installed as switch-facing), RESULTs
  and GRADs with the PS's and a worker's source address reach the agents, which refuse
  them by the job's stamp (``refused_stamp``); with the agents' stamp check off, the
  same forgeries change the sums (the check is what keeps them exact).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from controller.ina import ADMISSION_DROPS, UNPARSED_DROPS, InaDeployment, InaJob, switch_ip
from controller.ina.admission import InaAdmission
from controller.routing import port_mac
from tests.ina_forge import ENCODINGS
from tests.ina_probe import NUM_AGGREGATORS, probe_counts, run_tool
from tests.netenv import started_network
from wire.ina import INA_VALUES, MsgType

ROOT = Path(__file__).resolve().parent.parent
JOB_VALUES = 512  # 8 fragments
FORGED = [12345] * INA_VALUES
OUTSIDER = "h6"

pytestmark = [pytest.mark.net, pytest.mark.slow]

# what s1 counts for each encoding of a forged RESULT / GRAD from a host port
NOT_PARSED = {"vlan0": "not_ipv4", "vlan5": "not_ipv4", "qinq": "not_ipv4", "ipv6": "not_ipv4",
              "short_header": "parser_error"}


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any, Path]]:
    from topologies import star
    with started_network(tmp_path_factory, "ina_outsiders",
                         star(6, bw=100), "ina", neighbors=True) as n:
        yield n


def _deploy(network: Any, topo: Any) -> tuple[InaDeployment, InaJob]:
    job = InaJob.plan(topo, "h1", ["h2", "h3"], 0, 1000.0, JOB_VALUES, job_id=1)
    probe = InaJob.plan(topo, "h4", ["h5"], 0, 1000.0, INA_VALUES, job_id=2)
    assert job.aggregating_switches == ["s1"]
    dep = InaDeployment(topo, network.grpc_addresses(), [job, probe],
                        aggregator_timeout_us=60_000_000)  # never taken over in a test
    dep.deploy()
    assert job.stamp and probe.stamp  # drawn by the deployment
    return dep, job


def _grads(n: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(JOB_VALUES) * 0.05).astype(np.float32) for _ in range(n)]


def _frame(topo: Any, dst_ip: str, ina: dict[str, int], as_host: str, **extra: Any) -> dict[str, Any]:
    """A frame h6 puts on its link with ``as_host``'s MAC and IP, to s1's port MAC."""
    return {"src_mac": topo.host_mac(as_host), "src_ip": topo.host_ip(as_host),
            "dst_mac": port_mac(topo.device_id("s1"), topo.port("s1", OUTSIDER)),
            "dst_ip": dst_ip, "ina": ina, "values": FORGED, **extra}


def _forgeries(topo: Any, job: InaJob, **extra: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(RESULTs to both workers spoofing the PS, GRADs to the PS spoofing rank 0), one
    per fragment, with ``extra`` fields (an encoding)."""
    n_w = len(job.workers)
    results, grads = [], []
    for f in range(job.num_fragments):
        res = {"msg_type": int(MsgType.RESULT), "job_id": job.job_id, "fragment": f,
               "bitmap": (1 << n_w) - 1, "count": n_w}
        results += [_frame(topo, topo.host_ip(w), res, job.ps, **extra) for w in job.workers]
        grad = {"msg_type": int(MsgType.GRAD), "job_id": job.job_id, "worker_id": 0,
                "fragment": f, "tag": 0, "bitmap": 1, "count": 1}
        grads.append(_frame(topo, topo.host_ip(job.ps), grad, job.workers[0], **extra))
    return results, grads


def _forger(network: Any, frames: list[dict[str, Any]], path: Path, until_eof: bool) -> Any:
    path.write_text(json.dumps(frames))
    argv = [sys.executable, "-m", "tests.ina_forge", "--iface", f"{OUTSIDER}-eth0",
            "--frames", str(path)]
    if until_eof:
        argv.append("--until-eof")
    return network.host(OUTSIDER).popen(argv, cwd=str(ROOT), stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _finish(proc: Any) -> dict[str, int]:
    """Close the forger's stdin (its stop signal), wait; ``{"sent", "rounds"}``."""
    try:
        out, err = proc.communicate(input=b"", timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err.decode(errors="replace")[-500:]
    return json.loads(out.decode().strip().splitlines()[-1])


def _drops(dep: InaDeployment) -> dict[str, int]:
    """s1's admission drops and the unparsed ``ingress_drops`` reasons."""
    return dep.read_admission()["s1"]


def _capacity(network: Any, topo: Any) -> dict[str, int]:
    """Aggregators job 2 can get at s1: h5 probes every index, its PS h4 counts."""
    sid = topo.device_id("s1")
    return probe_counts(network, topo, "h4", "h5", "--switch-ip", switch_ip(sid),
                        "--tag", str(sid), "--job", "2")


def test_forged_in_every_other_encoding_change_no_sum(net) -> None:  # noqa: ANN001
    from experiments.ina import run_jobs

    network, topo, out = net
    dep, job = _deploy(network, topo)
    before = _drops(dep)
    frames, per_round = [], Counter()
    for enc in ENCODINGS:
        results, grads = _forgeries(topo, job, encoding=enc)
        frames += results + grads
        per_round[NOT_PARSED.get(enc, "not_server")] += len(results)
        per_round[NOT_PARSED.get(enc, "not_member")] += len(grads)
    holder: dict[str, Any] = {}

    def forge() -> None:  # from before the workers send until the job is done
        holder["proc"] = _forger(network, frames, out / "encodings.json", until_eof=True)

    try:
        (res,) = run_jobs(network, topo, [(job, _grads(2, 21))], out, "encodings", before_go=forge)
    finally:
        sent = _finish(holder["proc"]) if "proc" in holder else None
    assert res.exact, f"{res.mismatches} elements differ from the exact sum"
    assert sent is not None and sent["rounds"] >= 1 and sent["sent"] == sent["rounds"] * len(frames)
    got = _drops(dep)
    delta = {n: got[n] - before[n] for n in (*ADMISSION_DROPS.values(), *UNPARSED_DROPS)}
    want = {n: per_round.get(n, 0) * sent["rounds"] for n in delta}
    # not_ipv4 may also count frames the root namespace's kernel sends itself on the
    # switch-side veths (IPv6 neighbour discovery, seen by BMv2's capture): at least ours
    assert delta.pop("not_ipv4") >= want.pop("not_ipv4") > 0
    assert delta == want


def test_an_outsiders_grad_flood_holds_no_aggregator(net) -> None:  # noqa: ANN001
    from experiments.ina import run_jobs

    network, topo, out = net
    dep, job = _deploy(network, topo)
    before = _drops(dep)
    sid = topo.device_id("s1")
    args = ["--switch-ip", switch_ip(sid), "--tag", str(sid), "--job", "1", "--bit", "0"]
    # every aggregator index, then the job's own fragment numbers, as rank 0 (h6's own
    # address: the tool sends from a UDP socket)
    a = run_tool(network, OUTSIDER, "occupy", *args)
    b = run_tool(network, OUTSIDER, "occupy", *args, "--fragments", f"0:{job.num_fragments}",
              "--seed", "7")
    cap = _capacity(network, topo)
    # no probe found its aggregator busy (a held one passes the probe on); a probe lost
    # on a loaded machine (BMv2's queues) answers nothing either way
    assert cap["passed_on"] == 0 and cap["aggregated"] + cap["unanswered"] == NUM_AGGREGATORS
    assert cap["unanswered"] <= NUM_AGGREGATORS // 20, cap
    (res,) = run_jobs(network, topo, [(job, _grads(2, 22))], out, "flood")
    assert res.exact, f"{res.mismatches} elements differ from the exact sum"
    assert res.ps_packets["partial_in"] == job.num_fragments  # every fragment in the switch
    got = _drops(dep)
    assert got["not_member"] - before["not_member"] == a["sent"] + b["sent"] == \
        NUM_AGGREGATORS + job.num_fragments


def _trust_port(network: Any, topo: Any, dep: InaDeployment) -> None:
    """Break admission on purpose: s1 takes h6's port for a switch-facing one."""
    from controller.deploy import Deployment

    async def run() -> None:
        async with Deployment(topo, network.grpc_addresses(), dep.programs, set_pipeline=False) as d:
            adm = d.block("s1", InaAdmission)
            await d.session("s1").write(adm.fabric_port_entries([topo.port("s1", OUTSIDER)]))

    asyncio.run(run())


@pytest.mark.parametrize("check", [True, False], ids=["stamp-checked", "stamp-off"])
def test_agents_refuse_what_admission_let_through_by_its_stamp(net, check: bool) -> None:  # noqa: ANN001
    from experiments.ina import run_jobs

    network, topo, out = net
    dep, job = _deploy(network, topo)
    _trust_port(network, topo, dep)
    if not check:
        job.stamp = 0  # the policy the agents read carries no stamp: they do not check
    results, grads = _forgeries(topo, job)

    def forge() -> None:  # every agent listens, no worker has sent yet
        frames = grads + results
        assert _finish(_forger(network, frames, out / f"stamp-{check}.json", False))["sent"] == len(frames)

    grads_in = _grads(2, 23)
    if check:
        (res,) = run_jobs(network, topo, [(job, grads_in)], out, "stamp-checked", before_go=forge)
        assert res.exact, f"{res.mismatches} elements differ from the exact sum"
        assert res.ps_packets["refused_stamp"] == len(grads)  # every forged GRAD, queued
        assert res.worker_refused_stamp == len(results)  # every forged RESULT, queued
        return
    # unchecked, nothing else stands between the forgeries and the sums: the workers
    # take the forged RESULTs as soon as they have sent (every value 12345, never the
    # exact sum) and stop; the PS, holding forged GRADs, either never completes a
    # fragment or (its loss recovery asking the stopped workers again) completes wrong
    from experiments.ina import _expected_sum

    try:
        (res,) = run_jobs(network, topo, [(job, grads_in)], out, "stamp-off", before_go=forge,
                          max_time=10.0)
        assert not res.exact
    except RuntimeError as e:
        assert "not complete" in str(e)
    expected = _expected_sum(job, grads_in)
    for rank in range(len(job.workers)):
        got = np.load(out / f"stamp-off-job{job.job_id}" / f"out-{rank}.npy")[: expected.size]
        # wrong at every rank: forged RESULTs taken, or sums of forged GRADs
        assert np.count_nonzero(got != expected) > 0
