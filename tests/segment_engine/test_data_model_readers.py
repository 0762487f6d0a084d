"""Segments with multi-value strings, arrays and nested JSON are read by every reader of segments:
the engine's schema (path columns hidden, Druid types from the footer), scans from Parquet and from
the historical's Arrow copies, segmentMetadata, footer statistics. The values a scan returns are
checked against the raw rows through Druid's rules (`tests.ingestion.data_model_oracle`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from historical_service.arrow_copy import mapped_copy
from strata.engine import SegmentInput, mapped_source, run_to_json
from strata.engine.footer import read_footer
from strata.engine.segment_input import read_schema
from strata.ingestion.api import ingest
from strata.query import parse_query
from tests.ingestion.data_model_oracle import auto_value, mv_column

ROWS: list[
    dict[str, Any]
] = [  # day 1 holds multi-value rows; day 2 none, so its `tags` is a plain string column
    {
        "ts": "2020-01-01T00:00:00Z",
        "tags": ["b", "a"],
        "nums": [1, 2, None],
        "doc": {"a": {"b": 1}, "c": "x"},
    },
    {"ts": "2020-01-01T01:00:00Z", "tags": "c", "nums": [], "doc": {"a": {"b": 2}}},
    {"ts": "2020-01-01T02:00:00Z", "tags": None, "nums": None, "doc": None},
    {"ts": "2020-01-02T00:00:00Z", "tags": ["d"], "nums": [3], "doc": {"c": "y"}},
    {"ts": "2020-01-02T01:00:00Z", "tags": [], "nums": [None], "doc": [1, 2]},
]
DIMS = [{"name": "tags", "type": "string"}, {"name": "nums", "type": "auto"}, {"name": "doc", "type": "json"}]
INTERVAL = "2020-01-01/2020-01-03"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> list[SegmentInput]:
    root = tmp_path_factory.mktemp("data-model")
    spec = {
        "dataSchema": {
            "dataSource": "dm",
            "timestampSpec": {"column": "ts"},
            "dimensionsSpec": {"dimensions": DIMS},
            "metricsSpec": [{"type": "count", "name": "count"}],
            "granularitySpec": {"segmentGranularity": "day", "rollup": False},
        },
        "ioConfig": {
            "inputSource": {"type": "inline", "data": "\n".join(json.dumps(r) for r in ROWS)},
            "inputFormat": {"type": "json"},
        },
    }
    summary = ingest(spec, deep_storage=root / "deep", metadata=root / "meta.db", engine="local")
    segments = sorted((w.segment for w in summary.segments), key=lambda s: s.interval.start)
    return [SegmentInput(s.id, s.descriptor, s.load_spec["path"], s.interval) for s in segments]


@pytest.fixture(params=["parquet", "arrow"])
def served(request: pytest.FixtureRequest, inputs: list[SegmentInput]) -> Iterator[str]:
    if request.param == "arrow":
        for inp in inputs:
            assert mapped_source.register(inp.path, mapped_copy(Path(inp.path)))
    try:
        yield request.param
    finally:
        for inp in inputs:
            mapped_source.unregister(inp.path)


def _expected_rows() -> list[dict[str, Any]]:
    """Each row as stored, by Druid's rules: `tags` per segment, `nums` ARRAY<LONG>, `doc` JSON."""
    out = []
    for day in ("2020-01-01", "2020-01-02"):
        rows = [r for r in ROWS if r["ts"].startswith(day)]
        tags = mv_column([r["tags"] for r in rows], "SORTED_ARRAY")
        for r, t in zip(rows, tags, strict=True):
            stored = auto_value("COMPLEX<json>", r["doc"])
            doc = None if stored is None else json.loads(stored)  # a scan answers the JSON value itself
            if isinstance(t, list) and len(t) == 1:  # a row of one value prints as that value
                t = t[0]
            out.append({"tags": t, "nums": auto_value("ARRAY<LONG>", r["nums"]), "doc": doc, "count": 1})
    return out


def test_schema_hides_path_columns_and_reads_druid_types(inputs: list[SegmentInput]) -> None:
    first, second = (read_schema(i.path) for i in inputs)
    assert list(first.columns) == ["__time", "tags", "nums", "doc", "count"]
    assert set(first.hidden) == {"doc.$.a.b", "doc.$.c"} and set(second.hidden) == {"doc.$.c", "doc.$"}
    assert first.druid_types == {"__time": "LONG", "tags": "STRING", "nums": "ARRAY<LONG>",
                                 "doc": "COMPLEX<json>", "count": "LONG"}  # fmt: skip
    assert second.druid_types == first.druid_types
    footer = read_footer(inputs[0].path)
    assert footer.column_stats("tags") is None and footer.column_stats("doc.$.a.b") is not None


def test_scan_returns_the_stored_values(served: str, inputs: list[SegmentInput]) -> None:
    query = parse_query({"queryType": "scan", "dataSource": "dm", "intervals": [INTERVAL],
                         "columns": ["tags", "nums", "doc", "count"]})  # fmt: skip
    each = [e for inp in inputs for part in run_to_json(query, [inp]) for e in part["events"]]
    assert each == _expected_rows()
    # read together, a multi-value string stored as lists in one segment and as strings in the
    # other is read as lists in both (one relation), and answered as Druid prints a multi-value
    # row: its one value as a string, several as a list
    both = [e for part in run_to_json(query, inputs) for e in part["events"]]
    assert both == each


def test_segment_metadata_reports_the_types(served: str, inputs: list[SegmentInput]) -> None:
    query = parse_query({"queryType": "segmentMetadata", "dataSource": "dm", "intervals": [INTERVAL],
                         "merge": False})  # fmt: skip
    by_segment = {a["id"]: a["columns"] for a in run_to_json(query, inputs)}
    first, second = (by_segment[i.segment_id] for i in inputs)
    assert {c: (v["typeSignature"], v["hasMultipleValues"]) for c, v in first.items()} == {
        "__time": ("LONG", False),
        "tags": ("STRING", True),
        "nums": ("ARRAY<LONG>", False),
        "doc": ("COMPLEX<json>", False),
        "count": ("LONG", False),
    }
    assert second["tags"]["hasMultipleValues"] is False and second["tags"]["cardinality"] == 2  # "d" and null
    assert first["tags"]["cardinality"] == 4 and first["tags"]["maxValue"] == "c"  # a, b, c and null


def test_groupby_on_a_json_column_groups_by_its_value(served: str, inputs: list[SegmentInput]) -> None:
    # Druid groups COMPLEX<json> values (qaArray sql_group_by.02.std.iq line 811 groups a_nested),
    # answering each group's JSON value; the oracle counts the stored values of the raw rows
    query = parse_query({"queryType": "groupBy", "dataSource": "dm", "intervals": [INTERVAL],
                         "granularity": "all",
                         "dimensions": [{"type": "default", "dimension": "doc", "outputName": "d",
                                         "outputType": "COMPLEX<json>"}],
                         "aggregations": [{"type": "count", "name": "n"}]})  # fmt: skip
    want: dict[str, int] = {}
    for r in ROWS * 2:  # each segment read twice: its values meet their copies in the merge
        stored = auto_value("COMPLEX<json>", r["doc"])
        key = json.dumps(None if stored is None else json.loads(stored), sort_keys=True)
        want[key] = want.get(key, 0) + 1
    rows = [r["event"] for r in run_to_json(query, [*inputs, *inputs])]
    assert len(rows) == len(want)
    assert {json.dumps(e["d"], sort_keys=True): e["n"] for e in rows} == want
