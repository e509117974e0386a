"""gradnet's wire layer: the byte formats both ends of every technique agree on.

One module per format, each constant stated once; the P4 programs mirror them
(p4src/include/*.p4, checked by tests/test_wire_constants.py):

* :mod:`wire.ports` -- UDP ports and EtherTypes of every technique
* :mod:`wire.ina` -- the INA packet (header, values, sizes) and its codec
* :mod:`wire.ina_policy` -- the INA routing-policy file (read and written here only)
* :mod:`wire.fixedpoint` -- the fixed-point scale and block floating point of gradients
* :mod:`wire.ndn` -- NDN TLV v0.3 names, their bounds and hashes, Interest/Data, segments
* :mod:`wire.bcube` / :mod:`wire.bcube_schedule` -- BCube messages and the BML schedule
* :mod:`wire.differentiated` -- block messages, DSCP per level, the reliable channel's frames
* :mod:`wire.token` -- the token frame
* :mod:`wire.scapy_layers` -- scapy views of the formats (tests, debugging; built lazily)
* :mod:`wire.argtypes` -- the command-line value types of every command and agent (ranges)

The package imports nothing else of gradnet: hosts, targets, the control plane and the
simulator all import it.
"""
