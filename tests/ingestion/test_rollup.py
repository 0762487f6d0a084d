"""Rollup at ingestion compared with DuckDB's GROUP BY over the raw rows."""

from __future__ import annotations

import copy

import datasketches as ds
import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from strata.ingestion import ingest


def _rollup_spec(tutorial_spec, segment="hour"):
    spec = copy.deepcopy(tutorial_spec)
    schema = spec["spec"]["dataSchema"]
    schema["dimensionsSpec"] = {"dimensions": ["channel", "namespace", {"name": "isRobot", "type": "string"}]}
    schema["metricsSpec"] = [
        {"type": "count", "name": "count"},
        {"type": "longSum", "name": "added", "fieldName": "added"},
        {"type": "doubleSum", "name": "delta_sum", "fieldName": "delta"},
        {"type": "floatSum", "name": "deleted_f", "fieldName": "deleted"},
        {"type": "longMin", "name": "delta_min", "fieldName": "delta"},
        {"type": "longMax", "name": "delta_max", "fieldName": "delta"},
        {"type": "doubleMin", "name": "added_dmin", "fieldName": "added"},
        {"type": "doubleMax", "name": "added_dmax", "fieldName": "added"},
        {"type": "HLLSketchBuild", "name": "users", "fieldName": "user", "lgK": 12},
    ]
    schema["granularitySpec"].update(
        {"segmentGranularity": segment, "queryGranularity": "minute", "rollup": True}
    )
    return spec


def test_rollup_matches_duckdb_group_by(tutorial_spec, stores, wikipedia_sample):
    summary = ingest(_rollup_spec(tutorial_spec), **stores)
    got = pa.concat_tables(pq.read_table(w.segment.load_spec["path"]) for w in summary.segments)
    assert summary.rows_ingested == got.num_rows
    assert summary.rows_rolled_up == 39_244 - got.num_rows > 0
    raw = f"read_json('{wikipedia_sample}', format='newline_delimited')"
    want = duckdb.execute(f"""
        SELECT epoch_ms(date_trunc('minute', CAST(time AS TIMESTAMP))) AS t, channel, namespace,
               CAST(isRobot AS VARCHAR) AS robot, count(*), sum(added), sum(delta)::DOUBLE, sum(deleted)::FLOAT,
               min(delta), max(delta), min(added)::DOUBLE, max(added)::DOUBLE, count(DISTINCT "user")
        FROM {raw} GROUP BY ALL ORDER BY ALL""").fetchall()
    rows = duckdb.execute("""
        SELECT epoch_ms(__time), channel, namespace, isRobot, count, added, delta_sum, deleted_f,
               delta_min, delta_max, added_dmin, added_dmax, users FROM got ORDER BY ALL""").fetchall()
    assert [r[:12] for r in rows] == [r[:12] for r in want]
    # per-row sketches: small groups are exact in HLL's list mode
    for r, w in zip(rows, want, strict=True):
        assert round(ds.hll_sketch.deserialize(r[12]).get_estimate()) == w[12]


def test_sketches_merge_across_segments(tutorial_spec, stores, wikipedia_sample):
    summary = ingest(_rollup_spec(tutorial_spec, segment="hour"), **stores)
    assert len(summary.segments) == 24
    union = ds.hll_union(12)
    for w in summary.segments:
        for blob in pq.read_table(w.segment.load_spec["path"], columns=["users"]).column(0).to_pylist():
            union.update(ds.hll_sketch.deserialize(blob))
    raw = f"read_json('{wikipedia_sample}', format='newline_delimited')"
    exact = duckdb.execute(f'SELECT count(DISTINCT "user") FROM {raw}').fetchall()[0][0]
    assert abs(union.get_estimate() - exact) / exact < 0.05
