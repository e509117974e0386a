"""Stages of the embedded target's compiler (``targets.embedded.compiler``): PHV layout,
expressions, actions, parser, deparser and checksums, hashes, tables; ``support`` holds
what the generated code calls at run time."""
