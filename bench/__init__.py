"""Benchmarks: each prints a table and, last, one JSON line of figures."""
