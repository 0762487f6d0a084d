"""Imports every query type module so each registers itself with `query.base.register`."""

# Each query type module registers on import; keep one import per line.
