"""Build generated C into a shared object with the system C compiler, cached by hash."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from targets.embedded.native.cexpr import Unsupported

CFLAGS = ["-O2", "-shared", "-fPIC", "-std=gnu11", "-w", "-pthread"]


def compiler() -> str | None:
    """The C compiler to use: $CC, else cc, gcc or clang on PATH (None: none)."""
    cc = os.environ.get("CC")
    if cc and shutil.which(cc):
        return shutil.which(cc)
    for name in ("cc", "gcc", "clang"):
        path = shutil.which(name)
        if path:
            return path
    return None


def cache_dir() -> Path:
    """$GRADNET_NATIVE_CACHE, else ~/.cache/gradnet/native (a temp dir if unwritable)."""
    env = os.environ.get("GRADNET_NATIVE_CACHE")
    base = Path(env) if env else Path.home() / ".cache" / "gradnet" / "native"
    try:
        base.mkdir(parents=True, exist_ok=True)
        return base
    except OSError:
        alt = Path(tempfile.gettempdir()) / f"gradnet-native-{os.getuid()}"
        alt.mkdir(parents=True, exist_ok=True)
        return alt


def _flags(extra_flags: tuple[str, ...]) -> list[str]:
    # $GRADNET_NATIVE_CFLAGS: more flags, e.g. sanitizers (tests/test_native_sanitizers.py)
    return [*CFLAGS, *os.environ.get("GRADNET_NATIVE_CFLAGS", "").split(), *extra_flags]


def _target(source: str, flags: list[str]) -> Path:
    digest = hashlib.sha256("\0".join([source, *flags]).encode()).hexdigest()[:32]
    return cache_dir() / f"p4_{digest}.so"


def cached(source: str, extra_flags: tuple[str, ...] = ()) -> Path | None:
    """The shared object for ``source`` if it is built already (None: build() would compile)."""
    out = _target(source, _flags(extra_flags))
    return out if out.exists() else None


def build(source: str, extra_flags: tuple[str, ...] = ()) -> Path:
    """The shared object for ``source`` (built once per source and flags)."""
    cc = compiler()
    if cc is None:
        raise Unsupported("no C compiler (cc, gcc or clang) on PATH")
    flags = _flags(extra_flags)
    out = _target(source, flags)
    if out.exists():
        return out
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        src = Path(tmp) / "prog.c"
        src.write_text(source)
        so = Path(tmp) / "prog.so"
        r = subprocess.run([cc, *flags, "-o", str(so), str(src)], capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            # a bug of the generator, not of the user's program: keep the C to look at
            keep = out.with_suffix(".failed.c")
            keep.write_text(source)
            raise RuntimeError(f"C compiler failed (source kept in {keep}): {r.stderr[-2000:]}")
        os.replace(so, out)  # atomic: another process may build the same program
    return out
