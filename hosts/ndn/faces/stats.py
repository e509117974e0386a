"""What a face counts: bytes and packets sent and received."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["FaceStats"]


@dataclass
class FaceStats:
    """Bytes and packets a face sent and received (NDN packets + their framing)."""

    tx_bytes: int = 0
    tx_packets: int = 0
    rx_bytes: int = 0
    rx_packets: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    packets_by_kind: dict[str, int] = field(default_factory=dict)

    def count_tx(self, nbytes: int, kind: str) -> None:
        self.tx_bytes += nbytes
        self.tx_packets += 1
        self.by_kind[kind] = self.by_kind.get(kind, 0) + nbytes
        self.packets_by_kind[kind] = self.packets_by_kind.get(kind, 0) + 1
