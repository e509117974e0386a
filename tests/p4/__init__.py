"""Conformance programs of the embedded target (P4 sources, p4c outputs, probe headers)."""
