"""The engine over a live segment whose rows are partly in memory (an Arrow table) and partly in a
memory-mapped Arrow part: every query type answers as over one file holding all the rows, read
whole or through a window, and as plain Python over the rows says."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from strata.engine import run_to_json
from strata.engine.memory_source import MemoryRows, memory_key, register, unregister
from strata.engine.segment_input import SegmentInput
from strata.query import parse_query
from strata.storage.segment_file import write_segment_file
from timeline import Interval, SegmentDescriptor

DAY = Interval.parse("2025-01-01/2025-01-02")
N = 3000


def rows() -> pa.Table:
    times = [DAY.start + (i * 7919) % (24 * 3_600_000) for i in range(N)]
    return pa.table({
        "__time": pa.array(times, pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
        "k": [f"k{i % 11}" if i % 13 else None for i in range(N)],
        "n": pa.array([i % 100 for i in range(N)], pa.int64()),
    })  # fmt: skip


WINDOWS = [DAY, Interval.parse("2025-01-01T05:30/2025-01-01T17:10")]


@pytest.fixture(params=WINDOWS, ids=["whole", "window"])
def inputs(tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    table = rows()
    facts = {"dimensions": [{"name": "k", "type": "string"}], "metrics": [], "rollup": False}
    whole = tmp_path / "whole.parquet"
    write_segment_file(table, whole, facts)
    part = tmp_path / "part.arrow"
    with pa.OSFile(str(part), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table.slice(0, 1000))
    with pa.memory_map(str(part), "r") as source:
        mapped = pa.ipc.open_file(source).read_all()
    live = pa.concat_tables([mapped, table.slice(1000)])
    times = table.column("__time").cast(pa.int64()).to_pylist()
    key = memory_key("test_live_segment")
    register(key, lambda: MemoryRows(table=live, columns={f.name: f.type for f in table.schema}, num_rows=N,
                                     interval=(DAY.start, DAY.end), time_range=(min(times), max(times)),
                                     facts=facts))  # fmt: skip
    descriptor = SegmentDescriptor(DAY, "v1", 0)
    window = request.param
    yield SegmentInput("live", descriptor, key, window), SegmentInput("file", descriptor, str(whole), window)
    unregister(key)


QUERIES: dict[str, dict[str, Any]] = {
    "timeseries": {"queryType": "timeseries", "granularity": "hour",
                   "aggregations": [{"type": "count", "name": "c"}, {"type": "longSum", "name": "n", "fieldName": "n"}]},
    "groupBy": {"queryType": "groupBy", "granularity": "all", "dimensions": ["k"],
                "aggregations": [{"type": "count", "name": "c"}]},
    "topN": {"queryType": "topN", "granularity": "all", "dimension": "k", "metric": "n", "threshold": 3,
             "aggregations": [{"type": "longSum", "name": "n", "fieldName": "n"}]},
    "timeBoundary": {"queryType": "timeBoundary"},
    "scan": {"queryType": "scan", "columns": ["__time", "k", "n"], "limit": 50, "order": "ascending"},
    "segmentMetadata": {"queryType": "segmentMetadata", "analysisTypes": ["cardinality", "minmax"]},
}  # fmt: skip


@pytest.mark.parametrize("name", list(QUERIES))
def test_memory_plus_parts_answers_as_one_file(inputs: tuple[SegmentInput, SegmentInput], name: str) -> None:
    live, whole = inputs
    query = parse_query({**QUERIES[name], "dataSource": "ev", "intervals": [str(live.interval)]})
    got, want = run_to_json(query, [live]), run_to_json(query, [whole])
    if name == "segmentMetadata":
        for answer in (got, want):
            for entry in answer:
                entry.pop("id"), entry.pop("size")
                for column in entry["columns"].values():
                    column.pop("size")
    if name == "scan":
        got = [e for batch in got for e in batch["events"]]
        want = [e for batch in want for e in batch["events"]]
    assert got == want


def test_memory_rows_match_python(inputs: tuple[SegmentInput, SegmentInput]) -> None:
    live, _ = inputs
    window = live.interval
    query = parse_query({**QUERIES["groupBy"], "dataSource": "ev", "intervals": [str(window)]})
    got = {r["event"]["k"]: r["event"]["c"] for r in run_to_json(query, [live])}
    raw = rows().to_pylist()
    inside = [r["k"] for r in raw if window.start <= int(r["__time"].timestamp() * 1000) < window.end]
    assert got == dict(Counter(inside))
