"""``gradnet-switch``: the embedded target's command line, shaped like simple_switch_grpc.

    gradnet-switch [options] [JSON | --no-p4] [-- target options]

Options that simple_switch_grpc takes before and after ``--`` are accepted in either
place, so the network builder launches both targets with the same argument list.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from typing import TYPE_CHECKING

from targets.embedded.compiler import CompileError
from targets.embedded.switch import Switch

if TYPE_CHECKING:
    from targets.embedded.p4runtime.server import P4RuntimeServer, ServerTls
    from targets.embedded.runtime_cli import RuntimeServer


def _port_spec(text: str) -> tuple[int, str]:
    try:
        num, iface = text.split("@", 1)
        return int(num), iface
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected PORT@IFACE, got {text!r}") from None


def _rate_spec(text: str) -> tuple[int | None, int | None, float]:
    """RATE, PORT:RATE or PORT:PRIORITY:RATE (packets per second)."""
    parts = text.split(":")
    try:
        if len(parts) == 1:
            return None, None, float(parts[0])
        if len(parts) == 2:
            return int(parts[0]), None, float(parts[1])
        if len(parts) == 3:
            return int(parts[0]), int(parts[1]), float(parts[2])
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"expected [PORT:[PRIORITY:]]PPS, got {text!r}")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for documentation and tests)."""
    p = argparse.ArgumentParser(
        prog="gradnet-switch",
        description="gradnet embedded P4 target: runs p4c's BMv2 JSON (v1model) with "
        "simple_switch semantics, serves P4Runtime over gRPC, moves packets on Linux "
        "interfaces. Command line shaped like simple_switch_grpc.",
    )
    p.add_argument("json", nargs="?", help="BMv2 JSON program to load at start (optional)")
    p.add_argument("--no-p4", action="store_true", help="start with no program; wait for P4Runtime")
    p.add_argument("-i", "--interface", action="append", type=_port_spec, default=[],
                   metavar="PORT@IFACE", help="attach interface IFACE as port PORT (repeatable)")
    p.add_argument("--device-id", type=int, default=0, help="P4Runtime device id (default 0)")
    p.add_argument("--cpu-port", type=int, default=None, help="port number for packet-in/out")
    p.add_argument("--grpc-server-addr", default="127.0.0.1:9559",
                   help="P4Runtime listen address (default 127.0.0.1:9559: this host only; "
                        "simple_switch_grpc's default is 0.0.0.0:9559)")
    p.add_argument("--grpc-server-ssl", action="store_true", help="Enable SSL/TLS for gRPC server")
    p.add_argument("--grpc-server-cacert", default=None, metavar="PEM",
                   help="Path to pem file holding CA certificate to verify peer against")
    p.add_argument("--grpc-server-cert", default=None, metavar="PEM", help="Path to pem file holding server certificate")
    p.add_argument("--grpc-server-key", default=None, metavar="PEM", help="Path to pem file holding server key")
    p.add_argument("--grpc-server-with-client-auth", action="store_true",
                   help="Require client to have a valid certificate for mutual authentication")
    p.add_argument("--thrift-port", type=int, default=None, help="accepted for compatibility; unused")
    p.add_argument("--log-console", action="store_true", help="log to stderr")
    p.add_argument("--log-file", default=None, help="log to this file")
    p.add_argument("-L", "--log-level", default="info",
                   choices=["trace", "debug", "info", "warn", "error", "off"], help="log level")
    p.add_argument("--priority-queues", type=int, default=1, metavar="N",
                   help="N strict-priority queues per egress port, selected by standard_metadata.priority")
    p.add_argument("--queue-depth", type=int, default=64, help="queue depth in packets (default 64)")
    p.add_argument("--queue-rate", action="append", type=_rate_spec, default=[],
                   metavar="[PORT:[PRIO:]]PPS", help="rate limit of a queue in packets/s (repeatable)")
    p.add_argument("--seed", type=int, default=None, help="seed of the P4 random() extern")
    p.add_argument("--backend", choices=["auto", "native", "python"], default=None,
                   help="data-plane backend: native (the program compiled to C; refused if it uses a "
                        "feature native lacks), python, or auto (native when supported and a C compiler "
                        "exists, else python, logged; a program not in the native cache compiles in the "
                        "background while python serves); default: $GRADNET_BACKEND, else auto")
    p.add_argument("--runtime-socket", default=None, metavar="PATH",
                   help="serve the runtime CLI (set_queue_rate, set_queue_depth, get_queue_stats: "
                        "simple_switch_CLI's queue commands) on this Unix socket")
    return p


