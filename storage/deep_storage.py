"""Deep storage: where segment files live for good, behind an interface small enough for object stores.

Layout: `<root>/<dataSource>/<start>_<end>/<version>/<partitionNum>/index.parquet` (+ descriptor.json).
A segment is built in a staging directory under `<root>/.staging/` (same filesystem) and moved into
place with one rename, so a reader of the final path never sees a half-written segment.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import Protocol

import orjson

from timeline import DataSegment, format_instant

SEGMENT_FILE = "index.parquet"
DESCRIPTOR_FILE = "descriptor.json"


class DeepStorageError(RuntimeError):
    pass


class DeepStorage(Protocol):
    def push(self, segment_dir: Path, segment: DataSegment) -> DataSegment:
        """Store the segment directory's files; returns the segment with `loadSpec` and `size` set."""
        ...

    def pull(self, segment: DataSegment, dest_dir: Path) -> Path:
        """Copy the segment's files into `dest_dir`; returns the directory holding index.parquet."""
        ...

    def delete(self, segment: DataSegment) -> None: ...


def segment_path(segment: DataSegment) -> Path:
    """The segment's directory relative to the deep-storage root."""
    iv = segment.interval
    chunk = f"{format_instant(iv.start)}_{format_instant(iv.end)}"
    return Path(segment.data_source) / chunk / segment.version / str(segment.partition_num)


class LocalDeepStorage:
    """Deep storage on a local (or shared, mounted) filesystem directory."""

    def __init__(self, root: str | Path):
        self.root = Path(root).resolve()

    def staging_dir(self) -> Path:
        """A fresh directory to build segments in, on the same filesystem as their final place."""
        path = self.root / ".staging" / uuid.uuid4().hex
        path.mkdir(parents=True)
        return path

    def push(self, segment_dir: Path, segment: DataSegment) -> DataSegment:
        if "/" in segment.data_source or segment.data_source in ("", ".", ".."):
            raise DeepStorageError(f"data source name {segment.data_source!r} cannot be a directory name")
        final = self.root / segment_path(segment)
        if final.exists():
            raise DeepStorageError(f"segment {segment.id} already exists in deep storage at {final}")
        index = final / SEGMENT_FILE
        size = (segment_dir / SEGMENT_FILE).stat().st_size
        pushed = DataSegment(
            data_source=segment.data_source,
            interval=segment.interval,
            version=segment.version,
            load_spec={"type": "local", "path": str(index)},
            dimensions=segment.dimensions,
            metrics=segment.metrics,
            shard_spec=segment.shard_spec,
            binary_version=segment.binary_version,
            size=size,
            extra=segment.extra,
        )
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
        if (src / DESCRIPTOR_FILE).is_file():
            shutil.copy2(src / DESCRIPTOR_FILE, dest_dir / DESCRIPTOR_FILE)
        return dest_dir

    def delete(self, segment: DataSegment) -> None:
        shutil.rmtree(self._dir_of(segment), ignore_errors=True)
        # prune empty version / interval / data source directories
        parent = self._dir_of(segment).parent
        while parent != self.root and parent.is_relative_to(self.root):
            try:
                parent.rmdir()
            except OSError:
                break
            parent = parent.parent
