"""Hash and checksum algorithms, bit-exact with behavioral-model's calculations.cpp,
and the generated functions computing a calculation over the PHV."""

from __future__ import annotations

import zlib
from collections.abc import Callable

from targets.embedded.codegen.layout import CompileError, json_int


def _make_crc_table(poly: int, width: int) -> list[int]:
    top = 1 << (width - 1)
    mask = (1 << width) - 1
    table = []
    for byte in range(256):
        rem = byte << (width - 8)
        for _ in range(8):
            rem = ((rem << 1) ^ poly) if rem & top else (rem << 1)
        table.append(rem & mask)
    return table


def _reflect(v: int, nbits: int) -> int:
    r = 0
    for i in range(nbits):
        if v >> i & 1:
            r |= 1 << (nbits - 1 - i)
    return r


_CCITT_TABLE = _make_crc_table(0x1021, 16)


def _make_reflected_table(poly: int, width: int) -> list[int]:
    # the table of a reflected CRC: bit-reversed inputs, remainder shifted right
    rpoly = _reflect(poly, width)
    table = []
    for byte in range(256):
        rem = byte
        for _ in range(8):
            rem = (rem >> 1) ^ rpoly if rem & 1 else rem >> 1
        table.append(rem)
    return table


_CRC16_RTABLE = _make_reflected_table(0x8005, 16)


def crc16(buf: bytes) -> int:
    """CRC-16/ARC as BMv2's ``crc16`` (reflected in and out: computed right-shifting,
    which spares reflecting every byte and the result)."""
    rem = 0
    t = _CRC16_RTABLE
    for b in buf:
        rem = t[(rem ^ b) & 0xFF] ^ (rem >> 8)
    return rem


def crc32(buf: bytes) -> int:
    """Standard CRC-32 (as BMv2's ``crc32``)."""
    return zlib.crc32(buf) & 0xFFFFFFFF


def crc_ccitt(buf: bytes) -> int:
    rem = 0xFFFF
    for b in buf:
        rem = (_CCITT_TABLE[b ^ (rem >> 8)] ^ (rem << 8)) & 0xFFFF
    return rem


def csum16(buf: bytes) -> int:
    """Internet checksum (ones' complement of the ones' complement sum).

    The end-around-carry sum of 16-bit words is the buffer, read as one big integer,
    modulo 0xFFFF (2**16 = 1 mod 0xFFFF), except that a non-zero buffer never sums to
    ones' complement +0: one bignum operation instead of a loop over the words."""
    n = int.from_bytes(buf, "big") << (8 if len(buf) & 1 else 0)  # odd length: pad a zero byte
    s = n % 0xFFFF
    if s == 0 and n:
        s = 0xFFFF
    return ~s & 0xFFFF


def xor16(buf: bytes) -> int:
    r = 0
    for i in range(0, len(buf) - 1, 2):
        r ^= (buf[i] << 8) | buf[i + 1]
    if len(buf) & 1:
        r ^= buf[-1] << 8
    return r


def identity(buf: bytes) -> int:
    return int.from_bytes(buf[:8], "big")


class _RoundRobin:
    def __init__(self) -> None:
        self.i = 0

    def __call__(self, buf: bytes) -> int:
        self.i += 1
        return self.i - 1


HASH_ALGOS: dict[str, Callable[[], Callable[[bytes], int]]] = {
    "crc16": lambda: crc16,
    "crc16_custom": lambda: crc16,
    "crc32": lambda: crc32,
    "crc32_custom": lambda: crc32,
    "crcCCITT": lambda: crc_ccitt,
    "csum16": lambda: csum16,
    "cksum16": lambda: csum16,
    "xor16": lambda: xor16,
    "identity": lambda: identity,
    "round_robin": _RoundRobin,
}


class HashMixin:
    """Generate the functions computing calculations (hashes, checksums, selectors)."""

    def _calc_fn(self, name: str) -> str:
        """Name of a generated function computing calculation ``name`` over the PHV."""
        key = f"_calc::{name}"
        if key in self._ns:
            return self._ns[key]
        calc = self.calculations.get(name)
        if calc is None:
            raise CompileError(f"unknown calculation {name}")
        algo_name = calc["algo"]
        if algo_name not in HASH_ALGOS:
            raise CompileError(f"unsupported hash algorithm {algo_name!r}")
        algo_fn = HASH_ALGOS[algo_name]()
        algo = self._bind("_A", algo_fn)
        fname = self._name("_calc")
        lines = [f"def {fname}(F, P=b''):", "    v = 0; n = 0"]
        run: list[tuple[int, int, bool]] = []  # consecutive fields under one validity test
        run_cond = ""

        def flush() -> None:
            if run:
                total = sum(w for _, w, _ in run)
                parts, shift = [], total
                for s, w, sg in run:
                    shift -= w
                    # an unsigned field's slot holds its width; a signed one may be negative
                    f = f"(F[{s}] & {(1 << w) - 1:#x})" if sg else f"F[{s}]"
                    parts.append(f"({f} << {shift})" if shift else f)
                lines.append(f"    {run_cond}v = (v << {total}) | {' | '.join(parts)}; n += {total}")
                run.clear()

        for e in calc["input"]:
            t = e["type"]
            if t == "field":
                s, w, sg = self.field_info(e["value"])
                hdr = self.headers[self.aliases.get(".".join(e["value"]), e["value"])[0]]
                cond = "" if hdr.metadata else f"if F[{hdr.base}]: "
                if hdr.vl >= 0 and s == hdr.base + 1 + hdr.vl:  # a varbit field: its current width
                    flush()
                    ln = f"F[{hdr.base + len(hdr.fields)}]"
                    lines.append(f"    {cond}v = (v << {ln}) | F[{s}]; n += {ln}")
                    continue
                if run and cond != run_cond:
                    flush()
                run_cond = cond
                run.append((s, w, sg))
                continue
            flush()
            if t == "hexstr":
                w = int(e["bitwidth"])
                lines.append(f"    v = (v << {w}) | {json_int(e['value']) & ((1 << w) - 1)}; n += {w}")
            elif t == "header":
                h = self.headers[e["value"]]
                if h.vl >= 0:
                    raise CompileError(f"calculation {name}: whole header {h.name} with a varbit field")
                parts = " | ".join(
                    f"((F[{h.base + 1 + i}] & {(1 << w) - 1:#x}) << {sum(x[1] for x in h.fields[i + 1:])})"
                    for i, (_, w, _) in enumerate(h.fields)
                )
                lines.append(f"    if F[{h.base}]: v = (v << {h.nbits}) | {parts}; n += {h.nbits}")
            elif t == "payload":
                lines.append("    pay = True")
            else:
                raise CompileError(f"calculation {name}: input type {t}")
        flush()
        lines.append("    nb = (n + 7) >> 3")
        payload = any(e["type"] == "payload" for e in calc["input"])
        if algo_fn is csum16 and not payload:
            # csum16 of the bytes, without making them: the buffer as one integer
            # (zero-padded to whole 16-bit words) modulo 0xFFFF, as csum16() computes
            lines.append("    x = v << (nb * 8 - n + (8 if nb & 1 else 0))")
            lines.append("    s = x % 0xFFFF")
            lines.append("    return ~(0xFFFF if s == 0 and x else s) & 0xFFFF")
        else:
            lines.append("    buf = (v << (nb * 8 - n)).to_bytes(nb, 'big')")
            if payload:
                lines.append("    buf += bytes(P)")
            lines.append(f"    return {algo}(buf)")
        self._src.append("\n".join(lines))
        self._ns[key] = fname
        return fname
