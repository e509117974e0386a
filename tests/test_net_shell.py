"""``gradctl net shell``: p4runtime-shell on a switch of a running network, scripted.

The session reads a table, writes an entry and reads it back, reads a counter; then,
with the shell still connected, a deploy (``gradctl deploy``, election id 10 in the
default role) loads a fresh pipeline: the shell (role ``shell``, id 7) must not lock it
out, and once the deploy has gone the shell reads and writes again. Skips only when
p4runtime-shell's venv cannot be built.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.netenv import ROOT, TARGET, net_skip_reason

pytestmark = [pytest.mark.net, pytest.mark.skipif(net_skip_reason("forward") is not None,
                                                   reason=net_skip_reason("forward") or "")]


@pytest.fixture(scope="module")
def shell_venv() -> Path:
    from controller.p4rt_shell import ShellError, shell_python

    try:
        return shell_python()
    except ShellError as e:
        pytest.skip(str(e))


def _gradctl(*args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), TARGET=TARGET)
    return subprocess.run([sys.executable, "-m", "controller.cli", *args], env=env,
                          capture_output=True, text=True, **kw)  # type: ignore[call-overload]


@pytest.fixture
def held_net() -> str:
    r = _gradctl("net", "up", "star:2", timeout=300)
    assert r.returncode == 0, r.stderr
    run_dir = r.stdout.strip()
    yield run_dir
    _gradctl("net", "down", run_dir, timeout=120)


@pytest.mark.long  # builds the p4runtime-shell venv (make p4rt-shell) first
def test_net_shell_session(shell_venv: Path, held_net: str, tmp_path: Path) -> None:
    ready, deployed = tmp_path / "ready", tmp_path / "deployed"
    script = tmp_path / "session.py"
    script.write_text(textwrap.dedent(f"""
        import os, time
        LOSS = "MyEgress.link_emulation.link_loss"

        def add_loss(port):
            te = TableEntry(LOSS)(action="MyEgress.link_emulation.set_loss_rate")
            te.match["standard_metadata.egress_port"] = str(port)
            te.action["drop_threshold"] = "1000"
            te.insert()

        def losses():
            return sorted(int.from_bytes(e.match["standard_metadata.egress_port"].exact.value, "big")
                          for e in TableEntry(LOSS).read())

        print("ROUTES", len(list(TableEntry("MyIngress.forwarding.ipv4_routes").read())))
        add_loss(2)
        print("LOSS", losses())
        for c in CounterEntry("MyEgress.link_emulation.link_emulation_drops").read():
            m = c.msg()
            print("COUNTER", m.index.index, m.data.packet_count)
        open({str(ready)!r}, "w").close()
        end = time.monotonic() + 240
        while not os.path.exists({str(deployed)!r}) and time.monotonic() < end:
            time.sleep(0.1)
        print("ROUTES2", len(list(TableEntry("MyIngress.forwarding.ipv4_routes").read())))
        for _ in range(100):  # BMv2 hands mastership back when the deploy's stream closes
            try:
                add_loss(1)
                break
            except Exception as e:
                last = e
                time.sleep(0.1)
        else:
            raise last
        print("LOSS2", losses())
    """))
    env = dict(os.environ, PYTHONPATH=str(ROOT), TARGET=TARGET)
    shell = subprocess.Popen([sys.executable, "-m", "controller.cli", "net", "shell", held_net, "s1",
                              "--script", str(script)], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        end = time.monotonic() + 240
        while not ready.exists() and shell.poll() is None and time.monotonic() < end:
            time.sleep(0.1)
        assert ready.exists(), shell.communicate(timeout=30)
        # the controller is not locked out by the open shell
        dep = _gradctl("deploy", "--run-dir", held_net, timeout=300)
        assert dep.returncode == 0, dep.stderr
        deployed.touch()
        out, err = shell.communicate(timeout=300)
    finally:
        if shell.poll() is None:
            shell.kill()
            shell.wait()
    assert shell.returncode == 0, out[-2000:] + err[-3000:]
    lines = {ln.split(" ", 1)[0]: ln.split(" ", 1)[1] for ln in out.splitlines()
             if ln.split(" ", 1)[0] in ("ROUTES", "LOSS", "ROUTES2", "LOSS2")}
    assert int(lines["ROUTES"]) == 2 and int(lines["ROUTES2"]) == 2  # star:2: one route per host
    assert lines["LOSS"] == "[2]"
    assert lines["LOSS2"] == "[1]"  # the deploy's fresh pipeline dropped the shell's port-2 entry
    counters = [ln for ln in out.splitlines() if ln.startswith("COUNTER ")]
    assert counters and all(int(c.split()[2]) == 0 for c in counters)


def test_net_shell_errors(held_net: str) -> None:
    r = _gradctl("net", "shell", held_net, "s9")
    assert r.returncode == 2 and "unknown switch 's9'" in r.stderr
    r = _gradctl("net", "shell", held_net, "s1", "--script", "/nonexistent.py")
    assert r.returncode == 2 and "no file" in r.stderr
