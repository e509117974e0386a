"""BML on a BCube in ns-3, against the baselines the emulator's bcube experiment
runs (experiments/bcube.py: the sharded PS and ring all-reduce on the smallest fat-tree with
as many servers, host links at the same rate, fabric links 4x).

Every scheme runs over ns-3's TCP with framed messages (sim/model.cc:MsgHost): BML is
hosts/bml/agent.py's schedule (:class:`wire.bcube_schedule.BcubeSchedule`: ``k`` threads
per server, thread ``j`` reduce-scattering its parameter set level by level from level
``j``, then gathering in reverse), one TCP connection per (level, peer) as
hosts/bml/transport.py opens them; a server's level-``l`` traffic leaves through its
level-``l`` NIC and crosses one switch. The sharded PS is hosts/bml/baselines.py's
(shards in 8 pieces, a piece's sum sent back as soon as its pushes are in); the ring is
sim/core.py:run_ring."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from topologies import Topology, bcube
from wire.bcube_schedule import BcubeSchedule, cut

from .core import Loss, Ns3Network, SimError, SimResult, run_ring

MSG_PORT = 42000
GO_S = 0.01  # every server starts at this simulated time, its connections up

# one host's program for MsgHost: connections (local, remote address), steps (thread,
# waits [(id, count)], sends [(connection, bytes, id)])
Conn = tuple[int, int]
Step = tuple[int, list[tuple[int, int]], list[tuple[int, int, int]]]


def _run_msgs(net: Ns3Network, programs: dict[str, tuple[list[Conn], list[Step]]],
              scheme: str, values: int, max_time: float) -> SimResult:
    ns, g = net.ns, net.g
    std = __import__("cppyy").gbl.std
    u32 = std.vector["uint32_t"]
    apps = []
    for host, (conns, steps) in programs.items():
        a = g.AddMsgHost(net.node(host), 0.0)
        a.port, a.go_s = MSG_PORT, GO_S
        for lo, rem in conns:
            a.conn_local.push_back(ns.Ipv4Address(lo))
            a.conn_remote.push_back(ns.Ipv4Address(rem))
        st, woff, wid, wcnt, soff, sc, sb, sid = [], [0], [], [], [0], [], [], []
        for t, waits, sends in steps:
            st.append(t)
            for i, c in waits:
                wid.append(i)
                wcnt.append(c)
            woff.append(len(wid))
            for c, b, i in sends:
                sc.append(c)
                sb.append(b)
                sid.append(i)
            soff.append(len(sc))
        a.step_thread, a.wait_off, a.wait_id, a.wait_count = u32(st), u32(woff), u32(wid), u32(wcnt)
        a.send_off, a.send_conn, a.send_bytes, a.send_id = u32(soff), u32(sc), u32(sb), u32(sid)
        apps.append((a, len(conns)))
    ns.Simulator.Stop(ns.Seconds(GO_S + max_time))
    ns.Simulator.Run()
    late = sum(1 for a, n in apps if a.connected < n)
    done = [a.done_s - a.start_s if a.done_s >= 0 else None for a, _ in apps]
    bound, where, nbytes = net.busiest()
    secs = None if any(d is None for d in done) else max(done)
    res = SimResult(scheme, len(apps), values, secs, bound, where, nbytes,
                    counters={"hosts_not_all_connected_at_go": late})
    ns.Simulator.Destroy()
    return res


def _mid(thread: int, stage: int) -> int:
    return thread * 64 + stage


def bcube_size(topo: Topology) -> tuple[int, int]:
    """``(n, k)`` of a BCube topology (``topologies.bcube``: servers carry ``digits``)."""
    hosts = topo.hosts()
    digits = topo.graph.nodes[hosts[0]].get("digits") if hosts else None
    if not digits:
        raise SimError("BML needs a BCube topology (bcube:N,K)")
    k = len(digits)
    n = round(len(hosts) ** (1.0 / k))
    if n**k != len(hosts):
        raise SimError(f"{len(hosts)} servers are not N**{k}")
    return n, k


def run_bml(n: int, k: int, values: int, gbps: float = 100.0, *, max_time: float = 60.0,
            pipeline: int = 1, topo: Topology | None = None, loss: Loss = 0.0) -> SimResult:
    """BML's all-reduce of ``values`` int32 values on BCube(``n``, ``k``), links ``gbps``
    (or on ``topo``, a ``bcube:N,K`` topology with its own link rates)."""
    try:
        sched = BcubeSchedule(n, k, values)
    except ValueError as e:
        raise SimError(str(e)) from None
    topo = topo or bcube(n, k, bw=gbps * 1000.0)
    net = Ns3Network(topo, loss=loss)
    hosts = topo.hosts()
    nic: dict[tuple[int, int], int] = {}  # (server, level) -> address
    for s, h in enumerate(hosts):
        for sw in topo.graph[h]:
            nic[(s, int(topo.graph.nodes[sw]["level"]))] = net.addr[(h, sw)]
    programs: dict[str, tuple[list[Conn], list[Step]]] = {}
    pieces = [(j, rng) for j in range(k) for rng in cut(sched.parameter_set(j), pipeline)]
    for s, h in enumerate(hosts):
        conns: list[Conn] = []
        cidx: dict[tuple[int, int], int] = {}
        for lvl in range(k):
            for p in sched.peers(s, lvl):
                if p != s:
                    cidx[(lvl, p)] = len(conns)
                    conns.append((nic[(s, lvl)], nic[(p, lvl)]))
        steps: list[Step] = []
        for t, (j, rng) in enumerate(pieces):
            ex = sched.exchanges(s, j, rng)
            for i, e in enumerate(ex):
                waits = [(_mid(t, i - 1), n - 1)] if i else []
                sends = [(cidx[(e.level, p)], 4 * (b - a), _mid(t, i))
                         for p, (a, b) in e.sends().items()]
                steps.append((t, waits, sends))
            steps.append((t, [(_mid(t, len(ex) - 1), n - 1)], []))
        programs[h] = (conns, steps)
    return _run_msgs(net, programs, "bml", values, max_time)


def run_sharded_ps(topo: Topology, servers: list[str], values: int, *, chunks: int = 8,
                   max_time: float = 60.0, loss: Loss = 0.0) -> SimResult:
    """hosts/bml/baselines.py:sharded_ps among ``servers`` (one NIC each)."""
    s_n = len(servers)
    if s_n < 2 or values < s_n * chunks:
        raise SimError("the sharded PS needs 2 servers and values >= servers * chunks")
    net = Ns3Network(topo, loss=loss)
    pieces = [cut(sh, chunks) for sh in cut((0, values), s_n)]
    push, pull = 0, 1 << 16
    programs: dict[str, tuple[list[Conn], list[Step]]] = {}
    for me, h in enumerate(servers):
        others = [(me + i) % s_n for i in range(1, s_n)]  # staggered: no hot receiver
        conns = [(net.first_addr[h], net.first_addr[servers[t]]) for t in others]
        ci = {t: i for i, t in enumerate(others)}
        steps: list[Step] = [(0, [], [(ci[t], 4 * (b - a), push + c)
                                      for c in range(chunks) for t in others
                                      for a, b in [pieces[t][c]]])]
        for c in range(chunks):
            a, b = pieces[me][c]
            steps.append((0, [(push + c, s_n - 1)],
                          [(ci[t], 4 * (b - a), pull + c) for t in others]))
        steps.append((0, [(pull + c, s_n - 1) for c in range(chunks)], []))
        programs[h] = (conns, steps)
    return _run_msgs(net, programs, "sharded_ps", values, max_time)


@dataclass
class BcubeRow:
    """One scheme on BCube(n, k)'s servers."""

    n: int
    k: int
    servers: int
    scheme: str
    seconds: float | None
    bound_s: float
    bound_link: str
    wall_s: float


def bcube_rows(n: int, k: int, values: int, gbps: float = 100.0,
               schemes: tuple[str, ...] = ("bml", "sharded_ps", "ring"), fabric_x: float = 4.0,
               max_time: float = 60.0) -> list[BcubeRow]:
    """BML on BCube(n, k) and the baselines on experiments/bcube.py's fat-tree."""
    from controller.bcube import baseline_fat_tree

    servers = n**k
    rows = []
    for s in schemes:
        t0 = time.monotonic()
        if s == "bml":
            r: Any = run_bml(n, k, values, gbps, max_time=max_time)
        else:
            topo = baseline_fat_tree(servers, gbps * 1000.0, fabric_x)
            hosts = topo.hosts()[:servers]
            r = (run_sharded_ps(topo, hosts, values, max_time=max_time) if s == "sharded_ps"
                 else run_ring(topo, hosts, values, max_time=max_time))
        rows.append(BcubeRow(n, k, servers, s, r.seconds, r.bound_s, r.bound_link,
                             time.monotonic() - t0))
    return rows
