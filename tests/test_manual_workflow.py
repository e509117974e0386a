"""The README's manual workflow ("A network you keep"), run line by line as a user would.

The commands are parsed from the README's code block, so the document and this test
cannot drift apart. ``gradctl`` on PATH runs this checkout's control plane. Checked on
top of every command succeeding: the held network's bandwidth was planned on, job 1's
and job 2's aggregation really happened in the switches, the ``--loss`` entry of
``net up`` survives both INA deploys and the undeploy, and the undeploy leaves job 1.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.netenv import ROOT, TARGET, net_skip_reason

pytestmark = pytest.mark.net

SECTION = "## A network you keep: the manual workflow"


def readme_workflow() -> list[str]:
    """The command lines of the README's manual-workflow code block."""
    text = (ROOT / "README.md").read_text()
    block = text[text.index(SECTION):].split("```\n", 2)[1]
    return [ln for ln in block.splitlines() if ln.strip()]


def test_readme_block_parses() -> None:
    lines = readme_workflow()
    assert lines[0].startswith("D=$(gradctl net up ")
    assert lines[-1] == "gradctl net down $D"
    assert any("gradctl ina undeploy" in ln for ln in lines)


@pytest.fixture
def gradctl_path(tmp_path: Path) -> dict[str, str]:
    """An environment whose ``gradctl`` is this checkout's."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "gradctl"
    exe.write_text(f"#!/bin/sh\nPYTHONPATH={ROOT} exec {sys.executable} -m controller.cli \"$@\"\n")
    exe.chmod(0o755)
    env = dict(os.environ, PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}", TARGET=TARGET)
    return env


def _link_loss_entries(run_dir: str, switch: str, program: Path | None = None) -> list[tuple[int, int]]:
    """(port, drop threshold) of every ``link_loss`` entry with a loss rate on ``switch``
    (running ``program``, default forward.p4)."""
    from finsy import P4TableEntry

    from controller.cli import network_topology
    from controller.deploy import Deployment, LinkEmulation, addresses_from_run_dir

    class A:
        topo = None

    A.run_dir = run_dir  # type: ignore[attr-defined]
    topo = network_topology(A)  # type: ignore[arg-type]

    async def run() -> list[tuple[int, int]]:
        async with Deployment(topo, addresses_from_run_dir(topo, run_dir), program=program,
                              set_pipeline=False) as dep:
            le = dep.block(switch, LinkEmulation)
            out = []
            for e in await dep.session(switch).read(P4TableEntry(le.name("link_loss"))):
                if e.action is not None and e.action.name == "set_loss_rate":
                    port = dict(e.match)["egress_port"]
                    out.append((int(port), int(e.action.args["drop_threshold"])))
            return out

    return asyncio.run(run())


@pytest.mark.skipif(net_skip_reason("forward", "ina") is not None,
                    reason=net_skip_reason("forward", "ina") or "")
def test_manual_workflow(gradctl_path: dict[str, str], tmp_path: Path) -> None:
    lines = readme_workflow()
    body, down = lines[:-1], lines[-1]
    state = tmp_path / "D"
    # one shell, as a user's: $D carries from line to line; stop at the first failure
    script = "set -e\n" + "\n".join(body) + f'\necho "$D" > {state}\n'
    r = subprocess.run(["bash", "-c", script], env=gradctl_path, cwd=tmp_path,
                       capture_output=True, text=True, timeout=900)
    run_dir = state.read_text().strip() if state.exists() else ""
    if not run_dir:
        m = re.search(r"/tmp/gradnet-\w+", r.stdout + r.stderr)
        run_dir = m.group(0) if m else ""
    try:
        assert r.returncode == 0, f"README workflow failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        out = r.stdout
        # planned on the held network's 20 Mbit/s (net up --bw 20), not the topology's 100
        assert "γ = 20.00 Mbit/s per worker" in out
        assert "with the jobs deployed before: 1" in out
        assert "job 1: 64/64 fragments" in out and "job 2: 10/10 fragments" in out
        # the loss entry of net up --loss s1:1=0.01 outlived two ina deploys and an undeploy
        from controller.deploy import loss_threshold

        assert (1, loss_threshold(0.01)) in _link_loss_entries(run_dir, "s1")
        jobs = json.loads((Path(run_dir) / "ina-jobs.json").read_text())["jobs"]
        assert [j["job_id"] for j in jobs] == [1]
        assert not (Path(run_dir) / "ina-job2.policy.json").exists()
        # the switches aggregated: partial aggregates reached each job's PS
        for job in (1, 2):
            m = re.search(rf"job {job}: \d+/\d+ fragments, \d+ packets in \((\d+) partial", out)
            assert m and int(m.group(1)) > 0, out[-2000:]
    finally:
        if run_dir:
            d = subprocess.run(["bash", "-c", down], env=dict(gradctl_path, D=run_dir),
                               capture_output=True, text=True, timeout=120)
            assert d.returncode == 0, d.stderr


def _sh(cmd: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", cmd], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.skipif(net_skip_reason("ndn", "nic", "lan") is not None,
                    reason=net_skip_reason("ndn", "nic", "lan") or "")
def test_run_dir_names_the_network_for_every_group(gradctl_path: dict[str, str],
                                                   tmp_path: Path) -> None:
    """``gradctl ndn``, ``qos`` and ``token`` given the ``--run-dir`` of a held network take
    its topology, rate and link emulation from it (no TOPO, no --nodes), and their
    deploys keep ``net up --loss``."""
    from controller.deploy import loss_threshold
    from controller.ndn.deployment import NDN_PROGRAM
    from controller.token.deployment import NIC_PROGRAM

    env = gradctl_path
    downs = []
    try:
        up = _sh("gradctl net up star:2 --bw 20 --loss s1:1=0.01", env, tmp_path)
        assert up.returncode == 0, up.stderr
        d = up.stdout.strip().splitlines()[-1]
        downs.append(d)
        r = _sh(f"gradctl ndn deploy --run-dir {d} --json", env, tmp_path)
        assert r.returncode == 0, r.stderr
        assert set(json.loads(r.stdout)["commands"]) == {"h1", "h2"}
        assert (1, loss_threshold(0.01)) in _link_loss_entries(d, "s1", NDN_PROGRAM)
        r = _sh(f"gradctl ndn show --run-dir {d} --json", env, tmp_path)
        assert r.returncode == 0 and "s1" in json.loads(r.stdout), r.stderr
        r = _sh(f"gradctl qos show --run-dir {d} --queues 1 --no-dscp --json", env, tmp_path)
        assert r.returncode == 0 and set(json.loads(r.stdout)) == {"s1"}, r.stderr
        r = _sh(f"gradctl ndn deploy star:3 --run-dir {d}", env, tmp_path)
        assert r.returncode == 2 and "is not the network held" in r.stderr
        r = _sh(f"gradctl token deploy --run-dir {d}", env, tmp_path)
        assert r.returncode == 2 and "not a token LAN" in r.stderr

        lan = tmp_path / "lan.json"
        assert _sh(f"gradctl token topo --nodes 2 --json > {lan}", env, tmp_path).returncode == 0
        up = _sh(f"gradctl net up {lan} --no-deploy --loss nic1:2=0.02", env, tmp_path)
        assert up.returncode == 0, up.stderr
        d = up.stdout.strip().splitlines()[-1]
        downs.append(d)
        r = _sh(f"gradctl token deploy --run-dir {d}", env, tmp_path)
        assert r.returncode == 0 and "nic.p4 on nic1, nic2; lan.p4 on lan" in r.stdout, r.stderr
        assert (2, loss_threshold(0.02)) in _link_loss_entries(d, "nic1", NIC_PROGRAM)
        r = _sh(f"gradctl token counters --run-dir {d} --json", env, tmp_path)
        assert r.returncode == 0 and set(json.loads(r.stdout)["nics"]) == {"nic1", "nic2"}
        r = _sh(f"gradctl token deploy --run-dir {d} --nodes 3", env, tmp_path)
        assert r.returncode == 2 and "has 2 nodes" in r.stderr
    finally:
        for d in downs:
            _sh(f"gradctl net down {d}", env, tmp_path)
