"""`ingest(..., engine="spark")` builds the local engine's segments, on real Spark (local[2])."""

from __future__ import annotations

import copy
import gzip
import json
from contextlib import closing
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from strata.ingestion import IngestionError, TooManyParseExceptions, ingest
from strata.storage import open_metadata_store
from tests.ingestion.conftest import inline_spec
from tests.spark_ingest.compare import assert_same_segments, files_under, query_raw, query_segments

pytestmark = pytest.mark.timeout(180)


def _both(spec: dict[str, Any], tmp_path: Path, spark: Any) -> tuple[Any, Any]:
    local = ingest(
        spec, deep_storage=tmp_path / "l" / "deep", metadata=tmp_path / "l" / "m.db", engine="local"
    )
    built = ingest(
        spec,
        deep_storage=tmp_path / "s" / "deep",
        metadata=tmp_path / "s" / "m.db",
        engine="spark",
        spark=spark,
    )
    return local, built


def _with(spec: dict[str, Any], **changes: Any) -> dict[str, Any]:
    out = copy.deepcopy(spec)
    schema = out["spec"]["dataSchema"]
    for key, value in changes.items():
        if key == "tuning":
            out["spec"]["tuningConfig"] = {"type": "index_parallel", **value}
        elif key == "granularity":
            schema["granularitySpec"].update(value)
        else:
            schema[key] = value
    return out


def test_hour_segments_of_1000_rows_equal_local(tutorial_spec, tmp_path, spark, wikipedia_sample):
    spec = _with(
        tutorial_spec, granularity={"segmentGranularity": "hour"}, tuning={"maxRowsPerSegment": 1000}
    )
    local, built = _both(spec, tmp_path, spark)
    assert len(built.segments) == 51  # as Druid's compaction tutorial reports for this sample
    assert_same_segments(local, built)
    sql = "SELECT channel, count(*), sum(added), sum(delta) FROM {} GROUP BY 1 ORDER BY 1"
    assert query_segments(built, sql.format("SEG")) == query_raw(wikipedia_sample, sql.format("RAW"))


ROLLUP_METRICS = [
    {"type": "count", "name": "edits"},
    {"type": "longSum", "name": "added", "fieldName": "added"},
    {"type": "doubleSum", "name": "delta", "fieldName": "delta"},
    {"type": "longMax", "name": "max_deleted", "fieldName": "deleted"},
    {"type": "HLLSketchBuild", "name": "users", "fieldName": "user"},
]


@pytest.mark.parametrize(
    "partitions",
    [
        {"type": "hashed", "numShards": 3, "partitionDimensions": ["channel"]},
        {"type": "single_dim", "partitionDimension": "channel", "targetRowsPerSegment": 100},
        {"type": "range", "partitionDimensions": ["namespace", "channel"], "targetRowsPerSegment": 80},
    ],
    ids=["hashed", "single_dim", "range"],
)
def test_rollup_equals_local_and_raw(partitions, tutorial_spec, tmp_path, spark, wikipedia_sample):
    spec = _with(
        tutorial_spec,
        dimensionsSpec={"dimensions": ["channel", "countryName", "cityName", "namespace", "isRobot"]},
        metricsSpec=ROLLUP_METRICS,
        granularity={"segmentGranularity": "hour", "queryGranularity": "hour", "rollup": True},
        tuning={"partitionsSpec": partitions},
    )
    local, built = _both(spec, tmp_path, spark)
    assert built.rows_rolled_up > 0 and len(built.segments) > 24
    assert_same_segments(local, built)
    got = query_segments(
        built,
        "SELECT date_trunc('hour', __time), channel, sum(edits), sum(added), sum(delta)::BIGINT, max(max_deleted)"
        " FROM SEG GROUP BY 1, 2 ORDER BY 1, 2",
    )
    want = query_raw(
        wikipedia_sample,
        "SELECT date_trunc('hour', CAST(time AS TIMESTAMPTZ)), channel, count(*), sum(added), sum(delta),"
        " max(deleted) FROM RAW GROUP BY 1, 2 ORDER BY 1, 2",
    )
    assert [(r[0].replace(tzinfo=None), *r[1:]) for r in got] == [
        (r[0].replace(tzinfo=None), *r[1:]) for r in want
    ]


