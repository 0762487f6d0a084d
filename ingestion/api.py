"""`ingest()`: the one call programs (and the CLI) use to run a batch ingestion."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from ingestion.errors import SpecError
from ingestion.spec import IngestionSpec, parse_spec
from ingestion.summary import IngestionSummary, Progress
from storage import (
    DEFAULT_DEEP_STORAGE,
    DEFAULT_METADATA,
    LocalDeepStorage,
    MetadataStore,
    open_metadata_store,
)

ENGINES = ("local", "spark")


def load_spec(spec: IngestionSpec | Mapping[str, Any] | str | Path) -> IngestionSpec:
    """A parsed spec from an `IngestionSpec`, a spec dict, or the path of a spec JSON file."""
    if isinstance(spec, IngestionSpec):
        return spec
    if isinstance(spec, (str, Path)):
        return parse_spec(read_spec_file(spec))
    return parse_spec(spec)


def read_spec_file(path: str | Path, what: str = "ingestion spec") -> Any:
    """The JSON of a spec file; `SpecError` when it cannot be read or parsed."""
    try:
        return orjson.loads(Path(path).read_bytes())
    except OSError as e:
        raise SpecError(f"cannot read {what} {path}: {e.strerror}") from None
    except orjson.JSONDecodeError as e:
        raise SpecError(f"{what} {path} is not valid JSON: {e}") from None


def ingest(
    spec: IngestionSpec | Mapping[str, Any] | str | Path,
    *,
    deep_storage: str | Path | LocalDeepStorage = DEFAULT_DEEP_STORAGE,
    metadata: str | Path | MetadataStore = DEFAULT_METADATA,
    engine: str = "local",
    progress: Progress | None = None,
) -> IngestionSummary:
    """Run one batch ingestion and publish its segments; raises `IngestionError` (nothing published)."""
    parsed = load_spec(spec)
    if engine == "spark":
        raise SpecError("the Spark ingestion engine is not available yet; use --engine local")
    if engine != "local":
        raise SpecError(f"unknown engine {engine!r} (local or spark)")
    from ingestion.local_engine import run_local

    deep = deep_storage if isinstance(deep_storage, LocalDeepStorage) else LocalDeepStorage(deep_storage)
    if isinstance(metadata, (str, Path)):
        store = open_metadata_store(metadata)
        try:
            return run_local(parsed, deep, store, progress)
        finally:
            store.close()
    return run_local(parsed, deep, metadata, progress)
