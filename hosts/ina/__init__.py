"""In-network aggregation agents (ina; docs/ina.md).

* :mod:`wire.ina_policy`: the routing policy a worker and the PS read (which switch aggregates
  which fragment), written by ``gradctl ina deploy`` / the experiment;
* :mod:`.worker` (``python -m hosts.ina.worker``): fragments, window, retransmission;
* :mod:`.ps` (``python -m hosts.ina.ps``): exactly-once global aggregation, RESULT/CLEAR;
* :mod:`.ddp_hook` and :mod:`.ddp_train`: a PyTorch DDP communication hook over INA.
"""
