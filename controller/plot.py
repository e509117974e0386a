"""Pictures of a switch placement (``gradctl place --plot``).

:func:`plot_placement` draws the topology, the chosen programmable switches and ``s_d``,
the PS and the workers, and the LP's flows: every worker's stream to the switch that
aggregates it (solid) and every aggregate on its way to ``s_d`` or the PS (dashed), one
colour per aggregation point, line width proportional to the flow's load on each link.
Where several flows share a link they are drawn side by side, so the widths across a
link add up to the LP's link load (both directions together).

Layouts: fat-tree and leaf-spine by layers (core / agg / edge / hosts, spine / leaf /
hosts), BCube by level, anything else by a spring layout (fixed seed).
Uses matplotlib's Agg canvas directly (no pyplot, no display needed).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import networkx as nx

from controller.placement import Placement
from topologies.base import Topology

__all__ = ["layout", "link_loads_undirected", "placement_flows", "plot_placement"]

# Layer of a switch role, top (0) to bottom; hosts go below the lowest switch layer.
ROLE_LAYERS: dict[str, int] = {
    "core": 0, "spine": 0,
    "agg": 1, "aggregation": 1,
    "edge": 2, "leaf": 2, "tor": 2,
}

_GREY = "#b8b8b8"
_SWITCH = "#e4e4e4"
_WORKER = "#4c8bd6"
_PS = "#d62728"
_IDLE_HOST = "#ffffff"
_SD = "#8c3fb0"
_DIRECT = "#6b6b6b"
# One colour per programmable switch of S (selection order), distinct from PS / s_d.
_PALETTE = ["#ff8c00", "#2ca02c", "#17becf", "#e377c2", "#bcbd22", "#8c564b",
            "#1f77b4", "#ff6f61", "#9edae5", "#98df8a"]


# ----------------------------------------------------------------------------- layout


def _switch_layers(topo: Topology) -> dict[str, int] | None:
    """Layer index of every switch if the topology is layered (fat-tree, leaf-spine,
    BCube, one switch), else None."""
    switches = topo.switches()
    roles = {s: topo.node(s)["role"] for s in switches}
    if all(r in ROLE_LAYERS for r in roles.values()):
        used = sorted({ROLE_LAYERS[r] for r in roles.values()})
        rank = {v: i for i, v in enumerate(used)}
        return {s: rank[ROLE_LAYERS[r]] for s, r in roles.items()}
    levels = {s: topo.node(s).get("level") for s in switches}
    if (all(r == "bcube" for r in roles.values())
            and all(isinstance(v, int) for v in levels.values())):
        top = max(levels.values())  # type: ignore[type-var]
        return {s: top - v for s, v in levels.items()}  # type: ignore[operator]
    if len(switches) == 1:
        return {switches[0]: 0}
    return None


def layout(topo: Topology) -> dict[str, tuple[float, float]]:
    """Node positions: by layers where the topology has them (hosts at the bottom, each
    layer spread evenly in creation order), else a spring layout. x spans about
    0..max(layer size), y grows upward."""
    layers = _switch_layers(topo)
    if layers is None:
        g = topo.graph
        pos = nx.spring_layout(g, seed=7, k=1.6 / math.sqrt(max(len(g), 1)), iterations=200)
        n = len(g)
        scale = max(4.0, 1.2 * math.sqrt(n) * 2)
        return {v: (float(x) * scale, float(y) * scale * 0.6) for v, (x, y) in pos.items()}
    rows: list[list[str]] = [[] for _ in range(max(layers.values()) + 1)]
    for s in topo.switches():
        rows[layers[s]].append(s)
    rows.append(topo.hosts())
    width = max(len(r) for r in rows)
    pos: dict[str, tuple[float, float]] = {}
    gap_y = max(2.0, width / 6)
    for i, row in enumerate(rows):
        y = (len(rows) - 1 - i) * gap_y
        step = width / len(row)
        for j, node in enumerate(row):
            pos[node] = ((j + 0.5) * step, y)
    return pos


# ----------------------------------------------------------------------------- flows


def placement_flows(placement: Placement) -> dict[tuple[str, str], dict[tuple[str, str], float]]:
    """The LP's flows split by stream, per directed link.

    Returns ``{(target, kind): {(u, v): load}}``: ``target`` is the aggregation point
    (a switch of ``S``, ``s_d``, or the PS for direct sending), ``kind`` is ``"grad"``
    (workers -> target) or ``"agg"`` (the target's aggregate -> ``s_d`` or the PS).
    Every flow follows :meth:`PlacementProblem.path`, the path the LP charged, so the
    loads summed over streams equal ``result.link_loads`` (single-path LP).
    """
    prob, res = placement.problem, placement.result
    out: dict[tuple[str, str], dict[tuple[str, str], float]] = {}

    def add(key: tuple[str, str], src: str, dst: str, rate: float) -> None:
        if rate <= 1e-9 * max(res.gamma, 1.0) or src == dst:
            return
        loads = out.setdefault(key, {})
        nodes = prob.path(src, dst)
        for a, b in zip(nodes, nodes[1:], strict=False):
            loads[(a, b)] = loads.get((a, b), 0.0) + rate

    for w, rates in res.rates.items():
        for t, r in rates.items():
            add((t, "grad"), w, t, r)
    for s in res.switches:
        out_rate = res.switch_out.get(s, 0.0)
        via = res.via_tor.get(s, 0.0)
        add((s, "agg"), s, res.ps, out_rate - via)
        add((s, "agg"), s, res.tor, via)
    if res.tor_active:
        add((res.tor, "agg"), res.tor, res.ps, res.switch_out.get(res.tor, 0.0))
    return out


# ----------------------------------------------------------------------------- drawing


def _colors(placement: Placement) -> dict[str, str]:
    res = placement.result
    colors = {s: _PALETTE[i % len(_PALETTE)] for i, s in enumerate(res.switches)}
    colors[res.tor] = _SD
    colors[res.ps] = _DIRECT
    return colors


# (load, one end, other end, text) of each link label to place
_Labels = list[tuple[float, tuple[float, float], tuple[float, float], str]]


def _draw_flows(ax: Any, topo: Topology, placement: Placement, pos: dict[str, tuple[float, float]],
                unit_per_pt: float, large: bool) -> tuple[Any, dict[str, str], float, _Labels]:
    """Draw the flows, side by side per link with width ~ load; return the flows, the
    colours per target, the busiest link's load and the link labels to place."""
    res = placement.result
    prob = placement.problem
    # 2. flows: per undirected edge, the streams side by side, width ~ load
    flows = placement_flows(placement)
    colors = _colors(placement)
    per_edge: dict[frozenset[str], list[tuple[str, str, float]]] = {}
    for (target, kind), loads in flows.items():
        merged: dict[frozenset[str], float] = {}
        for (a, b), load in loads.items():
            key = frozenset((a, b))
            merged[key] = merged.get(key, 0.0) + load
        for key, load in merged.items():
            per_edge.setdefault(key, []).append((target, kind, load))
    max_load = max((sum(x[2] for x in segs) for segs in per_edge.values()), default=1.0)
    max_lw = 12.0  # points for the busiest link
    order = {t: i for i, t in enumerate([*res.switches, res.tor, res.ps])}
    labels: _Labels = []
    for key, segs in per_edge.items():
        u, v = sorted(key, key=lambda n: (pos[n][1], pos[n][0]))
        (x0, y0), (x1, y1) = pos[u], pos[v]
        length = math.hypot(x1 - x0, y1 - y0) or 1.0
        nx_, ny_ = -(y1 - y0) / length, (x1 - x0) / length  # unit normal
        segs.sort(key=lambda s: (order.get(s[0], 99), s[1]))
        widths = [max(0.9, max_lw * load / max_load) for _, _, load in segs]
        total = sum(widths)
        offset = -total / 2
        for (target, kind, _load), w in zip(segs, widths, strict=True):
            d = (offset + w / 2) * unit_per_pt
            offset += w
            ax.plot([x0 + nx_ * d, x1 + nx_ * d], [y0 + ny_ * d, y1 + ny_ * d],
                    color=colors.get(target, _DIRECT), lw=w, alpha=0.85, zorder=2,
                    solid_capstyle="butt", dash_capstyle="butt",
                    linestyle="-" if kind == "grad" else (0, (2.0, 0.8)))
        # load / capacity of the link's busier direction (full duplex: each direction
        # has the capacity) on the busier links between switches and on the PS's link
        # (a worker's own link always carries gamma)
        ll = res.link_loads
        load = max(ll.get((u, v), 0.0), ll.get((v, u), 0.0))
        if not prob.full_duplex:
            load = ll.get((u, v), 0.0) + ll.get((v, u), 0.0)
        labelled = not large and (res.ps in key or all(topo.is_switch(n) for n in key))
        if labelled and sum(s[2] for s in segs) >= 0.25 * max_load:
            labels.append((load, (x0, y0), (x1, y1), f"{load:.0f}/{topo.capacity(u, v):g}"))
    return flows, colors, max_load, labels


def _place_labels(ax: Any, labels: _Labels, unit_per_pt: float) -> None:
    """Place the link labels, heaviest first, each clear of those already placed."""
    # link labels, heaviest first, each at the first point along its link (middle
    # first) that keeps clear of the labels already placed
    placed: list[tuple[float, float]] = []
    clear_x, clear_y = 42 * unit_per_pt, 11 * unit_per_pt  # a label's size, in data units
    for _load, (x0, y0), (x1, y1), text in sorted(labels, key=lambda x: -x[0]):
        spots = [(x0 + (x1 - x0) * f, y0 + (y1 - y0) * f)
                 for f in (0.5, 0.35, 0.65, 0.25, 0.75, 0.42, 0.58, 0.18, 0.82)]
        mx, my = next((p for p in spots
                       if all(abs(p[0] - q[0]) > clear_x or abs(p[1] - q[1]) > clear_y
                              for q in placed)), spots[0])
        placed.append((mx, my))
        ax.text(mx, my, text, fontsize=6.5, ha="center", va="center", zorder=6,
                color="#222222",
                bbox={"boxstyle": "round,pad=0.12", "fc": "white", "ec": "none", "alpha": 0.75})


def _draw_nodes(ax: Any, topo: Topology, placement: Placement, pos: dict[str, tuple[float, float]],
                colors: dict[str, str], large: bool) -> None:
    """Draw the switches (chosen ones numbered, s_d marked) and the hosts (PS, workers,
    other hosts)."""
    res = placement.result
    prob = placement.problem
    # 3. nodes
    chosen = {s: i + 1 for i, s in enumerate(res.switches)}
    workers = set(prob.workers)
    sw_size = 430 if len(pos) <= 60 else 200
    host_size = 190 if len(pos) <= 60 else 70
    label_size = 8 if len(pos) <= 60 else 6
    for s in topo.switches():
        x, y = pos[s]
        if s in chosen:
            face, edge, lw, text = colors[s], "black", 1.8, f"{s}\n#{chosen[s]}"
        elif s == res.tor:
            face, edge, lw, text = _SD, "black", 1.8, f"{s}\ns_d"
        else:
            face, edge, lw, text = _SWITCH, "#888888", 0.8, s
        big = s in chosen or s == res.tor
        ax.scatter([x], [y], s=sw_size * (1.5 if big else 1), marker="s", c=face,
                   edgecolors=edge, linewidths=lw, zorder=4)
        ax.text(x, y, text, fontsize=label_size - (0 if big else 1), ha="center",
                va="center", zorder=5, color="white" if big else "#333333",
                fontweight="bold" if big else "normal")
    for h in topo.hosts():
        x, y = pos[h]
        if h == res.ps:
            face, marker, size, text = _PS, "*", host_size * 3.2, f"{h}\nPS"
        elif h in workers:
            face, marker, size, text = _WORKER, "o", host_size, h
        else:
            face, marker, size, text = _IDLE_HOST, "o", host_size, h
        ax.scatter([x], [y], s=size, marker=marker, c=face, edgecolors="#333333",
                   linewidths=0.8, zorder=4)
        ax.annotate(text, (x, y), xytext=(0, -9), textcoords="offset points",
                    fontsize=label_size - 1, ha="center", va="top", zorder=5,
                    rotation=90 if large else 0)


def _legend_and_title(fig: Any, topo: Topology, placement: Placement, flows: Any,
                      colors: dict[str, str], max_load: float, title: str | None) -> None:
    """The legend (flow colours, line styles, node kinds) and the title with gamma."""
    from matplotlib.lines import Line2D

    res = placement.result
    prob = placement.problem
    workers = set(prob.workers)
    # 4. legend and title
    handles = [Line2D([], [], color=colors[s], lw=4, label=f"to {s} (#{i + 1})")
               for i, s in enumerate(res.switches)]
    if any(t == res.tor for t, _ in flows):
        handles.append(Line2D([], [], color=_SD, lw=4, label=f"to s_d {res.tor}"))
    if any(t == res.ps for t, _ in flows):
        handles.append(Line2D([], [], color=_DIRECT, lw=4, label=f"direct to PS {res.ps}"))
    handles += [
        Line2D([], [], color="black", lw=2, label="workers' gradients"),
        Line2D([], [], color="black", lw=2, linestyle=(0, (2.0, 0.8)),
               label="aggregates (to s_d / PS)"),
        Line2D([], [], marker="*", ls="", ms=13, mfc=_PS, mec="#333333", label="parameter server"),
        Line2D([], [], marker="o", ls="", ms=8, mfc=_WORKER, mec="#333333", label="worker"),
    ]
    if len(workers) + 1 < len(topo.hosts()):
        handles.append(Line2D([], [], marker="o", ls="", ms=8, mfc=_IDLE_HOST, mec="#333333",
                              label="other host"))
    fig.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 0.005), fontsize=8,
               frameon=False, ncol=min(len(handles), 5))
    head = title or (f"{topo.name}: {placement.method} placement, K={prob.budget}, "
                     f"C={prob.switch_capacity:g} Mbit/s")
    fig.suptitle(f"{head}\nγ = {res.gamma:.2f} Mbit/s per worker; line width ∝ LP link "
                 f"load, both directions (busiest link {max_load:.0f} Mbit/s); labels: load "
                 "of the busier direction / capacity",
                 fontsize=10.5, y=0.985)


