"""scapy views of the wire formats, for tests, debugging and pcap dissection.

Built lazily (PEP 562 for ``INA``/``INAValues``, on first call for the others) because
importing scapy costs 1-3 s and the agents never need it; the tests keep each layer
identical, byte for byte, to the ``struct`` codec of its format module.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

from wire.bcube import BCUBE_MAGIC, BCUBE_TCP_PORT, BcubeMsg
from wire.differentiated import DIFF_UDP_PORT
from wire.ina import (
    INA_BITMAP_BYTES,
    INA_MAX_VALUES,
    INA_UDP_PORT,
    INA_VALUE_SIZES,
    INA_VALUES,
    MsgType,
)

if TYPE_CHECKING:  # the scapy classes exist only after the first lazy access
    from scapy.packet import Packet

__all__ = [
    "INA",  # noqa: F822 (lazy, module __getattr__)
    "INAValues",  # noqa: F822
    "bcube_layer",
    "diff_block_layer",
]

# ----------------------------------------------------------------------------- INA

_SCAPY: dict[str, type[Packet]] = {}


def _build_scapy_layers() -> dict[str, type[Packet]]:
    """Define the scapy layers and bind them (once)."""
    if _SCAPY:
        return _SCAPY
    from scapy.fields import (
        ByteEnumField,
        ByteField,
        Field,
        FieldListField,
        FlagsField,
        IntField,
        ShortField,
        SignedIntField,
    )
    from scapy.layers.inet import UDP
    from scapy.packet import Packet, bind_layers

    class BitmapField(Field[int, bytes]):
        """The 256-bit contributor bitmap: an ``int`` in Python, 32 bytes on the wire."""

        def __init__(self, name: str, default: int) -> None:
            super().__init__(name, default, f"{INA_BITMAP_BYTES}s")

        def i2m(self, pkt: Packet | None, x: int | None) -> bytes:
            return int(x or 0).to_bytes(INA_BITMAP_BYTES, "big")

        def m2i(self, pkt: Packet | None, x: bytes) -> int:
            return int.from_bytes(x, "big")

        def any2i(self, pkt: Packet | None, x: Any) -> int:
            return int.from_bytes(x, "big") if isinstance(x, bytes) else int(x)

        def i2repr(self, pkt: Packet | None, x: int) -> str:
            return hex(x)

    class INA(Packet):
        """INA header (docs/ina.md); its payload is ``INAValues``."""

        name = "INA"
        fields_desc = [
            ByteEnumField("msg_type", MsgType.GRAD, {m.value: m.name for m in MsgType}),
            ByteField("job_id", 0),
            ShortField("worker_id", 0),
            IntField("fragment", 0),
            ShortField("tag", 0),
            ShortField("origin", 0),
            BitmapField("bitmap", 0),
            ShortField("count", 0),
            ShortField("fanin", 0),
            FlagsField("flags", 0, 8, ["RETX", "VIA_SD"]),  # bit 0, bit 1
            ShortField("sd_fanin", 0),
            ByteField("max_exp", 0),
        ]

    class INAValues(Packet):
        """The signed int32 fixed-point values that follow the INA header: 64, 128 or
        256 (``INA_VALUE_SIZES``); a dissected packet has as many as its payload holds."""

        name = "INAValues"
        fields_desc = [
            FieldListField(
                "values",
                [0] * INA_VALUES,
                # no count: the rest of the payload (IP and UDP strip any Ethernet padding)
                SignedIntField("v", 0),
                max_count=INA_MAX_VALUES,
            )
        ]

        def post_build(self, pkt: bytes, pay: bytes) -> bytes:
            # a short list would silently build a short packet: refuse instead
            if len(self.values) not in INA_VALUE_SIZES:
                raise ValueError(f"INAValues needs {' or '.join(map(str, INA_VALUE_SIZES))} "
                                 f"values, got {len(self.values)}")
            return pkt + pay

    bind_layers(UDP, INA, dport=INA_UDP_PORT)
    bind_layers(INA, INAValues)
    _SCAPY.update(INA=INA, INAValues=INAValues)
    return _SCAPY


def __getattr__(name: str) -> Any:
    # PEP 562: ``from wire.scapy_layers import INA`` imports scapy on first use only.
    if name in ("INA", "INAValues"):
        return _build_scapy_layers()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ----------------------------------------------------------------------------- BCube

_BCUBE_SCAPY: dict[str, type[Packet]] = {}


def bcube_layer() -> type[Packet]:
    """The scapy layer ``BCube`` (header + int32 values; built on first call, scapy is
    slow to import), bound to TCP port BCUBE_TCP_PORT: it dissects a segment that starts
    a message (TCP streams do not keep message boundaries)."""
    if _BCUBE_SCAPY:
        return _BCUBE_SCAPY["BCube"]
    from scapy.fields import (
        ByteEnumField,
        ByteField,
        FieldListField,
        IntField,
        ShortField,
        SignedIntField,
        XShortField,
    )
    from scapy.layers.inet import TCP
    from scapy.packet import Packet, bind_layers

    class BCube(Packet):
        """BCube/BML message (docs/bcube.md)."""

        name = "BCube"
        fields_desc = [
            XShortField("magic", BCUBE_MAGIC),
            ByteEnumField("msg_type", BcubeMsg.REDUCE, {m.value: m.name for m in BcubeMsg}),
            ByteField("thread", 0),
            ByteField("stage", 0),
            ByteField("level", 0),
            ShortField("sender", 0),
            IntField("offset", 0),
            IntField("count", None),
            FieldListField("values", [], SignedIntField("", 0), count_from=lambda p: p.count),
        ]

        def post_build(self, p: bytes, pay: bytes) -> bytes:
            if self.count is None:
                p = p[:12] + struct.pack("!I", len(self.values)) + p[16:]
            return p + pay

    for field in ("dport", "sport"):
        bind_layers(TCP, BCube, **{field: BCUBE_TCP_PORT})
    _BCUBE_SCAPY["BCube"] = BCube
    return BCube


# ----------------------------------------------------------------------------- differentiated

_DIFF_SCAPY: dict[str, type[Packet]] = {}


def diff_block_layer() -> type[Packet]:
    """The scapy layer ``DiffBlock`` (built on first call; scapy is slow to import),
    bound to UDP port DIFF_UDP_PORT. Its ``values`` are the big-endian float32 payload."""
    if _DIFF_SCAPY:
        return _DIFF_SCAPY["DiffBlock"]
    from scapy.fields import (
        ByteField,
        FieldListField,
        IEEEFloatField,
        IntField,
        ShortField,
    )
    from scapy.layers.inet import UDP
    from scapy.packet import Packet, bind_layers

    class DiffBlock(Packet):
        """Differentiated block message (docs/differentiated.md)."""

        name = "DiffBlock"
        fields_desc = [
            ShortField("tensor_index", 0),
            IntField("block_index", 0),
            IntField("first_block", 0),
            IntField("last_block", 0),
            IntField("tensor_bytes", 0),
            IntField("position", 0),
            IntField("iteration", 0),
            ShortField("worker", 0),
            ByteField("level", 0),
            ByteField("flags", 0),
            IntField("count", None),
            FieldListField("values", [], IEEEFloatField("", 0.0), count_from=lambda p: p.count),
        ]

        def post_build(self, p: bytes, pay: bytes) -> bytes:
            if self.count is None:
                p = p[:30] + struct.pack("!I", len(self.values)) + p[34:]
            return p + pay

    bind_layers(UDP, DiffBlock, dport=DIFF_UDP_PORT)
    bind_layers(DiffBlock, DiffBlock)  # the next block message of the same datagram
    _DIFF_SCAPY["DiffBlock"] = DiffBlock
    return DiffBlock
