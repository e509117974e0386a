"""``gradctl place`` and ``gradctl ina deploy|counters`` (controller/cli.py).

The offline part runs the console script in subprocesses, as a user would, and compares
its output with the placement module called directly. The ``net`` test starts a fat-tree
k=4, deploys a job with ``gradctl ina deploy``, runs the agent commands it prints in the
Mininet hosts, checks the sums element by element and reads ``gradctl ina counters``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from controller.placement import PlacementProblem, greedy_placement, optimal_placement
from tests.netenv import net_skip_reason
from topologies import fat_tree

ROOT = Path(__file__).resolve().parent.parent
GRADCTL = ROOT / ".venv" / "bin" / "gradctl"
PLACE = ["place", "fat-tree:4", "--ps", "h1", "--budget", "2", "--capacity", "1000"]


def gradctl(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run ``gradctl ARGS`` (the console script, else ``python -m controller.cli``)."""
    cmd = [str(GRADCTL)] if GRADCTL.exists() else [sys.executable, "-m", "controller.cli"]
    # wide: the tests read table rows (at 80 columns wide tables fold to key/value rows)
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, env=dict(os.environ, COLUMNS="250"))


@pytest.fixture(scope="module")
def greedy() -> Any:
    """The placement the CLI must reproduce: greedy on fat-tree k=4, PS h1, K=2, C=1000."""
    topo = fat_tree(4)
    prob = PlacementProblem(topo, "h1", [h for h in topo.hosts() if h != "h1"], 2, 1000.0)
    return greedy_placement(prob)


# ----------------------------------------------------------------------------- place


def test_place_tables_name_the_greedy_switches(greedy: Any) -> None:
    r = gradctl(*PLACE)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    gamma = float(re.search(r"γ = ([0-9.]+) Mbit/s per worker", out).group(1))
    assert gamma == pytest.approx(greedy.gamma, abs=0.005)
    assert f"greedy: switches {', '.join(greedy.switches)};" in out
    # chosen switches in selection order with their device ids, then s_d
    rows = re.findall(r"^\s+(\d+|s_d)\s+(s\d+)\s+(\d+)\s+(core|agg|edge)\s", out, re.M)
    assert [(o, s) for o, s, _, _ in rows] == [
        *((str(i), s) for i, s in enumerate(greedy.switches, start=1)),
        ("s_d", greedy.result.tor),
    ]
    assert all(int(dev) == int(s[1:]) for _, s, dev, _ in rows)  # fat-tree: s<N> has id N
    # the greedy trace: one row per round with the chosen switch and its gamma
    for rnd in greedy.trace:
        assert re.search(rf"^\s+{rnd.round + 1}\s+{rnd.chosen}\s+\d+\s+{rnd.gamma:.2f}\s", out,
                         re.M), f"round {rnd.round + 1} missing"
    # one split-rate row per worker (rank order), summing to gamma
    for rank, w in enumerate(greedy.problem.workers):
        m = re.search(rf"^\s+{rank}\s+{w}\s+(.*)$", out, re.M)
        assert m and m.group(1).split()[-1] == f"{greedy.gamma:.2f}"


def test_place_json_matches_the_library(greedy: Any) -> None:
    from wire.ina_policy import Policy

    r = gradctl(*PLACE, "--json", "--fragments", "8")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["switches"] == list(greedy.switches)
    assert d["sd"] == greedy.result.tor
    assert d["gamma"] == pytest.approx(greedy.gamma, rel=1e-9)
    assert [t["chosen"] for t in d["trace"]] == [t.chosen for t in greedy.trace]
    assert [a["switch"] for a in d["aggregators"]] == [*greedy.switches, greedy.result.tor]
    for w, rates in greedy.rates.items():
        assert d["rates"][w] == pytest.approx(rates, abs=1e-6)
        assert sum(d["rates"][w].values()) == pytest.approx(greedy.gamma, rel=1e-6)
    loads = {(x["from"], x["to"]): x["load"] for x in d["link_loads"]}
    assert loads == pytest.approx(greedy.result.link_loads)
    # the routing policy in the docs/ina_policy.md format, as the agents read it
    pol = Policy.from_dict(d["policy"])
    assert pol.num_fragments == 8 and len(pol.workers) == 15
    assert pol.sd is not None and pol.sd.id == 7  # s7, the PS's ToR
    assert {int(k) for k in d["policy"]["switch_ips"]} == {3, 4, 7}


