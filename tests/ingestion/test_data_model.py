"""Multi-value strings, `auto` columns and nested JSON through the local engine, checked against
Druid's rules written apart from the engine (`data_model_oracle`) over the raw rows."""

from __future__ import annotations

import json
from typing import Any

import pyarrow.parquet as pq
import pytest

from strata.ingestion.api import ingest
from strata.storage.segment_file import read_segment_facts
from tests.ingestion.conftest import inline_spec
from tests.ingestion.data_model_oracle import auto_type, auto_value, mv_column

DAY = "2020-01-0{}T0{}:00:00Z"


def _lines(rows: list[dict[str, Any]]) -> str:
    return "\n".join(json.dumps(r) for r in rows)


def _segments(summary: Any) -> list[tuple[dict[str, Any], dict[str, list[Any]]]]:
    """(dimension entries by name, stored columns) of each segment, by interval."""
    out = []
    for w in sorted(summary.segments, key=lambda w: w.segment.interval.start):
        path = w.segment.load_spec["path"]
        facts = read_segment_facts(path)
        out.append(({d["name"]: d for d in facts["dimensions"]}, pq.read_table(path).to_pydict()))
    return out


MV_VALUES: list[Any] = [
    ["b", "a", "a"],
    "c",
    [],
    None,
    [None],
    ["x"],
    [None, "z", None, "y"],
    [1, 2.5, True, ["n", 3]],
    "",
]


@pytest.mark.parametrize("handling", ["SORTED_ARRAY", "SORTED_SET", "ARRAY"])
def test_multi_value_handling(stores: dict[str, Any], handling: str) -> None:
    rows = [{"ts": DAY.format(1, i), "tags": v} for i, v in enumerate(MV_VALUES)]
    dims = [{"name": "tags", "type": "string", "multiValueHandling": handling}]
    summary = ingest(inline_spec(_lines(rows), dimensionsSpec={"dimensions": dims}), **stores)
    [(entries, columns)] = _segments(summary)
    assert columns["tags"] == mv_column(MV_VALUES, handling)
    assert entries["tags"] == {"name": "tags", "type": "string", "multiValueHandling": handling,
                               "multiValue": True, "columnType": "STRING"}  # fmt: skip


def test_a_segment_without_multi_value_rows_stores_plain_strings(stores: dict[str, Any]) -> None:
    day1: list[Any] = [["a", "b"], "c"]
    day2: list[Any] = [["a"], [], [None], None, "d"]
    rows: list[dict[str, Any]] = [{"ts": DAY.format(1, i), "tags": v} for i, v in enumerate(day1)]
    rows += [{"ts": DAY.format(2, i), "tags": v} for i, v in enumerate(day2)]
    summary = ingest(inline_spec(_lines(rows)), **stores)  # schemaless: lists make a multi-value string
    (first, one), (second, two) = _segments(summary)
    assert one["tags"] == mv_column(day1, "SORTED_ARRAY") == [["a", "b"], ["c"]]
    assert two["tags"] == mv_column(day2, "SORTED_ARRAY") == ["a", None, None, None, "d"]
    assert first["tags"]["multiValue"] is True and "multiValue" not in second["tags"]
    assert first["tags"]["columnType"] == second["tags"]["columnType"] == "STRING"


def test_rollup_combines_rows_on_the_whole_multi_value(stores: dict[str, Any]) -> None:
    tags = [["b", "a"], ["a", "b"], ["a", "b", "b"], ["a", "b"], "a", ["a"]]
    rows = [{"ts": "2020-01-01T00:00:00Z", "tags": v, "n": i} for i, v in enumerate(tags)]
    spec = inline_spec(
        _lines(rows),
        dimensionsSpec={"dimensions": ["tags"]},
        metricsSpec=[{"type": "count", "name": "count"}, {"type": "longSum", "name": "n", "fieldName": "n"}],
        granularitySpec={"segmentGranularity": "day", "rollup": True},
    )
    [(_, columns)] = _segments(ingest(spec, **stores))
    groups: dict[Any, list[int]] = {}
    for i, v in enumerate(tags):  # oracle: rows whose sorted values are equal combine
        key = tuple(sorted(v if isinstance(v, list) else [v]))
        groups.setdefault(key, []).append(i)
    got = {tuple(t): (c, n) for t, c, n in zip(columns["tags"], columns["count"], columns["n"], strict=True)}
    assert got == {k: (len(ix), sum(ix)) for k, ix in groups.items()}


AUTO: dict[str, tuple[list[Any], list[Any]]] = {
    "s_long": ([1, None, True, 3], ["x", 2]),
    "s_double": ([1, 2.5, None], [4, 5]),
    "s_string": ([1, "a", 0.5, False], [None, None]),
    "a_bool": ([[True, False, None], [None, True, False]], [[True], None]),
    "a_mixed": ([[True, 1, 0.1, "S1", None], []], [[1, 2.5], 7]),
    "a_empty": ([[], []], [[], [None, None]]),
    "a_null": ([[None, None, None], [None]], [[None, None], None]),  # qaArray's a_null
    "a_nested": ([[[1, 2], [3]], {"k": "v"}], [[1, 2], None]),
}


def test_auto_columns_are_typed_per_segment(stores: dict[str, Any]) -> None:
    n1, n2 = (max(len(v[d]) for v in AUTO.values()) for d in (0, 1))
    rows = [
        {"ts": DAY.format(1, i), **{k: v[0][i] for k, v in AUTO.items() if i < len(v[0])}} for i in range(n1)
    ]
    rows += [
        {"ts": DAY.format(2, i), **{k: v[1][i] for k, v in AUTO.items() if i < len(v[1])}} for i in range(n2)
    ]
    dims = [{"name": k, "type": "auto"} for k in AUTO]
    summary = ingest(inline_spec(_lines(rows), dimensionsSpec={"dimensions": dims}), **stores)
    for day, (entries, columns) in enumerate(_segments(summary)):
        for name in AUTO:
            values = [r.get(name) for r in rows if r["ts"].startswith(f"2020-01-0{day + 1}")]
            kind = auto_type(values)
            assert entries[name]["columnType"] == kind, (name, day)
            assert columns[name] == [auto_value(kind, v) for v in values], (name, day)


