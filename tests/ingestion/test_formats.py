"""Input formats, timestamp formats, schemaless discovery and spec parsing."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from strata.ingestion import SpecError, ingest, parse_spec
from strata.ingestion.spec import DynamicPartitions, HashedPartitions, RangePartitions
from tests.ingestion.conftest import inline_spec

DAY = 86_400_000


def _rows(summary):
    return pa.concat_tables(pq.read_table(w.segment.load_spec["path"]) for w in summary.segments)


def test_csv_tsv_and_header(stores):
    csv_data = (
        '# comment line skipped\nts,city,n\n2020-01-01T01:00:00Z,"Paris, FR",3\n2020-01-01T02:00:00Z,,4\n'
    )
    fmt = {"type": "csv", "findColumnsFromHeader": True, "skipHeaderRows": 1}
    spec = inline_spec(csv_data, fmt, dimensionsSpec={"dimensions": ["city", {"name": "n", "type": "long"}]})
    got = _rows(ingest(spec, **stores)).to_pydict()
    assert got["city"] == ["Paris, FR", None] and got["n"] == [3, 4]
    tsv = "2020-01-01T01:00:00Z\ta\t1.5\n"
    spec = inline_spec(
        tsv,
        {"type": "tsv", "columns": ["ts", "d", "x"]},
        dimensionsSpec={"dimensions": ["d", {"name": "x", "type": "double"}]},
    )
    assert _rows(ingest(spec, **stores)).to_pydict()["x"] == [1.5]


def test_parquet_input_and_files_list(stores, tmp_path):
    path = tmp_path / "in.parquet"
    ts = pa.array([0, DAY + 5, 2 * DAY], pa.timestamp("ms"))
    pq.write_table(pa.table({"t": ts, "d": ["a", "b", "c"], "v": [1.0, 2.0, None]}), path)
    spec = inline_spec(
        "",
        dimensionsSpec={"dimensions": ["d"]},
        metricsSpec=[{"type": "doubleSum", "name": "v", "fieldName": "v"}],
        timestampSpec={"column": "t", "format": "auto"},
    )
    spec["ioConfig"] = {
        "inputSource": {"type": "local", "files": [str(path)]},
        "inputFormat": {"type": "parquet"},
    }
    summary = ingest(spec, **stores)
    assert [str(w.segment.interval)[:10] for w in summary.segments] == [
        "1970-01-01",
        "1970-01-02",
        "1970-01-03",
    ]
    assert _rows(summary).to_pydict()["v"] == [1.0, 2.0, None]


@pytest.mark.parametrize(("fmt", "value", "expected"), [
    ("iso", '"2015-09-12T00:46:58.771Z"', 1442018818771),
    ("iso", '"2015-09-12T02:46:58.771+02:00"', 1442018818771),
    ("iso", '"2015-09-12"', 1442016000000),
    ("millis", "1442018818771", 1442018818771),
    ("millis", '"1442018818771"', 1442018818771),
    ("posix", "1442018818", 1442018818000),
    ("nano", "1442018818771000000", 1442018818771),
    ("auto", "1442018818771", 1442018818771),
    ("auto", '"2015-09-12T00:46:58.771Z"', 1442018818771),
])  # fmt: skip
def test_timestamp_formats(fmt, value, expected, stores):
    spec = inline_spec(f'{{"ts": {value}, "d": "x"}}', timestampSpec={"column": "ts", "format": fmt})
    times = _rows(ingest(spec, **stores)).column("__time").cast(pa.int64()).to_pylist()
    assert times == [expected]


def test_missing_value_fills_absent_timestamps(stores):
    spec = inline_spec(
        '{"d": "x"}\n{"ts": null, "d": "y"}',
        timestampSpec={"column": "ts", "missingValue": "2010-01-01T00:00:00Z"},
    )
    times = _rows(ingest(spec, **stores)).column("__time").cast(pa.int64()).to_pylist()
    assert times == [1262304000000] * 2


def test_schemaless_discovery_and_exclusions(stores):
    data = (
        '{"ts": 0, "a": "x", "b": 1, "skip": "s", "m": 2, "nested": {"k": 1}}\n{"ts": 1, "c": true, "m": 3}'
    )
    spec = inline_spec(
        data,
        dimensionsSpec={"dimensions": [], "dimensionExclusions": ["skip"]},
        metricsSpec=[{"type": "longSum", "name": "m_sum", "fieldName": "m"}],
    )
    summary = ingest(spec, **stores)
    assert summary.segments[0].segment.dimensions == ("a", "b", "c")
    got = _rows(summary).to_pydict()
    assert got["b"] == ["1", None] and got["c"] == [None, "true"] and got["m_sum"] == [2, 3]


def test_query_granularity_truncates_and_intervals_filter(stores):
    data = "\n".join(
        [
            '{"ts": "2020-01-01T10:15:00Z", "d": "a"}',
            '{"ts": "2020-01-01T10:45:00Z", "d": "a"}',
            '{"ts": "2020-01-03T00:00:00Z", "d": "a"}',
        ]
    )
    spec = inline_spec(
        data,
        granularitySpec={
            "segmentGranularity": "day",
            "queryGranularity": "hour",
            "rollup": True,
            "intervals": ["2020-01-01/2020-01-02"],
        },
        metricsSpec=[{"type": "count", "name": "count"}],
    )
    summary = ingest(spec, **stores)
    assert summary.rows_thrown_away == 1 and summary.rows_rolled_up == 1
    got = _rows(summary).to_pydict()
    assert got["count"] == [2] and got["__time"][0].isoformat() == "2020-01-01T10:00:00+00:00"


def test_spec_parsing_forms():
    base = inline_spec("x")
    assert parse_spec({"type": "index", "spec": base}) == parse_spec(base)
    assert parse_spec(
        {**base, "tuningConfig": {"maxRowsPerSegment": 10}}
    ).tuning.partitions == DynamicPartitions(10)
    hashed = {"partitionsSpec": {"type": "hashed", "numShards": 3, "partitionDimensions": ["d"]}}
    assert parse_spec({**base, "tuningConfig": hashed}).tuning.partitions == HashedPartitions(3, ("d",))
    single = {"partitionsSpec": {"type": "single_dim", "partitionDimension": "d", "targetRowsPerSegment": 5}}
    assert parse_spec({**base, "tuningConfig": single}).tuning.partitions == RangePartitions(("d",), 5, True)
    assert parse_spec(base).tuning.max_parse_exceptions == 0


@pytest.mark.parametrize(("patch", "message"), [
    ({"dataSchema": {"dataSource": ""}}, "dataSource"),
    ({"ioConfig": {"inputSource": {"type": "hdfs"}, "inputFormat": {"type": "json"}}}, "inputSource type"),
    ({"ioConfig": {"inputSource": {"type": "s3"}, "inputFormat": {"type": "json"}}}, "needs .uris."),
    ({"ioConfig": {"inputSource": {"type": "inline", "data": ""}, "inputFormat": {"type": "avro"}}}, "avro"),
    ({"tuningConfig": {"partitionsSpec": {"type": "weird"}}}, "partitionsSpec"),
])  # fmt: skip
def test_bad_specs_are_refused(patch, message):
    spec = inline_spec("x")
    for k, v in patch.items():
        spec[k] = {**spec[k], **v}
    with pytest.raises(SpecError, match=message):
        parse_spec(spec)


def test_unknown_engine(stores):
    with pytest.raises(SpecError, match="unknown engine 'flink'"):
        ingest(inline_spec('{"ts": 0}'), engine="flink", **stores)


def test_json_lists_starting_with_null_keep_every_value(stores):
    # Arrow's JSON reader builds a list whose first element is null one value short (its offsets
    # count the null, its values do not: apache/arrow#51305); each row must keep its own values
    rows = [[None, "", "1"], ["2", None], [None, None, "3"]]
    data = "\n".join(
        f'{{"ts": {i}, "tags": {json.dumps(r)}, "arr": {json.dumps(r)}}}' for i, r in enumerate(rows)
    )
    dims = [
        {"name": "tags", "type": "string", "multiValueHandling": "ARRAY"},
        {"name": "arr", "type": "auto"},
    ]
    got = _rows(ingest(inline_spec(data, dimensionsSpec={"dimensions": dims}), **stores)).to_pydict()
    assert got["tags"] == rows and got["arr"] == rows
