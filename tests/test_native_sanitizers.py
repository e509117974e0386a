"""The native backend built with AddressSanitizer and UBSan: fuzzed frames (truncated,
mutated, random) through forward.p4, ina.p4, replication.p4 (multicast groups and
clone sessions), instance_meta.p4, reenter_loop.p4 (resubmit, recirculate, truncate,
egress clones in C, chains to the bound), cpu_io.p4 (digests queued in C),
metadata_echo.p4, ndn.p4 and parser_features.p4 (header stacks: names byte by byte,
overflow, push/pop), union_features.p4 (header unions and union stacks),
varbit_features.p4, meters.p4 (meters.c, random rates and bursts),
table_features.p4 (direct counters and meters, direct.c), action_selector.p4 (members,
weighted and empty groups, profiles.c) and value_set.p4 (vsets.c) with random entries,
and (but for the last three, which reflect every frame) through the loop in C with
shaped queues (tm.c: rates, depths, a byte rate), show no out-of-bounds access and no
undefined behaviour (the process would
abort)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from targets.embedded.native.build import compiler

ROOT = Path(__file__).resolve().parent.parent


def _asan_runtime() -> str | None:
    cc = compiler()
    if cc is None:
        return None
    r = subprocess.run([cc, "-print-file-name=libasan.so"], capture_output=True, text=True)
    path = r.stdout.strip()
    return path if r.returncode == 0 and os.path.isabs(path) and os.path.exists(path) else None


@pytest.mark.long
@pytest.mark.parametrize("program", ["forward", "ina", "replication", "instance_meta", "reenter_loop", "cpu_io",
                                     "metadata_echo", "ndn", "parser_features", "union_features",
                                     "varbit_features", "meters", "table_features",
                                     "action_selector", "value_set"])
def test_fuzzed_frames_clean_under_asan_and_ubsan(program: str, tmp_path: Path) -> None:
    runtime = _asan_runtime()
    if runtime is None:
        pytest.skip("no C compiler with AddressSanitizer")
    env = dict(os.environ, PYTHONPATH=str(ROOT), LD_PRELOAD=runtime,
               ASAN_OPTIONS="detect_leaks=0:abort_on_error=1", UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1",
               GRADNET_NATIVE_CACHE=str(tmp_path),
               GRADNET_NATIVE_CFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -O1")
    # these send every frame back out of its port: over the in-memory link to the peer
    # switch and back until each run of the loop in C ends, minutes under sanitizers
    noloop = ["noloop"] if program in ("table_features", "action_selector", "value_set") else []
    r = subprocess.run([sys.executable, "-m", "tests.native_fuzz_run", program, "3000", *noloop], env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "runtime error" not in r.stderr and "AddressSanitizer" not in r.stderr, r.stderr[-3000:]
    assert f"{program}: " in r.stdout
