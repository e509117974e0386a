"""Token-passing gradient broadcast node (technique 5, seed 004; docs/token.md).

``python -m hosts.token.node``: one training node behind its P4 smart NIC.
"""
