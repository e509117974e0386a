"""Malformed and random frames into every P4 program, then check it still does its job.

For each program (``forward``, ``ina``, ``ndn``, and ``nic`` + ``lan`` of a token LAN) one
small emulated network is built and deployed as its technique deploys it. One host then
sends ``--count`` frames into its switch, paced at ``--pps``: valid frames of every
protocol the fabric speaks (IPv4/UDP/TCP, ARP, INA, NDN over Ethernet, token frames),
truncated, with bytes flipped, with header fields set to extremes, padded, or entirely
random. Afterwards, without reloading any pipeline, the technique runs for real and its
result is checked exactly (INA and PS sums element by element, NDN parameters bit for
bit, token models identical on every node). Reported per switch process: alive, memory
(RSS) before and after, frames that reached its ports and frames it sent on.

    python -m bench.frame_fuzz [--programs forward,ina,ndn,token] [--count 100000]
                               [--pps 4000] [--seed 1] [--target auto|embedded|bmv2]

The suite runs a short version (tests/test_frame_fuzz.py); ``make bench`` the full one.
The sender itself runs inside a host's namespace: ``python -m bench.frame_fuzz send``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from wire import argtypes

PROGRAMS = ("forward", "ina", "ndn", "token")
MAX_FRAME = 1514  # an Ethernet frame without FCS at MTU 1500
ETH_P_ALL = 0x0003


# ----------------------------------------------------------------------------- frames


def corpus(src_mac: str, src_ip: str, peers: list[tuple[str, str]],
           token_formation: bool = True) -> list[bytes]:
    """Valid frames of every protocol the fabric speaks, from ``src_*`` to each peer
    ``(mac, ip)``: the seeds the mutations start from. ``token_formation=False`` leaves
    out the token's formation frames (FORM_START, FORM_REPLY, ROSTER)."""
    from scapy.all import ARP, IP, TCP, UDP, Dot1Q, Ether, IPv6, Raw

    from wire import ina, ports, token
    from wire.ndn import ETHERTYPE_NDN, NDN_MAC, data_packet, interest_packet

    out: list[bytes] = []
    v = np.arange(ina.INA_VALUES, dtype=np.int32)
    ndn_dst = ":".join(f"{b:02x}" for b in NDN_MAC)
    for mac, ip in peers:
        eth = Ether(src=src_mac, dst=mac)
        out += [bytes(eth / IP(src=src_ip, dst=ip) / UDP(sport=5000, dport=5001) / Raw(b"x" * 64)),
                bytes(eth / IP(src=src_ip, dst=ip) / TCP(sport=5000, dport=80, flags="S")),
                bytes(eth / IP(src=src_ip, dst=ip, ttl=1) / UDP(dport=7) / Raw(b"ttl")),
                bytes(eth / IP(src=src_ip, dst=ip, ihl=15, options=[]) / Raw(b"\x01" * 40)),
                bytes(eth / Dot1Q(vlan=7) / IP(src=src_ip, dst=ip) / UDP(dport=7)),
                bytes(eth / IPv6() / UDP(dport=7)),
                bytes(Ether(src=src_mac, dst="ff:ff:ff:ff:ff:ff") / ARP(psrc=src_ip, pdst=ip))]
        udp = eth / IP(src=src_ip, dst=ip) / UDP(sport=ina.INA_UDP_PORT, dport=ina.INA_UDP_PORT)
        for t in ina.MsgType:
            vals = None if t in ina.HEADER_ONLY_TYPES else v
            out.append(bytes(udp / Raw(ina.encode_ina(int(t), 1, 0, 3, 0, 0, 1, 1, values=vals))))
        out.append(bytes(udp / Raw(ina.encode_ina(int(ina.MsgType.GRAD), 1, 31, 2**31, 0, 0,
                                                 0xFFFFFFFF, 32, values=v))))
        udp_ndn = eth / IP(src=src_ip, dst=ip) / UDP(sport=ports.NDN_UDP_PORT, dport=ports.NDN_UDP_PORT)
        out.append(bytes(udp_ndn / Raw(interest_packet("/h1/train/seg=0"))))
    ndn = Ether(src=src_mac, dst=ndn_dst, type=ETHERTYPE_NDN)
    for name in ("/h1/train", "/*insert*/h1/train", "/*distribute*/h1/train/v=1/seg=0",
                 "/h1/grad/v=1/seg=3"):
        out += [bytes(ndn / Raw(interest_packet(name))),
                bytes(ndn / Raw(data_packet(name, bytes(range(200)), final_block=3)))]
    smac = token.mac_bytes(src_mac)
    formation = {token.TokenMsg.FORM_START, token.TokenMsg.FORM_REPLY, token.TokenMsg.ROSTER}
    for t in token.TokenMsg:
        if t in formation and not token_formation:
            continue
        hdr = token.TokenHeader(int(t), sender=1, batch=0, frag=0, nfrags=1)
        values = np.arange(token.TOKEN_VALUES, dtype=np.int32) if t == token.TokenMsg.GRAD else None
        out.append(token.encode_token(hdr, smac, values=values))
    return out


