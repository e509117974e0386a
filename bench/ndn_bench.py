"""NDN PS with a persistent PIT vs IP-unicast PS; probe recoveries under loss.

On one network (default fat-tree k=4, 10 Mbit/s links; PS h1, every other host a GPU):

1. synchronous rounds over NDN (``ndn.p4``, the PS sends each update once) and over IP
   (``forward.p4``, the same agents, one copy per GPU), no loss: PS egress bytes per
   round (distribution alone, and everything the PS sent), round time, and the ratios;
2. NDN with 1 %, 5 % and 10 % loss on one GPU's link: how many of its updates the probe
   timer recovered, and whether every GPU still ended bit-exact;
3. NDN with 1 %, 5 % and 10 % loss on a fabric link (both directions of the first
   switch-to-switch link from the farthest GPU toward the PS), synchronous and
   asynchronous: did every GPU get every update of every round (by distribution or by its
   probe timer), bit-exact;
4. subscriptions in the data plane vs by the controller (``--subscriptions``): how long a
   GPU's subscribe Interest takes to be acked, and how many packet-ins the switches sent
   per subscription.

    python -m bench.ndn_bench [--topo fat-tree|leaf-spine] [--rounds 5] [--gpu-loss 0.01,0.05,0.1]
                              [--fabric-loss 0.01,0.05,0.1]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from rich.table import Table

from controller.output import TableConsole
from experiments import options as opts
from experiments.ndn import loss_on_fabric_link, loss_on_gpu_link, ratios_table, run_ip, run_ndn
from topologies import fat_tree, leaf_spine
from wire.argtypes import Parser, count, described, listed, nonnegative, number, positive, values

console = TableConsole()


def _parser() -> argparse.ArgumentParser:
    """The bench's command line."""
    rates = listed(number(0.0, below=1.0), empty=True)  # a loss rate below 1; '': none
    p = Parser(prog="python -m bench.ndn_bench", description=described(__doc__))
    p.add_argument("--topo", default="fat-tree", choices=["fat-tree", "leaf-spine"])
    p.add_argument("--bw", type=positive, default=10.0, help="link bandwidth in Mbit/s")
    p.add_argument("--rounds", type=count, default=5, help="synchronous rounds per run (default 5)")
    p.add_argument("--values", type=values, default=3818, help="gradient length (float32 values)")
    p.add_argument("--compute-time", type=nonnegative, default=0.3, help="seconds per gradient")
    p.add_argument("--gpu-loss", type=rates, default=[0.01, 0.05, 0.1], metavar="R,R,...",
                   help="loss rates in [0, 1) on one GPU's link, one NDN run each ('': none)")
    opts.add_alias(p, "--loss", "--gpu-loss", "gpu_loss", type=rates)
    p.add_argument("--fabric-loss", type=rates, default=[0.01, 0.05, 0.1], metavar="R,R,...",
                   help="loss rates in [0, 1) on a fabric link, one sync and one async NDN run each ('': none)")
    p.add_argument("--target", choices=("auto", "embedded", "bmv2"), default=None)
    return p


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: run everything, print the tables."""
    args = _parser().parse_args(argv)
    if os.geteuid() != 0:
        print("ndn_bench needs root (network namespaces)", file=sys.stderr)
        return 2
    topo = fat_tree(4, bw=args.bw) if args.topo == "fat-tree" else leaf_spine(2, 2, 3, bw=args.bw)
    hosts = topo.hosts()
    ps, gpus = hosts[0], hosts[1:]
    lossy = gpus[-1]                  # the farthest GPU
    rates, fabric = args.gpu_loss, args.fabric_loss
    runs = _run_all(args, topo, ps, gpus, lossy, rates, fabric)
    n = len(gpus)
    ndn, ip = runs["ndn"], runs["ip"]
    console.print(_pair_table(args, topo.name, n, ndn, ip))
    console.print(ratios_table(ndn, ip, n))
    if rates:
        console.print(_gpu_loss_table(args, runs, lossy, rates))
    if fabric:
        console.print(_fabric_table(args, runs, topo, ps, gpus, lossy, fabric))
    console.print(_subscriptions_table(runs, len(gpus)))
    bad = [k for k, r in runs.items() if not r.exact]
    for k in bad:
        console.print(f"[red]{k}: {'; '.join(runs[k].problems)[:300]}[/red]")
    return 1 if bad else 0


def _run_all(args: argparse.Namespace, topo: Any, ps: str, gpus: list[str], lossy: str,
             rates: list[float], fabric: list[float]) -> dict[Any, Any]:
    """Every run of the bench on one network, keyed as the tables read them."""
    from topologies.network import Network

    out = Path(tempfile.mkdtemp(prefix="gradnet-ndn-bench-"))
    kw = dict(ps=ps, gpus=gpus, rounds=args.rounds, values=args.values,
              compute_time=args.compute_time, max_time=240.0)
    runs: dict[Any, Any] = {}
    with Network(topo, target=args.target) as net:
        console.print("[dim]NDN, no loss ...[/dim]")
        runs["ndn"] = run_ndn(net, topo, out / "ndn", {}, **kw)
        console.print("[dim]IP unicast PS, no loss ...[/dim]")
        runs["ip"] = run_ip(net, topo, out / "ip", {}, **kw)
        for r in rates:
            console.print(f"[dim]NDN, {r:.0%} loss toward {lossy} ...[/dim]")
            runs[r] = run_ndn(net, topo, out / f"ndn-loss{r}", loss_on_gpu_link(topo, lossy, r), **kw)
        for r in fabric:
            for mode in ("sync", "async"):
                console.print(f"[dim]NDN {mode}, {r:.0%} loss on a fabric link ...[/dim]")
                runs[("fabric", mode, r)] = run_ndn(net, topo, out / f"ndn-fabric-{mode}-{r}",
                                                    loss_on_fabric_link(topo, ps, lossy, r), mode=mode,
                                                    steps=args.rounds, **kw)
        for sub in ("switch", "controller"):
            console.print(f"[dim]NDN, {sub} subscriptions ...[/dim]")
            runs[("sub", sub)] = run_ndn(net, topo, out / f"ndn-sub-{sub}", {}, subscriptions=sub,
                                         **{**kw, "rounds": 1})
    return runs


def _pair_table(args: argparse.Namespace, topo_name: str, n: int, ndn: Any, ip: Any) -> Table:
    """NDN beside IP without loss: round time, PS bytes per round, exactness."""
    t = Table(title=f"NDN PS (persistent PIT) vs IP-unicast PS, {topo_name}, {n} GPUs, "
                    f"{args.values} float32 values, {args.rounds} rounds, {args.bw:g} Mbit/s")
    for col in ("run", "round s", "PS distribution B/round", "PS egress B/round", "exact"):
        t.add_column(col, justify="right" if col != "run" else "left")
    for name, r in (("NDN", ndn), ("IP", ip)):
        t.add_row(name, f"{r.round_seconds:.2f}", f"{r.distribute_bytes_per_round:,.0f}",
                  f"{r.tx_bytes_per_round:,.0f}", "yes" if r.exact else "NO")
    return t


def _gpu_loss_table(args: argparse.Namespace, runs: dict[Any, Any], lossy: str,
                    rates: list[float]) -> Table:
    """Loss on one GPU's link: its updates the probe timer recovered."""
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
    return lt


