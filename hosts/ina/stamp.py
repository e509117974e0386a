"""The job's admission stamp: the INA agents' proof that a packet passed admission.

The agents' other check, the source address, is only as good as the network's binding of
addresses to ports: any datagram a host's kernel delivers from the PS's address passes
it, whether or not a switch ever parsed and admitted it (docs/trust.md, "INA: admitted
packets carry the job's stamp"). The stamp is a cheaper and independent proof:

* the controller draws a random 16-bit ``stamp`` per job (``InaJob.stamp``, drawn by
  ``InaDeployment``), installs it as a parameter of the job's admission entries
  (``ina_members``, ``ina_servers`` in ``p4src/include/ina_admission.p4``) and writes it
  into the job's policy file (``"stamp"``, docs/ina_policy.md);
* the switch that admits an INA packet from a host port writes the stamp into the
  packet's ``worker_id`` (read only by admission, never by an aggregator or an agent)
  and updates the UDP checksum; aggregates and passed-on packets keep it;
* a worker takes a RESULT, and the PS a GRAD or PARTIAL, only if its ``worker_id`` is
  the job's stamp; others are counted in ``refused_stamp`` (``WorkerStats``,
  ``JobStats``) and dropped.

A host outside the job does not know the stamp; a datagram that reaches an agent
without passing admission (an encoding a switch failed to parse, a path around the
fabric) carries whatever its sender guessed. A policy without a stamp (0: written by
hand, by the simulator, or before the deployment drew one) turns the check off.

The check itself is one comparison in each receive path (``hosts/ina/transfer.py``
``_Transfer._receive``, ``hosts/ina/ps.py`` ``ParameterServer._handle``), through
:func:`admitted`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["admitted", "policy_stamp"]


def policy_stamp(policy: Any) -> int:
    """The stamp the agents of ``policy``'s job expect (0: none, the check is off)."""
    return int(getattr(policy, "stamp", 0) or 0) if policy is not None else 0


def admitted(stamp: int, worker_id: int) -> bool:
    """True if a packet whose ``worker_id`` field is ``worker_id`` may be taken by an
    agent expecting ``stamp`` (any packet when ``stamp`` is 0)."""
    return not stamp or worker_id == stamp
