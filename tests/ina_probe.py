"""TEST TOOL, run inside an emulated host: fill a switch's INA aggregators with
fragments nobody completes, or count how many aggregators are free
(tests/test_ina_aging.py).

``occupy`` plays a crashed worker (or a forger on a member's port): one GRAD per
aggregator index (or for given fragment numbers) with a fan-in no one reaches, so each
aggregator it lands in stays held. ``probe`` (on a worker of its job) sends one GRAD
with fan-in 1 per aggregator index and ``listen`` (on that job's PS, started first)
collects the answers: a free aggregator (or one past its timeout) adds the GRAD and
sends a ``PARTIAL`` to the PS, a busy one passes the GRAD on to the PS unaggregated (on
s_d), so the PARTIALs count the aggregators a job can get; ``listen`` then frees them
with ``CLEAR``. The fragment numbers are picked so that crc32(job, fragment, origin 0)
mod ``NUM_AGGREGATORS`` -- the default index ``ina_aggregator.p4``'s ``hash_fragment`` computes -- covers
every index once. (The PS cannot probe by itself: a passed-on GRAD would come back with
its own address as source, which its kernel drops.)

    python -m tests.ina_probe listen --switch-ip IP --tag ID --job J --bind PS_IP
    python -m tests.ina_probe probe --switch-ip IP --tag ID --job J
    python -m tests.ina_probe occupy --switch-ip IP --tag ID --job J [--fragments A:N]
"""

from __future__ import annotations

import argparse
import json
import select
import struct
import sys
import time
import zlib
from collections.abc import Iterable
from typing import Any

import numpy as np

from hosts.ina.agent import open_ina_socket
from wire.ina import INA_HEADER, INA_UDP_PORT, INA_VALUES, MsgType

#: p4src/include/config.p4's NUM_AGGREGATORS (ina.p4).
NUM_AGGREGATORS = 1024
_BATCH, _PAUSE = 16, 0.02  # GRADs per burst: far below any queue of the switch targets


def aggregator_index(job: int, fragment: int, origin: int = 0, n: int = NUM_AGGREGATORS) -> int:
    """The aggregator ``ina_aggregator.p4``'s ``hash_fragment`` hashes a fragment to (the default index)."""
    return zlib.crc32(struct.pack(">BIH", job, fragment, origin)) % n


def covering_fragments(job: int, base: int, n: int = NUM_AGGREGATORS) -> list[int]:
    """``n`` fragment numbers from ``base`` up, one per aggregator index."""
    out: dict[int, int] = {}
    f = base
    while len(out) < n:
        out.setdefault(aggregator_index(job, f, 0, n), f)
        f += 1
    return [out[i] for i in range(n)]


def _grad(job: int, frag: int, tag: int, bit: int, fanin: int, values: bytes) -> bytes:
    return INA_HEADER.pack(int(MsgType.GRAD), job, bit, frag, tag, 0, 1 << bit, 1, fanin,
                           0, 0) + values


def send_grads(sock, dst: tuple[str, int], job: int, tag: int, frags: Iterable[int],  # noqa: ANN001
               bit: int, fanin: int, seed: int | None) -> int:
    """One GRAD of contributor ``bit`` per fragment (random values from ``seed``, else
    zeros), paced so that no queue of the switch targets overflows."""
    rng = np.random.default_rng(seed) if seed is not None else None
    zero = bytes(4 * INA_VALUES)
    n = 0
    for frag in frags:
        values = zero if rng is None else \
            rng.integers(-2**20, 2**20, INA_VALUES, dtype=np.int32).astype(">i4").tobytes()
        sock.sendto(_grad(job, frag, tag, bit, fanin, values), dst)
        n += 1
        if n % _BATCH == 0:
            time.sleep(_PAUSE)
    return n


