"""Deep storage: where segment files live for good, behind an interface small enough for object stores.

`storage.open_deep_storage(url)` picks the implementation: a directory (a path or `file://`) here, or
`s3://BUCKET/PREFIX` (`storage.s3_deep_storage`). Every push records the segment file's size and
SHA-256 in its `loadSpec`, and every pull checks both, so a reader never uses a damaged copy.

Local layout: `<root>/<dataSource>/<start>_<end>/<version>/<partitionNum>/index.parquet`
(+ descriptor.json). A segment is built in a staging directory under `<root>/.staging/` (same
filesystem) and moved into place with one rename, so a reader of the final path never sees a
half-written segment.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import orjson

from timeline import DataSegment, format_instant

SEGMENT_FILE = "index.parquet"
DESCRIPTOR_FILE = "descriptor.json"


STAGING = ".staging"
HASH_CHUNK = 8 << 20


class DeepStorageError(RuntimeError):
    pass


class ChecksumMismatch(DeepStorageError):
    """A copied segment file whose size or SHA-256 differs from what its push recorded."""


@dataclass(frozen=True)
class StoredObject:
    """One thing deep storage holds: `location` as `location_of` names it, bytes, modified (epoch s)."""

    location: str
    size: int
    modified: float


class DeepStorage(Protocol):
    url: str
    tasks_push: bool
    """Whether Spark tasks push the segments they build (their local staging is out of the driver's
    reach) rather than leaving them in a shared staging directory for the driver."""

    def staging_dir(self) -> Path:
        """A fresh local directory to build segment files in before `push`."""
        ...

    def push(self, segment_dir: Path, segment: DataSegment) -> DataSegment:
        """Store the segment directory's index.parquet under a key of its own; returns the segment
        with `loadSpec` (location and SHA-256) and `size` set. Nothing reads it before a publish."""
        ...

    def pull(self, segment: DataSegment, dest_dir: Path) -> Path:
        """Copy the segment's file into `dest_dir`, checking its size and checksum; returns the
        directory holding index.parquet. `ChecksumMismatch` when the copy differs."""
        ...

    def delete(self, segment: DataSegment) -> None: ...

    def location_of(self, segment: DataSegment) -> str:
        """Where the segment's `loadSpec` says its file is, in the form `stored()` lists it."""
        ...

    def stored(self) -> Iterator[StoredObject]:
        """Everything this deep storage holds (segment files and staging leftovers)."""
        ...

    def delete_location(self, location: str) -> None:
        """Remove one thing `stored()` listed."""
        ...


def file_digest(path: Path) -> tuple[int, str]:
    """(bytes, SHA-256 hex) of a file, read in large chunks (hashlib releases the GIL on them)."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as f:
        while chunk := f.read(HASH_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def check_copy(segment: DataSegment, size: int, sha256: str) -> None:
    """Raise `ChecksumMismatch` unless a copy's size and digest are what the push recorded (a
    segment pushed before checksums were recorded is checked by size only)."""
    if segment.size > 0 and size != segment.size:
        raise ChecksumMismatch(
            f"segment {segment.id}: copy has {size} bytes, its descriptor says {segment.size}"
        )
    expected = segment.load_spec.get("sha256")
    if expected and expected != sha256:
        raise ChecksumMismatch(
            f"segment {segment.id}: SHA-256 of the copy is {sha256}, its loadSpec says {expected}"
        )


def with_location(segment: DataSegment, load_spec: dict[str, object], size: int) -> DataSegment:
    """The segment as pushed: its `loadSpec` and `size` set."""
    return DataSegment(
        data_source=segment.data_source,
        interval=segment.interval,
        version=segment.version,
        load_spec=load_spec,
        dimensions=segment.dimensions,
        metrics=segment.metrics,
        shard_spec=segment.shard_spec,
        binary_version=segment.binary_version,
        size=size,
        extra=segment.extra,
    )


def segment_path(segment: DataSegment) -> Path:
    """The segment's directory relative to the deep-storage root."""
    iv = segment.interval
    chunk = f"{format_instant(iv.start)}_{format_instant(iv.end)}"
    return Path(segment.data_source) / chunk / segment.version / str(segment.partition_num)


