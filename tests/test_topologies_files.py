"""Tests of topology files: the examples, explicit ports, and every malformed file's
error naming the file, the line and the problem.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.topology_checks import EXAMPLES, check_ports
from topologies import (
    TopologyError,
    fat_tree,
    load,
)

# ----------------------------------------------------------------------------- files


def test_examples_load() -> None:
    dumbbell = load(EXAMPLES / "dumbbell.yaml")
    assert dumbbell.name == "dumbbell"
    assert dumbbell.hosts() == ["h1", "h2", "h3", "h4"]
    assert dumbbell.port("s1", "s2") == 10 and dumbbell.capacity("s1", "s2") == 10.0
    assert dumbbell.capacity("h1", "s1") == 100.0
    assert dumbbell.host_ip("h4") == "10.0.0.44"
    assert dumbbell.node("h4")["rack"] == "right"
    assert dumbbell.node("s1")["role"] == "edge"
    check_ports(dumbbell)
    triangle = load(EXAMPLES / "triangle.json")
    assert len(triangle.switches()) == 3 and triangle.capacity("s3", "s1") == 20.0
    assert triangle.peer("s1", 3) == ("s3", 3)
    tree = load(EXAMPLES / "fat_tree_k4.yaml")
    assert tree.to_dict() == fat_tree(4, bw=100).to_dict()


def test_explicit_ports_are_reserved(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            hosts: [h1, h2, h3]
            switches: [s1]
            links:
              - [h1, s1]
              - [h2, s1]
              - {nodes: [h3, s1], ports: {s1: 2}}
            """
        )
    )
    topo = load(path)
    # h2 skips port 2 because a later link asks for it by number
    assert [topo.port("s1", h) for h in ("h1", "h2", "h3")] == [1, 3, 2]
    assert topo.name == "p"


YAML_OK = """\
name: t
hosts: [h1, h2]
switches: [s1, s2]
links:
  - [h1, s1]
  - [h2, s2]
  - [s1, s2]
"""

