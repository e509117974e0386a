"""Builders for the topology families gradnet experiments use.

Every builder names hosts ``h1..hN`` and switches ``s1..sM`` in creation order (so
``device_id`` of ``sI`` is ``I`` and host ``hI`` has index ``I``, i.e. NIC 0 address
``10.0.x.y`` from the address plan in :mod:`topologies.base`). Links are added in an
order chosen so that port numbers follow a simple rule, documented per builder.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .base import CPU_PORT, DEFAULT_BW, MAX_HOSTS, MAX_PORT, Topology, TopologyError

# Data ports a switch can have (1..MAX_PORT without the CPU port).
_MAX_DEGREE = MAX_PORT - (1 if CPU_PORT <= MAX_PORT else 0)


def _int_arg(value: Any, field: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TopologyError(f"must be an integer, got {value!r}", field=field)
    if value < minimum:
        raise TopologyError(f"must be >= {minimum}, got {value}", field=field)
    return value


def _check_size(hosts: int, hosts_field: str, degree: int, degree_field: str) -> None:
    """Fail before building anything that cannot fit the address plan or the port space."""
    if hosts > MAX_HOSTS:
        raise TopologyError(
            f"gives {hosts} hosts, more than the address plan's {MAX_HOSTS}", field=hosts_field
        )
    if degree > _MAX_DEGREE:
        raise TopologyError(
            f"gives a switch {degree} ports, more than the {_MAX_DEGREE} available",
            field=degree_field,
        )


def fat_tree(k: int, bw: float = DEFAULT_BW) -> Topology:
    """A k-ary fat-tree: k pods, ``k**3/4`` hosts and ``5*k**2/4`` switches (k even).

    Creation order: core switches ``s1..s(k/2)^2`` (role ``core``), then per pod its
    ``k/2`` aggregation switches (``agg``) followed by its ``k/2`` edge switches
    (``edge``); hosts are numbered pod by pod, edge switch by edge switch.
    Node attribute ``pod`` (0..k-1) is set on hosts, edge and agg switches and is ``None``
    on core switches; ``pos`` is the switch's position within its layer (of its pod).

    Ports: edge ``1..k/2`` to its hosts, ``k/2+1..k`` to the pod's agg switches in order;
    agg ``1..k/2`` to the pod's edge switches, ``k/2+1..k`` to its core switches; core
    switch port ``p+1`` leads to pod ``p``. Agg switch ``j`` of every pod connects to core
    switches ``j*k/2 .. j*k/2 + k/2 - 1`` (0-based positions).
    """
    k = _int_arg(k, "k", 2)
    if k % 2:
        raise TopologyError(f"must be even, got {k}", field="k")
    _check_size(k**3 // 4, "k", k, "k")
    half = k // 2
    topo = Topology(f"fat_tree-k{k}", bw=bw)
    sw = 0

    def switch(role: str, **attrs: Any) -> str:
        nonlocal sw
        sw += 1
        return topo.add_switch(f"s{sw}", role=role, **attrs)

    cores = [switch("core", pod=None, pos=i) for i in range(half * half)]
    aggs: list[list[str]] = []
    edges: list[list[str]] = []
    for pod in range(k):
        aggs.append([switch("agg", pod=pod, pos=j) for j in range(half)])
        edges.append([switch("edge", pod=pod, pos=j) for j in range(half)])
    # Host links first, then edge-agg, then agg-core: each switch thus sees its downlinks
    # before its uplinks, which gives the port rule above.
    hid = 0
    for pod in range(k):
        for edge in edges[pod]:
            for _ in range(half):
                hid += 1
                topo.add_link(edge, topo.add_host(f"h{hid}", pod=pod))
    for pod in range(k):
        for edge in edges[pod]:
            for agg in aggs[pod]:
                topo.add_link(edge, agg)
    for pod in range(k):
        for j, agg in enumerate(aggs[pod]):
            for core in cores[j * half : (j + 1) * half]:
                topo.add_link(agg, core)
    topo.validate()
    return topo


def leaf_spine(spines: int, leaves: int, hosts_per_leaf: int, bw: float = DEFAULT_BW,
               oversub: float = 0) -> Topology:
    """A two-tier Clos: every leaf connects to every spine.

    Switches ``s1..s<spines>`` are spines (role ``spine``), then the leaves (role
    ``leaf``); hosts are numbered leaf by leaf. Leaf ports ``1..hosts_per_leaf`` go to its
    hosts, then one port per spine in spine order; spine port ``i`` leads to leaf ``i``
    (1-based). Switch attribute ``pos`` is the 0-based position within its tier; host
    attribute ``leaf`` is the 0-based position of its leaf.

    ``oversub``: a leaf's host capacity over its uplink capacity (``leaf-spine:2,4,4,
    oversub=4``): every leaf-spine link then runs at ``hosts_per_leaf * bw / (spines *
    oversub)`` Mbit/s, host links at ``bw``. 0 (the default): every link at ``bw``, which
    makes the ratio ``hosts_per_leaf / spines``.
    """
    spines = _int_arg(spines, "spines", 1)
    leaves = _int_arg(leaves, "leaves", 1)
    hosts_per_leaf = _int_arg(hosts_per_leaf, "hosts_per_leaf", 1)
    if isinstance(oversub, bool) or not isinstance(oversub, (int, float)) or not (
            oversub == 0 or 0 < oversub < float("inf")):
        raise TopologyError(f"must be a positive number (0: every link at bw), got {oversub!r}",
                            field="oversub")
    uplink = hosts_per_leaf * bw / (spines * oversub) if oversub else None
    _check_size(leaves * hosts_per_leaf, "leaves", hosts_per_leaf + spines, "spines")
    _check_size(0, "leaves", leaves, "leaves")  # every spine has a port per leaf
    topo = Topology(f"leaf_spine-{spines}x{leaves}x{hosts_per_leaf}"
                    + (f"-oversub{oversub:g}" if oversub else ""), bw=bw)
    spine_names = [topo.add_switch(f"s{i + 1}", role="spine", pos=i) for i in range(spines)]
    leaf_names = [topo.add_switch(f"s{spines + i + 1}", role="leaf", pos=i) for i in range(leaves)]
    hid = 0
    for i, leaf in enumerate(leaf_names):
        for _ in range(hosts_per_leaf):
            hid += 1
            topo.add_link(leaf, topo.add_host(f"h{hid}", leaf=i))
    for leaf in leaf_names:
        for spine in spine_names:
            topo.add_link(leaf, spine, bw=uplink)
    topo.validate()
    return topo


def bcube(n: int, k: int, bw: float = DEFAULT_BW) -> Topology:
    """A BCube with ``k`` levels of switches (levels ``0..k-1``) and ``n``-port switches.

    Convention (the one in DESIGN.md): ``n**k`` servers, ``k`` levels of ``n**(k-1)``
    switches each, every server one NIC per level. In the BCube paper's notation this is
    BCube_(k-1); e.g. ``bcube(4, 2)`` has 16 servers and 8 switches.

    Server ``hI`` (``s = I - 1``) has address digits ``digits[l] = (s // n**l) % n``:
    node attribute ``digits`` is a tuple indexed by level (``digits[0]`` is the
    least-significant digit). Its NIC ``l`` (interface ``hI-eth<l>``, address in
    ``10.l.0.0/16``) connects to the level-``l`` switch shared by all servers whose
    digits agree everywhere except at position ``l``; that switch's port ``d + 1`` leads
    to the server with ``digits[l] == d``. Switches are created level by level (role
    ``bcube``, attribute ``level``); a switch's ``digits`` are those of its servers with
    ``None`` at its own level.
    """
    n = _int_arg(n, "n", 2)
    k = _int_arg(k, "k", 1)
    # n >= 2, so k > 16 overflows the address plan; don't compute a huge n**k to say so.
    if k > 16 or n**k > MAX_HOSTS:
        raise TopologyError(
            f"gives {n}**{k} hosts, more than the address plan's {MAX_HOSTS}", field="k"
        )
    _check_size(0, "k", n, "n")
    topo = Topology(f"bcube-n{n}-k{k}", bw=bw)
    servers = n**k

    def digits_of(s: int) -> tuple[int, ...]:
        return tuple((s // n**lvl) % n for lvl in range(k))

    def number(digits: tuple[int, ...]) -> int:
        return sum(d * n**lvl for lvl, d in enumerate(digits))

    hosts = [topo.add_host(f"h{s + 1}", digits=digits_of(s)) for s in range(servers)]
    sid = 0
    for level in range(k):
        # A level-l switch is named by the server digits other than digit l.
        groups: dict[tuple[int | None, ...], list[int]] = {}
        for s in range(servers):
            key = tuple(None if lvl == level else d for lvl, d in enumerate(digits_of(s)))
            groups.setdefault(key, []).append(s)
        for key in sorted(groups, key=lambda t: number(tuple(d or 0 for d in t))):
            sid += 1
            switch = topo.add_switch(f"s{sid}", role="bcube", level=level, digits=key)
            for d in range(n):
                server = number(tuple(d if lvl == level else x for lvl, x in enumerate(key)))
                topo.add_link(hosts[server], switch)
    topo.validate()
    return topo


def _railed(rails: int, rail: Topology, name: str) -> Topology:
    """``rails`` copies of the one-NIC topology ``rail``, sharing its hosts: host ``hI``
    gets one NIC per rail, NIC ``j`` (``hI-eth<j>``, address ``10.j.x.y``) on rail ``j``'s
    copy of the switch ``hI`` hangs off in ``rail``. Rail ``j``'s switches are
    ``rail``'s switches renumbered after rail ``j-1``'s (``s(j*M + I)`` for ``sI``), with
    the same roles, attributes and port numbers, plus attribute ``rail = j``; link rates
    are ``rail``'s. No link joins two rails: a packet stays on the rail of the NIC that
    sent it."""
    if rails > 16:
        raise TopologyError(f"must be <= 16 (NICs per host), got {rails}", field="rails")
    topo = Topology(name, bw=rail.default_bw)
    skip = {"kind", "role", "index", "ifaces", "device_id", "grpc_port", "name"}
    for h in rail.hosts():
        topo.add_host(h, **{a: v for a, v in rail.node(h).items() if a not in skip})
    m = len(rail.switches())
    for j in range(rails):
        names = {}
        for i, sw in enumerate(rail.switches()):
            data = rail.node(sw)
            names[sw] = topo.add_switch(f"s{j * m + i + 1}", role=data["role"], rail=j,
                                        **{a: v for a, v in data.items() if a not in skip})
        for ln in rail.links():
            a = ln.a if rail.is_host(ln.a) else names[ln.a]
            b = ln.b if rail.is_host(ln.b) else names[ln.b]
            topo.add_link(a, b, bw=ln.capacity,
                          port_a=j if rail.is_host(ln.a) else ln.port_a,
                          port_b=j if rail.is_host(ln.b) else ln.port_b)
    topo.validate()
    return topo


def rail_fat_tree(rails: int, k: int, bw: float = DEFAULT_BW) -> Topology:
    """A ``rails``-rail network of k-ary fat-trees: every host has ``rails`` NICs, NIC
    ``j`` in fat-tree ``j`` (see :func:`_railed` for names, addresses and ports; each
    rail is exactly :func:`fat_tree`'s ``k``, switches ``s(j*5k²/4 + 1)..``)."""
    rails = _int_arg(rails, "rails", 1)
    return _railed(rails, fat_tree(k, bw=bw), f"rail{rails}-fat_tree-k{k}")


def rail_leaf_spine(rails: int, spines: int, leaves: int, hosts_per_leaf: int,
                    bw: float = DEFAULT_BW) -> Topology:
    """A ``rails``-rail network of leaf-spines: every host has ``rails`` NICs, NIC ``j``
    in leaf-spine ``j`` (each rail exactly :func:`leaf_spine`'s, its switches numbered
    after the previous rail's; see :func:`_railed`)."""
    rails = _int_arg(rails, "rails", 1)
    return _railed(rails, leaf_spine(spines, leaves, hosts_per_leaf, bw=bw),
                   f"rail{rails}-leaf_spine-{spines}x{leaves}x{hosts_per_leaf}")


def star(n: int, bw: float = DEFAULT_BW) -> Topology:
    """``n`` hosts on one switch ``s1`` (role ``switch``); host ``hI`` is on port ``I``."""
    n = _int_arg(n, "n", 1)
    _check_size(n, "n", n, "n")
    topo = Topology(f"star-{n}", bw=bw)
    topo.add_switch("s1")
    for i in range(n):
        topo.add_link("s1", topo.add_host(f"h{i + 1}"))
    topo.validate()
    return topo


def linear(n: int, hosts_per_switch: int = 1, bw: float = DEFAULT_BW) -> Topology:
    """A chain ``s1 - s2 - ... - sn``, each switch with ``hosts_per_switch`` hosts.

    Hosts are numbered switch by switch on ports ``1..hosts_per_switch``; the next port
    leads to the previous switch (if any), the one after to the next switch.
    """
    n = _int_arg(n, "n", 1)
    hosts_per_switch = _int_arg(hosts_per_switch, "hosts_per_switch", 1)
    _check_size(n * hosts_per_switch, "n", hosts_per_switch + 2, "hosts_per_switch")
    topo = Topology(f"linear-{n}x{hosts_per_switch}", bw=bw)
    switches = [topo.add_switch(f"s{i + 1}") for i in range(n)]
    hid = 0
    for switch in switches:
        for _ in range(hosts_per_switch):
            hid += 1
            topo.add_link(switch, topo.add_host(f"h{hid}"))
    for a, b in zip(switches, switches[1:], strict=False):
        topo.add_link(a, b)
    topo.validate()
    return topo


def nic_lan(n: int, bw: float = DEFAULT_BW) -> Topology:
    """``n`` hosts on one LAN, each behind its own NIC: ``hI -- nicI -- lan``.

    The token technique's network (``controller.token.token_lan``: ``nic.p4`` on the NICs,
    ``lan.p4`` on ``lan``); as a plain topology (``nic-lan:N``) every switch runs whatever
    the scheme deploys, so the NICs forward, and other schemes run on the same hosts and
    links as token broadcast. Switches ``nic1..nicN`` (role ``nic``, device ids 1..N) then
    ``lan`` (role ``lan``, device id N+1); ``nicI`` port 1 is ``hI``, port 2 the LAN
    switch, whose port ``I`` leads back to ``nicI``.
    """
    n = _int_arg(n, "n", 1)
    _check_size(n, "n", n, "n")
    topo = Topology(f"nic_lan-{n}", bw=bw)
    nics = [topo.add_switch(f"nic{i + 1}", role="nic") for i in range(n)]
    lan = topo.add_switch("lan", role="lan")
    for i, nic in enumerate(nics):
        topo.add_link(nic, topo.add_host(f"h{i + 1}"))
    for nic in nics:
        topo.add_link(nic, lan)
    topo.validate()
    return topo


#: Builders usable from topology files as ``{"builder": NAME, ...args}``.
BUILDERS: dict[str, Callable[..., Topology]] = {
    "fat_tree": fat_tree,
    "leaf_spine": leaf_spine,
    "bcube": bcube,
    "rail_fat_tree": rail_fat_tree,
    "rail_leaf_spine": rail_leaf_spine,
    "star": star,
    "linear": linear,
    "nic_lan": nic_lan,
}