def test_place_all_methods_compares_with_the_milp(greedy: Any) -> None:
    opt = optimal_placement(greedy.problem)
    r = gradctl(*PLACE, "--method", "all", "--json")
    assert r.returncode == 0, r.stderr
    rows = {c["method"]: c for c in json.loads(r.stdout)["comparison"]}
    assert set(rows) == {"greedy", "milp", "random(seed=0)", "tor-first", "degree-first"}
    assert rows["milp"]["gamma"] == pytest.approx(opt.gamma, rel=1e-6)
    assert rows["milp"]["gap"] == 0.0 and rows["milp"]["optimal"] is True
    assert rows["greedy"]["gap"] == pytest.approx(0.0, abs=1e-6)  # greedy is optimal here
    assert all(0.0 <= c["gap"] <= 1.0 for c in rows.values())
    # the table form has the same MILP row
    t = gradctl(*PLACE, "--method", "all")
    assert t.returncode == 0, t.stderr
    milp = re.search(r"^\s+milp\s+(s\d+, s\d+)\s+([0-9.]+)\s+0\.00% \(optimal\)", t.stdout, re.M)
    assert milp and float(milp.group(2)) == pytest.approx(opt.gamma, abs=0.005)


@pytest.mark.long  # the plot's flows are checked against the LP in test_plot_flows_add_up_to_the_lp_link_loads
def test_place_plot_writes_a_png(tmp_path: Path) -> None:
    png = tmp_path / "placement.png"
    r = gradctl(*PLACE, "--plot", str(png))
    assert r.returncode == 0, r.stderr
    assert f"plot written to {png}" in r.stdout
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_plot_flows_add_up_to_the_lp_link_loads(greedy: Any) -> None:
    from controller.plot import placement_flows

    total: dict[tuple[str, str], float] = {}
    for loads in placement_flows(greedy).values():
        for arc, v in loads.items():
            total[arc] = total.get(arc, 0.0) + v
    assert total == pytest.approx(greedy.result.link_loads)


# ----------------------------------------------------------------------------- errors

DISCONNECTED = """\
name: split
hosts: [h1, h2, h3, h4]
switches: [s1, s2]
links: [[h1, s1], [h2, s1], [h3, s2], [h4, s2]]
"""

