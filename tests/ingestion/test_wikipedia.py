"""The quickstart sample through Druid's tutorial spec, checked against DuckDB over the raw file."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq

from strata.ingestion import ingest
from strata.storage import open_metadata_store
from strata.storage.segment_file import read_segment_facts


def _raw(sample: Path, sql: str) -> list[tuple[Any, ...]]:
    rel = f"read_json('{sample}', format='newline_delimited')"
    return duckdb.execute(sql.replace("RAW", rel)).fetchall()


def test_tutorial_spec_gives_one_day_segment(tutorial_spec, stores, wikipedia_sample):
    summary = ingest(tutorial_spec, **stores)
    assert summary.rows_read == summary.rows_ingested == 39_244
    assert len(summary.segments) == 1
    seg = summary.segments[0].segment
    assert str(seg.interval) == "2015-09-12T00:00:00.000Z/2015-09-13T00:00:00.000Z"
    assert seg.shard_spec.type == "none" and seg.load_spec["type"] == "local"
    seg_rows = pq.read_table(seg.load_spec["path"])
    table = seg_rows
    assert table.num_rows == 39_244
    assert str(table.schema.field("__time").type) == "timestamp[ms, tz=UTC]"
    assert str(table.schema.field("added").type) == "int64"
    assert str(table.schema.field("isRobot").type) == "string"
    # sorted by __time, then dimensions
    keys = table.select(["__time", "channel", "cityName"]).to_pylist()
    norm = [(r["__time"], r["channel"] is not None, r["channel"] or "") for r in keys]
    assert norm == sorted(norm)
    # values match the raw file
    got = duckdb.execute(
        "SELECT sum(added), sum(delta), count(DISTINCT page), count(*) FILTER (isRobot = 'true') "
        "FROM seg_rows"
    ).fetchall()
    want = _raw(
        wikipedia_sample,
        "SELECT sum(added), sum(delta), count(DISTINCT page), count(*) FILTER (isRobot) FROM RAW",
    )
    assert got == want
    facts = read_segment_facts(seg.load_spec["path"])
    assert (
        facts["numRows"] == 39_244
        and facts["rollup"] is False
        and facts["queryGranularity"] == {"type": "none"}
    )
    meta = pq.ParquetFile(seg.load_spec["path"]).metadata
    assert meta.row_group(0).column(0).statistics.has_min_max
    store = open_metadata_store(stores["metadata"])
    assert [s.id for s in store.used_segments("wikipedia")] == [seg.id]
    store.close()


def test_hour_segments_with_max_rows_1000(tutorial_spec, stores, wikipedia_sample):
    spec = copy.deepcopy(tutorial_spec)
    spec["spec"]["dataSchema"]["granularitySpec"]["segmentGranularity"] = "hour"
    spec["spec"]["tuningConfig"] = {"type": "index_parallel", "maxRowsPerSegment": 1000}
    summary = ingest(spec, **stores)
    per_hour = dict(
        _raw(
            wikipedia_sample,
            "SELECT date_trunc('hour', CAST(time AS TIMESTAMP)), count(*) FROM RAW GROUP BY 1",
        )
    )
    expected = {}
    for hour, n in per_hour.items():
        parts = math.ceil(n / 1000)
        expected[hour.strftime("%Y-%m-%dT%H")] = [1000] * (parts - 1) + [n - 1000 * (parts - 1)]
    assert sum(len(v) for v in expected.values()) == 51  # as Druid's compaction tutorial reports
    got: dict[str, list[int]] = {}
    for w in sorted(summary.segments, key=lambda w: (w.segment.interval, w.segment.partition_num)):
        got.setdefault(str(w.segment.interval)[:13], []).append(w.rows)
        count = len(expected[str(w.segment.interval)[:13]])
        shard = w.segment.shard_spec
        assert (shard.type, shard.partitions) == (("none", None) if count == 1 else ("numbered", count))
        assert pq.read_metadata(w.segment.load_spec["path"]).num_rows == w.rows
    assert got == expected