def _fabric_table(args: argparse.Namespace, runs: dict[Any, Any], topo: Any, ps: str,
                  gpus: list[str], lossy: str, fabric: list[float]) -> Table:
    """Loss on a fabric link, sync and async: did every GPU get every update."""
    ft = Table(title=f"NDN under loss on a fabric link (both directions, toward {lossy}): every GPU, "
                     "every update")
    for col in ("loss", "mode", "link", "every update", "recovered by probe", "retransmissions",
                "emulated drops", "s", "exact"):
        ft.add_column(col, justify="right" if col not in ("mode", "link") else "left")
    for r in fabric:
        for mode in ("sync", "async"):
            res = runs[("fabric", mode, r)]
            link = ", ".join(f"{s}:{pt}" for s, pt in loss_on_fabric_link(topo, ps, lossy, r))
            final = args.rounds if mode == "sync" else args.rounds * len(gpus)
            got = [g for g, st in res.gpus.items() if st.get("version") == final
                   and (mode == "async" or st.get("updates_via_distribute", 0)
                        + st.get("updates_recovered_by_probe", 0) == args.rounds)]
            drops = sum(sum(st.get("link_drops", {}).values()) for st in res.switches.values())
            retx = int(res.ps.get("retransmissions", 0)) + sum(int(g.get("retransmissions", 0))
                                                             for g in res.gpus.values())
            ft.add_row(f"{r:.0%}", mode, link, f"{len(got)}/{len(gpus)} GPUs", str(res.probe_recoveries),
                       str(retx), str(drops), f"{res.seconds:.1f}", "yes" if res.exact else "NO")
    return ft


def _subscriptions_table(runs: dict[Any, Any], n_gpus: int) -> Table:
    """Subscriptions kept by the data plane vs by the controller: ack latency, packet-ins."""
    st = Table(title="subscriptions: in the data plane vs by the controller (one subscribe each, "
                     f"{n_gpus} GPUs)")
    for col in ("subscriptions", "ack latency mean ms", "max ms", "packet-ins", "packet-ins / subscription",
                "exact"):
        st.add_column(col, justify="right" if col != "subscriptions" else "left")
    for sub in ("switch", "controller"):
        res = runs[("sub", sub)]
        lat = [float(g["subscribe_s"]) for g in res.gpus.values() if g.get("subscribe_s") is not None]
        punted = sum(int(x.get("events", {}).get("punted", 0)) for x in res.switches.values())
        st.add_row(sub, f"{1e3 * sum(lat) / len(lat):.1f}" if lat else "-",
                   f"{1e3 * max(lat):.1f}" if lat else "-", str(punted),
                   f"{punted / len(lat):.2f}" if lat else "-", "yes" if res.exact else "NO")
    return st


if __name__ == "__main__":
    sys.exit(main())
