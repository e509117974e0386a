"""The loss sweep (bench/loss_bench.py, ``python -m bench loss``), reduced: two schemes
at 5 % loss on the switch-to-switch link of ``linear:2,3`` train a few steps and end with
weights bit-identical to their lossless runs (every step's sum exact), on every rank.

The full sweep (every scheme, 0/1/5/10 %) is in ``make bench``.
"""

from __future__ import annotations

import pytest

from bench import loss_bench
from experiments import train as harness
from tests.netenv import TARGET, net_skip_reason


def test_the_lossy_link_of_each_scheme_is_between_two_forwarding_elements():
    for scheme in loss_bench.SCHEMES:
        args = loss_bench.harness_args(scheme, "embedded", 3, 60.0, 20.0)
        setting = harness.make_plan(args).settings[scheme]
        _label, ports = loss_bench.lossy_link(scheme, setting)
        topo = setting.topo
        if scheme == "token":
            assert ports == [("nic1", 2), ("lan", 1)] # both ends of nic1 <-> lan
        elif scheme == "differentiated":  # its star has host links only: the port to the PS
            assert ports == [("s1", topo.port("s1", setting.ps))]
        elif scheme == "bml":  # BCube: a level-1 switch's ports, to servers that relay
            assert {s for s, _ in ports} == {"s4"} and len(ports) == 2
        else:  # both directions of the s1 <-> s2 link
            assert ports == [("s1", topo.port("s1", "s2")), ("s2", topo.port("s2", "s1"))]
            assert all(not topo.is_host(topo.ports(s)[p]) for s, p in ports)


needs_net = pytest.mark.skipif(net_skip_reason("ina", "forward") is not None,
                               reason=net_skip_reason("ina", "forward") or "")


# the suite checks sums under 5 % link loss per scheme (test_experiment_options, test_ndn_network,
# test_bcube_network, test_token_network); this is `python -m bench loss` at one rate
@pytest.mark.long
@needs_net
@pytest.mark.net
@pytest.mark.parametrize("scheme", ["ina", "ring"])
def test_five_percent_loss_on_a_fabric_link_keeps_the_sums_exact(scheme, tmp_path):
    label, cells = loss_bench.sweep(scheme, [0.0, 0.05], [0], TARGET, steps=3, max_time=60.0,
                                    bw=20.0, out=tmp_path)
    assert "s1:" in label and "s2:" in label
    lossless, lossy = cells
    assert (lossless.rate, lossy.rate) == (0.0, 0.05)
    for c in cells:
        assert c.completed == 1 and c.identical == 1, c.errors
    # the same weights as without loss: every one of the 3 steps applied the exact sum
    assert lossy.exact == 1
    if scheme == "ina":  # thousands of UDP packets cross the link: the loss really hit them
        assert lossy.dropped and lossy.dropped[0] > 0
        assert lossy.retrans[0] > lossless.retrans[0]


def test_stragglers_reach_the_harness() -> None:
    """``--slow`` and ``--compute-time`` of the bench are the harness's own options."""
    args = loss_bench.harness_args("ina", "embedded", 3, 60.0, 20.0,
                                   ["--slow", "h4=2", "--compute-time", "0.05"])
    assert args.slow == ["h4=2"] and args.compute_time == 0.05
