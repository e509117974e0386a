"""The embedded target's compiler and packet flow, in process (no namespaces).

These run the committed p4c output of p4src/forward.p4 through ``Switch.process`` and
check exact output bytes; the namespace-level conformance and differential tests are in
test_conformance_*.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scapy.all import IP, UDP, Ether

from targets.embedded.codegen import actions, hashes
from targets.embedded.compiler import CompileError, Program
from targets.embedded.state import StateError, TableEntry
from targets.embedded.switch import Switch

ROOT = Path(__file__).resolve().parent.parent
FORWARD = ROOT / "p4src" / "build" / "forward.json"
ROUTES = "MyIngress.forwarding.ipv4_routes"
ECMP = "MyIngress.forwarding.ecmp_members"
PORT_MACS = "MyEgress.mac_rewrite.port_macs"
LOSS = "MyEgress.link_emulation.link_loss"


@pytest.fixture
def sw() -> Switch:
    s = Switch(seed=1)
    s.install_program(s.load_program(FORWARD.read_bytes()))
    return s


def _route(sw: Switch, prefix: int, plen: int, action: str, *params: int) -> None:
    p = sw.program
    t = p.tables[ROUTES]
    t.insert(TableEntry(((prefix, plen),), p.action_call(ROUTES, f"MyIngress.forwarding.{action}", params)))


def _udp(dst: str, sport: int = 1234, ttl: int = 64, payload: bytes = b"gradnet!") -> bytes:
    return bytes(Ether(src="00:00:0a:00:00:01", dst="02:00:00:01:00:01") / IP(src="10.0.0.1", dst=dst, ttl=ttl)
                 / UDP(sport=sport, dport=5000) / payload)


def test_hash_algorithms_match_reference_vectors() -> None:
    # Check values of the standard CRC catalogue for "123456789".
    assert hashes.crc16(b"123456789") == 0xBB3D  # CRC-16/ARC
    assert hashes.crc32(b"123456789") == 0xCBF43926
    assert hashes.identity(b"\x01\x02\x03") == 0x010203
    hdr = bytes.fromhex("450000730000400040110000c0a80001c0a800c7")
    assert hashes.csum16(hdr) == 0xB861


def test_lpm_longest_prefix_ttl_and_checksum(sw: Switch) -> None:
    _route(sw, 0x0A000000, 8, "set_next_hop", 0x020000000201, 3)
    _route(sw, 0x0A000002, 32, "set_next_hop", 0x000000000002, 2)
    p = sw.program
    p.tables[PORT_MACS].insert(TableEntry((2,), p.action_call(PORT_MACS, "MyEgress.mac_rewrite.set_source_mac", (0x020000000102,))))
    out = sw.process(1, _udp("10.0.0.2"))
    assert [port for port, _ in out] == [2]
    o = Ether(out[0][1])
    assert o.dst == "00:00:00:00:00:02" and o.src == "02:00:00:00:01:02"
    assert o[IP].ttl == 63
    chk = o[IP].chksum
    del o[IP].chksum
    assert IP(bytes(o[IP])).chksum == chk  # recomputed by update_checksum
    assert bytes(o[UDP].payload) == b"gradnet!"
    # shorter prefix for another address
    out = sw.process(1, _udp("10.9.9.9"))
    assert [port for port, _ in out] == [3]


def test_miss_and_ttl_expiry_drop(sw: Switch) -> None:
    assert sw.process(1, _udp("10.0.0.2")) == []
    _route(sw, 0x0A000002, 32, "set_next_hop", 2, 2)
    assert sw.process(1, _udp("10.0.0.2", ttl=1)) == []
    assert sw.stats.pipeline_drops == 2


def test_ecmp_spreads_flows_and_keeps_each_flow_on_one_path(sw: Switch) -> None:
    p = sw.program
    _route(sw, 0x0A000002, 32, "set_ecmp_group", 7, 2)
    for member, port in ((0, 3), (1, 4)):
        p.tables[ECMP].insert(TableEntry((7, member), p.action_call(ECMP, "MyIngress.forwarding.set_next_hop", (0x0202, port))))
    ports = {}
    for sport in range(1000, 1064):
        first = sw.process(1, _udp("10.0.0.2", sport=sport))
        again = sw.process(1, _udp("10.0.0.2", sport=sport))
        assert [x[0] for x in first] == [x[0] for x in again]
        ports[sport] = first[0][0]
    assert set(ports.values()) == {3, 4}
    assert 16 <= sum(1 for v in ports.values() if v == 3) <= 48


def test_link_loss_rate_is_close_to_configured(sw: Switch) -> None:
    p = sw.program
    _route(sw, 0x0A000002, 32, "set_next_hop", 2, 2)
    p.tables[LOSS].insert(TableEntry((2,), p.action_call(LOSS, "MyEgress.link_emulation.set_loss_rate", (int(0.2 * 2**32),))))
    n = 4000
    got = sum(len(sw.process(1, _udp("10.0.0.2"))) for _ in range(n))
    assert 0.17 < 1 - got / n < 0.23
    drops = p.counters["MyEgress.link_emulation.link_emulation_drops"].packets[2]
    assert drops == n - got


def test_malformed_packets_never_crash(sw: Switch) -> None:
    _route(sw, 0x0A000002, 32, "set_next_hop", 2, 2)
    good = _udp("10.0.0.2")
    for cut in range(0, len(good)):
        sw.process(1, good[:cut])
    sw.process(1, b"\xff" * 3000)
    assert sw.stats.errors == 0
    assert sw.stats.ports[1].rx == len(good) + 1


def test_control_plane_errors(sw: Switch) -> None:
    p = sw.program
    t = p.tables[ROUTES]
    call = p.action_call(ROUTES, "MyIngress.forwarding.set_next_hop", (2, 2))
    t.insert(TableEntry(((0x0A000002, 32),), call))
    with pytest.raises(StateError) as e:
        t.insert(TableEntry(((0x0A000002, 32),), call))
    assert e.value.code == "ALREADY_EXISTS"
    with pytest.raises(StateError) as e:
        t.delete(((0x0A000003, 32),), 0)
    assert e.value.code == "NOT_FOUND"
    with pytest.raises(StateError) as e:
        p.action_call(ROUTES, "MyIngress.forwarding.set_next_hop", (2, 1 << 9))
    assert e.value.code == "INVALID_ARGUMENT"
    with pytest.raises(StateError):
        t.insert(TableEntry(((0x0A000001, 16),), call))  # bits past the prefix


def test_bad_json_is_a_clear_error() -> None:
    with pytest.raises(CompileError, match="not valid JSON"):
        Program(b"{nope")
    with pytest.raises(CompileError, match="not a BMv2 JSON"):
        Program(b"{}")
    spec = json.loads(FORWARD.read_text())
    spec["actions"][1]["primitives"].append({"op": "no_such_primitive", "parameters": []})
    with pytest.raises(CompileError, match="no_such_primitive"):
        Program(spec)
    spec = json.loads(FORWARD.read_text())
    del spec["parsers"][0]["parse_states"][0]["transitions"]
    with pytest.raises(CompileError, match="malformed"):
        Program(spec)


def test_repeated_register_index_is_computed_once() -> None:
    """The aggregator's 32 read-add-writes at one index set ``_i`` once; a write to a
    slot the index reads, or any other kind of line, makes the next ``_i =`` stay."""
    drop = actions._drop_repeated_index
    lines = ["def a(F, D):", "    _i = F[47]", "    if 0 <= _i < 8: F[30] = (_R1[_i]) & 0xff",
             "    if 0 <= _i < 8: _R2[_i] = (F[30]) & 0xff", "    _i = F[47]", "    F[47] = 3",
             "    _i = F[47]", "    F[1] = 2; F[47] = 4", "    _i = F[47]", "    _i = F[48]"]
    assert drop(lines) == [ln for i, ln in enumerate(lines) if i != 4]
    src = Program(json.loads((ROOT / "p4src" / "build" / "ina.json").read_text())).source
    assert src.count("_i = ") < 16  # 216 before


def test_index_temporaries_are_one_index() -> None:
    """p4c copies the index into a new temporary for every register access; a slot
    last set from a pure expression stands for it, so ``_i = F[12]`` after
    ``F[12] = (F[118] & 1023)`` is dropped when ``_i`` came from an identical
    ``F[11]`` -- unless a slot that expression reads was written in between."""
    drop = actions._drop_repeated_index
    lines = ["def a(F, D):", "    F[11] = (F[118] & 1023)", "    _i = F[11]",
             "    if 0 <= _i < 8: F[75] = _R1[_i]", "    F[12] = (F[118] & 1023)", "    _i = F[12]",
             "    if 0 <= _i < 8: _R2[_i] = F[75]", "    F[118] = 5", "    F[13] = (F[118] & 1023)",
             "    _i = F[13]", "    F[14] = (_calc1(F) & 7)", "    F[15] = (_calc1(F) & 7)", "    _i = F[14]",
             "    _i = F[15]"]
    assert drop(lines) == [ln for i, ln in enumerate(lines) if i != 5]
    regs = Program(json.loads((ROOT / "tests" / "p4" / "build" / "registers.json").read_text())).source
    assert regs.count("_i = ") < 8  # 64 before: one per register access


def test_value_bit_bounds_are_sound() -> None:
    """``_bits`` lets a store skip its mask; over random expressions on unsigned fields
    holding random in-width values (the PHV's invariant), every value fits its bound."""
    import random

    prog = Program(json.loads(FORWARD.read_text()))
    rnd = random.Random(7)
    fields = [["ipv4", "ttl"], ["ipv4", "dst_addr"], ["ipv4", "ihl"], ["udp", "dst_port"], ["ethernet", "dst_addr"]]

    def gen(depth: int) -> dict:
        if depth == 0 or rnd.random() < 0.3:
            if rnd.random() < 0.5:
                return {"type": "field", "value": rnd.choice(fields)}
            return {"type": "hexstr", "value": hex(rnd.getrandbits(rnd.randint(1, 40)))}
        op = rnd.choice(["+", "&", "|", "^", ">>", "?", "-", "*", "<<"])
        e = {"op": op, "left": gen(depth - 1), "right": gen(depth - 1)}
        if op in (">>", "<<"):
            e["right"] = {"type": "hexstr", "value": hex(rnd.randint(0, 9))}
        if op == "?":
            e["cond"] = {"type": "expression", "value": {"op": "==", "left": gen(0), "right": gen(0)}}
        return {"type": "expression", "value": e}

    bounded = 0
    for _ in range(400):
        e = gen(3)
        b = prog._bits(e)
        if b is None:
            continue
        bounded += 1
        fn = eval(f"lambda F: {prog.expr(e)}")  # noqa: S307 (generated code under test)
        for _ in range(5):
            F = prog.template[:]
            for f in fields:
                slot, w, _ = prog.field_info(f)
                F[slot] = rnd.getrandbits(w)
            v = fn(F)
            assert v >= 0 and v.bit_length() <= b, (prog.expr(e), b, v)
    assert bounded > 50


def test_hoisted_index_guard_behaves_as_the_guarded_lines() -> None:
    """One range check for the accesses that share an index: in range and out of range
    (destination and cells left alone, as simple_switch does), the hoisted action leaves
    the PHV and the registers exactly as the line-by-line guarded one."""
    lines = ["def a(F, D):", "    _i = F[0]", "    if 0 <= _i < 4: F[1] = _R1[_i]", "    F[2] = (F[2] + F[1]) & 255",
             "    if 0 <= _i < 4: _R1[_i] = F[2]", "    F[3] = 9", "    if 0 <= _i < 4: F[4] = _R2[_i]"]
    hoisted = actions._hoist_index_guards(lines)
    assert sum("if 0 <= _i < 4:" in ln for ln in hoisted) == 4  # one hoisted + the 3 kept for else
    for index in (-1, 0, 3, 4, 1000):
        results = []
        for src in (lines, hoisted):
            ns = {"_R1": [10, 11, 12, 13], "_R2": [20, 21, 22, 23]}
            exec("\n".join(src), ns)  # noqa: S102 (generated code under test)
            F = [index, 7, 250, 0, 5]
            ns["a"](F, ())
            results.append((F, ns["_R1"], ns["_R2"]))
        assert results[0] == results[1], index
    # mixed sizes, or a single access: left as they were
    mixed = ["def b(F, D):", "    _i = F[0]", "    if 0 <= _i < 4: F[1] = _R1[_i]", "    if 0 <= _i < 8: F[2] = _R2[_i]"]
    assert actions._hoist_index_guards(mixed) == mixed
    assert actions._hoist_index_guards(lines[:3]) == lines[:3]
