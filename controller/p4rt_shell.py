"""``gradctl net shell DIR SWITCH``: p4runtime-shell connected to a switch of a running network.

p4runtime-shell pins protobuf<3.21, which the project's venv cannot share, so it lives in
its own venv, ``.venv-p4rt-shell`` at the repository root, built on first use from the
pinned ``requirements-p4rt-shell.txt`` (``make p4rt-shell`` builds it too). The shell
reads the switch's P4Info from the switch (no pipeline is pushed) and talks to its
P4Runtime unix socket, whose address ``net.json`` records (gRPC dials ``unix:`` itself).

Arbitration (controller/roles.py): the shell streams in the ``shell`` role with election
id :data:`SHELL_ELECTION_ID` (7). On the embedded target arbitration is per role, so the
shell is primary of its own role and writes while any deploy, the NDN manager or the
watcher holds theirs: neither side locks the other out. BMv2 1.15 ignores roles and makes
the highest election id of all streams primary: 7 is above the watcher's 5 (always
connected) and below a deploy's 10 and the NDN manager's 50, so a deploy always gets
through while a shell is open; during a deploy (or while an NDN manager runs) the
shell's writes are refused as not primary and its reads go on. One shell per switch at a
time on BMv2 (it refuses an election id in use).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from controller.p4runtime import REPO_ROOT
from controller.roles import P4RT_SHELL

SHELL_VENV = REPO_ROOT / ".venv-p4rt-shell"
REQUIREMENTS = REPO_ROOT / "requirements-p4rt-shell.txt"
#: between the watcher's 5 and a deploy's 10 (roles.py): see the module docstring
SHELL_ELECTION_ID = P4RT_SHELL.election_id
SHELL_ROLE = P4RT_SHELL.name

#: Runs inside the shell's venv: connect, run a script with the shell's names (TableEntry,
#: CounterEntry, P4Objects ...) in scope, disconnect. The script is the user's own file.
_SCRIPT_RUNNER = """
import runpy, sys
import p4runtime_sh.shell as sh
addr, dev, eid, role, path = sys.argv[1:6]
sh.setup(device_id=int(dev), grpc_addr=addr, election_id=(0, int(eid)), role_name=role)
try:
    runpy.run_path(path, init_globals={n: getattr(sh, n) for n in dir(sh) if not n.startswith("_")},
                   run_name="__main__")
finally:
    sh.teardown()
"""


class ShellError(RuntimeError):
    """The shell's venv could not be built or used."""


def shell_python(create: bool = True, log: object = None) -> Path:
    """The Python of p4runtime-shell's venv, built (pinned versions) when missing."""
    python = SHELL_VENV / "bin" / "python"
    probe = [str(python), "-c", "import p4runtime_sh.shell"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    if not create:
        raise ShellError(f"no p4runtime-shell venv at {SHELL_VENV} (make p4rt-shell)")
    if log:
        print(f"building p4runtime-shell's venv {SHELL_VENV} (once) ...", file=sys.stderr, flush=True)
    try:
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(SHELL_VENV)], check=True,
                       capture_output=True, timeout=300)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        "-r", str(REQUIREMENTS)], check=True, capture_output=True, timeout=900)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as e:
        err = getattr(e, "stderr", b"") or b""
        raise ShellError(f"cannot build p4runtime-shell's venv {SHELL_VENV}: {e} "
                         f"{err.decode(errors='replace')[-400:]}") from None
    if subprocess.run(probe, capture_output=True).returncode != 0:
        raise ShellError(f"p4runtime-shell installed in {SHELL_VENV} but does not import")
    return python


def shell_argv(python: Path, grpc_addr: str, device_id: int, script: str | None = None,
               election_id: int = SHELL_ELECTION_ID, role: str = SHELL_ROLE) -> list[str]:
    """The command that opens the shell on ``grpc_addr`` (interactive), or runs
    ``script`` (a Python file using the shell's names) and exits."""
    if script is not None:
        return [str(python), "-c", _SCRIPT_RUNNER, grpc_addr, str(device_id), str(election_id),
                role, os.path.abspath(script)]
    return [str(python), "-m", "p4runtime_sh", "--grpc-addr", grpc_addr, "--device-id",
            str(device_id), "--election-id", f"0,{election_id}", "--role-name", role]
