"""Imports every query type module so each registers itself with `query.base.register`."""

import importlib

# One module per query type; each registers itself on import.
QUERY_TYPE_MODULES = (
    "strata.query.timeseries",
    "strata.query.topn",
    "strata.query.groupby",
    "strata.query.datasource_metadata",
    "strata.query.scan",
    "strata.query.search",
    "strata.query.segment_metadata",
    "strata.query.time_boundary",
)

for _module in QUERY_TYPE_MODULES:
    importlib.import_module(_module)
