"""Pipeline configs are data, never code (docs/trust.md, "Switches: pipeline configs and
P4Runtime"): hostile BMv2 JSONs are refused with INVALID_ARGUMENT, nothing in them runs,
and the switch keeps forwarding with its old pipeline; plus a time-boxed loader fuzz.

Embedded target only: the compiler under test is the embedded target's.
"""

from __future__ import annotations

import json
import os
import queue
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from finsy.proto import p4i, p4r, p4r_grpc
from google.protobuf import text_format

from targets.embedded import config_check
from targets.embedded.compiler import CompileError, Program
from targets.embedded.config_fuzz import _forwards, run_fuzz
from targets.embedded.p4runtime.server import P4RuntimeServer
from targets.embedded.switch import Switch

ROOT = Path(__file__).resolve().parent.parent
FORWARD = ROOT / "p4src" / "build" / "forward.json"
FORWARD_INFO = ROOT / "p4src" / "build" / "forward.p4info.txt"
#: Seconds of loader fuzz in the suite (the issue allows at most 60); `make bench` runs longer.
FUZZ_SECONDS = float(os.environ.get("GRADNET_FUZZ_SECONDS", "10"))


def _spec() -> dict[str, Any]:
    return json.loads(FORWARD.read_bytes())


def _first(spec: dict[str, Any], pred: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    stack: list[Any] = [spec]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            if pred(x):
                return x
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
    raise LookupError("no such node")


def _hostile(marker: Path) -> dict[str, Callable[[dict[str, Any]], None]]:
    """Named edits of forward.json, each hostile or malformed."""
    run = f"__import__('os').system('touch {marker}')"

    def error_name(s: dict[str, Any]) -> None:
        s["errors"][0][0] = run

    def error_code(s: dict[str, Any]) -> None:  # reached `raise _PE(<code>)` in generated code
        for e in s["errors"]:
            if e[0] == "PacketTooShort":
                e[1] = f"1) or {run} or (1"

    def action_id_module_level(s: dict[str, Any]) -> None:  # reached `def _act<id>(F, D):`
        s["actions"][0]["id"] = f"1(F, D): pass\n{run}\ndef _y"

    def expression_op(s: dict[str, Any]) -> None:
        _first(s, lambda d: d.get("op") == "+" and "left" in d)["op"] = f"+ {run} +"

    def primitive_op(s: dict[str, Any]) -> None:
        _first(s, lambda d: d.get("op") == "assign")["op"] = run

    def newline_in_field_name(s: dict[str, Any]) -> None:
        s["header_types"][1]["fields"][0][0] = f"x\n{run}\n"

    def field_width_string(s: dict[str, Any]) -> None:
        s["header_types"][1]["fields"][0][1] = f"8) or {run} or (8"

    def huge_width(s: dict[str, Any]) -> None:
        s["header_types"][1]["fields"][0][1] = 10 ** 12

    def huge_int(s: dict[str, Any]) -> None:
        s["actions"][0]["id"] = 10 ** 100

    def huge_register(s: dict[str, Any]) -> None:
        s.setdefault("register_arrays", []).append({"name": "r", "id": 99, "size": 1 << 40, "bitwidth": 32})

    def bool_as_int(s: dict[str, Any]) -> None:
        s["actions"][0]["id"] = True

    def float_value(s: dict[str, Any]) -> None:
        s["header_types"][1]["fields"][0][1] = 8.0

    def hexstr_code(s: dict[str, Any]) -> None:
        _first(s, lambda d: d.get("type") == "hexstr")["value"] = f"0x1 if {run} else 0x2"

    def runtime_data_out_of_range(s: dict[str, Any]) -> None:
        a = next(a for a in s["actions"] if a["runtime_data"])
        _first(a, lambda d: d.get("type") == "runtime_data")["value"] = 7

    def string_operand_not_str(s: dict[str, Any]) -> None:
        _first(s, lambda d: d.get("type") == "hexstr").update(type="string", value=[run])

    def deep_nesting(s: dict[str, Any]) -> None:
        deep: Any = []
        for _ in range(200):
            deep = [deep]
        s["annotations"] = deep

    return {f.__name__: f for f in (
        error_name, error_code, action_id_module_level, expression_op, primitive_op,
        newline_in_field_name, field_width_string, huge_width, huge_int, huge_register,
        bool_as_int, float_value, hexstr_code, runtime_data_out_of_range,
        string_operand_not_str, deep_nesting)}


HOSTILE = sorted(_hostile(Path("/nonexistent")))


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_config_is_refused_and_runs_nothing(name: str, tmp_path: Path) -> None:
    marker = tmp_path / "EXECUTED"
    spec = _spec()
    _hostile(marker)[name](spec)
    with pytest.raises(CompileError) as err:
        Program(json.dumps(spec).encode())
    assert str(err.value)  # a message saying what is wrong
    assert not marker.exists()


INJECTIONS = ["error_name", "error_code", "action_id_module_level", "expression_op", "primitive_op",
              "newline_in_field_name", "field_width_string", "hexstr_code", "string_operand_not_str"]


@pytest.mark.parametrize("name", INJECTIONS)
def test_injection_runs_nothing_even_past_the_spec_check(name: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Layers 2 and 3 alone (config_check layer 1 switched off): the value is refused or
    stays data; a packet through an accepted program runs nothing either."""
    monkeypatch.setattr("targets.embedded.compiler.check_spec", lambda spec: None)
    marker = tmp_path / "EXECUTED"
    spec = _spec()
    _hostile(marker)[name](spec)
    try:
        prog = Program(json.dumps(spec).encode())
    except CompileError:
        pass
    else:
        sw = Switch(device_id=1)
        sw.install_program(prog)
        _forwards(sw)
        sw.process(1, b"\x00" * 20)  # too short: the PacketTooShort path
    assert not marker.exists()


@pytest.mark.parametrize("text", [b"{\"header_types\": NaN, \"pipelines\": []}",
                                  b"[" * 100_000 + b"]" * 100_000, b"\xff\xfe", b"{}", b"null"])
def test_malformed_json_is_refused(text: bytes) -> None:
    with pytest.raises(CompileError):
        Program(text)


@pytest.mark.parametrize("src", [
    "def f(F):\n    return __import__('os')",
    "def f(F):\n    return F.__class__",
    "def f(F):\n    import os",
    "def f(F):\n    return open('x')",
    "x = 1\ndef f(F):\n    pass",
    "def f(F, P=print('x')):\n    pass",
    "def f(F):\n    return (lambda: 1)()",
])
def test_generated_source_whitelist(src: str) -> None:
    """Layer 3: whatever slipped into the source, only whitelisted syntax, attributes
    and names pass."""
    with pytest.raises(config_check.SpecError):
        config_check.check_source(src, {})


def test_real_programs_compile_under_the_checks() -> None:
    for path in sorted((ROOT / "p4src" / "build").glob("*.json")):
        prog = Program(path.read_bytes())
        assert prog.ingress is not None, path


# -- over P4Runtime ------------------------------------------------------------------------
class _Stream:
    def __init__(self, stub: p4r_grpc.P4RuntimeStub, election_id: int) -> None:
        self.q: queue.Queue[p4r.StreamMessageRequest | None] = queue.Queue()
        self.q.put(p4r.StreamMessageRequest(arbitration=p4r.MasterArbitrationUpdate(
            device_id=1, election_id=p4r.Uint128(low=election_id))))
        self.responses = stub.StreamChannel(iter(self.q.get, None))
        assert next(self.responses).arbitration.status.code == 0

    def close(self) -> None:
        self.q.put(None)


@pytest.fixture
def served() -> Iterator[tuple[Switch, p4r_grpc.P4RuntimeStub]]:
    sw = Switch(device_id=1)
    server = P4RuntimeServer(sw, "127.0.0.1:0")
    port = server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield sw, p4r_grpc.P4RuntimeStub(channel)
    finally:
        channel.close()
        server.stop(grace=0)
        sw.stop()


def _set(stub: p4r_grpc.P4RuntimeStub, blob: bytes, cookie: int) -> None:
    info = text_format.Parse(FORWARD_INFO.read_text(), p4i.P4Info())
    cfg = p4r.ForwardingPipelineConfig(p4info=info, p4_device_config=blob,
                                       cookie=p4r.ForwardingPipelineConfig.Cookie(cookie=cookie))
    stub.SetForwardingPipelineConfig(p4r.SetForwardingPipelineConfigRequest(
        device_id=1, election_id=p4r.Uint128(low=1), config=cfg,
        action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT), timeout=30)


def test_hostile_config_over_p4runtime_keeps_the_old_pipeline(
        served: tuple[Switch, p4r_grpc.P4RuntimeStub], tmp_path: Path) -> None:
    sw, stub = served
    stream = _Stream(stub, 1)
    try:
        _set(stub, FORWARD.read_bytes(), cookie=7)
        running = sw.program
        assert _forwards(sw)
        marker = tmp_path / "EXECUTED"
        for name, edit in _hostile(marker).items():
            spec = _spec()
            edit(spec)
            with pytest.raises(grpc.RpcError) as err:
                _set(stub, json.dumps(spec).encode(), cookie=8)
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, name
            assert "Invalid device config" in err.value.details(), name
            assert sw.program is running, name
        assert not marker.exists()
        got = stub.GetForwardingPipelineConfig(p4r.GetForwardingPipelineConfigRequest(
            device_id=1, response_type=p4r.GetForwardingPipelineConfigRequest.COOKIE_ONLY))
        assert got.config.cookie.cookie == 7
        assert _forwards(sw)  # the old pipeline still routes a packet out of port 2
    finally:
        stream.close()


def test_loader_fuzz_within_budget() -> None:
    """Mutated real JSONs through SetForwardingPipelineConfig: only OK or INVALID_ARGUMENT,
    nothing runs, the server survives and still forwards (seeded; counts printed)."""
    assert FUZZ_SECONDS <= 60
    rep = run_fuzz(FUZZ_SECONDS, seed=int(os.environ.get("GRADNET_FUZZ_SEED", "1")))
    print(rep.summary())
    assert rep.cases > 0 and rep.rejected > 0
    assert rep.ok, rep.failures[:5]