def test_schema_discovery_types_every_column(stores: dict[str, Any]) -> None:
    rows = [
        {"ts": DAY.format(1, 0), "n": 1, "tags": ["a", "b"], "obj": {"k": 1}, "s": "x"},
        {"ts": DAY.format(1, 1), "n": 2, "tags": None, "obj": {"k": [1, 2]}, "s": None},
    ]
    spec = inline_spec(
        _lines(rows),
        dimensionsSpec={"dimensions": [{"name": "s", "type": "string"}], "useSchemaDiscovery": True},
    )
    [(entries, _)] = _segments(ingest(spec, **stores))
    assert {k: (e["type"], e["columnType"]) for k, e in entries.items()} == {
        "s": ("string", "STRING"),
        "n": ("auto", "LONG"),
        "tags": ("auto", "ARRAY<STRING>"),
        "obj": ("auto", "COMPLEX<json>"),
    }


def test_schemaless_leaves_nested_values_out(stores: dict[str, Any]) -> None:
    rows: list[dict[str, Any]] = [{"ts": DAY.format(1, 0), "tags": ["b", "a"], "obj": {"k": 1}, "deep": [[1]], "mixed": 1},
            {"ts": DAY.format(1, 1), "tags": "c", "obj": None, "deep": None, "mixed": "a"}]  # fmt: skip
    [(entries, columns)] = _segments(ingest(inline_spec(_lines(rows)), **stores))
    assert list(entries) == ["tags", "mixed"]
    assert columns["tags"] == [["a", "b"], ["c"]] and columns["mixed"] == ["1", "a"]


DOCS: list[Any] = [
    {"user": {"id": 7, "name": "ann"}, "tags": ["a", "b"], "score": 1, "items": [{"sku": "x", "n": 2}]},
    {"user": {"id": 8}, "tags": [], "score": 2.5, "items": [{"sku": "y"}, {"sku": "z", "n": 1}]},
    None,
    {"user": {"id": "nine"}, "tags": ["c"], "odd.key": True, "mixed": [1], "items": []},
    {"mixed": 2},
    5,
]


def test_json_dimension_keeps_values_and_typed_paths(stores: dict[str, Any]) -> None:
    rows = [{"ts": DAY.format(1, i), "doc": d} for i, d in enumerate(DOCS)]
    dims = [{"name": "doc", "type": "json"}]
    [(entries, columns)] = _segments(
        ingest(inline_spec(_lines(rows), dimensionsSpec={"dimensions": dims}), **stores)
    )
    assert entries["doc"]["columnType"] == "COMPLEX<json>"
    assert [None if v is None else json.loads(v) for v in columns["doc"]] == DOCS
    paths = {p["path"]: p for p in entries["doc"]["paths"]}
    # oracle: each literal leaf path, typed by the least restrictive type of its values
    want = {
        "$.user.id": ("STRING", ["7", "8", None, "nine", None, None]),
        "$.user.name": ("STRING", ["ann", None, None, None, None, None]),
        "$.tags": ("ARRAY<STRING>", [["a", "b"], [], None, ["c"], None, None]),
        "$.score": ("DOUBLE", [1.0, 2.5, None, None, None, None]),
        "$.items[0].sku": ("STRING", ["x", "y", None, None, None, None]),
        "$.items[0].n": ("LONG", [2, None, None, None, None, None]),
        "$.items[1].sku": ("STRING", [None, "z", None, None, None, None]),
        "$.items[1].n": ("LONG", [None, 1, None, None, None, None]),
        "$.items": ("ARRAY<LONG>", [None, None, None, [], None, None]),
        "$['odd.key']": ("LONG", [None, None, None, 1, None, None]),
        "$": ("LONG", [None, None, None, None, None, 5]),
    }  # "$.mixed" holds an array in one row and a number in another: no column
    assert {p: (paths[p]["type"], columns[paths[p]["column"]]) for p in paths} == want
    assert all(paths[p]["column"] == f"doc.{p}" for p in paths)


@pytest.mark.parametrize(
    "partitions",
    [
        {"type": "hashed", "numShards": 2},
        {"type": "hashed", "numShards": 2, "partitionDimensions": ["tags"]},
        {"type": "range", "partitionDimensions": ["s"], "targetRowsPerSegment": 2},
    ],
)
def test_partitioning_over_list_and_json_columns_keeps_every_row(
    stores: dict[str, Any], partitions: Any
) -> None:
    rows = [{"ts": DAY.format(1, i % 10), "tags": t, "arr": [i, i + 1], "doc": {"i": i}, "s": f"s{i % 3}"}
            for i, t in enumerate([["a", "b"], "c", None, ["b", "a"], "d", ["x", "y", "z"]])]  # fmt: skip
    dims = ["tags", {"name": "arr", "type": "auto"}, {"name": "doc", "type": "json"}, "s"]
    spec = inline_spec(
        _lines(rows), dimensionsSpec={"dimensions": dims}, tuning={"partitionsSpec": partitions}
    )
    summary = ingest(spec, **stores)
    got = sorted(json.loads(d)["i"] for _, columns in _segments(summary) for d in columns["doc"])
    assert got == list(range(len(rows))) and len(summary.segments) > 1