def mutate(seeds: list[bytes], rng: np.random.Generator) -> bytes:
    """One frame: a seed, mutated one of six ways (or random bytes)."""
    r = rng.random()
    if r < 0.08:
        return rng.bytes(int(rng.integers(0, MAX_FRAME + 1)))
    frame = bytearray(seeds[int(rng.integers(len(seeds)))])
    if r < 0.28:  # truncated anywhere, headers included
        return bytes(frame[: int(rng.integers(0, len(frame) + 1))])
    if r < 0.58:  # a few bytes flipped, mostly in the headers
        for _ in range(int(rng.integers(1, 9))):
            i = int(rng.integers(0, min(len(frame), 96)))
            frame[i] ^= int(rng.integers(1, 256))
        return bytes(frame)
    if r < 0.80:  # an aligned 1/2/4-byte field set to an extreme or random value
        width = int(rng.choice([1, 2, 4]))
        i = int(rng.integers(0, max(1, min(len(frame), 96) - width)))
        value = int(rng.choice([0, 1, 2**(8 * width) - 1, 2**(8 * width - 1), int(rng.integers(0, 2**(8 * width)))]))
        frame[i:i + width] = value.to_bytes(width, "big")
        return bytes(frame[:MAX_FRAME])
    if r < 0.90:  # padded with garbage up to the MTU
        return bytes(frame + rng.bytes(int(rng.integers(1, max(2, MAX_FRAME - len(frame) + 1)))))[:MAX_FRAME]
    return bytes(frame)  # valid (an unknown job, a wrong batch, ...)


def send(iface: str, seeds: list[bytes], count: int, pps: float, seed: int,
         max_time: float) -> dict[str, Any]:
    """Send ``count`` mutated frames on ``iface`` at ``pps`` (bounded by ``max_time``)."""
    rng = np.random.default_rng(seed)
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.bind((iface, 0))
    n = sent = short = refused = 0
    t0 = time.monotonic()
    burst = max(1, int(pps / 200))  # 5 ms of frames, then wait for the schedule
    try:
        while n < count and time.monotonic() - t0 < max_time:
            for _ in range(min(burst, count - n)):
                n += 1
                frame = mutate(seeds, rng)
                if len(frame) < 14:  # the kernel refuses a frame shorter than its header
                    frame = frame + bytes(14 - len(frame))
                    short += 1
                try:
                    sock.send(frame)
                    sent += 1
                except OSError:
                    refused += 1
            time.sleep(max(0.0, t0 + n / pps - time.monotonic()))
    finally:
        sock.close()
    return {"sent": sent, "padded_short": short, "refused_by_kernel": refused,
            "seconds": round(time.monotonic() - t0, 3)}


# ----------------------------------------------------------------------------- networks


@dataclass
class FuzzRow:
    """One switch process's result."""

    program: str
    switches: list[str]
    pid: int
    alive: bool = True
    rss_before_kb: int = 0
    rss_after_kb: int = 0
    rx: int = 0
    tx: int = 0
    tracebacks: int = 0