def listen(sock, dst: tuple[str, int], job: int, tag: int, frags: list[int],  # noqa: ANN001
           quiet: float = 2.0, max_time: float = 60.0) -> dict[str, int]:
    """On the job's PS: collect what comes back for ``frags`` (a ``PARTIAL``: the switch
    aggregated the probe; a ``GRAD``: it passed it on) until every fragment has answered
    or nothing came for ``quiet`` seconds; free the aggregated ones with ``CLEAR``."""
    print("ready", flush=True)
    answer: dict[int, int] = {}  # fragment -> msg_type that came back
    wanted = set(frags)
    t0 = last = time.monotonic()
    while len(answer) < len(wanted):
        now = time.monotonic()
        if now - last > quiet and answer or now - t0 > max_time:
            break
        if not select.select([sock], [], [], 0.1)[0]:
            continue
        while True:
            try:
                data = sock.recv(2048)
            except BlockingIOError:
                break
            last = time.monotonic()
            mt, j, _, frag, *_ = INA_HEADER.unpack_from(data)
            if j == job and frag in wanted:
                answer.setdefault(frag, mt)
    aggregated = [f for f, mt in answer.items() if mt == MsgType.PARTIAL]
    for i, f in enumerate(aggregated):
        sock.sendto(INA_HEADER.pack(int(MsgType.CLEAR), job, 0, f, tag, 0, 1, 1, 0, 0, 0), dst)
        if i % _BATCH == _BATCH - 1:
            time.sleep(_PAUSE)
    return {"aggregated": len(aggregated),
            "passed_on": sum(1 for mt in answer.values() if mt == MsgType.GRAD),
            "unanswered": len(frags) - len(answer)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.ina_probe", description=__doc__)
    ap.add_argument("mode", choices=("occupy", "probe", "listen"))
    ap.add_argument("--switch-ip", required=True)
    ap.add_argument("--tag", type=int, required=True, help="the switch's device id")
    ap.add_argument("--job", type=int, required=True)
    ap.add_argument("--base", type=int, default=1 << 30,
                    help="first fragment number tried when covering every index")
    ap.add_argument("--fragments", help="occupy: START:COUNT fragment numbers instead")
    ap.add_argument("--bit", type=int, default=0, help="contributor bit (the sender's rank)")
    ap.add_argument("--seed", type=int, default=0, help="occupy: values' seed")
    ap.add_argument("--bind", default="", help="local address (listen: the job's PS)")
    args = ap.parse_args(argv)
    sock = open_ina_socket(args.bind, INA_UDP_PORT)
    dst = (args.switch_ip, INA_UDP_PORT)
    if args.fragments:
        start, count = (int(x) for x in args.fragments.split(":"))
        frags = list(range(start, start + count))
    else:
        frags = covering_fragments(args.job, args.base)
    if args.mode == "occupy":
        out: dict[str, int] = {"sent": send_grads(sock, dst, args.job, args.tag, frags, args.bit,
                                                  255, args.seed)}
    elif args.mode == "probe":
        out = {"sent": send_grads(sock, dst, args.job, args.tag, frags, args.bit, 1, None)}
    else:
        out = listen(sock, dst, args.job, args.tag, frags)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())


def aggregating_switch(program: bytes) -> tuple[Any, Any]:
    """An embedded switch running the INA ``program`` (BMv2 JSON) as the aggregating
    switch 10.255.0.1 of job 1 (PS 10.0.0.1, RESULT multicast group 1001), with port 1
    facing another switch, so admission lets each rank's GRADs through. Returns
    ``(switch, program)`` for switch-level tests."""
    from targets.embedded.state import TableEntry
    from targets.embedded.switch import Switch

    sw = Switch(seed=1)
    prog = sw.load_program(program)
    sw.install_program(prog)
    a = "MyIngress.aggregator."
    sw_ip, ps_ip = 0x0AFF0001, 0x0A000001
    prog.tables[a + "ina_switch"].set_default(prog.action_call(
        a + "ina_switch", a + "set_switch_identity", (1, sw_ip, 1, sw_ip)))
    prog.tables[a + "ina_jobs"].insert(TableEntry((1,), prog.action_call(
        a + "ina_jobs", a + "set_job", (ps_ip, 1001))))
    adm = "MyIngress.admission.ina_fabric_ports"
    prog.tables[adm].insert(TableEntry((1,), prog.action_call(adm, "MyIngress.admission.fabric_port", ())))
    return sw, prog


def _start(network: Any, host: str, *args: str) -> Any:
    """This tool started in emulated ``host`` (``args``: a command and its options)."""
    import subprocess

    from tests.netenv import ROOT

    return network.host(host).popen([sys.executable, "-m", "tests.ina_probe", *args], cwd=str(ROOT),
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _finish(p: Any, timeout: float) -> dict[str, Any]:
    """The JSON line of a tool started by :func:`_start`; one still running after
    ``timeout`` s is killed and fails the test."""
    try:
        out, err = p.communicate(timeout=timeout)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err.decode(errors="replace")[-800:]
    return json.loads(out.decode().strip().splitlines()[-1])


def run_tool(network: Any, host: str, *args: str, timeout: float = 180) -> dict[str, Any]:
    """Run this tool in emulated ``host`` (``args``: a command and its options); its
    JSON line. A tool still running after ``timeout`` s is killed and fails the test."""
    return _finish(_start(network, host, *args), timeout)


def probe_counts(network: Any, topo: Any, ps: str, worker: str, *args: str,
                 probe_timeout: float = 180) -> dict[str, Any]:
    """``listen`` on the job's PS ``ps`` (started first), ``probe`` from its ``worker``
    with the same ``args``; what the listener counted (aggregated, passed on), once it
    has freed what the probes took."""
    listener = _start(network, ps, "listen", *args, "--bind", topo.host_ip(ps))
    try:
        assert listener.stdout.readline().strip() == b"ready", listener.stderr.read()[-800:]
        run_tool(network, worker, "probe", *args, timeout=probe_timeout)
    except BaseException:
        listener.kill()
        listener.wait()
        raise
    return _finish(listener, 120)
