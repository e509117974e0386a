"""scapy classes for the probe headers of the conformance programs in ``tests/p4/``.

One class per P4 header, fields in P4 order with the P4 widths (all big-endian). Layers
are bound the way the programs parse them:

- the ``0x88B6`` probes (``TableProbe``, ``Arith``, ``RepProbe``, ``Echo``, ``ExpHeader``, ``ImProbe``,
  ``MeterProbe``)
  share one EtherType, so they are bound *top-down* only: ``Ether()/Arith()`` gets
  ``type=0x88B6``, but dissecting an ``0x88B6`` frame gives ``Raw``; decode explicitly
  with ``Arith(frame[14:])``;
- ``Mpls`` labels chain on the bottom-of-stack bit and continue with IPv4 when the next
  nibble is 4, as ``parser_features.p4`` does; its ``0x8847 &&& 0xFFFE`` matches
  0x8847 and 0x8846 (not 0x8848, which that program parses as ``ExpHeader``);
- ``HashProbe`` follows IPv4 protocol 253 and ``RegisterHeavy`` (the ``agg_t`` header of
  ``registers.p4``) follows UDP destination port 40000, both ways.

``ParseResult`` is what ``parser_features.p4`` inserts after Ethernet; ``CpuHeader`` is
the 2-byte ``packet_in_t``/``packet_out_t`` between switch and P4Runtime server (the
server strips it, so tests rarely see it).
"""

from __future__ import annotations

from typing import Any

from scapy.fields import (
    BitField,
    ByteField,
    Field,
    IntField,
    ShortField,
    SignedByteField,
    SignedShortField,
)
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw, bind_layers, bind_top_down

ETHERTYPE_PROBE = 0x88B6
ETHERTYPE_MPLS = 0x8847
ETHERTYPE_MPLS_MASKED = 0x8846  # 0x8847 &&& 0xFFFE in parser_features.p4
IP_PROTO_HASH_PROBE = 253
GRADNET_INA_UDP_PORT = 40000
REGISTER_VALUES = 32


class ParseResult(Packet):
    """``parse_result_t`` of parser_features.p4 (inserted after Ethernet on output)."""

    name = "ParseResult"
    fields_desc = [ByteField("path", 0), ByteField("label_count", 0),
                   ByteField("error_code", 0), ByteField("stack_valid", 0)]


class Mpls(Packet):
    """``mpls_t``: one MPLS label stack entry."""

    name = "Mpls"
    fields_desc = [BitField("label", 0, 20), BitField("tc", 0, 3), BitField("bos", 1, 1), ByteField("ttl", 64)]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        """Another label unless bottom of stack; then IPv4 if the version nibble is 4."""
        if not self.bos:
            return Mpls
        if payload and payload[0] >> 4 == 4:
            return IP
        return Raw


class ExpHeader(Packet):
    """``exp_t`` of parser_features.p4 (the rest of 0x88xx)."""

    name = "ExpHeader"
    fields_desc = [ByteField("kind", 1), ByteField("len", 0)]


class TableProbe(Packet):
    """``table_probe_t`` of table_features.p4: keys, then results."""

    name = "TableProbe"
    fields_desc = [
        IntField("exact_key", 0), IntField("lpm_key", 0), ShortField("ternary_key", 0),
        ShortField("range_key", 0), ByteField("const_key", 0), ByteField("has_extra", 0),
        ShortField("exact_result", 0), ShortField("lpm_result", 0), ShortField("ternary_result", 0),
        ShortField("range_result", 0), ShortField("const_result", 0), ByteField("path", 0),
        ByteField("lpm_color", 0),
    ]


class Extra(Packet):
    """``extra_t`` (2 bytes) of table_features.p4 and action_features.p4."""

    name = "Extra"
    fields_desc = [ShortField("value", 0)]


