"""P4Runtime v1 server of the embedded target: ``server`` (the gRPC server, and what
it implements), ``service`` (the servicer, composed of one mixin per service area)."""