def test_several_files_schemaless_discovery_equal_local(tmp_path, spark, wikipedia_sample):
    """Three input files (three read tasks); a column only the second one has is discovered in
    input order, null in the rows of the others, as the local engine does."""
    lines = gzip.decompress(wikipedia_sample.read_bytes()).decode().splitlines()
    parts = tmp_path / "in"
    parts.mkdir()
    for i in range(3):
        chunk = lines[i * 5000 : (i + 1) * 5000]
        if i == 1:
            chunk = [json.dumps({**json.loads(x), "zz_extra": f"e{n % 7}"}) for n, x in enumerate(chunk)]
        (parts / f"part-{i}.json").write_text("\n".join(chunk) + "\n")
    spec = {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": "wiki",
                "timestampSpec": {"column": "time", "format": "iso"},
                "dimensionsSpec": {"dimensions": [], "dimensionExclusions": ["comment"]},
                "granularitySpec": {
                    "segmentGranularity": "hour",
                    "queryGranularity": "none",
                    "rollup": False,
                },
            },
            "ioConfig": {
                "inputSource": {"type": "local", "baseDir": str(parts), "filter": "*.json"},
                "inputFormat": {"type": "json"},
            },
            "tuningConfig": {"partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 700}},
        },
    }
    local, built = _both(spec, tmp_path, spark)
    assert (
        built.segments[0].segment.dimensions[-1] == "zz_extra"
        and "comment" not in built.segments[0].segment.dimensions
    )
    assert_same_segments(local, built)
    assert query_segments(built, "SELECT count(zz_extra), count(*) FROM SEG") == [(5000, 15000)]


