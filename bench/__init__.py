"""ARVIS benchmarks: the two-commit floor, the kernel, DBOS, HTTP, growth, memory.

Run ``python -m bench`` (or ``make bench`` / ``make bench-quick``). Every figure
is measured side by side in one run on one PostgreSQL, and reported as a ratio
where a ratio means something; see docs/benchmarks.md.
"""
