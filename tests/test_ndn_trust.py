"""Trust (docs/trust.md), NDN: a host that is not the PS cannot push "parameters".

The leaf-spine network of test_ndn_network.py (2 spines, 2 leaves, 3 hosts each; embedded
target unless TARGET says otherwise): PS h1 and GPU h2 on leaf s3, GPUs h4 and h5 on leaf
s4. Two intruders outside the job send forged ``/*distribute*/h1/train/v=r/seg=i`` Data
(complete versions, every value 1e6) during the whole training: h3 from the PS's own leaf
with the PS's source MAC, h6 from the other leaf with its own. ndn.p4's upstream check
(``ndn_persistent_pit.p4``) replicates a distribute Data only when it comes in on the port
the FIB names toward /h1, so every forgery is a counted ``not_upstream`` drop at the
intruder's leaf, sniffers beside two GPUs never see one, and every GPU ends bit-exact with
the PS and with a replay of the training.

A third intruder floods subscriptions: insert Interests for names whose *open* persistent
PIT slot (the low 8 bits of the crc32 of /PS/train, computed the old way) is /h1/train's,
and for /h1/train itself. With the job's admission (NdnDeployment jobs=) every one is a
counted ``subscription_unknown_job`` / ``subscription_not_member`` drop at the intruder's
leaf, no switch ever counts a ``subscription_collision``, and the job's rounds are exact.
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

from controller.ndn import NdnDeployment, NdnJob, prefix_hash, read_switch_state
from experiments.ndn import run_agents
from tests.netenv import started_network
from topologies import leaf_spine

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.net, pytest.mark.slow]

FORGED = 1e6

#: argv: iface stop-file rounds source-mac|"" value [tags]; prints "ready", then the
#: packets it sent; ``tags``: hex of VLAN tags put before the NDN EtherType
INTRUDER = """
import pathlib, struct, sys, time
import numpy as np
from hosts.ndn.faces import EthernetFace
from wire.ndn import ETHERTYPE_NDN, NDN_MAC, data_packet, name_of, segments
iface, stop, rounds, mac = sys.argv[1], pathlib.Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
tags = bytes.fromhex(sys.argv[6]) if len(sys.argv) > 6 else b''
f = EthernetFace(iface)
if mac or tags:   # spoof the PS's source address: the switches must not care
    src = bytes.fromhex(mac.replace(':', '')) if mac else f.mac
    f._hdr = NDN_MAC + src + tags + struct.pack('!H', ETHERTYPE_NDN)
segs = segments(np.full(3818, float(sys.argv[5]), np.float32))
pkts = [data_packet(name_of(b'*distribute*', 'h1', 'train', f'v={v}', f'seg={i}'), c, len(segs) - 1)
        for v in range(1, rounds + 1) for i, c in enumerate(segs)]
print('ready', flush=True)
n = 0
while not stop.exists():
    for p in pkts:
        f.send(p)
        n += 1
    time.sleep(0.5)
print(n, flush=True)
"""

#: argv: iface stop-file value; prints "ready", then {"forged": n, "real": n} distribute Data seen
SNIFFER = """
import json, pathlib, sys
import numpy as np
from hosts.ndn.faces import EthernetFace
from wire.ndn import marker
f = EthernetFace(sys.argv[1])
stop = pathlib.Path(sys.argv[2])
seen = {'forged': 0, 'real': 0}
print('ready', flush=True)
while not stop.exists():
    for p in f.recv(0.2):
        if p.kind == 'data' and marker(p.name) == 'distribute' and len(p.name) == 5:
            forged = p.content[:4] == np.float32(float(sys.argv[3])).tobytes()
            seen['forged' if forged else 'real'] += 1
print(json.dumps(seen), flush=True)
"""


#: argv: iface stop-file names (json); prints "ready", then the packets it sent (at most
#: 8000, for at most 150 s: longer than the job's 90 s bound, which it denies when open)
FLOODER = """
import json, pathlib, sys, time
from hosts.ndn.faces import EthernetFace
from wire.ndn import interest_packet, name_of
f = EthernetFace(sys.argv[1])
stop = pathlib.Path(sys.argv[2])
pkts = [(ps, t) for ps, t in json.loads(sys.argv[3])]
print('ready', flush=True)
n, end = 0, time.monotonic() + 150
while not stop.exists() and n < 8000 and time.monotonic() < end:
    for ps, t in pkts:
        f.send(interest_packet(name_of(b'*insert*', ps, t, 'h3')))
        n += 1
    time.sleep(0.5)
