"""The methods' own parameter values against the project's choices, in one run.

Run: ``python -m bench method-params`` (``--part token,ndn,ring,budget`` picks parts).

* **token**: four NICs running ``nic.p4`` in process on one emulated LAN (every frame a
  NIC sends to the LAN reaches the other three), a virtual clock, every host ticking
  every 50 ms; member 2 passes the token to member 3, which is dead (and with d = 2 the
  member after it too). Detection time = from the pass to the NODE_LOST, with the NIC
  asking for 1 re-send (the method's value) or 3 (the project's default), against the
  formula ``t + (r - 1) t/2 + d t`` and the method's own ``d t`` after the re-send.
* **ndn**: ``ndn.p4`` in process, virtual clock, 3 GPUs subscribed on one switch, one
  update a second for 60 s. GPU h4 dies at 10 s without unsubscribing; the switch
  restarts (registers lost) at 40 s. Soft state (lifetime 6 s, refresh every 2 s) vs
  persistent (no refresh, until unsubscribed), the latter with and without the
  controller unsubscribing the dead GPU at 20 s.
* **ring**: the aggregator index, crc32 modulo N vs consistent hashing (16 points per
  aggregator on a 4,096-position ring): the share of 20,000 fragments whose aggregator
  changes when N grows from N-1 to N; aggregators used and GRADs passed on (another fragment's
  key there) for 256 concurrent fragments on ``ina.p4`` in process; and the in-process
  aggregation rate of ``ina.p4`` either way, per CPU second of the bench process
  (5 interleaved runs; a 2-core machine shared with other jobs: indicative only).
* **budget**: greedy + LP placement on fat-trees with s_d outside K (the method's model,
  the default) or inside it (``tor_in_budget``): gamma (Mbit/s per worker) and solve time.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.table import Table

from controller.output import TableConsole
from wire.argtypes import Parser, names

ROOT = Path(__file__).resolve().parent.parent
PARTS = ("token", "ndn", "ring", "budget")


# ----------------------------------------------------------------------------- token

class _Lan:
    """Four nic.p4 NICs in process on one LAN, sharing a virtual clock (us)."""

    def __init__(self, t_us: int, resends: int) -> None:
        from targets.embedded.state import Replica
        from targets.embedded.switch import Switch
        from wire.token import TokenFlags, TokenHeader, TokenMsg, mac_bytes

        self.H, self.M, self.F = TokenHeader, TokenMsg, TokenFlags
        self.now = [1_000_000]
        self.macs = [mac_bytes(f"00:00:0a:00:00:0{i}") for i in range(1, 5)]
        self.nics = []
        for i in range(4):
            sw = Switch()
            sw.install_program(sw.load_program((ROOT / "p4src/build/nic.json").read_bytes()))
            sw.pre.set_group(1, [Replica(1, 0), Replica(2, 0)], create=True)
            sw._now_us = lambda: self.now[0]  # type: ignore[method-assign]
            self.nics.append(sw)
            self.host(i, TokenMsg.CONFIG, aux=t_us, member=resends)
        # member 1's host opens formation and sends the roster through its own NIC
        self.host(0, TokenMsg.FORM_START, sender=1)
        for m in range(1, 5):
            self.host(0, TokenMsg.ROSTER, sender=1, member=m, mac=self.macs[m - 1], count=4,
                      flags=int(TokenFlags.LAST) if m == 4 else 0)

    def _deliver(self, src: int, out: list) -> list:
        from wire.token import decode_token

        to_host = []
        for port, frame in out:
            if port == 2:
                for j in range(4):
                    if j != src:
                        to_host += [(j, f) for p, f in self.nics[j].process(2, frame) if p == 1]
            else:
                to_host.append((src, frame))
        return [(j, decode_token(f)[2]) for j, f in to_host]

    def host(self, i: int, msg: Any, **kw: Any) -> list:
        """Member i+1's host sends ``msg`` to its NIC; what reaches any host."""
        from wire.token import encode_token

        frame = encode_token(self.H(int(msg), **kw), self.macs[i])
        return self._deliver(i, self.nics[i].process(1, frame))


