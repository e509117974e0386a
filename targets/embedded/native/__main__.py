"""Build (or find cached) the native backend's shared objects for BMv2 JSON programs, so
that no switch compiles one when a P4Runtime client is waiting; print what each program
runs on. ``python -m targets.embedded.native p4src/build/*.json tests/p4/build/*.json``"""

from __future__ import annotations

import argparse
import sys
import time

from targets.embedded.compiler import CompileError, load_file
from targets.embedded.native.cexpr import Unsupported
from wire.argtypes import described


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m targets.embedded.native", description=described(__doc__))
    p.add_argument("json", nargs="+", help="BMv2 JSON programs (p4c-bm2-ss output)")
    p.add_argument("--quiet", action="store_true", help="print only errors and a one-line summary")
    args = p.parse_args(argv)
    from targets.embedded.native.binding import NativeBackend
    from targets.embedded.native.nloop import build_loop

    build_loop()  # the data-plane loop in C, shared by every program
    say = (lambda _msg: None) if args.quiet else print
    counts = {"native": 0, "python": 0}

    rc = 0
    for path in args.json:
        t0 = time.monotonic()
        try:
            nb = NativeBackend(load_file(path))
            say(f"{path}: native ({nb.path.name}, {time.monotonic() - t0:.1f} s)")
            nb.close()
            counts["native"] += 1
        except Unsupported as e:
            say(f"{path}: python (native lacks: {e})")
            counts["python"] += 1
        except CompileError as e:
            print(f"{path}: error: {e}", file=sys.stderr)
            rc = 2
    if args.quiet:
        print(f"native backend: {counts['native']} programs built or cached, {counts['python']} run on Python")
    return rc


if __name__ == "__main__":
    sys.exit(main())
