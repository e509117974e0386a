"""The constants the P4 programs and the wire layer share are the same numbers.

p4src/include/*.p4 state them for the data planes, wire/ for everything in Python, and
p4src/gen_lanes.py (plain python3, no project imports) keeps its own copy of the value
counts. This test parses the P4 sources (no p4c needed) and compares each one.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from wire import ina, ndn, ports, token

ROOT = Path(__file__).resolve().parents[1]
INCLUDE = ROOT / "p4src" / "include"


def p4_constants(path: Path) -> dict[str, int]:
    """``{name: value}`` of every numeric ``const bit<N> NAME = V;`` and ``#define NAME V``
    in a P4 source (hex or decimal; defines with an expression are left out)."""
    text = path.read_text()
    out: dict[str, int] = {}
    for name, value in re.findall(r"^\s*const\s+bit<\d+>\s+(\w+)\s*=\s*(0x[0-9a-fA-F]+|\d+)\s*;",
                                  text, re.M):
        out[name] = int(value, 0)
    # a number not followed by an operator (a comment's "/*" or "//" is not one)
    for name, value in re.findall(r"^#define\s+(\w+)\s+(0x[0-9a-fA-F]+|\d+)\b(?!\s*(?:[-+*]|/(?![*/])))",
                                  text, re.M):
        out[name] = int(value, 0)
    return out


def p4_header_bits(path: Path, header: str) -> dict[str, int]:
    """``{field: width in bits}`` of ``header <header> { ... }`` in a P4 source."""
    body = re.search(rf"header\s+{header}\s*\{{(.*?)\}}", path.read_text(), re.S)
    assert body, f"no header {header} in {path}"
    return {f: int(w) for w, f in re.findall(r"bit<(\d+)>\s+(\w+)\s*;", body.group(1))}


def gen_lanes() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_lanes", ROOT / "p4src" / "gen_lanes.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up while being built
    try:
        spec.loader.exec_module(mod)
    finally:
        del sys.modules[spec.name]
    return mod


@pytest.fixture(scope="module")
def config() -> dict[str, int]:
    return p4_constants(INCLUDE / "config.p4")


def test_udp_ports_and_ethertypes(config: dict[str, int]) -> None:
    assert config["GRADNET_INA_UDP_PORT"] == ports.INA_UDP_PORT == ina.INA_UDP_PORT
    assert config["GRADNET_DIFF_UDP_PORT"] == ports.DIFF_UDP_PORT
    assert config["GRADNET_BCUBE_UDP_PORT"] == ports.BCUBE_UDP_PORT
    assert config["GRADNET_TOKEN_UDP_PORT"] == ports.TOKEN_UDP_PORT
    assert config["GRADNET_NDN_UDP_PORT"] == ports.NDN_UDP_PORT == ndn.NDN_UDP_PORT
    assert config["ETHERTYPE_NDN"] == ports.ETHERTYPE_NDN == ndn.ETHERTYPE_NDN
    assert config["GRADNET_TOKEN_ETHERTYPE"] == ports.TOKEN_ETHERTYPE == token.TOKEN_ETHERTYPE


def test_ina_packet(config: dict[str, int]) -> None:
    assert config["INA_VALUES"] == ina.INA_VALUES
    text = (INCLUDE / "config.p4").read_text()
    # the sizes a build may choose: "#if INA_VALUES != 64 && INA_VALUES != 128 ..."
    guard = re.search(r"^#if (INA_VALUES != \d+(?: && INA_VALUES != \d+)*)$", text, re.M)
    assert guard
    assert tuple(int(n) for n in re.findall(r"\d+", guard.group(1))) == ina.INA_VALUE_SIZES
    udp_len = re.search(r"^#define INA_GRAD_UDP_LEN \(8 \+ (\d+) \+ 4 \* INA_VALUES\)$", text, re.M)
    assert udp_len and int(udp_len.group(1)) == ina.INA_HEADER_LEN
    for v in ina.INA_VALUE_SIZES:
        assert 8 + int(udp_len.group(1)) + 4 * v == 8 + ina.ina_packet_len(v)
    fields = p4_header_bits(INCLUDE / "headers.p4", "ina_t")
    assert list(fields) == list(ina.InaHeader._fields)  # same fields, same order
    assert sum(fields.values()) == 8 * ina.INA_HEADER_LEN
    assert fields["bitmap"] == ina.INA_MAX_WORKERS == 8 * ina.INA_BITMAP_BYTES
    assert {m.name: m.value for m in ina.MsgType} == {
        m: config[f"INA_{m}"] for m in ("GRAD", "PARTIAL", "RESULT", "CLEAR")}
    assert config["INA_FLAG_RETX"] == ina.InaFlags.RETX
    assert config["INA_FLAG_VIA_SD"] == ina.InaFlags.VIA_SD


def test_token_frame() -> None:
    p4 = p4_constants(INCLUDE / "token_headers.p4")
    assert p4["TOKEN_VALUES"] == token.TOKEN_VALUES
    assert p4["TOKEN_MAX_FRAGS"] == token.TOKEN_MAX_FRAGS
    # P4 sizes its member arrays by 32: sequence numbers 1..31, one bit each
    assert p4["TOKEN_MAX_MEMBERS"] == token.TOKEN_MAX_MEMBERS + 1
    assert {m.name: m.value for m in token.TokenMsg} == {
        k.removeprefix("TOKEN_MSG_"): v for k, v in p4.items() if k.startswith("TOKEN_MSG_")}
    assert {f.name: f.value for f in token.TokenFlags} == {
        k.removeprefix("TOKEN_FLAG_"): v for k, v in p4.items() if k.startswith("TOKEN_FLAG_")}
    fields = p4_header_bits(INCLUDE / "token_headers.p4", "token_t")
    assert list(fields) == list(token.TokenHeader._fields)
    assert sum(fields.values()) == 8 * token.TOKEN_HEADER_LEN


def test_ndn_bounds_and_markers() -> None:
    p4 = p4_constants(INCLUDE / "ndn_headers.p4")
    assert p4["NDN_MAX_NAME_BYTES"] == ndn.MAX_NAME_BYTES
    assert p4["NDN_MAX_DEPTH"] == ndn.MAX_DEPTH
    assert p4["NDN_MAX_COMPONENT"] == ndn.MAX_COMPONENT
    assert p4["NDN_TLV_INTEREST"] == ndn.TLV_INTEREST and p4["NDN_TLV_DATA"] == ndn.TLV_DATA
    for name, marker in (("INSERT", ndn.INSERT_MARKER), ("DISTRIBUTE", ndn.DISTRIBUTE_MARKER),
                         ("UNSUBSCRIBE", ndn.UNSUBSCRIBE_MARKER)):
        assert p4[f"NDN_{name}_MARKER"] == int.from_bytes(marker, "big")


def test_gen_lanes_counts() -> None:
    gen = gen_lanes()
    assert gen.INA_VALUE_SIZES == ina.INA_VALUE_SIZES
    assert gen.INA_VALUES == ina.INA_VALUES
    assert gen.TOKEN_VALUES == token.TOKEN_VALUES


def test_p4_constants_parser(tmp_path: Path) -> None:
    path = tmp_path / "c.p4"
    path.write_text("const bit<16> A = 0x8624;\n#define B 64\n#define C (8 + 52)\n"
                    "  const bit<8>  D = 3;   /* x */\n#define E 48 * B\n#define F 32  /* y */\n"
                    "#define G 2 / 1\n")
    assert p4_constants(path) == {"A": 0x8624, "B": 64, "D": 3, "F": 32}