def detection_s(t_s: float, resends: int, d: int, tick_s: float = 0.05) -> tuple[float, int]:
    """Seconds from member 2's pass to a NODE_LOST for member 3 (members 3..2+d dead),
    and the re-sends member 2 made."""
    lan = _Lan(int(t_s * 1e6), resends)
    M = lan.M
    lan.host(1, M.PASS, sender=2, pass_no=1)
    t0, n_resent = lan.now[0], 0
    alive = [i for i in range(4) if not 2 <= i <= 1 + d]
    while lan.now[0] - t0 < 60e6:
        lan.now[0] += int(tick_s * 1e6)
        for i in alive:
            for _j, h in lan.host(i, M.TICK):
                if h.msg_type == M.RESEND_DUE:
                    lan.host(1, M.PASS, sender=2, pass_no=1, flags=int(lan.F.RESEND))
                    n_resent += 1
                elif h.msg_type == M.NODE_LOST and h.member == 3:
                    return (lan.now[0] - t0) / 1e6, n_resent
    raise RuntimeError("no NODE_LOST within 60 s")


def token_table(t_s: float = 0.2) -> Table:
    tab = Table(title=f"token: detection of a dead holder (nic.p4 in process, virtual clock, "
                      f"t = {t_s:g} s, ticks 50 ms)")
    for c in ("re-sends", "d", "re-sent", "detected after (s)", "formula t+(r-1)t/2+dt",
              "method: d*t after the re-send"):
        tab.add_column(c, justify="right")
    for r in (1, 3):
        for d in (1, 2):
            got, n = detection_s(t_s, r, d)
            tab.add_row(str(r), str(d), str(n), f"{got:.2f}", f"{t_s + (r - 1) * t_s / 2 + d * t_s:.2f}",
                        f"{d * t_s:.2f}")
    return tab


# ----------------------------------------------------------------------------- ndn

def ndn_run(lifetime_us: int, refresh_s: float | None, unsubscribe_at: float | None,
            seconds: int = 60, dead_at: float = 10.0, restart_at: float = 40.0) -> dict[str, Any]:
    """One scenario on ndn.p4 in process (port 1: the PS; 2..4: GPUs h2..h4, h4 dies)."""
    from tests.test_ndn_switch import dist, frame, ins, ndn_switch, route
    from wire.ndn import interest_packet, name_of

    def fresh() -> Any:
        sw = ndn_switch()
        route(sw, "/h1", 1)
        p = sw.program
        t = "MyIngress.persistent_pit.subscription_config"
        p.tables[t].set_default(p.action_call(t, "MyIngress.persistent_pit.set_subscriptions",
                                              (0, lifetime_us)))
        return sw

    sw, clock = fresh(), 0.0
    gpus = {2: "h2", 3: "h3", 4: "h4"}
    for port, g in gpus.items():
        sw.process(port, frame(ins(g)))
    control, to_dead, dead_last, missed = len(gpus), 0, None, 0
    next_refresh = refresh_s
    for sec in range(1, seconds + 1):
        sw._t0 -= 1.0
        clock = float(sec)
        if refresh_s and next_refresh is not None and clock >= next_refresh:
            for port, g in gpus.items():
                if port != 4 or clock < dead_at:
                    sw.process(port, frame(ins(g)))
                    control += 1
            next_refresh += refresh_s
        if unsubscribe_at is not None and clock == unsubscribe_at:   # on h4's behalf
            out = ((4 << 7) | 1).to_bytes(2, "big") + frame(
                interest_packet(name_of(b"*unsubscribe*", "h1", "train", "h4")))
            sw.process(255, out)
            control += 1
        if clock == restart_at:
            sw = fresh()
        ports = {p for p, _ in sw.process(1, frame(dist(v=sec)))}
        missed += len({2, 3} - ports)
        if 4 in ports and clock > dead_at:
            to_dead += 1
            dead_last = clock
    return {"control": control, "to_dead": to_dead,
            "dead_for": "-" if dead_last is None else f"{dead_last - dead_at:.0f}",
            "missed": missed}


