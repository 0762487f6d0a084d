"""Remote input sources as local files: HTTP(S) URIs and S3 objects are downloaded, the `druid`
source's segments found through the metadata store's timeline.

Every engine then splits and reads them as it reads local files (byte ranges, row groups); the copy
lives in the ingestion's staging directory and goes with it. A `druid` source reads the segment
files of the data source's visible (non-overshadowed) segments, each clipped to the part of the
interval where it is visible, as a query would see them: local deep storage in place, S3 copies
checked against their checksums.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from strata.ingestion.errors import IngestionError
from strata.ingestion.input_sources import DruidInputSource, HttpInputSource, S3InputSource
from timeline import DataSegment, Interval, VersionedIntervalTimeline

if TYPE_CHECKING:
    from strata.storage.deep_storage import DeepStorage
    from strata.storage.metadata_store import MetadataStore

HTTP_TIMEOUT_S = 60.0
COPY_CHUNK = 8 << 20


@dataclass(frozen=True)
class Fetched:
    """One remote input as a local file, and what it was called (messages name the URI)."""

    name: str
    path: Path
    clip: Interval | None = None  # a `druid` segment: only its rows in this interval


@dataclass(frozen=True)
class S3Settings:
    """`--s3-endpoint` and `--s3-region`: S3 inputs are read where deep storage would be."""

    endpoint: str | None = None
    region: str | None = None


NO_S3 = S3Settings()


@dataclass
class InputStorage:
    """What reading remote inputs needs: a directory to fetch into, the S3 settings, and for
    `druid` sources the stores of the cluster."""

    fetch_dir: Path | None = None
    s3: S3Settings = NO_S3
    deep: DeepStorage | None = None
    metadata: MetadataStore | None = None

    def target(self, index: int, name: str) -> Path:
        if self.fetch_dir is None:
            raise IngestionError("remote inputs need a directory to be fetched into")
        self.fetch_dir.mkdir(parents=True, exist_ok=True)
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", name)[-120:] or "input"
        return self.fetch_dir / f"{index}-{safe}"


def _base_name(uri: str) -> str:
    """The last path component (a `.gz` suffix tells the reader to decompress)."""
    return unquote(urlsplit(uri).path.rsplit("/", 1)[-1]) or "input"


def fetch_http(source: HttpInputSource, storage: InputStorage) -> list[Fetched]:
    import httpx

    auth = (source.user, source.password or "") if source.user else None
    out = []
    with httpx.Client(timeout=HTTP_TIMEOUT_S, follow_redirects=True, headers=dict(source.headers)) as client:
        for i, uri in enumerate(source.uris):
            path = storage.target(i, _base_name(uri))
            try:
                with client.stream("GET", uri, auth=auth) as resp:
                    if resp.status_code != 200:
                        raise IngestionError(f"GET {uri} answered HTTP {resp.status_code}")
                    with path.open("wb") as f:
                        for chunk in resp.iter_raw(COPY_CHUNK):
                            f.write(chunk)
            except httpx.HTTPError as e:
                raise IngestionError(f"cannot read {uri}: {e}") from None
            out.append(Fetched(uri, path))
    return out


def s3_filesystem(source: S3InputSource, storage: InputStorage) -> Any:
    from strata.storage.s3_deep_storage import s3_filesystem as make

    return make(storage.s3.endpoint, storage.s3.region, source.access_key, source.secret_key)


def _s3_objects(source: S3InputSource, fs: Any) -> Iterator[str]:
    """`bucket/key` of every object the source names, prefixes listed in key order."""
    from pyarrow import fs as pafs

    for uri in source.uris:
        parts = urlsplit(uri)
        yield f"{parts.netloc}/{parts.path.lstrip('/')}"
    for prefix in source.prefixes:
        parts = urlsplit(prefix)
        base = f"{parts.netloc}/{parts.path.strip('/')}".rstrip("/")
        try:
            infos = fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
        except OSError as e:
            raise IngestionError(f"cannot list {prefix}: {e}") from None
        yield from sorted(i.path for i in infos if i.type == pafs.FileType.File)


def fetch_s3(source: S3InputSource, storage: InputStorage) -> list[Fetched]:
    fs = s3_filesystem(source, storage)
    out = []
    for i, key in enumerate(_s3_objects(source, fs)):
        uri = f"s3://{key}"
        path = storage.target(i, _base_name(uri))
        try:
            with fs.open_input_stream(key) as src, path.open("wb") as dst:
                while chunk := src.read(COPY_CHUNK):
                    dst.write(chunk)
        except OSError as e:
            raise IngestionError(f"cannot read {uri}: {e}") from None
        out.append(Fetched(uri, path))
    if not out:
        raise IngestionError(f"no objects under {', '.join(source.prefixes)}")
    return out


def visible_segments(
    metadata: MetadataStore, data_source: str, interval: Interval
) -> list[tuple[DataSegment, Interval]]:
    """The used segments a query over `interval` would read, each with the piece of it visible
    (a newer version may overshadow part of an older segment); tombstones hold no rows."""
    timeline: VersionedIntervalTimeline[DataSegment] = VersionedIntervalTimeline()
    for segment in metadata.used_segments(data_source):
        timeline.add_segment(segment, segment)
    return [
        (chunk.object, holder.interval)
        for holder in timeline.lookup(interval)
        for chunk in holder.chunks
        if chunk.object.shard_spec.has_data
    ]


def fetch_druid(source: DruidInputSource, storage: InputStorage) -> list[Fetched]:
    if storage.metadata is None or storage.deep is None:
        raise IngestionError("a druid input source is read where the cluster's stores are known")
    from strata.storage.deep_storage import SEGMENT_FILE

    out = []
    segments = visible_segments(storage.metadata, source.data_source, source.interval)
    for i, (segment, visible) in enumerate(segments):
        local = segment.load_spec.get("type", "local") == "local" and segment.load_spec.get("path")
        if local and Path(str(local)).is_file():
            path = Path(str(local))
        else:
            target = storage.target(i, segment.id)
            try:
                path = storage.deep.pull(segment, target) / SEGMENT_FILE
            except (OSError, RuntimeError) as e:
                raise IngestionError(f"cannot read segment {segment.id}: {e}") from None
        out.append(Fetched(f"segment {segment.id}", path, visible))
    return out
