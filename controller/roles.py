"""Who writes to the switches: P4Runtime roles and election ids of every controller part.

P4Runtime elects one primary per role (spec, "Client Arbitration"); only a role's primary
may write, and only the default role's primary ("" name) may change the pipeline
(docs/trust.md, "Switches: pipeline configs and P4Runtime"). Each part of the controller
that writes has its own role, so a long-lived writer (the NDN persistent-PIT manager, a
the switch watcher) and a deploy or a user's one-off write do not lock each other out on the
embedded target.

BMv2 1.15's P4Runtime server (PI) ignores role names: it elects one primary per device,
the highest election id of all streams, and refuses an election id already in use by
any stream. So the ids below are distinct across roles and ordered by who should win on
BMv2 when two run at once: a user's shell over the NDN manager over a deploy.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEPLOY", "NDN_PIT", "P4RT_SHELL", "READER", "ROLES", "SHELL", "WATCHER", "Role"]


@dataclass(frozen=True)
class Role:
    """A P4Runtime role name ("" is the default role) and the election id used in it."""

    key: str
    name: str
    election_id: int
    writes: str


#: ``gradctl deploy`` and every technique's deployment: loads pipelines (default role),
#: installs tables, multicast groups, registers; also attaches to read counters.
DEPLOY = Role("deploy", "", 10, "pipelines; every table, multicast group, register and counter a deploy sets")
#: The NDN persistent-PIT manager (controller/ndn/persistent_pit.py): packet-in driven,
#: runs for a whole experiment.
NDN_PIT = Role("ndn-pit", "ndn-pit", 50, "persistent-PIT entries and their multicast groups; packet-outs")
#: A user's one-off writes from a shell (e.g. ``gradctl ndn`` loss changes while no
#: manager runs).
SHELL = Role("shell", "shell", 60, "one-off writes a user asks for (link loss at run time)")
#: The switch watcher (controller/watch.py, run by the ``net up`` holder): keeps a stream
#: to every switch to notice deaths and restarts; writes nothing on it (a replay after a
#: restart goes through DEPLOY). Its id is below every writer's, so on BMv2 (one primary
#: across roles) it never takes a writer's place.
WATCHER = Role("watcher", "watcher", 5, "nothing on its own stream (replays use the deploy role)")
#: p4runtime-shell opened by ``gradctl net shell`` (controller/p4rt_shell.py): a user's
#: interactive session, open for long. Same role name as SHELL (one primary per role on the
#: embedded target: the higher id writes while both are open); on BMv2 its id sits above
#: the watcher's and below a deploy's, so a deploy always gets through while a shell is
#: open, and the shell writes again once the deploy's stream has closed.
P4RT_SHELL = Role("p4rt-shell", "shell", 7, "whatever the user types (tables, groups, counters)")
#: Reads only: a backup of the default role (a read needs no primary).
READER = Role("reader", "", 1, "nothing (reads counters and entries as a backup)")

ROLES: tuple[Role, ...] = (DEPLOY, NDN_PIT, SHELL, P4RT_SHELL, WATCHER, READER)
