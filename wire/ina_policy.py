"""The INA routing policy: which switch aggregates which worker's fragment (docs/ina_policy.md).

Written by the controller (``gradctl ina deploy``, the experiments) and the simulator as
JSON, read by the workers and the PS. The controller builds it from the placement LP's
split (:func:`controller.placement.routing_policy`); the agents only read and check it.
Every writer goes through :func:`policy_json` (the file's keys are written there only);
:class:`Policy` reads and validates.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from wire.fixedpoint import (
    DEFAULT_SCALE_BITS,
    NUMBER_FORMATS,
)
from wire.ina import (
    INA_MAX_WORKERS,
    INA_UDP_PORT,
    INA_VALUE_SIZES,
    INA_VALUES,
    InaFlags,
)

POLICY_VERSION = 1


class PolicyError(ValueError):
    """An invalid routing-policy file or object."""


def default_switch_ip(switch_id: int) -> str:
    """docs/ina.md: switch ``id`` has the address ``10.255.<id/256>.<id%256>``."""
    if not 0 < switch_id < 65536:
        raise PolicyError(f"switch id must be in 1..65535, got {switch_id}")
    return f"10.255.{switch_id >> 8}.{switch_id & 0xFF}"


@dataclass(frozen=True)
class SwitchRef:
    """A switch by its INA device id (the tag value) and IP address."""

    id: int
    ip: str


@dataclass(frozen=True, eq=False)
class FragmentRouting:
    """One worker's share of the policy, per fragment: the tag, the fan-in the tagged
    switch expects (0 for tag 0), the GRAD flags (``VIA_SD`` where the tagged switch's
    aggregate is merged again at ``s_d``) and ``s_d``'s fan-in for those (else 0)."""

    tags: np.ndarray  # (F,) int64, 0 = straight to the PS
    fanin: np.ndarray  # (F,) int64
    flags: np.ndarray | None = None  # (F,) int64; None = all 0
    sd_fanin: np.ndarray | None = None  # (F,) int64; None = all 0
    #: (F,) int64: the job's path of each fragment (``result_paths``); None = all 0
    paths: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = self.tags.shape[0]
        for name in ("flags", "sd_fanin", "paths"):
            if getattr(self, name) is None:
                object.__setattr__(self, name, np.zeros(n, dtype=np.int64))
        if not (self.fanin.shape == self.flags.shape == self.sd_fanin.shape == (n,)):
            raise ValueError("FragmentRouting: tags, fanin, flags, sd_fanin must have one entry per fragment")

    def prefix(self, n: int) -> FragmentRouting:
        """The routing of the first ``n`` fragments (a short allreduce)."""
        assert self.flags is not None and self.sd_fanin is not None and self.paths is not None
        return FragmentRouting(self.tags[:n], self.fanin[:n], self.flags[:n], self.sd_fanin[:n],
                               self.paths[:n])

    @classmethod
    def ps_only(cls, num_fragments: int) -> FragmentRouting:
        z = np.zeros(num_fragments, dtype=np.int64)
        return cls(z, z.copy())


def result_paths(tags: np.ndarray | None, partial_tags: Mapping[int, Any] | None,
                 num_fragments: int) -> list[int]:
    """Per fragment, a number naming its path: the switches every worker's contribution
    takes (``tags``, (W, F); None: all to the PS) and where each switch's aggregate is
    merged again (``partial_tags``). Workers send in order and one path delivers in
    order, so fragments of one path complete at the PS, and their RESULTs reach a
    worker, in order; across paths they do not (docs/ina.md, "Loss recovery")."""
    if tags is None or not np.asarray(tags).any():
        return [0] * num_fragments
    tags = np.asarray(tags)
    merged = [np.asarray(partial_tags[s]) for s in sorted(partial_tags or {})]
    names: dict[tuple[int, ...], int] = {}
    out = []
    for f in range(num_fragments):
        sig = tuple(int(t) for t in tags[:, f]) + tuple(int(row[f]) for row in merged)
        out.append(names.setdefault(sig, len(names)))
    return out


def _ip(value: Any, what: str) -> str:
    try:
        socket.inet_aton(str(value))
    except OSError:
        raise PolicyError(f"{what}: not an IPv4 address: {value!r}") from None
    return str(value)


