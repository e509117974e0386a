"""Indirect meters of the native backend as seen from Python (ctypes side of meters.c).

``adopt_meters(backend)`` moves every ``MeterArray`` of the program into native memory:
its ``meters`` list becomes a list of :class:`NativeMeter`, so ``set_config`` and
``clear_config`` (the P4Runtime MeterEntry write) configure the native cell under the instance's lock, atomically with respect to
packets, and ``execute`` (the Python packet path) runs the native cell. The arrays'
``configs`` stay the control plane's record, as Python tables do.
"""

from __future__ import annotations

import ctypes
from typing import Any

from targets.embedded.state import StateError


def bind_meters(lib: ctypes.CDLL) -> None:
    """Declare meters.c's entry points."""
    vp, dbl, u64, i = ctypes.c_void_p, ctypes.c_double, ctypes.c_uint64, ctypes.c_int
    lib.np_meter_set.restype, lib.np_meter_set.argtypes = i, [vp, i, u64, i, dbl, dbl, dbl, dbl]
    lib.np_meter_clock.restype, lib.np_meter_clock.argtypes = i, [vp, dbl]
    lib.np_meter_exec.restype, lib.np_meter_exec.argtypes = u64, [vp, i, u64, u64]


class NativeMeter:
    """One native meter cell in the place of a ``support.Meter``."""

    __slots__ = ("_be", "_k", "_i")

    def __init__(self, be: Any, k: int, i: int) -> None:
        self._be, self._k, self._i = be, k, i

    def configure(self, cir: int, cburst: int, pir: int, pburst: int) -> None:
        """Full buckets from now (the meter clock); the same check as ``Meter``."""
        if pir < cir:
            raise StateError("INVALID_ARGUMENT", "meter: peak rate below committed rate")
        # doubles as the Python meter's float(); a burst past 2**53 (an always-green
        # meter either way) rounds here and stays exact there
        self._be.lib.np_meter_set(self._be.ctx, self._k, self._i, 1, float(cir), float(cburst),
                                  float(pir), float(pburst))

    def clear(self) -> None:
        self._be.lib.np_meter_set(self._be.ctx, self._k, self._i, 0, 0.0, 0.0, 0.0, 0.0)

    def execute(self, size: int, now: float) -> int:
        """The colour of a packet of ``size`` (1 for a packets meter) at the native meter
        clock (``now``, the Python clock, is not used: one clock per meter)."""
        del now
        return int(self._be.lib.np_meter_exec(self._be.ctx, self._k, self._i, size))


def adopt_meters(be: Any) -> None:
    """Point every indirect meter array of ``be.prog`` at native cells, keeping the
    configurations already written."""
    for name, arr in be.prog.meters.items():
        k = be.gen.mtr_index[name]
        arr.meters = [NativeMeter(be, k, i) for i in range(arr.size)]
        for i, cfg in enumerate(arr.configs):
            if cfg is not None:
                arr.meters[i].configure(*cfg)


def set_meter_clock(be: Any, t: float) -> None:
    """Meter time (seconds, as ``time.monotonic``) from now on; ``t`` < 0: the real clock
    again. For tests that inject the clock on both backends."""
    be.lib.np_meter_clock(be.ctx, float(t))
