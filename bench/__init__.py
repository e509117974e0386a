"""Benchmarks (run as modules, e.g. ``python -m bench.placement_bench``); not tests."""
