"""What the network tests need, in one place: root, Mininet's mnexec, compiled programs.

    from tests.netenv import TARGET, net_skip_reason

    reason = net_skip_reason("ina")          # None when the test can run
    needs_net = pytest.mark.skipif(reason is not None, reason=reason or "")

    @pytest.fixture(scope="module")
    def net(tmp_path_factory):
        with started_network(tmp_path_factory, "mine", star(3), "ina", neighbors=True) as n:
            yield n
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: the switch target of the network tests (``TARGET=bmv2 make test`` runs them on BMv2)
TARGET = os.environ.get("TARGET") or "embedded"


def net_skip_reason(*programs: str) -> str | None:
    """Why an emulated-network test cannot run here (None if it can): not root, no
    ``mnexec``, or one of ``programs`` (``p4src/build/<name>.json``) not compiled."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    if shutil.which("mnexec") is None:
        return "needs mnexec (Debian package mininet)"
    for name in programs:
        if not (ROOT / "p4src" / "build" / f"{name}.json").exists():
            return f"p4src/build/{name}.json missing (make p4)"
    return None


@contextmanager
def started_network(tmp: Any, name: str, topo: Any, *programs: str, neighbors: bool = False,
                    **network_kw: Any) -> Iterator[tuple[Any, Any, Path]]:
    """A module fixture's network: skip unless ``programs`` can run here, start ``topo``
    (``network_kw`` goes to :class:`topologies.network.Network`), optionally answer ARP
    for every switch address (INA jobs may pick any switch), yield ``(network, topo,
    runs dir)`` and stop the network even when a test fails."""
    import pytest

    reason = net_skip_reason(*programs)
    if reason:
        pytest.skip(reason)
    from topologies.network import Network

    network = Network(topo, run_dir=str(tmp.mktemp(f"{name}_net")), **network_kw)
    network.start()
    try:
        if neighbors:
            from experiments.ina import switch_neighbors

            switch_neighbors(network, topo, topo.switches())
        yield network, topo, tmp.mktemp(f"{name}_runs")
    finally:
        network.stop()


def gradctl(*args: str, timeout: float = 180,
            env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``gradctl ARGS`` from this checkout (``env``: extra variables)."""
    full = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "controller.cli", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=str(ROOT), env=full)


def held_row(run_dir: str, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``gradctl net ls --json``'s row of the held network in ``run_dir``."""
    r = gradctl("net", "ls", "--json", env=env)
    assert r.returncode == 0, r.stderr
    (row,) = [x for x in json.loads(r.stdout) if x["run_dir"] == run_dir]
    return row


def poll(pred: Callable[[], Any], bound: float = 120.0, step: float = 0.5) -> Any:
    """Wait for ``pred()`` to be truthy; a bound only against hanging, not a timing check."""
    deadline = time.monotonic() + bound
    while True:
        v = pred()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(step)
