"""Token-passing gradient broadcast node (token; docs/token.md).

``python -m hosts.token.node``: one training node behind its P4 smart NIC.

* :mod:`.link`: the AF_PACKET socket to the NIC, the frame I/O (events, TICK);
* :mod:`.protocol`: formation, token passing, failures (resends, lost
  nodes, rejoin, ABNORMAL);
* :mod:`.data`: model and data distribution, example encoding, the JSON gradient
  files;
* :mod:`.training`: model factory, compute step, batch end;
* :mod:`.node`: :class:`~hosts.token.node.Node` (the parts as mixins) and the command line.
"""
