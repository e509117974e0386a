"""The embedded target's native backend: the program compiled to C (see cgen)."""
