"""Conformance model of table_features.p4: entries, the lookup model, cases and the
P4Runtime extras (meters, counters, defaults, const entries, write errors).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from finsy import (
    P4DirectCounterEntry,
    P4DirectMeterEntry,
    P4MeterConfig,
    P4TableAction,
    P4TableEntry,
    P4TableMatch,
)
from scapy.layers.inet import UDP
from scapy.layers.l2 import Ether

from targets.p4rt_client import P4RuntimeError
from tests.conformance_rig import DST, SRC, Case, Rig, _field, _ip
from tests.p4.packets import (
    Extra,
    TableProbe,
)

# =========================================================================================
# table_features.p4
# =========================================================================================
T_EXACT = {5: 0x0505, 7: 0x0707}
T_EXACT_DEFAULT = 0xEEEE
T_LPM = [(0x0A000000, 8, 0x0008), (0x0A010000, 16, 0x0016), (0x0A020000, 16, 0x0216)]  # 10.2/16: metered
T_TERNARY = [  # (value, mask, extra.isValid(), priority, action, parameter)
    (0x1200, 0xFF00, 0, 10, "set_ternary", 0x0001),
    (0x1234, 0xFFFF, 0, 20, "ternary_then_range", None),
    (0x0000, 0x0000, 1, 5, "set_ternary", 0x00EE),
]
T_RANGE = [(100, 199, 10, 1), (150, 250, 20, 2)]  # (low, high, priority, value)
T_CONST = [(0x01, 0xFF, 1), (0x10, 0xF0, 2)]      # const entries, in program order
METER_CONFIG = P4MeterConfig(cir=1, cburst=1, pir=1, pburst=2)


def _ip4(v: int) -> str:
    return ".".join(str(v >> s & 0xFF) for s in (24, 16, 8, 0))


def table_setup(rig: Rig) -> None:
    """The entries of table_features.p4's header comment (plus a metered 10.2/16)."""
    ups: list[Any] = []
    for key, value in T_EXACT.items():
        ups.append(+P4TableEntry("t_exact", match=P4TableMatch(exact_key=key),
                                 action=P4TableAction("set_exact", value=value)))
    for prefix, plen, value in T_LPM:
        ups.append(+P4TableEntry("t_lpm", match=P4TableMatch(lpm_key=f"{_ip4(prefix)}/{plen}"),
                                 action=P4TableAction("set_lpm", value=value)))
    for value, mask, valid, prio, action, param in T_TERNARY:
        act = P4TableAction(action, value=param) if param is not None else P4TableAction(action)
        ups.append(+P4TableEntry("t_ternary", match=P4TableMatch({"ternary_key": f"{value:#x}/&{mask:#x}",
                                                                  "$valid$": valid}),
                                 action=act, priority=prio))
    for lo, hi, prio, value in T_RANGE:
        ups.append(+P4TableEntry("t_range", match=P4TableMatch(range_key=f"{lo}...{hi}"),
                                 action=P4TableAction("set_range", value=value), priority=prio))
    rig.write(*ups)
    rig.write(~P4DirectMeterEntry(table_entry=P4TableEntry("t_lpm", match=P4TableMatch(lpm_key="10.2.0.0/16")),
                                  config=METER_CONFIG))


