"""NDN parameter-server agents (ndn; docs/ndn.md).

* :mod:`wire.ndn`: names, their bounds and hashes, TLV encoding (python-ndn), segments;
* :mod:`.faces`: one face per transport (Ethernet, UDP, TCP) and ``make_face``;
* :mod:`.requester`: outstanding Interests and their retransmission;
* :mod:`.timers`: the GPU's probe timer and the PS's finishing-time estimate;
* :mod:`.harness`: what the agents train (synthetic model, digits CNN, the harness's work);
* :mod:`.ps` (``python -m hosts.ndn.ps``): task assignment, collection, distribution;
* :mod:`.gpu` (``python -m hosts.ndn.gpu``): accept, initialise, subscribe, train,
  answer collection Interests, probe-timer recovery.
"""