BAD_FILES = [
    # (file name, content, expected message)
    ("missing.yaml", "hosts: [h1]\nswitches: [s1]\n", "missing.yaml: missing field 'links'"),
    (
        "unknown_node.yaml",
        YAML_OK.replace("  - [s1, s2]", "  - [s1, s9]"),
        "unknown_node.yaml:7: links[2].nodes[1]: unknown node 's9'",
    ),
    (
        "dup_name.yaml",
        "hosts: [h1, h2]\nswitches:\n  - s1\n  - h2\nlinks: []\n",
        "dup_name.yaml:4: switches[1].name: duplicate node name 'h2' (first at hosts[1])",
    ),
    (
        "dup_name_map.yaml",
        "hosts:\n  - name: h1\n  - name: h1\nswitches: []\nlinks: []\n",
        "dup_name_map.yaml:3: hosts[1].name: duplicate node name 'h1' (first at hosts[0])",
    ),
    (
        "bad_bw.yaml",
        YAML_OK.replace("  - [s1, s2]", "  - nodes: [s1, s2]\n    bw: -5"),
        "bad_bw.yaml:8: links[2].bw: must be a positive number of Mbit/s, got -5",
    ),
    (
        "bad_bw_str.yaml",
        YAML_OK.replace("  - [s1, s2]", "  - {nodes: [s1, s2], bw: fast}"),
        "bad_bw_str.yaml:7: links[2].bw: must be a number of Mbit/s, got 'fast'",
    ),
    (
        "bad_default_bw.yaml",
        "bw: 0\n" + YAML_OK,
        "bad_default_bw.yaml:1: bw: must be a positive number of Mbit/s, got 0",
    ),
    (
        "unknown_builder.yaml",
        "# comment\nbuilder: torus\nk: 4\n",
        "unknown_builder.yaml:2: builder: unknown builder 'torus' (known: bcube, fat_tree,",
    ),
    (
        "builder_bad_arg.yaml",
        "builder: fat_tree\nk: 5\n",
        "builder_bad_arg.yaml:2: k: must be even, got 5",
    ),
    (
        "builder_unknown_arg.yaml",
        "builder: star\nn: 3\nradix: 4\n",
        "builder_unknown_arg.yaml:3: radix: unknown argument of builder 'star'",
    ),
    (
        "builder_missing_arg.yaml",
        "builder: bcube\nn: 3\n",
        "builder_missing_arg.yaml:1: builder: builder 'bcube' needs argument 'k'",
    ),
    (
        "syntax.yaml",
        "hosts: [h1, h2\nswitches: [s1]\nlinks: []\n",
        "syntax.yaml:2: YAML syntax error: while parsing a flow sequence",
    ),
    (
        "tab.yaml",
        "hosts:\n\t- h1\n",
        "tab.yaml:2: YAML syntax error:",
    ),
    (
        "dup_key.yaml",
        "hosts: [h1]\nswitches: [s1]\nhosts: [h2]\nlinks: []\n",
        "dup_key.yaml:3: duplicate key 'hosts' (first on line 1)",
    ),
    (
        "unknown_field.yaml",
        YAML_OK + "colour: blue\n",
        "unknown_field.yaml:8: colour: unknown field",
    ),
    (
        "link_field.yaml",
        YAML_OK.replace("  - [s1, s2]", "  - {nodes: [s1, s2], capacity: 5}"),
        "link_field.yaml:7: links[2].capacity: unknown field",
    ),
    (
        "link_missing_nodes.yaml",
        YAML_OK.replace("  - [s1, s2]", "  - {bw: 5}"),
        "link_missing_nodes.yaml:7: links[2]: missing field 'nodes'",
    ),
    (
        "link_three.yaml",
        YAML_OK.replace("  - [s1, s2]", "  - [s1, s2, h1]"),
        "link_three.yaml:7: links[2].nodes: must list exactly two node names",
    ),
    (
        "port_clash.yaml",
        YAML_OK.replace("  - [h2, s2]", "  - {nodes: [h2, s2], ports: {s2: 4}}").replace(
            "  - [s1, s2]", "  - {nodes: [s1, s2], ports: {s2: 4}}"
        ),
        "port_clash.yaml:7: links[2].ports.s2: port 4 of 's2' is already used by links[1]",
    ),
    (
        "port_foreign.yaml",
        YAML_OK.replace("  - [s1, s2]", "  - {nodes: [s1, s2], ports: {h1: 1}}"),
        "port_foreign.yaml:7: links[2].ports.h1: 'h1' is not an end of this link",
    ),
    (
        "cpu_port.yaml",
        YAML_OK.replace("  - [s1, s2]", "  - {nodes: [s1, s2], ports: {s1: 255}}"),
        "cpu_port.yaml:7: links[2]: switch 's1': port 255 outside 1..510 or is the CPU port",
    ),
    (
        "host_gap.yaml",
        YAML_OK.replace("  - [h2, s2]", "  - {nodes: [h2, s2], ports: {h2: 1}}"),
        "host_gap.yaml:2: hosts[1]: host 'h2' has no NIC 0 but a higher one",
    ),
    (
        "host_host.yaml",
        YAML_OK.replace("  - [s1, s2]", "  - [h1, h2]"),
        "host_host.yaml:7: links[2]: link 'h1'-'h2' joins two hosts",
    ),
    (
        "dup_link.yaml",
        YAML_OK + "  - [s2, s1]\n",
        "dup_link.yaml:8: links[3]: duplicate link 's2'-'s1'",
    ),
    (
        "lonely_host.yaml",
        YAML_OK.replace("hosts: [h1, h2]", "hosts: [h1, h2, h3]"),
        "lonely_host.yaml:2: hosts[2]: host 'h3' has no link",
    ),
    (
        "bad_ip.yaml",
        YAML_OK.replace("hosts: [h1, h2]", "hosts: [h1, {name: h2, ip: 10.0.0.300}]"),
        "bad_ip.yaml:2: hosts[1]: host h2 ip[0]: invalid IPv4 address '10.0.0.300'",
    ),
    (
        "dup_ip.yaml",
        YAML_OK.replace("hosts: [h1, h2]", "hosts: [h1, {name: h2, ip: 10.0.0.1}]"),
        "dup_ip.yaml:6: links[1]: address 10.0.0.1 of h2-eth0 is already used by h1-eth0",
    ),
    (
        "too_many_ips.yaml",
        YAML_OK.replace("hosts: [h1, h2]", "hosts: [h1, {name: h2, ip: [10.0.0.7, 10.1.0.7]}]"),
        "too_many_ips.yaml:2: hosts[1].ip: 2 addresses for 1 NIC(s)",
    ),
    (
        "bad_name.yaml",
        YAML_OK.replace("switches: [s1, s2]", "switches: [s1, s2, 7]"),
        "bad_name.yaml:3: switches[2]: must be a name or a mapping with 'name', got 7",
    ),
    (
        "reserved.yaml",
        YAML_OK.replace("switches: [s1, s2]", "switches: [s1, {name: s2, attrs: {kind: x}}]"),
        "reserved.yaml:3: switches[1].attrs.kind: reserved attribute name",
    ),
    (
        "reserved_arg.yaml",
        YAML_OK.replace(
            "hosts: [h1, h2]", "hosts:\n  - h1\n  - name: h2\n    attrs:\n      name: x"
        ),
        "reserved_arg.yaml:6: hosts[1].attrs.name: reserved attribute name",
    ),
    ("empty.yaml", "# nothing\n", "empty.yaml: topology file is empty"),
    ("list.yaml", "- h1\n", "list.yaml: top level must be a mapping, got list"),
    (
        "links_not_list.yaml",
        "hosts: [h1]\nswitches: [s1]\nlinks: {a: b}\n",
        "links_not_list.yaml:3: links: must be a list, got dict",
    ),
    (
        "syntax.json",
        '{"hosts": ["h1"],\n "switches": ["s1"]\n "links": []}\n',
        "syntax.json:3: JSON syntax error: Expecting ',' delimiter",
    ),
    (
        "unknown_node.json",
        '{"hosts": ["h1"],\n "switches": ["s1"],\n "links": [\n  ["h1", "s2"]\n ]}\n',
        "unknown_node.json:4: links[0].nodes[1]: unknown node 's2'",
    ),
    (
        "dup_key.json",
        '{"hosts": ["h1"], "hosts": ["h2"], "switches": [], "links": []}',
        "dup_key.json: duplicate key 'hosts'",
    ),
    (
        "builder.json",
        '{"builder": "fat_tree",\n "k": 4,\n "bw": "x"}',
        "builder.json:3: bw: must be a number of Mbit/s, got 'x'",
    ),
]


@pytest.mark.parametrize(("name", "content", "message"), BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_bad_files(tmp_path: Path, name: str, content: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(TopologyError) as info:
        load(path)
    text = str(info.value)
    assert text.startswith(str(tmp_path) + "/")
    assert message in text, text
    assert info.value.source == str(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TopologyError, match="cannot read topology file"):
        load(tmp_path / "nope.yaml")


def test_error_attributes(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(YAML_OK.replace("  - [s1, s2]", "  - [s1, s9]"))
    with pytest.raises(TopologyError) as info:
        load(path)
    err = info.value
    assert isinstance(err, ValueError)
    assert (err.field, err.line, err.reason) == ("links[2].nodes[1]", 7, "unknown node 's9'")
