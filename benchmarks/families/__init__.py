"""The benchmark rows, one module per family (see `benchmarks/run.py`)."""
