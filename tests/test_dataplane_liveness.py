"""A switch whose data plane dies while its control plane answers is noticed (docs/faults.md).

- A program swap is atomic for packets: swapping between programs of different header
  layouts while packets flow never mixes them (the bug: a packet built from the old
  program's template got the new program's timestamp slot, an IndexError that ended the
  data-plane thread), in process and in a switch group under a steady stream.
- No packet-path exception ends the data plane: the packet is dropped, counted and
  logged, rate-limited; the loop beats a heartbeat even when idle.
- A data plane made to die (the runtime CLI's test-only ``fault dataplane-exit``) shows
  as ``dead`` over the runtime CLI, in ``gradctl net ls`` and in the watcher, which
  restarts the switch's process and replays its journal.
"""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.watch import SwitchWatcher
from targets.embedded.liveness import FAULT_ENV, STALL_S, Heartbeat, dataplane_dead, probe_dataplane
from targets.embedded.runtime_cli import RuntimeServer, execute
from targets.embedded.switch import Switch
from tests.netenv import TARGET, held_row, net_skip_reason, poll
from tests.netenv import gradctl as _gradctl
from tests.test_embedded_core import FORWARD, _route, _udp

ROOT = Path(__file__).resolve().parent.parent
NDN = ROOT / "p4src" / "build" / "ndn.json"
INA = ROOT / "p4src" / "build" / "ina.json"
CPU_PORT = 255


def _forwarding_switch(**kw: object) -> tuple[Switch, object]:
    # the Python backend: these tests inject faults by replacing its generated functions
    sw = Switch(seed=1, backend="python", **kw)  # type: ignore[arg-type]
    fwd = sw.load_program(FORWARD.read_bytes())
    sw.install_program(fwd)
    _route(sw, 0x0A000000, 8, "set_next_hop", 0x020000000201, 3)
    return sw, fwd


def _wait(pred, bound: float = 10.0) -> bool:  # noqa: ANN001
    """Wait for ``pred()``; a bound against hanging, not a timing check."""
    deadline = time.monotonic() + bound
    while not pred():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


# ----------------------------------------------------------------------------- in process
@pytest.mark.parametrize("other", [NDN, INA], ids=["ndn", "ina"])
def test_swap_race_under_traffic_in_process(other: Path) -> None:
    sw, fwd = _forwarding_switch()
    new = sw.load_program(other.read_bytes())
    assert len(new.template) != len(fwd.template)
    frame = _udp("10.0.0.2")
    errors: list[str] = []
    done = threading.Event()
    out = [0]

    def traffic() -> None:  # a bounded stream, processed as the data plane would
        try:
            for _ in range(4000):
                out[0] += len(sw.process(1, frame))
        except Exception as e:  # before the fix: IndexError out of the receive path
            errors.append(repr(e))
        finally:
            done.set()

    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often: the race shows at once
    try:
        t = threading.Thread(target=traffic)
        t.start()
        swaps = 0
        while not done.is_set() and swaps < 20000:
            sw.install_program(new)
            sw.install_program(fwd)  # the same program object: its routes are still there
            swaps += 1
        t.join(30)
    finally:
        sys.setswitchinterval(old_interval)
    assert errors == [] and sw.stats.errors == 0, (errors, sw.stats)
    assert swaps > 10
    assert out[0] > 0
    assert [p for p, _ in sw.process(1, frame)] == [3]  # after the swaps: forwarded


def test_packet_keeps_its_program_when_swapped_mid_packet() -> None:
    sw, fwd = _forwarding_switch()
    ndn = sw.load_program(NDN.read_bytes())
    parse = fwd.parse

    def parse_then_swap(F: list[int], pkt: bytes) -> int:
        sw.install_program(ndn)  # the control plane swaps while this packet is parsed
        return parse(F, pkt)

    fwd.parse = parse_then_swap  # type: ignore[method-assign]
    out = sw.process(1, _udp("10.0.0.2"))
    assert sw.stats.errors == 0
    assert [p for p, _ in out] == [3]  # routed to its end by forward.p4
    assert sw.program is ndn
    fwd.parse = parse  # type: ignore[method-assign]
    sw.process(1, _udp("10.0.0.2"))  # the next packet goes through ndn.p4, no error
    assert sw.stats.errors == 0


