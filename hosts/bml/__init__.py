"""BML: BCube hierarchical parameter synchronization (bcube).

* :mod:`wire.bcube_schedule` -- which server reduces which slice at which level, per
  thread (pure, unit-tested: :func:`~wire.bcube_schedule.simulate` proves the sums);
* :mod:`hosts.bml.transport` -- framed TCP connections between servers, one per
  (level, peer), each bound to that level's NIC address;
* :mod:`hosts.bml.agent` -- the per-server agent (``python -m hosts.bml``) running k
  threads, thread j starting at level j;
* :mod:`hosts.bml.collective` -- :class:`~hosts.bml.collective.Collective`, a
  persistent endpoint whose ``allreduce`` a training process calls every iteration
  (any scheme: BML or a baseline).

Protocol and line-rate model: ``docs/bcube.md``.
"""
