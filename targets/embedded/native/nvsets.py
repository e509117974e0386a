"""Parser value sets of the native backend: the C of a ``select`` on one (for cgen.py)
and the Python side of vsets.c.

Each select that uses a value set gets its own sorted key array in native memory, the
set's members laid out as that select builds its key (``state.ValueSetUse.pad``, the
Python backend's layout). ``ValueSet.on_change`` (a P4Runtime ValueSetEntry write, a
reset) copies the new keys of every select of the set into native memory.
"""

from __future__ import annotations

import ctypes
from typing import Any

from targets.embedded.codegen.layout import json_int
from targets.embedded.native.cexpr import Unsupported
from targets.embedded.state import ValueSetUse


def vset_cond(gen: Any, tr: dict[str, Any], widths: list[int]) -> str:
    """The C condition of a ``parse_vset`` transition over key ``k`` (``widths``: the
    key's fields' own widths); records the use in ``gen.vset_uses``."""
    vs = gen.prog.value_sets.get(tr.get("value")) if isinstance(tr.get("value"), str) else None
    if vs is None:
        raise Unsupported("an unknown parser value set")
    mask = json_int(tr["mask"]) if tr.get("mask") is not None else None
    if mask is not None and not 0 <= mask < 2**64:
        raise Unsupported("a value set mask over 64 bits")
    gen.vset_uses.append((vs.name, list(widths), mask))
    key = "k" if mask is None else f"(k & UINT64_C({mask:#x}))"
    return f"vs_has(c, {len(gen.vset_uses) - 1}, {key})"


def bind_vsets(lib: ctypes.CDLL) -> None:
    """Declare vsets.c's entry point."""
    lib.np_vset_load.restype = ctypes.c_int
    lib.np_vset_load.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint64)]


class NativeValueSets:
    """Follows every parser value set of one backend's program in native memory."""

    def __init__(self, be: Any) -> None:
        self.be = be
        self.uses: dict[str, list[tuple[int, ValueSetUse]]] = {}
        for u, (name, widths, mask) in enumerate(be.gen.vset_uses):
            self.uses.setdefault(name, []).append((u, ValueSetUse(widths, mask)))
        for vs in be.prog.value_sets.values():
            vs.on_change = self.sync
            self.sync(vs)

    def sync(self, vs: Any) -> None:
        """Copy the keys of every select of ``vs`` into native memory."""
        compressed = []
        for m in vs.members if vs.widths else []:
            v = 0
            for x, w in zip(m, vs.widths, strict=True):
                v = (v << w) | x
            compressed.append(v)
        for u, use in self.uses.get(vs.name, []):
            keys = sorted({use.pad(v) for v in compressed})
            if any(k >> 64 for k in keys):
                keys = [k for k in keys if not k >> 64]  # never equal to a key of at most 64 bits
            if self.be.lib.np_vset_load(self.be.ctx, u, len(keys), (ctypes.c_uint64 * max(1, len(keys)))(*keys)):
                raise MemoryError(f"value set {vs.name}: native copy failed")
