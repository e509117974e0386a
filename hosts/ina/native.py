"""The INA agents' native datagram paths (docs/ina.md, "The agents' CPU"): ``dgram.c``
and ``dgram_ps.c``, one unit, built with the system C compiler
(``targets/embedded/native/build.py``: cached by hash, ``make deps`` builds it ahead)
and loaded with ctypes.

Why native code here: the kernel's share of one ``sendto`` and one ``recvfrom`` a
fragment is already about the whole CPU budget of an agent per value, and Python costs
more than the kernel per datagram; only fewer system calls a datagram (``sendmmsg``,
``recvmmsg``) and no Python a datagram get an agent near 0.1 µs a value.

``GRADNET_INA_NATIVE=0`` forces the Python path (and so does fault injection: the
``--drop-*`` options and ``FaultInjection`` stay on it). Without a C compiler the agents
keep the Python path and log one line. ``GRADNET_INA_COALESCE_US=N``: a worker on the
native path sleeps N µs before waiting for RESULTs while 16 or more are outstanding, so
that a wake-up takes many (CPU for latency, as a NIC's interrupt moderation; off by
default).
"""

from __future__ import annotations

import ctypes
import logging
import os
import socket
import struct
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["ENV", "BATCH", "SLOT", "Codes", "enabled", "library", "sockaddrs"]

ENV = "GRADNET_INA_NATIVE"
COALESCE_ENV = "GRADNET_INA_COALESCE_US"
BATCH = 64  # datagrams a call (dgram.c's BATCH)
SLOT = 2048  # receive slot bytes (dgram.c's SLOT)
_SRCS = [Path(__file__).with_name(n) for n in ("dgram.c", "dgram_ps.c")]  # one unit
_log = logging.getLogger(__name__)
_state: dict[str, Any] = {}


class Codes:
    """What the worker's native receive made of a datagram (dgram.c's C_*)."""

    ACCEPT, DUPLICATE, STALE, IGNORED, REFUSED_SOURCE, REFUSED_STAMP, NACK = range(7)


_P, _I, _U = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32
_SIGNATURES = {
    "ina_parse_header": [_P, _I, _P],
    "ina_send_grads": [_I, _P, _P, _I, _P, _P, _U, _I, _I, _P, _I, _P],
    "ina_recv_batch": [_I, _P, _I, _P, _P, _P],
    "ina_worker_recv": [_I, _P, _P, _P, _I, _P, _P, _P],
    "ina_send_batch": [_I, _P, _P, _P, _P, _P, _I],
    "ina_worker_pump": [_I, _P, _P, _P, _P, _P, _P, _P, _P],
    "ina_ps_fast": [_P, _P, _P, _P, _I, _I, _P],
}


def coalesce_us() -> float:
    """``GRADNET_INA_COALESCE_US``: a worker's receive coalescing in µs (0: off; a bad
    value: off, logged)."""
    raw = os.environ.get(COALESCE_ENV, "").strip()
    try:
        v = float(raw) if raw else 0.0
    except ValueError:
        v = -1.0
    if not 0 <= v <= 100_000:
        _log.warning("INA agents: %s=%r is not 0..100000 µs: no coalescing", COALESCE_ENV, raw)
        return 0.0
    return v


def enabled() -> bool:
    """False when ``GRADNET_INA_NATIVE`` is ``0`` (the Python path is forced)."""
    return os.environ.get(ENV, "1").strip() not in ("0", "no", "false", "off")


def _load() -> ctypes.CDLL | None:
    from targets.embedded.native.build import build, compiler
    from targets.embedded.native.cexpr import Unsupported

    if compiler() is None:
        _log.warning("INA agents: no C compiler (cc, gcc or clang): the Python packet path")
        return None
    try:
        lib = ctypes.CDLL(str(build("\n".join(p.read_text() for p in _SRCS))))
    except (RuntimeError, OSError, subprocess.SubprocessError, Unsupported) as e:
        # a broken toolchain (or one gone since): still the Python path
        _log.warning("INA agents: native datagram paths not built (%s): the Python packet path",
                     str(e).splitlines()[0] if str(e) else type(e).__name__)
        return None
    for name, args in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, ctypes.c_int
    return lib


def library() -> ctypes.CDLL | None:
    """The loaded ``dgram.c`` (built on first use), or None: the Python path (forced by
    ``GRADNET_INA_NATIVE=0``, or no compiler: logged once)."""
    if not enabled():
        return None
    if "lib" not in _state:
        _state["lib"] = _load()
    return _state["lib"]


def sockaddrs(addrs: list[tuple[str, int]]) -> np.ndarray | None:
    """``struct sockaddr_in`` of each (IPv4 address, port), as bytes in one array (None
    if one is not an IPv4 address: the Python path then)."""
    out = bytearray()
    for ip, port in addrs:
        try:
            a = socket.inet_aton(ip)
        except OSError:
            return None
        out += struct.pack("=H", socket.AF_INET) + struct.pack("!H", port) + a + bytes(8)
    return np.frombuffer(bytes(out) or bytes(16), dtype=np.uint8).copy()


def ip_u32(ip: str) -> int:
    """An IPv4 address as the C side's ``s_addr`` (network order, read natively)."""
    return int(struct.unpack("=I", socket.inet_aton(ip))[0])


def addr_of(a: np.ndarray) -> int:
    """The address of a numpy array's data (for a ctypes pointer argument)."""
    return int(a.ctypes.data)


def buffer_addr(buf: bytes | bytearray) -> tuple[int, np.ndarray]:
    """The address of ``buf``'s bytes and the view that keeps it alive (bytes: read
    only; a bytearray's address is stable while it is not resized)."""
    v = np.frombuffer(buf, dtype=np.uint8)
    return int(v.ctypes.data) if v.size else 0, v


class Slots:
    """Preallocated receive slots and per-datagram outputs of one agent's socket."""

    def __init__(self) -> None:
        self.slots = np.zeros((BATCH, SLOT), dtype=np.uint8)
        self.lens = np.zeros(BATCH, dtype=np.int32)
        self.srcs = np.zeros(BATCH, dtype=np.uint32)
        self.ports = np.zeros(BATCH, dtype=np.uint16)
        self.out = np.zeros((BATCH, 4), dtype=np.int32)
        self.p_slots, self.p_lens = addr_of(self.slots), addr_of(self.lens)
        self.p_srcs, self.p_out = addr_of(self.srcs), addr_of(self.out)
        self.p_ports = addr_of(self.ports)

    def datagram(self, i: int) -> bytes:
        """Datagram ``i`` of the last batch."""
        return self.slots[i, : self.lens[i]].tobytes()

    def source(self, i: int) -> str:
        """Datagram ``i``'s IPv4 source address."""
        return socket.inet_ntoa(struct.pack("=I", int(self.srcs[i])))


def check(rc: int) -> int:
    """``rc`` of a C call; ``OSError`` for a ``-errno``."""
    if rc < 0:
        raise OSError(-rc, os.strerror(-rc))
    return rc
