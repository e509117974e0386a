"""What generated code calls at run time: meters, parser errors, casts, header stack
operations, lookahead and log_msg (bound into its namespace by ``Program``)."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from targets.embedded.state import StateError

if TYPE_CHECKING:
    from targets.embedded import state

log = logging.getLogger("gradnet.switch")


class ParserError(Exception):
    """Raised inside generated parser code; ``code`` is the P4 error value."""

    def __init__(self, code: int) -> None:
        self.code = code


class Meter:
    """One two-rate three-colour meter with BMv2's exact algorithm (meters.cpp).

    Rates are checked peak first, then committed (``Meter::set_rates`` stores {CIR, PIR}
    and reverses the list); the first one short of tokens gives the colour (2 red,
    1 yellow) and later rates are not charged. Unconfigured meters return green (0).
    """

    __slots__ = ("rates", "t0")

    def __init__(self) -> None:
        self.rates: list[list[float]] | None = None
        self.t0 = 0.0

    def configure(self, cir: float, cburst: int, pir: float, pburst: int) -> None:
        if pir < cir:
            raise StateError("INVALID_ARGUMENT", "meter: peak rate below committed rate")
        # [rate per second, burst, tokens, tokens credited since t0, colour]
        self.rates = [[float(pir), pburst, float(pburst), 0.0, 2], [float(cir), cburst, float(cburst), 0.0, 1]]
        self.t0 = monotonic()

    def clear(self) -> None:
        self.rates = None

    def execute(self, size: int, now: float) -> int:
        if self.rates is None:
            return 0
        elapsed = now - self.t0
        color = 0
        for r in self.rates:
            credited = elapsed * r[0]
            r[2] = min(r[2] + credited - r[3], r[1])
            r[3] = credited
            if r[2] < size:
                color = r[4]
                break
            r[2] -= size
        return color


class MeterArray:
    """An indirect meter array (packets or bytes)."""

    GREEN, YELLOW, RED = 0, 1, 2

    def __init__(self, name: str, size: int, unit: str) -> None:
        self.name = name
        self.size = size
        self.unit = unit  # "packets" or "bytes"
        self.meters = [Meter() for _ in range(size)]
        self.configs: list[tuple[int, int, int, int] | None] = [None] * size

    def _check(self, index: int) -> None:
        if not 0 <= index < self.size:
            raise StateError("OUT_OF_RANGE", f"meter {self.name}: index {index} out of range")

    def clear_config(self, index: int) -> None:
        self._check(index)
        self.configs[index] = None
        self.meters[index].clear()

    def set_config(self, index: int, cir: int, cburst: int, pir: int, pburst: int) -> None:
        self._check(index)
        self.meters[index].configure(cir, cburst, pir, pburst)
        self.configs[index] = (cir, cburst, pir, pburst)

    def execute(self, index: int, length: int, now: float) -> int:
        if not 0 <= index < self.size:
            return self.GREEN
        return self.meters[index].execute(1 if self.unit == "packets" else length, now)


def direct_meter_execute(entry: state.TableEntry, unit: str, length: int) -> int:
    """Execute the direct meter of a table entry (configured via ``entry.meter_config``)."""
    m = entry.meter
    if m is None:
        if entry.meter_config is None:
            return 0
        m = entry.meter = Meter()
        m.configure(*entry.meter_config)
    return m.execute(1 if unit == "packets" else length, monotonic())


def signed(v: int, w: int) -> int:
    """``v`` as a ``w``-bit two's complement value."""
    v &= (1 << w) - 1
    return v - (1 << w) if v >> (w - 1) else v


def noop(F: list[int], D: tuple[int, ...]) -> None:
    """BMv2's empty action (the default of a table with an action profile)."""


def sat_cast(v: int, w: int) -> int:
    """``v`` saturated to a signed ``w``-bit range."""
    lo, hi = -(1 << (w - 1)), (1 << (w - 1)) - 1
    return lo if v < lo else hi if v > hi else v


def usat_cast(v: int, w: int) -> int:
    """``v`` saturated to an unsigned ``w``-bit range."""
    hi = (1 << w) - 1
    return 0 if v < 0 else hi if v > hi else v


def stack_push(F: list[int], base: int, size: int, stride: int, nslot: int, count: int) -> None:
    """push_front(count) on a header stack laid out from slot ``base``."""
    count = min(count, size)
    end = base + size * stride
    F[base + count * stride:end] = F[base:end - count * stride]
    for i in range(count):
        F[base + i * stride] = 0
    F[nslot] = min(F[nslot] + count, size)


def stack_pop(F: list[int], base: int, size: int, stride: int, nslot: int, count: int) -> None:
    """pop_front(count) on a header stack laid out from slot ``base``."""
    count = min(count, size)
    end = base + size * stride
    F[base:end - count * stride] = F[base + count * stride:end]
    for i in range(size - count, size):
        F[base + i * stride] = 0
    F[nslot] = max(F[nslot] - count, 0)


def _swap(F: list[int], a: int, b: int, stride: int) -> None:
    F[a:a + stride], F[b:b + stride] = F[b:b + stride], F[a:a + stride]


def union_stack_push(F: list[int], base: int, size: int, stride: int, nslot: int, count: int) -> None:
    """push_front on a header-union stack exactly as BMv2 1.15 (StackP4_16): the same
    element swaps as for a header stack, but marking a union invalid is a no-op there,
    so the front elements keep the values swapped into them."""
    if count <= 0:
        return
    F[nslot] = min(size, F[nslot] + count)
    for i in range(size - 1, count - 1, -1):
        _swap(F, base + i * stride, base + (i - count) * stride, stride)


def union_stack_pop(F: list[int], base: int, size: int, stride: int, nslot: int, count: int) -> None:
    """pop_front on a header-union stack as BMv2 1.15 (see union_stack_push)."""
    if count <= 0:
        return
    F[nslot] -= min(F[nslot], count)
    for i in range(max(size - count, 0)):
        _swap(F, base + i * stride, base + (i + count) * stride, stride)


def lookahead(pkt: bytes, o: int, off: int, w: int) -> int:
    """``w`` bits at bit offset ``off`` past byte ``o`` of the packet (zero-padded)."""
    start = o * 8 + off
    nb = (start % 8 + w + 7) // 8
    chunk = int.from_bytes(pkt[start // 8:start // 8 + nb].ljust(nb, b"\x00"), "big")
    return (chunk >> (nb * 8 - start % 8 - w)) & ((1 << w) - 1)


def log_msg(fmt: str, args: list[int]) -> None:
    """log_msg(): the format with each ``{}`` replaced by the next argument."""
    for a in args:
        fmt = fmt.replace("{}", str(a), 1)
    log.info("log_msg: %s", fmt)


monotonic = time.monotonic
