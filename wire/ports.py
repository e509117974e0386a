"""UDP ports and EtherTypes of the techniques (mirrors p4src/include/config.p4)."""

from __future__ import annotations

__all__ = [
    "BCUBE_UDP_PORT",
    "DIFF_UDP_PORT",
    "ETHERTYPE_NDN",
    "INA_UDP_PORT",
    "NDN_UDP_PORT",
    "TOKEN_ETHERTYPE",
    "TOKEN_UDP_PORT",
]

INA_UDP_PORT = 40000  # in-network aggregation
DIFF_UDP_PORT = 40001  # differentiated blocks (unreliable; the reliable ones: TCP, same number)
BCUBE_UDP_PORT = 40002  # BCube level exchanges (TCP, same number)
TOKEN_UDP_PORT = 40003  # token broadcast over IP (tests)
NDN_UDP_PORT = 6363  # NDN over UDP (NFD's port)
ETHERTYPE_NDN = 0x8624  # IANA-registered NDN EtherType
TOKEN_ETHERTYPE = 0x88B5  # token frames (IEEE local experimental EtherType 2)
