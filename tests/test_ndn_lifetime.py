"""NDN subscription lifetime over a real network (docs/ndn.md, "Persistent subscriptions").

A star (s1; embedded target unless TARGET says otherwise): PS h1, GPUs h2 and h3. Each
GPU sends one insert Interest and never refreshes it, then counts the distribute Data
it receives, per version. The PS sends version 1 two seconds later, longer than the
soft-state lifetime of the first deployment (1 s):

* soft state (``subscription_lifetime=1.0``): the subscriptions have expired, neither
  GPU gets version 1 and the switch counts the expired ports;
* persistent (``subscription_lifetime=PERSISTENT``): both GPUs get it; h3 then "dies"
  subscribed (it never unsubscribes) and still gets version 2, until the controller
  unsubscribes it on its behalf (``NdnDeployment.unsubscribe``, a packet-out through the
  pipeline as if from h3's port): version 3 reaches h2 alone.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.ndn import PERSISTENT, NdnDeployment, NdnJob, read_switch_state
from tests.netenv import started_network

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.net]

#: argv: iface stop-file me; subscribes once, prints "ready", then {version: Data seen}
GPU = """
import json, pathlib, sys
from hosts.ndn.faces import EthernetFace
from wire.ndn import interest_packet, marker, name_of
f = EthernetFace(sys.argv[1])
stop = pathlib.Path(sys.argv[2])
f.send(interest_packet(name_of(b'*insert*', 'h1', 'train', sys.argv[3])))
print('ready', flush=True)
seen = {}
while not stop.exists():
    for p in f.recv(0.1):
        if p.kind == 'data' and marker(p.name) == 'distribute' and len(p.name) == 5:
            v = str(bytes(p.name[3])[-1])   # v=<version>: a version component, 1 byte here
            seen[v] = seen.get(v, 0) + 1
print(json.dumps(seen), flush=True)
"""

#: argv: iface version; sends one distribute Data segment of that version
PS = """
import sys
from hosts.ndn.faces import EthernetFace
from wire.ndn import data_packet, name_of
f = EthernetFace(sys.argv[1])
f.send(data_packet(name_of(b'*distribute*', 'h1', 'train', f'v={sys.argv[2]}', 'seg=0'), b'x' * 64, 0))
"""


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any, Path]]:
    from topologies import star
    with started_network(tmp_path_factory, "ndn_lifetime", star(3, bw=100), "ndn") as n:
        yield n


def _publish(network: Any, topo: Any, version: int) -> None:
    p = network.host("h1").popen([sys.executable, "-c", PS, topo.iface("h1")["name"], str(version)],
                                 cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err[-500:]
    time.sleep(0.5)                                      # let the replicas arrive


def _run(net: tuple, name: str, lifetime: float, steps: Any) -> tuple[dict[str, dict], Any]:
    """Deploy with ``lifetime``, subscribe h2 and h3 once, wait 2 s, run ``steps(dep)``;
    what each GPU saw, and the deployment."""
    network, topo, base = net
    out = base / name
    out.mkdir()
    stop = out / "stop"
    dep = NdnDeployment(topo, network.grpc_addresses(), subscription_lifetime=lifetime,
                        jobs=[NdnJob("h1", ("h2", "h3"))])
    dep.deploy()
    procs = {}
    try:
        for g in ("h2", "h3"):
            p = network.host(g).popen([sys.executable, "-c", GPU, topo.iface(g)["name"], str(stop), g],
                                      cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True)
            procs[g] = p
            assert p.stdout.readline().strip() == "ready", p.stderr.read()[-500:]
        time.sleep(2.0)                                  # > the soft lifetime, no refresh
        steps(dep)
    finally:
        stop.touch()
        seen = {}
        for g, p in procs.items():
            try:
                o, _e = p.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                o, _e = p.communicate()
            seen[g] = json.loads(o.strip().splitlines()[-1]) if o.strip() else None
    return seen, dep


def test_soft_state_subscriptions_expire_without_refresh(net) -> None:  # noqa: ANN001
    network, topo, _ = net
    seen, _dep = _run(net, "soft", 1.0, lambda dep: _publish(network, topo, 1))
    assert seen == {"h2": {}, "h3": {}}
    st = read_switch_state(topo, network.grpc_addresses())
    assert st["s1"]["expired"]["subscriptions"] == 2
    assert st["s1"]["drops"].get("no_subscribers", 0) == 1


def test_persistent_subscriptions_live_until_unsubscribed(net) -> None:  # noqa: ANN001
    network, topo, _ = net

    def steps(dep: NdnDeployment) -> None:
        _publish(network, topo, 1)                       # both alive and subscribed
        _publish(network, topo, 2)                       # h3 "dead": still subscribed
        assert dep.unsubscribe("h3", "h1") == "s1"       # the controller, on its behalf
        time.sleep(0.3)
        _publish(network, topo, 3)

    seen, _dep = _run(net, "persistent", PERSISTENT, steps)
    assert seen == {"h2": {"1": 1, "2": 1, "3": 1}, "h3": {"1": 1, "2": 1}}
    st = read_switch_state(topo, network.grpc_addresses())
    assert st["s1"]["expired"]["subscriptions"] == 0
    assert st["s1"]["events"]["unsubscribed"] == 1
