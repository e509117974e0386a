"""The embedded P4Runtime server driven by p4runtime-shell in its own virtual environment
(it pins protobuf<3.21); rig: ``tests/p4runtime_rig.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.p4runtime_rig import DEVICE_ID, FORWARD, Target, _need, target

__all__ = ["target"]  # the fixture, imported


# -- p4runtime-shell ----------------------------------------------------------------------
SHELL_VENV = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gradnet" / "p4rt-shell-venv"
SHELL_VERSION = "0.0.6"  # installs on Python 3.11 with p4runtime 1.4.1 and protobuf 3.20.3


@pytest.fixture(scope="session")
def p4rt_shell_python() -> Path:
    """Python of a private venv holding p4runtime-shell (it pins protobuf<3.21)."""
    python = SHELL_VENV / "bin" / "python"
    probe = [str(python), "-c", "import p4runtime_sh.shell"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    try:
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(SHELL_VENV)], check=True,
                       capture_output=True, timeout=120)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        f"p4runtime-shell=={SHELL_VERSION}"], check=True, capture_output=True, timeout=600)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as e:
        out = getattr(e, "stderr", b"") or b""
        pytest.skip(f"cannot create the p4runtime-shell venv (no network?): {e} {out.decode()[-300:]}")
    if subprocess.run(probe, capture_output=True).returncode != 0:
        pytest.skip("p4runtime-shell installed but does not import")
    return python


def test_p4runtime_shell_interop(target: Target, p4rt_shell_python: Path) -> None:
    _need(FORWARD)
    script = textwrap.dedent(f"""
        import p4runtime_sh.shell as sh
        sh.setup(device_id={DEVICE_ID}, grpc_addr="{target.address}", election_id=(0, 1),
                 config=sh.FwdPipeConfig("{FORWARD[1]}", "{FORWARD[0]}"))
        te = sh.TableEntry("MyIngress.forwarding.ipv4_routes")(action="MyIngress.forwarding.set_next_hop")
        te.match["hdr.ipv4.dst_addr"] = "10.0.3.0/24"
        te.action["dmac"] = "00:00:00:00:0a:03"
        te.action["port"] = "3"
        te.insert()
        got = list(sh.TableEntry("MyIngress.forwarding.ipv4_routes").read())
        assert len(got) == 1, got
        e = got[0]
        print("MATCH", e.match["hdr.ipv4.dst_addr"].lpm.prefix_len, e.match["hdr.ipv4.dst_addr"].lpm.value.hex())
        print("PARAMS", [p.value.hex() for p in e.action.msg().params])
        try:
            te.insert()
        except Exception as ex:
            print("DUP", type(ex).__name__, "ALREADY_EXISTS" in str(ex))
        g = sh.MulticastGroupEntry(4).add(1, 1).add(2, 1)
        g.insert()
        print("GROUPS", len(list(sh.MulticastGroupEntry(4).read())))
        sh.teardown()
    """)
    res = subprocess.run([str(p4rt_shell_python), "-c", script], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "MATCH 24 0a000300" in res.stdout
    assert "PARAMS ['0a03', '03']" in res.stdout
    assert "DUP P4RuntimeWriteException True" in res.stdout
    assert "GROUPS 1" in res.stdout
    assert len(target.switch.program.tables["MyIngress.forwarding.ipv4_routes"]) == 1
