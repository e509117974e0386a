"""Controller twin of ``p4src/include/ina_aggregator.p4`` (``MyIngress.aggregator``): the switch's INA identity
(``ina_switch``, its id and address and those of s_d), the jobs it aggregates for
(``ina_jobs``), the aggregator timeout (``ina_aging``), the consistent-hashing ring of the
aggregator index (``ina_ring``), plus the drop and event counters."""

from __future__ import annotations

import bisect
import hashlib
import ipaddress
import struct
import zlib
from typing import Any

from controller.p4runtime import ControlBlock, DeployError
from targets.embedded.codegen.hashes import crc16
from wire.ina_policy import PolicyError, default_switch_ip

#: ``INA_AGGREGATOR_TIMEOUT_US`` of ``p4src/include/config.p4``: what a switch uses until
#: the controller writes another timeout.
DEFAULT_AGGREGATOR_TIMEOUT_US = 1_000_000
_TIMEOUT_MAX_US = (1 << 48) - 1  # set_aggregator_timeout's bit<48>
#: ``ina_events`` cells, by index (ina_aggregator.p4).
EVENT_NAMES = ("added", "partial", "passed_on", "cleared", "result", "taken_over")
#: ``ina_drops`` cells 1, 2, ... (ina_aggregator.p4): packets the aggregator consumed.
DROP_NAMES = ("absorbed", "duplicate", "unknown_job", "clear", "wrong_size", "nack_empty")
#: ``NUM_AGGREGATORS`` and ``INA_RING_POSITIONS`` of ``p4src/include/config.p4``.
NUM_AGGREGATORS = 1024
RING_POSITIONS = 4096
#: Points each aggregator puts on the ring (more: owners closer to 1/N each).
RING_POINTS = 16
#: How a switch picks a fragment's aggregator (docs/ina.md, "Aggregator index").
INDEX_MODES = ("modulo", "ring")


def _fields(job: int, fragment: int, origin: int) -> bytes:
    return struct.pack(">BIH", job, fragment, origin)


def modulo_index(job: int, fragment: int, origin: int = 0, n: int = NUM_AGGREGATORS) -> int:
    """The default index of ``hash_fragment``: crc32(job, fragment, origin) mod ``n``."""
    return zlib.crc32(_fields(job, fragment, origin)) % n


def ring_position(job: int, fragment: int, origin: int = 0) -> int:
    """The fragment's point on the ring: crc16 of the same fields, mod the positions."""
    return crc16(_fields(job, fragment, origin)) % RING_POSITIONS


def _point(aggregator: int, v: int) -> int:
    # blake2b, not crc32: crc32 is affine, and the points of neighbouring aggregators
    # would cluster (measured: aggregator 16 of 17 took half the ring)
    return int.from_bytes(hashlib.blake2b(struct.pack(">HH", aggregator, v), digest_size=4).digest(), "big")


def ring_owners(n: int, points: int = RING_POINTS) -> list[int]:
    """Consistent hashing of ``n`` aggregators (indices 0..n-1): each puts ``points``
    points on a 32-bit ring (a blake2b of (aggregator, point)); ring position p belongs to
    the first point at or after ``p * 2^32 / RING_POSITIONS``, wrapping. Adding the
    n+1-th aggregator adds its points only, so only the positions it now owns change
    hands (about 1/(n+1) of them)."""
    if not 1 <= n <= NUM_AGGREGATORS:
        raise DeployError(f"ring aggregators must be within 1..{NUM_AGGREGATORS}, got {n}")
    ring = sorted((_point(a, v), a) for a in range(n) for v in range(points))
    keys = [k for k, _ in ring]
    step = (1 << 32) // RING_POSITIONS
    return [ring[bisect.bisect_left(keys, p * step) % len(ring)][1] for p in range(RING_POSITIONS)]


def switch_ip(device_id: int) -> str:
    """The address an aggregating switch answers (:func:`wire.ina_policy.default_switch_ip`:
    ``10.255.<id/256>.<id%256>``); :class:`DeployError` for an id without one."""
    try:
        return default_switch_ip(device_id)
    except PolicyError:
        raise DeployError(f"device id {device_id} has no INA address") from None


def _ip_int(ip: str) -> int:
    return int(ipaddress.IPv4Address(ip))


class Aggregator(ControlBlock):
    """``Aggregator`` (ingress): the switch's identity and the jobs it aggregates for."""

    CONTROL = "MyIngress.aggregator"
    TABLES = ("ina_switch", "ina_jobs", "ina_aging", "ina_ring")
    ACTIONS = ("set_switch_identity", "set_job", "set_aggregator_timeout", "ring_owner")
    COUNTERS = ("ina_drops", "ina_events")

    def identity_entry(self, switch_id: int, sd_id: int) -> Any:
        """MODIFY of ``ina_switch``'s default action: who this switch and ``s_d`` are."""
        return ~self.default_entry("ina_switch", "set_switch_identity",
                                   switch_id=switch_id, switch_ip=_ip_int(switch_ip(switch_id)),
                                   sd_id=sd_id, sd_ip=_ip_int(switch_ip(sd_id)))

    def job_entry(self, job_id: int, ps_ip: str, result_group: int) -> Any:
        """INSERT ``job_id -> set_job(ps_ip, result_group)``."""
        return +self.entry("ina_jobs", {"hdr.ina.job_id": job_id}, "set_job",
                           ps_ip=_ip_int(ps_ip), result_group=result_group)

    def aging_entry(self, timeout_us: int) -> Any:
        """MODIFY of ``ina_aging``'s default action: an aggregator whose last contribution
        is ``timeout_us`` microseconds old may be taken over by another fragment
        (0: never). Shorter than a fragment's aggregation costs retransmissions, never
        exactness (docs/ina.md, "Aging")."""
        if not 0 <= timeout_us <= _TIMEOUT_MAX_US:
            raise DeployError(f"aggregator timeout must be within 0..{_TIMEOUT_MAX_US} us, "
                              f"got {timeout_us}")
        return ~self.default_entry("ina_aging", "set_aggregator_timeout", timeout_us=timeout_us)

    def ring_entries(self, owners: list[int]) -> list[Any]:
        """INSERT ``position -> ring_owner(index)`` for every ring position
        (:func:`ring_owners`): consistent hashing replaces the modulo index."""
        if len(owners) != RING_POSITIONS:
            raise DeployError(f"a ring has {RING_POSITIONS} positions, got {len(owners)}")
        return [+self.entry("ina_ring", {"meta.ina.ring_pos": p}, "ring_owner", index=a)
                for p, a in enumerate(owners)]

    async def read_events(self, session: Any) -> dict[str, int]:
        """``ina_events`` (``EVENT_NAMES``) and the consumed packets of ``ina_drops``
        (``DROP_NAMES``), by name."""
        cells = await session.read_counter(self.name("ina_events"))
        out = {n: cells.get(i, (0, 0))[0] for i, n in enumerate(EVENT_NAMES)}
        drops = await session.read_counter(self.name("ina_drops"))
        for i, n in enumerate(DROP_NAMES, start=1):
            out[n] = drops.get(i, (0, 0))[0]
        return out
