"""Token-passing gradient broadcast node (technique 5, seed 004; docs/token.md).

``python -m hosts.token.node``: one training node behind its P4 smart NIC.

* :mod:`.link`: the AF_PACKET socket to the NIC, the frame I/O (events, TICK);
* :mod:`.protocol`: formation (s120-s123), token passing (s131-s137), failures
  (s136, s310-s330);
* :mod:`.data`: model and data distribution (s110, s130), example encoding, the JSON
  gradient files (s140);
* :mod:`.training`: model factory, compute step (s140), batch end (s160);
* :mod:`.node`: :class:`~hosts.token.node.Node` (the parts as mixins) and the command line.
"""