def ndn_table() -> Table:
    tab = Table(title="ndn: subscription lifetime (ndn.p4 in process, virtual clock, 3 GPUs, "
                      "1 update/s for 60 s; h4 dies at 10 s; switch restart at 40 s)")
    for c in ("subscriptions", "control Interests", "updates to the dead GPU",
              "dead GPU served for (s)", "updates missed by live GPUs"):
        tab.add_column(c, justify="right")
    from controller.ndn.persistent_pit import PERSISTENT_LIFETIME_US

    rows = [("soft: 6 s, refresh 2 s (default)", 6_000_000, 2.0, None),
            ("persistent, no unsubscribe", PERSISTENT_LIFETIME_US, None, None),
            ("persistent, controller unsubscribes h4 at 20 s", PERSISTENT_LIFETIME_US, None, 20.0)]
    for label, life, refresh, unsub in rows:
        r = ndn_run(life, refresh, unsub)
        tab.add_row(label, str(r["control"]), str(r["to_dead"]), r["dead_for"], str(r["missed"]))
    return tab


# ----------------------------------------------------------------------------- ring

def moved_share(n: int, frags: int = 20000) -> tuple[float, float]:
    """Shares of fragments whose aggregator changes from N-1 to N: (modulo, ring)."""
    from controller.ina.aggregator import modulo_index, ring_owners, ring_position

    a, b = ring_owners(n - 1), ring_owners(n)
    pos = [ring_position(1, f) for f in range(frags)]
    ring = sum(a[p] != b[p] for p in pos) / frags
    mod = sum(modulo_index(1, f, 0, n - 1) != modulo_index(1, f, 0, n) for f in range(frags)) / frags
    return mod, ring


def ring_switch(n: int | None) -> tuple[Any, Any, Any]:
    """ina.p4 in process as job 1's aggregator; ``n``: ring of n aggregators, else modulo."""
    from scapy.all import IP, UDP, Ether

    from controller.ina.aggregator import ring_owners
    from targets.embedded.state import TableEntry
    from tests.ina_probe import aggregating_switch
    from wire.ina import INA_HEADER, INA_VALUES, MsgType

    sw, prog = aggregating_switch((ROOT / "p4src/build/ina.json").read_bytes())
    # a stopped clock: no aggregator ages out however slowly this machine runs the packets
    sw._now_us = lambda: 10_000_000  # type: ignore[method-assign]
    a = "MyIngress.aggregator."
    if n is not None:
        for p, owner in enumerate(ring_owners(n)):
            prog.tables[a + "ina_ring"].insert(TableEntry((p,), prog.action_call(
                a + "ina_ring", a + "ring_owner", (owner,))))
    vals = np.ones(INA_VALUES, dtype=">i4").tobytes()

    def grad(frag: int, bit: int) -> bytes:
        pl = INA_HEADER.pack(int(MsgType.GRAD), 1, bit, frag, 1, 0, 1 << bit, 1, 2, 0, 0) + vals
        return bytes(Ether() / IP(src="10.0.0.2", dst="10.255.0.1") / UDP(sport=40000, dport=40000) / pl)

    return sw, prog, grad


def ring_contention(n: int | None, concurrent: int = 256) -> tuple[int, int]:
    """Aggregators taken and GRADs passed on for ``concurrent`` fragments in flight."""
    sw, prog, grad = ring_switch(n)
    for f in range(concurrent):
        sw.process(1, grad(f, 0))
    ev = prog.counters["MyIngress.aggregator.ina_events"]
    assert ev.read(5)[0] == 0  # nothing taken over: every add is a distinct aggregator
    return ev.read(0)[0], ev.read(2)[0]


