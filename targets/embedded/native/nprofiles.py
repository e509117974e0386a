"""Action profiles and selectors of the native backend as seen from Python (profiles.c).

The Python ``ActionProfile`` stays the control plane's record (members, groups, weights
and BMv2's member handles, allocated in PI's order); after each change
(``ActionProfile.on_change``) the whole profile is copied into native memory in one
locked swap: every member handle with its action and data, every group handle with its
pick list (member handles, ascending, as ``ProfileGroup.select``). A table entry's
``IndirectRef`` becomes {1, member handle} or {2, group handle} in its first action data
slot, so that a modified member changes every entry using it at once.
"""

from __future__ import annotations

import ctypes
from typing import Any

from targets.embedded.action_profiles import IndirectRef
from targets.embedded.native.direct import encode_params


def bind_profiles(lib: ctypes.CDLL) -> None:
    """Declare profiles.c's entry point."""
    vp, u32, i = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int
    pu32 = ctypes.POINTER(u32)
    lib.np_prof_load.restype = i
    lib.np_prof_load.argtypes = [vp, i, u32, ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_uint64), u32,
                                 pu32, pu32, u32, pu32]


def ref_data(ref: IndirectRef) -> list[int]:
    """A table entry's member or group reference as its first action data slot."""
    if ref.member is not None:
        return [1, ref.member.handles[0], 0, 0]
    if ref.group is not None:
        return [2, ref.group.handle, 0, 0]
    return [0, 0, 0, 0]  # nothing: a no-op


class NativeProfiles:
    """Follows every action profile of one backend's program in native memory."""

    def __init__(self, be: Any) -> None:
        self.be = be
        for ap in be.prog.action_profiles.values():
            ap.on_change = self.sync
            self.sync(ap)

    def sync(self, ap: Any) -> None:
        """Copy profile ``ap`` whole into native memory (``ActionProfile.on_change``)."""
        be = self.be
        np_ = be.gen.profile_params(ap.name)
        ids = be.prog._profile_actions.get(ap.name, {})
        members = dict(ap.member_handles())
        nmem = max(members, default=-1) + 1
        acts, data = [-1] * nmem, [0] * (4 * max(np_, 0) * nmem)
        for h, m in members.items():
            info = ids.get(m.action.name)
            if info is None:
                continue
            acts[h] = info.id
            data[4 * np_ * h:4 * np_ * (h + 1)] = encode_params(m.action.params, np_)
        groups = list(ap.groups.values())
        ngrp = max((g.handle for g in groups), default=-1) + 1
        goff, glen, sel = [0] * ngrp, [0] * ngrp, []
        for g in groups:
            picks = sorted(g.handles)
            goff[g.handle], glen[g.handle] = len(sel), len(picks)
            sel += picks
        u32 = ctypes.c_uint32
        rc = be.lib.np_prof_load(be.ctx, be.gen.prof_index[ap.name], nmem, (ctypes.c_int32 * max(1, nmem))(*acts),
                                 (ctypes.c_uint64 * max(1, len(data)))(*data), ngrp, (u32 * max(1, ngrp))(*goff),
                                 (u32 * max(1, ngrp))(*glen), len(sel), (u32 * max(1, len(sel)))(*sel))
        if rc:
            raise MemoryError(f"action profile {ap.name}: native copy failed ({rc})")
