"""Run a function inside another network namespace, from a thread of this process.

Network namespaces are per thread on Linux: a short-lived thread joins the namespace
(``setns``), calls the function and ends; sockets it opened stay bound to that
namespace's interfaces. The testbed opens its capture sockets this way, and a switch
group process (``targets/embedded/group.py``) its switches' ports.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Callable
from typing import Any

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def in_netns(ns: str, fn: Callable[..., Any], *args: Any) -> Any:
    """Call ``fn(*args)`` in a thread that has joined namespace ``ns`` (a name under
    ``/var/run/netns`` or a path such as ``/proc/PID/ns/net``); return its result or
    raise its exception."""
    path = ns if ns.startswith("/") else f"/var/run/netns/{ns}"
    box: dict[str, Any] = {}

    def body() -> None:
        try:
            fd = os.open(path, os.O_RDONLY)
            try:
                if _libc.setns(fd, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), f"setns({path}) failed")
            finally:
                os.close(fd)
            box["result"] = fn(*args)
        except BaseException as e:  # re-raised in the caller's thread
            box["error"] = e

    t = threading.Thread(target=body)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["result"]
