"""Opening many P4Runtime sessions at once (controller/p4runtime.py ``open_sessions``), on
real embedded-target P4Runtime servers in this process: a few pipeline loads at a time,
and a request past finsy's deadline is one DeployError, not a traceback.

On fat-tree k=8 (80 switches in 2 embedded-target processes) the 40 pipeline loads a
process got at once ran past finsy's 10 s request deadline on a loaded machine, and the
cancelled session surfaced as a bare ``asyncio.CancelledError``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.deploy import DeployError
from controller.p4runtime import Program, close_sessions, open_sessions
from targets.embedded.p4runtime.server import P4RuntimeServer
from targets.embedded.switch import Switch

ROOT = Path(__file__).resolve().parent.parent
FORWARD = Program.load(ROOT / "p4src" / "build" / "forward.json")


class LoadGauge:
    """Counts the pipeline loads in progress across switches (the real ``load_program``,
    slowed by ``delay`` so that loads sent together overlap)."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.now = self.peak = self.done = 0
        self._lock = threading.Lock()

    def wrap(self, sw: Switch) -> None:
        real = sw.load_program

        def load(device_config: bytes | str):  # type: ignore[no-untyped-def]
            with self._lock:
                self.now += 1
                self.peak = max(self.peak, self.now)
            try:
                time.sleep(self.delay)
                return real(device_config)
            finally:
                with self._lock:
                    self.now -= 1
                    self.done += 1

        sw.load_program = load  # type: ignore[method-assign]


@pytest.fixture
def servers() -> Iterator[list[tuple[Switch, str]]]:
    """Six embedded switches, each behind its own P4Runtime server on 127.0.0.1."""
    out: list[tuple[Switch, P4RuntimeServer, str]] = []
    try:
        for dev in range(1, 7):
            sw = Switch(device_id=dev)
            server = P4RuntimeServer(sw, "127.0.0.1:0")
            out.append((sw, server, f"127.0.0.1:{server.start()}"))
        yield [(sw, addr) for sw, _, addr in out]
    finally:
        for sw, server, _ in out:
            server.stop(grace=0)
            sw.stop()


def _specs(servers: list[tuple[Switch, str]]) -> dict[str, tuple[str, int, Program]]:
    return {f"s{sw.device_id}": (addr, sw.device_id, FORWARD) for sw, addr in servers}


@pytest.mark.parametrize("in_flight", [2, 6])
def test_pipeline_loads_go_a_few_at_a_time(servers: list[tuple[Switch, str]], in_flight: int) -> None:
    gauge = LoadGauge(delay=1.0)  # long enough that loads sent together overlap on a busy machine
    for sw, _ in servers:
        gauge.wrap(sw)

    async def run() -> None:
        sessions = await open_sessions(_specs(servers), in_flight=in_flight, timeout=30)
        try:
            assert all(s.switch.is_primary for s in sessions.values())
        finally:
            await close_sessions(sessions.values())

    asyncio.run(run())
    assert gauge.done == 6
    assert all(sw.program is not None for sw, _ in servers)  # every pipeline installed
    if in_flight == 2:
        assert 1 <= gauge.peak <= 2
    else:  # ungated, the six loads overlap: the gate above is what kept them apart
        assert gauge.peak > 2


def test_a_pipeline_load_past_the_deadline_is_one_deploy_error(
        servers: list[tuple[Switch, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    import finsy.p4client

    monkeypatch.setattr(finsy.p4client, "_DEFAULT_RPC_TIMEOUT", 0.5)
    gauge = LoadGauge(delay=1.5)  # each load outlasts the request's deadline
    sw, _ = servers[0]
    gauge.wrap(sw)
    with pytest.raises(DeployError) as err:
        asyncio.run(open_sessions(_specs(servers[:1]), timeout=30))
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("s1: ")
    assert "failed while connecting" in msg or "DEADLINE_EXCEEDED" in msg
