"""Small real-architecture models for tests and benchmarks: see `zoo.py`."""
