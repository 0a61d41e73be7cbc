"""The performance suite: `python -m bench [--quick]` (see bench/README.md).

Kept import-free: `python -m bench.cold_child` imports this package before it starts measuring.
"""
