"""Intermediate persists and the checkpoint that makes them the log's new starting point.

A persist writes each sink's in-memory rows as a part (rolled up, sorted, fsynced), then
atomically replaces `checkpoint.json`: the lsn every part covers, the parts of each sink, the
producers' applied sequence numbers, the handed-off segments. Log files wholly at or below that
lsn are then deleted. After a crash the node loads the checkpoint and replays only later records,
so nothing is applied twice; parts not named by the checkpoint (a persist cut short) are deleted.

Parts are uncompressed Arrow IPC files read back memory-mapped, as Druid maps its persisted
indexes: queries scan them at in-memory speed without holding them in the process's own memory
(the kernel pages them in and out), and handoff merges them into the final Parquet segment.
Parts written as Parquet by an earlier release are still read.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from strata.ingestion.spec import DimensionSpec, MetricSpec
from strata.realtime.sink import TIME, TIME_TYPE, WrittenPart, combined
from strata.realtime.wal import fsync_dir

CHECKPOINT = "checkpoint.json"
PART_SUFFIX = ".arrow"


def write_part(
    directory: Path,
    tables: Sequence[pa.Table],
    dimensions: Sequence[DimensionSpec],
    metrics: Sequence[MetricSpec],
    rollup: bool,
) -> WrittenPart:
    """One persisted part of a sink; durable when this returns."""
    directory.mkdir(parents=True, exist_ok=True)
    table = _typed_as(combined(tables, dimensions, metrics, rollup), tables)
    path = directory / f"part-{uuid.uuid4().hex}{PART_SUFFIX}"
    try:
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        with open(path, "rb") as f:
            os.fsync(f.fileno())
        fsync_dir(directory)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return _described(str(path), read_part(str(path)))


def _typed_as(table: pa.Table, inputs: Sequence[pa.Table]) -> pa.Table:
    """`table` with each column of the type the batches gave it (a roll-up may return `__time`
    in microseconds): parts and batches then concatenate into one live table. A column the
    batches gave different types (strings beside lists) keeps the one they were lined up to."""
    types: dict[str, set[pa.DataType]] = {}
    for t in inputs:
        for f in t.schema:
            types.setdefault(f.name, set()).add(f.type)
    fields = [
        pa.field(f.name, next(iter(types[f.name])) if len(types.get(f.name, ())) == 1 else f.type)
        for f in table.schema
    ]
    return table.cast(pa.schema(fields))


def read_part(path: str) -> pa.Table:
    """A part's rows: memory-mapped (no copy) for Arrow parts, read whole for Parquet ones."""
    if path.endswith(".parquet"):
        table = pq.read_table(path)
        return table.set_column(0, TIME, table.column(TIME).cast(TIME_TYPE))
    with pa.memory_map(path, "r") as source:
        return pa.ipc.open_file(source).read_all()


def load_part(path: str) -> WrittenPart:
    """A part named by the checkpoint, as `write_part` described it."""
    return _described(path, read_part(path))


def _described(path: str, table: pa.Table) -> WrittenPart:
    bounds = pc.min_max(table.column(TIME).cast(pa.int64())).as_py()
    span = (bounds["min"], bounds["max"]) if bounds["min"] is not None else (0, 0)
    return WrittenPart(path, table.num_rows, Path(path).stat().st_size, table, span)


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
    for path in parts_dir.rglob("part-*"):
        if str(path) not in listed:
            path.unlink(missing_ok=True)
            removed += 1
    return removed
