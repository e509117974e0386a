"""The ideal traffic of ONE synchronization, per scheme, and the bound it gives.

Each scheme's own traffic matrix for one gradient of ``parameters`` values, without
re-sends, with its real packet and header sizes (``wire/``), routed as the run routes it:
shortest paths between switches with an even split over equal-cost next hops (the ECMP
groups of ``controller/routing.py``), the INA job's own paths to its aggregating switches
(``PlacementProblem.path``, which ``InaDeployment.loopback_paths`` installs) and its RESULT
tree. Hosts never forward: a host with k NICs sends on the NIC its scheme names.

The bound of one synchronization is the busiest directed link's bytes at its rate plus
the protocol's sequential latency: ``steps`` switch traversals one after the other (a
ring's 2(N-1) steps times its longest neighbour path, a PS's round trip, ...) times
:data:`HOP_LATENCY_S`. Measured bytes (``experiments.accounting``) include re-sends and
anything else that crossed the links; this does not, so a flood cannot look efficient.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

#: One switch traversal of the emulator, one way: on ``linear:4,1`` (embedded target, the
#: idle 2-core machine of this project), ping's median RTT was 0.544 ms through 2 switches
#: and 1.08 ms through 4, so (1.08 - 0.544) / 4 = 0.134 ms per switch, each way.
HOP_LATENCY_S = 1.34e-4
ETH = 14  # Ethernet header (the interfaces' tx counters count it, not preamble or FCS)
IP_UDP = 20 + 8
TCP_MSS = 1448  # 1500-byte MTU, TCP with timestamps
TCP_HDR = 14 + 20 + 32  # per segment, and one delayed ACK per two segments back
INA_VALUES = 64  # wire.ina.INA_VALUES, the harness's jobs' size


def tcp_bytes(payload: float, msgs: int = 1) -> tuple[float, float]:
    """(data direction, ACK direction) wire bytes of ``payload`` bytes sent on one TCP
    stream as ``msgs`` equal messages (each segmented on its own: no Nagle)."""
    msgs = max(1, msgs)
    segs = msgs * math.ceil(payload / msgs / TCP_MSS) if payload > 0 else 0
    return payload + segs * TCP_HDR, math.ceil(segs / 2) * TCP_HDR


@dataclass
class Ideal:
    """Bytes per directed link (``"a->b"``) of one ideal synchronization, and its bound."""

    scheme: str
    link_bytes: dict[str, float] = field(default_factory=dict)
    steps: int = 0  # switch traversals on the protocol's sequential path
    capacity: dict[str, float] = field(default_factory=dict)  # Mbit/s per directed link

    def busiest(self) -> tuple[str, float]:
        """The link that needs the longest at its rate, and its bytes."""
        if not self.link_bytes:
            return "-", 0.0
        k = max(self.link_bytes, key=lambda x: self.link_bytes[x] / self.capacity.get(x, 1.0))
        return k, self.link_bytes[k]

    @property
    def bound_s(self) -> float:
        """Busiest link's bytes at its rate + the sequential latency."""
        k, b = self.busiest()
        return (b * 8 / (self.capacity.get(k, 1.0) * 1e6) if b else 0.0) + self.steps * HOP_LATENCY_S

    def to_dict(self) -> dict[str, Any]:
        k, b = self.busiest()
        return {"ideal_bound_s": round(self.bound_s, 6), "ideal_busiest_link": k,
                "ideal_busiest_link_bytes": int(round(b)), "ideal_steps": self.steps}


