"""``python -m bench fuzz-config``: the long run of the pipeline-config loader fuzz.

Mutated real BMv2 JSONs (``p4src/build/*.json``) go to an embedded switch as
SetForwardingPipelineConfig(VERIFY) with the program's P4Info; every answer must be OK or
INVALID_ARGUMENT, no injected payload may run, and the switch must still forward with
its first pipeline afterwards (``targets.embedded.config_fuzz``, whose command line this
is). The suite runs the same fuzz for 10 s (tests/test_config_trust.py); this runs it
for ``--seconds``.

    python -m bench.config_fuzz_bench [--seconds 300] [--seed 1] [--programs a,b]
"""

from __future__ import annotations

import sys

from targets.embedded.config_fuzz import main

if __name__ == "__main__":
    sys.exit(main())
