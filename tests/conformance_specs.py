"""The conformance programs' specs (setup, cases, extras), the rig opener and the
differential comparison with BMv2.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from targets.launch import bmv2_available
from tests.conformance_models_io import (
    REG_CASES,
    _l2_cases,
    cpu_flow,
    cpu_setup,
    l2_default_drop,
    l2_setup,
    registers_setup,
)
from tests.conformance_models_parser import (
    _action_cases,
    _hash_cases,
    _parser_cases,
    action_setup,
    arith_counter,
    arith_index_errors,
    arith_mask,
    arith_meter_colors,
    arith_meter_config,
    hash_setup,
    parser_setup,
)
from tests.conformance_models_replication import (
    ECHO_VOLATILE,
    _echo_cases,
    _im_cases,
    _replication_cases,
    echo_mask,
    echo_setup,
    im_cpu_paths,
    im_setup,
    replication_pre_changes,
    replication_setup,
)
from tests.conformance_models_tables import (
    _table_cases,
    table_const_entries,
    table_const_writes,
    table_default_action,
    table_direct_counter,
    table_direct_meter_config,
    table_meter_colors,
    table_setup,
    table_write_errors,
)
from tests.conformance_rig import BUILD, ProgramSpec, Rig, _first_diff

# =========================================================================================
# specs, fixtures, tests
# =========================================================================================
SPECS: dict[str, ProgramSpec] = {
    "parser_features": ProgramSpec(parser_setup, _parser_cases()),
    "table_features": ProgramSpec(table_setup, _table_cases(), extras=[
        table_meter_colors, table_direct_meter_config, table_direct_counter, table_default_action,
        table_const_writes, table_const_entries, table_write_errors]),
    "action_features": ProgramSpec(action_setup, _action_cases(), mask=arith_mask, masked=("arith.rand",),
                                   extras=[arith_meter_colors, arith_meter_config, arith_counter,
                                           arith_index_errors]),
    "hash_checksum": ProgramSpec(hash_setup, _hash_cases()),
    "replication": ProgramSpec(replication_setup, _replication_cases(), extras=[replication_pre_changes]),
    "metadata_echo": ProgramSpec(echo_setup, _echo_cases(), mask=echo_mask,
                                 masked=tuple(f"echo.{n}" for n in ECHO_VOLATILE)),
    "cpu_io": ProgramSpec(cpu_setup, [], extras=[cpu_flow]),
    "registers": ProgramSpec(registers_setup, REG_CASES, ordered=True),
    "l2_path": ProgramSpec(l2_setup, _l2_cases(), extras=[l2_default_drop]),
    "instance_meta": ProgramSpec(im_setup, _im_cases(), extras=[im_cpu_paths]),
}


@contextlib.contextmanager
def open_rig(program: str, target: str, priority_queues: int = 1,
             specs: dict[str, ProgramSpec] | None = None) -> Iterator[Rig]:
    """A started rig for ``program`` on ``target`` with its setup (from ``specs``, by
    default this module's ``SPECS``) done; stopped on exit."""
    missing = [p.name for p in (BUILD / f"{program}.json", BUILD / f"{program}.p4info.txt") if not p.exists()]
    if missing:
        pytest.skip(f"p4c output missing: {missing} (run `make p4`)")
    rig = Rig(program, target, priority_queues).start()
    try:
        (SPECS if specs is None else specs)[program].setup(rig)
        yield rig
    finally:
        rig.close()


# -- differential: the same frames through both targets ----------------------------------
def observe(program: str, target: str, specs: dict[str, ProgramSpec] | None = None) -> list[tuple[str, Any]]:
    """Every case's output frames (masked) and every extra's result, on ``target``."""
    specs = SPECS if specs is None else specs
    spec = specs[program]
    obs: list[tuple[str, Any]] = []
    with open_rig(program, target, specs=specs) as rig:
        for case in spec.cases:
            got = rig.exchange(case.port, case.frame, len(case.expect))
            obs.append((case.name, sorted((p, spec.mask(f)) for p, f in got)))
        for extra in spec.extras:
            obs.append((extra.__name__, extra(rig)))
    return obs



def assert_same_as_bmv2(program: str, specs: dict[str, ProgramSpec] | None = None) -> None:
    """Run ``program``'s cases and extras on fresh embedded and BMv2 switches; fail with
    every difference (skip where BMv2 is not installed)."""
    if not bmv2_available():
        pytest.skip("real BMv2 not installed: simple_switch_grpc is not on PATH")
    ours, theirs = observe(program, "embedded", specs), observe(program, "bmv2", specs)
    assert [n for n, _ in ours] == [n for n, _ in theirs]
    diffs = []
    for (name, a), (_, b) in zip(ours, theirs, strict=True):
        if a != b:
            if isinstance(a, list) and isinstance(b, list) and all(isinstance(x, tuple) for x in a + b):
                detail = "; ".join(_first_diff(fa, fb) for (_, fa), (_, fb) in zip(a, b, strict=False)
                                   if isinstance(fa, bytes) and isinstance(fb, bytes) and fa != fb)
                diffs.append(f"{name}: embedded {len(a)} frame(s) {[x[0] for x in a]}, bmv2 {len(b)} "
                             f"{[x[0] for x in b]} {detail}")
            else:
                diffs.append(f"{name}: embedded {a!r} != bmv2 {b!r}")
    assert not diffs, f"{program}: embedded target differs from BMv2:\n" + "\n".join(diffs)