class MeterProbe(Packet):
    """``meter_probe_t`` of meters.p4: the meter index, then the colours."""

    name = "MeterProbe"
    fields_desc = [ByteField("index", 0), ByteField("pkt_color", 0), ByteField("byte_color", 0),
                   BitField("low_bit", 0, 1), BitField("pad", 0, 7)]


class Arith(Packet):
    """``arith_t`` of action_features.p4: operands, then results."""

    name = "Arith"
    fields_desc = [
        IntField("a", 0), IntField("b", 0), ByteField("shift", 0), SignedByteField("s", 0),
        ByteField("u8a", 0), ByteField("u8b", 0), ByteField("flags", 0), ByteField("counter_index", 0),
        IntField("sum", 0), IntField("diff", 0), IntField("prod", 0), IntField("neg", 0),
        IntField("shl", 0), IntField("shr", 0), IntField("shl_const", 0), ShortField("slice", 0),
        IntField("concat", 0), IntField("slice_set", 0), ByteField("trunc", 0), ShortField("zext", 0),
        SignedShortField("sext", 0), ByteField("s_as_bits", 0), SignedByteField("sshr", 0),
        ByteField("sat_add", 0), ByteField("sat_sub", 0), SignedByteField("ssat_add", 0),
        SignedByteField("ssat_sub", 0), IntField("bitwise", 0), IntField("max_ab", 0),
        ByteField("cmp", 0), ByteField("bool_bits", 0), ShortField("rand", 0),
        ByteField("valid_bits", 0), ByteField("meter_color", 0),
    ]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        """``extra_t`` follows when flags bit 0 is set (as the program parses)."""
        return Extra if self.flags & 1 else Raw


class HashProbe(Packet):
    """``hash_probe_t`` of hash_checksum.p4 (after IPv4 protocol 253)."""

    name = "HashProbe"
    fields_desc = [
        IntField("a", 0), IntField("b", 0), ShortField("c", 0), ShortField("crc16", 0),
        IntField("crc32", 0), IntField("identity", 0), ShortField("csum16", 0),
        ShortField("crc16_mod", 0), IntField("crc32_ipv4", 0), ByteField("checksum_error", 0),
    ]


class RepProbe(Packet):
    """``rep_probe_t`` of replication.p4."""

    name = "RepProbe"
    fields_desc = [
        ByteField("op", 0), ByteField("ingress_instance_type", 0), ByteField("egress_instance_type", 0),
        ByteField("resubmit_count", 0), ByteField("recirc_count", 0), ByteField("tag", 0),
        ShortField("mcast_grp", 0), ShortField("egress_rid", 0), ShortField("out_port", 0),
        ShortField("egress_port", 0),
    ]


class Echo(Packet):
    """``echo_t`` of metadata_echo.p4: inputs, ingress echoes, egress echoes."""

    name = "Echo"
    fields_desc = [
        ShortField("out_port", 0), ByteField("set_priority", 0), ByteField("_pad0", 0),
        ShortField("set_mcast_grp", 0),
        ShortField("ingress_port", 0), ShortField("egress_spec", 0), IntField("ingress_instance_type", 0),
        IntField("packet_length", 0), BitField("ingress_global_timestamp", 0, 48),
        ByteField("parser_error", 0), ByteField("checksum_error", 0),
        ShortField("egress_port", 0), IntField("egress_instance_type", 0), ShortField("mcast_grp", 0),
        ShortField("egress_rid", 0), ByteField("priority", 0), ByteField("qid", 0),
        IntField("enq_timestamp", 0), IntField("enq_qdepth", 0), IntField("deq_timedelta", 0),
        IntField("deq_qdepth", 0), BitField("egress_global_timestamp", 0, 48),
    ]


