"""Evidence scripts (run as ``python -m benchmarks.bench_<method>``); importable so the tests can run their small versions."""