class Traffic:
    """Accumulates bytes on a topology's directed links."""

    def __init__(self, topo: Any, scheme: str) -> None:
        self.topo = topo
        self.sg = topo.graph.subgraph(topo.switches())
        self.ideal = Ideal(scheme)
        for ln in topo.links():
            self.ideal.capacity[f"{ln.a}->{ln.b}"] = self.ideal.capacity[f"{ln.b}->{ln.a}"] = ln.capacity
        self._dist: dict[str, dict[str, int]] = {}

    def add(self, a: str, b: str, nbytes: float) -> None:
        """``nbytes`` on the directed link ``a -> b``."""
        k = f"{a}->{b}"
        self.ideal.link_bytes[k] = self.ideal.link_bytes.get(k, 0.0) + nbytes

    def along(self, path: list[str], nbytes: float) -> None:
        """``nbytes`` on every link of ``path``."""
        for a, b in zip(path, path[1:], strict=False):
            self.add(a, b, nbytes)

    def edge(self, node: str, nic: int = 0) -> str:
        """The switch a node sends into: itself for a switch, its NIC ``nic``'s for a host."""
        return self.topo.iface(node, nic)["switch"] if self.topo.is_host(node) else node

    def hops(self, src: str, dst: str, nic: int = 0) -> int:
        """Switch traversals from ``src`` to ``dst``."""
        return self._dists(self.edge(dst, nic))[self.edge(src, nic)] + 1

    def _dists(self, dst: str) -> dict[str, int]:
        if dst not in self._dist:
            self._dist[dst] = nx.single_source_shortest_path_length(self.sg, dst)
        return self._dist[dst]

    def send(self, src: str, dst: str, nbytes: float, nic: int = 0) -> None:
        """Unicast: ``src``'s NIC ``nic`` to ``dst``'s, split evenly over the equal-cost
        next hops at every switch (ECMP at its best: hashing can only do worse)."""
        a, b = self.edge(src, nic), self.edge(dst, nic)
        if self.topo.is_host(src):
            self.add(src, a, nbytes)
        dist, flow = self._dists(b), {a: float(nbytes)}
        frontier = [a]
        while frontier:  # every switch of one frontier is one hop nearer to b
            nxt: dict[str, float] = {}
            for u in frontier:
                if u == b:
                    continue
                vs = [v for v in self.sg[u] if dist.get(v, -1) == dist[u] - 1]
                for v in vs:
                    self.add(u, v, flow[u] / len(vs))
                    nxt[v] = nxt.get(v, 0.0) + flow[u] / len(vs)
            for v, x in nxt.items():
                flow[v] = x
            frontier = list(nxt)
        if self.topo.is_host(dst):
            self.add(b, dst, nbytes)

    def tcp(self, src: str, dst: str, payload: float, nic: int = 0, msgs: int = 1) -> None:
        """``payload`` bytes on a TCP stream in ``msgs`` messages, its ACKs back."""
        data, acks = tcp_bytes(payload, msgs)
        self.send(src, dst, data, nic)
        if acks:
            self.send(dst, src, acks, nic)

    def tree(self, src: str, dsts: list[str], nbytes: float) -> None:
        """One copy on every link of the shortest-path tree from ``src`` to ``dsts``."""
        a = self.edge(src)
        paths = nx.single_source_shortest_path(self.sg, a)
        links: set[tuple[str, str]] = set()
        for d in dsts:
            p = paths[self.edge(d)]
            links |= set(zip(p, p[1:], strict=False)) | {(p[-1], d)}
        if self.topo.is_host(src):
            self.add(src, a, nbytes)
        for u, v in links:
            self.add(u, v, nbytes)


# ----------------------------------------------------------------------------- schemes


def _chunks(values: int, parts: int) -> list[int]:
    from wire.bcube_schedule import cut

    return [b - a for a, b in cut((0, values), parts)]


def _ring(tr: Traffic, hosts: list[str], values: int, nic: int = 0, header: int = 16,
          pieces: int = 4) -> int:
    """Ring all-reduce of ``values`` int32/float32 over ``hosts`` in order: 2(N-1) steps,
    rank r sends chunk (r - s) then (r + 1 - s) to rank r + 1; returns the steps' hops."""
    n = len(hosts)
    if n < 2:
        return 0
    ch = _chunks(values, n)
    for r, h in enumerate(hosts):
        sent = [ch[(r - s) % n] for s in range(n - 1)] + [ch[(r + 1 - s) % n] for s in range(n - 1)]
        tr.tcp(h, hosts[(r + 1) % n], sum(4 * c + pieces * header for c in sent), nic,
               msgs=len(sent) * max(1, pieces))
    return 2 * (n - 1) * max(tr.hops(h, hosts[(r + 1) % n], nic) for r, h in enumerate(hosts))


def _sharded_ps(tr: Traffic, hosts: list[str], values: int, nic: int = 0, header: int = 16,
                pieces: int = 8) -> int:
    """Sharded PS: server j owns shard j; every other server pushes it and pulls its sum."""
    ch = _chunks(values, len(hosts))
    for i, h in enumerate(hosts):
        for j, o in enumerate(hosts):
            if i != j:
                tr.tcp(h, o, 4 * ch[j] + pieces * header, nic, msgs=pieces)
                tr.tcp(o, h, 4 * ch[j] + pieces * header, nic, msgs=pieces)
    return 2 * max(tr.hops(a, b, nic) for a in hosts for b in hosts if a != b)


def ring(tr: Traffic, st: Any, values: int, job: Any) -> int:
    """``ring`` (hosts.bml.collective, 16-byte message headers) over the ranks' order."""
    return _ring(tr, st.workers, values)


def gloo(tr: Traffic, st: Any, values: int, job: Any) -> int:
    """gloo: a ring all-reduce of float32 over TCP (its own framing left out)."""
    return _ring(tr, st.workers, values, header=0, pieces=0)