def test_packet_error_dropped_counted_logged_once_and_loop_lives(caplog: pytest.LogCaptureFixture) -> None:
    sw, fwd = _forwarding_switch(cpu_port=CPU_PORT)
    sent: list[int] = []
    sw.tx_handlers.append(lambda port, frame: sent.append(port))
    ingress = fwd.ingress
    bad = [5]

    def failing(F: list[int]) -> None:
        if bad[0]:
            bad[0] -= 1
            raise IndexError("a bug in the packet path")
        ingress(F)

    fwd.ingress = failing  # type: ignore[method-assign]
    caplog.set_level(logging.ERROR, logger="gradnet.switch")
    sw.start()
    try:
        assert _wait(lambda: sw.heartbeat is not None)
        for _ in range(6):
            sw._inject.append((1, _udp("10.0.0.2")))  # received on port 1, as from a wire
        sw.wake()
        assert _wait(lambda: sent == [3])  # the sixth packet went through
        assert sw.stats.errors == 5
        logged = [r for r in caplog.records if "error processing a packet" in r.getMessage()]
        assert len(logged) == 1  # rate-limited: one traceback for the burst
        beats = sw.heartbeat.beats
        assert _wait(lambda: sw.heartbeat.beats >= beats + 2, 5)  # it beats while idle
        st = sw.dataplane_status()
        assert st["state"] == "running" and st["packet_errors"] == 5, st
    finally:
        sw.stop()
    assert sw.dataplane_status()["state"] == "stopped"


def test_heartbeat_states() -> None:
    hb = Heartbeat()
    t = hb.last
    assert hb.status(t + 1)["state"] == "running"
    assert hb.status(t + STALL_S + 1)["state"] == "stalled"
    assert dataplane_dead(hb.status(t + STALL_S + 1), 30.0) == ""
    assert "stalled" in dataplane_dead(hb.status(t + 31), 30.0)
    hb.ended, hb.error = True, "IndexError: list assignment index out of range"
    assert hb.status()["state"] == "dead"
    assert "IndexError" in dataplane_dead(hb.status(), 30.0)
    hb.error, hb.stopping = "", True
    assert hb.status()["state"] == "stopped"
    assert dataplane_dead(None, 30.0) == ""  # unknown (BMv2, no answer) is not dead


