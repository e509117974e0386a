"""The NDN baselines' pieces that need no network: the multicast tree the
controller installs, link bytes from switch port counters, and the per-scheme bounds."""

from __future__ import annotations

import pytest

from controller.ip_multicast import deploy_multicast, multicast_tree
from controller.p4runtime import DeployError
from experiments.ndn import link_bytes, probe_for, scheme_bound
from topologies import leaf_spine


def test_multicast_tree_reaches_every_member_once() -> None:
    """The tree: h1's leaf replicates to its local member and up one spine; that spine
    down to the other leaf; the other leaf to its members. No port twice, never h1."""
    topo = leaf_spine(2, 2, 3)
    tree = multicast_tree(topo, "h1", ["h2", "h4", "h5"])
    leaf1, leaf2 = topo.iface("h1")["switch"], topo.iface("h4")["switch"]
    assert topo.port(leaf1, "h1") not in tree[leaf1]
    assert topo.port(leaf1, "h2") in tree[leaf1] and topo.port(leaf1, "h3") not in tree[leaf1]
    assert sorted(tree[leaf2]) == sorted([topo.port(leaf2, "h4"), topo.port(leaf2, "h5")])
    spines = [s for s in tree if s not in (leaf1, leaf2)]
    assert len(spines) == 1 and tree[spines[0]] == [topo.port(spines[0], leaf2)]
    assert all(len(set(p)) == len(p) for p in tree.values())


def test_multicast_tree_refuses_bad_input() -> None:
    topo = leaf_spine(2, 2, 3)
    with pytest.raises(DeployError, match="cannot be a member"):
        multicast_tree(topo, "h1", ["h1", "h2"])
    with pytest.raises(DeployError, match="not an IPv4 multicast"):
        deploy_multicast(topo, {}, "h1", ["h2"], group="10.0.0.9")


def test_link_bytes_from_switch_port_counters() -> None:
    """A switch->x link counts the switch's sent bytes; a host's uplink what the switch's
    port received; unchanged links are left out."""
    topo = leaf_spine(2, 2, 3)
    leaf = topo.iface("h1")["switch"]
    hp = topo.port(leaf, "h1")
    sp = next(p for p in topo.ports(leaf) if topo.is_switch(topo.peer(leaf, p)[0]))
    spine = topo.peer(leaf, sp)[0]
    before = {(leaf, hp): (100, 200), (leaf, sp): (0, 0)}
    after = {(leaf, hp): (1100, 5200), (leaf, sp): (700, 0)}
    got = link_bytes(topo, before, after)
    assert got == {f"{leaf}->h1": 1000, f"h1->{leaf}": 5000, f"{leaf}->{spine}": 700}


def test_bounds_count_one_update_copy_for_multicast_schemes() -> None:
    # 5 GPUs, 100k values (400 kB), 20 Mbit/s: 0.16 s per model copy over the PS's link
    assert scheme_bound("ndn", 5, 100_000, 20, 0.2) == pytest.approx(0.2 + 6 * 0.16)
    assert scheme_bound("ipmc", 5, 100_000, 20, 0.2) == scheme_bound("ndn", 5, 100_000, 20, 0.2)
    assert scheme_bound("ip", 5, 100_000, 20, 0.2) == pytest.approx(0.2 + 10 * 0.16)
    assert scheme_bound("tcp", 5, 100_000, 20, 0.2) == scheme_bound("ip", 5, 100_000, 20, 0.2)
    assert probe_for(5, 3818, 20) == 2.0                 # the agents' default for small models
    assert probe_for(5, 1_000_000, 20) > 2 * 10 * 1.6    # twice a unicast round's link time


def test_bench_table_pairs_by_seed_and_leaves_failed_runs_out(tmp_path, capsys) -> None:  # noqa: ANN001
    """``bench ndn-baselines --from-rows``: means over the exact runs, ratios to NDN paired
    by seed, a later file's row replacing an earlier one (a rerun)."""
    import json

    from bench.ndn_baselines import main

    def row(seed: int, scheme: str, t: float, b: float, exact: bool = True) -> dict:
        return {"values": 1000, "seed": seed, "scheme": scheme, "rounds": 2, "exact": exact,
                "problems": [], "round_s": t, "bound_s": 0.5, "fabric_bytes_per_round": b,
                "busiest_link": "s3->h1", "busiest_bytes_per_round": b / 4}

    first = [row(0, "ndn", 1.0, 100.0), row(1, "ndn", 2.0, 100.0),
             row(0, "ip", 2.0, 150.0), row(1, "ip", 99.0, 1.0, exact=False)]
    rerun = [row(1, "ip", 4.0, 150.0)]
    (tmp_path / "a.json").write_text(json.dumps(first))
    (tmp_path / "b.json").write_text(json.dumps(rerun))
    assert main(["--from-rows", f"{tmp_path / 'a.json'}", "--schemes", "ndn,ip"]) == 1   # a failed run
    out = capsys.readouterr().out
    assert "1/2" in out                                   # IP: one exact run of two
    assert main(["--from-rows", f"{tmp_path / 'a.json'},{tmp_path / 'b.json'}", "--schemes", "ndn,ip"]) == 0
    out = capsys.readouterr().out
    assert "2.00 ± 0.00" in out and "1.50 ± 0.00" in out   # time / NDN 2, 2; bytes / NDN 1.5, 1.5