ERROR_CASES = [
    # (id, arguments, part of the message); {tmp} is a per-test directory
    ("unknown-ps", ["place", "fat-tree:4", "--ps", "h99", "--budget", "2", "--capacity", "1000"],
     "unknown host 'h99' for --ps"),
    ("ps-is-switch", ["place", "fat-tree:4", "--ps", "s1", "--budget", "2", "--capacity", "1000"],
     "'s1' is a switch, not a host"),
    ("unknown-worker", [*PLACE, "--workers", "h2,h77"], "unknown host 'h77' for --workers"),
    ("worker-is-ps", [*PLACE, "--workers", "h2,h1"], "worker 'h1' is the parameter server"),
    ("k-over-switches", ["place", "fat-tree:4", "--ps", "h1", "--budget", "21", "--capacity",
                         "1000"], "budget K=21 is larger than the 20 switches"),
    ("k-over-candidates", ["place", "fat-tree:4", "--ps", "h1", "--budget", "20", "--capacity",
                           "1000"], "exceeds the 19 candidate switches"),
    ("infeasible-capacity", ["place", "fat-tree:4", "--ps", "h1", "--budget", "2",
                             "--capacity", "0"], "--capacity: must be > 0 (got 0)"),
    ("disconnected", ["place", "{tmp}/split.yaml", "--ps", "h1", "--budget", "1",
                      "--capacity", "100"], "the graph is disconnected"),
    ("missing-topology-file", ["place", "{tmp}/nope.yaml", "--ps", "h1", "--budget", "1",
                               "--capacity", "100"], "not found"),
    ("bad-topology-file", ["place", "{tmp}/bad.yaml", "--ps", "h1", "--budget", "1",
                           "--capacity", "100"], "bad.yaml"),
    ("plot-dir-missing", [*PLACE, "--plot", "{tmp}/no/such/dir/x.png"], "does not exist"),
    ("policy-missing", ["ina", "counters", "fat-tree:4", "--run-dir", "{tmp}", "--policy",
                        "{tmp}/nope.json"], "No such file"),
    ("policy-not-json", ["ina", "counters", "fat-tree:4", "--run-dir", "{tmp}", "--policy",
                         "{tmp}/bad.yaml"], "--policy"),
    ("policy-other-topology", ["ina", "counters", "fat-tree:4", "--run-dir", "{tmp}",
                               "--policy", "{tmp}/policy99.json"], "switch id 99"),
    ("addresses-missing", ["ina", "deploy", "fat-tree:4", "--addresses", "{tmp}/nope.yaml",
                           "--ps", "h1", "--budget", "2", "--capacity", "1000", "--values",
                           "64"], "cannot read address file"),
    ("run-dir-without-network", ["ina", "deploy", "fat-tree:4", "--run-dir", "{tmp}", "--ps",
                                 "h1", "--budget", "2", "--capacity", "1000", "--values", "64"],
     "no P4Runtime socket"),
    ("deploy-worker-is-ps", ["ina", "deploy", "fat-tree:4", "--run-dir", "{tmp}", "--ps", "h1",
                             "--workers", "h1", "--budget", "2", "--capacity", "1000",
                             "--values", "64"], "is the parameter server"),
]


@pytest.fixture(scope="module")
def error_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("cli_errors")
    (d / "split.yaml").write_text(DISCONNECTED)
    (d / "bad.yaml").write_text("::: not a topology [\n")
    (d / "policy99.json").write_text(json.dumps({
        "job": 1, "ps": "10.0.0.1", "workers": ["10.0.0.2"], "num_fragments": 1, "tags": 99,
    }))
    return d


@pytest.mark.parametrize(("args", "message"), [c[1:] for c in ERROR_CASES],
                         ids=[c[0] for c in ERROR_CASES])
def test_errors_are_one_line_with_exit_2(error_dir: Path, args: list[str], message: str) -> None:
    r = gradctl(*(a.replace("{tmp}", str(error_dir)) for a in args))
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gradctl: error: "), r.stderr
    assert message in lines[0]
    assert "Traceback" not in r.stderr and r.stdout == ""


# ----------------------------------------------------------------------------- network


def _skip_reason() -> str | None:
    return net_skip_reason("ina")


@pytest.fixture
def network(tmp_path: Path) -> Iterator[tuple[Any, Path]]:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    from topologies.network import Network

    run_dir = tmp_path / "run"
    net = Network(fat_tree(4), run_dir=str(run_dir))
    net.start()
    try:
        yield net, run_dir
    finally:
        net.stop()