print(n, flush=True)
"""


def colliding_prefixes(n: int = 20) -> list[tuple[str, str]]:
    """(PS, train) pairs under /h1 whose open slot is /h1/train's: they travel the GPUs'
    path toward the PS and, without admission, would block it on every switch."""
    want = prefix_hash("/h1/train") & 0xFF
    out = [("h1", f"t{k}") for k in range(50000) if prefix_hash(f"/h1/t{k}") & 0xFF == want]
    return out[:n]


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any, Path]]:
    with started_network(tmp_path_factory, "ndn_trust_net", leaf_spine(2, 2, 3, bw=20), "ndn") as n:
        yield n


def _start(network: Any, host: str, code: str, *args: str) -> subprocess.Popen:
    p = network.host(host).popen([sys.executable, "-c", code, *args], cwd=str(ROOT),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline().strip()                   # bound before anything is sent
    assert line == "ready", f"{host}: {line!r} {p.stderr.read()[-500:] if p.poll() is not None else ''}"
    return p


def test_forged_distribute_data_is_dropped_upstream_and_counted(net) -> None:  # noqa: ANN001
    network, topo, out = net
    run_dir = out / "forged"
    run_dir.mkdir()
    stop = run_dir / "stop"
    dep = NdnDeployment(topo, network.grpc_addresses())
    dep.deploy()
    dep.start_manager(run_dir / "persistent-pit.json")
    procs: dict[str, subprocess.Popen] = {}
    outs: dict[str, str] = {}
    try:
        for g in ("h2", "h4"):
            procs[f"sniff-{g}"] = _start(network, g, SNIFFER, topo.iface(g)["name"], str(stop), repr(FORGED))
        procs["h3"] = _start(network, "h3", INTRUDER, topo.iface("h3")["name"], str(stop), "3",
                             topo.host_mac("h1"), repr(FORGED))
        procs["h6"] = _start(network, "h6", INTRUDER, topo.iface("h6")["name"], str(stop), "3", "", repr(FORGED))
        res = run_agents(network, topo, run_dir, transport="ndn", ps="h1", gpus=["h2", "h4", "h5"],
                         rounds=3, compute_time=0.2, max_time=90)
    finally:
        stop.touch()
        for name, p in procs.items():
            try:
                outs[name] = p.communicate(timeout=20)[0]
            except subprocess.TimeoutExpired:
                p.kill()
                outs[name] = p.communicate()[0]
        dep.stop_manager()
    assert not (dep.manager and dep.manager.errors)
    assert res.exact, res.problems                       # bit-exact with the PS and the replay
    sent = {h: int(outs[h].split()[-1]) for h in ("h3", "h6")}
    assert all(n > 0 for n in sent.values()), sent
    for g in ("h2", "h4"):
        seen = json.loads(outs[f"sniff-{g}"].splitlines()[-1])
        assert seen["forged"] == 0, (g, seen)
        assert seen["real"] >= 3 * res.ps["segments"], (g, seen)   # it was listening
    # every forgery is counted where it came in: the intruder's leaf (h3: s3, h6: s4)
    leaf = {h: topo.iface(h)["switch"] for h in sent}
    want = {leaf["h3"]: sent["h3"], leaf["h6"]: sent["h6"]}
    deadline = time.monotonic() + 30                     # the switches may still be draining
    while True:
        st = read_switch_state(topo, network.grpc_addresses())
        got = {s: st[s]["drops"].get("not_upstream", 0) for s in st}
        if all(got[s] == n for s, n in want.items()) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert {s: got[s] for s in want} == want
    assert all(n == 0 for s, n in got.items() if s not in want), got
    assert st[leaf["h3"]]["events"]["distributed"] > 0   # the PS's own updates went out


def test_colliding_subscription_flood_leaves_the_job_unaffected(net) -> None:  # noqa: ANN001
    network, topo, out = net
    run_dir = out / "sub-flood"
    run_dir.mkdir()
    stop = run_dir / "stop"
    names = colliding_prefixes()
    assert len(names) == 20
    gpus = ["h2", "h4", "h5"]
    dep = NdnDeployment(topo, network.grpc_addresses(), jobs=[NdnJob("h1", tuple(gpus))])
    dep.deploy()
    flood = _start(network, "h3", FLOODER, topo.iface("h3")["name"], str(stop),
                   json.dumps([*names, ("h1", "train")]))
    try:
        res = run_agents(network, topo, run_dir, transport="ndn", ps="h1", gpus=gpus,
                         rounds=3, compute_time=0.2, max_time=90)
    finally:
        stop.touch()
        try:
            sent = int(flood.communicate(timeout=20)[0].split()[-1])
        except subprocess.TimeoutExpired:
            flood.kill()
            raise
    assert res.exact, res.problems
    assert sent > len(names), sent
    leaf = topo.iface("h3")["switch"]
    per_round = len(names) + 1
    want = {"subscription_unknown_job": sent // per_round * len(names) + min(sent % per_round, len(names)),
            "subscription_not_member": sent // per_round + (sent % per_round > len(names))}
    deadline = time.monotonic() + 30
    while True:
        st = read_switch_state(topo, network.grpc_addresses())
        got = {k: st[leaf]["drops"].get(k, 0) for k in want}
        if got == want or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert got == want
    assert all(st[s]["drops"].get("subscription_collision", 0) == 0 for s in st), st
    assert all(st[s]["drops"].get(k, 0) == 0 for s in st if s != leaf for k in want), st


def test_tagged_forgeries_are_dropped_and_counted(net) -> None:  # noqa: ANN001
    """The forged distribute Data behind a VLAN tag (h3: VID 0 with the PS's MAC; h6:
    802.1ad VID 0 over 802.1Q VID 5), which a GPU's kernel would hand to its 0x8624
    socket with the tags stripped (tests/test_kernel_delivery.py): ndn.p4 never parses
    them as NDN, so each is a counted ``not_ndn`` drop at the intruder's leaf, the
    sniffers beside two GPUs see none, and the GPUs end bit-exact."""
    network, topo, out = net
    run_dir = out / "tagged"
    run_dir.mkdir()
    stop = run_dir / "stop"
    dep = NdnDeployment(topo, network.grpc_addresses())
    dep.deploy()
    dep.start_manager(run_dir / "persistent-pit.json")
    before = {s: st["drops"].get("not_ndn", 0)
              for s, st in read_switch_state(topo, network.grpc_addresses()).items()}
    procs: dict[str, subprocess.Popen] = {}
    outs: dict[str, str] = {}
    try:
        for g in ("h2", "h4"):
            procs[f"sniff-{g}"] = _start(network, g, SNIFFER, topo.iface(g)["name"], str(stop), repr(FORGED))
        procs["h3"] = _start(network, "h3", INTRUDER, topo.iface("h3")["name"], str(stop), "3",
                             topo.host_mac("h1"), repr(FORGED), "81000000")
        procs["h6"] = _start(network, "h6", INTRUDER, topo.iface("h6")["name"], str(stop), "3", "",
                             repr(FORGED), "88a8000081000005")
        res = run_agents(network, topo, run_dir, transport="ndn", ps="h1", gpus=["h2", "h4", "h5"],
                         rounds=3, compute_time=0.2, max_time=90)
    finally:
        stop.touch()
        for name, p in procs.items():
            try:
                outs[name] = p.communicate(timeout=20)[0]
            except subprocess.TimeoutExpired:
                p.kill()
                outs[name] = p.communicate()[0]
        dep.stop_manager()
    assert res.exact, res.problems
    sent = {h: int(outs[h].split()[-1]) for h in ("h3", "h6")}
    assert all(n > 0 for n in sent.values()), sent
    for g in ("h2", "h4"):
        seen = json.loads(outs[f"sniff-{g}"].splitlines()[-1])
        assert seen["forged"] == 0, (g, seen)
    leaf = {h: topo.iface(h)["switch"] for h in sent}
    want = {leaf["h3"]: sent["h3"], leaf["h6"]: sent["h6"]}
    deadline = time.monotonic() + 30
    while True:
        st = read_switch_state(topo, network.grpc_addresses())
        got = {s: st[s]["drops"].get("not_ndn", 0) - before.get(s, 0) for s in st}
        if all(got[s] >= n for s, n in want.items()) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    # at least every forgery (BMv2 also counts the root namespace's own frames)
    assert all(got[s] >= n for s, n in want.items()), (got, want)


#: argv: iface stop-file; prints "ready", then "<sent> <seconds>": Interests for 4,096
#: distinct names toward the PS, at most 2,000 a second, 16,000 in all, 60 s at most
INTEREST_FLOODER = """
import pathlib, sys, time
from hosts.ndn.faces import EthernetFace
from wire.ndn import interest_packet, name_of
f = EthernetFace(sys.argv[1])
stop = pathlib.Path(sys.argv[2])
pkts = [interest_packet(name_of('h1', 'flood', f'n{i}')) for i in range(4096)]
print('ready', flush=True)
n, t0 = 0, time.monotonic()
while not stop.exists() and n < 16000 and time.monotonic() - t0 < 60:
    for p in pkts[n % 4096:n % 4096 + 100]:
        f.send(p)
        n += 1
    time.sleep(0.05)
