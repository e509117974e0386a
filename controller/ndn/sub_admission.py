"""Controller twin of ``p4src/include/ndn_sub_admission.p4`` (``MyIngress.sub_admission``):
who may subscribe under a job's prefix, and each job's persistent PIT slot
(docs/trust.md, "NDN: subscription admission").

With jobs (:class:`NdnJob`: a PS, the GPUs that subscribe to it, the training's name) the
controller turns the guard on on every switch (``sub_guard_config``), gives every job's
``/PS/train`` its own slot (``ndn_sub_slots``, the same on every switch), names the
switch-facing ports (``ndn_fabric_ports``) and, on each GPU's first switch, its port as a
member of its job (``ndn_sub_members``). Refused subscriptions are ``ndn_drops``
``subscription_not_member`` / ``subscription_unknown_job``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from controller.ndn.pit import PIT_PORTS
from controller.p4runtime import ControlBlock, DeployError
from topologies.base import Topology
from wire.ndn import components

#: Slots of the data-plane persistent PIT (``NDN_SUB_BITS`` = 8).
SUB_SLOTS = 256


@dataclass(frozen=True)
class NdnJob:
    """One NDN training job: its PS, the GPUs that may subscribe to ``/<ps>/<train>``."""

    ps: str
    gpus: tuple[str, ...] = field(default_factory=tuple)
    train: str = "train"

    @property
    def prefix(self) -> str:
        """``/<ps>/<train>``: what its GPUs subscribe to."""
        return f"/{self.ps}/{self.train}"


def _key(prefix: str) -> dict[str, int]:
    (t0, v0), (t1, v1) = components(prefix)
    return {"meta.t0": t0, "meta.l0": len(v0), "meta.c0": int.from_bytes(v0, "big") if v0 else 0,
            "meta.t1": t1, "meta.l1": len(v1), "meta.c1": int.from_bytes(v1, "big") if v1 else 0}


class NdnSubAdmission(ControlBlock):
    """``NdnSubAdmission`` (ingress, before the persistent PIT)."""

    CONTROL = "MyIngress.sub_admission"
    TABLES = ("sub_guard_config", "ndn_sub_slots", "ndn_fabric_ports", "ndn_sub_members")
    ACTIONS = ("set_guard", "set_slot", "fabric_port", "member")

    def guard_entry(self, on: bool = True) -> Any:
        """MODIFY of ``sub_guard_config``'s default: guarded (``on``) or open."""
        return ~self.default_entry("sub_guard_config", "set_guard", on=int(on))

    def slot_entry(self, prefix: str, slot: int) -> Any:
        """INSERT ``/PS/train -> set_slot(slot)``."""
        if not 0 <= slot < SUB_SLOTS:
            raise DeployError(f"slot {slot} outside 0..{SUB_SLOTS - 1}")
        return +self.entry("ndn_sub_slots", _key(prefix), "set_slot", slot=slot)

    def fabric_port_entries(self, ports: Sequence[int]) -> list[Any]:
        """INSERTs ``port -> fabric_port``: the switch-facing ``ports``."""
        return [+self.entry("ndn_fabric_ports", {"meta.in_port": p}, "fabric_port") for p in ports]

    def member_entry(self, port: int, prefix: str) -> Any:
        """INSERT ``(port, /PS/train) -> member``: a GPU on its port."""
        return +self.entry("ndn_sub_members", {"meta.in_port": port, **_key(prefix)}, "member")

    def read(self, client: Any) -> dict[str, Any]:
        """``{"guarded", "jobs", "members"}`` of one switch, read over a
        :class:`targets.p4rt_client.P4RuntimeClient` (primary or backup)."""
        from finsy import P4TableEntry

        (d,) = client.read(P4TableEntry(self.name("sub_guard_config"), is_default_action=True))
        return {"guarded": bool(int(d.action.args.get("on", 0))),
                "jobs": len(client.read(P4TableEntry(self.name("ndn_sub_slots")))),
                "members": len(client.read(P4TableEntry(self.name("ndn_sub_members"))))}

    def plan(self, topo: Topology, jobs: Sequence[NdnJob]) -> dict[str, list[Any]]:
        """Every switch's admission updates for ``jobs`` (slots in job order)."""
        prefixes = [j.prefix for j in jobs]
        if len(set(prefixes)) != len(prefixes):
            raise DeployError(f"two NDN jobs under one prefix: {prefixes}")
        if len(jobs) > SUB_SLOTS:
            raise DeployError(f"{len(jobs)} NDN jobs, the persistent PIT has {SUB_SLOTS} slots")
        out: dict[str, list[Any]] = {}
        for s in topo.switches():
            # the data plane takes Interests from ports 1..PIT_PORTS only (port_range)
            fabric = [p for p, n in sorted(topo.ports(s).items()) if topo.is_switch(n) and p <= PIT_PORTS]
            out[s] = [self.guard_entry(True), *self.fabric_port_entries(fabric),
                      *(self.slot_entry(j.prefix, i) for i, j in enumerate(jobs))]
        for j in jobs:
            for g in j.gpus:
                leaf = topo.iface(g)["switch"]
                out[leaf].append(self.member_entry(topo.port(leaf, g), j.prefix))
        return out
