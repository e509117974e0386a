"""A seeded fuzz of the pipeline-config loader: mutated real BMv2 JSONs over P4Runtime.

Each case takes one of the committed p4c outputs (``p4src/build/*.json``), applies a
few random structural or value mutations (replace a value with a hostile one: code
injection strings, huge or negative ints, floats, wrong types, deep nesting; delete a
key; drop, duplicate or shuffle list elements; swap an operator) and sends the result to
a running embedded switch as ``SetForwardingPipelineConfig(VERIFY)`` with the program's
real P4Info: the path a controller's pipeline push takes, compiler included.

A case passes when the server answers OK (the mutation was harmless) or INVALID_ARGUMENT
(refused with a message). Anything else (INTERNAL: a compiler bug reached; UNAVAILABLE:
the server died; a marker file written by an injected payload) is a failure. After the
run the server must still answer and still forward with the pipeline it started with.

    python -m bench fuzz-config            # make bench: the long run
    python -m targets.embedded.config_fuzz --seconds 30 --seed 7
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wire import argtypes

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "p4src" / "build"
PROGRAMS = ("forward", "ina", "ndn", "nic", "lan")


def hostile_values(marker: Path) -> list[Any]:
    """Values a mutation puts in place of a JSON value; the strings would create
    ``marker`` if any of them ever ran as Python."""
    m = str(marker)
    return [
        f"__import__('os').system('touch {m}')",
        f"1) or __import__('os').system('touch {m}') or (1",
        f"x\n__import__('os').system('touch {m}')\n",
        f"0x1); open('{m}', 'w'); (0",
        f"'); open('{m}', 'w') #",
        f"_act1(F, D):\n    open('{m}', 'w')\ndef _z",
        # runs at load time if it ever reaches the module level of the generated code
        f"1(F, D): pass\n__import__('os').system('touch {m}')\ndef _y",
        "__class__", "().__class__.__base__.__subclasses__()",
        "", " ", "\n", "a" * 300, "0x" + "f" * 3000, "-0x1", "0b101", "1e9",
        10 ** 100, -(10 ** 100), 2 ** 63, -1, 0, 1, 65536, 1 << 31, 10 ** 12,
        1.5, True, False, None, [], {}, [1, 2, 3], {"op": "+"}, [[[[[[[[[[[]]]]]]]]]]],
        {"type": "hexstr", "value": "0x1"}, {"type": "field", "value": ["no", "such"]},
        {"type": "expression", "value": {"op": "+", "left": None, "right": None}},
        {"type": "runtime_data", "value": 99}, {"type": "lookahead", "value": [0, 10 ** 9]},
    ]


_OPS = ["+", "-", "*", "/", "%", "<<", ">>", "&", "|", "^", "~", "==", "not", "valid", "d2b",
        "b2d", "?", "assign", "exit", "register_read", "count", "extract", "set", "bogus_op",
        "__import__", "+)+(", None, 7]


@dataclass
class FuzzReport:
    """What a fuzz run did: cases per outcome, and the failing ones (seed, message)."""

    seed: int
    seconds: float = 0.0
    cases: int = 0
    accepted: int = 0
    rejected: int = 0
    failures: list[str] = field(default_factory=list)
    marker_written: bool = False
    still_forwards: bool = True
    per_program: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failures and not self.marker_written and self.still_forwards

    def summary(self) -> str:
        return (f"config fuzz seed {self.seed}: {self.cases} cases in {self.seconds:.1f} s "
                f"({self.cases / max(self.seconds, 1e-9):.1f}/s), {self.accepted} accepted, "
                f"{self.rejected} refused with INVALID_ARGUMENT, {len(self.failures)} failures, "
                f"marker {'WRITTEN' if self.marker_written else 'never written'}, old pipeline "
                f"{'still forwards' if self.still_forwards else 'BROKEN'}; per program {self.per_program}")


def _pick_container(doc: Any, rng: random.Random) -> tuple[Any, Any] | None:
    """A random (container, key) inside ``doc``: descend a random number of steps."""
    cur: Any = doc
    parent: tuple[Any, Any] | None = None
    for _ in range(rng.randint(1, 12)):
        if isinstance(cur, dict) and cur:
            k = rng.choice(list(cur))
        elif isinstance(cur, list) and cur:
            k = rng.randrange(len(cur))
        else:
            break
        parent = (cur, k)
        cur = cur[k]
    return parent


def mutate(doc: Any, rng: random.Random, hostile: list[Any]) -> str:
    """Apply one random mutation to ``doc`` in place; returns what it did."""
    where = _pick_container(doc, rng)
    if where is None:
        return "none"
    cont, k = where
    kind = rng.choice(("hostile", "hostile", "delete", "dup", "shuffle", "op", "int", "type"))
    if kind == "hostile":
        cont[k] = json.loads(json.dumps(rng.choice(hostile)))
    elif kind == "delete":
        del cont[k]
    elif kind == "dup" and isinstance(cont, list):
        cont.insert(k, json.loads(json.dumps(cont[k])))
    elif kind == "shuffle" and isinstance(cont, list):
        rng.shuffle(cont)
    elif kind == "op":
        cont[k] = rng.choice(_OPS)
    elif kind == "int":
        v = cont[k]
        cont[k] = (v + rng.choice((-1, 1, 1 << 20, -(1 << 40)))) if isinstance(v, int) and not isinstance(v, bool) \
            else rng.randint(-5, 5000)
    elif kind == "type" and isinstance(cont[k], dict) and "type" in cont[k]:
        cont[k]["type"] = rng.choice(("hexstr", "field", "expression", "runtime_data", "header",
                                      "string", "lookahead", "bool", "local", "stack_field", "x"))
    else:
        cont[k] = rng.choice(hostile)
    return f"{kind}@{k!r}"


def _targeted(doc: dict[str, Any], rng: random.Random, hostile: list[Any]) -> str:
    """Mutate a value known to reach generated code (errors, action ids, widths, ops)."""
    choice = rng.randrange(5)
    if choice == 0 and doc.get("errors"):
        e = rng.choice(doc["errors"])
        e[rng.randrange(2)] = rng.choice(hostile)
        return "errors"
    if choice == 1 and doc.get("actions"):
        rng.choice(doc["actions"])["id"] = rng.choice(hostile)
        return "action id"
    if choice == 2 and doc.get("header_types"):
        t = rng.choice(doc["header_types"])
        if t["fields"]:
            f = rng.choice(t["fields"])
            f[rng.randrange(len(f))] = rng.choice(hostile)
        return "field"
    if choice == 3:
        acts = [a for a in doc.get("actions", []) if a.get("primitives")]
        if acts:
            p = rng.choice(rng.choice(acts)["primitives"])
            p["op"] = rng.choice(_OPS + hostile[:6])
            return "primitive op"
    return mutate(doc, rng, hostile)


def _load_sources(programs: tuple[str, ...]) -> dict[str, tuple[bytes, Any]]:
    """name -> (BMv2 JSON, P4Info) of the programs p4c has built."""
    from finsy.proto import p4i
    from google.protobuf import text_format

    sources = {}
    for name in programs:
        j, info = BUILD / f"{name}.json", BUILD / f"{name}.p4info.txt"
        if j.exists() and info.exists():
            sources[name] = (j.read_bytes(), text_format.Parse(info.read_text(), p4i.P4Info()))
    if not sources:
        raise FileNotFoundError(f"no p4c outputs in {BUILD} (run `make p4`)")
    return sources


def run_fuzz(seconds: float, seed: int = 1, programs: tuple[str, ...] = PROGRAMS,
             max_cases: int | None = None, log: Any = None) -> FuzzReport:
    """Fuzz for ``seconds`` (or ``max_cases``) against a fresh embedded switch on
    127.0.0.1; see the module doc for what passes."""
    import grpc
    from finsy.proto import p4r, p4r_grpc

    from targets.embedded.p4runtime.server import P4RuntimeServer
    from targets.embedded.switch import Switch

    rng = random.Random(seed)
    report = FuzzReport(seed=seed)
    sources = _load_sources(programs)
    with tempfile.TemporaryDirectory(prefix="gradnet-fuzz-") as tmp:
        marker = Path(tmp) / "EXECUTED"
        hostile = hostile_values(marker)
        sw = Switch(device_id=1)
        server = P4RuntimeServer(sw, "127.0.0.1:0")
        port = server.start()
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        stub = p4r_grpc.P4RuntimeStub(channel)
        reqs: Any = _Requests()
        stream = stub.StreamChannel(iter(reqs))
        try:
            reqs.put(p4r.StreamMessageRequest(arbitration=p4r.MasterArbitrationUpdate(
                device_id=1, election_id=p4r.Uint128(low=1))))
            next(stream)  # primary
            first = next(iter(sources))
            base = p4r.ForwardingPipelineConfig(p4info=sources[first][1], p4_device_config=sources[first][0])
            stub.SetForwardingPipelineConfig(p4r.SetForwardingPipelineConfigRequest(
                device_id=1, election_id=p4r.Uint128(low=1), config=base,
                action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT), timeout=60)
            running = sw.program
            start = time.monotonic()
            while time.monotonic() - start < seconds and (max_cases is None or report.cases < max_cases):
                name = rng.choice(list(sources))
                raw, info = sources[name]
                doc = json.loads(raw)
                what = [(_targeted if rng.random() < 0.3 else mutate)(doc, rng, hostile)
                        for _ in range(rng.randint(1, 4))]
                try:
                    blob = json.dumps(doc).encode()
                except (ValueError, RecursionError):
                    continue
                cfg = p4r.ForwardingPipelineConfig(p4info=info, p4_device_config=blob)
                report.cases += 1
                report.per_program[name] = report.per_program.get(name, 0) + 1
                try:
                    stub.SetForwardingPipelineConfig(p4r.SetForwardingPipelineConfigRequest(
                        device_id=1, election_id=p4r.Uint128(low=1), config=cfg,
                        action=p4r.SetForwardingPipelineConfigRequest.VERIFY), timeout=60)
                    report.accepted += 1
                except grpc.RpcError as e:
                    if e.code() == grpc.StatusCode.INVALID_ARGUMENT:
                        report.rejected += 1
                    else:
                        report.failures.append(f"{name} case {report.cases} {what}: {e.code().name}: {e.details()}")
                        if log:
                            print(report.failures[-1], file=log)
                        if e.code() == grpc.StatusCode.UNAVAILABLE:
                            break
                if marker.exists():
                    report.marker_written = True
                    report.failures.append(f"{name} case {report.cases} {what}: payload executed")
                    break
            report.seconds = time.monotonic() - start
            stub.Capabilities(p4r.CapabilitiesRequest(), timeout=10)
            report.still_forwards = sw.program is running and _forwards(sw)
        finally:
            reqs.close()
            channel.close()
            server.stop(grace=0)
            sw.stop()
        report.marker_written = report.marker_written or marker.exists()
    return report


def _forwards(sw: Any) -> bool:
    """The running program is forward.p4's and routes a UDP packet out of port 2."""
    from scapy.all import IP, UDP, Ether

    from targets.embedded.state import TableEntry

    p = sw.program
    routes = "MyIngress.forwarding.ipv4_routes"
    if routes not in p.tables:
        return True  # another program: nothing to route with
    t = p.tables[routes]
    t.clear()
    t.insert(TableEntry(((0x0A000002, 32),), p.action_call(routes, "MyIngress.forwarding.set_next_hop", (2, 2))))
    frame = bytes(Ether(src="00:00:0a:00:00:01", dst="02:00:00:01:00:01") / IP(src="10.0.0.1", dst="10.0.0.2")
                  / UDP(sport=1, dport=2) / b"x")
    out = sw.process(1, frame)
    t.clear()
    return [port for port, _ in out] == [2]


class _Requests:
    """A request iterator that stays open until ``close()``."""

    def __init__(self) -> None:
        import queue

        self._q: Any = queue.Queue()

    def __iter__(self) -> Any:
        while (m := self._q.get()) is not None:
            yield m

    def put(self, m: Any) -> None:
        self._q.put(m)

    def close(self) -> None:
        self._q.put(None)


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--seconds``, ``--seed``, ``--programs``; exit 1 on any failure."""
    ap = argtypes.Parser(prog="python -m targets.embedded.config_fuzz", description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=argtypes.positive, default=300.0, help="fuzzing time (default 300)")
    ap.add_argument("--seed", type=argtypes.natural, default=1, help="the mutations' seed (default 1)")
    ap.add_argument("--programs", type=argtypes.names(*PROGRAMS), default=list(PROGRAMS),
                    help=f"comma-separated subset of {','.join(PROGRAMS)}")
    a = ap.parse_args(argv)
    rep = run_fuzz(a.seconds, a.seed, tuple(a.programs), log=sys.stdout)
    print(rep.summary())
    for f in rep.failures[:20]:
        print("  FAIL", f)
    return 0 if rep.ok else 1


if __name__ == "__main__":
    sys.exit(main())