class _StartError(Exception):
    """A startup failure: printed as ``gradnet-switch: <message>``, exit status 2."""


def _setup_logging(args: argparse.Namespace) -> None:
    level = {"trace": logging.DEBUG, "debug": logging.DEBUG, "info": logging.INFO,
             "warn": logging.WARNING, "error": logging.ERROR, "off": logging.CRITICAL + 1}[args.log_level]
    handlers: list[logging.Handler] = []
    if args.log_console:
        handlers.append(logging.StreamHandler(sys.stderr))
    if args.log_file:
        handlers.append(logging.FileHandler(args.log_file))
    if not handlers:
        handlers.append(logging.NullHandler())
    logging.basicConfig(level=level, handlers=handlers,
                        format=f"[%(asctime)s] [dev {args.device_id}] %(levelname)s %(message)s")


def _make_switch(args: argparse.Namespace) -> Switch:
    """The switch with its queue rates, program and ports."""
    sw = Switch(device_id=args.device_id, cpu_port=args.cpu_port,
                priority_queues=args.priority_queues, queue_depth=args.queue_depth, seed=args.seed,
                backend=args.backend)
    for port, prio, pps in args.queue_rate:
        sw.set_queue_rate(pps, port, prio)
    if args.json and not args.no_p4:
        try:
            with open(args.json, "rb") as f:
                sw.install_program(sw.load_program(f.read()))
        except (OSError, CompileError) as e:
            raise _StartError(f"cannot load {args.json}: {e}") from e
    try:
        for port, iface in args.interface:
            sw.add_port(port, iface)
    except OSError as e:
        raise _StartError(f"cannot open interface: {e}") from e
    return sw


def _server_tls(args: argparse.Namespace) -> ServerTls | None:
    from targets.embedded.p4runtime.server import ServerTls

    if args.grpc_server_ssl:
        if not (args.grpc_server_cert and args.grpc_server_key):
            raise _StartError("--grpc-server-ssl needs --grpc-server-cert and --grpc-server-key")
        return ServerTls(args.grpc_server_cert, args.grpc_server_key, args.grpc_server_cacert,
                         args.grpc_server_with_client_auth)
    if args.grpc_server_cacert or args.grpc_server_cert or args.grpc_server_key or args.grpc_server_with_client_auth:
        raise _StartError("the --grpc-server-cacert/-cert/-key/-with-client-auth options need "
                          "--grpc-server-ssl")
    return None


def _start_servers(sw: Switch, args: argparse.Namespace) -> tuple[P4RuntimeServer, RuntimeServer | None]:
    """Start the P4Runtime server and, with ``--runtime-socket``, the runtime CLI."""
    from targets.embedded.p4runtime.server import P4RuntimeServer

    server = P4RuntimeServer(sw, args.grpc_server_addr, tls=_server_tls(args))
    try:
        server.start()
    except Exception as e:  # grpc raises RuntimeError on a busy port, ValueError on bad TLS files
        raise _StartError(f"cannot listen on {args.grpc_server_addr}: {e}") from e
    runtime = None
    if args.runtime_socket:
        from targets.embedded.runtime_cli import RuntimeServer

        runtime = RuntimeServer(sw, args.runtime_socket)
        try:
            runtime.start()
        except OSError as e:
            server.stop()
            raise _StartError(f"cannot serve the runtime CLI on {args.runtime_socket}: {e}") from e
    return server, runtime


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``gradnet-switch`` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    argv = [a for a in argv if a != "--"]  # simple_switch_grpc's target-option separator
    args = build_parser().parse_args(argv)
    _setup_logging(args)
    try:
        sw = _make_switch(args)
        server, runtime = _start_servers(sw, args)
    except _StartError as e:
        print(f"gradnet-switch: {e}", file=sys.stderr)
        return 2
    done = threading.Event()

    def _stop(signum: int, frame: object) -> None:
        done.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    sw.start()
    logging.getLogger("gradnet.switch").info(
        "device %d up: %d ports, P4Runtime on %s", args.device_id, len(args.interface), args.grpc_server_addr)
    print(f"gradnet-switch: device {args.device_id} listening on {args.grpc_server_addr}", flush=True)
    done.wait()
    if runtime is not None:
        runtime.stop()
    server.stop()
    sw.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
