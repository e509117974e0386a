"""The NDN parameter server end to end: real NDN packets through ndn.p4 switches.

One leaf-spine network (2 spines, 2 leaves, 3 hosts each; embedded target unless TARGET
says otherwise) serves every test. PS h1 shares its leaf with h2 and h3; h4..h6 are on
the other leaf, so updates cross a spine and are replicated at both leaves. Each test
deploys ndn.p4 (or forward.p4 for the IP baseline) over P4Runtime, runs the persistent-
PIT manager, starts the PS and GPU processes in their hosts, and checks parameters bit
for bit against an independent replay of the training.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.ndn import NdnDeployment, fib_routes, read_switch_state
from experiments.ndn import loss_on_fabric_link, loss_on_gpu_link, run_agents, run_ip, run_ndn
from tests.netenv import net_skip_reason, started_network
from topologies import leaf_spine

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.net, pytest.mark.slow]


def _skip_reason() -> str | None:
    return net_skip_reason("ndn")


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[object, object, Path]]:
    with started_network(tmp_path_factory, "ndn_net", leaf_spine(2, 2, 3, bw=20), "ndn") as n:
        yield n


def test_sync_rounds_decline_late_subscriber_and_lossy_gpu(net) -> None:  # noqa: ANN001
    """Steps 2-6 and 9: a busy GPU declines and gets no work, a late GPU joins the
    persistent PIT, the PS sends each update once, the GPU behind a 20 % lossy link
    recovers lost updates by its probe timer, and every GPU ends bit-exact."""
    network, topo, out = net
    gpus = ["h2", "h3", "h4", "h5", "h6"]
    loss = loss_on_gpu_link(topo, "h4", 0.20)
    res = run_ndn(network, topo, out / "sync", loss, ps="h1", gpus=gpus, busy=("h6",), rounds=5,
                  late={"h5": 2.5}, compute_time=0.2, max_time=90)
    assert res.exact, res.problems
    assert sorted(res.ps["accepted"]) == ["h2", "h3", "h4", "h5"] and res.ps["declined"] == ["h6"]
    assert res.gpus["h6"]["gradients_sent"] == 0
    # every round the PS sent the update once: one Data per segment
    seg_bytes = res.ps["rounds"][0]["distribute_bytes"]
    assert seg_bytes > 0
    assert all(r["distribute_bytes"] == seg_bytes for r in res.ps["rounds"])
    assert res.ps["tx_by_kind"]["distribute"] == seg_bytes * 5
    # the persistent PIT lives in the switches: every subscription was taken by the data
    # plane (h1's leaf s3, the spine toward h4/h5 and their leaf s4), none punted; h5
    # subscribed late and still got every update by distribution
    spine = topo.peer("s4", fib_routes(topo)["s4"]["h1"])[0]     # the other leaf's way up
    ev = {s: st["events"] for s, st in res.switches.items()}
    assert all(e.get("punted", 0) == 0 for e in ev.values()), ev
    assert {s for s, e in ev.items() if e.get("subscribed")} == {"s3", "s4", spine}
    assert res.gpus["h5"]["subscribe_s"] is not None
    # the lossy GPU lost some update segments and fetched them by probe (step 9)
    lossy = res.gpus["h4"]
    assert lossy["version"] == 5
    assert res.switches["s4"]["link_drops"].get(topo.port("s4", "h4"), 0) > 0
    # P(no update segment lost in 5 rounds of 11 segments at 20 %) is about 1e-5
    assert lossy["updates_recovered_by_probe"] >= 1
    assert lossy["updates_recovered_by_probe"] + lossy["updates_via_distribute"] == 5
    for g in ("h2", "h3", "h5"):
        assert res.gpus[g]["updates_recovered_by_probe"] == 0
        assert res.gpus[g]["updates_via_distribute"] == 5


def test_five_percent_loss_on_a_fabric_link_every_round_bit_exact(net) -> None:  # noqa: ANN001
    """5 % loss both ways on the link from h4's leaf up to the PS: subscriptions, acks,
    collection Interests, gradients, updates and recoveries of three GPUs all cross it.
    Every GPU still gets every update of every round (by distribution, or by its probe
    timer and Interest retransmissions) and ends bit-exact with the PS and the replay."""
    network, topo, out = net
    loss = loss_on_fabric_link(topo, "h1", "h4", 0.05)
    assert all(not topo.is_host(topo.peer(s, p)[0]) for s, p in loss)
    res = run_ndn(network, topo, out / "fabric-loss", loss, ps="h1", gpus=["h2", "h4", "h5", "h6"],
                  rounds=5, compute_time=0.1, max_time=90)
    assert res.exact, res.problems
    assert res.ps["version"] == 5
    for g, st in res.gpus.items():
        assert st["version"] == 5, g
        assert st["updates_via_distribute"] + st["updates_recovered_by_probe"] == 5, (g, st)
    dropped = sum(res.switches[s]["link_drops"].get(p, 0) for s, p in loss)
    assert dropped > 0                                   # the loss really hit the run


def test_async_applies_every_gradient_once(net) -> None:  # noqa: ANN001
    network, topo, out = net
    res = run_ndn(network, topo, out / "async", {}, ps="h1", gpus=["h2", "h4", "h6"], mode="async",
                  steps=3, compute_time=0.1, max_time=60)
    assert res.exact, res.problems
    assert len(res.ps["applied"]) == 9 and res.ps["version"] == 9
    # one distribution per applied gradient, each sent once
    assert res.ps["tx_packets_by_kind"]["distribute"] == 9 * res.ps["segments"]


def test_ip_baseline_sends_each_update_once_per_gpu(net) -> None:  # noqa: ANN001
    network, topo, out = net
    res = run_ip(network, topo, out / "ip", {}, ps="h1", gpus=["h2", "h4", "h5"], rounds=2,
                 compute_time=0.1, max_time=60)
    assert res.exact, res.problems
    # every update segment once per GPU
    assert res.ps["tx_packets_by_kind"]["distribute"] == 2 * 3 * res.ps["segments"]


def test_malformed_and_over_bound_packets_are_counted_drops(net) -> None:  # noqa: ANN001
    network, topo, out = net
    dep = NdnDeployment(topo, network.grpc_addresses())
    dep.deploy()
    dep.set_loss("s4", topo.port("s4", "h4"), 0.0)       # run-time loss change (inserts)
    dep.set_loss("s4", topo.port("s4", "h4"), 0.0)       # (modifies)
    code = (
        "import time\n"
        "from ndn.encoding import make_interest, InterestParam\n"
        "from hosts.ndn.faces import EthernetFace\n"
        "f = EthernetFace('h4-eth0')\n"
        "bad = [bytes(make_interest('/h1/a/b/c/d/e/f', InterestParam(nonce=1))),\n"
        "       bytes(make_interest('/h1/' + 'x' * 17, InterestParam(nonce=2))),\n"
        "       bytes([0x05, 0xFE, 0, 0, 0, 10]) + bytes(10),\n"
        "       bytes([0x05, 0x04, 0x0A, 0x02, 0, 0]),\n"
        "       bytes(make_interest('/h1/ok/abc', InterestParam(nonce=3)))[:9]]\n"
        "for b in bad:\n"
        "    f.send(b)\n"
        "f.send(bytes(make_interest('/h1/still/forwarded', InterestParam(nonce=4))))\n"
    )
    sniff = network.host("h1").popen(
        [sys.executable, "-c",
         "from hosts.ndn.faces import EthernetFace\n"
         "f = EthernetFace('h1-eth0')\n"
         "print('ready', flush=True)\n"
         "import time; end = time.time() + 20\n"
         "while time.time() < end:\n"
         "    for p in f.recv(0.2):\n"
         "        print(p.uri, flush=True); raise SystemExit(0)\n"],
        cwd=str(ROOT), stdout=subprocess.PIPE, text=True)
    assert sniff.stdout.readline().strip() == "ready"     # bound before anything is sent
    network.host("h4").cmd(f"{sys.executable} -c \"{code}\"")
    got, _ = sniff.communicate(timeout=30)
    assert got.strip() == "/h1/still/forwarded"
    st = read_switch_state(topo, network.grpc_addresses())["s4"]   # h4's leaf
    drops = st["drops"]
    assert drops.get("name_too_deep") == 1
    assert drops.get("component_too_long") == 1
    assert drops.get("length_form") == 1
    assert drops.get("malformed") == 1
    assert drops.get("parser_error") == 1


def test_every_gpu_declines(net) -> None:  # noqa: ANN001
    """A PS whose every GPU declines ends cleanly with no rounds (step 2.3)."""
    network, topo, out = net
    dep = NdnDeployment(topo, network.grpc_addresses())
    dep.deploy()
    dep.start_manager()
    try:
        res = run_agents(network, topo, out / "alldecline", transport="ndn", ps="h1", gpus=["h2", "h5"],
                         busy=("h2", "h5"), rounds=1, max_time=30)
    finally:
        dep.stop_manager()
    assert res.ps["accepted"] == [] and sorted(res.ps["declined"]) == ["h2", "h5"]
    assert res.ps["rounds"] == [] and all(g["gradients_sent"] == 0 for g in res.gpus.values())


def test_gradctl_ndn_deploy_manage_and_show(net, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    """gradctl ndn deploy --manage runs the persistent-PIT manager while a subscriber
    arrives; gradctl ndn show --json lists its entry on the path to the PS."""
    import json
    import threading

    from controller.cli import main

    network, topo, out = net
    rd = str(network.run_dir)
    state_file = Path(rd) / "ndn-persistent-pit.json"
    state_file.unlink(missing_ok=True)
    rc: list[int] = []
    t = threading.Thread(target=lambda: rc.append(main(["ndn", "deploy", "leaf-spine:2,2,3", "--run-dir", rd,
                                                        "--manage", "12", "--json"])))
    t.start()
    end = time.monotonic() + 60
    while not state_file.exists() and time.monotonic() < end:   # the manager is up
        time.sleep(0.2)
    code = ("from hosts.ndn.faces import EthernetFace\nfrom wire.ndn import interest_packet, name_of\n"
            "f = EthernetFace('h5-eth0')\n"
            "f.send(interest_packet(name_of(b'*insert*', 'h1', 'train', 'h5')))\n")
    network.host("h5").cmd(f"{sys.executable} -c \"{code}\"")
    t.join(timeout=60)
    assert rc == [0]
    assert json.loads(state_file.read_text())["s4"][0]["name"] == "/h1/train"
    capsys.readouterr()
    assert main(["ndn", "show", "leaf-spine:2,2,3", "--run-dir", rd, "--json"]) == 0
    state = json.loads(capsys.readouterr().out)
    with_entries = {s for s, st in state.items() if st["persistent_pit"]}
    spine = topo.peer("s4", fib_routes(topo)["s4"]["h1"])[0]
    assert with_entries == {"s4", spine, "s3"}
    (e,) = state["s4"]["persistent_pit"]
    assert e["name"] == "/h1/train" and e["subscribers"] == {str(topo.port("s4", "h5")): "h5"}
    assert state["s4"]["events"]["punted"] == 1
    # a restarted manager picks the entries up from the switches and extends them
    dep = NdnDeployment(topo, network.grpc_addresses())
    manager = dep.start_manager()
    try:
        assert manager.state()["s4"] == [{"name": "/h1/train", "group": e["group"],
                                          "ports": [topo.port("s4", "h5")]}]
        network.host("h6").cmd(f"{sys.executable} -c \"{code.replace('h5', 'h6')}\"")
        end = time.monotonic() + 20
        while manager.handled < 3 and time.monotonic() < end:    # s4, the spine, s3
            time.sleep(0.1)
    finally:
        dep.stop_manager()
    assert not manager.errors
    (e,) = read_switch_state(topo, network.grpc_addresses())["s4"]["persistent_pit"]
    assert sorted(e["ports"]) == sorted([topo.port("s4", "h5"), topo.port("s4", "h6")])


def test_digits_cnn_real_training(net) -> None:  # noqa: ANN001
    """Real gradients of hosts/training.py's digits CNN: two GPUs on different leaves,
    every GPU's parameters bit-exact with the PS's, test accuracy reported and rising."""
    network, topo, out = net
    res = run_ndn(network, topo, out / "digits", {}, ps="h1", gpus=["h3", "h6"], rounds=3, lr=0.5,
                  model="digits", compute_time=0.0, max_time=90)
    assert res.exact, res.problems
    assert res.ps["segments"] == 11 and res.ps["version"] == 3
    assert res.ps["accuracy"] > res.ps["accuracy_initial"]


def test_window_grows_to_its_cap_and_the_update_enters_each_gpu_link_once(net) -> None:  # noqa: ANN001
    """Without loss the PS's collection window opens from 2 to its cap (32 here) and
    stays there; the update of every round crosses each GPU's link once (its NIC's
    counters): about 1/N of what a unicast PS would send, which is N copies."""
    network, topo, out = net
    gpus = ["h2", "h3", "h4", "h5"]
    res = run_ndn(network, topo, out / "window", {}, ps="h1", gpus=gpus, values=35_000, rounds=3,
                  compute_time=0.05, max_time=90, probe_gap=0.3, ps_args=("--window-max", "32"))
    assert res.exact, res.problems
    win = res.ps["window"]
    assert win["adaptive"] and win["max_cwnd"] == 32, win
    assert win["increases"] >= 30 and win["rtt_samples"] > 0, win
    assert res.ps["streamed_segments"] == 0               # the update sent whole (default)
    update = res.ps["tx_by_kind"]["distribute"]         # 3 rounds, one copy each (frames)
    assert update == 3 * res.ps["rounds"][0]["distribute_bytes"]
    frame = update // (3 * res.ps["segments"])          # one distribution Data
    for g in gpus:
        st = res.gpus[g]
        # its one copy of every update, plus its collection Interests and acks (and what
        # a probe fetched again if a round was slow on this loaded machine): under 1.25/N
        # of the N copies (N x update) a unicast PS sends
        rx = st["nic_train_rx_bytes"] - st["segments_recovered"] * frame
        assert update <= rx + st["segments_recovered"] * frame, (g, st["nic_train_rx_bytes"], update)
        assert rx < 1.25 * update, (g, rx, update, st["segments_recovered"])


def test_window_backs_off_under_loss_and_stays_exact(net) -> None:  # noqa: ANN001
    """5 % loss both ways on the fabric link toward three of the GPUs: lost gradient
    segments time out (RTO from the measured round trips) and halve the PS's window,
    which then grows again; every round still ends bit-exact, with the update streamed
    (``--distribute stream``: each segment as soon as every GPU's segment is in)."""
    network, topo, out = net
    loss = loss_on_fabric_link(topo, "h1", "h4", 0.05)
    res = run_ndn(network, topo, out / "window-loss", loss, ps="h1", gpus=["h2", "h4", "h5", "h6"],
                  values=17_500, rounds=3, compute_time=0.05, max_time=120,
                  ps_args=("--distribute", "stream"))
    assert res.exact, res.problems
    assert res.ps["streamed_segments"] == 3 * res.ps["segments"]
    assert sum(res.switches[s]["link_drops"].get(p, 0) for s, p in loss) > 0
    win = res.ps["window"]
    assert win["timeouts_as_loss"] >= 1 and win["decreases"] >= 1, win
    assert win["decreases"] <= win["timeouts_as_loss"]     # at most one halving per loss
    first = win["decreased_to"][0]
    assert first < win["max_cwnd"] and first >= 1, win
    assert win["increases_after_first_decrease"] > 0, win   # it opened again
    assert res.ps["retransmissions"] >= win["timeouts_as_loss"]