def table_model(exact_key: int, lpm_key: int, ternary_key: int, range_key: int, const_key: int,
                extra: int | None, lpm_color: int = 0, exact_default: int = T_EXACT_DEFAULT) -> dict[str, int]:
    """The result fields table_features.p4 writes, computed from the installed entries."""
    r = {"exact_result": 0, "lpm_result": 0, "ternary_result": 0, "range_result": 0,
         "const_result": 0, "path": 0, "lpm_color": lpm_color}
    if exact_key in T_EXACT:
        r["exact_result"] = T_EXACT[exact_key]
        r["path"] |= 0x01
        best = None
        for prefix, plen, value in T_LPM:
            if lpm_key >> (32 - plen) == prefix >> (32 - plen) and (best is None or plen > best[0]):
                best = (plen, value)
        if best is not None:
            r["lpm_result"] = best[1]
            r["lpm_color"] = 0  # the direct meter (green unless it is configured) writes it on a hit
    else:
        r["exact_result"] = exact_default
        r["path"] |= 0x02
    valid = int(extra is not None)
    hits = [t for t in T_TERNARY if ternary_key & t[1] == t[0] and t[2] == valid]
    if not hits:
        r["path"] |= 0x10
    else:
        _, _, _, _, action, param = max(hits, key=lambda t: t[3])
        if action == "set_ternary":
            r["ternary_result"] = param  # type: ignore[assignment]
            r["path"] |= 0x04
        else:
            r["ternary_result"] = 0x7777
            rhits = [t for t in T_RANGE if t[0] <= range_key <= t[1]]
            if rhits:
                r["range_result"] = max(rhits, key=lambda t: t[2])[3]
            r["path"] |= 0x08
    for value, mask, result in T_CONST:
        if const_key & mask == value:
            r["const_result"] = result
            break
    else:
        r["const_result"] = 0xFFFF
        r["path"] |= 0x20
    if exact_key != 0xFFFFFFFF:
        r["path"] |= 0x80
    return r


def _tframe(exact_key: int = 0, lpm_key: int = 0, ternary_key: int = 0, range_key: int = 0, const_key: int = 0,
            extra: int | None = None, lpm_color: int = 0, results: dict[str, int] | None = None) -> bytes:
    fields = {"lpm_color": lpm_color, **(results or {})}
    p = Ether(dst=DST, src=SRC) / TableProbe(exact_key=exact_key, lpm_key=lpm_key, ternary_key=ternary_key,
                                           range_key=range_key, const_key=const_key,
                                           has_extra=int(extra is not None), **fields)
    if extra is not None:
        p = p / Extra(value=extra)
    return bytes(p)


def _tcase(name: str, port: int = 1, **keys: Any) -> Case:
    keys.setdefault("lpm_color", 0x55)  # shows whether the direct meter wrote it
    args = {k: keys.get(k, 0) for k in ("exact_key", "lpm_key", "ternary_key", "range_key", "const_key")}
    results = table_model(**args, extra=keys.get("extra"), lpm_color=keys["lpm_color"])
    frame = _tframe(**keys)
    out = _tframe(**{k: v for k, v in keys.items() if k != "lpm_color"}, results=results)
    return Case(name, port, frame, [(port, out)])


def _table_cases() -> list[Case]:
    net = 0x0A000000
    return [
        _tcase("exact_hit_lpm_longest", exact_key=5, lpm_key=net | 0x010203),
        _tcase("exact_hit_lpm_short", exact_key=5, lpm_key=net | 0x090909),
        _tcase("exact_hit_lpm_miss", exact_key=5, lpm_key=0x0B000001),
        _tcase("exact_miss_default_params", exact_key=6, lpm_key=net | 0x010203),
        _tcase("ternary_priority_then_range_low", exact_key=5, ternary_key=0x1234, range_key=120),
        _tcase("ternary_range_overlap_priority", exact_key=5, ternary_key=0x1234, range_key=160),
        _tcase("ternary_range_bounds_100", ternary_key=0x1234, range_key=100),
        _tcase("ternary_range_bounds_199", ternary_key=0x1234, range_key=199),
        _tcase("ternary_range_bounds_250", ternary_key=0x1234, range_key=250),
        _tcase("ternary_range_miss", ternary_key=0x1234, range_key=251),
        _tcase("ternary_masked_match", ternary_key=0x12AB),
        _tcase("ternary_miss_default_arm", ternary_key=0x1334),
        _tcase("ternary_valid_key", ternary_key=0x1234, extra=0xBEEF),
        _tcase("ternary_valid_key_wildcard", ternary_key=0x5555, extra=0x0001, range_key=120),
        _tcase("const_exact_entry", const_key=0x01),
        _tcase("const_masked_entry", const_key=0x11),
        _tcase("const_masked_entry_2", const_key=0x1F),
        _tcase("const_default_miss", const_key=0x05),
        _tcase("const_zero_miss", const_key=0x00),
        _tcase("exit_before_reflect", exact_key=0xFFFFFFFF, ternary_key=0x1200, const_key=0x01),
        _tcase("other_port", port=3, exact_key=5, lpm_key=net | 0x010101, ternary_key=0x1234, range_key=180,
               const_key=0x10, extra=0x0102),
        Case("not_a_probe_dropped", 1, bytes(Ether(dst=DST, src=SRC) / _ip() / UDP()), []),
        Case("truncated_probe_dropped", 2, _tframe(exact_key=5)[:24], []),
    ]


