"""The aggregator index by consistent hashing (docs/ina.md, "Aggregator index").

Unit: the controller's ring (``controller/ina/aggregator.py``: ``ring_owners``) moves only
the positions a new aggregator takes when N grows, where crc32 modulo N moves most
fragments. In process (ina.p4 on the embedded target): with ``ina_ring`` filled, a
fragment lands in the aggregator that owns its ring position; without it, in crc32 mod
1024; an aggregator holding another fragment's key is not used (the packet is passed on).
Network (a star, s1 aggregates; embedded target unless TARGET says otherwise): a job
deployed with ``aggregator_ring=8`` gets, for 64 fan-in-1 probes, exactly the distinct
ring owners of their fragments (at most 8), the rest passed on; with the default index,
the distinct crc32 indices.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from controller.ina.aggregator import (
    NUM_AGGREGATORS,
    RING_POSITIONS,
    modulo_index,
    ring_owners,
    ring_position,
)
from tests.ina_probe import probe_counts
from tests.netenv import started_network
from wire.ina import INA_HEADER, INA_VALUES, MsgType

ROOT = Path(__file__).resolve().parent.parent
A = "MyIngress.aggregator."


def test_ring_moves_about_one_nth_when_an_aggregator_is_added() -> None:
    for n in (4, 16, 64):
        old, new = ring_owners(n), ring_owners(n + 1)
        moved = [p for p in range(RING_POSITIONS) if old[p] != new[p]]
        assert all(new[p] == n for p in moved)          # only to the new aggregator
        assert 0 < len(moved) / RING_POSITIONS < 3 / (n + 1)
        frags = range(5000)
        mod_moved = sum(modulo_index(1, f, 0, n) != modulo_index(1, f, 0, n + 1) for f in frags)
        assert mod_moved / len(frags) > 0.6              # modulo: most fragments move
    assert set(ring_owners(8)) == set(range(8))
    cfg = (ROOT / "p4src" / "include" / "config.p4").read_text()
    assert f"#define NUM_AGGREGATORS {NUM_AGGREGATORS}" in cfg
    assert f"#define INA_RING_POSITIONS {RING_POSITIONS}" in cfg
    assert 1 << int(cfg.split("#define INA_RING_BITS ")[1].split()[0]) == RING_POSITIONS


def test_switch_uses_the_ring_owner_and_the_stored_key_rule() -> None:
    from scapy.all import IP, UDP, Ether

    from targets.embedded.state import TableEntry
    from tests.ina_probe import aggregating_switch

    sw, prog = aggregating_switch((ROOT / "p4src" / "build" / "ina.json").read_bytes())

    def send(frag: int, bit: int) -> None:
        vals = np.full(INA_VALUES, 1, dtype=">i4").tobytes()
        pl = INA_HEADER.pack(int(MsgType.GRAD), 1, bit, frag, 1, 0, 1 << bit, 1, 2, 0, 0) + vals
        sw.process(1, bytes(Ether() / IP(src="10.0.0.2", dst="10.255.0.1")
                            / UDP(sport=40000, dport=40000) / pl))

    def held(i: int) -> int:
        return prog.registers[A + "agg_key"].read(i) & 0xFFFFFFFF  # the fragment it holds

    send(5, 0)                                           # no ring: crc32 mod 1024
    assert held(modulo_index(1, 5)) == 5
    owners = ring_owners(8)
    # the controller installs the ring in one P4Runtime Write: the native backend then
    # copies the table into native memory once, not once per entry
    native = getattr(prog, "native", None)
    with native.deferred_sync() if native is not None else contextlib.nullcontext():
        for p, a in enumerate(owners):
            prog.tables[A + "ina_ring"].insert(TableEntry((p,), prog.action_call(
                A + "ina_ring", A + "ring_owner", (a,))))
    frags = [f for f in range(100, 200) if modulo_index(1, f) != modulo_index(1, 5)][:40]
    for f in frags:
        send(f, 0)
    first: dict[int, int] = {}
    for f in frags:
        first.setdefault(owners[ring_position(1, f)], f)
    for a in range(8):
        assert held(a) == first.get(a, 0)               # the first fragment of each owner
    passed = prog.counters[A + "ina_events"].read(2)[0]
    assert passed == len(frags) - len(first)            # the rest found another key: passed on


# ----------------------------------------------------------------------------- network


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[object, object]]:
    from topologies import star
    with started_network(tmp_path_factory, "ina_ring", star(3, bw=100), "ina", neighbors=True) as n:
        yield n[:2]


def _probe(network, topo, frags: range) -> dict:  # noqa: ANN001
    """Worker h3 of job 2 sends one fan-in-1 GRAD per fragment; its PS h2 counts what
    was aggregated (PARTIAL) and what was passed on, then frees the aggregators."""
    from controller.ina import switch_ip

    sid = topo.device_id("s1")
    return probe_counts(network, topo, "h2", "h3", "--switch-ip", switch_ip(sid),
                        "--tag", str(sid), "--job", "2",
                        "--fragments", f"{frags.start}:{len(frags)}", probe_timeout=120)


@pytest.mark.net
@pytest.mark.slow
def test_ring_deployment_spreads_fragments_over_its_n_aggregators(net) -> None:  # noqa: ANN001
    from controller.ina import InaDeployment, InaJob

    network, topo = net
    job = InaJob.plan(topo, "h2", ["h3"], 0, 1000.0, INA_VALUES, job_id=2)
    assert job.aggregating_switches == ["s1"]
    frags = range(1000, 1064)
    owners = ring_owners(8)
    ring_used = {owners[ring_position(2, f)] for f in frags}
    mod_used = {modulo_index(2, f) for f in frags}
    assert len(ring_used) <= 8 < len(mod_used)
    for ring, used in ((8, ring_used), (None, mod_used)):
        InaDeployment(topo, network.grpc_addresses(), [job], aggregator_ring=ring).deploy()
        got = _probe(network, topo, frags)
        assert got == {"aggregated": len(used), "passed_on": len(frags) - len(used),
                       "unanswered": 0}, (ring, got)
