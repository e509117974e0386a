"""Differentiated gradient transmission (technique 3, seed 001; docs/differentiated.md).

* :mod:`.blocks`: split tensors into blocks (S1), SANE contribution (S2), threshold and
  levels (S31-S34), reconstruction with zero-fill (S354);
* :mod:`wire.differentiated`: block messages, DSCP per level, the TCP message framing;
* :mod:`.channel`: DSCP marking of a socket, framed messages on the reliable channel;
* :mod:`.receiver`: the PS's reliable and unreliable buffers and receive engines (S35);
* :mod:`.worker` and :mod:`.ps`: the agents (``python -m hosts.differentiated.worker``,
  ``python -m hosts.differentiated.ps``), for real training or one synthetic round.
"""