def table_meter_colors(rig: Rig) -> list[tuple[int, int]]:
    """Four back-to-back hits on the metered entry (cir 1/s burst 1, pir 1/s burst 2):
    (lpm_result, colour) per packet; BMv2 gives green, yellow, red, red."""
    frame = _tframe(exact_key=5, lpm_key=0x0A020304, lpm_color=0x55)
    outs = rig.burst(1, [frame] * 4, 4)
    return [(_field(f, TableProbe, 14, "lpm_result"), _field(f, TableProbe, 14, "lpm_color")) for _, f in outs]


def table_direct_meter_config(rig: Rig) -> list[tuple[int, int, int, int] | None]:
    """The direct meter configs read back over P4Runtime: 10.2/16 (configured), 10.1/16 (not)."""
    out: list[tuple[int, int, int, int] | None] = []
    for prefix in ("10.2.0.0/16", "10.1.0.0/16"):
        (entry,) = rig.client.read(P4DirectMeterEntry(table_entry=P4TableEntry("t_lpm",
                                                                              match=P4TableMatch(lpm_key=prefix))))
        c = entry.config
        out.append(None if c is None else (c.cir, c.cburst, c.pir, c.pburst))
    return out


def table_direct_counter(rig: Rig) -> tuple[int, int, int]:
    """Three hits on t_exact key 7 (frames of growing size), then the direct counter."""
    sizes = 0
    for extra_len in (0, 10, 33):
        frame = _tframe(exact_key=7) + b"\x00" * extra_len
        sizes += len(frame)
        assert len(rig.exchange(1, frame, 1)) == 1
    (entry,) = rig.client.read(P4DirectCounterEntry(table_entry=P4TableEntry("t_exact",
                                                                             match=P4TableMatch(exact_key=7))))
    return entry.data.packet_count, entry.data.byte_count, sizes


def table_default_action(rig: Rig) -> list[int]:
    """exact_result on a miss with the default changed over P4Runtime, then restored."""
    seen = []
    for value in (0xD00D, T_EXACT_DEFAULT):
        rig.write(~P4TableEntry("t_exact", action=P4TableAction("exact_miss", value=value), is_default_action=True))
        (_, f), = rig.exchange(1, _tframe(exact_key=99), 1)
        seen.append(_field(f, TableProbe, 14, "exact_result"))
    return seen


def table_const_writes(rig: Rig) -> list[bool]:
    """Writes the program forbids: the const default and an entry of a const table."""
    rejected = []
    for update in (~P4TableEntry("t_const", action=P4TableAction("set_const", value=5), is_default_action=True),
                   +P4TableEntry("t_const", match=P4TableMatch(const_key="0x05/&0xff"),
                                 action=P4TableAction("set_const", value=5), priority=10)):
        try:
            rig.write(update)
            rejected.append(False)
        except P4RuntimeError:
            rejected.append(True)
    # the const default still applies
    (_, f), = rig.exchange(1, _tframe(const_key=0x05), 1)
    rejected.append(_field(f, TableProbe, 14, "const_result") == 0xFFFF)
    return rejected


