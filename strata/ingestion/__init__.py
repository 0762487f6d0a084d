"""Batch ingestion: Druid's native ingestion spec -> Parquet segments in deep storage, published.

Programs call `ingestion.ingest(spec_or_path, deep_storage=..., metadata=...)`. Heavy modules load
on first use so `strata --help` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from strata.ingestion.errors import IngestionError, ParseProblem, SpecError, TooManyParseExceptions

if TYPE_CHECKING:
    from strata.ingestion.api import ingest, load_spec
    from strata.ingestion.spec import IngestionSpec, parse_spec
    from strata.ingestion.summary import IngestionSummary

__all__ = [
    "IngestionError",
    "IngestionSpec",
    "IngestionSummary",
    "ParseProblem",
    "SpecError",
    "TooManyParseExceptions",
    "ingest",
    "load_spec",
    "parse_spec",
]

_LAZY = {
    "ingest": "strata.ingestion.api",
    "load_spec": "strata.ingestion.api",
    "IngestionSpec": "strata.ingestion.spec",
    "parse_spec": "strata.ingestion.spec",
    "IngestionSummary": "strata.ingestion.summary",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'ingestion' has no attribute {name!r}")