def rails(tr: Traffic, st: Any, values: int, job: Any, each: Callable[..., int]) -> int:
    """k rails: part j of k contiguous parts through rail j (NIC j) as its own collective."""
    k = len(st.topo.node(st.workers[0])["ifaces"])
    return max(each(tr, st.workers, v, nic=j) for j, v in enumerate(_chunks(values, k)))


def bml(tr: Traffic, st: Any, values: int, job: Any) -> int:
    """BML on BCube(n, k): every exchange of every thread through its level's switch."""
    from controller.bcube import bcube_shape
    from wire.bcube_schedule import BcubeSchedule

    n, k = bcube_shape(len(st.workers)) or (0, 0)
    sched = BcubeSchedule(n, k, values)
    for s in range(sched.servers):
        for j in range(k):
            for e in sched.exchanges(s, j):
                for p, (a, b) in e.sends().items():
                    tr.tcp(st.workers[s], st.workers[p], 4 * (b - a) + 16, nic=e.level)
    return 2 * k  # 2k stages, each through one switch


def _ina_packet() -> int:
    from wire.ina import INA_HEADER_LEN

    return ETH + IP_UDP + INA_HEADER_LEN + 4 * INA_VALUES


def ps(tr: Traffic, st: Any, values: int, job: Any) -> int:
    """The INA agents with no aggregating switch: every GRAD to the PS, every RESULT back
    by unicast."""
    frags, pkt = -(-values // INA_VALUES), _ina_packet()
    for w in st.workers:
        tr.send(w, st.ps, frags * pkt)
        tr.send(st.ps, w, frags * pkt)
    return 2 * max(tr.hops(w, st.ps) for w in st.workers)


def ina(tr: Traffic, st: Any, values: int, job: Any) -> int:
    """In-network aggregation, fragment by fragment from the job's routing policy: GRADs
    to their tagged switch (the LP's paths) or the PS, one PARTIAL per aggregating switch
    and fragment, RESULT from the PS to s_d and down its tree, a CLEAR per tagged switch."""
    from wire.ina import INA_HEADER_LEN

    pol, pkt = job.policy, _ina_packet()
    if pol is None:
        return ps(tr, st, values, job)
    prob, by_id = job.placement.problem, {i: s for s, i in pol.switch_ids.items()}
    sd, sd_id = pol.tor, pol.switch_ids[pol.tor]
    for w in st.workers:
        for t, count in pol.counts(w).items():
            if t:
                tr.along(prob.path(w, by_id[t]), count * pkt)
            else:
                tr.send(w, st.ps, count * pkt)
    for s, fan in pol.fan_in.items():
        tags = pol.partial_tags.get(s, ())
        for f, fi in enumerate(fan):
            if not fi:
                continue
            if s != sd and tags and tags[f] == sd_id:
                tr.along(prob.path(s, sd), pkt)
            else:
                tr.send(s, st.ps, pkt)
    frags = pol.num_fragments
    tr.send(st.ps, sd, frags * pkt)
    tr.tree(sd, st.workers, frags * pkt)
    clear = ETH + IP_UDP + INA_HEADER_LEN
    for s in {by_id[t] for w in st.workers for t in pol.counts(w) if t} - {sd}:
        n = sum(1 for f in range(frags) if any(pol.tags[w][f] == pol.switch_ids[s] for w in st.workers))
        tr.send(st.ps, s, n * clear)
    return 2 * max(tr.hops(w, st.ps) for w in st.workers)


def _ndn_sizes() -> tuple[int, int, int, int]:
    """(NDN bytes a collected Data adds to its content, those of a distribution Data, an
    Interest, values a segment), encoded by ``wire.ndn`` with the agents' names
    (``/G/P/T/v=r/seg=i``, ``/*distribute*/P/T/v=r/seg=i``; ``hosts/ndn``)."""
    from wire.ndn import SEGMENT_VALUES, data_packet, interest_packet, name_of

    full = bytes(4 * SEGMENT_VALUES)
    collect = name_of("h2", "h1", "t0", "v=10", "seg=10")
    dist = name_of(b"*distribute*", "h1", "t0", "v=10", "seg=10")
    return (len(data_packet(collect, full, 10)) - len(full), len(data_packet(dist, full, 10)) - len(full),
            len(interest_packet(collect)), SEGMENT_VALUES)


def _ndn(tr: Traffic, st: Any, values: int, transport: str) -> int:
    collect, dist, interest, seg = _ndn_sizes()
    segs = -(-values // seg)
    extra = ETH + (IP_UDP if transport == "ipmc" else 0)
    grad, update = 4 * values + segs * collect, 4 * values + segs * dist
    for w in st.workers:  # collection: the PS pulls every segment of every gradient
        if transport == "tcp":
            tr.tcp(st.ps, w, segs * interest, msgs=segs)
            tr.tcp(w, st.ps, grad, msgs=segs)
        else:
            tr.send(st.ps, w, segs * (interest + extra))
            tr.send(w, st.ps, grad + segs * extra)
    if transport == "tcp":  # distribution: one unicast stream per GPU
        for w in st.workers:
            tr.tcp(st.ps, w, update, msgs=segs)
    else:  # one copy along the persistent PIT / the multicast tree
        tr.tree(st.ps, st.workers, update + segs * extra)
    return 3 * max(tr.hops(w, st.ps) for w in st.workers)


def differentiated(tr: Traffic, st: Any, values: int, job: Any) -> int:
    """Every block once to its PS (datagrams of at most 1400 bytes, a 34-byte block header
    each; none zero-filled), the parameters back to every worker over TCP."""
    from wire.differentiated import DIFF_BLOCK_HEADER_LEN, MAX_DATAGRAM

    room = MAX_DATAGRAM - DIFF_BLOCK_HEADER_LEN
    grams = -(-4 * values // room)
    for w in st.workers:
        tr.send(w, st.ps, 4 * values + grams * (DIFF_BLOCK_HEADER_LEN + IP_UDP + ETH))
        tr.tcp(st.ps, w, 4 * values)
    return 2 * max(tr.hops(w, st.ps) for w in st.workers)


def differentiated_reliable(tr: Traffic, st: Any, values: int, job: Any) -> int:
    """Every block over TCP to the PS (a 34-byte block header and a 5-byte frame each, one
    message a block), the parameters back over TCP."""
    from hosts.differentiated.blocks import BlockLayout
    from wire.differentiated import DIFF_BLOCK_HEADER_LEN, FRAME

    nblocks = len(BlockLayout([(values,)]))  # a lower bound: conv kernels make more blocks
    for w in st.workers:
        tr.tcp(w, st.ps, 4 * values + nblocks * (DIFF_BLOCK_HEADER_LEN + FRAME.size), msgs=1)
        tr.tcp(st.ps, w, 4 * values)
    return 2 * max(tr.hops(w, st.ps) for w in st.workers)


def token(tr: Traffic, st: Any, values: int, job: Any) -> int:
    """Every node broadcasts its gradient once on the LAN (fragments of TOKEN_VALUES) and
    passes the token on (a header-only frame); the broadcasts are sequential."""
    from wire.token import TOKEN_HEADER_LEN, TOKEN_VALUES

    frags = -(-values // TOKEN_VALUES)
    nbytes = 4 * values + frags * (ETH + TOKEN_HEADER_LEN)
    hosts = st.workers
    for i, h in enumerate(hosts):
        others = [o for o in hosts if o != h]
        tr.tree(h, others, nbytes)
        if len(hosts) > 1:
            tr.send(h, hosts[(i + 1) % len(hosts)], ETH + TOKEN_HEADER_LEN)
    return len(hosts) * max((tr.hops(a, b) for a in hosts for b in hosts if a != b), default=0)


SCHEMES: dict[str, Callable[[Traffic, Any, int, Any], int]] = {
    "gloo": gloo, "ring": ring, "ps": ps, "ina": ina, "bml": bml,
    "rail_ring": lambda tr, st, v, job: rails(tr, st, v, job, _ring),
    "rail_sharded_ps": lambda tr, st, v, job: rails(tr, st, v, job, _sharded_ps),
    "ndn": lambda tr, st, v, job: _ndn(tr, st, v, "ndn"),
    "ndn-ipmc": lambda tr, st, v, job: _ndn(tr, st, v, "ipmc"),
    "ndn-tcp": lambda tr, st, v, job: _ndn(tr, st, v, "tcp"),
    "differentiated": differentiated, "token": token,
    # differentiated's variants (error feedback, block selection): every block once, as it
    "differentiated-ef": differentiated, "differentiated-random-ef": differentiated,
    "differentiated-topk-ef": differentiated, "differentiated-reliable": differentiated_reliable,
}


def ideal_sync(scheme: str, setting: Any, parameters: int, job: Any = None) -> Ideal:
    """The ideal traffic of one synchronization of ``parameters`` values by ``scheme`` on
    ``setting`` (topology, PS, training hosts in rank order); ``job``: the run's
    ``InaJob`` for ina (its placement and policy)."""
    if scheme not in SCHEMES:
        raise ValueError(f"no ideal traffic model for {scheme!r}")
    tr = Traffic(setting.topo, scheme)
    tr.ideal.steps = SCHEMES[scheme](tr, setting, parameters, job)
    return tr.ideal
