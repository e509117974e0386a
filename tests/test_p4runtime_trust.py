"""P4Runtime as the spec says, on the embedded target (docs/trust.md, "Switches: pipeline
configs and P4Runtime"): TLS and mutual TLS with a CA made at test time (openssl),
``gradnet-switch``'s simple_switch_grpc-shaped TLS flags and its 127.0.0.1 default, and
the controller's roles: a deploy and the NDN persistent-PIT manager are both primary,
each of its own role, so neither locks the other out.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from finsy import P4TableAction, P4TableEntry, P4TableMatch

from controller.p4runtime import Program, SwitchSession
from controller.roles import DEPLOY, NDN_PIT, ROLES, SHELL
from targets.embedded.cli import build_parser
from targets.embedded.p4runtime.server import P4RuntimeServer, ServerTls
from targets.embedded.switch import Switch
from targets.launch import stop_process
from targets.p4rt_client import ClientTls, P4RuntimeClient, P4RuntimeError

ROOT = Path(__file__).resolve().parent.parent
FORWARD = ROOT / "p4src" / "build" / "forward.json"
FORWARD_INFO = ROOT / "p4src" / "build" / "forward.p4info.txt"

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl CLI not installed")


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _ca(d: Path, name: str) -> None:
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
             "-keyout", f"{name}.key", "-out", f"{name}.pem", cwd=d)


def _leaf(d: Path, name: str, ca: str, san: str) -> None:
    (d / f"{name}.ext").write_text(f"subjectAltName={san}\n")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout", f"{name}.key",
             "-out", f"{name}.csr", cwd=d)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
             "-CAcreateserial", "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.pem", cwd=d)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA with a server (127.0.0.1, localhost) and a client certificate, and a second,
    unrelated CA with a client certificate of its own."""
    d = tmp_path_factory.mktemp("pki")
    _ca(d, "ca")
    _ca(d, "other-ca")
    _leaf(d, "server", "ca", "IP:127.0.0.1,DNS:localhost")
    _leaf(d, "client", "ca", "DNS:controller")
    _leaf(d, "intruder", "other-ca", "DNS:intruder")
    return d


def _serve(tls: ServerTls | None) -> tuple[Switch, P4RuntimeServer, str]:
    sw = Switch(device_id=1)
    server = P4RuntimeServer(sw, "127.0.0.1:0", tls=tls)
    port = server.start()
    return sw, server, f"127.0.0.1:{port}"


@pytest.fixture
def tls_server(pki: Path) -> Iterator[str]:
    sw, server, addr = _serve(ServerTls(pki / "server.pem", pki / "server.key"))
    try:
        yield addr
    finally:
        server.stop(grace=0)
        sw.stop()


@pytest.fixture
def mtls_server(pki: Path) -> Iterator[str]:
    sw, server, addr = _serve(ServerTls(pki / "server.pem", pki / "server.key", pki / "ca.pem", client_auth=True))
    try:
        yield addr
    finally:
        server.stop(grace=0)
        sw.stop()


def _connect(addr: str, tls: ClientTls | None, **kw: object) -> P4RuntimeClient:
    return P4RuntimeClient(addr, device_id=1, tls=tls, timeout=10, **kw)  # type: ignore[arg-type]


def test_tls_connect_works(tls_server: str, pki: Path) -> None:
    with _connect(tls_server, ClientTls(cacert=pki / "ca.pem")) as c:
        assert c.is_primary
        c.set_pipeline(FORWARD_INFO, FORWARD)  # a real RPC over the TLS channel


def test_tls_with_the_wrong_ca_fails(tls_server: str, pki: Path) -> None:
    with pytest.raises(P4RuntimeError) as err:
        _connect(tls_server, ClientTls(cacert=pki / "other-ca.pem"))
    assert err.value.code == "UNAVAILABLE"


def test_plain_client_cannot_talk_to_a_tls_server(tls_server: str) -> None:
    with pytest.raises(P4RuntimeError) as err:
        _connect(tls_server, None)
    assert err.value.code == "UNAVAILABLE"


def test_mutual_tls(mtls_server: str, pki: Path) -> None:
    with pytest.raises(P4RuntimeError):  # no client certificate
        _connect(mtls_server, ClientTls(cacert=pki / "ca.pem"))
    with pytest.raises(P4RuntimeError):  # a certificate the switch's CA did not sign
        _connect(mtls_server, ClientTls(cacert=pki / "ca.pem", cert=pki / "intruder.pem", key=pki / "intruder.key"))
    with _connect(mtls_server, ClientTls(cacert=pki / "ca.pem", cert=pki / "client.pem", key=pki / "client.key")) as c:
        assert c.is_primary
        c.set_pipeline(FORWARD_INFO, FORWARD)


