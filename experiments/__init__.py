"""Experiments: bring up an emulated network, deploy a technique, run its agents, collect,
check and plot. Orchestration only: the control plane is :mod:`controller`, the host
agents are :mod:`hosts`, and this package uses both through their public interfaces.

* :mod:`experiments.main` -- ``python -m experiments --mode MODE`` (``make run*``);
* :mod:`experiments.options` -- the option vocabulary the modes share (``--workers``,
  ``--bw``, ``--loss``, ``--seed``, ``--max-time``, ``--target``, ``--out-dir``, ...);
* :mod:`experiments.runner` -- the steps every experiment shares (spawn an agent with its
  output in files, wait for ``ready``, collect its JSON summary, per-host set-up);
* :mod:`experiments.accounting` -- where the time went: line-rate bound, CPU per process;
* one module per technique: :mod:`~experiments.ina` (``make run``, and ``--mode reach``),
  :mod:`~experiments.ndn`, :mod:`~experiments.differentiated`, :mod:`~experiments.bcube`,
  :mod:`~experiments.token`, :mod:`~experiments.ddp`, and :mod:`~experiments.compare`
  (every scheme on one gradient).
"""
