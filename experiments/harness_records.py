"""The time-to-accuracy harness's records (``experiments/train.py``): what a run of one
(scheme, seed) measured, where a scheme runs and the resolved plan; the plugins
(``experiments/train_<scheme>.py``) fill the same records."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class HarnessError(ValueError):
    """A bad option or an impossible combination (one clear message)."""


@dataclass
class RunRecord:
    """One (scheme, seed) training run."""

    scheme: str
    seed: int
    ok: bool = False
    error: str = ""
    curve: list[dict[str, float]] = field(default_factory=list)  # rank 0's evaluations
    final_accuracy: float | None = None
    final_heldout: float | None = None
    time_to_target_s: float | None = None
    steps_to_target: float | None = None
    # the fastest any network could get there: the steps to target at the measured compute
    # per step plus the ideal bound of each step's sync (experiments/ideal.py)
    bound_to_target_s: float | None = None
    train_s: float = 0.0
    iterations: int = 0
    sync_s_per_iter: float | None = None
    compute_s_per_iter: float | None = None
    models_identical: bool = False
    # rank 0's (the evaluator's) weights hash after the last step: two runs of one scheme
    # and seed with equal hashes applied the same sums at every step (the loss sweep)
    final_weights: str = ""
    parameters: int = 0
    busiest_link: str = ""
    busiest_link_bytes: int = 0
    line_rate_bound_s: float = 0.0
    ps_rx_bytes: int | None = None
    retransmissions: int = 0
    # ina/ps: the workers' re-sends and requests by reason (docs/ina.md, "Loss recovery")
    resends: dict[str, int] = field(default_factory=dict)
    switch_cpu_s: float = 0.0
    agent_cpu_s: float = 0.0
    cpu_bound: bool = False  # = fidelity == "emulator-bound" (kept for older readers)
    wall_s: float = 0.0
    # experiments/ideal.py: one synchronization's own traffic, no re-sends, at line rate
    # plus its sequential latency (per iteration); x_bound = sync per iteration over it
    ideal_bound_s: float | None = None
    ideal_busiest_link: str = ""
    ideal_busiest_link_bytes: int = 0
    resent_bytes: int = 0  # retransmissions x the scheme's packet (experiments/fidelity.py)
    x_bound: float | None = None
    # the training window (experiments/accounting.TrainingWindow) and the verdict
    window_s: float | None = None
    window_switch_cpu_s: float | None = None
    window_busiest_switch_cpu_s: float | None = None  # the busiest switch process's
    cores: int = 0
    cpu_share: float | None = None
    # the pace's evidence in the window (experiments/cpu_evidence.py, experiments/fidelity.py)
    window_switch_wait_s: float | None = None  # switch threads runnable, not running
    window_busiest_switch_wanted_s: float | None = None  # one switch process: ran + waited
    window_agent_cpu_s: float | None = None
    window_agent_wait_s: float | None = None
    machine_busy: float | None = None  # every process's CPU over the cores, ours or not
    rx_drops: int | None = None  # UDP receive-buffer drops in the agents' namespaces
    demand_share: float | None = None  # switches + agents: (CPU + wait) / (window x cores)
    busiest_switch_share: float | None = None  # busiest_switch_wanted over the window
    wait_share: float | None = None  # switches + agents: run-queue wait / window
    pace: str = ""  # the rules of experiments/fidelity.py that made it emulator-bound
    fidelity: str = ""


@dataclass
class Setting:
    """Where a scheme runs: its topology, PS host (if any) and training hosts in rank order."""

    topo: Any
    ps: str | None
    workers: list[str]
    nic_mbit: float  # the total NIC capacity of one training host

    @property
    def key(self) -> str:
        return self.topo.name


@dataclass
class Plan:
    """What the harness will run, resolved from the options."""

    schemes: list[str]
    seeds: list[int]
    topo: Any
    ps: str
    workers: list[str]
    settings: dict[str, Setting]
    lr: float
    target_accuracy: float
    eval_every: int
    steps_per_epoch: int
    parameters: int
    slow: dict[str, float]
    loss: dict[tuple[str, int], float]
    # the work every rank of every scheme gets (experiments/scaling.py): per-rank batch,
    # the global batch of one step, how they and lr were derived, the training set's size
    batch: int = 16
    global_batch: int = 64
    rule: str = ""
    n_train: int = 0
