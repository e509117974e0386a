"""The INA routing-policy file has one writer (wire.ina_policy.policy_json): the
controller's InaJob, the simulator's plan and Policy.to_dict all go through it."""

from __future__ import annotations

from wire.ina_policy import POLICY_VERSION, Policy, policy_json


def test_policy_json_writes_what_it_is_given() -> None:
    d = policy_json(3, "10.0.0.1", ["10.0.0.2", "10.0.0.3"], 2, tags=[[5, 0], 5],
                    fanin={5: [2, 1]}, sd=5, partial_tags={}, values_per_packet=128)
    assert d == {"version": POLICY_VERSION, "job": 3, "ps": "10.0.0.1", "values_per_packet": 128,
                 "workers": ["10.0.0.2", "10.0.0.3"], "num_fragments": 2, "tags": [[5, 0], 5],
                 "fanin": {"5": [2, 1]}, "sd": {"id": 5}, "partial_tags": {}}
    # the PS baseline: every tag 0, no s_d, no tables
    assert policy_json(1, "10.0.0.1", ["10.0.0.2"], 4, port=40000) == {
        "version": POLICY_VERSION, "job": 1, "ps": "10.0.0.1", "port": 40000,
        "values_per_packet": 64, "workers": ["10.0.0.2"], "num_fragments": 4, "tags": 0,
        "sd": None}


def test_policy_reads_what_the_writer_wrote() -> None:
    d = policy_json(3, "10.0.0.1", ["10.0.0.2", "10.0.0.3"], 2, tags=[[5, 0], [5, 5]],
                    sd=5, sd_ip="10.255.0.5", scale_bits=12, number_format="bfp")
    pol = Policy.from_dict(d)
    assert pol.sd is not None and (pol.sd.id, pol.sd.ip) == (5, "10.255.0.5")
    assert pol.scale_bits == 12 and pol.number_format == "bfp"
    assert pol.fanin[5].tolist() == [2, 1]  # derived: workers tagging (5, f)
    again = Policy.from_dict(pol.to_dict())
    assert again.to_dict() == pol.to_dict()
    assert pol.to_dict()["tags"] == [[5, 0], 5]  # compact: a uniform row is one integer


def test_every_worker_knows_each_fragments_path() -> None:
    """A fragment's path is every worker's switch for it (and where partials merge):
    RESULTs of one path reach a worker in order, so a worker counts only those as
    evidence of a lost one, as the PS counts completions (docs/ina.md, "Loss recovery")."""
    from hosts.ina.recovery import JobRecovery

    d = policy_json(1, "10.0.0.1", ["10.0.0.2", "10.0.0.3"], 4,
                    tags=[[5, 6, 5, 0], [5, 5, 5, 0]], sd=5)
    pol = Policy.from_dict(d)
    paths = [pol.for_worker(r).paths.tolist() for r in range(2)]
    assert paths[0] == paths[1] == [0, 1, 0, 2]  # rank 1's row alone would merge 0 and 1
    assert JobRecovery(2, 4, pol.tags, pol.partial_tags, 5).path == paths[0]
    assert pol.for_worker(0).prefix(2).paths.tolist() == [0, 1]