def table_const_entries(rig: Rig) -> list[tuple[int, int, int, int]]:
    """t_const's const entries read back: (priority, value, mask, set_const value).
    BMv2's PI inverts BMv2 priorities 1, 2 (program order) around INT_MAX."""
    out = []
    for e in rig.client.read(P4TableEntry("t_const")):
        fm = e.match["const_key"]
        value, mask = (fm, 0xFF) if isinstance(fm, int) else fm
        out.append((e.priority, int(value), int(mask), int(e.action.args["value"])))
    return sorted(out)


def table_const_entries_expected() -> list[tuple[int, int, int, int]]:
    """What ``table_const_entries`` must read."""
    return sorted(((1 << 31) - 1 - (i + 1), v, m, r) for i, (v, m, r) in enumerate(T_CONST))


def _write_error(rig: Rig, update: Any) -> str:
    """The canonical code of one update's error ("OK" if the write succeeded)."""
    try:
        rig.write(update)
    except P4RuntimeError as e:
        return e.details[0].split(":", 1)[0] if e.details else e.code
    return "OK"


def _read_error(rig: Rig, entity: Any) -> str:
    """The status code of a Read ("OK" if it succeeded)."""
    try:
        rig.client.read(entity)
    except P4RuntimeError as e:
        return e.code
    return "OK"


def _te(key: int, action: str = "set_exact", **params: int) -> P4TableEntry:
    return P4TableEntry("t_exact", match=P4TableMatch(exact_key=key), action=P4TableAction(action, **params))


#: Writes a controller gets wrong: (what, update, BMv2 1.15's code, the embedded
#: target's code). BMv2's PI answers UNKNOWN where the target library fails; the
#: embedded target names the cause there (docs/embedded.md).
TABLE_WRITE_ERRORS: list[tuple[str, Callable[[], Any], str, str]] = [
    ("duplicate key", lambda: +_te(5, value=1), "ALREADY_EXISTS", "ALREADY_EXISTS"),
    ("modify a missing entry", lambda: ~_te(99, value=1), "NOT_FOUND", "NOT_FOUND"),
    ("delete a missing entry", lambda: -_te(99, value=1), "NOT_FOUND", "NOT_FOUND"),
    ("entry of a const table", lambda: +P4TableEntry("t_const", match=P4TableMatch(const_key="0x05/&0xff"),
                                                     action=P4TableAction("set_const", value=5), priority=10),
     "UNKNOWN", "PERMISSION_DENIED"),
    ("const default action", lambda: ~P4TableEntry("t_const", action=P4TableAction("set_const", value=5),
                                                   is_default_action=True), "PERMISSION_DENIED", "PERMISSION_DENIED"),
    ("ternary entry without priority", lambda: +P4TableEntry("t_ternary", match=P4TableMatch(ternary_key="0x1/&0xf"),
                                                             action=P4TableAction("set_ternary", value=1)),
     "INVALID_ARGUMENT", "INVALID_ARGUMENT"),
]


def _as_bmv2(rig: Rig, codes: list[str], table: list[tuple[str, Any, str, str]]) -> list[str]:
    """Codes in BMv2's terms: the embedded target's deliberately precise codes mapped to
    what BMv2 answers in their place (for the differential test)."""
    if rig.target != "embedded":
        return codes
    return [bmv2 if code == ours else code for code, (_, _, bmv2, ours) in zip(codes, table, strict=True)]


def table_write_codes(rig: Rig) -> list[str]:
    """The per-update code of each of ``TABLE_WRITE_ERRORS``."""
    return [_write_error(rig, make()) for _, make, _, _ in TABLE_WRITE_ERRORS]


def table_write_errors(rig: Rig) -> list[str]:
    """``table_write_codes`` in BMv2's terms."""
    return _as_bmv2(rig, table_write_codes(rig), TABLE_WRITE_ERRORS)
