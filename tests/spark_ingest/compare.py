"""Segments built by two engines, compared file by file and against DuckDB over the raw rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq

from strata.ingestion.summary import IngestionSummary
from strata.storage.segment_file import read_segment_facts


def ordered(summary: IngestionSummary) -> list[Any]:
    return sorted(summary.segments, key=lambda w: (w.segment.interval, w.segment.partition_num))


def _shape(w: Any) -> tuple[Any, ...]:
    s = w.segment
    return (str(s.interval), s.partition_num, s.shard_spec.to_json(), w.rows, s.dimensions, s.metrics)


def assert_same_segments(local: IngestionSummary, spark: IngestionSummary) -> None:
    """Same intervals, partitions, shard specs, rows (in order) and metric values, file by file."""
    assert (local.engine, spark.engine) == ("local", "spark")
    for field in ("rows_read", "rows_ingested", "rows_rolled_up", "rows_thrown_away", "parse_errors"):
        assert getattr(local, field) == getattr(spark, field), field
    a, b = ordered(local), ordered(spark)
    assert [_shape(w) for w in a] == [_shape(w) for w in b]
    for wa, wb in zip(a, b, strict=True):
        ta, tb = pq.read_table(wa.segment.load_spec["path"]), pq.read_table(wb.segment.load_spec["path"])
        assert ta.schema.remove_metadata() == tb.schema.remove_metadata()
        assert ta.equals(tb), wa.segment.id
        fa, fb = (
            read_segment_facts(wa.segment.load_spec["path"]),
            read_segment_facts(wb.segment.load_spec["path"]),
        )
        assert fa.pop("version") == wa.segment.version and fb.pop("version") == wb.segment.version
        assert fa == fb


def files(summary: IngestionSummary) -> list[str]:
    return [w.segment.load_spec["path"] for w in summary.segments]


def query_segments(summary: IngestionSummary, sql: str) -> list[tuple[Any, ...]]:
    """`sql` over every segment file of `summary` as the table SEG."""
    rel = f"read_parquet({files(summary)!r})"
    return duckdb.execute(sql.replace("SEG", rel)).fetchall()


def query_raw(path: Path, sql: str) -> list[tuple[Any, ...]]:
    """`sql` over the raw newline-delimited JSON as the table RAW (the independent oracle)."""
    return duckdb.execute(sql.replace("RAW", f"read_json('{path}', format='newline_delimited')")).fetchall()


def files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []
