"""Deep storage (segment files) and the metadata store (which segments are used).

Submodules load on first use so `strata --help` (which imports `storage.cli`) stays fast.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from storage.deep_storage import DeepStorage, LocalDeepStorage, open_deep_storage
    from storage.metadata_store import MetadataStore, MetadataStoreError, SegmentRecord

__all__ = [
    "DEFAULT_DEEP_STORAGE",
    "DEFAULT_METADATA",
    "DeepStorage",
    "LocalDeepStorage",
    "MetadataStore",
    "MetadataStoreError",
    "SegmentRecord",
    "open_deep_storage",
    "open_metadata_store",
]

DEFAULT_DEEP_STORAGE = "var/deep-storage"
DEFAULT_METADATA = "var/metadata.db"

_LAZY = {
    "DeepStorage": "storage.deep_storage",
    "LocalDeepStorage": "storage.deep_storage",
    "open_deep_storage": "storage.deep_storage",
    "MetadataStore": "storage.metadata_store",
    "MetadataStoreError": "storage.metadata_store",
    "SegmentRecord": "storage.metadata_store",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'storage' has no attribute {name!r}")


def open_metadata_store(path_or_url: str | Path) -> MetadataStore:
    """A store from a file path or URL: `x.db`, `sqlite:///x.db` today; `postgresql://` later."""
    from storage.metadata_store import MetadataStoreError
    from storage.sqlite_store import SQLiteMetadataStore

    text = str(path_or_url)
    if text.startswith(("postgresql://", "postgres://")):
        raise MetadataStoreError("PostgreSQL metadata store is not available yet; use a SQLite file path")
    if text.startswith("sqlite:///"):
        text = text[len("sqlite:///") :]
    elif "://" in text:
        raise MetadataStoreError(
            f"unsupported metadata store URL {text!r} (use a file path or sqlite:///path)"
        )
    return SQLiteMetadataStore(text)
