"""NDN parameter-server agents (technique 2, seed 000; docs/ndn.md).

* :mod:`.common`: names, TLV encoding (python-ndn), segmentation, the training model;
* :mod:`.ps` (``python -m hosts.ndn.ps``): task assignment, collection, distribution;
* :mod:`.gpu` (``python -m hosts.ndn.gpu``): accept, initialise, subscribe, train,
  answer collection Interests, probe-timer recovery.
"""
