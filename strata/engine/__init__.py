"""The segment engine: runs a query of `query`'s language over segment rows with DuckDB.

A segment is read through a segment source: a Parquet file (footer statistics, shared multi-file
scans), the memory-mapped Arrow copy a historical registers for its cached Parquet file
(`mapped_source`), or in-memory Arrow rows a real-time node is still building (`memory_source`). Data nodes
(strata.data_node, historical_service, strata.realtime) import this package; the broker never does: it
merges and finalises partials with `query` alone.
"""

# Importing each executor module registers its query types with strata.engine.registry.
from strata.engine import groupby, scan, search, segment_metadata, time_boundary, timeseries, topn  # noqa: F401
from strata.engine.engine import (
    broker_partials_from_footers,
    require_table_source,
    run_for_broker,
    run_merged,
    run_partials,
    run_to_json,
)
from strata.engine.segment_input import SegmentInput

__all__ = [
    "SegmentInput",
    "broker_partials_from_footers",
    "require_table_source",
    "run_for_broker",
    "run_merged",
    "run_partials",
    "run_to_json",
]
