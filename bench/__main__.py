"""``make bench``: every benchmark, one after the other (tables and ratios).

    python -m bench [placement] [target] [memlinks] [ina] [ina-scale] [ina-bfp] [ina-train] [ina-agents]
                    [ndn] [ndn-baselines]
                    [ndn-window]
                    [differentiated] [differentiated-ablation] [differentiated-replay] [bcube] [token]
                    [token-grid] [train] [ddp]
                    [fuzz] [fuzz-config] [fuzz-p4rt] [loss] [simulate] [regimes] [method-params]

With no names, runs all of them. One name may be followed by its own options
(``python -m bench token-grid --seeds 5 --out-dir DIR``; ``python -m bench NAME --help``
lists them). Each is also runnable alone: ``python -m bench.placement_bench``,
``python -m bench.target_bench``, ``python -m bench.ina_bench``.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

# NAME -> module: entries of the one registry (controller/registry.py)
from controller.registry import BENCHES


def main(argv: list[str] | None = None) -> int:
    """Run the named benchmarks (default: all)."""
    args = list(sys.argv[1:] if argv is None else argv)
    first_opt = next((i for i, a in enumerate(args) if a.startswith("-")), len(args))
    names, options = args[:first_opt] or list(BENCHES), args[first_opt:]
    unknown = [n for n in names if n not in BENCHES]
    if unknown or (options and len(names) != 1):
        print(__doc__)
        if unknown:
            print(f"unknown benchmark: {', '.join(unknown)}", file=sys.stderr)
            return 2
        if options in (["-h"], ["--help"]):
            return 0
        print("options go to one benchmark: python -m bench NAME [OPTIONS]", file=sys.stderr)
        return 2
    rc = 0
    for name in names:
        print(f"\n=== {name} ===", flush=True)
        if importlib.util.find_spec(BENCHES[name]) is None:
            print(f"{name}: this technique has not landed yet ({BENCHES[name]})")
            continue
        mod = importlib.import_module(BENCHES[name])
        rc |= mod.main(options) or 0
    return rc


if __name__ == "__main__":
    sys.exit(main())
