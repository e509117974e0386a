"""``python -m bench fuzz-config``: the long run of the pipeline-config loader fuzz.

Mutated real BMv2 JSONs (``p4src/build/*.json``) go to an embedded switch as
SetForwardingPipelineConfig(VERIFY) with the program's P4Info; every answer must be OK or
INVALID_ARGUMENT, no injected payload may run, and the switch must still forward with
its first pipeline afterwards (``targets.embedded.config_fuzz``). The suite runs the
same fuzz for 20 s (tests/test_config_trust.py); this runs it for ``--seconds``.

    python -m bench.config_fuzz_bench [--seconds 300] [--seed 1]
"""

from __future__ import annotations

import argparse
import sys

from targets.embedded.config_fuzz import run_fuzz


def main(argv: list[str] | None = None) -> int:
    """Run the fuzz; print the counts; exit 1 on any failure."""
    ap = argparse.ArgumentParser(prog="python -m bench fuzz-config", description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=300.0, help="time budget (default 300)")
    ap.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    a = ap.parse_args(argv)
    rep = run_fuzz(a.seconds, a.seed, log=sys.stdout)
    print(rep.summary())
    for f in rep.failures[:20]:
        print("  FAIL", f)
    return 0 if rep.ok else 1


if __name__ == "__main__":
    sys.exit(main())