@pytest.mark.net
@pytest.mark.timeout(120)
def test_ina_deploy_and_counters_on_a_running_network(network: tuple[Any, Path],
                                                      tmp_path: Path) -> None:
    from wire.fixedpoint import quantize
    from wire.ina_policy import Policy

    net, run_dir = network
    workers = ["h2", "h5", "h9"]
    values = 512  # 8 fragments of 64
    r = gradctl("ina", "deploy", "fat-tree:4", "--run-dir", str(run_dir), "--ps", "h1",
                "--workers", ",".join(workers), "--budget", "1", "--capacity", "1000",
                "--values", str(values), "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert len(d["entries"]) == 20 and all(n > 0 for n in d["entries"].values())
    aggs = [a["switch"] for a in d["aggregators"]]
    assert aggs == [*d["switches"], d["sd"]] and d["sd"] == "s7" and len(d["switches"]) == 1
    pol = Policy.load(d["policy"])
    assert pol.num_fragments == 8 and len(pol.workers) == 3

    # run the printed commands in the hosts: ARP setup, the PS, then the workers
    for h, cmd in d["host_setup"].items():
        net.host(h).cmd(cmd)
    (ps_host, ps_cmd), *worker_cmds = d["commands"].items()
    assert ps_host == "h1" and [h for h, _ in worker_cmds] == workers
    logs = tmp_path / "logs"
    logs.mkdir()

    def spawn(host: str, cmd: str, extra: list[str]) -> Any:
        with open(logs / f"{host}.out", "wb") as out, open(logs / f"{host}.err", "wb") as err:
            return net.host(host).popen([*shlex.split(cmd), *extra], cwd=str(ROOT),
                                        stdout=out, stderr=err)

    ps = spawn(ps_host, ps_cmd, ["--json", "--linger", "2", "--max-time", "40"])
    time.sleep(0.5)  # the PS binds its socket first
    procs = [spawn(h, cmd, ["--json", "--timeout", "1.0", "--max-time", "40",
                            "--out-int", str(logs / f"{h}.npy")]) for h, cmd in worker_cmds]
    for h, p in zip(workers, procs, strict=True):
        assert p.wait(timeout=60) == 0, (logs / f"{h}.err").read_text()
    assert ps.wait(timeout=60) == 0, (logs / "h1.err").read_text()
    # every worker got the exact sum of all workers' fixed-point gradients
    grads = [np.random.default_rng([0, rank]).standard_normal(values).astype(np.float32)
             for rank in range(len(workers))]
    expected = sum(quantize(g, pol.scale_bits, len(grads)).astype(np.int64) for g in grads)
    expected = ((expected + 2**31) % 2**32 - 2**31).astype(np.int32)
    for h in workers:
        got = np.load(logs / f"{h}.npy")
        assert np.array_equal(got[:values], expected), f"{h}: wrong sums"

    # the counters of the aggregating switches named by the policy file, and the
    # admission drops of those and of the job's hosts' switches (none: no intruder)
    c = gradctl("ina", "counters", "fat-tree:4", "--run-dir", str(run_dir), "--policy",
                d["policy"], "--json")
    assert c.returncode == 0, c.stderr
    counters = json.loads(c.stdout)
    topo = fat_tree(4)
    edges = {topo.iface(h)["switch"] for h in ["h1", *workers]}
    assert set(counters) == set(aggs) | edges
    assert all(e["not_member"] == e["not_server"] == e["wrong_bit"] == 0
               for e in counters.values())
    assert all(e["ip_options"] == e["ip_fragment"] == e["src_spoof"] == 0 for e in counters.values())
    events = {s: counters[s] for s in aggs}
    assert events["s7"]["result"] >= pol.num_fragments  # every RESULT went through s_d
    assert sum(e["added"] for e in events.values()) > 0
    t = gradctl("ina", "counters", "fat-tree:4", "--run-dir", str(run_dir), "--policy",
                d["policy"])
    assert t.returncode == 0, t.stderr
    assert re.search(r"^\s+s7\s+7\s+s_d\s", t.stdout, re.M)
    assert re.search(rf"^\s+{d['switches'][0]}\s+\d+\s+S\s", t.stdout, re.M)
    assert "ina_admission_drops" in t.stdout and "not_member" in t.stdout
    assert "ip_options" in t.stdout and "ip_fragment" in t.stdout and "src_spoof" in t.stdout
