"""``gradctl ndn``: clear usage errors without a network (the network-level use of
deploy --manage and show is in test_ndn_network.py)."""

from __future__ import annotations

import pytest

from controller.cli import main


@pytest.mark.parametrize("argv, message", [
    (["ndn", "deploy", "star:3", "--run-dir", "/nonexistent-gradnet"], "does not exist"),
    (["ndn", "deploy", "star:3", "--run-dir", "/tmp", "--ps", "h9"], "unknown PS host 'h9'"),
    (["ndn", "deploy", "star:3", "--run-dir", "/tmp", "--gpus", "h1,h7"], "is not a GPU host"),
    (["ndn", "deploy", "star:3", "--run-dir", "/tmp", "--pit-lifetime", "0"], "--pit-lifetime"),
    (["ndn", "deploy", "star:3", "--run-dir", "/tmp", "--loss", "s1=0.1"], "bad loss spec"),
    (["ndn", "show", "star:3", "--run-dir", "/tmp"], "no P4Runtime socket"),
    (["ndn", "show", "nope:3", "--run-dir", "/tmp"], "nope"),
    (["ndn", "unsubscribe", "star:3", "--run-dir", "/tmp", "--gpu", "h9"], "is not a GPU host"),
    (["ndn", "unsubscribe", "star:3", "--run-dir", "/tmp", "--gpu", "h1"], "is not a GPU host"),
    (["ndn", "unsubscribe", "star:3", "--run-dir", "/tmp", "--gpu", "h2"], "no P4Runtime socket"),
])
def test_usage_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("gradctl: error: ") and message in err, err
