"""The PS's datagram I/O (hosts/ina/ps.py): every waiting datagram read, each handed to
``ParameterServer._handle``; on the native path (``hosts/ina/native.py``) read with one
``recvmmsg`` per 64, the fast case summed in C (``hosts/ina/ps_fast.py``; off with
``GRADNET_INA_PS_FAST=0``), and what the PS sends while it handles a batch (RESULTs,
CLEARs, NACKs) sent together after it with ``sendmmsg``. The PS's decisions stay
``ParameterServer``'s, one place for both paths. Fault injection keeps the Python path.
"""

from __future__ import annotations

import ctypes
import os
import socket
import struct
import time
from typing import Any

import numpy as np

from hosts.ina import native
from hosts.ina.native import BATCH, SLOT, Slots, addr_of, check
from hosts.ina.ps_fast import fast_jobs

__all__ = ["NativePsIO", "PythonPsIO", "ps_io"]

_RECV_SIZE = 2048
_COMPLETE = 2  # dgram_ps.c's W_COMPLETE


class PythonPsIO:
    """One ``recvfrom`` and one ``sendto`` a datagram."""

    native = False

    def __init__(self, ps: Any) -> None:
        sock, faults = ps.sock, ps.faults
        self.recvfrom = sock.recvfrom if faults is None else (lambda n: faults.recv(sock, n))

    def drain(self, ps: Any, t0: float) -> bool:
        """Handle every datagram already received; True when any came."""
        c, recvfrom, got = ps.counters, self.recvfrom, False
        while True:
            try:
                data, addr = recvfrom(_RECV_SIZE)
            except (BlockingIOError, InterruptedError):
                break
            except ConnectionRefusedError:
                continue
            got = True
            c.datagrams += 1
            c.bytes_in += len(data)
            ps._handle(data, addr, time.monotonic() - t0)
        return got

    def flush(self, ps: Any) -> None:
        """Nothing held back on this path."""


class NativePsIO:
    """Batches of up to 64 datagrams in and out."""

    native = True

    def __init__(self, ps: Any, lib: Any) -> None:
        self.lib, self.fd = lib, ps.sock.fileno()
        self.s = Slots()
        self.raw = memoryview(self.s.slots.reshape(-1))
        self.ips: dict[int, str] = {}  # s_addr -> dotted quad
        self.sa: dict[tuple[str, int], bytes] = {}  # address -> struct sockaddr_in
        self.out: list[tuple[bytes, tuple[str, int]]] = []
        # the fast case in C (hosts/ina/ps_fast.py), unless GRADNET_INA_PS_FAST=0
        fast = fast_jobs(ps) if os.environ.get("GRADNET_INA_PS_FAST", "1") != "0" else None
        self.fast, self.table = fast if fast is not None else ({}, None)
        self.res = np.zeros(3, dtype=np.int32)

    def drain(self, ps: Any, t0: float) -> bool:
        """Handle every datagram already received, sending what they make after each
        batch; True when any came."""
        s, lib, c, got = self.s, self.lib, ps.counters, False
        ps.pending = self.out  # ParameterServer._send appends here
        try:
            while True:
                k = check(lib.ina_recv_batch(self.fd, s.p_slots, BATCH, s.p_lens, s.p_srcs,
                                             s.p_ports))
                if k == 0:
                    break
                got = True
                now = time.monotonic() - t0
                lens, srcs, ports = s.lens[:k].tolist(), s.srcs[:k].tolist(), s.ports[:k].tolist()
                c.datagrams += k
                c.bytes_in += sum(lens)
                if self.table is None:
                    for i in range(k):
                        ps._handle(self._datagram(i, lens), self._addr(i, srcs, ports), now)
                else:
                    self._fast(ps, k, lens, srcs, ports, now)
                self.flush(ps)
                if k < BATCH:  # drained
                    break
        finally:
            ps.pending = None
            self.flush(ps)
        return got

    def _fast(self, ps: Any, k: int, lens: list[int], srcs: list[int], ports: list[int],
              now: float) -> None:
        """A batch through the C fast case, each other datagram (and each fragment it
        completes) through ``ps``, in arrival order."""
        s, res, fast, i = self.s, self.res, self.fast, 0
        while i < k:
            j = self.lib.ina_ps_fast(ctypes.addressof(self.table), s.p_slots, s.p_lens, s.p_srcs,
                                     i, k, addr_of(res))
            for fj in fast.values():
                fj.sync(now)
            if j >= k:
                break
            why, job, f = res.tolist()
            if why == _COMPLETE:
                jb = fast[job].jb
                ps._completed(jb, f, jb.wire_fragment(f), now)
            else:
                ps._handle(self._datagram(j, lens), self._addr(j, srcs, ports), now)
            if job in fast:
                fast[job].push(f)
            i = j + 1

    def _datagram(self, i: int, lens: list[int]) -> bytes:
        return bytes(self.raw[i * SLOT:i * SLOT + lens[i]])

    def _addr(self, i: int, srcs: list[int], ports: list[int]) -> tuple[str, int]:
        ip = self.ips.get(srcs[i])
        if ip is None:
            ip = self.ips[srcs[i]] = socket.inet_ntoa(struct.pack("=I", srcs[i]))
        return ip, ports[i]

    def flush(self, ps: Any) -> None:
        """Send what the PS queued: one ``sendmmsg`` per 64; a datagram the kernel
        refuses counts in ``send_errors``, as on the Python path, and the rest go on."""
        out = self.out
        if not out:
            return
        datas = [d for d, _ in out]
        sa = b"".join(self.sa.get(a) or self._sockaddr(a) for _, a in out)
        n = len(datas)
        lens = np.fromiter((len(d) for d in datas), dtype=np.int32, count=n)
        offs = np.zeros(n, dtype=np.int64)
        np.cumsum(lens[:-1], out=offs[1:])
        buf = np.frombuffer(b"".join(datas), dtype=np.uint8)
        sa_arr = np.frombuffer(sa, dtype=np.uint8)
        idx = np.arange(n, dtype=np.int32)
        out.clear()
        i = 0
        while i < n:
            r = self.lib.ina_send_batch(self.fd, addr_of(buf), addr_of(offs[i:]), addr_of(lens[i:]),
                                        addr_of(sa_arr) + 16 * i, addr_of(idx), n - i)
            if r <= 0:  # this one refused (a full buffer, no route): the rest go on
                ps.counters.send_errors += 1
                i += 1
            else:
                i += r

    def _sockaddr(self, addr: tuple[str, int]) -> bytes:
        sa = native.sockaddrs([addr])
        b = bytes(16) if sa is None else sa.tobytes()
        self.sa[addr] = b
        return b


def ps_io(ps: Any) -> PythonPsIO | NativePsIO:
    """The PS's I/O: native unless forced off, no compiler, or fault injection."""
    lib = native.library() if ps.faults is None else None
    return PythonPsIO(ps) if lib is None else NativePsIO(ps, lib)