def ring_rate(n: int | None, frags: int = 400) -> float:
    """2-contributor aggregations a second through ina.p4 in process: per fragment two
    GRADs (the second completes it: a PARTIAL) and the CLEAR that frees the aggregator,
    so no fragment ever finds another's key and both indices do the same work."""
    from scapy.all import IP, UDP, Ether

    from wire.ina import INA_HEADER, MsgType

    sw, prog, grad = ring_switch(n)
    hdr = Ether() / IP(src="10.0.0.1", dst="10.255.0.1") / UDP(sport=40000, dport=40000)
    pkts = []
    for f in range(frags):
        clear = INA_HEADER.pack(int(MsgType.CLEAR), 1, 0, f, 1, 0, 1, 1, 0, 0, 0)
        pkts += [grad(f, 0), grad(f, 1), bytes(hdr / clear)]
    # CPU time of this process: less at the mercy of the other jobs than wall time
    t0 = time.process_time()
    for p in pkts:
        sw.process(1, p)
    dt = time.process_time() - t0
    ev = prog.counters["MyIngress.aggregator.ina_events"]
    if ev.read(1)[0] != frags or ev.read(3)[0] != frags:   # partials, cleared
        raise RuntimeError(f"ina.p4 in process: {ev.read(1)[0]} partials and {ev.read(3)[0]} "
                           f"clears for {frags} fragments")
    return frags / dt


def ring_table() -> Table:
    tab = Table(title="ina: aggregator index, crc32 modulo N vs consistent hashing (ina.p4 in "
                      "process; rates measured on a loaded, shared 2-core machine)")
    for c in ("index", "N", "fragments moved from N-1 to N", "aggregators taken / passed on "
              "(256 in flight)", "aggregations per CPU second (median of 5, interleaved)"):
        tab.add_column(c, justify="right")
    rates: dict[str, list[float]] = {"modulo": [], "ring": []}
    for _ in range(5):                                  # interleaved: the load drifts
        rates["modulo"].append(ring_rate(None))
        rates["ring"].append(ring_rate(1024))
    for n, runs in ((16, False), (1024, True)):
        mod, ring = moved_share(n)
        for label, idx, share in (("modulo", None, mod), ("ring", n, ring)):
            if runs or label == "ring":
                taken, passed = ring_contention(idx if label == "ring" else None)
                used = f"{taken} / {passed}"
                rate = f"{statistics.median(rates[label]):.0f}" if runs else "-"
            else:
                used, rate = "- (N is compiled in: 1024)", "-"
            tab.add_row(label, str(n), f"{share:.1%}", used, rate)
    return tab


# ----------------------------------------------------------------------------- budget

def budget_table() -> Table:
    from controller.placement import PlacementProblem, greedy_placement
    from topologies import fat_tree

    tab = Table(title="ina: budget K with s_d outside (default) or inside (tor_in_budget); "
                      "greedy + LP, fat-tree, every link 1000 Mbit/s, C = k/2*1000")
    for c in ("fat-tree", "K", "s_d", "placed", "s_d aggregates", "gamma", "solve (ms)"):
        tab.add_column(c, justify="right")
    for k, budgets in ((4, (1, 2, 4)), (8, (2, 4, 8))):
        topo = fat_tree(k, bw=1000.0)
        hosts = topo.hosts()
        for budget in budgets:
            for inside in (False, True):
                prob = PlacementProblem(topo, hosts[0], hosts[1:], budget, k / 2 * 1000.0,
                                        tor_in_budget=inside)
                t0 = time.perf_counter()
                pl = greedy_placement(prob)
                ms = (time.perf_counter() - t0) * 1000
                tab.add_row(f"k={k}", str(budget), "inside K" if inside else "outside",
                            ",".join(pl.switches), "yes" if pl.result.tor_active else "no",
                            f"{pl.gamma:.1f}", f"{ms:.0f}")
    return tab


def main(argv: list[str] | None = None) -> int:
    ap = Parser(prog="python -m bench method-params", description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", type=names(*PARTS), default=list(PARTS), metavar="P,P,...",
                    help=f"which comparisons (default all: {','.join(PARTS)})")
    ap.add_argument("--out-dir", default="results", help="where the tables are saved")
    args = ap.parse_args(argv)
    parts = args.part
    console = TableConsole()
    out = Path(args.out_dir) / time.strftime("method-params-%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    console.save_to(out)
    build = {"token": token_table, "ndn": ndn_table, "ring": ring_table, "budget": budget_table}
    for p in parts:
        console.print(build[p]())
    console.print(f"tables saved in {out}")
    return 0
