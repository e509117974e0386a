"""The IP-multicast PS baseline of the NDN PS (issue 23) in the time-to-accuracy harness:
``--scheme ndn-ipmc``. The same agents and work as ``experiments/train_ndn.py`` (same model,
shards, batches, SGD step, evaluations, bit-exact weights), with ``--transport ipmc``
through ``forward.p4`` and the controller's multicast tree from the PS to every GPU.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from experiments import train_ndn
from experiments.train import Plan, RunRecord, Setting

P4 = "forward.p4 + multicast tree"
KILL_SUPPORTED = False
TRANSPORT = "ipmc"


def setting(args: argparse.Namespace, shared: Setting) -> Setting:
    """The shared topology (name bounds checked)."""
    return train_ndn.baseline_setting(args, shared)


def deploy(net: Any, setting: Setting, args: argparse.Namespace, plan: Plan) -> None:
    """``forward.p4`` for this baseline."""
    train_ndn.deploy_baseline(TRANSPORT, net, setting, plan)


def run(net: Any, args: argparse.Namespace, plan: Plan, setting: Setting, seed: int, d: Path) -> RunRecord:
    """One synchronous training run."""
    return train_ndn.run(net, args, plan, setting, seed, d, transport=TRANSPORT, scheme="ndn-ipmc")
