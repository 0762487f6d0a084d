"""Multi-value strings, arrays and nested values pushed to a real `strata realtime` node: a scan
answers them at once, through persists, as the segment they will become stores them; the handed-off
segment file holds the same. Expected values come from Druid's rules over the pushed events
(`tests.ingestion.data_model_oracle`), never from the engine."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.processes import StrataProcess, running
from strata.ingestion.spec import DimensionSpec, MetricSpec
from strata.realtime.handoff import publish_final
from strata.realtime.persist import write_part
from strata.realtime.sink import TIME_TYPE
from strata.storage import open_deep_storage, open_metadata_store
from strata.storage.segment_file import read_segment_facts
from tests.ingestion.data_model_oracle import auto_type, auto_value, mv_column
from tests.realtime.rt_kit import DS, ask, realtime, status
from timeline import DataSegment, Interval

DIMS = [
    {"name": "tags", "type": "string", "multiValueHandling": "SORTED_SET"},
    {"name": "nums", "type": "auto"},
    {"name": "doc", "type": "json"},
    "city",
]
FIRST: list[dict[str, Any]] = [  # no multi-value rows, LONG numbers
    {"ts": "2025-01-01T00:00:01.000Z", "tags": "a", "nums": 1, "doc": {"x": 1}, "geo": {"city": "Paris"}},
    {"ts": "2025-01-01T00:00:02.000Z", "tags": ["b"], "nums": None, "doc": None, "geo": {}},
]
SECOND: list[dict[str, Any]] = [  # lists: the live segment now holds multi-value rows and arrays
    {"ts": "2025-01-01T00:00:03.000Z", "tags": ["c", "a", "c"], "nums": [2, 3], "doc": [1, {"y": "z"}]},
    {"ts": "2025-01-01T00:00:04.000Z", "tags": [], "nums": [], "doc": {"x": 2.5}, "geo": {"city": "Oslo"}},
]


def _spec(root: Path) -> Path:
    spec = {"type": "index_realtime", "spec": {
        "dataSchema": {"dataSource": DS, "timestampSpec": {"column": "ts", "format": "iso"},
                       "dimensionsSpec": {"dimensions": DIMS},
                       "metricsSpec": [{"type": "count", "name": "count"}],
                       "granularitySpec": {"segmentGranularity": "hour", "rollup": False}},
        "ioConfig": {"inputFormat": {"type": "json", "flattenSpec": {
            "fields": [{"type": "path", "name": "city", "expr": "$.geo.city"}]}}},
        "tuningConfig": {"type": "realtime", "rejectionPolicy": {"type": "none"}, "maxRowsInMemory": 3}}}  # fmt: skip
    path = root / "spec.json"
    path.write_text(json.dumps(spec))
    return path


def _expected(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """As a scan answers them: a one-value multi-value row as its value, nested values as JSON."""
    tags = [t[0] if isinstance(t, list) and len(t) == 1 else t
            for t in mv_column([r["tags"] for r in rows], "SORTED_SET")]  # fmt: skip
    kind = auto_type([r["nums"] for r in rows])
    return [
        {
            "tags": t,
            "nums": auto_value(kind, r["nums"]),
            "doc": r["doc"],
            "city": (r.get("geo") or {}).get("city"),
        }
        for r, t in zip(rows, tags, strict=True)
    ]


def _scan(node: StrataProcess) -> list[dict[str, Any]]:
    body = {"queryType": "scan", "dataSource": DS, "intervals": ["2025-01-01/2025-01-02"],
            "columns": ["__time", "tags", "nums", "doc", "city"], "order": "ascending"}  # fmt: skip
    return [{k: v for k, v in e.items() if k != "__time"} for part in ask(node, body) for e in part["events"]]


def test_pushed_lists_and_nested_values_are_scanned_back(tmp_path: Path) -> None:
    proc = realtime(tmp_path, _spec(tmp_path))
    with running([proc]):
        proc.start()
        for batch in (FIRST, SECOND):
            resp = httpx.post(f"{proc.url}/v1/push/{DS}", json=batch, timeout=30)
            assert resp.status_code == 200 and resp.json()["accepted"] == len(batch), resp.text
            pushed = FIRST if batch is FIRST else FIRST + SECOND
            assert _scan(proc) == _expected(pushed)
        # the second batch passed maxRowsInMemory: once its rows are in a persisted part, the same
        deadline = time.monotonic() + 30
        while status(proc)["ingestion"]["persists"] < 1:
            assert time.monotonic() < deadline, "no persist"
            time.sleep(0.1)
        assert _scan(proc) == _expected(FIRST + SECOND)


@pytest.mark.parametrize("parts", [1, 2])
def test_the_handed_off_segment_stores_lists_json_and_types(tmp_path: Path, parts: int) -> None:
    dims = [
        DimensionSpec("tags", "string", "SORTED_SET"),
        DimensionSpec("nums", "auto"),
        DimensionSpec("doc", "json"),
    ]
    hour = Interval.parse("2025-01-01T00:00/2025-01-01T01:00")
    staged = [  # as batches stage them: tags strings in one part and lists in the other, JSON text
        pa.table({"__time": pa.array([hour.start + 1], pa.int64()).cast(TIME_TYPE), "tags": pa.array(["a"]),
                  "nums": _json(["1"]), "doc": _json(['{"x":1}']), "count": pa.array([1])}),
        pa.table({"__time": pa.array([hour.start + 2], pa.int64()).cast(TIME_TYPE),
                  "tags": pa.array([["a", "c"]]), "nums": _json(["[2,3]"]), "doc": _json(["[1]"]),
                  "count": pa.array([1])}),
    ]  # fmt: skip
    files = (
        [write_part(tmp_path / "parts", staged, dims, [MetricSpec("count", "count")], False).path]
        if parts == 1
        else [
            write_part(tmp_path / "parts", [t], dims, [MetricSpec("count", "count")], False).path
            for t in staged
        ]
    )
    deep, store = open_deep_storage(tmp_path / "deep"), open_metadata_store(tmp_path / "meta.db")
    segment = DataSegment(DS, hour, "2025-01-01T00:00:00.000Z")
    published = publish_final(segment, files, dims, [MetricSpec("count", "count")], False,
                              {"rollup": False}, deep, store)  # fmt: skip
    path = published.load_spec["path"]
    rows = pq.read_table(path).to_pydict()
    entries = {d["name"]: d for d in read_segment_facts(path)["dimensions"]}
    assert (
        rows["tags"] == mv_column(["a", ["a", "c"]], "SORTED_SET") and entries["tags"]["multiValue"] is True
    )
    assert rows["nums"] == [auto_value("ARRAY<LONG>", v) for v in (1, [2, 3])]
    assert entries["nums"]["columnType"] == auto_type([1, [2, 3]]) == "ARRAY<LONG>"
    assert rows["doc"] == ['{"x":1}', "[1]"] and {p["path"] for p in entries["doc"]["paths"]} == {"$.x", "$"}
    store.close()


def _json(texts: list[str]) -> pa.Array:
    return pa.ExtensionArray.from_storage(pa.json_(pa.string()), pa.array(texts, pa.string()))
