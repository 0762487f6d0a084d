"""Deep storage on S3 or an S3-compatible store (MinIO, Ceph, moto), through pyarrow's S3 filesystem.

`s3://BUCKET/PREFIX`; an `endpoint` (`http://host:port`, addressed path-style) and a `region` for
stores other than AWS. Credentials come only from the AWS chain pyarrow's client follows
(environment, `~/.aws` config and credentials files, instance metadata), never from arguments.

Each segment is one object under a key of its own,
`PREFIX/<dataSource>/<start>_<end>/<uuid>/index.parquet`, named in its `loadSpec` with the file's
SHA-256: a crashed or repeated push never overwrites anything, and a pushed object becomes a
segment only when the metadata store publishes it (`strata segments cleanup` removes the objects
no metadata row names). The client retries single requests (throttling, 5xx, resets); whole
uploads and downloads are repeated on top of that (`storage.retry`), and a download is hashed as
it streams and refused when its size or digest differs.
"""

from __future__ import annotations

import contextlib
import hashlib
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from strata.storage.deep_storage import (
    HASH_CHUNK,
    SEGMENT_FILE,
    STAGING,
    ChecksumMismatch,
    DeepStorageError,
    StoredObject,
    check_copy,
    with_location,
)
from strata.storage.retry import Backoff, retrying
from timeline import DataSegment, format_instant

DEFAULT_BACKOFF = Backoff()
REQUEST_ATTEMPTS = 5
"""Attempts per request inside pyarrow's client (AWS SDK standard strategy: throttling, 5xx,
connection errors), before a whole-object retry."""


def parse_s3_url(url: str) -> tuple[str, str]:
    """(bucket, prefix without slashes at its ends) of `s3://BUCKET/PREFIX`."""
    parts = urlsplit(url)
    if parts.scheme != "s3" or not parts.netloc:
        raise DeepStorageError(f"not an S3 deep storage URL: {url!r} (use s3://BUCKET/PREFIX)")
    if parts.query or parts.fragment:
        raise DeepStorageError(f"S3 deep storage URL {url!r} takes no query or fragment")
    return parts.netloc, parts.path.strip("/")


def _endpoint_parts(endpoint: str) -> tuple[str, str]:
    """(scheme, host:port) of an `--s3-endpoint` value (`http://h:p`, `https://h`, or `h:p` = https)."""
    if "://" not in endpoint:
        return "https", endpoint.rstrip("/")
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.path.strip("/"):
        raise DeepStorageError(f"S3 endpoint {endpoint!r} must be http(s)://HOST[:PORT]")
    return parts.scheme, parts.netloc


DENIED = ("ACCESS_DENIED", "AccessDenied", "INVALID_ACCESS_KEY_ID", "InvalidAccessKeyId",
          "SIGNATURE_DOES_NOT_MATCH", "SignatureDoesNotMatch", "NO_SUCH_BUCKET", "NoSuchBucket")  # fmt: skip


def _pull_transient(error: BaseException) -> bool:
    """Whether another download may succeed. A published segment's object exists, so "not found"
    is a store still recovering (a restarted server, a replica behind) and is retried too, as are
    I/O errors and a copy whose bytes differ (cut short); denied access or a missing bucket are not."""
    if isinstance(error, ChecksumMismatch):
        return True
    if isinstance(error, FileNotFoundError):
        return True
    return isinstance(error, OSError) and not any(marker in str(error) for marker in DENIED)


def s3_filesystem(
    endpoint: str | None, region: str | None, access_key: str | None = None, secret_key: str | None = None
) -> Any:
    """A pyarrow S3 filesystem for `--s3-endpoint` / `--s3-region`; credentials from the AWS chain
    unless given (an S3 input source's `properties`), with the client's request retries."""
    from pyarrow import fs

    options: dict[str, Any] = {
        "retry_strategy": fs.AwsStandardS3RetryStrategy(max_attempts=REQUEST_ATTEMPTS),
        "connect_timeout": 5.0,
        "request_timeout": 30.0,
    }
    if region:
        options["region"] = region
    if endpoint:
        scheme, host = _endpoint_parts(endpoint)
        options |= {"scheme": scheme, "endpoint_override": host, "force_virtual_addressing": False}
    if access_key and secret_key:
        options |= {"access_key": access_key, "secret_key": secret_key}
    return fs.S3FileSystem(**options)


