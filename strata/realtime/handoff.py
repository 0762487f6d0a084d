"""Handoff: the final segment of a closed bucket into deep storage and the metadata store, then
waiting until a historical announces it.

The segment keeps the live segment's id (same interval, version, partition), so the broker's
timeline sees one segment whose servers change, never two copies of the rows. Every step can be
repeated after a crash: a segment already published is not pushed or published again.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Sequence
from typing import Protocol

import pyarrow as pa

from strata.discovery import ServerMetadata, ServerType, ZkPaths, parse_batch
from strata.ingestion.segment_columns import stored_columns
from strata.ingestion.spec import DimensionSpec, MetricSpec
from strata.realtime.persist import read_part
from strata.realtime.sink import combined
from strata.storage.deep_storage import SEGMENT_FILE, DeepStorage
from strata.storage.metadata_store import MetadataStore, TransactionGuard
from strata.storage.segment_file import write_segment_file
from timeline import DataSegment

log = logging.getLogger(__name__)


def publish_final(
    segment: DataSegment,
    files: Sequence[str],
    dimensions: Sequence[DimensionSpec],
    metrics: Sequence[MetricSpec],
    rollup: bool,
    facts: dict[str, object],
    deep: DeepStorage,
    store: MetadataStore,
    guard: TransactionGuard | None = None,
) -> DataSegment:
    """Merge the persisted parts into one segment file, push it and publish it (idempotent); `guard`
    runs in the publish's transaction (it removes the bucket's pending segment)."""
    if any(s.id == segment.id for s in store.used_segments(segment.data_source)):
        return segment
    tables = [read_part(f) for f in files]
    table = combined(tables, dimensions, metrics, rollup) if tables else pa.table({})
    dims = [d for d in dimensions if d.name in table.column_names]
    table, entries = stored_columns(table, dims)
    final = DataSegment(
        data_source=segment.data_source,
        interval=segment.interval,
        version=segment.version,
        dimensions=tuple(d.name for d in dims),
        metrics=tuple(m.name for m in metrics),
        shard_spec=segment.shard_spec,
    )
    staging = deep.staging_dir()
    try:
        (staging / "0").mkdir()
        footer = {
            **facts,
            "dataSource": segment.data_source,
            "interval": str(segment.interval),
            "version": segment.version,
            "partitionNum": segment.partition_num,
            "dimensions": entries,
            "numRows": table.num_rows,
        }
        write_segment_file(table, staging / "0" / SEGMENT_FILE, footer)
        deep.delete(final)  # a push cut short by a crash before its publish
        pushed = deep.push(staging / "0", final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    store.publish([pushed], overwrite=False, guard=guard)
    log.info("published %s (%d rows) for handoff", pushed.id, table.num_rows)
    return pushed


class ZkReader(Protocol):
    """The reads of a kazoo client this module makes (kazoo has no type hints)."""

    def get_children(self, path: str) -> list[str]: ...
    def get(self, path: str) -> tuple[bytes, object]: ...
    def exists(self, path: str) -> object: ...


def historicals_serving(zk: ZkReader, paths: ZkPaths, segment_id: str) -> bool:
    """Whether any historical announces `segment_id` in ZooKeeper (kazoo calls: run in a thread)."""
    get_children, get, exists = zk.get_children, zk.get, zk.exists
    if not exists(paths.announcements):
        return False
    for server in get_children(paths.announcements):
        try:
            meta = ServerMetadata.from_bytes(get(paths.announcement(server))[0])
            if meta.type is not ServerType.HISTORICAL or not exists(paths.server_segments(server)):
                continue
            for batch in get_children(paths.server_segments(server)):
                data = get(paths.batch(server, batch))[0]
                if any(s.id == segment_id for s in parse_batch(data)):
                    return True
        except Exception as e:  # a node leaving while we read: look again next time
            log.debug("reading %s's announcements: %s", server, e)
    return False