def test_parquet_input_split_by_row_groups(tmp_path, spark, wikipedia_sample, monkeypatch):
    """A Parquet file is read by several tasks (runs of row groups); row numbers stay exact."""
    import strata.ingestion.splits as splits

    rows = [json.loads(x) for x in gzip.decompress(wikipedia_sample.read_bytes()).decode().splitlines()]
    rows[12_345]["time"] = "not a time"
    path = tmp_path / "wiki.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=4000)
    monkeypatch.setattr(splits, "SPLIT_ROWS", 10_000)
    spec = inline_spec("", {"type": "parquet"}, dataSource="wiki",
                       timestampSpec={"column": "time", "format": "iso"},
                       dimensionsSpec={"dimensions": ["channel", "page", {"name": "added", "type": "long"}]},
                       tuning={"maxParseExceptions": 10, "partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 9000}})  # fmt: skip
    spec["ioConfig"]["inputSource"] = {"type": "local", "files": [str(path)]}
    local, built = _both(spec, tmp_path, spark)
    assert [str(p) for p in built.problems] == [
        f"{path}:12346: column 'time': unparseable or missing timestamp 'not a time'"
    ]
    assert_same_segments(local, built)
    assert len(built.segments) == 5


def test_bad_rows_reported_with_lines(tmp_path, spark):
    data = "\n".join([
        '{"ts": "2020-01-01T01:00:00Z", "d": "a", "n": 1}',
        '{"ts": "2020-01-01T02:00:00Z", "d": "b", "n": "x"}',
        "{not json",
        '{"ts": "yesterday", "d": "c", "n": 3}',
        '{"ts": "2020-01-02T00:00:00Z", "d": "d", "n": 4}',
    ]) + "\n"  # fmt: skip
    spec = inline_spec(data, dimensionsSpec={"dimensions": ["d", {"name": "n", "type": "long"}]},
                       tuning={"maxParseExceptions": 3})  # fmt: skip
    local, built = _both(spec, tmp_path, spark)
    assert built.parse_errors == 3 and built.rows_ingested == 2
    assert [p.line for p in built.problems] == [2, 3, 4]
    assert [str(p) for p in built.problems] == [str(p) for p in local.problems]
    assert_same_segments(local, built)


def test_too_many_bad_rows_publish_nothing(tmp_path, spark):
    data = '{"ts": "2020-01-01T01:00:00Z", "d": "a"}\n{"ts": "never", "d": "b"}\n'
    deep, meta = tmp_path / "deep", tmp_path / "m.db"
    with pytest.raises(TooManyParseExceptions) as err:
        ingest(inline_spec(data), deep_storage=deep, metadata=meta, engine="spark", spark=spark)
    assert "inline:2" in str(err.value)
    assert files_under(deep) == []
    with closing(open_metadata_store(meta)) as store:
        assert store.segments(include_unused=True) == []


def test_append_joins_the_latest_version(tmp_path, spark):
    first = inline_spec(
        '{"ts": "2020-01-01T01:00:00Z", "d": "a"}\n{"ts": "2020-01-01T02:00:00Z", "d": "b"}\n'
    )
    second = inline_spec('{"ts": "2020-01-01T03:00:00Z", "d": "c"}\n')
    second["ioConfig"]["appendToExisting"] = True
    stores = {"deep_storage": tmp_path / "deep", "metadata": tmp_path / "m.db"}
    one = ingest(first, **stores, engine="spark", spark=spark)
    two = ingest(second, **stores, engine="spark", spark=spark)
    (seg,) = [w.segment for w in two.segments]
    assert seg.version == one.segments[0].segment.version and seg.partition_num == 1
    with closing(open_metadata_store(stores["metadata"])) as store:
        assert len(store.used_segments("t")) == 2


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_text_file_split_by_byte_ranges(fmt, tmp_path, spark, wikipedia_sample, monkeypatch):
    """One uncompressed file read by several tasks (byte ranges cut after a newline): the same
    segments, and bad rows reported at their line in the whole file, as the local engine does."""
    import strata.ingestion.splits as splits

    rows = [
        json.loads(x) for x in gzip.decompress(wikipedia_sample.read_bytes()).decode().splitlines()[:12_000]
    ]
    keep = ["time", "channel", "page", "added"]
    path = tmp_path / f"wiki.{fmt}"
    if fmt == "json":
        lines = [json.dumps({k: r[k] for k in keep}) for r in rows]
        bad_at = [0, 4_321, 11_999]  # 0-based indexes of lines to break
        for i in bad_at:
            lines[i] = "{broken"
    else:
        lines = [",".join(keep)] + [
            ",".join(json.dumps(r[k]) if k == "page" else str(r[k]) for k in keep) for r in rows
        ]
        bad_at = [1, 6_000, 12_000]
        for i in bad_at:
            lines[i] = "2015-09-12T00:00:00Z,only-two"
    path.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(splits, "SPLIT_BYTES", 150_000)
    fmt_spec = {"type": fmt, "findColumnsFromHeader": True} if fmt == "csv" else {"type": fmt}
    spec = inline_spec("", fmt_spec, dataSource="wiki", timestampSpec={"column": "time", "format": "iso"},
                       dimensionsSpec={"dimensions": ["channel", "page", {"name": "added", "type": "long"}]},
                       tuning={"maxParseExceptions": 5, "partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 4000}})  # fmt: skip
    spec["ioConfig"]["inputSource"] = {"type": "local", "files": [str(path)]}
    from strata.ingestion.readers import resolve_inputs
    from strata.ingestion.spec import parse_spec

    parsed = parse_spec(spec)
    assert len(splits.split_inputs(resolve_inputs(parsed.input_source), parsed.input_format)) > 3
    local, built = _both(spec, tmp_path, spark)
    assert [p.line for p in built.problems] == [i + 1 for i in bad_at]
    assert [str(p) for p in built.problems] == [str(p) for p in local.problems]
    assert_same_segments(local, built)


def test_rows_outside_the_intervals_are_thrown_away(tmp_path, spark):
    data = "".join(f'{{"ts": "2020-01-0{d}T12:00:00Z", "d": "x{d}"}}\n' for d in range(1, 6))
    spec = inline_spec(
        data, granularitySpec={"segmentGranularity": "day", "intervals": ["2020-01-02/2020-01-04"]}
    )
    local, built = _both(spec, tmp_path, spark)
    assert built.rows_thrown_away == 3 and built.rows_ingested == 2
    assert_same_segments(local, built)
    outside = inline_spec(
        data, granularitySpec={"segmentGranularity": "day", "intervals": ["2021-01-01/2021-01-02"]}
    )
    with pytest.raises(IngestionError, match="nothing to ingest: 5 rows read, 0 unparseable, 5 thrown away"):
        ingest(outside, deep_storage=tmp_path / "x", metadata=tmp_path / "x.db", engine="spark", spark=spark)


def test_a_failing_read_task_is_a_clear_error_and_leaves_nothing(tmp_path, spark, wikipedia_sample):
    """A corrupt gzip file fails its Spark task: the error is the task's own, nothing is published."""
    good = tmp_path / "in" / "a.json.gz"
    good.parent.mkdir()
    good.write_bytes(wikipedia_sample.read_bytes())
    (tmp_path / "in" / "b.json.gz").write_bytes(wikipedia_sample.read_bytes()[:1000] + b"garbage" * 100)
    spec = inline_spec(
        "", timestampSpec={"column": "time", "format": "iso"}, tuning={"maxParseExceptions": -1}
    )
    spec["ioConfig"]["inputSource"] = {"type": "local", "baseDir": str(good.parent), "filter": "*.gz"}
    deep, meta = tmp_path / "deep", tmp_path / "m.db"
    with pytest.raises(IngestionError, match=r"the Spark job failed: .*(gzip|Compressed|CRC|Error)"):
        ingest(spec, deep_storage=deep, metadata=meta, engine="spark", spark=spark)
    assert files_under(deep) == []
    with closing(open_metadata_store(meta)) as store:
        assert store.segments(include_unused=True) == []
