"""The embedded target's runtime CLI: queue rates, depths and counters at run time.

BMv2 changes its traffic manager at run time over Thrift (``simple_switch_CLI``:
``set_queue_rate``, ``set_queue_depth``). The embedded target offers the same commands,
with the same arguments, as a line protocol on a Unix socket (``--runtime-socket PATH``;
the network builder puts it in the run directory beside the P4Runtime socket)::

    set_queue_rate RATE_PPS [PORT [PRIORITY]]    -> ok
    set_queue_depth DEPTH_PKTS [PORT [PRIORITY]] -> ok
    set_port_rate RATE_PPS [PORT]                -> ok (gradnet extension, see below)
    set_port_byte_rate BYTES_PER_S [PORT]        -> ok (gradnet extension, see below)
    get_queue_stats [PORT]                       -> one JSON list of per-queue dicts
    trace on [FILE] | trace off | trace          -> per-packet trace (targets/embedded/trace.py)
    dataplane                                    -> one JSON dict: the data plane's liveness
    memlinks                                     -> one JSON list: the in-memory links and their counters
    link_capture PORT on|off                     -> ok (the port's link back on its veth while on)
    help                                         -> the command list

``dataplane`` answers ``{"state": ..., "beats": N, "age_s": S, "error": ..., "packet_errors":
N}`` (``targets/embedded/liveness.py``): ``running``, ``stalled`` (its thread lives but
has not beaten for 5 s), ``dead`` (its loop ended: the switch answers P4Runtime but
forwards nothing) or ``not started``. The process that serves the socket answers it
from another thread, so a dead data plane shows. ``fault dataplane-exit`` ends the data
plane's loop as a bug would; tests use it, and only a switch started with
``GRADNET_FAULT_INJECTION=1`` accepts it.

``trace on`` writes a BMv2-style trace of every packet (parser states, tables with key,
hit/miss and action, egress port, transmissions) to FILE, by default the socket's path
with ``.trace`` for ``.cli`` (``<run_dir>/<switch>.trace``); ``trace off`` stops it and
the switch runs its untouched code again (nothing is checked per packet while off).

As in simple_switch, PRIORITY is the internal queue index (0 is served first, and
serves ``standard_metadata.priority = N-1``). A rate of 0 or less means unlimited
(``--queue-rate`` style); every answer is one line, errors start with ``error:``.

``set_port_rate`` is not in simple_switch_CLI: it gives a whole port a rate shared by
its queues in strict priority (a line rate), so that a congested port serves the higher
priorities first and drops from the lower ones. BMv2 has only per-queue rates, each
queue independent of the others. ``set_port_byte_rate`` is the same shared rate in
bytes per second: a packet costs its length (counted in 1,514-byte frames, so at most
one frame's share), so small packets no longer cost a full frame's share.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socketserver
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from targets.embedded.switch import Switch

log = logging.getLogger("gradnet.runtime")

FRAME_BYTES = 1514  # a byte rate's unit of account: a full-size Ethernet frame

HELP = ("commands: set_queue_rate RATE_PPS [PORT [PRIORITY]]; set_queue_depth DEPTH_PKTS "
        "[PORT [PRIORITY]]; set_port_rate RATE_PPS [PORT]; set_port_byte_rate BYTES_PER_S [PORT]; "
        "get_queue_stats [PORT]; "
        "trace on [FILE] | trace off | trace; dataplane; memlinks; link_capture PORT on|off; help")


class CommandError(ValueError):
    """A runtime command with bad arguments."""


def _ints(args: list[str], names: tuple[str, ...]) -> list[int]:
    out = []
    for a, n in zip(args, names, strict=False):
        try:
            out.append(int(a, 0))
        except ValueError:
            raise CommandError(f"{n} must be an integer, got {a!r}") from None
    return out


def _trace(switch: Switch, args: list[str], default_path: str | None) -> str:
    from targets.embedded.trace import Tracer

    tracer = getattr(switch, "tracer", None)
    if not args:
        return f"on {tracer.path}" if tracer is not None and tracer.active else "off"
    if args[0] == "off" and len(args) == 1:
        if tracer is not None:
            tracer.stop()
        return "ok"
    if args[0] == "on" and len(args) <= 2:
        path = args[1] if len(args) == 2 else default_path
        if not path:
            raise CommandError("usage: trace on FILE (this switch has no default trace file)")
        if tracer is None:
            tracer = switch.tracer = Tracer(switch)  # type: ignore[attr-defined]
        try:
            tracer.start(path)
        except OSError as e:
            raise CommandError(f"cannot write {path}: {e.strerror}") from None
        return f"ok {path}"
    raise CommandError("usage: trace on [FILE] | trace off | trace")


def _fault(switch: Switch, args: list[str]) -> str:
    """Test-only fault injection (``GRADNET_FAULT_INJECTION=1`` in the switch's
    environment): ``fault dataplane-exit`` ends the data-plane loop."""
    from targets.embedded.liveness import fault_injection_enabled

    if not fault_injection_enabled():
        raise CommandError("fault injection is off (tests start the switch with "
                           "GRADNET_FAULT_INJECTION=1)")
    if args != ["dataplane-exit"]:
        raise CommandError("usage: fault dataplane-exit")
    hb = switch.heartbeat
    if hb is None:
        raise CommandError("the data plane does not run")
    hb.fault = "dataplane-exit"
    switch.wake()
    return "ok"


def execute(switch: Switch, line: str, trace_path: str | None = None) -> str:
    """Run one command line against ``switch``; return the one-line answer.
    ``trace_path``: where ``trace on`` without a FILE writes."""
    words = line.split()
    if not words:
        return ""
    cmd, args = words[0], words[1:]
    try:
        if cmd in ("set_queue_rate", "set_queue_depth"):
            if not 1 <= len(args) <= 3:
                raise CommandError(f"usage: {cmd} VALUE [PORT [PRIORITY]]")
            try:
                value = float(args[0])
            except ValueError:
                raise CommandError(f"value must be a number, got {args[0]!r}") from None
            port, prio = (_ints(args[1:], ("PORT", "PRIORITY")) + [None, None])[:2]
            if prio is not None and not 0 <= prio < switch.nb_queues:
                raise CommandError(f"priority {prio} out of range (the switch has {switch.nb_queues} "
                                   "queue(s) per port; start it with --priority-queues N)")
            if cmd == "set_queue_rate":
                switch.set_queue_rate(value if value > 0 else None, port, prio)
            else:
                if value < 1 or value != int(value):
                    raise CommandError(f"depth must be a whole number >= 1, got {args[0]}")
                switch.set_queue_depth(int(value), port, prio)
            return "ok"
        if cmd in ("set_port_rate", "set_port_byte_rate"):
            if not 1 <= len(args) <= 2:
                raise CommandError(f"usage: {cmd} {'RATE_PPS' if cmd == 'set_port_rate' else 'BYTES_PER_S'} [PORT]")
            try:
                value = float(args[0])
            except ValueError:
                raise CommandError(f"rate must be a number, got {args[0]!r}") from None
            port = _ints(args[1:], ("PORT",))[0] if len(args) > 1 else None
            if cmd == "set_port_rate":
                switch.set_port_rate(value if value > 0 else None, port)
            else:  # bytes/s, counted in 1,514-byte frames (a packet costs its length)
                switch.set_port_rate(value / FRAME_BYTES if value > 0 else None, port, FRAME_BYTES)
            return "ok"
        if cmd == "get_queue_stats":
            if len(args) > 1:
                raise CommandError("usage: get_queue_stats [PORT]")
            port = _ints(args, ("PORT",))[0] if args else None
            return json.dumps(switch.queue_stats(port))
        if cmd == "trace":
            return _trace(switch, args, trace_path)
        if cmd == "dataplane":
            return json.dumps(switch.dataplane_status())
        if cmd == "fault":
            return _fault(switch, args)
        if cmd in ("memlinks", "link_capture"):
            from targets.embedded.native import memlink

            try:
                return memlink.command(switch, cmd, args)
            except ValueError as e:
                raise CommandError(str(e)) from None
        if cmd == "help":
            return HELP
        raise CommandError(f"unknown command {cmd!r} ({HELP})")
    except CommandError as e:
        return f"error: {e}"


class _Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        for raw in self.rfile:
            answer = execute(self.server.switch, raw.decode(errors="replace"),  # type: ignore[attr-defined]
                             self.server.trace_path)  # type: ignore[attr-defined]
            self.wfile.write(answer.encode() + b"\n")
            self.wfile.flush()


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class RuntimeServer:
    """Serves :func:`execute` on a Unix stream socket, one thread per client."""

    def __init__(self, switch: Switch, path: str) -> None:
        self.switch = switch
        self.path = path
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Bind the socket (replacing a stale one) and serve in a background thread."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        self._server = _Server(self.path, _Handler)
        self._server.switch = self.switch  # type: ignore[attr-defined]
        base = self.path[:-4] if self.path.endswith(".cli") else self.path
        self._server.trace_path = base + ".trace"  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._server.serve_forever, name="runtime-cli", daemon=True)
        self._thread.start()
        log.info("runtime CLI on %s", self.path)

    def stop(self) -> None:
        """Stop serving and remove the socket."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
