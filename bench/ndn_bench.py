"""NDN PS with a persistent PIT vs IP-unicast PS; probe recoveries under loss.

On one network (default fat-tree k=4, 10 Mbit/s links; PS h1, every other host a GPU):

1. synchronous rounds over NDN (``ndn.p4``, the PS sends each update once) and over IP
   (``forward.p4``, the same agents, one copy per GPU), no loss: PS egress bytes per
   round (distribution alone, and everything the PS sent), round time, and the ratios;
2. NDN with 1 %, 5 % and 10 % loss on one GPU's link: how many of its updates the probe
   timer recovered, and whether every GPU still ended bit-exact.

    python -m bench.ndn_bench [--topo fat-tree|leaf-spine] [--rounds 5] [--gpu-loss 0.01,0.05,0.1]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from rich.table import Table

from controller.output import TableConsole
from experiments import options as opts
from experiments.ndn import loss_on_gpu_link, ratios_table, run_ip, run_ndn
from topologies import fat_tree, leaf_spine

console = TableConsole()


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: run everything, print the tables."""
    p = argparse.ArgumentParser(prog="python -m bench.ndn_bench", description=__doc__.splitlines()[0])
    p.add_argument("--topo", default="fat-tree", choices=["fat-tree", "leaf-spine"])
    p.add_argument("--bw", type=float, default=10.0, help="link bandwidth in Mbit/s")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--values", type=int, default=3818)
    p.add_argument("--compute-time", type=float, default=0.3)
    p.add_argument("--gpu-loss", default="0.01,0.05,0.1", metavar="R,R,...",
                   help="loss rates on one GPU's link, one NDN run each (as --mode ndn's --gpu-loss)")
    opts.add_alias(p, "--loss", "--gpu-loss", "gpu_loss")
    p.add_argument("--target", default=None, help="auto|embedded|bmv2")
    args = p.parse_args(argv)
    if os.geteuid() != 0:
        print("ndn_bench needs root (network namespaces)", file=sys.stderr)
        return 2
    from topologies.network import Network

    topo = fat_tree(4, bw=args.bw) if args.topo == "fat-tree" else leaf_spine(2, 2, 3, bw=args.bw)
    hosts = topo.hosts()
    ps, gpus = hosts[0], hosts[1:]
    lossy = gpus[-1]                  # the farthest GPU
    rates = [float(x) for x in args.gpu_loss.split(",") if x]
    out = Path(tempfile.mkdtemp(prefix="gradnet-ndn-bench-"))
    kw = dict(ps=ps, gpus=gpus, rounds=args.rounds, values=args.values,
              compute_time=args.compute_time, max_time=240.0)
    runs = {}
    with Network(topo, target=args.target) as net:
        console.print("[dim]NDN, no loss ...[/dim]")
        runs["ndn"] = run_ndn(net, topo, out / "ndn", {}, **kw)
        console.print("[dim]IP unicast PS, no loss ...[/dim]")
        runs["ip"] = run_ip(net, topo, out / "ip", {}, **kw)
        for r in rates:
            console.print(f"[dim]NDN, {r:.0%} loss toward {lossy} ...[/dim]")
            runs[r] = run_ndn(net, topo, out / f"ndn-loss{r}", loss_on_gpu_link(topo, lossy, r), **kw)
    n = len(gpus)
    ndn, ip = runs["ndn"], runs["ip"]
    t = Table(title=f"NDN PS (persistent PIT) vs IP-unicast PS, {topo.name}, {n} GPUs, "
                    f"{args.values} float32 values, {args.rounds} rounds, {args.bw:g} Mbit/s")
    for col in ("run", "round s", "PS distribution B/round", "PS egress B/round", "exact"):
        t.add_column(col, justify="right" if col != "run" else "left")
    for name, r in (("NDN", ndn), ("IP", ip)):
        t.add_row(name, f"{r.round_seconds:.2f}", f"{r.distribute_bytes_per_round:,.0f}",
                  f"{r.tx_bytes_per_round:,.0f}", "yes" if r.exact else "NO")
    console.print(t)
    console.print(ratios_table(ndn, ip, n))
    lt = Table(title=f"NDN under loss on {lossy}'s link: lost updates recovered by the probe timer")
    for col in ("loss", "updates recovered", "segments recovered", "probes fired",
                "emulated drops", "round s", "exact"):
        lt.add_column(col, justify="right")
    for r in rates:
        res = runs[r]
        g = res.gpus.get(lossy, {})
        drops = sum(sum(st.get("link_drops", {}).values()) for st in res.switches.values())
        lt.add_row(f"{r:.0%}", f"{g.get('updates_recovered_by_probe', 0)}/{args.rounds}",
                   str(g.get("segments_recovered", 0)), str(g.get("probes_fired", 0)), str(drops),
                   f"{res.round_seconds:.2f}", "yes" if res.exact else "NO")
    console.print(lt)
    bad = [k for k, r in runs.items() if not r.exact]
    for k in bad:
        console.print(f"[red]{k}: {'; '.join(runs[k].problems)[:300]}[/red]")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
