"""Controller twin of ``p4src/include/ina_admission.p4`` (``MyIngress.admission``): who may
send which INA packet into the fabric (docs/trust.md, "INA: admission").

On every switch that runs ``ina.p4`` the controller names the switch-facing ports
(``ina_fabric_ports``: what arrives there was admitted upstream; the P4 block
trusts the CPU port itself); on a worker's first
switch, the worker's (port, address, job, rank) and the bit its GRADs carry
(``ina_members``); on the PS's first switch, the PS's (port, address, job)
(``ina_servers``). ``ina_admission_drops`` counts what the block refused, by reason.

Admission sees only what the parser read whole: an IPv4 packet with options, an IP
fragment, a tagged or IPv6 frame, a frame too short for its headers is no INA packet to
it, and forwarding drops it on every port (``ingress_drops`` ``ip_options``,
``ip_fragment``, ``not_ipv4``, ``parser_error``, and ``checksum_error`` for a bad IPv4
header checksum: :data:`UNPARSED_DROPS`; docs/trust.md, "IP: only what the switch
parsed"). ``gradctl ina counters`` shows them, and ``src_spoof``, next to the
admission drops.
"""

from __future__ import annotations

from typing import Any

from controller.forward.forwarding import DROP_REASONS
from controller.ina.aggregator import _ip_int
from controller.p4runtime import ControlBlock, DeployError
from wire.ina import INA_MAX_WORKERS

#: ``ina_admission_drops`` index -> name (``ina_admission.p4``'s ``INA_ADMIT_*``)
ADMISSION_DROPS: dict[int, str] = {
    1: "empty",  # GRAD with bitmap 0 or count 0
    2: "host_aggregate",  # several contributors, from a host port
    3: "not_member",  # GRAD: port, address, job or rank not a member of the job
    4: "wrong_bit",  # a member's GRAD without exactly its own bit
    5: "not_server",  # PARTIAL/RESULT/CLEAR from a host that is not the job's PS
    6: "bad_type",  # unknown msg_type from a host port
    7: "nack",  # NACK from a host neither the PS nor a member asking for its own RESULT
}

#: ``ingress_drops`` reasons (``controller.forward.DROP_REASONS``) shown with the admission
#: drops: IPv4 with options, IP fragments, not IPv4 (tagged, IPv6), frames too short for
#: their headers, bad IPv4 header checksums; dropped on every port, never parsed as INA.
UNPARSED_DROPS: tuple[str, ...] = tuple(DROP_REASONS[i] for i in (6, 7, 3, 1, 2))
#: What ``gradctl ina counters`` shows beside the admission drops: the unparsed ones and
#: ``src_spoof`` (a host port's frame with another host's MAC or IPv4 source, the
#: source guard's drop for every packet that is not INA; docs/trust.md).
REFUSED_DROPS: tuple[str, ...] = (*UNPARSED_DROPS, DROP_REASONS[8])


class InaAdmission(ControlBlock):
    """``InaAdmission`` (ingress, before the aggregator): the members of each job on the
    ports they are attached to, and the switch-facing ports."""

    CONTROL = "MyIngress.admission"
    TABLES = ("ina_fabric_ports", "ina_members", "ina_servers")
    ACTIONS = ("fabric_port", "member", "job_server")
    COUNTERS = ("ina_admission_drops",)

    def fabric_port_entries(self, ports: list[int]) -> list[Any]:
        """INSERTs ``port -> fabric_port``: the switch-facing ``ports``."""
        return [+self.entry("ina_fabric_ports", {"standard_metadata.ingress_port": p}, "fabric_port")
                for p in ports]

    def member_entry(self, port: int, ip: str, job_id: int, rank: int, stamp: int = 0) -> Any:
        """INSERT ``(port, ip, job, rank) -> member(1 << rank, stamp)``: a worker on its
        port; its admitted GRADs leave with the job's ``stamp`` in ``worker_id``."""
        if not 0 <= rank < INA_MAX_WORKERS:
            raise DeployError(f"rank {rank} has no bit in the INA bitmap (0..{INA_MAX_WORKERS - 1})")
        return +self.entry("ina_members", {
            "standard_metadata.ingress_port": port, "hdr.ipv4.src_addr": _ip_int(ip),
            "hdr.ina.job_id": job_id, "hdr.ina.worker_id": rank,
        }, "member", bitmap=1 << rank, stamp=stamp)

    def server_entry(self, port: int, ip: str, job_id: int, stamp: int = 0) -> Any:
        """INSERT ``(port, ip, job) -> job_server(stamp)``: a job's PS on its port; its
        admitted packets leave with the job's ``stamp`` in ``worker_id``."""
        return +self.entry("ina_servers", {
            "standard_metadata.ingress_port": port, "hdr.ipv4.src_addr": _ip_int(ip),
            "hdr.ina.job_id": job_id,
        }, "job_server", stamp=stamp)

    async def read_drops(self, session: Any) -> dict[str, int]:
        """``ina_admission_drops`` by name (packets)."""
        cells = await session.read_counter(self.name("ina_admission_drops"))
        return {n: cells.get(i, (0, 0))[0] for i, n in ADMISSION_DROPS.items()}
