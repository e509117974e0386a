"""Differentiated gradient transmission (differentiated; docs/differentiated.md).

* :mod:`.blocks`: split tensors into blocks, SANE contribution, threshold and levels,
  reconstruction with zero-fill;
* :mod:`wire.differentiated`: block messages, DSCP per level, the TCP message framing;
* :mod:`.channel`: DSCP marking of a socket, framed messages on the reliable channel;
* :mod:`.receiver`: the PS's reliable and unreliable buffers and receive engines;
* :mod:`.worker` and :mod:`.ps`: the agents (``python -m hosts.differentiated.worker``,
  ``python -m hosts.differentiated.ps``), for real training or one synthetic round.
"""
