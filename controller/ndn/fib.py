"""Controller twin of ``p4src/include/ndn_fib.p4`` (``MyIngress.fib``): one name prefix ``/<host>``
per host, matched on the per-component hashes of ``ndn_name_hash.p4``; next hops along a
shortest-path tree toward the host. The same routes name the upstream a
``/*distribute*/`` Data must come in on (ndn_persistent_pit.p4's upstream check)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import networkx as nx

from controller.p4runtime import ControlBlock
from topologies.base import Topology

# The name bounds live with the agents that must respect them (and stay light to import).
from wire.ndn import check_name, prefix_hash


class NdnFib(ControlBlock):
    """``NdnFib`` (ingress): longest-prefix match on name components."""

    CONTROL = "MyIngress.fib"
    TABLES = ("fib",)
    ACTIONS = ("set_next_hop", "no_route")

    def route_entry(self, prefix: str | Sequence[bytes], port: int) -> Any:
        """INSERT ``prefix -> set_next_hop(port)``: ``h_k`` exact, the other hashes wild,
        priority ``k`` (longer prefixes win)."""
        comps = check_name(prefix)
        k = len(comps)
        match = {f"meta.h{k}": f"{prefix_hash(comps):#x}/&0xffffffff"}
        return +self.entry("fib", match, "set_next_hop", priority=k, port=port)


def fib_routes(topo: Topology) -> dict[str, dict[str, int]]:
    """``{switch: {host: port}}``: each switch's next hop toward every host, along one
    shortest-path tree per host (so the routes of many GPUs to one PS form a tree, and
    a persistent PIT built from them replicates each Data once per link)."""
    sgraph = topo.graph.subgraph(topo.switches())
    out: dict[str, dict[str, int]] = {s: {} for s in topo.switches()}
    for h in topo.hosts():
        edge = topo.iface(h)["switch"]
        out[edge][h] = topo.port(edge, h)
        for s, path in nx.single_source_shortest_path(sgraph, edge).items():
            if s != edge:
                out[s][h] = topo.port(s, path[-2])
    return out