class LocalDeepStorage:
    """Deep storage on a local (or shared, mounted) filesystem directory."""

    tasks_push = False

    def __init__(self, root: str | Path):
        self.root = Path(root).resolve()
        self.url = str(self.root)

    def staging_dir(self) -> Path:
        """A fresh directory to build segments in, on the same filesystem as their final place."""
        path = self.root / STAGING / uuid.uuid4().hex
        path.mkdir(parents=True)
        return path

    def push(self, segment_dir: Path, segment: DataSegment) -> DataSegment:
        if "/" in segment.data_source or segment.data_source in ("", ".", ".."):
            raise DeepStorageError(f"data source name {segment.data_source!r} cannot be a directory name")
        final = self.root / segment_path(segment)
        if final.exists():
            raise DeepStorageError(f"segment {segment.id} already exists in deep storage at {final}")
        index = final / SEGMENT_FILE
        size, sha256 = file_digest(segment_dir / SEGMENT_FILE)
        pushed = with_location(segment, {"type": "local", "path": str(index), "sha256": sha256}, size)
        (segment_dir / DESCRIPTOR_FILE).write_bytes(
            orjson.dumps(pushed.to_json(), option=orjson.OPT_INDENT_2)
        )
        final.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(segment_dir, final)
        except OSError as e:
            if final.parent.stat().st_dev == segment_dir.stat().st_dev:
                raise DeepStorageError(f"cannot move segment {segment.id} into {final}: {e}") from e
            shutil.copytree(segment_dir, final)  # another filesystem: copy, then drop the staging copy
            shutil.rmtree(segment_dir, ignore_errors=True)
        return pushed

    def _dir_of(self, segment: DataSegment) -> Path:
        path = segment.load_spec.get("path")
        if segment.load_spec.get("type", "local") != "local":
            raise DeepStorageError(f"segment {segment.id} is not in local deep storage: {segment.load_spec}")
        return Path(path).parent if path else self.root / segment_path(segment)

    def pull(self, segment: DataSegment, dest_dir: Path) -> Path:
        src = self._dir_of(segment)
        if not (src / SEGMENT_FILE).is_file():
            raise DeepStorageError(f"segment {segment.id} is missing from deep storage ({src})")
        dest_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / SEGMENT_FILE, dest_dir / SEGMENT_FILE)
        if segment.load_spec.get("sha256"):
            check_copy(segment, *file_digest(dest_dir / SEGMENT_FILE))
        if (src / DESCRIPTOR_FILE).is_file():
            shutil.copy2(src / DESCRIPTOR_FILE, dest_dir / DESCRIPTOR_FILE)
        return dest_dir

    def delete(self, segment: DataSegment) -> None:
        self._remove_dir(self._dir_of(segment))

    def location_of(self, segment: DataSegment) -> str:
        return str(self._dir_of(segment))

    def stored(self) -> Iterator[StoredObject]:
        """Every segment directory (holding index.parquet) and every staging directory."""
        staging = self.root / STAGING
        if staging.is_dir():
            for d in staging.iterdir():
                yield StoredObject(str(d), _tree_size(d), d.stat().st_mtime)
        for index in self.root.glob(f"*/*/*/*/{SEGMENT_FILE}"):
            if not index.parent.is_relative_to(staging):
                yield StoredObject(str(index.parent), _tree_size(index.parent), index.stat().st_mtime)

    def delete_location(self, location: str) -> None:
        path = Path(location).resolve()
        if not path.is_relative_to(self.root) or path == self.root:
            raise DeepStorageError(f"{location} is not inside deep storage {self.root}")
        self._remove_dir(path)

    def _remove_dir(self, path: Path) -> None:
        shutil.rmtree(path, ignore_errors=True)
        # prune empty version / interval / data source directories
        parent = path.parent
        while parent != self.root and parent.is_relative_to(self.root):
            try:
                parent.rmdir()
            except OSError:
                break
            parent = parent.parent


def _tree_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def age_s(obj: StoredObject) -> float:
    """Seconds since the object was last modified."""
    return time.time() - obj.modified
