"""The engine over a live segment whose rows are partly in memory (an Arrow table) and partly in a
memory-mapped Arrow part: every query type answers as over one file holding all the rows, read
whole or through a window, and as plain Python over the rows says."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from strata.engine import run_partials, run_to_json
from strata.engine.memory_source import MemoryRows, memory_key, register, unregister
from strata.engine.segment_input import SegmentInput
from strata.query import parse_query
from strata.storage.segment_file import write_segment_file
from tests.topn_oracle import druid_topn
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


def test_topn_cuts_each_live_segment_as_druid_cuts_a_segment() -> None:
    """Two live segments (a realtime node's sinks), each cut to its own best values before the
    node sums them: the same answer from the node's merged partial as from per-segment partials,
    and as `tests.topn_oracle` over each sink's rows (ties at the cut included)."""
    hours = [
        Interval.parse("2025-01-01T00:00/2025-01-01T01:00"),
        Interval.parse("2025-01-01T01:00/2025-01-01T02:00"),
    ]
    counts = [{"a": 5, "b": 4, "c": 3, "x": 2, "y": 2, "z": 2}, {"x": 5, "d": 4, "e": 3, "a": 1, "b": 3}]
    inputs = []
    for h, (hour, per_value) in enumerate(zip(hours, counts, strict=True)):
        values = [v for v, c in per_value.items() for _ in range(c)]
        table = pa.table({"__time": pa.array([hour.start + i for i in range(len(values))], pa.int64()).cast(
                              pa.timestamp("ms", tz="UTC")),
                          "k": values, "n": pa.array([1] * len(values), pa.int64())})  # fmt: skip
        key = memory_key(f"test_live_topn_{h}")
        facts = {"dimensions": [{"name": "k", "type": "string"}], "metrics": [], "rollup": False}
        register(key, MemoryRows(table=table, columns={f.name: f.type for f in table.schema}, num_rows=table.num_rows,
                                 interval=(hour.start, hour.end), time_range=(hour.start, hour.start + len(values) - 1),
                                 facts=facts))  # fmt: skip
        inputs.append(SegmentInput(f"live{h}", SegmentDescriptor(hour, "v1", 0), key, hour))
    try:
        for keep in (2, 3):
            query = parse_query({"queryType": "topN", "dataSource": "t", "intervals": ["2025-01-01/2025-01-02"],
                                 "granularity": "all", "dimension": "k", "metric": "n", "threshold": 2,
                                 "aggregations": [{"type": "longSum", "name": "n", "fieldName": "n"}],
                                 "context": {"minTopNThreshold": keep}})  # fmt: skip
            parts: list[dict[str | None, list[float]]] = [
                {v: [float(c)] for v, c in p.items()} for p in counts
            ]
            want = [{"k": v, "n": int(n)} for v, n in druid_topn(parts, 0, 2, keep)]
            assert run_to_json(query, inputs)[0]["result"] == want
            assert query.finalize(query.merge([run_partials(query, inputs)]))[0]["result"] == want
    finally:
        for inp in inputs:
            unregister(inp.path)