def plot_placement(
    topo: Topology,
    placement: Placement,
    path: str | Path,
    *,
    title: str | None = None,
    dpi: int = 130,
) -> Path:
    """Draw ``placement`` on ``topo`` and save it as a PNG at ``path``; returns the path.

    Raises ``OSError`` when the file cannot be written.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    pos = layout(topo)
    xs = [p[0] for p in pos.values()]
    ys = [p[1] for p in pos.values()]
    span_x = max(xs) - min(xs) or 1.0
    span_y = max(ys) - min(ys) or 1.0
    fig_w = min(22.0, max(10.0, 0.75 * span_x + 3))
    fig_h = min(16.0, max(5.5, fig_w * (span_y + 1.6) / (span_x + 1.6) + 1.6))
    fig = Figure(figsize=(fig_w, fig_h))
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0.01, 0.08, 0.98, 0.83))
    x_lo, x_hi = min(xs) - 0.8, max(xs) + 0.8
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(min(ys) - 1.0, max(ys) + 0.8)
    ax.set_aspect("equal", adjustable="box")
    ax.axis("off")
    ax.apply_aspect()

    # data units per typographic point, to offset parallel flows by their line widths
    unit_per_pt = (x_hi - x_lo) / (ax.get_position().width * fig_w * 72)

    large = len(topo.hosts()) > 32  # no link labels, small vertical host labels
    # 1. the topology
    for u, v in topo.graph.edges():
        (x0, y0), (x1, y1) = pos[u], pos[v]
        ax.plot([x0, x1], [y0, y1], color=_GREY, lw=0.8, zorder=1, solid_capstyle="round")

    # 2. flows, then their labels
    flows, colors, max_load, labels = _draw_flows(ax, topo, placement, pos, unit_per_pt, large)
    _place_labels(ax, labels, unit_per_pt)
    # 3. nodes
    _draw_nodes(ax, topo, placement, pos, colors, large)
    # 4. legend and title
    _legend_and_title(fig, topo, placement, flows, colors, max_load, title)
    out = Path(path)
    fig.savefig(out, dpi=dpi, format="png")
    return out


def link_loads_undirected(loads: Mapping[tuple[str, str], float]) -> dict[frozenset[str], float]:
    """Directed link loads summed per undirected link."""
    out: dict[frozenset[str], float] = {}
    for (a, b), v in loads.items():
        key = frozenset((a, b))
        out[key] = out.get(key, 0.0) + v
    return out