print(n, time.monotonic() - t0, flush=True)
"""


#: argv: iface stop-file; prints "ready", then how many /h1/flood/... Interests arrived
FLOOD_COUNTER = """
import pathlib, sys
from ndn.encoding import Component
from hosts.ndn.faces import EthernetFace
f = EthernetFace(sys.argv[1])
stop = pathlib.Path(sys.argv[2])
n = 0
print('ready', flush=True)
while not stop.exists():
    for p in f.recv(0.2):
        if p.kind == 'interest' and len(p.name) > 1 and bytes(Component.get_value(p.name[1])) == b'flood':
            n += 1
print(n, flush=True)
"""


def test_an_outsiders_interest_flood_is_bounded_per_port(net) -> None:  # noqa: ANN001
    """h3, on the PS's leaf and in no job, sends Interests for thousands of names (each
    would start or take over a transient PIT entry on every switch to the PS) through a
    whole training. With the job known, NdnDeployment limits every host port in no job
    to OUTSIDER_PIT_BUDGET new entries a second: h3's leaf refuses the rest
    (``pit_budget``), so at most that many a second reach the PS (a sniffer there counts
    them), and the job is bit-exact."""
    from controller.ndn.deployment import OUTSIDER_PIT_BUDGET

    network, topo, out = net
    run_dir = out / "interest-flood"
    run_dir.mkdir()
    stop = run_dir / "stop"
    gpus = ["h2", "h4", "h5"]
    dep = NdnDeployment(topo, network.grpc_addresses(), jobs=[NdnJob("h1", tuple(gpus))])
    dep.deploy()
    counter = _start(network, "h1", FLOOD_COUNTER, topo.iface("h1")["name"], str(stop))
    flood = _start(network, "h3", INTEREST_FLOODER, topo.iface("h3")["name"], str(stop))
    try:
        res = run_agents(network, topo, run_dir, transport="ndn", ps="h1", gpus=gpus,
                         rounds=3, compute_time=0.2, max_time=90)
    finally:
        stop.touch()
        try:
            sent_s, seconds_s = flood.communicate(timeout=90)[0].split()[-2:]
            arrived = int(counter.communicate(timeout=30)[0].split()[-1])
        except subprocess.TimeoutExpired:
            flood.kill()
            counter.kill()
            raise
    assert res.exact, res.problems
    sent, seconds = int(sent_s), float(seconds_s)
    leaf = topo.iface("h3")["switch"]
    admitted_at_most = OUTSIDER_PIT_BUDGET * (int(seconds) + 2)
    assert sent > admitted_at_most, (sent, seconds)  # the flood went past the budget
    assert 0 < arrived <= admitted_at_most, (arrived, sent, seconds)
    # (the flooder repeats each name's packet, same nonce, every 4,096: a repeat within
    # the nonce's lifetime is a duplicate_nonce drop, before the PIT)
    st = read_switch_state(topo, network.grpc_addresses())
    assert st[leaf]["drops"].get("pit_budget", 0) > 0, st[leaf]
    assert all(st[s]["drops"].get("pit_budget", 0) == 0 for s in st if s != leaf), st