def _int(value: Any, what: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise PolicyError(f"{what}: expected an integer, got {value!r}")
    if not lo <= int(value) <= hi:
        raise PolicyError(f"{what}: {value} is outside {lo}..{hi}")
    return int(value)


def _row(value: Any, n: int, what: str, hi: int) -> np.ndarray:
    """A per-fragment row: a list of ``n`` integers, or one integer for all fragments."""
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        return np.full(n, _int(value, what, 0, hi), dtype=np.int64)
    if not isinstance(value, list | tuple | np.ndarray):
        raise PolicyError(f"{what}: expected a list of {n} integers or one integer")
    if len(value) != n:
        raise PolicyError(f"{what}: has {len(value)} entries, expected num_fragments = {n}")
    try:
        arr = np.asarray(value)
    except ValueError as e:  # ragged nested lists
        raise PolicyError(f"{what}: {e}") from None
    if arr.size and (arr.dtype.kind not in "iu"):
        raise PolicyError(f"{what}: entries must be integers")
    arr = arr.astype(np.int64)
    if arr.size and (arr.min() < 0 or arr.max() > hi):
        bad = int(np.flatnonzero((arr < 0) | (arr > hi))[0])
        raise PolicyError(f"{what}[{bad}] = {arr[bad]} is outside 0..{hi}")
    return arr


def _compact(row: np.ndarray) -> int | list[int]:
    return int(row[0]) if row.size and (row == row[0]).all() else [int(v) for v in row]


Rows = Mapping[int, Any]


def policy_json(job: int, ps: str, workers: Sequence[str], num_fragments: int, *,
                tags: int | Sequence[Any] = 0, fanin: Rows | None = None,
                switch_ips: Mapping[int, str] | None = None, sd: int | None = None,
                sd_ip: str | None = None, partial_tags: Rows | None = None,
                port: int | None = None, scale_bits: int | None = None,
                number_format: str | None = None,
                values_per_packet: int = INA_VALUES, stamp: int = 0) -> dict[str, Any]:
    """The policy's JSON object (docs/ina_policy.md), as given: no validation (the
    simulator writes policies beyond the wire's worker limit; :class:`Policy` checks what
    it reads). ``tags``: one row per worker (a list of switch ids per fragment, or one id
    for all) or one id for everything; ``fanin``/``partial_tags``: ``{switch id: row}``;
    ``sd``: the switch id of ``s_d`` (None: no ``s_d``), ``sd_ip`` its address if
    written. Optional keys left None are not written (readers use their defaults)."""
    d: dict[str, Any] = {"version": POLICY_VERSION, "job": job, "ps": ps}
    for key, value in (("port", port), ("scale_bits", scale_bits), ("format", number_format)):
        if value is not None:
            d[key] = value
    d["values_per_packet"] = values_per_packet
    if stamp:
        d["stamp"] = stamp
    d["workers"] = list(workers)
    d["num_fragments"] = num_fragments
    d["tags"] = tags if isinstance(tags, int) else [_out_row(r) for r in tags]
    if fanin is not None:
        d["fanin"] = {str(k): _out_row(v) for k, v in fanin.items()}
    if switch_ips is not None:
        d["switch_ips"] = {str(k): v for k, v in switch_ips.items()}
    d["sd"] = None if sd is None else {"id": sd} if sd_ip is None else {"id": sd, "ip": sd_ip}
    if partial_tags is not None:
        d["partial_tags"] = {str(k): _out_row(v) for k, v in partial_tags.items()}
    return d


def _out_row(row: Any) -> int | list[int]:
    """A row as JSON: one integer stays one, a sequence becomes a list of ints."""
    if isinstance(row, int | np.integer):
        return int(row)
    return [int(v) for v in row]


@dataclass(frozen=True, eq=False)
class Policy:
    """The gradient routing policy of one job, as the controller writes it
    (docs/ina_policy.md). Load with :meth:`load`/:meth:`from_dict`; every field is
    validated on construction."""

    job: int
    ps: str
    workers: tuple[str, ...]  # rank -> IP
    num_fragments: int
    tags: np.ndarray  # (W, F): switch id aggregating worker w's fragment f, 0 = PS
    fanin: dict[int, np.ndarray] = field(default_factory=dict)  # switch id -> (F,)
    switch_ips: dict[int, str] = field(default_factory=dict)
    sd: SwitchRef | None = None
    port: int = INA_UDP_PORT
    scale_bits: int = DEFAULT_SCALE_BITS
    partial_tags: dict[int, np.ndarray] = field(default_factory=dict)  # s -> (F,): sd id or 0
    #: "fixed" (one scale ``2^scale_bits`` for every value) or "bfp" (block floating
    #: point: a shared exponent per fragment, agreed one round ahead; docs/ina.md)
    number_format: str = "fixed"
    #: values per packet (fragment), one of ``INA_VALUE_SIZES``: every switch the job
    #: crosses runs the ina.p4 compiled for it (docs/ina.md, "Values per packet")
    values_per_packet: int = INA_VALUES
    #: the job's admission stamp (docs/trust.md, "INA: admitted packets carry the job's
    #: stamp"): the switch that admits an INA packet from a host writes it into
    #: ``worker_id``, and the agents take only packets that carry it; 0: not checked
    stamp: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "workers", tuple(self.workers))
        object.__setattr__(self, "tags", np.asarray(self.tags, dtype=np.int64))
        for table in (self.fanin, self.partial_tags):  # rows given as lists or arrays
            for k in list(table):
                table[int(k)] = np.asarray(table.pop(k), dtype=np.int64)
        _int(self.job, "job", 0, 255)
        _ip(self.ps, "ps")
        if not 1 <= len(self.workers) <= INA_MAX_WORKERS:
            raise PolicyError(f"workers: need 1..{INA_MAX_WORKERS}, got {len(self.workers)}")
        for r, w in enumerate(self.workers):
            _ip(w, f"workers[{r}]")
        _int(self.num_fragments, "num_fragments", 1, 2**32 - 1)
        _int(self.port, "port", 1, 65535)
        _int(self.scale_bits, "scale_bits", 0, 62)
        _int(self.stamp, "stamp", 0, 65535)
        if self.number_format not in NUMBER_FORMATS:
            raise PolicyError(f"format: {self.number_format!r} is not one of {NUMBER_FORMATS}")
        if (isinstance(self.values_per_packet, bool)
                or self.values_per_packet not in INA_VALUE_SIZES):
            raise PolicyError(f"values_per_packet: {self.values_per_packet!r} is not one of "
                              f"{', '.join(map(str, INA_VALUE_SIZES))}")
        object.__setattr__(self, "values_per_packet", int(self.values_per_packet))
        n_w, n_f = len(self.workers), self.num_fragments
        if self.tags.shape != (n_w, n_f):
            raise PolicyError(f"tags: shape {self.tags.shape}, expected ({n_w}, {n_f})")
        if self.tags.size and (self.tags.min() < 0 or self.tags.max() > 65535):
            raise PolicyError("tags: switch ids must be in 0..65535")
        for s, row in self.fanin.items():
            if np.shape(row) != (n_f,) or np.min(row) < 0 or np.max(row) > INA_MAX_WORKERS:
                raise PolicyError(f"fanin[{s}]: expected {n_f} integers in 0..{INA_MAX_WORKERS}")
        used = {int(t) for t in np.unique(self.tags)} - {0}
        for s, row in self.partial_tags.items():
            if np.shape(row) != (n_f,):
                raise PolicyError(f"partial_tags[{s}]: expected {n_f} entries")
            allowed = {0} if self.sd is None else {0, self.sd.id}
            bad = np.flatnonzero(~np.isin(row, list(allowed)))
            if bad.size:
                f = int(bad[0])
                raise PolicyError(
                    f"partial_tags[{s}][{f}] = {row[f]}: a partial aggregate goes to s_d "
                    f"({'none configured' if self.sd is None else self.sd.id}) or 0 (the PS)"
                )
        ids = used | set(self.fanin) | set(self.switch_ips)
        if self.sd is not None:
            ids.add(self.sd.id)
            if self.switch_ips.setdefault(self.sd.id, self.sd.ip) != self.sd.ip:
                raise PolicyError(f"sd.ip {self.sd.ip} != switch_ips[{self.sd.id}]")
        for s in sorted(ids):
            self.switch_ips.setdefault(s, default_switch_ip(s))
        counts = {s: (self.tags == s).sum(axis=0).astype(np.int64) for s in used}
        merged = [s for s, row in self.partial_tags.items() if s in counts and row.any()]
        if self.sd is not None and merged:
            # s_d also merges the aggregates that other switches send it (VIA_SD)
            sd_id = self.sd.id
            used.add(sd_id)
            counts[sd_id] = counts.get(sd_id, np.zeros(n_f, dtype=np.int64)) + sum(
                (self.partial_tags[s] == sd_id) * counts[s] for s in merged if s != sd_id
            )
        for s in sorted(used):
            count = counts[s]  # contributions (s, f) gets
            if s not in self.fanin:
                self.fanin[s] = count
            short = np.flatnonzero(self.fanin[s] < count)
            if short.size:
                f = int(short[0])
                raise PolicyError(
                    f"fanin[{s}][{f}] = {self.fanin[s][f]} but switch {s} gets {count[f]} "
                    f"contributions for fragment {f}"
                )

    # ---------------------------------------------------------------- constructors

    @classmethod
    def ps_only(
        cls, job: int, ps: str, workers: Sequence[str], num_fragments: int, **kw: Any
    ) -> Policy:
        """The PS baseline: every fragment of every worker goes straight to the PS."""
        tags = np.zeros((len(workers), num_fragments), dtype=np.int64)
        return cls(job=job, ps=ps, workers=tuple(workers), num_fragments=num_fragments,
                   tags=tags, **kw)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Policy:
        """Parse the JSON object of docs/ina_policy.md (clear ``PolicyError`` on bad input)."""
        if not isinstance(d, Mapping):
            raise PolicyError("policy: expected a JSON object")
        version = d.get("version", POLICY_VERSION)
        if version != POLICY_VERSION:
            raise PolicyError(f"version: {version!r} is not supported (expected {POLICY_VERSION})")
        for key in ("job", "ps", "workers", "num_fragments"):
            if key not in d:
                raise PolicyError(f"policy: missing key {key!r}")
        workers = d["workers"]
        if not isinstance(workers, list):
            raise PolicyError("workers: expected a list of IPv4 addresses (index = rank)")
        n_f = _int(d["num_fragments"], "num_fragments", 1, 2**32 - 1)
        raw_tags = d.get("tags", 0)
        if isinstance(raw_tags, int):
            raw_tags = [raw_tags] * len(workers)
        if not isinstance(raw_tags, list) or len(raw_tags) != len(workers):
            raise PolicyError(f"tags: expected one row per worker ({len(workers)})")
        tags = np.stack(
            [_row(r, n_f, f"tags[{i}]", 65535) for i, r in enumerate(raw_tags)]
        ) if raw_tags else np.zeros((0, n_f), dtype=np.int64)

        def id_map(key: str, hi: int) -> dict[int, np.ndarray]:
            raw = d.get(key) or {}
            if not isinstance(raw, Mapping):
                raise PolicyError(f"{key}: expected an object keyed by switch id")
            out = {}
            for k, v in raw.items():
                sid = _int(_key_int(k, key), f"{key} key", 1, 65535)
                out[sid] = _row(v, n_f, f"{key}[{k}]", hi)
            return out

        raw_ips = d.get("switch_ips") or {}
        if not isinstance(raw_ips, Mapping):
            raise PolicyError("switch_ips: expected an object {switch id: IPv4}")
        switch_ips = {
            _int(_key_int(k, "switch_ips"), "switch_ips key", 1, 65535): _ip(v, f"switch_ips[{k}]")
            for k, v in raw_ips.items()
        }
        sd = None
        if d.get("sd") is not None:
            raw_sd = d["sd"]
            if not isinstance(raw_sd, Mapping) or "id" not in raw_sd:
                raise PolicyError('sd: expected {"id": <switch id>, "ip": <IPv4>} or null')
            sid = _int(raw_sd["id"], "sd.id", 1, 65535)
            sip = raw_sd.get("ip") or switch_ips.get(sid) or default_switch_ip(sid)
            sd = SwitchRef(sid, _ip(sip, "sd.ip"))
        return cls(
            job=_int(d["job"], "job", 0, 255),
            ps=_ip(d["ps"], "ps"),
            workers=tuple(_ip(w, f"workers[{i}]") for i, w in enumerate(workers)),
            num_fragments=n_f,
            tags=tags,
            fanin=id_map("fanin", INA_MAX_WORKERS),
            switch_ips=switch_ips,
            sd=sd,
            port=_int(d.get("port", INA_UDP_PORT), "port", 1, 65535),
            scale_bits=_int(d.get("scale_bits", DEFAULT_SCALE_BITS), "scale_bits", 0, 62),
            partial_tags=id_map("partial_tags", 65535),
            number_format=str(d.get("format", "fixed")),
            values_per_packet=d.get("values_per_packet", INA_VALUES),
            stamp=_int(d.get("stamp", 0), "stamp", 0, 65535),
        )

    @classmethod
    def load(cls, path: str | Path) -> Policy:
        """Read a policy JSON file."""
        try:
            d = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise PolicyError(f"{path}: {e}") from None
        return cls.from_dict(d)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object (compact: a uniform row is written as one integer)."""
        return policy_json(
            self.job, self.ps, self.workers, self.num_fragments,
            tags=[_compact(r) for r in self.tags],
            fanin={k: _compact(v) for k, v in sorted(self.fanin.items())},
            switch_ips=dict(sorted(self.switch_ips.items())),
            sd=None if self.sd is None else self.sd.id,
            sd_ip=None if self.sd is None else self.sd.ip,
            partial_tags={k: _compact(v) for k, v in sorted(self.partial_tags.items())}
            if self.partial_tags else None,
            port=self.port, scale_bits=self.scale_bits, number_format=self.number_format,
            values_per_packet=self.values_per_packet, stamp=self.stamp,
        )

    def dump(self, path: str | Path) -> None:
        """Write the policy as JSON."""
        Path(path).write_text(json.dumps(self.to_dict()) + "\n")

    # ---------------------------------------------------------------- queries

    @property
    def num_workers(self) -> int:
        return len(self.workers)

    def for_worker(self, rank: int) -> FragmentRouting:
        """Rank ``rank``'s tags, the fan-in of each tagged switch (0 for tag 0), and
        ``VIA_SD``/``sd_fanin`` where the tagged switch's partial goes to ``s_d``."""
        if not 0 <= rank < self.num_workers:
            raise PolicyError(f"rank {rank} is not in 0..{self.num_workers - 1}")
        n_f = self.num_fragments
        tags = self.tags[rank].copy()
        fanin = np.zeros(n_f, dtype=np.int64)
        for s, row in self.fanin.items():
            sel = tags == s
            fanin[sel] = row[sel]
        flags = np.zeros(n_f, dtype=np.int64)
        sd_fanin = np.zeros(n_f, dtype=np.int64)
        if self.sd is not None:
            sd_row = self.fanin.get(self.sd.id, np.zeros(n_f, dtype=np.int64))
            for s, row in self.partial_tags.items():
                if s == self.sd.id:
                    continue
                sel = (tags == s) & (row == self.sd.id)
                flags[sel] = InaFlags.VIA_SD
                sd_fanin[sel] = sd_row[sel]
        paths = np.asarray(result_paths(self.tags, self.partial_tags, n_f), dtype=np.int64)
        return FragmentRouting(tags, fanin, flags, sd_fanin, paths)

    def clear_targets(self) -> dict[int, np.ndarray]:
        """Switch id -> fragments it must get a ``CLEAR`` for: every switch some worker
        tags the fragment with, except ``s_d`` (the ``RESULT`` through it frees it)."""
        out = {}
        for s in np.unique(self.tags):
            s = int(s)
            if s == 0 or (self.sd is not None and s == self.sd.id):
                continue
            out[s] = np.flatnonzero((self.tags == s).any(axis=0))
        return out


def _key_int(k: Any, what: str) -> int:
    try:
        return int(k)
    except (TypeError, ValueError):
        raise PolicyError(f"{what}: key {k!r} is not a switch id") from None


