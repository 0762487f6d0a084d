"""Imports every query type module so each registers itself with `query.base.register`."""

import importlib

# One module per query type; each registers itself on import.
QUERY_TYPE_MODULES = (
    "query.timeseries",
    "query.topn",
    "query.groupby",
    "query.datasource_metadata",
    "query.scan",
    "query.search",
    "query.segment_metadata",
    "query.time_boundary",
)

for _module in QUERY_TYPE_MODULES:
    importlib.import_module(_module)
