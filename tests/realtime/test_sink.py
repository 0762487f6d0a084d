"""A live segment's rows through compaction and persists: a query's snapshot always holds every
row exactly once (memory, a part being written, memory-mapped parts), the memory accounting
returns to zero once everything is persisted, and a part read back is the rows that went in."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from strata.ingestion.spec import DimensionSpec, MetricSpec
from strata.realtime.persist import load_part, write_part
from strata.realtime.sink import COMPACT_BATCHES, TIME_TYPE, Sink
from timeline import DataSegment, Interval

HOUR = Interval.parse("2025-01-01T00:00/2025-01-01T01:00")
DIMS = [DimensionSpec("page")]
METRICS = [MetricSpec("count", "count", None), MetricSpec("longSum", "added", "added")]


def batch(i: int, n: int = 7) -> pa.Table:
    return pa.table({
        "__time": pa.array([HOUR.start + 1000 * (i * n + j) for j in range(n)], pa.int64()).cast(TIME_TYPE),
        "page": [f"p{(i + j) % 5}" for j in range(n)],
        "count": pa.array([1] * n, pa.int64()),
        "added": pa.array([i * n + j for j in range(n)], pa.int64()),
    })  # fmt: skip


def counted(sink: Sink) -> tuple[int, Counter[str], int]:
    rows = sink.rows()
    table = rows.table
    assert rows.num_rows == table.num_rows
    return table.num_rows, Counter(table.column("page").to_pylist()), pc.sum(table["added"]).as_py()


def test_rows_survive_compaction_and_persists(tmp_path: Path) -> None:
    sink = Sink(DataSegment("ev", HOUR, "v1"))
    sent: list[pa.Table] = []
    for i in range(3 * COMPACT_BATCHES + 5):
        sent.append(batch(i))
        sink.add(sent[-1])
        if i == 2 * COMPACT_BATCHES:  # persist half way, with a query's view taken mid-persist
            tables = sink.begin_persist()
            mid = counted(sink)
            part = write_part(tmp_path, tables, DIMS, METRICS, rollup=False)
            sink.add_part(part)
            sink.end_persist()
    assert len(sink.batches) < COMPACT_BATCHES  # small batches were joined
    everything = pa.concat_tables(sent)
    want = (
        everything.num_rows,
        Counter(everything.column("page").to_pylist()),
        sum(everything["added"].to_pylist()),
    )
    assert counted(sink) == want
    assert mid[0] == 7 * (2 * COMPACT_BATCHES + 1)
    # persist the rest: memory is empty and accounted so, the parts hold every row
    tables = sink.begin_persist()
    sink.add_part(write_part(tmp_path, tables, DIMS, METRICS, rollup=False))
    sink.end_persist()
    assert (sink.rows_in_memory, sink.bytes_in_memory) == (0, 0)
    assert counted(sink) == want
    reread = pa.concat_tables([load_part(path).table for path in sink.files])
    assert reread.schema.field("__time").type == TIME_TYPE
    assert sorted(reread.column("added").to_pylist()) == sorted(everything.column("added").to_pylist())