class S3DeepStorage:
    """Segments as objects in a bucket; picklable (Spark tasks push with it), the client is rebuilt
    in each process from the URL, endpoint and region."""

    tasks_push = True

    def __init__(
        self,
        url: str,
        *,
        endpoint: str | None = None,
        region: str | None = None,
        backoff: Backoff = DEFAULT_BACKOFF,
        local_staging: str | Path | None = None,
    ):
        self.bucket, self.prefix = parse_s3_url(url)
        self.url = f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"
        self.endpoint = endpoint or None
        if self.endpoint:
            _endpoint_parts(self.endpoint)  # a bad value fails here, not at the first request
        self.region = region or None
        self.backoff = backoff
        self.local_staging = str(local_staging) if local_staging else None
        self._fs: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_fs": None}

    @property
    def fs(self) -> Any:
        """The pyarrow S3 filesystem, made on first use in this process."""
        if self._fs is None:
            self._fs = s3_filesystem(self.endpoint, self.region)
        return self._fs

    # -- keys ------------------------------------------------------------------------------------------
    def _key(self, relative: str) -> str:
        return f"{self.prefix}/{relative}" if self.prefix else relative

    def new_key(self, segment: DataSegment) -> str:
        """A key no other push uses: the segment's data source and interval, then a fresh uuid."""
        if "/" in segment.data_source or segment.data_source in ("", ".", ".."):
            raise DeepStorageError(f"data source name {segment.data_source!r} cannot be a key component")
        iv = segment.interval
        chunk = f"{format_instant(iv.start)}_{format_instant(iv.end)}"
        return self._key(f"{segment.data_source}/{chunk}/{uuid.uuid4().hex}/{SEGMENT_FILE}")

    def location_of(self, segment: DataSegment) -> str:
        spec = segment.load_spec
        if spec.get("type") != "s3" or not spec.get("bucket") or not spec.get("key"):
            raise DeepStorageError(f"segment {segment.id} is not in S3 deep storage: {spec}")
        return f"{spec['bucket']}/{spec['key']}"

    # -- the interface ---------------------------------------------------------------------------------
    def staging_dir(self) -> Path:
        """A local directory (segments are built on local disk, then uploaded)."""
        return Path(tempfile.mkdtemp(prefix="strata-s3-staging-", dir=self.local_staging))

    def push(self, segment_dir: Path, segment: DataSegment) -> DataSegment:
        source = segment_dir / SEGMENT_FILE
        key = self.new_key(segment)
        size, sha256 = retrying(
            lambda: self._upload(source, f"{self.bucket}/{key}"),
            f"uploading segment {segment.id} to s3://{self.bucket}/{key}",
            self.backoff,
        )
        return with_location(
            segment, {"type": "s3", "bucket": self.bucket, "key": key, "sha256": sha256}, size
        )

    def pull(self, segment: DataSegment, dest_dir: Path) -> Path:
        location = self.location_of(segment)
        dest_dir.mkdir(parents=True, exist_ok=True)
        target = dest_dir / SEGMENT_FILE

        def attempt() -> None:
            check_copy(segment, *self._download(location, target))

        try:
            retrying(
                attempt,
                f"downloading segment {segment.id} from s3://{location}",
                self.backoff,
                _pull_transient,
            )
        except ChecksumMismatch:
            target.unlink(missing_ok=True)
            raise
        except OSError as e:
            target.unlink(missing_ok=True)
            raise DeepStorageError(f"segment {segment.id}: cannot download s3://{location}: {e}") from e
        return dest_dir

    def delete(self, segment: DataSegment) -> None:
        if segment.load_spec.get("type") == "s3":
            self.delete_location(self.location_of(segment))

    def stored(self) -> Iterator[StoredObject]:
        from pyarrow import fs

        base = f"{self.bucket}/{self.prefix}" if self.prefix else self.bucket
        selector = fs.FileSelector(base, recursive=True, allow_not_found=True)
        infos = retrying(lambda: self.fs.get_file_info(selector), f"listing {self.url}", self.backoff)
        for info in infos:
            if info.type == fs.FileType.File:
                modified = info.mtime.timestamp() if info.mtime is not None else 0.0
                yield StoredObject(info.path, info.size or 0, modified)

    def delete_location(self, location: str) -> None:
        inside = f"{self.bucket}/{self.prefix}/" if self.prefix else f"{self.bucket}/"
        if not location.startswith(inside):
            raise DeepStorageError(f"s3://{location} is not inside deep storage {self.url}")

        def remove() -> None:
            with contextlib.suppress(FileNotFoundError):
                self.fs.delete_file(location)

        retrying(remove, f"deleting s3://{location}", self.backoff)

    # -- staging objects (rows a Spark job's tasks hand each other) ---------------------------------------
    def put_staging(self, job: str, source: Path) -> str:
        """Upload a local file under `PREFIX/.staging/<job>/`; returns its location."""
        location = f"{self.bucket}/{self._key(f'{STAGING}/{job}/{source.name}')}"
        retrying(lambda: self._upload(source, location), f"uploading {source.name}", self.backoff)
        return location

    def get_staging(self, location: str, target: Path) -> None:
        retrying(lambda: self._download(location, target), f"downloading s3://{location}", self.backoff)

    def drop_staging(self, job: str) -> None:
        """Remove a job's staging objects (best effort: `strata segments cleanup` finds leftovers)."""
        from pyarrow import fs

        base = f"{self.bucket}/{self._key(f'{STAGING}/{job}')}"
        try:
            infos = self.fs.get_file_info(fs.FileSelector(base, recursive=True, allow_not_found=True))
            for info in infos:
                if info.type == fs.FileType.File:
                    self.fs.delete_file(info.path)
        except OSError:
            pass

    # -- whole-object transfers --------------------------------------------------------------------------
    def _upload(self, source: Path, location: str) -> tuple[int, str]:
        """Stream a local file into one object, hashing it; (bytes, SHA-256). An upload cut short
        leaves no object (the multipart upload is never completed) or, if it had to be closed,
        removes what it wrote."""
        digest = hashlib.sha256()
        size = 0
        out = self.fs.open_output_stream(location)
        try:
            with source.open("rb") as f:
                while chunk := f.read(HASH_CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
                    size += len(chunk)
        except BaseException:
            try:
                out.close()
                self.fs.delete_file(location)
            except Exception:  # the store is gone: cleanup finds what is left
                pass
            raise
        out.close()
        stored = self.fs.get_file_info(location)
        if stored.size != size:
            raise OSError(f"s3://{location} holds {stored.size} bytes after uploading {size}")
        return size, digest.hexdigest()

    def _download(self, location: str, target: Path) -> tuple[int, str]:
        """Stream one object into a local file, hashing it; (bytes, SHA-256)."""
        digest = hashlib.sha256()
        size = 0
        with self.fs.open_input_stream(location, buffer_size=None) as src, target.open("wb") as out:
            while True:
                chunk = src.read_buffer(HASH_CHUNK)
                if not chunk.size:
                    break
                digest.update(chunk)
                out.write(chunk)
                size += chunk.size
        return size, digest.hexdigest()
