"""Copies segments from deep storage into the local segment cache and checks them before use.

Layout: `<cache>/<segment id>/index.parquet`, and with `arrow=True` its memory-mapped Arrow copy
`index.arrow` beside it (see `arrow_copy`), which queries read instead. A copy lands in
`<cache>/.tmp/` first and is renamed into place only once its size matches the descriptor and its
Parquet footer reads, so a segment in its final place is always whole; on restart such a segment
is reused without copying. Deep storage checks each copy's size and SHA-256 against its loadSpec
as it pulls (`storage.deep_storage.check_copy`). Failed loads are retried with exponential backoff
(per segment), never announced, and listed with their reason in `/status` (`loadFailures`).
Copies run in a small thread pool.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import shutil
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pyarrow as pa

from historical_service.arrow_copy import mapped_copy, remove_copy
from strata.engine.footer_answers import row_facts
from timeline import DataSegment, RowFacts

log = logging.getLogger(__name__)

SEGMENT_FILE = "index.parquet"
_TMP = ".tmp"


class LoadFailed(RuntimeError):
    pass


class SegmentPuller(Protocol):
    def pull(self, segment: DataSegment, dest_dir: Path) -> Path: ...


@dataclass(frozen=True, slots=True)
class Loaded:
    segment: DataSegment
    path: Path  # the local index.parquet
    reused: bool  # found whole in the cache, nothing copied
    bytes: int
    seconds: float
    table: pa.Table | None = None  # the rows memory-mapped from the Arrow copy, queries read these
    facts: RowFacts | None = None  # row count and time span from the footer, announced with it


@dataclass(slots=True)
class _Failure:
    attempts: int
    retry_at: float
    error: str


class SegmentLoader:
    def __init__(
        self,
        cache_dir: Path,
        deep_storage: SegmentPuller,
        *,
        max_workers: int = 2,
        initial_backoff_s: float = 1.0,
        max_backoff_s: float = 60.0,
        arrow: bool = True,
    ):
        self.cache_dir = cache_dir.resolve()
        self.deep_storage = deep_storage
        self.pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="segment-load")
        self.initial_backoff_s = initial_backoff_s
        self.max_backoff_s = max_backoff_s
        self.failures: dict[str, _Failure] = {}
        self.arrow = arrow
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(self.cache_dir / _TMP, ignore_errors=True)  # half-done copies of a previous run

    def segment_dir(self, segment_id: str) -> Path:
        if not segment_id or "/" in segment_id or segment_id.startswith(".") or "\x00" in segment_id:
            raise LoadFailed(f"segment id {segment_id!r} cannot be a directory name")
        return self.cache_dir / segment_id

    def cached_ids(self) -> list[str]:
        return [p.name for p in self.cache_dir.iterdir() if p.is_dir() and not p.name.startswith(".")]

    def may_try(self, segment_id: str) -> bool:
        failure = self.failures.get(segment_id)
        return failure is None or time.monotonic() >= failure.retry_at

    def has_failed(self, segment_id: str) -> bool:
        return segment_id in self.failures

    def next_retry_in(self) -> float | None:
        if not self.failures:
            return None
        return min(f.retry_at for f in self.failures.values()) - time.monotonic()

    def failure_report(self, limit: int = 50) -> list[dict[str, object]]:
        """The segments whose load failed (not announced, retried later) and why, for `/status`."""
        return [
            {"segment": sid, "attempts": f.attempts, "error": f.error}
            for sid, f in sorted(self.failures.items())[:limit]
        ]

    def forget_failures(self, keep: set[str]) -> None:
        """Drop the failure records of segments no longer wanted here."""
        for segment_id in [sid for sid in self.failures if sid not in keep]:
            del self.failures[segment_id]

    async def load(self, segment: DataSegment) -> Loaded:
        loop = asyncio.get_running_loop()
        try:
            loaded = await loop.run_in_executor(self.pool, self._load, segment)
        except Exception as e:
            previous = self.failures.get(segment.id)
            attempts = previous.attempts + 1 if previous else 1
            backoff = min(self.initial_backoff_s * 2 ** (attempts - 1), self.max_backoff_s)
            self.failures[segment.id] = _Failure(attempts, time.monotonic() + backoff, str(e))
            log.warning("loading segment %s failed (attempt %d, retry in %.1fs): %s",
                        segment.id, attempts, backoff, e)  # fmt: skip
            raise LoadFailed(str(e)) from e
        self.failures.pop(segment.id, None)
        return loaded

    async def delete(self, segment_id: str) -> None:
        path = self.segment_dir(segment_id)
        await asyncio.get_running_loop().run_in_executor(self.pool, shutil.rmtree, path, True)

    def _load(self, segment: DataSegment) -> Loaded:
        loaded = self._pull(segment)
        loaded = dataclasses.replace(loaded, facts=row_facts(str(loaded.path)))
        if not self.arrow:
            remove_copy(loaded.path)  # of an earlier run that served Arrow copies
            return loaded
        started = time.monotonic()
        try:
            table = mapped_copy(loaded.path)
        except Exception as e:  # disk full, say: the segment is still served, from Parquet
            log.warning("no Arrow copy of segment %s (%s): serving its Parquet file", segment.id, e)
            return loaded
        return dataclasses.replace(loaded, table=table, seconds=loaded.seconds + time.monotonic() - started)

    def _pull(self, segment: DataSegment) -> Loaded:
        started = time.monotonic()
        final = self.segment_dir(segment.id)
        cached = final / SEGMENT_FILE
        if cached.is_file():
            try:
                size = verify(cached, segment)
                return Loaded(segment, cached, True, size, time.monotonic() - started)
            except LoadFailed as e:
                log.warning("cached copy of %s is unusable (%s): loading it again", segment.id, e)
        staging = self.cache_dir / _TMP / uuid.uuid4().hex
        try:
            pulled = self.deep_storage.pull(segment, staging)
            size = verify(pulled / SEGMENT_FILE, segment)
            if final.exists():
                shutil.rmtree(final)
            pulled.rename(final)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return Loaded(segment, cached, False, size, time.monotonic() - started)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


def verify(path: Path, segment: DataSegment) -> int:
    """The file's size if it matches the descriptor and its Parquet footer reads."""
    import pyarrow.parquet as pq

    try:
        size = path.stat().st_size
    except OSError as e:
        raise LoadFailed(f"segment {segment.id}: {path.name} is missing ({e.strerror})") from None
    if segment.size > 0 and size != segment.size:
        raise LoadFailed(f"segment {segment.id}: file has {size} bytes, descriptor says {segment.size}")
    try:
        pq.read_metadata(path)
    except Exception as e:  # pyarrow raises ArrowInvalid / OSError for a corrupt footer
        raise LoadFailed(f"segment {segment.id}: not a readable Parquet file ({e})") from None
    return size
