"""An NDN consumer's outstanding Interests, retransmitted until satisfied."""

from __future__ import annotations

import time

from wire.ndn import interest_packet

from .faces import EthernetFace, UdpFace

__all__ = ["Requester"]


class Requester:
    """Outstanding Interests of one agent, retransmitted every ``timeout`` s.

    NDN consumers retransmit: a lost Interest or Data is recovered by sending the
    Interest again, with a fresh nonce (the switch's PIT re-forwards a retransmission
    from a port it already holds; a repeated nonce would be dropped as a duplicate). At most ``window`` Interests are outstanding; later ones wait in
    order, so a large array does not arrive as one burst that overflows the queues."""

    def __init__(self, face: EthernetFace | UdpFace, timeout: float = 0.5,
                 lifetime_ms: int = 4000, window: int = 64) -> None:
        self.face = face
        self.timeout = timeout
        self.lifetime_ms = lifetime_ms
        self.window = window
        self.pending: dict[bytes, tuple[bytes, float, str]] = {}
        self.backlog: dict[bytes, tuple[list[bytes], str]] = {}
        self.names: dict[bytes, list[bytes]] = {}
        self.retransmissions = 0

    @staticmethod
    def key(name: list[bytes]) -> bytes:
        return b"".join(name)

    def express(self, name: list[bytes], kind: str = "interest") -> None:
        """Send an Interest for ``name`` (or queue it behind the window) and keep it
        until :meth:`satisfied`."""
        k = self.key(name)
        if k in self.pending or k in self.backlog:
            return
        if len(self.pending) >= self.window:
            self.backlog[k] = (name, kind)
            return
        self._send(k, name, kind)

    def _send(self, k: bytes, name: list[bytes], kind: str) -> None:
        pkt = interest_packet(name, self.lifetime_ms)
        self.pending[k] = (pkt, time.monotonic() + self.timeout, kind)
        self.face.send(pkt, kind=kind)
        self.names[k] = name

    def satisfied(self, name: list[bytes]) -> bool:
        """Forget the Interest for ``name``; True when it was outstanding (or queued)."""
        k = self.key(name)
        if self.backlog.pop(k, None) is not None:
            return True
        if self.pending.pop(k, None) is None:
            return False
        self.names.pop(k, None)
        while self.backlog and len(self.pending) < self.window:
            nk = next(iter(self.backlog))
            nm, kind = self.backlog.pop(nk)
            self._send(nk, nm, kind)
        return True

    def tick(self) -> float:
        """Retransmit every Interest due; returns seconds until the next one is due."""
        now = time.monotonic()
        nxt = self.timeout
        for k, (pkt, due, kind) in list(self.pending.items()):
            if due <= now:
                # a retransmission carries a fresh nonce: the switches drop a repeated one
                # as a loop or a copy (ndn_nonce.p4)
                pkt = interest_packet(self.names[k], self.lifetime_ms)
                self.face.send(pkt, kind=kind)
                self.retransmissions += 1
                self.pending[k] = (pkt, now + self.timeout, kind)
            else:
                nxt = min(nxt, due - now)
        return max(nxt, 0.0)
