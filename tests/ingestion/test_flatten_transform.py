"""flattenSpec, transformSpec and CSV/TSV listDelimiter through the local engine, each checked
against plain Python over the raw rows."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from strata.ingestion.api import ingest
from strata.ingestion.errors import SpecError
from strata.ingestion.flatten import parse_path
from strata.storage.segment_file import read_segment_facts
from tests.ingestion.conftest import inline_spec
from tests.ingestion.data_model_oracle import mv_column

RAW: list[dict[str, Any]] = [
    {"t": {"at": "2020-01-01T00:00:00Z"}, "user": {"id": 1, "geo": {"city": "Paris"}}, "items": [{"sku": "a"}, {"sku": "b"}], "n": 3, "s": "x"},
    {"t": {"at": "2020-01-01T01:00:00Z"}, "user": {"id": 2}, "items": [], "n": None, "s": "y"},
    {"t": {"at": "2020-01-01T02:00:00Z"}, "user": None, "items": [{"sku": "c"}], "n": 5, "s": None},
]  # fmt: skip


def _rows(summary: Any) -> dict[str, list[Any]]:
    tables = [pq.read_table(w.segment.load_spec["path"]) for w in summary.segments]
    table = pa.concat_tables(tables)
    return table.sort_by("__time").to_pydict()


def _lines(rows: list[dict[str, Any]]) -> str:
    return "\n".join(json.dumps(r) for r in rows)


def _get(row: Any, *steps: Any) -> Any:
    for s in steps:
        if isinstance(s, int):
            row = row[s] if isinstance(row, list) and -len(row) <= s < len(row) else None
        else:
            row = row.get(s) if isinstance(row, dict) else None
    return row


@pytest.mark.parametrize("discovery", [True, False])
def test_flatten_fields(stores: dict[str, Any], discovery: bool) -> None:
    flatten = {
        "useFieldDiscovery": discovery,
        "fields": [
            {"type": "path", "name": "ts", "expr": "$.t.at"},
            {"type": "path", "name": "city", "expr": "$.user.geo['city']"},
            {"type": "tree", "name": "uid", "nodes": ["user", "id"]},
            {"type": "path", "name": "first_sku", "expr": "$.items[0].sku"},
            {"type": "path", "name": "last_sku", "expr": "$.items[-1].sku"},
            {"type": "path", "name": "skus", "expr": "$.items[*].sku"},
            "s",
        ],
    }
    dims = ["city", {"name": "uid", "type": "long"}, "first_sku", "last_sku", "skus", "s", "n"]
    spec = inline_spec(
        _lines(RAW), {"type": "json", "flattenSpec": flatten},
        timestampSpec={"column": "ts", "format": "iso"}, dimensionsSpec={"dimensions": dims},
    )  # fmt: skip
    got = _rows(ingest(spec, **stores))
    skus = [[i["sku"] for i in r["items"]] for r in RAW]
    assert got["city"] == [_get(r, "user", "geo", "city") for r in RAW]
    assert got["uid"] == [_get(r, "user", "id") for r in RAW]
    assert got["first_sku"] == [_get(r, "items", 0, "sku") for r in RAW]
    assert got["last_sku"] == [_get(r, "items", -1, "sku") for r in RAW]
    assert got["skus"] == mv_column(skus, "SORTED_ARRAY")
    assert got["s"] == [r["s"] for r in RAW]
    # `n` is not a listed field: readable only with field discovery
    assert got["n"] == (
        [str(r["n"]) if r["n"] is not None else None for r in RAW] if discovery else [None] * 3
    )


@pytest.mark.parametrize(
    ("expr", "steps"),
    [
        ("$.a.b", ("a", "b")),
        ("$['a.b'][2]", ("a.b", 2)),
        ("$.a[*].c", ("a", "*", "c")),
        ('$["x"].*', ("x", "*")),
    ],
)
def test_path_syntax(expr: str, steps: tuple[Any, ...]) -> None:
    assert parse_path(expr) == steps


@pytest.mark.parametrize(
    ("field", "message"),
    [
        ({"type": "jq", "name": "x", "expr": ".a"}, "'jq' fields are not supported"),
        ({"type": "path", "name": "x", "expr": "$..a"}, "only '.key'"),
        ({"type": "path", "name": "x", "expr": "a.b"}, "must start with '\\$'"),
    ],
)
def test_unsupported_flatten_fields_are_refused(stores: dict[str, Any], field: Any, message: str) -> None:
    spec = inline_spec("{}", {"type": "json", "flattenSpec": {"fields": [field]}})
    with pytest.raises(SpecError, match=message):
        ingest(spec, **stores)


def test_transforms_and_filter(stores: dict[str, Any]) -> None:
    rows = [
        {"ts": f"2020-01-0{1 + i % 2}T0{i}:00:00Z", "country": c, "n": n, "m": m}
        for i, (c, n, m) in enumerate([("fr", 1, 2.5), ("de", None, 1.0), ("FR", 3, None), ("us", 4, 4.0)])
    ]
    transform = {
        "transforms": [
            {"type": "expression", "name": "country", "expression": "upper(country)"},  # shadows the field
            {
                "type": "expression",
                "name": "label",
                "expression": "concat(country, '-', n)",
            },  # reads the input field
            {"type": "expression", "name": "total", "expression": "n * 2 + m"},
            {"type": "expression", "name": "__time", "expression": "__time + 60000"},
        ],
        "filter": {"type": "not", "field": {"type": "selector", "dimension": "country", "value": "US"}},
    }
    spec = inline_spec(
        _lines(rows), transformSpec=transform,
        dimensionsSpec={"dimensions": ["country", "label", {"name": "total", "type": "double"}]},
        metricsSpec=[{"type": "longSum", "name": "n_sum", "fieldName": "n"}],
    )  # fmt: skip
    summary = ingest(spec, **stores)
    got = _rows(summary)

    def oracle(r: dict[str, Any]) -> tuple[Any, ...]:
        total = None if r["n"] is None or r["m"] is None else r["n"] * 2 + r["m"]
        label = None if r["n"] is None else f"{r['country']}-{r['n']}"
        at = datetime.fromisoformat(r["ts"]).astimezone(UTC).timestamp() * 1000 + 60000
        return int(at), r["country"].upper(), label, total, r["n"]

    want = sorted(oracle(r) for r in rows if r["country"].upper() != "US")
    times = pa.array(got["__time"], pa.timestamp("ms", tz="UTC")).cast(pa.int64()).to_pylist()
    assert list(zip(times, got["country"], got["label"], got["total"], got["n_sum"], strict=True)) == want
    assert summary.rows_thrown_away == 1 and summary.rows_ingested == 3


def test_bad_transform_expression_is_a_spec_error(stores: dict[str, Any]) -> None:
    spec = inline_spec(
        "{}", transformSpec={"transforms": [{"type": "expression", "name": "x", "expression": "1 +"}]}
    )
    with pytest.raises(SpecError, match="transform 'x'"):
        ingest(spec, **stores)


@pytest.mark.parametrize(("kind", "sep", "list_delimiter"), [("csv", ",", "|"), ("tsv", "\t", None)])
def test_list_delimiter_makes_multi_value_strings(
    stores: dict[str, Any], kind: str, sep: str, list_delimiter: str | None
) -> None:
    split = list_delimiter or "\x01"  # Druid's default: ctrl-A
    values = [["b", "a"], ["c"], ["x", "y", "x"], None]
    lines = [
        sep.join([f"2020-01-01T0{i}:00:00Z", "" if v is None else split.join(v), split.join(["1", "2"])])
        for i, v in enumerate(values)
    ]
    fmt: dict[str, Any] = {"type": kind, "columns": ["ts", "tags", "nums"]}
    if list_delimiter:
        fmt["listDelimiter"] = list_delimiter
    dims = [
        {"name": "tags", "type": "string", "multiValueHandling": "SORTED_SET"},
        {"name": "nums", "type": "auto"},
    ]
    got = _rows(ingest(inline_spec("\n".join(lines), fmt, dimensionsSpec={"dimensions": dims}), **stores))
    assert got["tags"] == [None if v is None else sorted(set(v)) for v in values]
    assert got["nums"] == [["1", "2"]] * 4  # CSV values are strings: an ARRAY<STRING>


def test_json_value_transforms_keep_each_values_type(stores: dict[str, Any]) -> None:
    rows: list[dict[str, Any]] = [
        {"ts": "2020-01-01T00:00:00Z", "a_int": [1, 2, None], "a_mixed": [True, 1, 0.1, "S1"], "doc": {"x": {"y": 1.5}}},
        {"ts": "2020-01-01T01:00:00Z", "a_int": [None, 2, 1], "a_mixed": ["S1", None], "doc": {"x": [1, 2]}},
    ]  # fmt: skip
    for row, flag in zip(rows, (True, False), strict=True):
        row["a_bool"] = [flag, None]
    transforms = [
        {"type": "expression", "name": "first_int", "expression": "json_value(a_int, '$[0]')"},
        {"type": "expression", "name": "first_mixed", "expression": "json_value(a_mixed, '$[0]')"},
        {"type": "expression", "name": "y", "expression": "json_value(doc, '$.x.y')"},
        {"type": "expression", "name": "y_text", "expression": "json_value(doc, '$.x.y', 'STRING')"},
        {"type": "expression", "name": "x", "expression": "json_query(doc, '$.x')"},
        {"type": "expression", "name": "first_bool", "expression": "json_value(a_bool, '$[0]')"},
    ]
    dims = [
        {"name": n, "type": "auto"} for n in ("first_int", "first_mixed", "y", "y_text", "x", "first_bool")
    ]
    spec = inline_spec(
        _lines(rows), transformSpec={"transforms": transforms}, dimensionsSpec={"dimensions": dims}
    )
    summary = ingest(spec, **stores)
    got = _rows(summary)
    entries = {
        d["name"]: d["columnType"]
        for d in read_segment_facts(summary.segments[0].segment.load_spec["path"])["dimensions"]
    }
    # oracle: the literal each path finds, typed by auto's rules over the segment's values
    assert (entries["first_int"], got["first_int"]) == ("LONG", [1, None])
    assert (entries["first_mixed"], got["first_mixed"]) == ("STRING", ["true", "S1"])
    assert (entries["y"], got["y"]) == ("DOUBLE", [1.5, None])  # row 2's `$.x` is an array: no `$.x.y`
    assert (entries["y_text"], got["y_text"]) == ("STRING", ["1.5", None])
    assert entries["x"] == "COMPLEX<json>" and [json.loads(v) for v in got["x"]] == [{"y": 1.5}, [1, 2]]
    # qaArray ingest_*.02.std.iq: `t_bool_scalar1 = 'true'` counts the rows whose a_bool starts true
    assert (entries["first_bool"], got["first_bool"]) == ("STRING", ["true", "false"])
