"""Where simulation stops, and real model sizes by extrapolation (docs/simulation.md).

``limit_rows``: the simulator's own cost measured here (ns-3 events and link frames per
wall second of ``Simulator.Run``; resident memory per node of a built topology).
``hour_budget``: from a measured rate, what fits in an hour (an extrapolation).
``fit_line`` / ``extrapolate``: sync time = a + b x gradient bytes per scheme, fitted on the
sizes that ran and carried to ResNet-50 / BERT-base gradients (an extrapolation). The
arithmetic needs no ns-3 (tests/test_sim_limits.py)."""

from __future__ import annotations

from dataclasses import dataclass

#: real models' gradients: parameters x 4 bytes (fp32)
MODELS = {"ResNet-50": 25_600_000 * 4, "BERT-base": 110_000_000 * 4}


def rss_kib() -> int:
    """This process's resident set (VmRSS, KiB)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def fit_line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares ``(a, b)`` of ``y = a + b x`` (two or more distinct ``xs``)."""
    n = len(xs)
    if n < 2 or len(ys) != n or len(set(xs)) < 2:
        raise ValueError("fit_line needs two or more distinct sizes")
    mx, my = sum(xs) / n, sum(ys) / n
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / \
        sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def fit_errors(xs: list[float], ys: list[float], a: float, b: float) -> list[float]:
    """Relative error of the fit at each measured point: (a + b x) / y - 1."""
    return [(a + b * x) / y - 1.0 for x, y in zip(xs, ys, strict=True)]


@dataclass
class Extrapolation:
    """One scheme's fit and its extrapolated times (seconds)."""

    scheme: str
    a: float  # s: the size-independent part (latency, steps, window ramp)
    b: float  # s per byte
    worst_error: float  # largest |relative error| of the fit on the measured sizes
    bound_per_byte: float  # line-rate bound, s per gradient byte (fitted through 0)
    predicted: dict[str, float]  # model -> sync seconds
    bound: dict[str, float]  # model -> line-rate bound seconds


def extrapolate(scheme: str, sizes: list[int], seconds: list[float], bounds: list[float],
                models: dict[str, int] | None = None) -> Extrapolation:
    """Fit ``seconds`` vs gradient ``sizes`` (bytes), and the bound's bytes ratio, then carry
    both to ``models`` (default :data:`MODELS`)."""
    models = MODELS if models is None else models
    a, b = fit_line([float(s) for s in sizes], seconds)
    err = max(abs(e) for e in fit_errors([float(s) for s in sizes], seconds, a, b))
    per_byte = sum(bounds) / sum(sizes)  # the bound is bytes at line rate: proportional
    return Extrapolation(scheme, a, b, err, per_byte,
                         {m: a + b * n for m, n in models.items()},
                         {m: per_byte * n for m, n in models.items()})


def hour_budget(events_per_s: float, events_per_unit: float, seconds: float = 3600.0) -> float:
    """Units (e.g. worker x KiB of gradient) simulated in ``seconds`` of wall time at
    ``events_per_s``, if each costs ``events_per_unit`` events: an extrapolation that
    assumes the rate and the cost per unit stay what was measured."""
    return seconds * events_per_s / events_per_unit


@dataclass
class MemRow:
    """Resident memory of one built (not run) topology."""

    k: int
    hosts: int
    nodes: int
    links: int
    rss_kib: int  # VmRSS growth while building it
    per_node_kib: float


def memory_rows(ks: list[int], gbps: float = 100.0) -> list[MemRow]:
    """Build fat-tree ``k`` for each ``k`` (ascending, one process) as ns-3 nodes, links and
    static routes, and read VmRSS before and after (ns-3 already loaded). Memory freed by an earlier, smaller
    topology may be reused, so the growth is a lower bound for all but the first."""
    from topologies import fat_tree

    from .core import Ns3Network
    from .ns3env import load

    load()  # ns-3's import and the model's compile (about 0.7 GiB) before the first reading
    rows = []
    for k in sorted(ks):
        topo = fat_tree(k, bw=gbps * 1000.0)
        before = rss_kib()
        net = Ns3Network(topo)
        grew = rss_kib() - before
        nodes = len(net.names)
        rows.append(MemRow(k, len(topo.hosts()), nodes, len(net.tx_order) // 2, grew,
                           grew / nodes))
        net.ns.Simulator.Destroy()
        del net
    return rows