def test_client_tls_from_env(pki: Path) -> None:
    assert ClientTls.from_env({}) is None
    tls = ClientTls.from_env({"GRADNET_P4RT_CACERT": str(pki / "ca.pem"), "GRADNET_P4RT_TARGET_NAME": "localhost"})
    assert tls == ClientTls(str(pki / "ca.pem"), None, None, "localhost")
    with pytest.raises(P4RuntimeError):  # a certificate without its key
        ClientTls(cacert=pki / "ca.pem", cert=pki / "client.pem").channel_credentials()


def test_controller_session_over_mutual_tls(mtls_server: str, pki: Path) -> None:
    """The controller's finsy session (deploy) takes the same TLS options."""
    tls = ClientTls(cacert=pki / "ca.pem", cert=pki / "client.pem", key=pki / "client.key")
    prog = Program.load(FORWARD)

    async def main() -> None:
        sess = SwitchSession("s1", mtls_server, 1, prog, tls=tls)
        await sess.open(timeout=20)
        try:
            assert sess.switch.is_primary
        finally:
            await sess.close()

    asyncio.run(main())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_gradnet_switch_defaults_to_localhost_and_takes_bmv2_tls_flags(pki: Path, tmp_path: Path) -> None:
    args = build_parser().parse_args([])
    assert args.grpc_server_addr == "127.0.0.1:9559"
    # simple_switch_grpc's TLS flags, with its names
    args = build_parser().parse_args(["--grpc-server-ssl", "--grpc-server-cacert", "ca", "--grpc-server-cert", "c",
                                      "--grpc-server-key", "k", "--grpc-server-with-client-auth"])
    assert (args.grpc_server_ssl, args.grpc_server_cacert, args.grpc_server_with_client_auth) == (True, "ca", True)
    bad = subprocess.run([sys.executable, "-m", "targets.embedded.cli", "--no-p4", "--grpc-server-ssl"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--grpc-server-cert" in bad.stderr
    addr = f"127.0.0.1:{_free_port()}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "targets.embedded.cli", "--no-p4", "--device-id", "1", "--grpc-server-addr", addr,
         "--grpc-server-ssl", "--grpc-server-cert", str(pki / "server.pem"), "--grpc-server-key",
         str(pki / "server.key"), "--grpc-server-cacert", str(pki / "ca.pem"), "--grpc-server-with-client-auth"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert "listening on" in proc.stdout.readline()
        with _connect(addr, ClientTls(cacert=pki / "ca.pem", cert=pki / "client.pem", key=pki / "client.key")) as c:
            assert c.is_primary
            c.set_pipeline(FORWARD_INFO, FORWARD)
        with pytest.raises(P4RuntimeError):
            _connect(addr, ClientTls(cacert=pki / "ca.pem"))
    finally:
        stop_process(proc)


def test_controller_roles_do_not_lock_each_other_out() -> None:
    """A deploy (default role) and the NDN persistent-PIT manager (role ndn-pit) are both
    primary and both write; a user's shell write gets its own role too."""
    assert len({r.election_id for r in ROLES}) == len(ROLES)  # distinct: BMv2 has no roles
    sw, server, addr = _serve(None)
    prog = Program.load(FORWARD)

    def route() -> P4TableEntry:  # finsy marks an entry with its update type: a fresh one each time
        return P4TableEntry("ipv4_routes", match=P4TableMatch({"hdr.ipv4.dst_addr": "10.0.1.0/24"}),
                            action=P4TableAction("set_next_hop", dmac=1, port=1))

    def mac() -> P4TableEntry:
        return P4TableEntry("port_macs", match=P4TableMatch({"standard_metadata.egress_port": 1}),
                            action=P4TableAction("set_source_mac", smac=2))

    async def main() -> None:
        deploy = SwitchSession("s1", addr, 1, prog)
        await deploy.open(timeout=20)
        try:
            with P4RuntimeClient(addr, 1, election_id=NDN_PIT.election_id, role=NDN_PIT.name) as manager:
                manager.use_schema(FORWARD_INFO)
                assert deploy.switch.is_primary and manager.is_primary
                await deploy.write([+route()])
                manager.write(+mac())
                with P4RuntimeClient(addr, 1, election_id=SHELL.election_id, role=SHELL.name) as shell:
                    shell.use_schema(FORWARD_INFO)
                    assert shell.is_primary
                    shell.write(-mac())
                    # a second manager with a lower id is its role's backup: refused
                    with P4RuntimeClient(addr, 1, election_id=NDN_PIT.election_id - 1, role=NDN_PIT.name) as late:
                        late.use_schema(FORWARD_INFO)
                        assert not late.is_primary
                        with pytest.raises(P4RuntimeError) as err:
                            late.write(+mac())
                        assert err.value.code == "PERMISSION_DENIED"
                await deploy.write([-route()])
        finally:
            await deploy.close()

    try:
        asyncio.run(main())
        assert DEPLOY.name == ""  # only the default role may change pipelines
    finally:
        server.stop(grace=0)
        sw.stop()