class ImProbe(Packet):
    """``im_probe_t`` of instance_meta.p4: inputs, ingress echoes (i_*), egress echoes (e_*)."""

    name = "ImProbe"
    fields_desc = [
        ByteField("op", 0), ByteField("hdr_ops", 0), ByteField("magic", 0), ByteField("has_extra", 0),
        ShortField("out_port", 0), ShortField("mcast_grp", 0),
        ByteField("i_instance_type", 0), ByteField("i_parser_error", 0), ShortField("i_ingress_port", 0),
        IntField("i_packet_length", 0),
        ByteField("e_instance_type", 0), ByteField("e_parser_error", 0), ShortField("e_ingress_port", 0),
        ShortField("e_egress_spec", 0), ShortField("e_egress_port", 0), ShortField("e_egress_rid", 0),
        ShortField("e_mcast_grp", 0), IntField("e_packet_length", 0), ByteField("e_priority", 0),
        ByteField("e_checksum_error", 0), ByteField("e_parser_mark", 0), ByteField("e_tag", 0),
    ]


class CpuHeader(Packet):
    """``packet_in_t`` / ``packet_out_t``: a 9-bit port and 7 bits of padding."""

    name = "CpuHeader"
    fields_desc = [BitField("port", 0, 9), BitField("_pad", 0, 7)]


class _FixedIntList(Field[list[int], list[int]]):
    """``nvalues`` big-endian 32-bit values; shorter lists are padded with zeros."""

    __slots__ = ["nvalues"]
    islist = 1  # a list value is one field value, not a set of packets to generate

    def __init__(self, name: str, count: int) -> None:
        self.nvalues = count
        super().__init__(name, None, "!I")
        self.sz = 4 * count

    def i2m(self, pkt: Packet | None, x: list[int] | None) -> list[int]:
        vals = list(x or [])
        if len(vals) > self.nvalues:
            raise ValueError(f"{self.name}: at most {self.nvalues} values")
        return [v & 0xFFFFFFFF for v in vals] + [0] * (self.nvalues - len(vals))

    def addfield(self, pkt: Packet, s: bytes, val: list[int] | None) -> bytes:
        return s + b"".join(v.to_bytes(4, "big") for v in self.i2m(pkt, val))

    def getfield(self, pkt: Packet, s: bytes) -> tuple[bytes, list[int]]:
        n = 4 * self.nvalues
        if len(s) < n:
            raise ValueError(f"{self.name}: need {n} bytes, got {len(s)}")
        return s[n:], [int.from_bytes(s[i:i + 4], "big") for i in range(0, n, 4)]

    def any2i(self, pkt: Packet | None, x: Any) -> list[int]:
        return list(x) if x is not None else []

    def i2repr(self, pkt: Packet | None, x: list[int] | None) -> str:
        return repr(list(x or []))


class RegisterHeavy(Packet):
    """``agg_t`` of registers.p4: ``index`` is the P4 field ``slot`` (masked to 0..1023
    by the program), ``reset`` 1 clears the slot, then 32 values ``v00..v31``.

    registers.p4 parses it after Ethernet / IPv4 (ihl 5, not fragmented) / UDP with
    destination port 40000; build ``Ether()/IP()/UDP()/RegisterHeavy(...)``.
    """

    name = "RegisterHeavy"
    fields_desc = [
        IntField("index", 0), ByteField("reset", 0), ByteField("_pad0", 0), ShortField("_pad1", 0),
        _FixedIntList("values", REGISTER_VALUES),
    ]


for _cls in (TableProbe, Arith, RepProbe, Echo, ExpHeader, ImProbe, MeterProbe):
    bind_top_down(Ether, _cls, type=ETHERTYPE_PROBE)
bind_layers(Ether, Mpls, type=ETHERTYPE_MPLS)
bind_layers(Ether, Mpls, type=ETHERTYPE_MPLS_MASKED)
bind_layers(TableProbe, Extra, has_extra=1)
bind_layers(IP, HashProbe, proto=IP_PROTO_HASH_PROBE)
bind_layers(UDP, RegisterHeavy, dport=GRADNET_INA_UDP_PORT)
