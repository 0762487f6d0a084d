"""Deep storage (segment files) and the metadata store (which segments are used).

Submodules load on first use so `strata --help` (which imports `storage.cli`) stays fast.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from strata.storage.deep_storage import DeepStorage, LocalDeepStorage
    from strata.storage.metadata_store import MetadataStore, MetadataStoreError, SegmentRecord

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
    "redact_location",
]

DEFAULT_DEEP_STORAGE = "var/deep-storage"
DEFAULT_METADATA = "var/metadata.db"

_LAZY = {
    "DeepStorage": "strata.storage.deep_storage",
    "LocalDeepStorage": "strata.storage.deep_storage",
    "MetadataStore": "strata.storage.metadata_store",
    "MetadataStoreError": "strata.storage.metadata_store",
    "SegmentRecord": "strata.storage.metadata_store",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'storage' has no attribute {name!r}")


def redact_location(location: str | Path) -> str:
    """A `--metadata` or `--deep-storage` value fit to print: any password replaced by `***`."""
    from strata.storage.metadata_url import redact

    return redact(str(location))


def open_metadata_store(path_or_url: str | Path) -> MetadataStore:
    """The store `--metadata` names: a SQLite file (`x.db`, `sqlite:///x.db`) or PostgreSQL
    (`postgresql://USER@HOST:PORT/DB`, password from PGPASSWORD, ~/.pgpass or a service file).

    Every command that takes `--metadata` opens its store here. Both stores also offer `dialect`,
    `transaction()` (a DB-API connection in one transaction) and `migrate(component, migrations)`
    (storage.schema) for other modules' tables; PostgreSQL adds `subscribe(callback)`.
    """
    from strata.storage.metadata_store import MetadataStoreError
    from strata.storage.metadata_url import is_postgres, redact

    text = str(path_or_url)
    if is_postgres(text):
        from strata.storage.postgres_store import PostgresMetadataStore

        return PostgresMetadataStore(text)
    from strata.storage.sqlite_store import SQLiteMetadataStore

    if text.startswith("sqlite:///"):
        text = text[len("sqlite:///") :]
    elif "://" in text:
        raise MetadataStoreError(
            f"unsupported metadata store URL {redact(text)!r} "
            "(use a file path, sqlite:///path or postgresql://USER@HOST:PORT/DB)"
        )
    return SQLiteMetadataStore(text)


def open_deep_storage(
    url: str | Path, *, s3_endpoint: str | None = None, s3_region: str | None = None
) -> DeepStorage:
    """The deep storage a `--deep-storage` value names: a directory, `file://DIR` or `s3://BUCKET/PREFIX`
    (`s3_endpoint`, path-style, and `s3_region` for S3-compatible stores; credentials come from
    the AWS chain: environment, config files, instance metadata)."""
    from strata.storage.deep_storage import DeepStorageError, LocalDeepStorage

    text = str(url)
    if text.startswith("s3://"):
        from strata.storage.s3_deep_storage import S3DeepStorage

        return S3DeepStorage(text, endpoint=s3_endpoint, region=s3_region)
    if text.startswith("file://"):
        text = text[len("file://") :]
    elif "://" in text:
        raise DeepStorageError(
            f"unsupported deep storage {text!r} (use a directory, file://DIR or s3://BUCKET/PREFIX)"
        )
    return LocalDeepStorage(text)
