"""Intermediate persists and the checkpoint that makes them the log's new starting point.

A persist writes each sink's in-memory rows as a Parquet part (rolled up, sorted, fsynced), then
atomically replaces `checkpoint.json`: the lsn every part covers, the parts of each sink, the
producers' applied sequence numbers, the handed-off segments. Log files wholly at or below that
lsn are then deleted. After a crash the node loads the checkpoint and replays only later records,
so nothing is applied twice; parts not named by the checkpoint (a persist cut short) are deleted.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa

from ingestion.spec import DimensionSpec, MetricSpec
from realtime_service.sink import TIME, combined
from realtime_service.wal import fsync_dir
from storage.segment_file import write_segment_file

CHECKPOINT = "checkpoint.json"


@dataclass(frozen=True)
class WrittenPart:
    path: str
    num_rows: int
    size: int
    schema: pa.Schema
    time_range: tuple[int, int]


def write_part(
    directory: Path,
    tables: Sequence[pa.Table],
    dimensions: Sequence[DimensionSpec],
    metrics: Sequence[MetricSpec],
    rollup: bool,
    facts: dict[str, Any],
) -> WrittenPart:
    """One persisted part of a sink; durable when this returns."""
    directory.mkdir(parents=True, exist_ok=True)
    table = combined(tables, dimensions, metrics, rollup)
    path = directory / f"part-{uuid.uuid4().hex}.parquet"
    try:
        size = write_segment_file(table, path, {**facts, "numRows": table.num_rows})
        with open(path, "rb") as f:
            os.fsync(f.fileno())
        fsync_dir(directory)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    times = table.column(TIME).cast(pa.int64())
    import pyarrow.compute as pc

    bounds = pc.min_max(times).as_py()
    return WrittenPart(str(path), table.num_rows, size, table.schema, (bounds["min"], bounds["max"]))


def write_checkpoint(base: Path, state: dict[str, Any]) -> None:
    tmp = base / f"{CHECKPOINT}.tmp"
    with open(tmp, "wb") as f:
        f.write(orjson.dumps(state))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, base / CHECKPOINT)
    fsync_dir(base)


def read_checkpoint(base: Path) -> dict[str, Any] | None:
    path = base / CHECKPOINT
    if not path.exists():
        return None
    state: dict[str, Any] = orjson.loads(path.read_bytes())
    return state


def remove_unlisted_parts(parts_dir: Path, listed: set[str]) -> int:
    """Delete parts no checkpoint names (written by a persist that did not finish)."""
    removed = 0
    if not parts_dir.exists():
        return 0
    for path in parts_dir.rglob("part-*.parquet"):
        if str(path) not in listed:
            path.unlink(missing_ok=True)
            removed += 1
    return removed
