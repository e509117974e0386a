"""Import ns-3 (optional) and compile gradnet's C++ model into it once per process."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import Any

INSTALL_HINT = "ns-3 is not installed: pip install -e '.[sim]' (the PyPI 'ns3' wheel)"
MODEL_SRC = Path(__file__).with_name("model.cc")

_loaded: tuple[Any, Any] | None = None


class Ns3Missing(RuntimeError):
    """ns-3's Python bindings cannot be imported (the optional 'sim' extra)."""


def available() -> bool:
    """Whether ns-3's Python bindings are installed (does not import them: ~6-12 s)."""
    try:
        return importlib.util.find_spec("ns") is not None
    except (ImportError, ValueError):
        return False


def load() -> tuple[Any, Any]:
    """``(ns, gradsim)``: ns-3's namespace and the compiled model (sim/model.cc).

    Raises :class:`Ns3Missing` when ns-3 cannot be imported."""
    global _loaded
    if _loaded is not None:
        return _loaded
    try:
        ns_mod = importlib.import_module("ns")
        cppyy = importlib.import_module("cppyy")
    except ImportError as e:
        raise Ns3Missing(f"{INSTALL_HINT} ({e})") from None
    ns = ns_mod.ns
    cppyy.cppdef(MODEL_SRC.read_text())
    _loaded = (ns, cppyy.gbl.gradsim)
    return _loaded
