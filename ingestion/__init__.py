"""Batch ingestion: Druid's native ingestion spec -> Parquet segments in deep storage, published.

Programs call `ingestion.ingest(spec_or_path, deep_storage=..., metadata=...)`. Heavy modules load
on first use so `strata --help` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ingestion.errors import IngestionError, ParseProblem, SpecError, TooManyParseExceptions

if TYPE_CHECKING:
    from ingestion.api import ingest, load_spec
    from ingestion.spec import IngestionSpec, parse_spec
    from ingestion.summary import IngestionSummary

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
    "ingest": "ingestion.api",
    "load_spec": "ingestion.api",
    "IngestionSpec": "ingestion.spec",
    "parse_spec": "ingestion.spec",
    "IngestionSummary": "ingestion.summary",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'ingestion' has no attribute {name!r}")
