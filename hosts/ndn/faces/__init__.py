"""The NDN agents' faces, one per transport: :class:`EthernetFace` (NDN over Ethernet,
through ndn.p4), :class:`UdpFace` (IP unicast or multicast baselines), :class:`TcpFace`
(the TCP parameter-server baseline); :func:`make_face` picks one by ``--transport``."""

from __future__ import annotations

from collections.abc import Mapping

from .ethernet import EthernetFace
from .stats import FaceStats
from .tcp import TcpFace
from .udp import UdpFace

__all__ = ["TRANSPORTS", "EthernetFace", "FaceStats", "TcpFace", "UdpFace", "make_face"]


def make_face(transport: str, iface: str, hosts: Mapping[str, str], *, me: str = "",
              ps: str = "", group: str = "") -> EthernetFace | UdpFace | TcpFace:
    """``ndn`` -> :class:`EthernetFace` on ``iface``; ``ip`` -> :class:`UdpFace`;
    ``ipmc`` -> :class:`UdpFace` joined to the IP multicast group ``group``; ``tcp`` ->
    :class:`TcpFace` (the PS ``ps`` listens, every other agent connects to it)."""
    if transport == "ndn":
        return EthernetFace(iface)
    if transport == "ip":
        return UdpFace(hosts)
    if transport == "ipmc":
        if not group:
            raise ValueError("--transport ipmc needs --group (an IP multicast address)")
        return UdpFace(hosts, group=group, me=me)
    if transport == "tcp":
        return TcpFace(hosts, me, ps, listen=me == ps)
    raise ValueError(f"transport must be ndn, ip, ipmc or tcp, got {transport!r}")


#: the agents' --transport choices: NDN, and the IP baselines (unicast UDP, IP multicast, TCP)
TRANSPORTS = ("ndn", "ip", "ipmc", "tcp")
