"""What the network tests need, in one place: root, Mininet's mnexec, compiled programs.

    from tests.netenv import TARGET, net_skip_reason

    reason = net_skip_reason("ina")          # None when the test can run
    needs_net = pytest.mark.skipif(reason is not None, reason=reason or "")
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: the switch target of the network tests (``TARGET=bmv2 make test`` runs them on BMv2)
TARGET = os.environ.get("TARGET") or "embedded"


def net_skip_reason(*programs: str) -> str | None:
    """Why an emulated-network test cannot run here (None if it can): not root, no
    ``mnexec``, or one of ``programs`` (``p4src/build/<name>.json``) not compiled."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    if shutil.which("mnexec") is None:
        return "needs mnexec (Debian package mininet)"
    for name in programs:
        if not (ROOT / "p4src" / "build" / f"{name}.json").exists():
            return f"p4src/build/{name}.json missing (make p4)"
    return None
