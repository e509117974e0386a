"""The regime map's figure: one grid, a row per (model, workers), a column per (network,
link rate); each cell coloured by the scheme that reaches the target first, with its
margin over the runner-up and where its figures came from (bench/regimes_bench.py)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

COLOURS = {"ps": "#d62728", "ina": "#1f77b4", "ring": "#2ca02c", "sharded_ps": "#ff7f0e",
           "-": "#bbbbbb"}


def figure(cells: list[Any], path: Path, note: str = "") -> None:
    """Save the grid of ``cells`` (``sim.regimes.Cell``) to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgb
    from matplotlib.patches import Patch

    from sim.regimes import TIE

    rows = list(dict.fromkeys((c.model, c.workers) for c in cells))
    cols = list(dict.fromkeys((c.network, c.mbit) for c in cells))
    at = {((c.model, c.workers), (c.network, c.mbit)): c for c in cells}
    grid = [[to_rgb(COLOURS["-"]) for _ in cols] for _ in rows]
    fig, ax = plt.subplots(figsize=(max(9.0, 1.9 * len(cols) + 2.5), 0.62 * len(rows) + 2.4))
    for i, r in enumerate(rows):
        for j, k in enumerate(cols):
            c = at.get((r, k))
            if c is None:
                continue
            tint = 1.0 if c.margin >= TIE else 0.45  # a tie is drawn pale
            base = to_rgb(COLOURS.get(c.winner, COLOURS["-"]))
            grid[i][j] = tuple(1 - tint * (1 - x) for x in base)
            src = "/".join(sorted({s.source for s in c.schemes.values()}))
            margin = "" if not math.isfinite(c.margin) else f"x{c.margin:.2f}"
            ax.text(j, i, f"{c.winner}\n{margin} vs {c.runner_up}\n{src}", ha="center",
                    va="center", fontsize=6.5)
    ax.imshow(grid, aspect="auto")
    ax.set_xticks(range(len(cols)), [f"{n}\n{m / 1000:g} Gbit/s" for n, m in cols], fontsize=8)
    ax.set_yticks(range(len(rows)), [f"{m}, {w} workers" for m, w in rows], fontsize=8)
    ax.set_title("Which scheme reaches the target first\n(margin: runner-up's time / winner's; "
                 f"pale: margin under {TIE:.2f}, a tie)\nsync from ns-3 (deterministic) or the "
                 "ideal bound; compute measured on a shared, loaded 2-core machine" + note,
                 fontsize=9)
    ax.legend(handles=[Patch(color=v, label=k) for k, v in COLOURS.items() if k != "-"],
              loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
