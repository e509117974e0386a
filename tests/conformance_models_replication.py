"""Conformance models of replication.p4, metadata_echo.p4 and instance_meta.p4:
multicast, clones, resubmit, recirculate and the standard_metadata per instance.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from finsy import (
    P4CloneSessionEntry,
    P4MulticastGroupEntry,
)
from scapy.layers.l2 import Ether

from tests.conformance_models_io import _packet_in
from tests.conformance_rig import DST, M32, SRC, Case, Out, Rig, _ip, _zero
from tests.p4.packets import (
    Echo,
    ImProbe,
    RepProbe,
)

# =========================================================================================
# replication.p4
# =========================================================================================
MC_GROUP = [(1, 10), (2, 20)]       # multicast group 1: (port, rid)
I2E_SESSION, E2E_SESSION = 5, 6
I2E_REPLICA, E2E_REPLICA = (3, 0), (4, 9)  # clone sessions: (port, instance -> egress_rid)
NORMAL, INGRESS_CLONE, EGRESS_CLONE, RECIRC, REPLICATION, RESUBMIT = 0, 1, 2, 4, 5, 6


def replication_setup(rig: Rig) -> None:
    """Multicast group 1 and clone sessions 5 and 6 (replication.p4's header comment)."""
    rig.write(+P4MulticastGroupEntry(1, replicas=MC_GROUP),
              +P4CloneSessionEntry(I2E_SESSION, replicas=[I2E_REPLICA]),
              +P4CloneSessionEntry(E2E_SESSION, replicas=[E2E_REPLICA]))


def _rep(**fields: int) -> bytes:
    return bytes(Ether(dst=DST, src=SRC) / RepProbe(**fields))


def _rcase(name: str, sent: dict[str, int], outs: list[dict[str, int]], port: int = 1) -> Case:
    """``outs``: per copy, the probe fields that differ from what was sent, plus 'port'."""
    expect = []
    for o in outs:
        o = dict(o)
        out_port = o.pop("port")
        expect.append((out_port, _rep(**{**sent, **o})))
    return Case(name, port, _rep(**sent), expect)


def replication_pre_changes(rig: Rig) -> list[list[Out]]:
    """Outputs after P4Runtime changes to the PRE: group 1 modified to one replica,
    clone session 5 deleted (clone() to a missing session is a no-op); both restored."""
    seen = []
    rig.write(~P4MulticastGroupEntry(1, replicas=[(4, 44)]))
    seen.append(sorted(rig.exchange(1, _rep(op=1, mcast_grp=1, out_port=3), 1)))
    rig.write(~P4MulticastGroupEntry(1, replicas=MC_GROUP), -P4CloneSessionEntry(I2E_SESSION))
    seen.append(sorted(rig.exchange(1, _rep(op=2, out_port=2), 1)))
    rig.write(+P4CloneSessionEntry(I2E_SESSION, replicas=[I2E_REPLICA]))
    seen.append(sorted(rig.exchange(1, _rep(op=2, out_port=2), 2)))
    return seen


def replication_pre_expected() -> list[list[Out]]:
    """What ``replication_pre_changes`` must see."""
    mc = _rep(op=1, mcast_grp=1, out_port=3, egress_instance_type=REPLICATION, egress_rid=44, egress_port=4)
    orig = _rep(op=2, out_port=2, tag=0xA5, egress_port=2)
    clone = _rep(op=2, out_port=2, tag=0xA5, egress_instance_type=INGRESS_CLONE, egress_rid=I2E_REPLICA[1],
                 egress_port=I2E_REPLICA[0])
    return [[(4, mc)], [(2, orig)], sorted([(2, orig), (I2E_REPLICA[0], clone)])]


def _replication_cases() -> list[Case]:
    zero = {"ingress_instance_type": 0, "resubmit_count": 0, "recirc_count": 0}
    garbage = {"ingress_instance_type": 0x77, "resubmit_count": 0x66, "recirc_count": 0x55,
               "egress_instance_type": 0x44, "tag": 0x33, "egress_rid": 0x2222, "egress_port": 0x1111}
    i2e_port, i2e_rid = I2E_REPLICA
    e2e_port, e2e_rid = E2E_REPLICA
    return [
        _rcase("multicast_copies", {"op": 1, "mcast_grp": 1, "out_port": 4},
               [{"port": p, "egress_instance_type": REPLICATION, "egress_rid": rid, "egress_port": p}
                for p, rid in MC_GROUP]),
        _rcase("multicast_wins_over_drop_port", {"op": 1, "mcast_grp": 1, "out_port": 511}, [
            {"port": p, "egress_instance_type": REPLICATION, "egress_rid": rid, "egress_port": p}
            for p, rid in MC_GROUP], port=3),
        _rcase("multicast_group_zero_is_unicast", {"op": 1, "mcast_grp": 0, "out_port": 3},
               [{"port": 3, "egress_port": 3}]),
        _rcase("multicast_unknown_group", {"op": 1, "mcast_grp": 2, "out_port": 3}, []),
        # I2E: the clone is re-parsed from the packet as received (garbage result fields
        # survive) with only the field list (tag) preserved; the original keeps ingress's work.
        _rcase("clone_i2e", {"op": 2, "out_port": 2, **garbage}, [
            {"port": 2, **zero, "egress_instance_type": NORMAL, "tag": 0xA5, "egress_rid": 0, "egress_port": 2},
            {"port": i2e_port, "egress_instance_type": INGRESS_CLONE, "tag": 0xA5, "egress_rid": i2e_rid,
             "egress_port": i2e_port}]),
        _rcase("clone_i2e_original_dropped", {"op": 2, "out_port": 511}, [
            {"port": i2e_port, "egress_instance_type": INGRESS_CLONE, "tag": 0xA5, "egress_rid": i2e_rid,
             "egress_port": i2e_port}]),
        # E2E: the clone copies the headers as egress left them, metadata reset
        _rcase("clone_e2e", {"op": 3, "out_port": 2, "tag": 0x12}, [
            {"port": 2, "egress_instance_type": NORMAL, "tag": 0, "egress_port": 2},
            {"port": e2e_port, "egress_instance_type": EGRESS_CLONE, "tag": 0, "egress_rid": e2e_rid,
             "egress_port": e2e_port}]),
        _rcase("resubmit_preserves_field_list", {"op": 4, "out_port": 3, **garbage}, [
            {"port": 3, "ingress_instance_type": RESUBMIT, "resubmit_count": 1, "recirc_count": 0,
             "egress_instance_type": NORMAL, "tag": 0, "egress_rid": 0, "egress_port": 3}], port=2),
        _rcase("recirculate_preserves_field_list", {"op": 5, "out_port": 2}, [
            {"port": 2, "ingress_instance_type": RECIRC, "recirc_count": 1, "egress_instance_type": NORMAL,
             "egress_port": 2}]),
        _rcase("plain_unicast", {"op": 9, "out_port": 4, "egress_rid": 7}, [
            {"port": 4, "egress_port": 4, "egress_rid": 0}], port=2),
        _rcase("drop_port", {"op": 0, "out_port": 511}, []),
        Case("not_a_probe_dropped", 1, bytes(Ether(dst=DST, src=SRC, type=0x0800) / _ip()), []),
    ]


# =========================================================================================
# metadata_echo.p4
# =========================================================================================
ECHO_AT = 14
ECHO_GROUP = [(3, 30), (4, 40)]
ECHO_VOLATILE = ("ingress_global_timestamp", "enq_timestamp", "deq_timedelta", "egress_global_timestamp")


def echo_setup(rig: Rig) -> None:
    """Multicast group 1 for the echo's set_mcast_grp."""
    rig.write(+P4MulticastGroupEntry(1, replicas=ECHO_GROUP))


def echo_mask(frame: bytes, check: bool = True) -> bytes:
    """Check the clock fields against each other, then zero them.

    Both targets take them from one microsecond clock: ingress <= enqueue <= egress,
    and deq_timedelta is read just after egress_global_timestamp."""
    if check and len(frame) >= ECHO_AT + len(Echo()):
        e = Echo(frame[ECHO_AT:ECHO_AT + len(Echo())])
        assert 0 < e.ingress_global_timestamp <= e.enq_timestamp <= e.egress_global_timestamp, \
            f"timestamps out of order: ingress {e.ingress_global_timestamp}, enq {e.enq_timestamp}, " \
            f"egress {e.egress_global_timestamp}"
        spent = (e.egress_global_timestamp - e.enq_timestamp) & M32
        assert 0 <= e.deq_timedelta - spent < 20_000, f"deq_timedelta {e.deq_timedelta} vs {spent} us"
    return _zero(frame, Echo, ECHO_AT, ECHO_VOLATILE)


def _echo(payload: bytes = b"", **fields: int) -> bytes:
    return bytes(Ether(dst=DST, src=SRC) / Echo(**fields)) + payload


def _ecase(name: str, port: int, sent: dict[str, int], outs: list[dict[str, int]], payload: bytes = b"") -> Case:
    frame = _echo(payload, **sent)
    expect = []
    for o in outs:
        o = dict(o)
        out_port = o.pop("port")
        fields = {**sent, "ingress_port": port, "egress_spec": sent.get("out_port") or port,
                  "packet_length": len(frame), "egress_port": out_port, "mcast_grp": sent.get("set_mcast_grp", 0),
                  "priority": sent.get("set_priority", 0) & 7, **o}
        expect.append((out_port, _echo(payload, **fields)))
    return Case(name, port, frame, expect)


def _echo_cases() -> list[Case]:
    return [
        _ecase("reflect", 2, {}, [{"port": 2}]),
        _ecase("out_port", 1, {"out_port": 3}, [{"port": 3}]),
        # one queue per port (no --priority-queues): simple_switch 1.15 drops every
        # priority but 0 ("Priority out of range, dropping packet"); 9 is 1 in bit<3>
        _ecase("priority_beyond_one_queue_dropped", 1, {"out_port": 4, "set_priority": 5}, []),
        _ecase("priority_truncated_to_3_bits_dropped", 4, {"set_priority": 9}, []),
        _ecase("priority_8_truncated_to_0_carried", 4, {"set_priority": 8}, [{"port": 4}]),
        _ecase("packet_length_with_payload", 3, {"out_port": 2}, [{"port": 2}], payload=b"x" * 77),
        _ecase("multicast", 1, {"set_mcast_grp": 1}, [
            {"port": p, "egress_instance_type": REPLICATION, "egress_rid": rid} for p, rid in ECHO_GROUP]),
        Case("truncated_echo_dropped", 1, _echo()[:40], []),
        Case("drop_port", 1, _echo(out_port=511), []),
    ]


def echo_queue_burst(rig: Rig, n: int = 24) -> list[Echo]:
    """``n`` frames back to back into port 1, all to port 2."""
    outs = rig.burst(1, [_echo(out_port=2, _pad0=i) for i in range(n)], n)
    assert {p for p, _ in outs} == {2} and len(outs) == n
    return [Echo(f[ECHO_AT:]) for _, f in outs]


# =========================================================================================
# instance_meta.p4
# =========================================================================================
IM_GROUP = [(2, 21), (3, 31)]              # multicast group 1: (port, rid)
IM_I2E, IM_E2E = (3, 7), (4, 9)            # clone sessions 5 and 6: (port, instance -> egress_rid)
IM_PROBE_LEN = len(ImProbe())
IM_EXTRA_IN, IM_EXTRA_ING, IM_EXTRA_EG = 0x11223344, 0xABCD0123, 0x4567CDEF
PROBE_MAGIC_ERROR = 0xEE                   # magic that fails the parser's verify()
CPU_PORT_NUM = 255                         # the testbed's --cpu-port


def im_setup(rig: Rig) -> None:
    """Multicast group 1 and clone sessions 5 (I2E) and 6 (E2E)."""
    rig.write(+P4MulticastGroupEntry(1, replicas=IM_GROUP),
              +P4CloneSessionEntry(5, replicas=[IM_I2E]), +P4CloneSessionEntry(6, replicas=[IM_E2E]))


def _im(payload: bytes = b"", extra: int | None = None, **fields: int) -> bytes:
    f = bytes(Ether(dst=DST, src=SRC) / ImProbe(**{"has_extra": int(extra is not None), **fields}))
    return f + (b"" if extra is None else extra.to_bytes(4, "big")) + payload


@dataclass
class _ImPacket:
    """simple_switch's view of one instance_meta.p4 packet: parsed headers, payload,
    metadata and the packet-length register."""

    probe: dict[str, int]
    extra: int | None
    payload: bytes
    meta: dict[str, int]          # parser_mark, tag, instance_type, ingress_port, parser_error
    length: int                   # the packet-length register
    packet_in: int | None = None  # packet_in_t.ingress_port when valid

    def deparse(self) -> bytes:
        pin = b"" if self.packet_in is None else (self.packet_in << 7).to_bytes(2, "big")
        ext = b"" if self.extra is None else self.extra.to_bytes(4, "big")
        return pin + bytes(Ether(dst=DST, src=SRC) / ImProbe(**self.probe)) + ext + self.payload


def _im_parse(frame: bytes, port: int) -> _ImPacket:
    """The parser on a frame into ``port`` (not the CPU port): metadata all zero but
    the parser's mark; a bad magic stops parsing after the probe (ProbeMagic = 2 here)."""
    probe = ImProbe(frame[14:14 + IM_PROBE_LEN]).fields
    rest = frame[14 + IM_PROBE_LEN:]
    meta = {"parser_mark": 0x77, "tag": 0, "instance_type": 0, "ingress_port": port, "parser_error": 0}
    extra = None
    if probe["magic"] == PROBE_MAGIC_ERROR:
        meta["parser_error"] = 2
    elif probe["has_extra"] == 1:
        extra, rest = int.from_bytes(rest[:4], "big"), rest[4:]
    return _ImPacket(dict(probe), extra, rest, meta, len(frame))


def _im_ingress(p: _ImPacket, ilen: int) -> None:
    """ImIngress on one pass (``ilen``: standard_metadata.packet_length of this pass)."""
    m, pr = p.meta, p.probe
    pr.update(i_instance_type=m["instance_type"], i_parser_error=int(m["parser_error"] != 0),
              i_ingress_port=m["ingress_port"], i_packet_length=ilen)
    if pr["hdr_ops"] & 1 and p.extra is None:
        p.extra, p.length = IM_EXTRA_ING, p.length + 4
    elif pr["hdr_ops"] & 1:
        p.extra = IM_EXTRA_ING
    if pr["hdr_ops"] & 2 and p.extra is not None:
        p.extra, p.length = None, p.length - 4


def _im_egress(p: _ImPacket, port: int, rid: int) -> None:
    """ImEgress (without its clone/recirculate decisions)."""
    m, pr = p.meta, p.probe
    pr.update(e_instance_type=m["instance_type"], e_parser_error=m["parser_error"],
              e_ingress_port=m["ingress_port"], e_egress_spec=0, e_egress_port=port, e_egress_rid=rid,
              e_mcast_grp=m.get("mcast_grp", 0), e_packet_length=p.length, e_priority=0, e_checksum_error=0,
              e_parser_mark=m["parser_mark"], e_tag=m["tag"])
    if m["instance_type"] == 0:
        if pr["hdr_ops"] & 4:
            if p.extra is None:
                p.length += 4
            p.extra = IM_EXTRA_EG
        if pr["hdr_ops"] & 8 and p.extra is not None:
            p.extra, p.length = None, p.length - 4


def _reset_meta(p: _ImPacket, tag: int, instance_type: int) -> None:
    p.meta = {"parser_mark": 0, "tag": tag, "instance_type": instance_type, "ingress_port": 0, "parser_error": 0}


def im_model(frame: bytes, port: int) -> list[Out]:
    """What simple_switch 1.15 sends for ``frame`` into data port ``port``, worked out
    from its rules (see instance_meta.p4's header comment); CPU-port output not modelled."""
    out: list[Out] = []

    def egress(p: _ImPacket, eport: int, rid: int) -> None:
        _im_egress(p, eport, rid)
        op = p.probe["op"]
        if p.meta["instance_type"] == 0 and op == 3:
            c = copy.deepcopy(p)  # headers as egress left them, metadata reset
            _reset_meta(c, 0, 2)
            egress(c, IM_E2E[0], IM_E2E[1])
        if p.meta["instance_type"] == 0 and op == 5 and p.meta["tag"] != 0xC7:
            d = p.deparse()  # re-parsed from the deparsed frame, metadata reset
            r = _im_parse(d, 0)
            r.meta.update(tag=0xC7, instance_type=4)
            ingress(r, len(d))
            return
        out.append((eport, p.deparse()))

    def ingress(p: _ImPacket, ilen: int) -> None:
        _im_ingress(p, ilen)
        op, first = p.probe["op"], p.meta["instance_type"] == 0
        eport = p.probe["out_port"] & 0x1FF
        if first and op == 2:
            c = _im_parse(frame, port)  # I2E: the frame as received, re-parsed
            _reset_meta(c, 0xA5, 1)
            c.length = len(frame)
            p.meta["tag"] = 0xA5
            egress(c, IM_I2E[0], IM_I2E[1])
        if first and op == 4:
            r = _im_parse(frame, 0)  # resubmit: the frame as received, metadata reset
            r.meta.update(tag=0xB6, instance_type=6)
            ingress(r, len(frame))
            return
        p.meta["instance_type"] = 0
        if first and op == 1 and p.probe["mcast_grp"] == 1:
            p.meta["instance_type"], p.meta["mcast_grp"] = 5, 1
            for gport, rid in IM_GROUP:
                egress(copy.deepcopy(p), gport, rid)
            return
        if first and op == 1 and p.probe["mcast_grp"] != 0:
            return  # an unknown group: no copies
        if eport != 511:
            egress(p, eport, 0)

    ingress(_im_parse(frame, port), len(frame))
    return out


def _imcase(name: str, port: int, payload: bytes = b"", extra: int | None = None, **fields: int) -> Case:
    frame = _im(payload, extra, **fields)
    return Case(name, port, frame, im_model(frame, port))


def _im_cases() -> list[Case]:
    return [
        _imcase("normal", 1, out_port=2),
        _imcase("normal_payload_and_extra", 2, payload=b"p" * 33, extra=IM_EXTRA_IN, out_port=4),
        _imcase("normal_ingress_adds_header", 1, hdr_ops=1, out_port=2),
        _imcase("normal_ingress_removes_header", 1, extra=IM_EXTRA_IN, hdr_ops=2, out_port=3),
        _imcase("normal_egress_adds_header", 4, hdr_ops=4, out_port=1),
        _imcase("normal_egress_removes_header", 3, extra=IM_EXTRA_IN, hdr_ops=8, out_port=3),
        _imcase("normal_parser_error", 2, magic=PROBE_MAGIC_ERROR, extra=IM_EXTRA_IN, out_port=1),
        _imcase("multicast", 1, op=1, mcast_grp=1, out_port=4),
        _imcase("multicast_ingress_adds_header", 4, op=1, mcast_grp=1, hdr_ops=1, payload=b"m" * 7),
        _imcase("clone_i2e", 1, op=2, out_port=2),
        _imcase("clone_i2e_ingress_removes_header", 2, op=2, extra=IM_EXTRA_IN, hdr_ops=2, out_port=1),
        _imcase("clone_i2e_parser_error_reset", 1, op=2, magic=PROBE_MAGIC_ERROR, out_port=2),
        _imcase("clone_i2e_original_dropped", 1, op=2, out_port=511),
        _imcase("clone_e2e", 1, op=3, out_port=2),
        _imcase("clone_e2e_after_ingress_add", 2, op=3, hdr_ops=1, payload=b"e" * 11, out_port=2),
        _imcase("clone_e2e_after_egress_add", 3, op=3, hdr_ops=4, out_port=1),
        _imcase("clone_e2e_after_egress_remove", 3, op=3, extra=IM_EXTRA_IN, hdr_ops=8, out_port=1),
        _imcase("resubmit", 2, op=4, out_port=3),
        _imcase("resubmit_ingress_adds_header", 2, op=4, hdr_ops=1, out_port=3),
        _imcase("recirculate", 1, op=5, out_port=4),
        _imcase("recirculate_egress_adds_header", 1, op=5, hdr_ops=4, payload=b"r" * 5, out_port=4),
    ]


def im_cpu_paths(rig: Rig) -> list[tuple[str, Any]]:
    """PacketOut (ingress invalidates packet_out_t), a packet to the CPU port (egress makes
    packet_in_t valid) and an E2E clone of it: data-port frames and PacketIns."""
    obs: list[tuple[str, Any]] = []
    rig.tb.drain()
    rig.client.packet_out(_im(b"o" * 9, hdr_ops=1, out_port=9), egress_port=2, _pad=0)
    obs.append(("packet_out", sorted(rig.collect(1))))
    for name, frame in (("to_cpu", _im(out_port=CPU_PORT_NUM)), ("to_cpu_e2e_clone", _im(op=3, out_port=CPU_PORT_NUM))):
        outs = rig.exchange(1, frame, 1 if "clone" in name else 0)
        obs.append((f"{name}:data", sorted(outs)))
        obs.append((f"{name}:packet_in", _packet_in(rig, 3.0)))
    return obs


def im_cpu_expected() -> list[tuple[str, Any]]:
    """What ``im_cpu_paths`` must observe (simple_switch 1.15)."""
    po_in = _im(b"o" * 9, hdr_ops=1, out_port=9)
    po_len = len(po_in) + 2  # packet_out_t arrives on the CPU port in front of the frame
    po_out = _im(b"o" * 9, IM_EXTRA_ING, has_extra=0, hdr_ops=1, out_port=9, i_ingress_port=CPU_PORT_NUM, i_packet_length=po_len,
                 e_ingress_port=CPU_PORT_NUM, e_egress_port=2, e_packet_length=po_len - 2 + 4, e_parser_mark=0x77)
    cpu = dict(out_port=CPU_PORT_NUM, i_ingress_port=1, e_ingress_port=1, e_egress_port=CPU_PORT_NUM,
               e_parser_mark=0x77)
    sent = _im(out_port=CPU_PORT_NUM)
    to_cpu = _im(**cpu, i_packet_length=len(sent), e_packet_length=len(sent))
    c_orig = _im(op=3, **cpu, i_packet_length=len(sent), e_packet_length=len(sent))
    # the clone copies the headers as egress left them, packet_in_t included, and the
    # length register after it became valid
    c_clone = (1 << 7).to_bytes(2, "big") + _im(
        op=3, out_port=CPU_PORT_NUM, i_ingress_port=1, i_packet_length=len(sent), e_instance_type=2,
        e_egress_port=IM_E2E[0], e_egress_rid=IM_E2E[1], e_packet_length=len(sent) + 2)
    meta = {"ingress_port": 1, "_pad": 0}
    return [("packet_out", [(2, po_out)]),
            ("to_cpu:data", []), ("to_cpu:packet_in", (to_cpu, meta)),
            ("to_cpu_e2e_clone:data", [(IM_E2E[0], c_clone)]), ("to_cpu_e2e_clone:packet_in", (c_orig, meta))]