def test_fault_injection_is_test_only_and_kills_the_loop(monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    sw, _ = _forwarding_switch()
    server = RuntimeServer(sw, str(tmp_path / "s1.cli"))
    server.start()
    sw.start()
    try:
        assert _wait(lambda: sw.heartbeat is not None)
        assert probe_dataplane(tmp_path / "s1.cli")["state"] == "running"
        monkeypatch.delenv(FAULT_ENV, raising=False)
        assert execute(sw, "fault dataplane-exit").startswith("error: fault injection is off")
        monkeypatch.setenv(FAULT_ENV, "1")
        assert execute(sw, "fault dataplane-exit") == "ok"
        assert _wait(lambda: sw.dataplane_status()["state"] == "dead")
        st = probe_dataplane(tmp_path / "s1.cli")  # the CLI still answers: the fault class
        assert st["state"] == "dead" and "injected" in st["error"], st
    finally:
        server.stop()
        sw.stop()


def test_watcher_restarts_a_dead_data_plane(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.p4runtime_rig import Target

    monkeypatch.setenv(FAULT_ENV, "1")
    target = Target()  # a switch answering P4Runtime, its data plane running
    restarts: list[str] = []

    def restart(name: str) -> list[str]:  # the process "restarts": a fresh data plane
        target.switch._stop.clear()
        target.switch.start()
        restarts.append(name)
        return [name]

    w = SwitchWatcher({"s1": (target.address, 1)}, alive=lambda n: True, restart=restart,
                      dataplane=lambda n: target.switch.dataplane_status(), poll=0.2)
    try:
        with w:
            assert w.wait_for(lambda h: h["s1"].dataplane == "running" and h["s1"].p4runtime, 20)
            assert execute(target.switch, "fault dataplane-exit") == "ok"
            assert w.wait_for(lambda h: h["s1"].restarts == 1 and h["s1"].dataplane == "running", 20), \
                w.snapshot()
        assert restarts == ["s1"]
    finally:
        target.close()


# ----------------------------------------------------------------------------- networks
def _net_reason() -> str | None:
    if TARGET == "bmv2":
        return "BMv2 has no data-plane heartbeat: its process liveness is what is watched"
    return net_skip_reason("forward", "ndn")


def _dp(run_dir: Path | str, switch: str) -> dict:
    st = probe_dataplane(Path(run_dir) / f"{switch}.cli", timeout=3.0)
    assert st is not None, switch
    return st


@pytest.mark.net
@pytest.mark.slow
def test_group_keeps_forwarding_while_pipeline_swapped(tmp_path: Path) -> None:
    reason = _net_reason()
    if reason:
        pytest.skip(reason)
    from controller.deploy import deploy
    from controller.roles import DEPLOY
    from targets.p4rt_client import P4RuntimeClient
    from topologies import linear
    from topologies.network import Network

    topo = linear(2)
    with Network(topo, target="embedded", run_dir=str(tmp_path), limit_bw=False,
                 switch_processes=1) as net:
        assert len({sw.proc.pid for sw in net.net.switches}) == 1  # one group, one loop
        addrs = net.grpc_addresses()
        deploy(topo, addrs)
        h1, h2 = net.host("h1"), net.host("h2")
        dst = topo.host_ip("h2")
        # a steady, bounded stream h1 -> h2 (at most 30,000 packets, 20 s) meanwhile
        sender = h1.popen([sys.executable, "-c",
                           "import socket,time\n"
                           "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
                           "end=time.monotonic()+20\n"
                           "for i in range(30000):\n"
                           "    if time.monotonic()>end: break\n"
                           f"    s.sendto(b'x'*64,('{dst}',9999)); time.sleep(0.0005)\n"])
        sw = net.switch("s1")
        build = ROOT / "p4src" / "build"
        try:
            time.sleep(0.5)
            with P4RuntimeClient(sw.grpc_addr, sw.device_id, election_id=DEPLOY.election_id + 5) as c:
                for _ in range(10):  # forward.p4 -> ndn.p4 -> forward.p4 (without its routes)
                    c.set_pipeline(build / "ndn.p4info.txt", NDN)
                    c.set_pipeline(build / "forward.p4info.txt", FORWARD)
        finally:
            sender.terminate()  # the swaps are over: so is the stream
            sender.wait(timeout=30)
        deploy(topo, addrs)  # forward.p4 and its routes again
        for s in ("s1", "s2"):
            st = _dp(tmp_path, s)
            assert st["state"] == "running" and st["packet_errors"] == 0, (s, st)
        assert net.switch("s1").process_alive()
        out = h2.cmd(f"ping -n -c 3 -W 2 {topo.host_ip('h1')}")  # after the last swap
        assert " 0% packet loss" in out, out






@pytest.fixture
def held_net() -> Iterator[str]:
    reason = _net_reason()
    if reason:
        pytest.skip(reason)
    r = gradctl("net", "up", "linear:3", "--target", "embedded", "--json", timeout=300)
    assert r.returncode == 0, r.stderr
    run_dir = json.loads(r.stdout)["run_dir"]
    try:
        yield run_dir
    finally:
        gradctl("net", "down", run_dir)


@pytest.mark.net
@pytest.mark.slow
def test_net_ls_reports_dead_data_plane_then_watcher_restarts_it(held_net: str) -> None:
    from controller.netctl import NetState

    run_dir = held_net
    row = _ls(run_dir)
    assert row["health"] == "ok 3/3", row
    assert all(h["dataplane"] == "running" for h in row["switch_health"].values()), row
    st = NetState.load(run_dir)
    victim = next(p for p in st.switches["s1"] if p.what == "switch process")
    # the switches whose one data-plane loop dies with s1's: its group
    down = sorted(s for s, ps in st.switches.items() if any(p.pid == victim.pid for p in ps))
    st.holder.signal(signal.SIGSTOP)  # nothing restarts it while we look
    try:
        assert execute_remote(run_dir, "s1", "fault dataplane-exit") == "ok"
        assert poll(lambda: _dp(run_dir, "s1")["state"] == "dead", 10)
        row = _ls(run_dir)
        for s, h in row["switch_health"].items():
            # the fault class: the process runs and P4Runtime answers, the data plane is dead
            assert h["process"] and h["p4runtime"] and h["pipeline"], (s, h)
            assert h["dataplane"] == ("dead" if s in down else "running"), (s, h)
        assert all(f"{s} data plane dead" in row["health"] for s in down), row["health"]
    finally:
        st.holder.signal(signal.SIGCONT)
    ok = poll(lambda: (lambda h: all(h[s]["restarts"] == 1 and h[s]["dataplane"] == "running"
                                      and h[s]["pipeline"] for s in down))(_ls(run_dir)["switch_health"]))
    assert ok, _ls(run_dir)
    assert _ls(run_dir)["health"].startswith("ok 3/3; restarts"), _ls(run_dir)
    assert not victim.alive()  # the old process was stopped, a new one serves the group
    r = gradctl("net", "exec", run_dir, "h1", "--", "ping", "-c", "2", "-W", "2", "10.0.0.3")
    assert r.returncode == 0, r.stdout + r.stderr
    log = Path(run_dir, "holder.log").read_text()
    assert "data plane dead" in log and "replayed its journal" in log


def execute_remote(run_dir: str, switch: str, line: str) -> str:
    """One runtime-CLI command to ``switch`` of a held network; its answer."""
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(str(Path(run_dir) / f"{switch}.cli"))
        s.sendall(line.encode() + b"\n")
        return s.makefile("rb").readline().decode().strip()


def gradctl(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """gradctl with the test-only fault allowed in the network's switches."""
    return _gradctl(*args, timeout=timeout, env={FAULT_ENV: "1"})


def _ls(run_dir: str) -> dict:
    return held_row(run_dir, env={FAULT_ENV: "1"})
