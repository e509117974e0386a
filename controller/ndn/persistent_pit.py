"""Controller twin of ``p4src/include/ndn_persistent_pit.p4`` (``MyIngress.persistent_pit``).

By default the switches keep subscriptions themselves (registers, soft state: see the P4
file); the controller only sets ``subscription_config`` (mode and lifetime). With
controller-assisted subscriptions (``via_controller``) insert Interests are punted and
:class:`PersistentPitManager` writes the exact table ``persistent_pit`` (``/PS/train`` ->
a multicast group of the subscribed ports), then sends the Interest back *through the
pipeline* (packet-out with ``_pad = NDN_OUT_VIA_PIPELINE``), so the switch's FIB, not the
controller, picks the port it goes on, and its transient PIT routes the ack back to the
subscriber alone."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ndn.encoding import Component, Name, parse_interest

from controller.p4runtime import ControlBlock, DeployError, Program, multicast_group
from controller.roles import NDN_PIT
from topologies.base import Topology

# The name bounds live with the agents that must respect them (and stay light to import).
from wire.ndn import INSERT_MARKER, components, ndn_payload

#: First multicast group id of persistent PIT entries (1..255 are the PIT's port subsets).
PERSISTENT_GROUP_BASE = 0x1000
#: ``packet_out._pad``: send the packet through the ingress pipeline (ndn_headers.p4).
OUT_VIA_PIPELINE = 1
#: How long a data-plane subscription lives without a refresh (s), P4 default.
SUBSCRIPTION_LIFETIME = 6.0
#: ``subscription_lifetime`` of a persistent subscription: it lives until unsubscribed
#: (the GPUs need not refresh it; docs/ndn.md, "Persistent subscriptions").
PERSISTENT = float("inf")
#: The lifetime written for :data:`PERSISTENT`: 2^47 us (4.5 years), past any switch's
#: uptime, and ``now + lifetime`` stays within the register's 48 bits.
PERSISTENT_LIFETIME_US = 1 << 47
SUBSCRIPTION_MODES = ("switch", "controller")


def _value_int(v: bytes) -> int:
    return int.from_bytes(v, "big") if v else 0


class PersistentPit(ControlBlock):
    """``PersistentPit`` (ingress): the subscription mode and lifetime, the controller-
    assisted ``/PS/train -> multicast group`` entries, and ``subscriptions_expired`` (data-
    plane subscriptions found expired when a Data touched them)."""

    CONTROL = "MyIngress.persistent_pit"
    TABLES = ("persistent_pit", "subscription_config")
    ACTIONS = ("set_subscribers", "no_subscribers", "set_subscriptions")
    COUNTERS = ("subscriptions_expired",)

    @staticmethod
    def match(key: Sequence[tuple[int, bytes]]) -> dict[str, Any]:
        """The table key of ``/PS/train`` (its two components; the ingress has taken the
        marker off, so they sit in slots 0 and 1)."""
        (t1, v1), (t2, v2) = key
        return {"meta.t0": t1, "meta.l0": len(v1), "meta.c0": _value_int(v1),
                "meta.t1": t2, "meta.l1": len(v2), "meta.c1": _value_int(v2)}

    def config_entry(self, mode: str = "switch", lifetime: float = SUBSCRIPTION_LIFETIME) -> Any:
        """MODIFY of ``subscription_config``'s default: ``mode`` ``switch`` (data plane) or
        ``controller`` (punt inserts), and the data-plane subscription lifetime (s;
        :data:`PERSISTENT`: until unsubscribed)."""
        if mode not in SUBSCRIPTION_MODES:
            raise DeployError(f"subscription mode must be one of {SUBSCRIPTION_MODES}, got {mode!r}")
        if lifetime != PERSISTENT and not 0 < lifetime < 3600:
            raise DeployError(f"subscription lifetime must be in (0, 3600) s, got {lifetime!r}")
        lifetime_us = PERSISTENT_LIFETIME_US if lifetime == PERSISTENT else int(lifetime * 1e6)
        return ~self.default_entry("subscription_config", "set_subscriptions",
                                   controller=int(mode == "controller"), lifetime_us=lifetime_us)

    def subscribers_entry(self, key: Sequence[tuple[int, bytes]], group: int) -> Any:
        """The entry ``key -> set_subscribers(group)`` (INSERT with ``+``)."""
        return self.entry("persistent_pit", self.match(key), "set_subscribers", group=group)


@dataclass
class PersistentEntry:
    """One persistent PIT entry of one switch."""

    name: str
    group: int
    ports: list[int] = field(default_factory=list)
    installed_at: float = field(default_factory=time.time)


class PersistentPitManager:
    """Controller-assisted subscriptions (``subscription_config`` mode ``controller``):
    packet-in driven persistent PIT management, one thread per switch (seed step 4.2).

    For each punted ``/*insert*/PS/train[/...]`` Interest: add its in-port to the entry
    of ``/PS/train`` and to the entry's multicast group (creating both when absent,
    steps 4.2.1 / 4.2.2), then send the Interest back through the switch's pipeline
    (its FIB sends it on toward ``PS``; its transient PIT brings the ack back). Runs while the experiment runs; :meth:`state` is the persistent PIT of every
    switch. The P4Runtime connections are the primary of role ``ndn-pit``
    (controller.roles.NDN_PIT: election id 50, above a deploy's for BMv2, which has no roles).
    """

    ELECTION_ID = NDN_PIT.election_id

    def __init__(self, topology: Topology, addresses: Mapping[str, str],
                 program: Program, routes: Mapping[str, Mapping[str, int]],
                 state_file: str | Path | None = None, *, reconnect_grace: float = 10.0,
                 reconnect_bound: float = 60.0, log: Any = None) -> None:
        self.topology = topology
        self.addresses = dict(addresses)
        self.program = program
        self.routes = routes
        self.state_file = Path(state_file) if state_file else None
        self.entries: dict[str, dict[str, PersistentEntry]] = {s: {} for s in addresses}
        self.errors: list[str] = []
        self.handled = 0
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._clients: dict[str, Any] = {}
        self.reconnect_grace, self.reconnect_bound = reconnect_grace, reconnect_bound
        self.reconnects: dict[str, int] = {s: 0 for s in addresses}
        self.reinstalled: dict[str, int] = {s: 0 for s in addresses}
        self.log = log or (lambda m: None)

    def _connect(self, s: str) -> Any:
        """A primary ``ndn-pit`` connection to ``s`` that journals its writes."""
        from targets.journal import journal_for
        from targets.p4rt_client import P4RuntimeClient

        addr = self.addresses[s]
        c = P4RuntimeClient(addr, device_id=self.topology.device_id(s), election_id=self.ELECTION_ID,
                            role=NDN_PIT.name, journal=journal_for(s, addr))
        if not c.is_primary:
            c.close()
            raise DeployError(f"{s}: the persistent-PIT manager is not primary at {addr}")
        c.use_schema(self.program.p4info_path)
        return c

    def start(self) -> PersistentPitManager:
        """Connect to every switch as primary and start the packet-in threads."""
        for s in self.addresses:
            try:
                c = self._connect(s)
            except DeployError:
                self.stop()
                raise
            self._clients[s] = c
            # entries a previous manager made on the running pipeline (restart-safe)
            for e in read_persistent_pit(c, self.program):
                self.entries[s][e["name"]] = PersistentEntry(e["name"], e["group"], list(e["ports"]))
        for s in self.addresses:
            t = threading.Thread(target=self._run, args=(s,), name=f"ppit-{s}", daemon=True)
            t.start()
            self._threads.append(t)
        self._save()
        return self

    def stop(self) -> None:
        """Stop the threads and close the connections (the switches keep their entries)."""
        self._stop.set()
        for t in self._threads:
            t.join(timeout=5)
        for c in self._clients.values():
            c.close()
        self._clients.clear()
        self._threads.clear()

    @property
    def running(self) -> bool:
        """Whether the manager holds its switch connections."""
        return bool(self._clients)

    def with_client(self, switch: str, fn: Any) -> Any:
        """Run ``fn(client)`` on ``switch``'s primary connection, under the manager's lock."""
        with self._lock:
            return fn(self._clients[switch])

    def __enter__(self) -> PersistentPitManager:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def state(self) -> dict[str, list[dict[str, Any]]]:
        """``{switch: [{"name", "group", "ports"}]}`` of every nonempty persistent PIT."""
        with self._lock:
            return {s: [{"name": e.name, "group": e.group, "ports": list(e.ports)}
                        for e in es.values()] for s, es in self.entries.items() if es}

    def _save(self) -> None:
        if self.state_file is not None:
            tmp = self.state_file.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.state(), indent=1))
            tmp.replace(self.state_file)

    def _run(self, switch: str) -> None:
        while not self._stop.is_set():
            client = self._clients.get(switch)
            if client is None:
                return
            got = client.packet_in(timeout=0.2)
            if got is None:
                if client.wait_stream_end(0):
                    self._reconnect(switch)
                continue
            payload, meta = got
            try:
                self.handle(switch, payload, int(meta.get("ingress_port", 0)))
            except Exception as e:  # one bad packet must not stop the manager
                with self._lock:
                    self.errors.append(f"{switch}: {type(e).__name__}: {e}")

    def _on_switch(self, switch: str) -> tuple[bool, list[dict[str, Any]] | None]:
        """(has a pipeline, its persistent PIT or None when unreadable). The pipeline by
        a unary call; the entries as a backup of the default role (election id 1, below
        every writer's: on BMv2 it never takes a replay's place)."""
        from controller.roles import READER
        from targets.p4rt_client import P4RuntimeClient, P4RuntimeError, get_pipeline, open_channel

        addr, dev = self.addresses[switch], self.topology.device_id(switch)
        ch = open_channel(addr)
        try:
            has = get_pipeline(ch, dev, 2.0) is not None
        except P4RuntimeError:
            return False, None
        finally:
            ch.close()
        if not has:
            return False, None
        try:
            with P4RuntimeClient(addr, dev, election_id=READER.election_id, role=READER.name, timeout=3.0) as c:
                c.use_schema(self.program.p4info_path)
                return True, read_persistent_pit(c, self.program)
        except Exception:  # a replay still loading, an id in use: try again later
            return True, None

    def _reconnect(self, switch: str) -> None:
        """The stream ended (the switch died or restarted): wait for it to come back with
        a pipeline and, for ``reconnect_grace`` s, for a replay to restore our entries;
        then connect again and re-install what is missing."""
        old = self._clients.get(switch)
        self.log(f"{switch}: persistent-PIT manager's stream ended; waiting for the switch")
        t0 = time.monotonic()
        seen: float | None = None
        want = {e.name: (e.group, sorted(e.ports)) for e in self.entries[switch].values()}
        while not self._stop.is_set():
            has, pit = self._on_switch(switch)
            now = time.monotonic()
            if has:
                seen = seen or now
                got = {e["name"]: (e["group"], sorted(e["ports"])) for e in pit or []}
                # a second after the pipeline came back: a replay's writes are in by then
                # (ours come last in the journal), so our stream does not cut into it
                if (pit is not None and got == want and now - seen >= 1.0) or now - seen > self.reconnect_grace:
                    break
            elif now - t0 > self.reconnect_bound:
                with self._lock:
                    self.errors.append(f"{switch}: no pipeline {self.reconnect_bound:.0f} s after the switch "
                                       f"restarted (nothing replayed it); the persistent PIT there is lost")
                t0 = now  # one error per bound, keep waiting
            self._stop.wait(0.3)
        if self._stop.is_set():
            return
        try:
            c = self._connect(switch)
        except Exception as e:
            with self._lock:
                self.errors.append(f"{switch}: reconnect failed: {e}")
            self._stop.wait(1.0)
            return
        _, pit = self._on_switch(switch)
        got = {e["name"]: e for e in pit or []}
        pp = self.program.block(PersistentPit)
        with self._lock:
            for e in self.entries[switch].values():
                have = got.get(e.name)
                try:
                    if have is None:
                        c.write(+multicast_group(e.group, e.ports))
                        c.write(+pp.subscribers_entry(components(e.name), e.group))
                        self.reinstalled[switch] += 1
                    elif sorted(have["ports"]) != sorted(e.ports):
                        c.write(~multicast_group(e.group, e.ports))
                        self.reinstalled[switch] += 1
                except Exception as ex:
                    self.errors.append(f"{switch}: re-installing {e.name}: {ex}")
            self._clients[switch] = c
            self.reconnects[switch] += 1
        if old is not None:
            old.close()
        self.log(f"{switch}: persistent-PIT manager reconnected ({self.reinstalled[switch]} entries re-installed)")

    def handle(self, switch: str, frame: bytes, in_port: int) -> None:
        """Process one punted insert Interest (an Ethernet frame) from ``in_port``."""
        name, _, _, _ = parse_interest(ndn_payload(frame[14:]))
        comps = [bytes(c) for c in name]
        if len(comps) < 3 or bytes(Component.get_value(comps[0])) != INSERT_MARKER:
            raise ValueError(f"not an insert Interest: {Name.to_str(name)}")
        key_comps = comps[1:3]
        key = Name.to_str(key_comps)
        client = self._clients[switch]
        pp = self.program.block(PersistentPit)
        with self._lock:
            entries = self.entries[switch]
            e = entries.get(key)
            if e is None:                      # step 4.2.2: a new entry
                gid = PERSISTENT_GROUP_BASE + max((x.group - PERSISTENT_GROUP_BASE + 1
                                                   for x in entries.values()), default=0)
                e = PersistentEntry(key, gid, [in_port])
                client.write(+multicast_group(gid, e.ports))
                client.write(+pp.subscribers_entry(components(key_comps), gid))
                entries[key] = e
            elif in_port not in e.ports:       # step 4.2.1: one more in-port
                e.ports.append(in_port)
                client.write(~multicast_group(e.group, e.ports))
            self.handled += 1
            self._save()
        # back through the pipeline as if from in_port: the FIB picks where it goes on
        client.packet_out(frame, egress_port=in_port, _pad=OUT_VIA_PIPELINE)


def _replica_port(r: Any) -> int:
    # finsy gives a replica as a port, a (port, instance) pair or an object
    if isinstance(r, int):
        return r
    if isinstance(r, tuple):
        return int(r[0])
    return int(getattr(r, "egress_port", getattr(r, "port", 0)))


def read_persistent_pit(client: Any, program: Program) -> list[dict[str, Any]]:
    """``[{"name", "group", "ports"}]``: a switch's persistent PIT entries and their groups,
    read over a :class:`targets.p4rt_client.P4RuntimeClient` (primary or backup)."""
    from finsy import P4MulticastGroupEntry, P4TableEntry

    pp = program.block(PersistentPit)
    groups = {g.multicast_group_id: sorted(_replica_port(r) for r in g.replicas)
              for g in client.read(P4MulticastGroupEntry())}
    pit = []
    for e in client.read(P4TableEntry(pp.name("persistent_pit"))):
        m = dict(e.match)
        key = []
        for i in (0, 1):
            t, ln, v = (int(m.get(f"{f}{i}", m.get(f"meta.{f}{i}", 0))) for f in ("t", "l", "c"))
            key.append(bytes([t, ln]) + v.to_bytes(ln, "big"))
        gid = int(e.action.args["group"])
        pit.append({"name": Name.to_str(key), "group": gid, "ports": groups.get(gid, [])})
    return pit