@dataclass
class FuzzResult:
    """One program's fuzz run and the check after it."""

    program: str
    target: str
    frames: int = 0
    send: dict[str, Any] = field(default_factory=dict)
    rows: list[FuzzRow] = field(default_factory=list)
    check: str = ""
    exact: bool = False


def rss_kb(pid: int) -> int:
    """Resident set size of ``pid`` in KiB (0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return 0
    return 0


def port_counts(sw: Any) -> tuple[int, int]:
    """Frames received and sent on the switch's own ports (its namespace's /proc/net/dev)."""
    from hosts.net import parse_net_dev

    nics = [c for name, c in parse_net_dev(sw.cmd("cat /proc/net/dev")).items() if name != "lo"]
    return sum(c.rx_packets for c in nics), sum(c.tx_packets for c in nics)


def _network(program: str, target: str | None, run_dir: Path) -> tuple[Any, Any]:
    from controller.token import token_lan
    from topologies import star
    from topologies.network import Network

    topo = token_lan(4, bw=1000) if program == "token" else star(4, bw=1000)
    net = Network(topo, target=target, run_dir=str(run_dir / "net"), limit_bw=False)
    net.start()
    return net, topo


def _deploy(program: str, net: Any, topo: Any) -> Any:
    """Deploy the technique; returns what the check needs."""
    if program in ("forward", "ina"):
        from controller.ina import InaDeployment, InaJob

        job = InaJob.plan(topo, "h1", ["h2", "h3", "h4"], 0, 1000.0, 4096, job_id=1,
                          aggregate=program == "ina")
        InaDeployment(topo, net.grpc_addresses(), [job]).deploy()
        if program == "ina":
            from experiments.ina import switch_neighbors

            # the hosts reach s1's address (10.255.0.1) only through a static neighbour
            # entry (nothing answers ARP for it): without one every tagged GRAD, every
            # RESULT sent for s_d's multicast and every flush died in the hosts' kernels,
            # and the check ran on the agents' recovery alone, one fragment per timer
            switch_neighbors(net, topo, job.aggregating_switches)
        return job
    if program == "ndn":
        from controller.ndn import NdnDeployment

        dep = NdnDeployment(topo, net.grpc_addresses())
        dep.deploy()
        return dep
    from controller.token import TokenDeployment

    dep = TokenDeployment(topo, net.grpc_addresses())
    dep.deploy()
    return dep


def _check(program: str, net: Any, topo: Any, deployed: Any, run_dir: Path) -> tuple[bool, str]:
    """Run the technique for real on the fuzzed network; (exact, what was checked)."""
    if program in ("forward", "ina"):
        from experiments.ina import run_jobs

        rng = np.random.default_rng(5)
        grads = [(rng.standard_normal(4096) * 0.05).astype(np.float32) for _ in range(3)]
        (res,) = run_jobs(net, topo, [(deployed, grads)], run_dir / "check", program, max_time=60)
        what = "INA job" if program == "ina" else "PS job over forward.p4"
        text = f"{what}, 3 workers x 4,096 values: " + ("exact" if res.exact else f"{res.mismatches} values differ")
        if program == "ina":  # aggregated in s1 for real, not summed at the PS after re-sends
            partials = res.ps_packets["partial_in"]
            text += f", {partials} PARTIALs from s1, {res.retransmissions} re-sends"
            return bool(res.exact) and partials > 0, text
        return bool(res.exact), text
    if program == "ndn":
        from experiments.ndn import run_agents

        try:
            deployed.start_manager(run_dir / "persistent-pit.json")
            res = run_agents(net, topo, run_dir / "check", transport="ndn", ps="h1",
                             gpus=["h2", "h3", "h4"], rounds=2, compute_time=0.05, max_time=60)
        finally:
            deployed.stop_manager()
        return bool(res.exact), f"NDN-PS, 3 GPUs x 2 rounds: {'bit-exact' if res.exact else res.problems}"
    from experiments.token import run_token

    common = ["--epochs", "1", "--batches", "2", "--batch-size", "32", "--cutoff", "1.0",
              "--max-time", "60"]
    run = run_token(net, topo, run_dir / "check", common, hosts=["h1", "h2", "h3"], timeout=90)
    nodes = [run.node(h) for h in ("h1", "h2", "h3")]
    ok = all(n.returncode == 0 and n.summary for n in nodes) and \
        len({n.summary["weights"] for n in nodes}) == 1
    return ok, "token, 3 nodes x 2 batches: " + ("identical models" if ok else
                                                  str([(n.returncode, n.stderr[-200:]) for n in nodes]))


def _processes(net: Any, topo: Any) -> dict[int, list[Any]]:
    """Switch process PID -> the switches it serves (one each on BMv2, a group on the
    embedded target)."""
    out: dict[int, list[Any]] = {}
    for name in topo.switches():
        sw = net.switch(name)
        if sw.proc is not None:
            out.setdefault(sw.proc.pid, []).append(sw)
    return out


def _port_counts(switches: list[Any]) -> tuple[int, int]:
    counts = [port_counts(sw) for sw in switches]
    return sum(c[0] for c in counts), sum(c[1] for c in counts)


def fuzz_program(program: str, count: int, pps: float, seed: int, target: str | None,
                 run_dir: Path, log: Any = print, token_formation: bool = True) -> FuzzResult:
    """Build, deploy, fuzz from one host, check; everything torn down afterwards.

    ``token_formation=False``: no token formation frames among the seeds. (With them, a
    forged ROSTER LAST or FORM_START from the fuzzing host once closed formation in every
    NIC for good; the LAN switch's port security and the NICs' formation openers, both
    installed by ``TokenDeployment``, now refuse them.)"""
    if program not in PROGRAMS:
        raise ValueError(f"unknown program {program!r}: one of {', '.join(PROGRAMS)}")
    from experiments.runner import finish, spawn

    run_dir.mkdir(parents=True, exist_ok=True)
    net, topo = _network(program, target, run_dir)
    res = FuzzResult(program=program, target=net.target, frames=count)
    try:
        deployed = _deploy(program, net, topo)
        procs = _processes(net, topo)
        before = {pid: (rss_kb(pid), _port_counts(sws)) for pid, sws in procs.items()}
        # token: a host outside the job that follows (its NIC obeys it: a node owns its
        # NIC); elsewhere a worker of it
        src = "h4" if program == "token" else "h2"
        peers = [(topo.host_mac(h), topo.host_ip(h)) for h in topo.hosts() if h != src]
        seeds_file = run_dir / "seeds.json"
        seeds_file.write_text(json.dumps([f.hex() for f in corpus(topo.host_mac(src), topo.host_ip(src), peers, token_formation)]))
        log(f"{program}: {count:,} frames from {src} at {pps:,.0f}/s ({net.target} target)")
        proc = spawn(net.host(src), run_dir / "sender",
                     [sys.executable, "-m", "bench.frame_fuzz", "send", "--iface", topo.iface(src)["name"],
                      "--seeds", str(seeds_file), "--count", str(count), "--pps", str(pps),
                      "--seed", str(seed), "--max-time", str(count / pps * 3 + 30)])
        rc, out, err = finish(proc, run_dir / "sender", count / pps * 3 + 60)
        if rc != 0:
            raise RuntimeError(f"the fuzz sender failed ({rc}): {err[-500:]}")
        res.send = json.loads(out.strip().splitlines()[-1])
        time.sleep(2.0)  # let the switches drain their queues
        for pid, sws in procs.items():
            proc = sws[0].proc
            alive = proc is not None and proc.poll() is None
            rx, tx = _port_counts(sws)
            row = FuzzRow(program, [sw.name for sw in sws], pid, alive, before[pid][0], rss_kb(pid),
                          rx - before[pid][1][0], tx - before[pid][1][1])
            for f in {x for sw in sws for x in (sw.log_file, sw.log_file + ".out")}:
                if os.path.exists(f):
                    with open(f, errors="replace") as fh:
                        row.tracebacks += sum(1 for line in fh if line.startswith("Traceback"))
            res.rows.append(row)
        if all(r.alive for r in res.rows):
            res.exact, res.check = _check(program, net, topo, deployed, run_dir)
        else:
            res.check = "a switch process died"
    finally:
        net.stop()
    return res


# ----------------------------------------------------------------------------- CLI


def _table(results: list[FuzzResult]) -> None:
    from rich.table import Table

    from controller.output import TableConsole

    t = Table(title="Malformed frames into every program (one host sends; then a real run)")
    for col in ("program", "target", "switches", "sent", "port rx", "port tx",
                "alive", "RSS MiB before", "after", "trace-backs", "check afterwards"):
        t.add_column(col, overflow="fold")
    for r in results:
        for i, row in enumerate(r.rows):
            t.add_row(r.program if i == 0 else "", r.target if i == 0 else "", ",".join(row.switches),
                      f"{r.send.get('sent', 0):,}" if i == 0 else "", f"{row.rx:,}", f"{row.tx:,}",
                      "yes" if row.alive else "NO", f"{row.rss_before_kb / 1024:.1f}",
                      f"{row.rss_after_kb / 1024:.1f}", str(row.tracebacks),
                      ("ok: " if r.exact else "FAILED: ") + r.check if i == 0 else "")
    TableConsole().print(t)


def build_parser() -> argparse.ArgumentParser:
    """The command line (``send`` runs inside a host)."""
    p = argtypes.Parser(prog="python -m bench.frame_fuzz", description=__doc__,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--programs", type=argtypes.names(*PROGRAMS), default=list(PROGRAMS),
                   help=f"comma-separated subset of {','.join(PROGRAMS)} (token = nic.p4 + lan.p4)")
    p.add_argument("--count", type=argtypes.count, default=100_000, help="frames per program (default 100,000)")
    p.add_argument("--pps", type=argtypes.positive, default=4000.0,
                   help="sending rate, frames/s (default 4,000: what one switch process keeps up with)")
    p.add_argument("--seed", type=argtypes.natural, default=1, help="the mutations' seed (default 1)")
    p.add_argument("--target", default="auto", choices=["auto", "embedded", "bmv2"])
    p.add_argument("--out-dir", default="", help="where networks and logs go (default: a temporary directory)")
    return p


def send_main(argv: list[str]) -> int:
    """``send``: the in-host sender; prints one JSON line."""
    p = argtypes.Parser(prog="python -m bench.frame_fuzz send")
    p.add_argument("--iface", required=True)
    p.add_argument("--seeds", required=True, help="JSON list of hex frames")
    p.add_argument("--count", type=argtypes.count, required=True)
    p.add_argument("--pps", type=argtypes.positive, required=True)
    p.add_argument("--seed", type=argtypes.natural, default=1)
    p.add_argument("--max-time", type=argtypes.positive, required=True)
    a = p.parse_args(argv)
    seeds = [bytes.fromhex(s) for s in json.loads(Path(a.seeds).read_text())]
    print(json.dumps(send(a.iface, seeds, a.count, a.pps, a.seed, a.max_time)), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Fuzz every named program; a table; exit 1 when any switch died or any check failed."""
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "send":
        return send_main(argv[1:])
    p = build_parser()
    a = p.parse_args(argv)
    programs = a.programs
    base = Path(a.out_dir) if a.out_dir else Path(tempfile.mkdtemp(prefix="gradnet-fuzz-"))
    results = []
    for prog in programs:
        results.append(fuzz_program(prog, a.count, a.pps, a.seed, None if a.target == "auto" else a.target,
                                    base / prog, log=lambda m: print(m, flush=True)))
    _table(results)
    print(f"logs in {base}")
    return 0 if all(r.exact and all(x.alive and not x.tracebacks for x in r.rows) for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())

