"""Topology files: JSON or YAML, either an explicit graph or a builder call.

The format is documented in ``topologies/README.md``. Every problem is reported as a
:class:`~topologies.base.TopologyError` whose message names the file, the line (when the
parser knows it) and the field, e.g. ``net.yaml:14: links[3]: unknown node 's9'``.
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Mapping
from typing import Any

import yaml

from .base import (
    RESERVED_NODE_ATTRS,
    FileFormat,
    Topology,
    TopologyError,
    check_bw,
    register_file_format,
)
from .builders import BUILDERS

Path = tuple[str | int, ...]

_TOP_KEYS = {"name", "bw", "grpc_base", "hosts", "switches", "links"}
_HOST_KEYS = {"name", "ip", "attrs"}
_SWITCH_KEYS = {"name", "role", "device_id", "attrs"}
_LINK_KEYS = {"nodes", "bw", "ports"}
_RESERVED_ATTRS = _HOST_KEYS | _SWITCH_KEYS | {"ips"} | RESERVED_NODE_ATTRS


def _field(path: Path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


class _Ctx:
    """Where the data came from, to turn a field path into ``file:line: field``."""

    def __init__(self, source: str | None, lines: Mapping[Path, int] | None) -> None:
        self.source = source
        self.lines = lines or {}

    def line(self, path: Path) -> int | None:
        # The innermost enclosing node that has a mark (scalars inside flow lists do too).
        for i in range(len(path), 0, -1):  # the root's line 1 would only mislead
            if path[:i] in self.lines:
                return self.lines[path[:i]]
        return None

    def error(self, path: Path, reason: str) -> TopologyError:
        return TopologyError(
            reason, field=_field(path) or None, line=self.line(path), source=self.source
        )


# ----------------------------------------------------------------------------- parsing


def _yaml_marks(node: yaml.Node, path: Path, out: dict[Path, int], ctx: _Ctx) -> None:
    """Record the 1-based line of every node under ``path``; reject duplicate keys."""
    out.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else str(key.start_mark)
            line = key.start_mark.line + 1
            if name in seen:
                raise TopologyError(
                    f"duplicate key {name!r} (first on line {seen[name]})",
                    field=_field(path) or None,
                    line=line,
                    source=ctx.source,
                )
            seen[name] = line
            out[path + (name,)] = line  # the key's line reads best in messages
            _yaml_marks(value, path + (name,), out, ctx)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _yaml_marks(item, path + (i,), out, ctx)


def _parse_yaml(text: str, ctx: _Ctx) -> tuple[Any, dict[Path, int]]:
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text) if root is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        reason = " ".join(p for p in (exc.context, exc.problem) if p)
        raise TopologyError(
            f"YAML syntax error: {reason}",
            line=mark.line + 1 if mark else None,
            source=ctx.source,
        ) from None
    except yaml.YAMLError as exc:
        raise TopologyError(f"YAML syntax error: {exc}", source=ctx.source) from None
    lines: dict[Path, int] = {}
    if root is not None:
        _yaml_marks(root, (), lines, ctx)
    return data, lines


def _parse_json(text: str, ctx: _Ctx) -> tuple[Any, dict[Path, int]]:
    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise TopologyError(f"duplicate key {key!r}", source=ctx.source)
            out[key] = value
        return out

    try:
        data = json.loads(text, object_pairs_hook=no_duplicates)
    except json.JSONDecodeError as exc:
        raise TopologyError(
            f"JSON syntax error: {exc.msg} (column {exc.colno})",
            line=exc.lineno,
            source=ctx.source,
        ) from None
    # JSON has no marks of its own; its flow syntax is YAML, so borrow YAML's when we can.
    try:
        _, lines = _parse_yaml(text, ctx)
    except TopologyError:
        lines = {}
    return data, lines


def loads(text: str, fmt: str = "yaml", source: str | None = None) -> Topology:
    """Parse topology text; ``fmt`` is ``"json"`` or ``"yaml"``."""
    ctx = _Ctx(source, None)
    if fmt == "json":
        data, lines = _parse_json(text, ctx)
    elif fmt == "yaml":
        data, lines = _parse_yaml(text, ctx)
    else:
        raise TopologyError(f"unknown format {fmt!r} (json or yaml)", source=source)
    return from_data(data, source=source, lines=lines)


def load(path: str | os.PathLike[str]) -> Topology:
    """Load a topology file: ``*.json`` is read as JSON, anything else as YAML."""
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise TopologyError(f"cannot read topology file: {exc}", source=path) from None
    fmt = "json" if path.lower().endswith(".json") else "yaml"
    topo = loads(text, fmt, source=path)
    return topo


# ----------------------------------------------------------------------------- schema


def _plain_value(value: Any) -> Any:
    """Lists in free-form attributes become tuples (hashable, like builders' ``digits``)."""
    if isinstance(value, list):
        return tuple(_plain_value(v) for v in value)
    return value


def _check_keys(ctx: _Ctx, path: Path, entry: Mapping[str, Any], allowed: set[str]) -> None:
    for key in entry:
        if key not in allowed:
            raise ctx.error(
                path + (str(key),), f"unknown field (expected one of {', '.join(sorted(allowed))})"
            )


def _attrs(ctx: _Ctx, path: Path, entry: Mapping[str, Any]) -> dict[str, Any]:
    attrs = entry.get("attrs", {})
    if not isinstance(attrs, Mapping):
        raise ctx.error(path + ("attrs",), "must be a mapping of attribute names to values")
    for key in attrs:
        # These are arguments of add_host/add_switch, or attributes the model manages.
        if key in _RESERVED_ATTRS:
            raise ctx.error(path + ("attrs", str(key)), "reserved attribute name")
    return {str(k): _plain_value(v) for k, v in attrs.items()}


def _node_entry(ctx: _Ctx, path: Path, entry: Any, allowed: set[str]) -> dict[str, Any]:
    """A host/switch entry is a bare name or a mapping with at least ``name``."""
    if isinstance(entry, str):
        return {"name": entry}
    if not isinstance(entry, Mapping):
        raise ctx.error(path, f"must be a name or a mapping with 'name', got {entry!r}")
    if "name" not in entry:
        raise ctx.error(path, "missing field 'name'")
    _check_keys(ctx, path, entry, allowed)
    return dict(entry)


def _list(ctx: _Ctx, data: Mapping[str, Any], key: str) -> list[Any]:
    if key not in data:
        raise ctx.error((), f"missing field {key!r}")
    value = data[key]
    if not isinstance(value, list):
        raise ctx.error((key,), f"must be a list, got {type(value).__name__}")
    return value


def _from_builder(ctx: _Ctx, data: Mapping[str, Any]) -> Topology:
    name = data["builder"]
    if not isinstance(name, str) or name not in BUILDERS:
        raise ctx.error(
            ("builder",), f"unknown builder {name!r} (known: {', '.join(sorted(BUILDERS))})"
        )
    func = BUILDERS[name]
    params = inspect.signature(func).parameters
    args = {k: v for k, v in data.items() if k not in ("builder", "name")}
    for key in args:
        if key not in params:
            raise ctx.error(
                (key,), f"unknown argument of builder {name!r} (expected {', '.join(params)})"
            )
    for pname, param in params.items():
        if param.default is inspect.Parameter.empty and pname not in args:
            raise ctx.error(("builder",), f"builder {name!r} needs argument {pname!r}")
    try:
        topo = func(**args)
    except TopologyError as exc:
        path: Path = (exc.field,) if exc.field in args else ()
        raise ctx.error(path, exc.reason if path else str(exc)) from None
    if "name" in data:
        if not isinstance(data["name"], str) or not data["name"]:
            raise ctx.error(("name",), "must be a non-empty string")
        topo.name = data["name"]
        topo.graph.graph["name"] = data["name"]
    return topo


# A checked link: (field path, a, b, bw or None, port of a or None, port of b or None).
_ParsedLink = tuple[Path, str, str, float | None, int | None, int | None]


def _new_topology(ctx: _Ctx, data: Mapping[str, Any], source: str | None) -> Topology:
    """The empty topology with the file's name (or the file's stem), bw and grpc_base."""
    kwargs: dict[str, Any] = {}
    if "name" in data:
        kwargs["name"] = data["name"]
    elif source:
        kwargs["name"] = os.path.splitext(os.path.basename(source))[0] or "topology"
    if "bw" in data:
        try:
            kwargs["bw"] = check_bw(data["bw"])
        except TopologyError as exc:
            raise ctx.error(("bw",), exc.reason) from None
    if "grpc_base" in data:
        kwargs["grpc_base"] = data["grpc_base"]
    try:
        topo = Topology(**kwargs)
    except TopologyError as exc:
        field = "name" if "name" in exc.reason else "grpc_base"
        raise ctx.error((field,), exc.reason) from None
    return topo


def _add_nodes(ctx: _Ctx, topo: Topology, hosts: list[Any], switches: list[Any]) -> dict[str, list[Any]]:
    """Add the hosts, then the switches, in file order; return each host's addresses."""
    first_seen: dict[str, str] = {}

    def add_node(path: Path, name: Any, add: Any) -> None:
        if isinstance(name, str) and name in first_seen:
            raise ctx.error(
                path + ("name",), f"duplicate node name {name!r} (first at {first_seen[name]})"
            )
        try:
            add()
        except TopologyError as exc:
            raise ctx.error(path, str(exc)) from None
        first_seen[name] = _field(path)

    host_ips: dict[str, list[Any]] = {}
    for i, raw in enumerate(hosts):
        path = ("hosts", i)
        entry = _node_entry(ctx, path, raw, _HOST_KEYS)
        ips = entry.get("ip", [])
        if isinstance(ips, str):
            ips = [ips]
        if not isinstance(ips, list):
            raise ctx.error(path + ("ip",), "must be an address or a list of addresses")
        attrs = _attrs(ctx, path, entry)
        add_node(
            path,
            entry["name"],
            lambda e=entry, ips=ips, a=attrs: topo.add_host(e["name"], ips=ips, **a),
        )
        host_ips[entry["name"]] = ips
    for i, raw in enumerate(switches):
        path = ("switches", i)
        entry = _node_entry(ctx, path, raw, _SWITCH_KEYS)
        attrs = _attrs(ctx, path, entry)
        add_node(
            path,
            entry["name"],
            lambda e=entry, a=attrs: topo.add_switch(
                e["name"], role=e.get("role", "switch"), device_id=e.get("device_id"), **a
            ),
        )
    return host_ips


def _parse_links(ctx: _Ctx, topo: Topology,
                 links: list[Any]) -> tuple[list[_ParsedLink], dict[tuple[str, int], str]]:
    """Check every link and collect its explicit ports: (path, a, b, bw, port_a, port_b)
    per link, and the field that claimed each (node, port)."""
    # Pass 1: check every link and collect its explicit ports, so that automatic port
    # numbering in pass 2 never takes a port a later link asks for by number.
    parsed: list[_ParsedLink] = []
    explicit: dict[tuple[str, int], str] = {}
    for i, raw in enumerate(links):
        path = ("links", i)
        if isinstance(raw, list):
            raw = {"nodes": raw}
        if not isinstance(raw, Mapping):
            raise ctx.error(path, f"must be [a, b] or a mapping with 'nodes', got {raw!r}")
        _check_keys(ctx, path, raw, _LINK_KEYS)
        if "nodes" not in raw:
            raise ctx.error(path, "missing field 'nodes'")
        nodes = raw["nodes"]
        if not isinstance(nodes, list) or len(nodes) != 2:
            raise ctx.error(path + ("nodes",), f"must list exactly two node names, got {nodes!r}")
        for j, node in enumerate(nodes):
            if not isinstance(node, str) or node not in topo:
                raise ctx.error(path + ("nodes", j), f"unknown node {node!r}")
        a, b = nodes
        bw = None
        if "bw" in raw:
            try:
                bw = check_bw(raw["bw"])
            except TopologyError as exc:
                raise ctx.error(path + ("bw",), exc.reason) from None
        ports = raw.get("ports", {})
        if not isinstance(ports, Mapping):
            raise ctx.error(path + ("ports",), "must map node names to port numbers")
        for node, port in ports.items():
            if node not in (a, b):
                raise ctx.error(path + ("ports", str(node)), f"{node!r} is not an end of this link")
            if isinstance(port, bool) or not isinstance(port, int):
                raise ctx.error(path + ("ports", node), f"port must be an integer, got {port!r}")
            if (node, port) in explicit:
                raise ctx.error(
                    path + ("ports", node),
                    f"port {port} of {node!r} is already used by {explicit[node, port]}",
                )
            explicit[node, port] = _field(path)
        parsed.append((path, a, b, bw, ports.get(a), ports.get(b)))
    return parsed, explicit


def _add_links(
    ctx: _Ctx,
    topo: Topology,
    parsed: list[_ParsedLink],
    explicit: dict[tuple[str, int], str],
) -> None:
    """Reserve every explicit port, then add the links in file order."""
    for node, port in explicit:
        topo.reserve_ports(node, [port])
    for path, a, b, bw, pa, pb in parsed:
        try:
            topo.add_link(a, b, bw=bw, port_a=pa, port_b=pb)
        except TopologyError as exc:
            raise ctx.error(path, exc.reason) from None


def _check_nodes(
    ctx: _Ctx, topo: Topology, hosts: list[Any], switches: list[Any], host_ips: dict[str, list[Any]]
) -> None:
    """No host with more addresses than NICs; every node and the whole topology valid."""
    for i, raw in enumerate(hosts):
        name = raw if isinstance(raw, str) else raw["name"]
        nics = len(topo.node(name)["ifaces"])
        if len(host_ips[name]) > nics:
            raise ctx.error(
                ("hosts", i, "ip"), f"{len(host_ips[name])} addresses for {nics} NIC(s)"
            )
    for kind, entries in (("hosts", hosts), ("switches", switches)):
        for i, raw in enumerate(entries):
            try:
                topo.validate_node(raw if isinstance(raw, str) else raw["name"])
            except TopologyError as exc:
                raise ctx.error((kind, i), exc.reason) from None
    try:
        topo.validate()
    except TopologyError as exc:
        raise ctx.error((), exc.reason) from None


def from_data(
    data: Any, source: str | None = None, lines: Mapping[Path, int] | None = None
) -> Topology:
    """Build a :class:`Topology` from parsed file data (or :meth:`Topology.to_dict` output).

    ``lines`` maps field paths to 1-based source lines for error messages.
    """
    ctx = _Ctx(source, lines)
    if data is None:
        raise ctx.error((), "topology file is empty")
    if not isinstance(data, Mapping):
        raise ctx.error((), f"top level must be a mapping, got {type(data).__name__}")
    if "builder" in data:
        return _from_builder(ctx, data)
    _check_keys(ctx, (), data, _TOP_KEYS)

    topo = _new_topology(ctx, data, source)

    hosts = _list(ctx, data, "hosts")
    switches = _list(ctx, data, "switches")
    links = _list(ctx, data, "links")
    host_ips = _add_nodes(ctx, topo, hosts, switches)
    parsed, explicit = _parse_links(ctx, topo, links)
    _add_links(ctx, topo, parsed, explicit)
    _check_nodes(ctx, topo, hosts, switches, host_ips)
    return topo


# Topology.from_dict and Topology.from_file delegate here (topologies.base cannot import
# this module: it imports base).
register_file_format(FileFormat(from_data=from_data, load=load))
