"""The one registry of gradnet's techniques and of every other pluggable piece.

Each :class:`Entry` names, by dotted module path (a string: nothing here is imported),
what one technique or tool adds to each layer:

* ``modes`` -- ``python -m experiments --mode NAME`` -> the module with ``main(argv)``;
* ``schemes`` -- harness schemes of ``gradctl train`` -> the plugin module that trains
  them with their own agents, or ``None`` for a scheme built into ``experiments.train``
  (a module named by several schemes gives each its plugin: ``plugin(scheme)``);
* ``cli`` -- modules with ``register(sub, topo_help)``: the technique's ``gradctl`` groups;
* ``benches`` -- ``python -m bench NAME`` -> the module with ``main(argv)``;
* ``scheme_agents`` -- the synchronization schemes ``experiments.schemes`` runs from a plan
  file -> the host agent it starts on every server (``python -m MODULE --plan ...``);
* ``agents`` -- every other host agent the technique's experiments start, by role;
* ``docs`` -- the technique's documentation page.

The views the rest of the code reads (:data:`MODES`, :data:`PLUGINS`,
:data:`TECHNIQUE_CLIS`, :data:`BENCHES`, :data:`AGENTS`) are derived from :data:`ENTRIES`,
in its order (the order of ``gradctl --help``'s groups and of ``python -m bench``'s runs).
Adding a technique is one folder per layer plus one :class:`Entry` here.

The control plane never imports an experiment or a benchmark: the modules stay strings,
imported lazily by whoever dispatches to them (``importlib.util.find_spec`` first, so a
technique that has not landed yet is reported, not a crash).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = ["AGENTS", "BENCHES", "ENTRIES", "MODES", "PLUGINS", "SCHEMES", "TECHNIQUES",
           "TECHNIQUE_CLIS", "Entry", "entry"]


def _frozen(d: Mapping[str, str | None] | None = None) -> Mapping[str, str | None]:
    return MappingProxyType(dict(d or {}))


@dataclass(frozen=True)
class Entry:
    """What one technique (or tool) plugs into each layer; every module is a dotted path."""

    name: str
    #: ``technique`` (one of the five), ``baseline``, ``experiment`` or ``tool``
    kind: str
    modes: Mapping[str, str] = field(default_factory=_frozen)
    schemes: Mapping[str, str | None] = field(default_factory=_frozen)
    cli: tuple[str, ...] = ()
    benches: Mapping[str, str] = field(default_factory=_frozen)
    scheme_agents: Mapping[str, str] = field(default_factory=_frozen)
    agents: Mapping[str, str] = field(default_factory=_frozen)
    docs: str | None = None

    def modules(self) -> list[str]:
        """Every module this entry names (for the registry's tests)."""
        out = [*self.modes.values(), *(m for m in self.schemes.values() if m), *self.cli,
               *self.benches.values(), *self.scheme_agents.values(), *self.agents.values()]
        return list(dict.fromkeys(out))


def _e(name: str, kind: str, *, modes: dict[str, str] | None = None,
       schemes: dict[str, str | None] | None = None, cli: tuple[str, ...] = (),
       benches: dict[str, str] | None = None, scheme_agents: dict[str, str] | None = None,
       agents: dict[str, str] | None = None, docs: str | None = None) -> Entry:
    return Entry(name, kind, _frozen(modes), _frozen(schemes), cli, _frozen(benches),
                 _frozen(scheme_agents), _frozen(agents), docs)


ENTRIES: tuple[Entry, ...] = (
    _e("placement", "tool", benches={"placement": "bench.placement_bench"},
       docs="docs/placement.md"),
    _e("target", "tool", benches={"target": "bench.target_bench", "memlinks": "bench.memlink_bench"}),
    _e("ina", "technique", modes={"ina": "experiments.ina"}, schemes={"ina": None},
       cli=("controller.ina.cli",),
       benches={"ina": "bench.ina_bench", "ina-scale": "bench.ina_scale_bench",
                "ina-bfp": "bench.ina_bfp_bench", "ina-train": "bench.ina_train_bench",
                "ina-agents": "bench.ina_agents_bench"},
       agents={"ps": "hosts.ina.ps", "worker": "hosts.ina.worker",
               "ddp": "hosts.ina.ddp_train"},
       docs="docs/ina.md"),
    _e("reach", "experiment", modes={"reach": "experiments.ina"},
       agents={"probe": "hosts.reach"}),
    _e("net", "tool", cli=("controller.net_cli",)),
    _e("ndn", "technique", modes={"ndn": "experiments.ndn"},
       schemes={"ndn": "experiments.train_ndn", "ndn-ipmc": "experiments.train_ndn",
                "ndn-tcp": "experiments.train_ndn"},
       cli=("controller.ndn.cli",),
       benches={"ndn": "bench.ndn_bench", "ndn-baselines": "bench.ndn_baselines",
                "ndn-window": "bench.ndn_window"},
       agents={"gpu": "hosts.ndn.gpu", "ps": "hosts.ndn.ps"},
       docs="docs/ndn.md"),
    _e("differentiated", "technique", modes={"differentiated": "experiments.differentiated"},
       schemes={"differentiated": "experiments.train_differentiated",
                **dict.fromkeys(("differentiated-reliable", "differentiated-ef", "differentiated-random-ef",
                                 "differentiated-topk-ef"), "experiments.train_differentiated")},
       cli=("controller.qos.cli",),
       benches={"differentiated": "bench.differentiated_bench",
                "differentiated-ablation": "bench.differentiated_ablation",
                "differentiated-replay": "bench.differentiated_replay"},
       agents={"worker": "hosts.differentiated.worker", "ps": "hosts.differentiated.ps"},
       docs="docs/differentiated.md"),
    _e("bcube", "technique", modes={"bcube": "experiments.bcube"}, schemes={"bml": None},
       cli=("controller.bcube.cli",), benches={"bcube": "bench.bcube_bench"},
       scheme_agents={"bml": "hosts.bml"},
       agents={"collective": "hosts.bml.collective"},
       docs="docs/bcube.md"),
    _e("baselines", "baseline",
       schemes={"gloo": None, "ps": None, "ring": None, "rail_ring": None,
                "rail_sharded_ps": None},
       scheme_agents={"sharded_ps": "hosts.bml.baselines", "ring": "hosts.bml.baselines",
                      "ps": "hosts.bml.baselines", "rail_ring": "hosts.bml.baselines",
                      "rail_sharded_ps": "hosts.bml.baselines"}),
    _e("token", "technique", modes={"token": "experiments.token"},
       schemes={"token": "experiments.train_token"},
       cli=("controller.token.cli",),
       benches={"token": "bench.token_bench", "token-grid": "bench.token_grid"},
       agents={"node": "hosts.token.node"},
       docs="docs/token.md"),
    _e("ddp", "experiment", modes={"ddp": "experiments.ddp"}, benches={"ddp": "bench.ddp_bench"}),
    _e("compare", "experiment", modes={"compare": "experiments.compare"}),
    # ``gradctl train`` is an experiment's group: named here as a string, so the control
    # plane never imports it.
    _e("train", "experiment", modes={"train": "experiments.train"},
       cli=("experiments.train",), benches={"train": "bench.train_bench"},
       agents={"trainer": "hosts.trainer"}),
    _e("fuzz", "tool", benches={"fuzz": "bench.frame_fuzz",
                                "fuzz-config": "bench.config_fuzz_bench",
                                "fuzz-p4rt": "bench.p4rt_fuzz"}),
    _e("loss", "tool", benches={"loss": "bench.loss_bench"}),
    _e("method-params", "tool", benches={"method-params": "bench.method_params"}),
    _e("sim", "tool", cli=("sim.cli",),
       benches={"simulate": "bench.sim_bench", "regimes": "bench.regimes_bench"},
       docs="docs/simulation.md"),
)


def entry(name: str) -> Entry:
    """The entry called ``name`` (KeyError if none)."""
    for e in ENTRIES:
        if e.name == name:
            return e
    raise KeyError(name)


def _merge(attr: str) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for e in ENTRIES:
        for key, module in getattr(e, attr).items():
            if key in out:
                raise ValueError(f"{attr} {key!r} registered twice (again by {e.name})")
            out[key] = module
    return out


#: The five techniques, by name.
TECHNIQUES: tuple[str, ...] = tuple(e.name for e in ENTRIES if e.kind == "technique")
#: ``--mode`` -> experiment module (``python -m experiments``).
MODES: dict[str, str] = {k: str(v) for k, v in _merge("modes").items()}
#: Every harness scheme -> its plugin module, or None when built into the harness.
SCHEMES: dict[str, str | None] = _merge("schemes")
#: Harness schemes with their own agents -> plugin module (``gradctl train``).
PLUGINS: dict[str, str] = {k: v for k, v in SCHEMES.items() if v}
#: Modules with ``register(sub, topo_help)``: ``gradctl``'s command groups, in order.
TECHNIQUE_CLIS: list[str] = list(dict.fromkeys(m for e in ENTRIES for m in e.cli))
#: ``python -m bench NAME`` -> benchmark module.
BENCHES: dict[str, str] = {k: str(v) for k, v in _merge("benches").items()}
#: Synchronization scheme -> host agent module (``experiments.schemes``).
AGENTS: dict[str, str] = {k: str(v) for k, v in _merge("scheme_agents").items()}
