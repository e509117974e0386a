"""The manual workflow ("A network you keep", docs/cli.md), run line by line as a user would.

The commands are parsed from the docs page's code block, so the document and this test
cannot drift apart. ``gradctl`` on PATH runs this checkout's control plane. Checked on
top of every command succeeding: the held network's bandwidth was planned on, job 1's
and job 2's aggregation really happened in the switches, the ``--loss`` entry of
``net up`` survives both INA deploys and the undeploy, and the undeploy leaves job 1.
Then ``gradctl ndn`` and ``qos`` on the same network take its topology and loss from
``--run-dir`` too (no TOPO), and a token LAN held by ``net up`` names itself to
``gradctl token``.
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


def workflow_lines() -> list[str]:
    """The command lines of the manual-workflow code block of docs/cli.md."""
    text = (ROOT / "docs" / "cli.md").read_text()
    block = text[text.index(SECTION):].split("```\n", 2)[1]
    return [ln for ln in block.splitlines() if ln.strip()]


def test_workflow_block_parses() -> None:
    lines = workflow_lines()
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


@pytest.mark.skipif(net_skip_reason("forward", "ina", "ndn") is not None,
                    reason=net_skip_reason("forward", "ina", "ndn") or "")
@pytest.mark.long  # the printed-commands workflow runs in test_netctl; the docs block is parsed above
def test_manual_workflow(gradctl_path: dict[str, str], tmp_path: Path) -> None:
    lines = workflow_lines()
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
        assert r.returncode == 0, f"docs/cli.md workflow failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
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
        # ndn and qos on the same held network: its topology (no TOPO) and its loss
        from controller.ndn.deployment import NDN_PROGRAM

        def gradctl(*argv: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(["gradctl", *argv], env=gradctl_path, capture_output=True,
                                  text=True, timeout=120)

        r = gradctl("ndn", "deploy", "--run-dir", run_dir, "--ps", "h1", "--json")
        assert r.returncode == 0, r.stderr
        assert len(json.loads(r.stdout)["commands"]) == 8  # leaf-spine:2,4,2: 8 hosts
        assert (1, loss_threshold(0.01)) in _link_loss_entries(run_dir, "s1", NDN_PROGRAM)
        r = gradctl("ndn", "show", "--run-dir", run_dir, "--json")
        assert r.returncode == 0 and len(json.loads(r.stdout)) == 6, r.stderr
        r = gradctl("qos", "show", "--run-dir", run_dir, "-s", "s1", "--queues", "1",
                    "--no-dscp", "--json")
        assert r.returncode == 0 and set(json.loads(r.stdout)) == {"s1"}, r.stderr
        r = gradctl("ndn", "deploy", "star:3", "--run-dir", run_dir)
        assert r.returncode == 2 and "is not the network held" in r.stderr
        r = gradctl("token", "deploy", "--run-dir", run_dir)
        assert r.returncode == 2 and "not a token LAN" in r.stderr
    finally:
        if run_dir:
            d = subprocess.run(["bash", "-c", down], env=dict(gradctl_path, D=run_dir),
                               capture_output=True, text=True, timeout=120)
            assert d.returncode == 0, d.stderr


def _sh(cmd: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", cmd], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.skipif(net_skip_reason("nic", "lan") is not None,
                    reason=net_skip_reason("nic", "lan") or "")
def test_token_lan_held_by_net_up(gradctl_path: dict[str, str], tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A token LAN held by ``gradctl net up`` (from ``token topo --json``) names itself:
    ``token deploy|counters --run-dir`` need no ``--nodes``, and the deploy keeps the
    LAN's ``net up --loss``. (ndn and qos on a held network: test_manual_workflow.)"""
    from controller.cli import main
    from controller.deploy import loss_threshold
    from controller.token.deployment import NIC_PROGRAM

    def gradctl(*argv: str) -> tuple[int, str, str]:  # in this process: no start-up each
        capsys.readouterr()
        rc = main(list(argv))
        out, err = capsys.readouterr()
        return rc, out, err

    lan = tmp_path / "lan.json"
    rc, out, _ = gradctl("token", "topo", "--nodes", "2", "--json")
    lan.write_text(out)
    up = _sh(f"gradctl net up {lan} --no-deploy --loss nic1:2=0.02", gradctl_path, tmp_path)
    assert up.returncode == 0, up.stderr
    d = up.stdout.strip().splitlines()[-1]
    try:
        rc, out, err = gradctl("token", "deploy", "--run-dir", d)
        assert rc == 0 and "nic.p4 on nic1, nic2; lan.p4 on lan" in out, err
        assert (2, loss_threshold(0.02)) in _link_loss_entries(d, "nic1", NIC_PROGRAM)
        rc, out, err = gradctl("token", "counters", "--run-dir", d, "--json")
        assert rc == 0 and set(json.loads(out)["nics"]) == {"nic1", "nic2"}, err
        rc, out, err = gradctl("token", "deploy", "--run-dir", d, "--nodes", "3")
        assert rc == 2 and "has 2 nodes" in err
    finally:
        _sh(f"gradctl net down {d}", gradctl_path, tmp_path)
