"""``gradctl net up|ls|exec|down`` and the Mininet CLI, driven as a user would.

The networks are real (namespaces, P4 switches on TARGET, forward.p4 deployed); the CLI
test drives ``gradctl net up --cli`` through a pseudo-terminal and reads its screen.
"""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from controller.netctl import NetState, proc_start_time
from tests.netenv import TARGET, net_skip_reason

ROOT = Path(__file__).resolve().parent.parent
GRADCTL = [sys.executable, "-m", "controller.cli"]


def _skip_reason() -> str | None:
    return net_skip_reason("forward")


net = pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or "")


def gradctl(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GRADCTL, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def _alive(pids: list[tuple[int, int | None]]) -> list[int]:
    return [pid for pid, start in pids if start is not None and proc_start_time(pid) == start]


def _recorded(run_dir: str) -> list[tuple[int, int | None]]:
    st = NetState.load(run_dir)
    return [(p.pid, p.start) for p in st.processes()]


def test_bad_input_is_one_line_error(tmp_path: Path) -> None:
    r = gradctl("net", "up", "nosuch:3")
    assert r.returncode == 2 and r.stderr.startswith("gradctl: error:"), r.stderr
    r = gradctl("net", "down", str(tmp_path))
    assert r.returncode == 2 and "no network here" in r.stderr
    r = gradctl("net", "up", "star:2", "--loss", "s1:x=0.1")
    assert r.returncode == 2 and "bad loss spec" in r.stderr


@net
def test_up_exec_down_round_trip() -> None:
    r = gradctl("net", "up", "linear:2", "--bw", "50", "--target", TARGET)
    assert r.returncode == 0, r.stderr
    run_dir = r.stdout.strip().splitlines()[-1]
    try:
        pids = _recorded(run_dir)
        assert len(_alive(pids)) == len(pids) >= 5  # holder, 2 host shells, 2 switches
        ls = json.loads(gradctl("net", "ls", "--json").stdout)
        assert any(n["run_dir"] == run_dir and n["status"] == "up" for n in ls)
        # an agent really runs inside a host: the reachability probe through the P4 switches
        r = gradctl("net", "exec", run_dir, "h1", "--", sys.executable, "-m", "hosts.reach",
                    "--targets", "10.0.0.2", "--count", "3", "--timeout", "5")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["received"]["10.0.0.2"] > 0
        # the exit status of the command comes back
        assert gradctl("net", "exec", run_dir, "h2", "--", "sh", "-c", "exit 7").returncode == 7
        r = gradctl("net", "exec", run_dir, "h9", "--", "true")
        assert r.returncode == 2 and "unknown node" in r.stderr
        # the controller reaches the switches by the run directory
        r = gradctl("counters", "linear:2", "--run-dir", run_dir)
        assert r.returncode == 0, r.stderr
    finally:
        r = gradctl("net", "down", run_dir)
    assert r.returncode == 0, r.stderr
    assert _alive(pids) == []
    assert not list(Path(run_dir).glob("*.grpc"))
    assert NetState.load(run_dir).live_status() == "down"


@net
def test_down_after_the_holder_was_killed() -> None:
    r = gradctl("net", "up", "star:2", "--target", TARGET)
    assert r.returncode == 0, r.stderr
    run_dir = r.stdout.strip().splitlines()[-1]
    pids = _recorded(run_dir)
    st = NetState.load(run_dir)
    assert st.holder is not None
    os.kill(st.holder.pid, signal.SIGKILL)
    time.sleep(0.5)
    assert NetState.load(run_dir).live_status() in ("dead", "down")
    r = gradctl("net", "down", run_dir)
    assert r.returncode == 0, r.stderr
    assert _alive(pids) == []


def _read_until(fd: int, needle: str, timeout: float) -> str:
    buf, deadline = "", time.monotonic() + timeout
    while needle not in buf and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                buf += os.read(fd, 4096).decode(errors="replace")
            except OSError:
                break
    return buf


@net
def test_mininet_cli_prints_its_answers() -> None:
    """Regression: the CLI was mute (Mininet's log level hid its command output)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([*GRADCTL, "net", "up", "star:2", "--cli", "--target", TARGET],
                            cwd=ROOT, stdin=slave, stdout=slave, stderr=slave, close_fds=True,
                            start_new_session=True)
    os.close(slave)
    try:
        screen = _read_until(master, "mininet>", 180)
        assert "mininet>" in screen, screen[-2000:]
        os.write(master, b"nodes\n")
        screen = _read_until(master, "mininet>", 30)
        assert "h1" in screen and "s1" in screen, screen
        os.write(master, b"pingall\n")
        screen = _read_until(master, "Results:", 60)
        assert "Results: 0% dropped" in screen, screen
        os.write(master, b"h1 ping -c1 -W2 10.0.0.2\n")
        screen = _read_until(master, "packet loss", 30)
        assert "1 received" in screen, screen
        # input typed while a node command runs goes to that node: wait for the prompt
        if "mininet>" not in screen.split("packet loss", 1)[1]:
            _read_until(master, "mininet>", 30)
        os.write(master, b"exit\n")
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            _read_until(master, "\0", 0.5)  # keep draining the terminal while it tears down
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        os.close(master)
    assert proc.returncode == 0


@net
def test_manual_ina_workflow_from_printed_commands(tmp_path: Path) -> None:
    """The manual workflow (docs/cli.md): net up -> ina deploy -> run the commands it prints
    (gradctl net exec ...) -> every worker's sum is exact -> counters -> net down."""
    import shlex

    import numpy as np

    from wire.fixedpoint import quantize

    topo = "leaf-spine:2,2,2"
    r = gradctl("net", "up", topo, "--bw", "50", "--target", TARGET)
    assert r.returncode == 0, r.stderr
    run_dir = r.stdout.strip().splitlines()[-1]
    try:
        r = gradctl("ina", "deploy", topo, "--run-dir", run_dir, "--ps", "h1",
                    "--workers", "h2,h3,h4", "--budget", "1", "--capacity", "1000",
                    "--values", "2048")
        assert r.returncode == 0, r.stderr
        cmds = [shlex.split(line.strip().rstrip("&")) for line in r.stdout.splitlines()
                if line.strip().startswith("gradctl net exec")]
        assert len(cmds) == 4 + 4  # ARP setup per host, then the PS and three workers
        setup, agents = cmds[:4], cmds[4:]
        for c in setup:
            assert subprocess.run([*GRADCTL, *c[1:]], cwd=ROOT, timeout=60).returncode == 0
        grads = [(np.random.default_rng(i).standard_normal(2048) * 0.01).astype(np.float32)
                 for i in range(3)]
        ps_cmd, workers = agents[0], agents[1:]
        ps = subprocess.Popen([*GRADCTL, *ps_cmd[1:], "--json", "--linger", "3"], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)
        procs = []
        for rank, c in enumerate(workers):
            i = c.index("--size")  # the printed command sends a random gradient of that size;
            del c[i:i + 2]         # here each worker sends a known one instead
            np.save(tmp_path / f"g{rank}.npy", grads[rank])
            procs.append(subprocess.Popen(
                [*GRADCTL, *c[1:], "--gradient", str(tmp_path / f"g{rank}.npy"), "--out-int",
                 str(tmp_path / f"out{rank}.npy"), "--json", "--no-progress"], cwd=ROOT,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
        ps.communicate(timeout=60)
        expected = sum(quantize(g, 16, 3).astype(np.int64) for g in grads)
        for rank in range(3):
            got = np.load(tmp_path / f"out{rank}.npy").astype(np.int64)
            np.testing.assert_array_equal(got[:2048], expected)
        r = gradctl("ina", "counters", topo, "--run-dir", run_dir, "--policy",
                    str(Path(run_dir) / "ina-job1.policy.json"), "--json")
        assert r.returncode == 0, r.stderr
    finally:
        assert gradctl("net", "down", run_dir).returncode == 0
