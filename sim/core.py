"""Build a gradnet topology in ns-3 and run one gradient synchronization on it.

Inputs are the emulator's: a :class:`topologies.Topology` (spec or file; link capacities in
Mbit/s), the routing-policy dict the agents read (``InaJob.policy_dict()``, docs/ina_policy.md;
a PS baseline has ``tags = 0`` and ``sd = null``), the gradient size, the agents' window and
retransmission timeout. Per-packet work is C++ (sim/model.cc); Python only builds and reads.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from topologies import Topology
from wire.ina import INA_HEADER_LEN, INA_VALUE_SIZES, INA_VALUES

from .ns3env import load

#: Ethernet header bytes the emulator's frames carry and ns-3's point-to-point frames (2-byte
#: PPP header) do not: added to every INA payload so a packet costs a link what it costs there.
ETH_EXTRA = 12
RING_PORT = 41000


class SimError(ValueError):
    """Bad simulation input (reported as one line by the CLI)."""


@dataclass
class SimResult:
    """One simulated synchronization."""

    scheme: str
    workers: int
    values: int
    seconds: float | None  # slowest worker: first send -> whole sum back (None: unfinished)
    bound_s: float  # line-rate bound: the busiest link's transmitted bytes at its rate
    bound_link: str
    bound_bytes: int = 0
    retransmissions: int = 0
    counters: dict[str, int] = field(default_factory=dict)
    #: what the run cost the simulator: ns-3 events, frames sent over all links
    work: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """A plain dict (JSON)."""
        return asdict(self)


#: loss: one rate on every link, or the emulator's ``--loss SW:PORT=RATE`` specs as
#: ``{(switch, port): rate}`` (a switch egress port: the packets it sends there)
Loss = float | Mapping[tuple[str, int], float]


def _loss(topo: Topology, loss: Loss) -> tuple[float, dict[tuple[str, int], float]]:
    if not isinstance(loss, Mapping):
        if not 0.0 <= float(loss) < 1.0:
            raise SimError(f"loss must be in [0, 1), got {loss}")
        return float(loss), {}
    out: dict[tuple[str, int], float] = {}
    for (sw, port), rate in loss.items():
        if sw not in topo.graph or not topo.is_switch(sw):
            raise SimError(f"loss on {sw}:{port}: unknown switch {sw!r}")
        if port not in topo.ports(sw):
            raise SimError(f"loss on {sw}:{port}: {sw} has no port {port}")
        if not 0.0 <= float(rate) < 1.0:
            raise SimError(f"loss on {sw}:{port} must be in [0, 1), got {rate}")
        out[(sw, int(port))] = float(rate)
    return 0.0, out


class Ns3Network:
    """``topo`` as ns-3 nodes and point-to-point links, static shortest-path host routes
    (``pins`` ``{switch: {other switch: neighbour}}``: the routes to those switches'
    addresses pinned to one next hop each, as controller/routing.py's ``loopback_paths``)."""

    def __init__(self, topo: Topology, loss: Loss = 0.0, delay_us: float = 1.0,
                 queue_packets: int = 1000,
                 pins: dict[str, dict[str, str]] | None = None) -> None:
        rate_all, port_loss = _loss(topo, loss)
        ns, g = load()
        self.ns, self.g, self.topo = ns, g, topo
        ns.Simulator.Destroy()
        ns.Config.SetDefault("ns3::TcpSocket::SegmentSize", ns.UintegerValue(1448))
        ns.Config.SetDefault("ns3::TcpSocket::SndBufSize", ns.UintegerValue(4 << 20))
        ns.Config.SetDefault("ns3::TcpSocket::RcvBufSize", ns.UintegerValue(4 << 20))
        names = [*topo.hosts(), *topo.switches()]
        self.index = {n: i for i, n in enumerate(names)}
        self.names = names
        self.nodes = ns.NodeContainer()
        self.nodes.Create(len(names))
        ns.InternetStackHelper().Install(self.nodes)
        addr = ns.Ipv4AddressHelper()
        addr.SetBase(ns.Ipv4Address("10.0.0.0"), ns.Ipv4Mask("255.255.255.252"))
        p2p = ns.PointToPointHelper()
        p2p.SetChannelAttribute("Delay", ns.StringValue(f"{delay_us}us"))
        p2p.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", ns.StringValue(f"{queue_packets}p"))
        adj: list[list[int]] = [[] for _ in names]
        ifc: list[list[int]] = [[] for _ in names]
        self.first_addr: dict[str, int] = {}
        self.addr: dict[tuple[str, str], int] = {}  # (u, v): u's address on its link to v
        self.ifc: dict[tuple[str, str], int] = {}  # (u, v): u's interface toward v
        self.devices: dict[tuple[str, str], Any] = {}
        self.rates: dict[tuple[str, str], float] = {}
        self.tx_order: list[tuple[str, str]] = []
        self._em = []
        for link in topo.links():
            a, b = link.a, link.b
            p2p.SetDeviceAttribute("DataRate", ns.StringValue(f"{link.capacity * 1e6:.0f}bps"))
            devs = p2p.Install(self.nodes.Get(self.index[a]), self.nodes.Get(self.index[b]))
            ifs = addr.Assign(devs)
            addr.NewNetwork()
            for j, (u, v) in enumerate(((a, b), (b, a))):
                ip4 = self.nodes.Get(self.index[u]).GetObject[ns.Ipv4]()
                k = ip4.GetInterfaceForDevice(devs.Get(j))
                adj[self.index[u]].append(self.index[v])
                ifc[self.index[u]].append(int(k))
                self.first_addr.setdefault(u, int(ifs.GetAddress(j).Get()))
                self.addr[(u, v)] = int(ifs.GetAddress(j).Get())
                self.ifc[(u, v)] = int(k)
                self.devices[(u, v)] = devs.Get(j)
                self.rates[(u, v)] = link.capacity * 1e6
                g.CountTx(devs.Get(j), len(self.tx_order))
                self.tx_order.append((u, v))
                # packets u sends to v are lost at v's device: the rate of u's egress port
                # toward v where --loss names it, else the rate on every link
                rate = port_loss.get((u, topo.port(u, v)), rate_all) if topo.is_switch(u) \
                    else rate_all
                if rate > 0:
                    em = ns.CreateObject[ns.RateErrorModel]()
                    em.SetAttribute("ErrorRate", ns.DoubleValue(rate))
                    em.SetAttribute("ErrorUnit", ns.StringValue("ERROR_UNIT_PACKET"))
                    devs.Get(1 - j).SetAttribute("ReceiveErrorModel", ns.PointerValue(em))
                    self._em.append(em)
        self._install_routes(adj, ifc, pins)

    def _install_routes(self, adj: list[list[int]], ifc: list[list[int]],
                        pins: dict[str, dict[str, str]] | None) -> None:
        """Static shortest-path routes to every host NIC and switch address (``adj`` and
        ``ifc``: each node's neighbours and the interfaces toward them), then the pins."""
        names, topo, g = self.names, self.topo, self.g
        std = __import__("cppyy").gbl.std
        vv = std.vector[std.vector[int]]
        adj_c, ifc_c = vv(), vv()
        for u in range(len(names)):
            adj_c.push_back(std.vector[int](adj[u]))
            ifc_c.push_back(std.vector[int](ifc[u]))
        nics: dict[str, list[tuple[str, int]]] = {}
        for (u, v), a in self.addr.items():
            nics.setdefault(u, []).append((v, a))
        dsts: list[tuple[int, int, int]] = []  # (address, owner, attachment switch or -1)
        for u in names:
            if topo.is_host(u):
                dsts += [(a, self.index[u], self.index[v]) for v, a in nics.get(u, [])]
            elif u in self.first_addr:
                dsts.append((self.first_addr[u], self.index[u], -1))
        is_host = std.vector[int]([1 if topo.is_host(n) else 0 for n in names])
        g.InstallRoutes(self.nodes, adj_c, ifc_c, std.vector["uint32_t"]([a for a, _, _ in dsts]),
                        std.vector[int]([o for _, o, _ in dsts]),
                        std.vector[int]([t for _, _, t in dsts]), is_host)
        self.pinned = 0
        for s, hops in (pins or {}).items():
            for u, v in hops.items():
                g.PinRoute(self.index[u], self.first_addr[s], self.ifc[(u, v)])
                self.pinned += 1

    def busiest(self) -> tuple[float, str, int]:
        """``(seconds, "u->v", bytes)``: the link whose transmitted bytes take longest at
        its rate (read after a run, before ``Simulator.Destroy``)."""
        best = (0.0, "-", 0)
        for i, (u, v) in enumerate(self.tx_order):
            b = int(self.g.TxBytes(i))
            t = b * 8 / self.rates[(u, v)]
            if t > best[0]:
                best = (t, f"{u}->{v}", b)
        return best

    def work(self, run_s: float, cpu_s: float) -> dict[str, float]:
        """What the run cost the simulator (read after a run, before ``Simulator.Destroy``):
        ns-3 events executed, frames transmitted over all links (packet-hops), and the wall
        and CPU seconds of ``Simulator.Run`` (``run_s``, ``cpu_s``: on a shared machine
        the CPU seconds are the simulator's own rate)."""
        return {"events": int(self.ns.Simulator.GetEventCount()),
                "link_packets": int(self.g.TxPackets(len(self.tx_order))), "run_s": run_s,
                "cpu_s": cpu_s}

    def node(self, name: str) -> Any:
        """The ns-3 node of ``name``."""
        return self.nodes.Get(self.index[name])

    def ip(self, name: str) -> Any:
        """The address ``name`` answers at (hosts: their NIC; switches: their switch IP)."""
        return self.ns.Ipv4Address(self.first_addr[name])


# ----------------------------------------------------------------------------- policy -> model
def _host_by_ip(topo: Topology, ip: str) -> str:
    try:
        return topo.host_by_ip(ip)[0]
    except Exception as e:
        raise SimError(f"policy address {ip!r} is no host of the topology") from e


def _row(v: Any, n: int, what: str) -> list[int]:
    if isinstance(v, int):
        return [v] * n
    if not isinstance(v, list) or len(v) != n or not all(isinstance(x, int) for x in v):
        raise SimError(f"policy {what}: expected {n} integers")
    return v


def _check_policy(topo: Topology, policy: dict[str, Any]) -> dict[str, Any]:
    """Normalise the policy dict (rows expanded; ids checked against the topology);
    :class:`SimError` for anything malformed."""
    try:
        return _check_policy_fields(topo, policy)
    except SimError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise SimError(f"malformed policy: {e!r}") from None


def _check_policy_fields(topo: Topology, policy: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(policy, dict):
        raise SimError("policy must be a JSON object")
    try:
        ps = _host_by_ip(topo, policy["ps"])
        workers = [_host_by_ip(topo, w) for w in policy["workers"]]
        nf = int(policy["num_fragments"])
    except (KeyError, TypeError) as e:
        raise SimError(f"policy lacks or mistypes {e}") from None
    if nf < 1 or not workers:
        raise SimError("policy needs workers and num_fragments >= 1")
    vpp = policy.get("values_per_packet", INA_VALUES)
    if isinstance(vpp, bool) or vpp not in INA_VALUE_SIZES:
        raise SimError(f"policy values_per_packet {vpp!r} is not one of "
                       f"{', '.join(map(str, INA_VALUE_SIZES))}")
    tags_in = policy.get("tags", 0)
    tags = [_row(tags_in if isinstance(tags_in, int) else r, nf, "tags")
            for r in (tags_in if isinstance(tags_in, list) else [tags_in] * len(workers))]
    if len(tags) != len(workers):
        raise SimError("policy tags: one row per worker")
    sd = policy.get("sd")
    sd_id = int(sd["id"]) if sd else 0
    ids = {t for r in tags for t in r if t} | ({sd_id} if sd_id else set())
    for t in ids:
        try:
            topo.switch_by_id(t)
        except Exception as e:
            raise SimError(f"policy names switch id {t}, which the topology lacks") from e
    fan_raw = policy.get("fanin", {}) or {}
    fanin: dict[int, list[int]] = {int(k): _row(v, nf, "fanin") for k, v in fan_raw.items()}
    partial = {int(k): _row(v, nf, "partial_tags")
               for k, v in (policy.get("partial_tags") or {}).items()}
    for s in ids:  # missing fan-in: the count of workers tagging (s, f) (docs/ina_policy.md)
        if s not in fanin:
            fanin[s] = [sum(1 for r in tags if r[f] == s) for f in range(nf)]
    return {"ps": ps, "workers": workers, "nf": nf, "tags": tags, "sd": sd_id,
            "fanin": fanin, "partial": partial, "values_per_packet": int(vpp)}


def _path(topo: Topology, a: str, b: str) -> list[str]:
    import networkx as nx
    return nx.shortest_path(topo.graph, a, b)


def loopback_paths(topo: Topology, ps: str, workers: list[str],
                   switches: list[str]) -> dict[str, dict[str, str]]:
    """``{switch: {other switch: next hop}}`` toward each aggregating switch: the paths the
    placement's LP counts its link loads on (``PlacementProblem.next_hops_toward``, BFS
    trees of the graph alone), which controller/ina/deployment.py pins the emulator's
    loopback routes to."""
    if not switches:
        return {}
    from controller.placement import PlacementProblem

    prob = PlacementProblem(topo, ps, workers, 0, math.inf)
    return {s: prob.next_hops_toward(s) for s in switches}


def _stop_at(ns: Any, seconds: float) -> None:
    ns.Simulator.Stop(ns.Seconds(seconds))
    ns.Simulator.Run()


def _ina_switches(topo: Topology, net: Ns3Network, sw_of: dict[int, str], sd_id: int,
                  workers: list[str], ps: str, aggregators: int, payload: int,
                  aging_s: float) -> dict[str, Any]:
    """The switch models: the aggregating switches and every switch of the RESULT tree."""
    g = net.g
    # switches: the aggregating ones and every switch of the RESULT tree
    tree_children: dict[str, list[str]] = {}
    if sd_id:
        sd = sw_of[sd_id]
        for w in workers:  # shortest-path tree from s_d to every worker (one copy per link)
            p = _path(topo, sd, w)
            for u, v in zip(p, p[1:], strict=False):
                if v not in tree_children.setdefault(u, []):
                    tree_children[u].append(v)
    models: dict[str, Any] = {}
    for s in sorted(set(sw_of.values()) | set(tree_children)):
        m = g.AddSwitch(net.node(s), 0.0)
        m.id = topo.device_id(s)
        m.sd_id = sd_id
        m.aggregating = s in sw_of.values()
        m.slots, m.payload, m.aging_s = aggregators, payload, aging_s
        m.ps_ip = net.ip(ps)
        if sd_id:
            m.sd_ip = net.ip(sw_of[sd_id])
        for c in tree_children.get(s, []):
            m.tree_children.push_back(net.ip(c))
        models[s] = m
    return models


def _ina_ps(net: Ns3Network, pol: dict[str, Any], sw_of: dict[int, str], models: dict[str, Any],
            payload: int) -> Any:
    """The PS application: its workers, the switches to CLEAR per fragment, s_d."""
    g, nf, workers, ps, sd_id = net.g, pol["nf"], pol["workers"], pol["ps"], pol["sd"]
    psapp = g.AddPs(net.node(ps), 0.0)
    psapp.workers, psapp.frags, psapp.payload = len(workers), nf, payload
    psapp.clear_size = INA_HEADER_LEN + ETH_EXTRA
    psapp.has_sd = bool(sd_id)
    if sd_id:
        psapp.sd_id, psapp.sd_ip = sd_id, net.ip(sw_of[sd_id])
        psapp.sd_model = models[sw_of[sd_id]]
    for w in workers:
        psapp.worker_ip.push_back(net.ip(w))
    for i, s in sw_of.items():
        psapp.sw_ip[i] = net.ip(s)
    std = __import__("cppyy").gbl.std
    for f in range(nf):
        row = std.vector["uint16_t"](sorted({r[f] for r in pol["tags"] if r[f] and r[f] != sd_id}))
        psapp.clear_to.push_back(row)
    return psapp


def _ina_workers(net: Ns3Network, pol: dict[str, Any], sw_of: dict[int, str], payload: int,
                 window: int, timeout: float, max_backoff: float) -> list[Any]:
    """One worker application per rank, with its tags, fan-ins and VIA_SD flags."""
    g, nf, workers, ps, sd_id = net.g, pol["nf"], pol["workers"], pol["ps"], pol["sd"]
    std = __import__("cppyy").gbl.std
    apps = []
    for rank, w in enumerate(workers):
        a = g.AddWorker(net.node(w), 0.001)
        a.rank, a.frags, a.window, a.payload = rank, nf, window, payload
        a.timeout, a.max_backoff = timeout, max(max_backoff, timeout)
        a.ps = net.ip(ps)
        tags = pol["tags"][rank]
        fan, via, sdf = [], [], []
        for f, t in enumerate(tags):
            fan.append(pol["fanin"].get(t, [0] * nf)[f] if t else 0)
            v = 1 if t and sd_id and t != sd_id and pol["partial"].get(t, [0] * nf)[f] == sd_id else 0
            via.append(v)
            sdf.append(pol["fanin"].get(sd_id, [0] * nf)[f] if v else 0)
        a.tag = std.vector["uint16_t"](tags)
        a.fanin = std.vector["uint16_t"](fan)
        a.via_sd = std.vector["uint8_t"](via)
        a.sd_fanin = std.vector["uint16_t"](sdf)
        for i, s in sw_of.items():
            a.sw_ip[i] = net.ip(s)
        apps.append(a)
    return apps


def run_ina(topo: Topology, policy: dict[str, Any], values: int, *, window: int = 32,
            timeout: float = 1.0, max_backoff: float = 1.0, aggregators: int = 1024,
            aging_s: float = 1.0, loss: Loss = 0.0, max_time: float = 300.0,
            scheme: str | None = None, pin_routes: bool = True) -> SimResult:
    """PS (policy without ``sd``) or INA (the placement's policy) over UDP, one gradient.

    ``pin_routes`` (default): the routes toward every aggregating switch follow the paths
    the LP counted its loads on (:func:`loopback_paths`), as the emulator installs them;
    False: the fixed hash spread of every other route."""
    pol = _check_policy(topo, policy)
    nf, workers, ps = pol["nf"], pol["workers"], pol["ps"]
    vpp = pol["values_per_packet"]  # values a packet carries: the policy's
    if math.ceil(values / vpp) != nf:
        raise SimError(f"{values} values make {math.ceil(values / vpp)} fragments of {vpp}; "
                       f"the policy has {nf}")
    if window < 1 or timeout <= 0 or aggregators < 1:
        raise SimError("window and aggregators must be >= 1, timeout > 0")
    sd_id = pol["sd"]
    used_ids = sorted({t for r in pol["tags"] for t in r if t} | ({sd_id} if sd_id else set()))
    sw_of = {i: topo.switch_by_id(i) for i in used_ids}
    pins = loopback_paths(topo, ps, workers, list(sw_of.values())) if pin_routes else None
    net = Ns3Network(topo, loss=loss, pins=pins)
    ns, g = net.ns, net.g
    g.ResetStats(len(workers))
    payload = INA_HEADER_LEN + 4 * vpp + ETH_EXTRA

    models = _ina_switches(topo, net, sw_of, sd_id, workers, ps, aggregators, payload, aging_s)
    _ina_ps(net, pol, sw_of, models, payload)
    apps = _ina_workers(net, pol, sw_of, payload, window, timeout, max_backoff)
    t0, c0 = time.monotonic(), time.process_time()
    _stop_at(ns, max_time)
    run_s, cpu_s = time.monotonic() - t0, time.process_time() - c0
    done = [a.done_s - a.start_s if a.done_s >= 0 else None for a in apps]
    st = g.GetStats()
    counters = {k: int(getattr(st, k)) for k in (
        "retx", "ps_dups", "ps_accepted", "sw_aggregated", "sw_partials", "sw_passed_sd",
        "sw_passed_ps", "sw_dups", "sw_taken_over", "results_mc", "clears")}
    bound, where, nbytes = net.busiest()
    name = scheme or ("ina" if sd_id else "ps")
    secs = None if any(d is None for d in done) else max(done)
    res = SimResult(name, len(workers), values, secs, bound, where, nbytes, counters["retx"],
                    counters, net.work(run_s, cpu_s))
    ns.Simulator.Destroy()
    return res


def _cut(a: int, b: int, parts: int) -> list[tuple[int, int]]:
    """wire/bcube_schedule.py:cut: ``[a, b)`` in ``parts`` ranges differing by at most one."""
    bounds = [a + (b - a) * d // parts for d in range(parts + 1)]
    return [(bounds[d], bounds[d + 1]) for d in range(parts)]


def run_ring(topo: Topology, peers: list[str], values: int, *, pieces: int = 4,
             loss: Loss = 0.0, max_time: float = 300.0) -> SimResult:
    """Ring all-reduce of ``values`` int32 values among ``peers`` over ns-3 TCP, every chunk
    in ``pieces`` pieces (hosts/bml/baselines.py:ring)."""
    n = len(peers)
    if n < 2:
        raise SimError("a ring needs at least 2 peers")
    if not 1 <= pieces <= 255 or values < n * pieces:
        raise SimError("pieces must be in 1..255 and values >= peers * pieces")
    net = Ns3Network(topo, loss=loss)
    ns, g = net.ns, net.g
    std = __import__("cppyy").gbl.std
    parts = [_cut(a, b, pieces) for a, b in _cut(0, values, n)]
    steps = 2 * (n - 1)

    def sent_chunk(me: int, u: int) -> int:
        return (me - u) % n if u < n - 1 else (me + 1 - (u - n + 1)) % n

    def units(me: int) -> list[int]:
        return [4 * (b - a) for u in range(steps) for a, b in parts[sent_chunk(me, u)]]

    apps = []
    for i, p in enumerate(peers):
        a = g.AddRingPeer(net.node(p), 0.0)
        a.pieces, a.steps = pieces, steps
        a.sent = std.vector["uint32_t"](units(i))
        a.got = std.vector["uint32_t"](units((i - 1) % n))
        a.right = net.ip(peers[(i + 1) % n])
        a.port = RING_PORT
        apps.append(a)
    t0, c0 = time.monotonic(), time.process_time()
    _stop_at(ns, max_time)
    run_s, cpu_s = time.monotonic() - t0, time.process_time() - c0
    done = [a.done_s - a.start_s if a.done_s >= 0 else None for a in apps]
    bound, where, nbytes = net.busiest()
    secs = None if any(d is None for d in done) else max(done)
    res = SimResult("ring", n, values, secs, bound, where, nbytes, work=net.work(run_s, cpu_s))
    ns.Simulator.Destroy()
    return res
